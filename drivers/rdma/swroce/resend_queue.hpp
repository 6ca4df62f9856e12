// The PSNs a selective-repeat peer NAKed (each names one packet missing there, the rest of the
// window kept): the requester resends each alone, ahead of anything new, oldest first. A PSN is
// queued once however often it is NAKed before it goes; when the queue is full a NAK is dropped,
// and the peer NAKs that PSN again if it stays missing.
#pragma once

#include <array>
#include <cstdint>

namespace prdma::swroce {

class ResendQueue {
public:
    // About the losses one window (SendWindow) can suffer between two progresses.
    static constexpr std::uint32_t capacity = 32;

    [[nodiscard]] bool empty() const noexcept { return count_ == 0; }
    [[nodiscard]] std::uint32_t size() const noexcept { return count_; }

    // False when it is queued already or there is no room.
    bool push(std::uint32_t psn) noexcept {
        for (std::uint32_t i = 0; i < count_; ++i) {
            if (psns_[(head_ + i) % capacity] == psn) {
                return false;
            }
        }
        if (count_ == capacity) {
            return false;
        }
        psns_[(head_ + count_++) % capacity] = psn;
        return true;
    }
    [[nodiscard]] std::uint32_t front() const noexcept { return psns_[head_]; }
    void pop() noexcept {
        head_ = (head_ + 1) % capacity;
        --count_;
    }
    void clear() noexcept { count_ = 0; }

private:
    std::array<std::uint32_t, capacity> psns_{};
    std::uint32_t head_ = 0;
    std::uint32_t count_ = 0;
};

} // namespace prdma::swroce
