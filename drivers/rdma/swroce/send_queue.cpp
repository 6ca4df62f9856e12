// The layer every role completes work through: send completions (silent success unless they
// fail), a QP entering ERR exactly once, flushing both queues, and the events that entry raises.
#include <unistd.h>

#include <rte_ring.h>

#include <prdma/roce/psn.hpp>

#include "engine.hpp"

namespace prdma::swroce {

namespace {

// The completion is in the ring; an application that armed the CQ and then polled it empty is
// woken. The fence pairs with arm_cq's exchange: either the reaper's poll after arming sees the
// completion, or this load sees the arm (Dekker's pattern, paid only by CQs with an event fd).
void notify_if_armed(SwroceCq& cq) noexcept {
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (cq.armed.load(std::memory_order_relaxed) &&
        cq.armed.exchange(false, std::memory_order_acq_rel)) {
        const std::uint64_t one = 1;
        (void)::write(cq.event_fd, &one, sizeof(one)); // an eventfd: never blocks, never short
    }
}

} // namespace

bool SwroceCq::push(const rdma::WorkCompletion& wc) noexcept {
    if (PRDMA_UNLIKELY(ring.full())) {
        ++overflows;
        return false;
    }
    ring.next_slot() = wc;
    ring.push();
    if (PRDMA_UNLIKELY(event_fd >= 0)) {
        notify_if_armed(*this);
    }
    return true;
}

void complete_send(SwroceQp& qp, const SendWqe& wqe, rdma::WcStatus status) noexcept {
    const bool signaled = qp.signal_all || wqe.wr.flags.has(rdma::send_signaled);
    if (status == rdma::WcStatus::success && !signaled) {
        return; // silent success
    }
    rdma::WorkCompletion wc;
    wc.wr_id = wqe.wr.wr_id;
    wc.status = status;
    wc.opcode = wc_opcode_of(wqe.wr.opcode);
    wc.byte_len = wqe.length;
    wc.qpn = qp.qpn;
    qp.send_cq->push(wc);
}

void fail_qp(SwroceQp& qp, rdma::WcStatus status, std::uint32_t vendor_error) noexcept {
    if (!qp.send_queue.empty()) {
        rdma::WorkCompletion wc;
        wc.wr_id = qp.send_queue.front().wr.wr_id;
        wc.status = status;
        wc.opcode = wc_opcode_of(qp.send_queue.front().wr.opcode);
        wc.qpn = qp.qpn;
        wc.vendor_error = vendor_error;
        qp.send_cq->push(wc);
        qp.send_queue.pop();
    }
    qp.set_state(rdma::QpState::err);
    flush_queues(qp);
    report_error_state(qp, true);
}

void fail_responder(SwroceQp& qp) noexcept {
    if (qp.state() == rdma::QpState::err) {
        return;
    }
    qp.set_state(rdma::QpState::err);
    flush_queues(qp);
    report_error_state(qp, true);
}

void retire_local_heads(SwroceQp& qp) noexcept {
    while (!qp.send_queue.empty() && qp.req.send_offset > 0 && qp.send_queue.front().is_local()) {
        SendWqe& wqe = qp.send_queue.front();
        if (wqe.local_status != rdma::WcStatus::success) {
            fail_qp(qp, wqe.local_status, wqe.local_vendor_error);
            return;
        }
        complete_send(qp, wqe, rdma::WcStatus::success);
        qp.send_queue.pop();
        --qp.req.send_offset;
    }
}

void fail_in_order(SwroceQp& qp, SendWqe& wqe, rdma::WcStatus status) noexcept {
    wqe.local_status = status;
    qp.req.send_stopped = true;
    retire_local_heads(qp);
}

SendWqe* wqe_holding(SwroceQp& qp, std::uint32_t psn) noexcept {
    for (std::uint32_t i = 0; i < qp.send_queue.size(); ++i) {
        SendWqe& wqe = qp.send_queue.at(i);
        if (!wqe.assigned) {
            break;
        }
        const std::int32_t into = roce::psn_diff(psn, wqe.first_psn);
        if (!wqe.is_local() && into >= 0 && into < static_cast<std::int32_t>(wqe.psn_span)) {
            return &wqe;
        }
    }
    return nullptr;
}

void flush_queues(SwroceQp& qp) noexcept {
    release_kept(qp);
    qp.req.resends.clear(); // nothing is left to go again
    qp.req.repairs_pending = false;
    if (qp.resp.holds_receive) {
        // The WQE a SEND in progress took from the QP's SRQ: it is the QP's to flush.
        rdma::WorkCompletion wc;
        wc.wr_id = qp.held_receive.wr_id;
        wc.status = rdma::WcStatus::wr_flush_error;
        wc.opcode = rdma::WcOpcode::recv;
        wc.qpn = qp.qpn;
        qp.recv_cq->push(wc);
        qp.resp.holds_receive = false;
    }
    while (!qp.receive_queue.empty()) {
        rdma::WorkCompletion wc;
        wc.wr_id = qp.receive_queue.front().wr_id;
        wc.status = rdma::WcStatus::wr_flush_error;
        wc.opcode = rdma::WcOpcode::recv;
        wc.qpn = qp.qpn;
        qp.recv_cq->push(wc);
        qp.receive_queue.pop();
    }
    while (!qp.send_queue.empty()) {
        rdma::WorkCompletion wc;
        wc.wr_id = qp.send_queue.front().wr.wr_id;
        wc.status = rdma::WcStatus::wr_flush_error;
        wc.opcode = wc_opcode_of(qp.send_queue.front().wr.opcode);
        wc.qpn = qp.qpn;
        qp.send_cq->push(wc);
        qp.send_queue.pop();
    }
    qp.forget_reads();
    qp.req.send_offset = 0;
    qp.req.retransmit_deadline = 0;
}

void report_error_state(SwroceQp& qp, bool fatal) noexcept {
    if (qp.error_reported || qp.destroying) {
        return;
    }
    qp.error_reported = true;
    QueueGroupState& group = *qp.device->groups[qp.queue_group];
    if (fatal) {
        record_event(group, rdma::EventType::qp_fatal, qp.qpn);
    }
    // flush_queues has just completed every receive WQE: the last one is reached now.
    record_event(group, rdma::EventType::qp_last_wqe_reached, qp.qpn);
}

void record_event(QueueGroupState& group, rdma::EventType type, std::uint32_t number) noexcept {
    const std::uintptr_t word =
        (std::uintptr_t{static_cast<std::uint8_t>(type)} << 24) | (number & 0xffffffU);
    if (rte_ring_enqueue(group.events, reinterpret_cast<void*>(word)) != 0) {
        ++group.counters.events_dropped;
    }
}

} // namespace prdma::swroce
