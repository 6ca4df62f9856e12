// Request packets that arrived past a gap in the PSN sequence, kept (issue 30) so that when the
// missing one comes (it was reordered, or it is resent) they run in order behind it instead of
// being dropped and resent. IBTA's go-back-N responder drops them and NAKs at once; keeping them
// changes only when the NAK goes (see ENGINE.md, "Packets past a gap"), never what is executed
// or in which order, so any requester (rxe, a NIC, swroce) sees a conforming responder.
#pragma once

#include <array>
#include <cstdint>

#include <prdma/roce/psn.hpp>

struct rte_mbuf;

namespace prdma::swroce {

class ReorderBuffer {
public:
    // PSNs past the expected one a packet may be kept for: one slot each, so the slot of a PSN
    // within reach is never another's.
    static constexpr std::uint32_t reach = 16;

    ReorderBuffer() = default;
    // It owns mbufs: never copied; a move (a reset's ResponderState{}) leaves the source empty,
    // and its target must have been emptied (release_kept) first.
    ReorderBuffer(const ReorderBuffer&) = delete;
    ReorderBuffer& operator=(const ReorderBuffer&) = delete;
    ReorderBuffer(ReorderBuffer&& other) noexcept { take_over(other); }
    ReorderBuffer& operator=(ReorderBuffer&& other) noexcept {
        take_over(other);
        return *this;
    }
    ~ReorderBuffer() = default;

    [[nodiscard]] std::uint32_t count() const noexcept { return count_; }
    [[nodiscard]] bool empty() const noexcept { return count_ == 0; }
    // The highest PSN kept (valid while not empty).
    [[nodiscard]] std::uint32_t highest() const noexcept { return highest_; }

    // Keeps `frame`, the packet with `psn`. False when a packet with that PSN is kept already (the
    // requester sent it again): the caller keeps its own. A slot held by a PSN the responder has
    // moved past is handed back in `*stale` to be freed.
    bool keep(std::uint32_t psn, rte_mbuf* frame, rte_mbuf** stale) noexcept {
        Slot& slot = slots_[psn % reach];
        *stale = nullptr;
        if (slot.frame != nullptr) {
            if (slot.psn == psn) {
                return false;
            }
            *stale = slot.frame;
            --count_;
        }
        slot = {frame, psn};
        if (count_++ == 0 || roce::psn_after(psn, highest_)) {
            highest_ = psn;
        }
        return true;
    }

    // The packet kept for `psn`, taken out; nullptr when there is none.
    rte_mbuf* take(std::uint32_t psn) noexcept {
        Slot& slot = slots_[psn % reach];
        if (slot.frame == nullptr || slot.psn != psn) {
            return nullptr;
        }
        rte_mbuf* frame = slot.frame;
        slot.frame = nullptr;
        --count_;
        return frame;
    }

    // Every packet kept behind `expected` (the responder moved past it another way: a READ's span
    // over its PSN), or every packet when `all`, taken out and given to `release`.
    template <typename Release>
    void drop_behind(std::uint32_t expected, bool all, Release&& release) noexcept {
        for (Slot& slot : slots_) {
            if (slot.frame != nullptr && (all || roce::psn_diff(slot.psn, expected) < 0)) {
                release(slot.frame);
                slot.frame = nullptr;
                --count_;
            }
        }
    }

    // When the gap the kept packets wait behind opened (TSC): the NAK for it waits a little for
    // a packet that was only reordered.
    std::uint64_t gap_since = 0;

private:
    struct Slot {
        rte_mbuf* frame = nullptr;
        std::uint32_t psn = 0;
    };

    void take_over(ReorderBuffer& other) noexcept {
        if (this == &other) {
            return;
        }
        count_ = other.count_;
        highest_ = other.highest_;
        gap_since = other.gap_since;
        slots_ = other.slots_;
        other.count_ = 0;
        other.slots_ = {};
    }

    // Read on every progress (serve, has_work): beside gap_since, ahead of the slots.
    std::uint32_t count_ = 0;
    std::uint32_t highest_ = 0;
    std::array<Slot, reach> slots_{};
};

} // namespace prdma::swroce
