// A fixed-capacity single-owner ring of fixed-size entries (WRs, completions): allocated once at
// queue creation, never on the fast path, no atomics (one lcore owns the queue group).
#pragma once

#include <bit>
#include <cstdint>
#include <cstdlib>
#include <memory>

#include <prdma/build_config.hpp>
#include <prdma/compiler.hpp>

namespace prdma::swroce {

template <typename T>
class WorkRing {
public:
    WorkRing() = default;
    explicit WorkRing(std::uint32_t min_capacity)
        : slots_(std::make_unique<T[]>(std::bit_ceil(std::max<std::uint32_t>(min_capacity, 1)))),
          mask_(std::bit_ceil(std::max<std::uint32_t>(min_capacity, 1)) - 1) {}

    [[nodiscard]] std::uint32_t capacity() const noexcept { return mask_ + 1; }
    [[nodiscard]] std::uint32_t size() const noexcept { return tail_ - head_; }
    [[nodiscard]] bool empty() const noexcept { return head_ == tail_; }
    [[nodiscard]] bool full() const noexcept { return size() == capacity(); }

    // The caller checked !full() (push) or !empty() (front, pop) or the offset (at): a caller
    // that relies on luck instead is caught by the debug_fastpath build, which stops the process
    // rather than let an empty ring be popped into garbage.
    T& push_slot() noexcept {
        check(!full());
        return slots_[tail_++ & mask_];
    }
    [[nodiscard]] T& front() noexcept {
        check(!empty());
        return slots_[head_ & mask_];
    }
    [[nodiscard]] T& at(std::uint32_t offset) noexcept {
        check(offset < size());
        return slots_[(head_ + offset) & mask_];
    }
    void pop() noexcept {
        check(!empty());
        ++head_;
    }
    void clear() noexcept { head_ = tail_; }
    // Slot `index` of the storage, whatever the ring holds: for setting slots up at creation.
    [[nodiscard]] T& slot(std::uint32_t index) noexcept {
        check(index < capacity());
        return slots_[index];
    }

private:
    static void check([[maybe_unused]] bool holds) noexcept {
        if (PRDMA_FASTPATH_CHECK(holds)) {
            std::abort();
        }
    }

    std::unique_ptr<T[]> slots_;
    std::uint32_t mask_ = 0;
    std::uint32_t head_ = 0; // free-running; the difference is the size
    std::uint32_t tail_ = 0;
};

} // namespace prdma::swroce
