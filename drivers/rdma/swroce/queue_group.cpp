// A queue group's progress, run to completion by the lcore that polls it: the control requests
// waiting for it, an rx burst through the roles, then each QP's ACKs, READ responses, timers and
// requester into one tx batch, and the batch to the port.
#include <rte_cycles.h>
#include <rte_mbuf.h>
#include <rte_ring.h>

#include "engine.hpp"

namespace prdma::swroce {

void progress_group(SwroceDevice& dev, unsigned group) noexcept {
    // Control requests first (a QP created for this group takes part in this very burst; one being
    // destroyed is gone before the scan).
    run_group_requests(dev, group);
    std::array<rte_mbuf*, burst_size> mbufs; // filled by the bursts below
    const std::uint64_t now = rte_get_tsc_cycles();
    QueueGroupState& state = *dev.groups[group];
    const std::uint16_t received = dev.port.receive_frames(group, mbufs.data(), burst_size);
    for (std::uint16_t i = 0; i < received; ++i) {
        rte_mbuf* mbuf = mbufs[i];
        if (drop_injected(dev, state.counters)) {
            rte_pktmbuf_free(mbuf);
            continue;
        }
        if (!handle_frame(dev, group, mbuf, now, false)) {
            rte_pktmbuf_free(mbuf);
        }
    }
    // Frames other groups received for our QPs (and, on group 0, possible ARP).
    const unsigned handed = rte_ring_dequeue_burst(
        state.handover, reinterpret_cast<void**>(mbufs.data()), burst_size, nullptr);
    for (unsigned i = 0; i < handed; ++i) {
        const std::span<const std::uint8_t> bytes(rte_pktmbuf_mtod(mbufs[i], const std::uint8_t*),
                                                  rte_pktmbuf_data_len(mbufs[i]));
        const bool arp = group == 0 && handle_arp_frame(dev, bytes, now, state.counters);
        // handle_frame keeps the mbuf only if it hands it on again, which a frame for one of our
        // QPs never needs.
        if (arp || !handle_frame(dev, group, mbufs[i], now, true)) {
            rte_pktmbuf_free(mbufs[i]);
        }
    }
    // Frames the port refused last time go first; while any wait, make no new ones.
    if (!flush_backlog(dev, group)) {
        return;
    }
    TxBatch tx;
    for (std::uint32_t slot = dev.first_slot(group); slot < state.qp_slot_end; ++slot) {
        SwroceQp* qp = dev.qps[slot].get();
        if (qp == nullptr || qp->queue_group != group || qp->destroying) {
            continue;
        }
        if (qp->resp.ack_pending && qp->has_peer_mac()) {
            if (tx.full() && !transmit(dev, group, tx)) {
                return;
            }
            send_ack(*qp, tx);
            if (!qp->resp.ack_pending && qp->resp.error_after_nak) {
                // The NAK is in the batch; the responder's error takes the QP to ERR, flushing
                // both queues (the requester learns of it from the NAK).
                qp->resp.error_after_nak = false;
                fail_responder(*qp);
            }
        }
        if (qp->resp.responses_pending && qp->has_peer_mac() && qp->state() != rdma::QpState::err) {
            send_responses(*qp, tx);
            if (tx.full()) {
                if (!transmit(dev, group, tx)) {
                    return;
                }
                send_responses(*qp, tx);
            }
        }
        if (qp->state() == rdma::QpState::rts) {
            check_timer(*qp, now);
            run_requester(*qp, tx, now);
        }
        if (tx.full() && !transmit(dev, group, tx)) {
            return;
        }
    }
    (void)transmit(dev, group, tx);
}

void kick_requester(SwroceQp& qp) noexcept {
    if (!flush_backlog(*qp.device, qp.queue_group)) {
        return; // the next progress sends it, after what waits
    }
    TxBatch tx;
    run_requester(qp, tx, rte_get_tsc_cycles());
    (void)transmit(*qp.device, qp.queue_group, tx);
}

} // namespace prdma::swroce
