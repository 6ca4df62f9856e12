// A queue group's progress, run to completion by the lcore that polls it: the control requests
// waiting for it, an rx burst through the roles, then each QP's ACKs, READ responses, timers and
// requester into one tx batch, and the batch to the port.
#include <algorithm>

#include <rte_cycles.h>
#include <rte_mbuf.h>
#include <rte_prefetch.h>
#include <rte_ring.h>

#include "engine.hpp"

namespace prdma::swroce {

namespace {

// The rx burst, and the frames other groups received for our QPs (and, on group 0, possible ARP or
// ND). The group's parsed-frame scratch serves every frame, the next frame's headers are fetched
// while this one is handled, and what is done with goes back to the pool in one call.
void receive(SwroceDevice& dev, unsigned group, RxBurst& burst, std::uint64_t now) noexcept {
    QueueGroupState& state = *dev.groups[group];
    std::uint16_t received = burst.count;
    if (PRDMA_UNLIKELY(state.rx_faults.active())) {
        received = state.rx_faults.apply(burst.mbufs.data(), received, burst.mbufs.size(), now,
                                         dev.port.mempool(group), state.counters.rx_faults);
    }
    std::array<rte_mbuf*, std::size_t{2} * burst_size> done; // only [0, freed) is read
    unsigned freed = 0;
    roce::ParsedFrame& frame = state.rx_frame;
    for (std::uint16_t i = 0; i < received; ++i) {
        if (i + 1 < received) {
            rte_prefetch0(rte_pktmbuf_mtod(burst.mbufs[i + 1], const void*));
        }
        if (!handle_frame(dev, group, burst.mbufs[i], now, false, frame)) {
            done[freed++] = burst.mbufs[i];
        }
    }
    // Only another group hands frames over: a device with one group skips its ring.
    const unsigned handed =
        dev.groups.size() == 1
            ? 0
            : rte_ring_dequeue_burst(state.handover, reinterpret_cast<void**>(burst.mbufs.data()),
                                     burst_size, nullptr);
    for (unsigned i = 0; i < handed; ++i) {
        const std::span<const std::uint8_t> bytes(
            rte_pktmbuf_mtod(burst.mbufs[i], const std::uint8_t*),
            rte_pktmbuf_data_len(burst.mbufs[i]));
        const bool neighbour =
            group == 0 && is_neighbour_frame(bytes) &&
            handle_neighbour_frame(dev, bytes, now, state.counters, burst.mbufs[i]);
        // handle_frame keeps the mbuf only to hand it on again or past a gap, neither of which it
        // does with a handed-over frame.
        if (neighbour || !handle_frame(dev, group, burst.mbufs[i], now, true, frame)) {
            done[freed++] = burst.mbufs[i];
        }
    }
    if (freed == 1) {
        rte_pktmbuf_free(done[0]); // the latency case: one frame, no bulk bookkeeping
    } else {
        rte_pktmbuf_free_bulk(done.data(), freed);
    }
}

// An empty poll (nothing received, nothing waiting to go, no fault devargs) reads no clock: an
// rdtsc costs ~12 ns on a VM, as much as the poll itself. Timers are looked at on every
// `idle_timer_polls`th empty poll, microseconds apart, against deadlines of milliseconds.
constexpr std::uint32_t idle_timer_polls = 16;

bool nothing_to_do(SwroceDevice& dev, unsigned group, const RxBurst& burst) noexcept {
    QueueGroupState& state = *dev.groups[group];
    // A resolution in flight keeps the resolver's timers on the clock at every poll: the control
    // path may be the only one polling, and rarely.
    if (burst.count != 0 || state.tx_backlog_count != 0 || state.work_left ||
        state.neighbour_due != no_neighbour_due || state.rx_faults.active() ||
        state.tx_faults.active() ||
        (dev.groups.size() > 1 && rte_ring_count(state.handover) != 0)) {
        state.idle_polls = 0;
        return false;
    }
    return ++state.idle_polls % idle_timer_polls != 0;
}

// One QP's frames into the batch: READ responses and atomic ACKs, the ACK or NAK it owes, then
// its requester. False when the port refused frames and nothing more may be made this progress.
bool serve(SwroceDevice& dev, unsigned group, SwroceQp& qp, TxBatch& tx,
           std::uint64_t now) noexcept {
    if (qp.resp.responses_pending && qp.has_peer_mac() && qp.state() != rdma::QpState::err) {
        send_responses(qp, tx);
        if (tx.full()) {
            if (!transmit(dev, group, tx)) {
                return false;
            }
            send_responses(qp, tx);
        }
    }
    if (PRDMA_UNLIKELY(!qp.resp.kept.empty())) {
        if (!qp.attr->selective_repeat) {
            nak_overdue_gap(qp, now);
        } else if (qp.has_peer_mac() && !qp.resp.responses_pending) {
            // Behind the responses still to go, as the owed ACK below: a NAK acknowledges every
            // PSN before its own.
            nak_missing(qp, tx, now);
        }
    }
    // The owed ACK goes behind every response still to go: it covers each PSN before its own, and
    // responses leave in PSN order (IBTA 9.7.5.1). Ahead of an atomic ACK or a READ response of an
    // earlier request, it tells the requester that answer was lost, and it asks again.
    const bool ack_may_go = !qp.resp.responses_pending || qp.state() == rdma::QpState::err;
    if (qp.resp.ack_pending && ack_may_go && qp.has_peer_mac()) {
        if (tx.full() && !transmit(dev, group, tx)) {
            return false;
        }
        send_ack(qp, tx);
        if (!qp.resp.ack_pending && qp.resp.error_after_nak) {
            // The NAK is in the batch; the responder's error takes the QP to ERR, flushing both
            // queues (the requester learns of it from the NAK).
            qp.resp.error_after_nak = false;
            fail_responder(qp);
        }
    }
    run_requester(qp, tx, now);
    return !tx.full() || transmit(dev, group, tx);
}

// Whether a QP may have frames to make at the next progress (a requester the window holds back
// counts: serving it is how it finds out).
bool has_work(const SwroceQp& qp) noexcept {
    return qp.resp.ack_pending || qp.resp.responses_pending || qp.req.repairs_pending ||
           qp.req.send_offset < qp.send_queue.size() || !qp.resp.kept.empty();
}

// A progress serves the active QPs; this one in `full_scan_interval` serves every QP of the
// group and runs their timers (microseconds apart, against deadlines of milliseconds), and puts
// back on the list whatever a timer or a control request gave work to.
constexpr std::uint32_t full_scan_interval = 16;

// A full burst may have left answers in the port's queue (a thread that posted for a while without
// polling finds a ring of ACKs): timers judged then would time out QPs whose ACKs are already
// here. The full scan waits for a burst that is not full, for at most a ring's worth of frames.
constexpr std::uint32_t max_scans_deferred = 1024 / rx_burst_size;

bool full_scan_due(QueueGroupState& state, std::uint16_t received) noexcept {
    if ((state.progresses + 1) % full_scan_interval != 0) {
        ++state.progresses;
        return false;
    }
    if (received == rx_burst_size && state.scans_deferred < max_scans_deferred) {
        ++state.scans_deferred; // the next progress is due again
        return false;
    }
    ++state.progresses;
    state.scans_deferred = 0;
    return true;
}

// Every QP's timers and frames, from the QP the port stopped the last full scan at, round the
// group, so that with more QPs than the port takes at once each still gets its turn.
bool serve_every_qp(SwroceDevice& dev, unsigned group, TxBatch& tx, std::uint64_t now,
                    bool can_send) noexcept {
    QueueGroupState& state = *dev.groups[group];
    const std::uint32_t first = dev.first_slot(group);
    const std::uint32_t count = state.qp_slot_end > first ? state.qp_slot_end - first : 0;
    const std::uint32_t start = state.serve_from < count ? state.serve_from : 0;
    for (std::uint32_t i = 0; i < count; ++i) {
        const std::uint32_t at = start + i < count ? start + i : start + i - count;
        SwroceQp* qp = dev.qps[first + at].get();
        if (qp == nullptr || qp->queue_group != group || qp->destroying) {
            continue;
        }
        if (qp->state() == rdma::QpState::rts) {
            check_timer(*qp, now);
        } else if (qp->state() == rdma::QpState::err &&
                   (!qp->send_queue.empty() || !qp->receive_queue.empty() ||
                    qp->resp.holds_receive)) {
            // Posted by another thread as the QP went to error (progress=service): flushed.
            flush_queues(*qp);
        }
        if (can_send && !serve(dev, group, *qp, tx, now)) {
            can_send = false;
            state.serve_from = at;
        }
        if (has_work(*qp)) {
            activate(state, *qp);
        }
    }
    return can_send;
}

// The active QPs' frames; those left with nothing to do leave the list. When the port refuses
// frames, the QP it stopped at goes first next time.
bool serve_active(SwroceDevice& dev, unsigned group, TxBatch& tx, std::uint64_t now,
                  bool can_send) noexcept {
    QueueGroupState& state = *dev.groups[group];
    std::size_t kept = 0;
    std::size_t stopped_at = 0;
    for (SwroceQp* qp : state.active) {
        if (can_send && !qp->destroying && !serve(dev, group, *qp, tx, now)) {
            can_send = false;
            stopped_at = kept;
        }
        if (!qp->destroying && has_work(*qp)) {
            state.active[kept++] = qp;
        } else {
            qp->active = false;
        }
    }
    state.active.resize(kept);
    if (!can_send) {
        std::rotate(state.active.begin(),
                    state.active.begin() + static_cast<std::ptrdiff_t>(stopped_at),
                    state.active.end());
    }
    return can_send;
}

} // namespace

void deactivate(QueueGroupState& group, SwroceQp& qp) noexcept {
    if (qp.active) {
        std::erase(group.active, &qp);
        qp.active = false;
    }
}

std::uint16_t progress_group(SwroceDevice& dev, unsigned group) noexcept {
    // Control requests first (a QP created for this group takes part in this very burst; one being
    // destroyed is gone before the scan).
    run_group_requests(dev, group);
    // The QPs other threads posted to since the last progress (a service or a poller drives us).
    const unsigned rung =
        rte_ring_empty(dev.groups[group]->doorbell) != 0 ? 0U : take_doorbells(dev, group);
    RxBurst burst;
    burst.count = dev.port.receive_frames(group, burst.mbufs.data(), rx_burst_size);
    if (rung == 0 && nothing_to_do(dev, group, burst)) {
        return 0;
    }
    const std::uint64_t now = rte_get_tsc_cycles(); // the one clock read of this progress
    receive(dev, group, burst, now);
    QueueGroupState& state = *dev.groups[group];
    state.rx_drained = burst.count < rx_burst_size;
    // The resolver's timers belong with its frames, to whoever drives group 0 now (a poller, the
    // service, a claiming poll or the control path): a resolution retries and gives up whoever
    // that is.
    if (PRDMA_UNLIKELY(now >= state.neighbour_due)) {
        state.neighbour_due = poll_neighbours(dev, now);
    }
    // Frames the port refused last time go first; while any wait, make no new ones. Timers run
    // regardless: a peer that stopped taking frames is a peer that stopped answering, and its
    // QPs must reach retry_exceeded on time.
    bool can_send = flush_backlog(dev, group);
    TxBatch tx;
    state.work_left = false;
    can_send = full_scan_due(state, burst.count) ? serve_every_qp(dev, group, tx, now, can_send)
                                                 : serve_active(dev, group, tx, now, can_send);
    // A full batch or a refusing port leaves work for the next progress, which must not count
    // as empty.
    state.work_left = !can_send || tx.full();
    if (can_send) {
        (void)transmit(dev, group, tx);
    }
    return burst.count;
}

void kick_requester(SwroceQp& qp) noexcept {
    activate(*qp.device->groups[qp.queue_group], qp);
    if (!flush_backlog(*qp.device, qp.queue_group)) {
        return; // the next progress sends it, after what waits
    }
    TxBatch tx;
    run_requester(qp, tx, rte_get_tsc_cycles());
    // A message longer than a batch goes on at the next progress.
    qp.device->groups[qp.queue_group]->work_left |= tx.full();
    (void)transmit(*qp.device, qp.queue_group, tx);
}

} // namespace prdma::swroce
