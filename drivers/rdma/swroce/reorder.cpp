// Requests that arrive past a gap (issue 30). IBTA's responder drops them and NAKs the gap at
// once, so one packet overtaken on the way costs the requester a go-back-N pass over everything
// it sent since. Here they wait in the QP's ReorderBuffer: the packet that fills the gap runs them
// in order behind it, and the NAK goes only when the gap is more than a reordering (enough packets
// wait behind it, or it stays open past a short delay). Once the NAK is on its way the requester
// goes back and resends all of it, so what was kept is let go then, and nothing more is kept until
// the gap fills.
//
// A selective-repeat peer (QpAttr::selective_repeat, agreed out of band) resends only what is
// NAKed, so a NAK lets nothing kept go: every PSN missing behind what was kept is NAKed by itself,
// as soon as a few packets passed it, all still missing again while the first stays missing (and
// the gap given up after rounds of that), and the filled gap is acknowledged at once. Each NAK is
// IBTA's, of the first missing PSN, and names the missing one in its MSN: a requester that does not
// repeat selectively goes back to the first, as IBTA says (ENGINE.md, "Selective repeat").
#include <algorithm>

#include <rte_mbuf.h>

#include "engine.hpp"

namespace prdma::swroce {

namespace {

// Kept packets that make a gap a loss, not a reordering: about twice the depth links reorder by
// (swroce's own reorder devarg passes 3 frames by default).
constexpr std::uint32_t nak_after_kept = 8;
// A selective-repeat peer's missing PSN is taken for lost once a PSN this far past it came: one
// more than that reordering, as TCP's three duplicate ACKs.
constexpr std::uint32_t selective_nak_after_later = 4;
// How long a gap may stay open before it is NAKed (microseconds), once the port's queue is empty
// (a late packet is not waiting there), and at the latest whatever the queue holds: a packet not
// in by then is taken for lost.
constexpr std::uint64_t gap_nak_delay_us = 20;
constexpr std::uint64_t gap_nak_limit_us = 4 * gap_nak_delay_us;
// How long a selective-repeat peer's resends may take before every PSN still missing is NAKed
// again (a NAK or a resend was lost too; the requester's own timers take a millisecond), and how
// many such rounds with the first missing one still missing make the gap given up: the peer
// stopped (its QP failed, its process went), so what was kept goes back to the pool.
constexpr std::uint64_t gap_renak_us = 2 * gap_nak_delay_us;
constexpr std::uint32_t renaks_before_giving_up = 8;
// Missing PSNs in a row NAKed at once: a longer run is a lost READ request's span (its responses'
// PSNs, which never come as requests) more often than a burst of losses, whose rest is NAKed in
// the next round.
constexpr std::uint32_t nak_run_limit = 4;

bool selective(const SwroceQp& qp) noexcept {
    return qp.attr->selective_repeat;
}

void release(SwroceQp& qp, rte_mbuf* mbuf) noexcept {
    rte_pktmbuf_free(mbuf);
    --qp.device->groups[qp.queue_group]->kept_frames;
}

// The gap is a loss: its NAK, and what was kept behind it let go (the requester resends it all).
void give_up_gap(SwroceQp& qp) noexcept {
    nak_kept_gap(qp);
    release_kept(qp);
}

// The PSNs a request takes: a READ's, one per response (IBTA 9.7.4.1.3; no further than a window,
// whatever its length says), one for anything else. The PSNs inside a kept READ's span are not
// missing: they never come as requests.
std::uint32_t psn_span(const SwroceQp& qp, const roce::ParsedFrame& frame) noexcept {
    if (frame.info->operation != roce::Operation::rdma_read_request) {
        return 1;
    }
    const std::uint64_t mtu = qp.mtu();
    const std::uint64_t packets = (std::uint64_t{frame.reth.dma_length} + mtu - 1) / mtu;
    return static_cast<std::uint32_t>(
        std::clamp<std::uint64_t>(packets, 1, ReorderBuffer::selective_repeat_reach));
}

// A selective-repeat peer's NAK for `missing` alone: IBTA's sequence-error NAK of the first
// missing PSN (everything before it was taken), naming `missing` in its MSN field (ENGINE.md,
// "Selective repeat"); the PSN before the first missing one asks it to go back N. False when the
// batch has no room or no mbuf.
bool nak_one(SwroceQp& qp, TxBatch& tx, std::uint32_t missing) noexcept {
    const roce::Aeth aeth{roce::nak_syndrome(roce::NakCode::psn_sequence_error), missing};
    if (tx.full() || !emit_ack(qp, tx, qp.resp.expected_psn, aeth)) {
        return false;
    }
    count_event(qp, &QpCounters::naks_sent, &SwroceCounters::naks_sent);
    return true;
}

// The later of two PSNs within a window of each other.
std::uint32_t later(std::uint32_t a, std::uint32_t b) noexcept {
    return roce::psn_after(a, b) ? a : b;
}

// The gap did not fill through rounds of NAKs: what was kept goes back to the pool, and the NAK
// asks the requester to go back N, as IBTA's responder would have at once.
void give_up_selective(SwroceQp& qp, TxBatch& tx) noexcept {
    if (nak_one(qp, tx, roce::psn_sub(qp.resp.expected_psn, 1))) {
        release_kept(qp);
    }
}

} // namespace

bool keep_past_gap(SwroceDevice& dev, unsigned group, SwroceQp& qp, const roce::ParsedFrame& frame,
                   rte_mbuf* mbuf, std::uint64_t now) noexcept {
    QueueGroupState& state = *dev.groups[group];
    ResponderState& resp = qp.resp;
    const std::int32_t ahead = roce::psn_diff(frame.bth.psn, resp.expected_psn);
    if ((resp.nak_sent && !selective(qp)) || ahead <= 0 ||
        static_cast<std::uint32_t>(ahead) > resp.kept.reach() ||
        state.kept_frames >= SwrocePort::mbufs_kept_past_gaps) {
        return false;
    }
    rte_mbuf* stale = nullptr;
    if (!resp.kept.keep(frame.bth.psn, psn_span(qp, frame), mbuf, &stale)) {
        return false; // sent again: the requester went back, or probes
    }
    if (stale != nullptr) {
        release(qp, stale);
    }
    ++state.kept_frames;
    ++state.counters.kept_past_gap;
    if (resp.kept.count() == 1) {
        resp.kept.gap_since = now;
        resp.kept.aged_to = roce::psn_next(frame.bth.psn);
        resp.kept.naked_to = resp.expected_psn;
        resp.kept.renaks = 0;
    }
    if (resp.kept.count() >= nak_after_kept && !selective(qp)) {
        give_up_gap(qp); // kept, and let go with the rest: the caller must not free it
    }
    return true;
}

void run_kept(SwroceDevice& dev, unsigned group, SwroceQp& qp, roce::ParsedFrame& frame,
              std::uint32_t expected_before, std::uint64_t now) noexcept {
    ResponderState& resp = qp.resp;
    if (resp.nak_sent && !selective(qp)) {
        release_kept(qp); // a packet that could not be kept was NAKed: the requester goes back
        return;
    }
    if (resp.expected_psn == expected_before) {
        return; // the gap is still open
    }
    // Checked when they arrived: parsed again for their fields only.
    roce::ParseOptions options;
    options.verify_icrc = false;
    options.verify_ipv4_checksum = false;
    options.transport_fields_only = true;
    while (!resp.kept.empty()) {
        rte_mbuf* mbuf = resp.kept.take(resp.expected_psn);
        if (mbuf == nullptr) {
            break;
        }
        --dev.groups[group]->kept_frames;
        const std::span<const std::uint8_t> bytes(rte_pktmbuf_mtod(mbuf, const std::uint8_t*),
                                                  rte_pktmbuf_data_len(mbuf));
        if (roce::parse_roce_frame(bytes, frame, options) == roce::ParseError::ok) {
            respond(qp, frame); // an RNR or error NAK lets the rest go (receiver_not_ready, ERR)
        }
        rte_pktmbuf_free(mbuf);
    }
    // A READ's span can step over kept PSNs; what is left waits behind a new gap.
    resp.kept.drop_behind(resp.expected_psn, false, [&](rte_mbuf* m) { release(qp, m); });
    if (!resp.kept.empty()) {
        resp.kept.gap_since = now;
        resp.kept.aged_to = roce::psn_next(resp.kept.highest());
        resp.kept.nak_tsc = now; // the new first missing PSN was NAKed at most just now
        resp.kept.renaks = 0;
    }
    if (selective(qp)) {
        ack_taken(qp); // the requester's window moves past what was kept, AckReq or not
    }
}

void nak_overdue_gap(SwroceQp& qp, std::uint64_t now) noexcept {
    const SwroceDevice& dev = *qp.device;
    const std::uint64_t age = now - qp.resp.kept.gap_since;
    const std::uint64_t cycles_per_us = dev.tsc_hz / 1000000;
    const bool drained = dev.groups[qp.queue_group]->rx_drained;
    if (age >= cycles_per_us * (drained ? gap_nak_delay_us : gap_nak_limit_us)) {
        give_up_gap(qp);
    }
}

void nak_missing(SwroceQp& qp, TxBatch& tx, std::uint64_t now) noexcept {
    ResponderState& resp = qp.resp;
    ReorderBuffer& kept = resp.kept;
    const std::uint64_t cycles_per_us = qp.device->tsc_hz / 1000000;
    // Missing with a PSN four past it kept ...
    std::uint32_t end = roce::psn_sub(kept.highest(), selective_nak_after_later - 1);
    if (roce::psn_diff(kept.naked_to, resp.expected_psn) <= 0) {
        kept.naked_to = resp.expected_psn; // nothing NAKed past the first missing PSN yet
        kept.missing_run = 0;
    } else if (now - kept.nak_tsc >= cycles_per_us * gap_renak_us) {
        if (++kept.renaks > renaks_before_giving_up) {
            give_up_selective(qp, tx);
            return;
        }
        // ... or NAKed before, and NAKs or resends were lost: all of those again ...
        end = later(end, kept.naked_to);
        kept.naked_to = resp.expected_psn;
        kept.missing_run = 0;
        kept.nak_tsc = now;
    }
    // ... or missing a reordering delay since the gap or the last such pass.
    const bool drained = qp.device->groups[qp.queue_group]->rx_drained;
    const bool overdue =
        now - kept.gap_since >= cycles_per_us * (drained ? gap_nak_delay_us : gap_nak_limit_us);
    end = overdue ? later(end, kept.aged_to) : end;
    while (roce::psn_after(end, kept.naked_to)) {
        const std::uint32_t psn = kept.naked_to;
        const std::uint32_t span = kept.span_at(psn);
        kept.missing_run = span == 0 ? kept.missing_run + 1 : 0;
        if (kept.missing_run != 0 && kept.missing_run <= nak_run_limit) {
            if (!nak_one(qp, tx, psn)) {
                --kept.missing_run;
                return; // at the next progress
            }
            kept.nak_tsc = psn == resp.expected_psn ? now : kept.nak_tsc;
        }
        kept.naked_to = roce::psn_add(psn, std::max(span, 1U));
    }
    if (overdue) {
        kept.gap_since = now; // holes that open from now on wait for their own delay
        kept.aged_to = roce::psn_next(kept.highest());
    }
}

void release_kept(SwroceQp& qp) noexcept {
    if (qp.resp.kept.empty()) {
        return; // every RNR, flush and destroy comes here
    }
    qp.resp.kept.drop_behind(0, true, [&](rte_mbuf* m) { release(qp, m); });
}

} // namespace prdma::swroce
