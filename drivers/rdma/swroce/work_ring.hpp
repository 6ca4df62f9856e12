// A fixed-capacity ring of fixed-size entries (WRs, completions): allocated once at queue
// creation, never on the fast path. One producer and one consumer, which may be two threads: an
// application thread posting to a send queue that a service lcore's engine consumes, or reaping a
// CQ the engine fills (progress=service). The producer fills next_slot() and publishes it with
// push(); the consumer reads front()/at() and gives slots back with pop(). On x86 the acquire
// loads and release stores are plain moves: no locked instruction on either side. A ring with
// several consumers (an SRQ shared by queue groups) takes with take_shared() alone, one
// compare-and-swap per entry.
#pragma once

#include <atomic>
#include <bit>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <utility>

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

    // Moved only while no other thread can see it (made at queue creation).
    WorkRing(WorkRing&& other) noexcept { *this = std::move(other); }
    WorkRing& operator=(WorkRing&& other) noexcept {
        slots_ = std::move(other.slots_);
        mask_ = other.mask_;
        head_.store(other.head_.load(std::memory_order_relaxed), std::memory_order_relaxed);
        tail_.store(other.tail_.load(std::memory_order_relaxed), std::memory_order_relaxed);
        return *this;
    }
    WorkRing(const WorkRing&) = delete;
    WorkRing& operator=(const WorkRing&) = delete;
    ~WorkRing() = default;

    [[nodiscard]] std::uint32_t capacity() const noexcept { return mask_ + 1; }
    // The consumer's view (size, empty): what the producer published is visible. The producer's
    // (full): what the consumer gave back may be written again. Each side's own index is relaxed.
    [[nodiscard]] std::uint32_t size() const noexcept {
        return tail_.load(std::memory_order_acquire) - head_.load(std::memory_order_relaxed);
    }
    [[nodiscard]] bool empty() const noexcept { return size() == 0; }
    // For any thread, beside any consumers: the head read first, so a take between the two loads
    // cannot make the difference wrap (a post between them may count one more).
    [[nodiscard]] std::uint32_t snapshot_size() const noexcept {
        const std::uint32_t head = head_.load(std::memory_order_acquire);
        return tail_.load(std::memory_order_acquire) - head;
    }
    [[nodiscard]] bool full() const noexcept {
        return tail_.load(std::memory_order_relaxed) - head_.load(std::memory_order_acquire) ==
               capacity();
    }

    // The caller checked !full() (next_slot) or !empty() (front, pop) or the offset (at): a
    // caller that relies on luck instead is caught by the debug_fastpath build, which stops the
    // process rather than let an empty ring be popped into garbage.
    [[nodiscard]] T& next_slot() noexcept {
        if constexpr (debug_checks) {
            stop_if(full());
        }
        return slots_[tail_.load(std::memory_order_relaxed) & mask_];
    }
    // Publishes the slot next_slot() returned, written in full.
    void push() noexcept {
        tail_.store(tail_.load(std::memory_order_relaxed) + 1, std::memory_order_release);
    }
    [[nodiscard]] T& front() noexcept {
        if constexpr (debug_checks) {
            stop_if(empty());
        }
        return slots_[head_.load(std::memory_order_relaxed) & mask_];
    }
    [[nodiscard]] T& at(std::uint32_t offset) noexcept {
        if constexpr (debug_checks) {
            stop_if(offset >= size());
        }
        return slots_[(head_.load(std::memory_order_relaxed) + offset) & mask_];
    }
    void pop() noexcept {
        if constexpr (debug_checks) {
            stop_if(empty());
        }
        head_.store(head_.load(std::memory_order_relaxed) + 1, std::memory_order_release);
    }
    // For a ring several consumers take from (an SRQ shared by queue groups): `read` copies the
    // head out and a compare-and-swap claims it, so each entry goes to one consumer; false when
    // the ring is empty. The producer rewrites a slot only once the head has passed it, and then
    // the claim fails and the copy, perhaps torn, is discarded: read into a scratch, use it after.
    template <typename Read>
    bool take_shared(Read&& read) noexcept {
        std::uint32_t head = head_.load(std::memory_order_acquire);
        while (tail_.load(std::memory_order_acquire) != head) {
            read(std::as_const(slots_[head & mask_]));
            if (head_.compare_exchange_weak(head, head + 1, std::memory_order_acq_rel,
                                            std::memory_order_acquire)) {
                return true;
            }
        }
        return false;
    }
    // Consumer side: drops everything published.
    void clear() noexcept {
        head_.store(tail_.load(std::memory_order_acquire), std::memory_order_release);
    }
    // Slot `index` of the storage, whatever the ring holds: for setting slots up at creation.
    [[nodiscard]] T& slot(std::uint32_t index) noexcept {
        if constexpr (debug_checks) {
            stop_if(index >= capacity());
        }
        return slots_[index];
    }

private:
    // Only debug_fastpath builds evaluate the checks: their loads are atomic, which the compiler
    // would keep even with the result unused.
    static constexpr bool debug_checks = PRDMA_DEBUG_FASTPATH != 0;
    static void stop_if(bool broken) noexcept {
        if (broken) {
            std::abort();
        }
    }

    std::unique_ptr<T[]> slots_;
    std::uint32_t mask_ = 0;
    std::atomic<std::uint32_t> head_{0}; // free-running; the difference is the size
    std::atomic<std::uint32_t> tail_{0};
};

} // namespace prdma::swroce
