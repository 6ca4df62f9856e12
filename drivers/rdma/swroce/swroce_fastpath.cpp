// swroce's fast-path entry points: posts queue work and ring the requester; a CQ poll drives its
// queue group (queue_group.cpp) and returns completions. Under progress=service the engine runs
// on a service lcore instead: a post only publishes its WRs and rings the group's doorbell, and a
// poll only reaps (service.cpp).
#include <algorithm>
#include <cstring>

#include <prdma/compiler.hpp>

#include "engine.hpp"

namespace prdma::swroce {

namespace {

std::uint16_t reap(SwroceCq& cq, rdma::WorkCompletion* wcs, std::uint16_t count) noexcept {
    std::uint16_t n = 0;
    for (; n < count && !cq.ring.empty(); ++n) {
        wcs[n] = cq.ring.front();
        cq.ring.pop();
    }
    return n;
}

} // namespace

std::uint16_t swroce_post_recv(void* queue, const rdma::RecvWr* wrs, std::uint16_t count) {
    auto& qp = *static_cast<SwroceQp*>(queue);
    qp.post_error = StatusCode::ok;
    if (PRDMA_UNLIKELY(qp.state() == rdma::QpState::reset || qp.destroying)) {
        qp.post_error = StatusCode::not_connected;
        return 0;
    }
    if (PRDMA_UNLIKELY(qp.srq != nullptr && count > 0)) {
        qp.post_error = StatusCode::invalid_parameter; // its receives are posted to the SRQ
        return 0;
    }
    std::uint16_t taken = 0;
    for (; taken < count; ++taken) {
        const rdma::RecvWr& wr = wrs[taken];
        if (PRDMA_UNLIKELY(qp.receive_queue.full())) {
            qp.post_error = StatusCode::no_resources;
            break;
        }
        if (PRDMA_UNLIKELY(wr.num_sge > qp.caps.max_recv_sge || wr.num_sge > max_recv_sge ||
                           (wr.num_sge > 1 && wr.sg_list == nullptr))) {
            qp.post_error = StatusCode::invalid_parameter;
            break;
        }
        RecvWqe& wqe = qp.receive_queue.next_slot();
        wqe.wr_id = wr.wr_id;
        wqe.num_sge = wr.num_sge;
        if (wr.num_sge > 1) {
            std::copy_n(wr.sg_list, wr.num_sge, wqe.sge_store); // caps allow them: room is there
        } else if (wr.num_sge == 1) {
            wqe.sge = *wr.sges();
        }
        qp.receive_queue.push();
    }
    if (qp.state() == rdma::QpState::err) {
        // IBTA: WRs posted to a QP in error complete with flush errors.
        if (posts_run_engine(*qp.device, qp.queue_group)) {
            flush_queues(qp);
        } else {
            ring_doorbell(qp);
        }
    }
    return taken;
}

namespace {

// As ibv_post_send: inline data beyond the QP's limit is refused, not queued.
StatusCode admit_inline(const SwroceQp& qp, const rdma::SendWr& wr) noexcept {
    if (!wr.flags.has(rdma::send_inline)) {
        return StatusCode::ok;
    }
    std::uint64_t length = 0;
    for (std::uint32_t i = 0; i < wr.num_sge; ++i) {
        length += wr.sges()[i].length;
    }
    return length > qp.caps.max_inline_data || length > max_inline_data
               ? StatusCode::invalid_parameter
               : StatusCode::ok;
}

// Why a WR cannot be taken at all (the QP stays as it is); ok to queue it.
StatusCode admit(const SwroceQp& qp, const rdma::SendWr& wr) noexcept {
    if (PRDMA_UNLIKELY(qp.type == rdma::QpType::ud)) {
        const StatusCode ud = admit_ud(qp, wr);
        return ud != StatusCode::ok ? ud : admit_inline(qp, wr);
    }
    switch (wr.opcode) {
    case rdma::WrOpcode::send:
    case rdma::WrOpcode::send_with_imm:
    case rdma::WrOpcode::send_with_inv:
    case rdma::WrOpcode::rdma_write:
    case rdma::WrOpcode::rdma_write_with_imm:
    case rdma::WrOpcode::rdma_read:
        break;
    case rdma::WrOpcode::atomic_cmp_swap:
    case rdma::WrOpcode::atomic_fetch_add:
        // The original value lands in one 8-byte local buffer.
        if (PRDMA_UNLIKELY(wr.num_sge != 1 || wr.sges()[0].length < 8)) {
            return StatusCode::invalid_parameter;
        }
        break;
    case rdma::WrOpcode::fast_reg:
    case rdma::WrOpcode::local_inv:
        return StatusCode::ok; // no SGEs; checked when executed, in send-queue order
    default:
        return StatusCode::invalid_parameter; // not an opcode: refused, nothing queued
    }
    if (PRDMA_UNLIKELY(wr.num_sge > qp.caps.max_send_sge || wr.num_sge > max_send_sge ||
                       (wr.num_sge > 1 && wr.sg_list == nullptr))) {
        return StatusCode::invalid_parameter;
    }
    return admit_inline(qp, wr);
}

// Copies what must outlive the post: the SGEs (the caller's sg_list is only valid during the
// call) and, for inline sends, the payload itself. False for a message longer than 2^31 bytes.
bool fill_wqe(const rdma::SendWr& wr, SendWqe& wqe) noexcept {
    const rdma::Sge* sges = wr.sges();
    wqe.wr = wr;
    if (wr.num_sge > 1) {
        std::copy_n(sges, wr.num_sge, wqe.sge_store); // admit() kept it within the caps
        wqe.wr.sg_list = wqe.sge_store;
    } else {
        wqe.wr.sg_list = nullptr;
        if (wr.num_sge == 1) {
            wqe.wr.sge = sges[0];
        }
    }
    wqe.assigned = false;
    wqe.checked = false;
    wqe.next_packet = 0;
    wqe.responses = 0;
    // A READ that completed before its noted request went out leaves it on the slot.
    wqe.repair_from = 0;
    wqe.repair_end = 0;
    if (wqe_is_read_or_atomic(wr.opcode)) {
        wqe.response_reach = 0;
    }
    wqe.local_status = rdma::WcStatus::success;
    wqe.local_vendor_error = 0;
    std::uint64_t length = 0;
    for (std::uint32_t i = 0; i < wr.num_sge; ++i) {
        length += sges[i].length;
    }
    if (wr.flags.has(rdma::send_inline)) {
        std::uint32_t at = 0; // admit() kept the total within max_inline_data
        for (std::uint32_t i = 0; i < wr.num_sge; ++i) {
            // An empty SGE may carry address 0, and memcpy from a null pointer is undefined
            // even for zero bytes.
            if (sges[i].length == 0) {
                continue;
            }
            std::memcpy(wqe.inline_store + at, reinterpret_cast<const void*>(sges[i].addr),
                        sges[i].length);
            at += sges[i].length;
        }
    }
    if (length > max_message_length) {
        return false;
    }
    wqe.length = static_cast<std::uint32_t>(length);
    return true;
}

} // namespace

std::uint16_t swroce_post_send(void* queue, const rdma::SendWr* wrs, std::uint16_t count) {
    auto& qp = *static_cast<SwroceQp*>(queue);
    qp.post_error = StatusCode::ok;
    const bool inline_engine = posts_run_engine(*qp.device, qp.queue_group);
    if (qp.state() == rdma::QpState::err && !qp.destroying) {
        std::uint16_t taken = 0;
        for (; taken < count && !qp.send_queue.full(); ++taken) {
            SendWqe& wqe = qp.send_queue.next_slot();
            wqe.wr = wrs[taken];
            wqe.wr.sg_list = nullptr; // the caller's; only flushed, never read again
            wqe.wr.num_sge = 0;
            qp.send_queue.push();
        }
        if (taken < count) {
            qp.post_error = StatusCode::no_resources;
        }
        if (inline_engine) {
            flush_queues(qp);
        } else {
            ring_doorbell(qp); // the engine flushes them
        }
        return taken;
    }
    if (PRDMA_UNLIKELY(qp.state() != rdma::QpState::rts && qp.state() != rdma::QpState::sqd)) {
        qp.post_error = StatusCode::not_connected;
        return 0;
    }
    std::uint16_t taken = 0;
    bool ring = false;
    for (; taken < count; ++taken) {
        const rdma::SendWr& wr = wrs[taken];
        if (PRDMA_UNLIKELY(qp.send_queue.full())) {
            qp.post_error = StatusCode::no_resources;
            break;
        }
        if (const StatusCode admitted = admit(qp, wr); PRDMA_UNLIKELY(admitted != StatusCode::ok)) {
            qp.post_error = admitted;
            break;
        }
        SendWqe& wqe = qp.send_queue.next_slot();
        if (PRDMA_UNLIKELY(qp.type == rdma::QpType::ud)) {
            fill_ud(wr, wqe);
        }
        if (PRDMA_UNLIKELY(!fill_wqe(wr, wqe))) {
            // Taken, but it cannot be sent (longer than 2^31 bytes): it completes with a local
            // length error in send-queue order, after the WRs before it, and the QP goes to
            // error then, as a NIC would.
            wqe.local_status = rdma::WcStatus::local_length_error;
        }
        qp.send_queue.push();
        // NDK DEFER: queue now, transmit with the next post that rings.
        ring = !wr.flags.has(rdma::send_defer);
    }
    if (!inline_engine) {
        // The thread that drives the group runs the WRs, local ones (FAST_REG, LOCAL_INV)
        // included: a NIC's doorbell, not a call into the engine.
        if (ring) {
            ring_doorbell(qp);
        }
    } else if (ring) {
        kick_requester(qp);
    } else if (taken > 0) {
        run_local_at_post(qp); // a deferred FAST_REG's key is valid once the post returns
    }
    return taken;
}

StatusCode swroce_arm_cq(void* queue) {
    auto& cq = *static_cast<SwroceCq*>(queue);
    if (cq.event_fd < 0) {
        return StatusCode::not_supported;
    }
    cq.armed.exchange(true, std::memory_order_seq_cst); // see notify_if_armed
    return StatusCode::ok;
}

StatusCode swroce_post_error(const void* queue) {
    return static_cast<const SwroceQp*>(queue)->post_error;
}

std::uint16_t swroce_poll_cq(void* queue, rdma::WorkCompletion* wcs, std::uint16_t count) {
    auto& cq = *static_cast<SwroceCq*>(queue);
    if (cq.device->service_id) {
        return reap(cq, wcs, count); // the service progresses the group
    }
    // The first thread to poll a group owns it; the control path stops driving it then. While a
    // control thread acts on the unpolled group (GroupHold) this poll returns nothing, and a
    // later one claims the group. A group another thread drives (its poller, or its first poll)
    // is only reaped: that thread fills the CQ.
    std::atomic<std::uintptr_t>& owner = cq.device->groups[cq.queue_group]->owner;
    const std::uintptr_t me = this_thread_token();
    std::uintptr_t current = owner.load(std::memory_order_relaxed);
    if (PRDMA_UNLIKELY(current != me)) {
        if ((current & control_hold_bit) != 0) {
            return 0;
        }
        if (current != 0) {
            return reap(cq, wcs, count);
        }
        // seq_cst (a locked instruction on x86 either way): deregistration's GroupHold must see
        // this claim, or this thread must see the key it retired (swroce_control.cpp).
        if (!owner.compare_exchange_strong(current, me, std::memory_order_seq_cst)) {
            return 0;
        }
    }
    // A full rx burst may have more behind it: an application that posts to many QPs between
    // two polls (perftest's bandwidth loop) finds a queue of ACKs, and read 16 a poll its
    // requesters saw the transport timer expire with their answers waiting here. Progress on,
    // each round still acknowledging what it received, while bursts come full.
    for (unsigned round = 0; round < max_progress_rounds_per_poll; ++round) {
        if (progress_group(*cq.device, cq.queue_group) < rx_burst_size) {
            break;
        }
    }
    return reap(cq, wcs, count);
}

} // namespace prdma::swroce
