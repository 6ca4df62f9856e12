// Request packets that arrived past a gap in the PSN sequence, kept (issue 30) so that when the
// missing one comes (it was reordered, or it is resent) they run in order behind it instead of
// being dropped and resent. IBTA's go-back-N responder drops them and NAKs at once; keeping them
// changes only when the NAK goes (see ENGINE.md, "Packets past a gap"), never what is executed
// or in which order, so any requester (rxe, a NIC, swroce) sees a conforming responder.
#pragma once

#include <array>
#include <cstdint>
#include <span>

#include <prdma/roce/psn.hpp>

struct rte_mbuf;

namespace prdma::swroce {

class ReorderBuffer {
public:
    struct Slot {
        rte_mbuf* frame = nullptr;
        std::uint32_t psn = 0;
        std::uint32_t span = 1; // PSNs it takes: a READ's responses', one for anything else
    };
    // PSNs past the expected one a packet may be kept for: one slot each, so the slot of a PSN
    // within reach is never another's. A go-back-N peer's reorderings are short; a selective-
    // repeat peer's losses are kept for a whole send window (SendWindow::max_packets), in room
    // the QP gets when it is told its peer repeats selectively (lend).
    static constexpr std::uint32_t default_reach = 16;
    static constexpr std::uint32_t selective_repeat_reach = 256;

    ReorderBuffer() = default;
    // It owns mbufs: never copied; a move (a reset's ResponderState{}) leaves the source empty,
    // and its target must have been emptied (release_kept) first. Lent room does not move (the
    // target is back in its own), so a source that was lent room must be empty.
    ReorderBuffer(const ReorderBuffer&) = delete;
    ReorderBuffer& operator=(const ReorderBuffer&) = delete;
    ReorderBuffer(ReorderBuffer&& other) noexcept { take_over(other); }
    ReorderBuffer& operator=(ReorderBuffer&& other) noexcept {
        take_over(other);
        return *this;
    }
    ~ReorderBuffer() = default;

    [[nodiscard]] std::uint32_t reach() const noexcept { return mask_ + 1; }
    [[nodiscard]] std::uint32_t count() const noexcept { return count_; }
    [[nodiscard]] bool empty() const noexcept { return count_ == 0; }
    // The highest PSN kept (valid while not empty).
    [[nodiscard]] std::uint32_t highest() const noexcept { return highest_; }

    // Keeps packets in `room` (selective_repeat_reach slots, outliving the buffer's use of it),
    // or in its own default_reach slots again when it is empty. Only while nothing is kept.
    void lend(std::span<Slot> room) noexcept {
        slots_ = room.empty() ? own_.data() : room.data();
        mask_ = (room.empty() ? default_reach : static_cast<std::uint32_t>(room.size())) - 1;
    }

    // Keeps `frame`, the packet with `psn`, taking `span` PSNs. False when a packet with that PSN
    // is kept already (the requester sent it again): the caller keeps its own. A slot held by a
    // PSN the responder has moved past is handed back in `*stale` to be freed.
    bool keep(std::uint32_t psn, std::uint32_t span, rte_mbuf* frame, rte_mbuf** stale) noexcept {
        Slot& slot = slots_[psn & mask_];
        *stale = nullptr;
        if (slot.frame != nullptr) {
            if (slot.psn == psn) {
                return false;
            }
            *stale = slot.frame;
            --count_;
        }
        slot = {frame, psn, span};
        if (count_++ == 0 || roce::psn_after(psn, highest_)) {
            highest_ = psn;
        }
        return true;
    }

    // The PSNs the packet kept for `psn` takes (a READ's span), or 0 when none is kept.
    [[nodiscard]] std::uint32_t span_at(std::uint32_t psn) const noexcept {
        const Slot& slot = slots_[psn & mask_];
        return slot.frame != nullptr && slot.psn == psn ? slot.span : 0;
    }

    // The packet kept for `psn`, taken out; nullptr when there is none.
    rte_mbuf* take(std::uint32_t psn) noexcept {
        Slot& slot = slots_[psn & mask_];
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
        for (std::uint32_t i = 0; count_ != 0 && i <= mask_; ++i) {
            Slot& slot = slots_[i];
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
    // A selective-repeat peer's: when the first missing PSN was last NAKed (TSC), to NAK it again
    // while it stays missing, and how far missing PSNs were NAKed (each once, nak_missing).
    std::uint64_t nak_tsc = 0;
    std::uint32_t naked_to = 0;
    std::uint32_t renaks = 0; // rounds of NAKs again with the first missing PSN still missing
    // Missing PSNs below this one are at least a reordering delay old (NAKed all at once when the
    // gap is overdue), and how many missing PSNs in a row end where naked_to stands.
    std::uint32_t aged_to = 0;
    std::uint32_t missing_run = 0;

private:
    void take_over(ReorderBuffer& other) noexcept {
        if (this == &other) {
            return;
        }
        count_ = other.count_;
        highest_ = other.highest_;
        gap_since = other.gap_since;
        nak_tsc = other.nak_tsc;
        naked_to = other.naked_to;
        renaks = other.renaks;
        aged_to = other.aged_to;
        missing_run = other.missing_run;
        own_ = other.own_;
        slots_ = own_.data();
        mask_ = default_reach - 1;
        other.count_ = 0;
        other.own_ = {};
    }

    // Read on every progress (serve, has_work): beside gap_since, ahead of the slots.
    std::uint32_t count_ = 0;
    std::uint32_t highest_ = 0;
    std::uint32_t mask_ = default_reach - 1;
    std::array<Slot, default_reach> own_{};
    Slot* slots_ = own_.data();
};

} // namespace prdma::swroce
