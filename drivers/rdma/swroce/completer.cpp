// The completer (IBTA 9.7.5, rxe_comp.c): ACKs complete send WQEs in order, READ responses and
// atomic ACKs are placed into the requester's buffers, NAKs restart (sequence error, RNR) or fail
// the QP (remote access, remote operation, invalid request).
#include <cstring>

#include <prdma/mem/sge_cursor.hpp>
#include <prdma/roce/psn.hpp>

#include "engine.hpp"

namespace prdma::swroce {

namespace {

// Completes, in order, every transmitted WQE whose last PSN is at or before `psn`.
void acknowledge(SwroceQp& qp, std::uint32_t psn, std::uint64_t now) noexcept {
    bool progress = false;
    while (!qp.send_queue.empty() && qp.req.send_offset > 0) {
        SendWqe& wqe = qp.send_queue.front();
        const std::uint32_t last_psn = roce::psn_add(wqe.first_psn, wqe.psn_span - 1);
        // READs and atomics complete with their responses, never with an ACK.
        if (roce::psn_after(last_psn, psn) || wqe.is_read_or_atomic()) {
            break;
        }
        complete_send(qp, wqe, rdma::WcStatus::success);
        qp.send_queue.pop();
        --qp.req.send_offset;
        progress = true;
    }
    if (progress) {
        qp.req.retries_left = qp.attr.retry_cnt;
        qp.req.rnr_retries_left = qp.attr.rnr_retry;
    }
    retire_local_heads(qp);
    if (qp.req.send_offset == 0 &&
        (qp.send_queue.empty() || qp.send_queue.front().next_packet == 0)) {
        qp.req.retransmit_deadline = 0;
    } else if (progress) {
        arm_timer(qp, now);
    }
}

// Writes `data` into a WQE's SGEs at `offset` (READ responses, atomic results); the SGE lkeys
// were checked for local write when the WQE was sent.
void place_in_wqe(const SendWqe& wqe, std::uint32_t offset, const std::uint8_t* data,
                  std::uint32_t length) noexcept {
    mem::SgeCursor<rdma::Sge>({wqe.sges.data(), wqe.wr.num_sge},
                              {wqe.entries.data(), wqe.wr.num_sge})
        .scatter(offset, data, length);
}

bool wqe_keys_valid(const SendWqe& wqe) noexcept {
    return mem::SgeCursor<rdma::Sge>({wqe.sges.data(), wqe.wr.num_sge},
                                     {wqe.entries.data(), wqe.wr.num_sge})
        .keys_valid();
}

// A READ response or an atomic ACK for the oldest READ/atomic WQE. It implicitly acknowledges
// everything before the request (IBTA 9.7.5.1.3).
void complete_response(SwroceQp& qp, const roce::ParsedFrame& frame, std::uint64_t now) noexcept {
    const std::uint32_t psn = frame.bth.psn;
    std::uint32_t index = 0;
    while (index < qp.req.send_offset && !qp.send_queue.at(index).is_read_or_atomic()) {
        ++index;
    }
    if (index == qp.req.send_offset) {
        ++qp.device->counters_of(qp).duplicates; // nothing outstanding answers to it
        return;
    }
    SendWqe& target = qp.send_queue.at(index);
    const std::uint32_t expected = roce::psn_add(target.first_psn, target.responses);
    if (psn != expected) {
        ++qp.device->counters_of(qp).duplicates; // a replayed or early response: go-back-N resends
        return;
    }
    acknowledge(qp, roce::psn_sub(target.first_psn, 1), now);
    if (qp.send_queue.empty() || &qp.send_queue.front() != &target) {
        return;
    }
    if (frame.opcode() == roce::Opcode::rc_atomic_acknowledge) {
        if (!target.is_read_or_atomic() || target.wr.opcode == rdma::WrOpcode::rdma_read) {
            fail_qp(qp, rdma::WcStatus::bad_response_error);
            return;
        }
        const std::uint64_t original = frame.atomic_ack_eth.original_data;
        std::uint8_t bytes[8];
        std::memcpy(bytes, &original, sizeof(bytes)); // host order in the requester's buffer
        if (!wqe_keys_valid(target)) {
            fail_qp(qp, rdma::WcStatus::local_protection_error);
            return;
        }
        place_in_wqe(target, 0, bytes, sizeof(bytes));
    } else {
        if (target.wr.opcode != rdma::WrOpcode::rdma_read) {
            fail_qp(qp, rdma::WcStatus::bad_response_error);
            return;
        }
        const std::uint32_t offset = target.responses * qp.mtu();
        if (offset + frame.payload.size() > target.length) {
            fail_qp(qp, rdma::WcStatus::bad_response_error);
            return;
        }
        if (!wqe_keys_valid(target)) {
            fail_qp(qp, rdma::WcStatus::local_protection_error);
            return;
        }
        place_in_wqe(target, offset, frame.payload.data(),
                     static_cast<std::uint32_t>(frame.payload.size()));
        ++target.responses;
        qp.req.retries_left = qp.attr.retry_cnt; // forward progress
        if (target.responses < target.psn_span) {
            arm_timer(qp, now);
            return;
        }
    }
    complete_send(qp, target, rdma::WcStatus::success);
    qp.send_queue.pop();
    --qp.req.send_offset;
    retire_local_heads(qp);
    qp.req.retries_left = qp.attr.retry_cnt;
    if (qp.req.send_offset == 0) {
        qp.req.retransmit_deadline = 0;
    } else {
        arm_timer(qp, now);
    }
}

// A NAK that fails the QP: everything before it was received (acknowledged), the WR it names
// completes with `status`.
void fail_on_nak(SwroceQp& qp, std::uint32_t psn, rdma::WcStatus status,
                 std::uint64_t now) noexcept {
    acknowledge(qp, roce::psn_sub(psn, 1), now);
    fail_qp(qp, status);
}

} // namespace

void complete(SwroceQp& qp, const roce::ParsedFrame& frame, std::uint64_t now) noexcept {
    const std::uint32_t psn = frame.bth.psn;
    const bool response = frame.opcode() != roce::Opcode::rc_acknowledge;
    // A READ response's AETH (first/last/only) or an atomic ACK's may be a NAK; middles have none.
    const bool has_aeth = frame.has(roce::ExtHeader::aeth);
    // Any response shows the peer is alive: the transport timer starts over (IBTA 9.7.6.1.3).
    if (qp.req.retransmit_deadline != 0) {
        arm_timer(qp, now);
    }
    if (response &&
        (!has_aeth || roce::classify_aeth(frame.aeth.syndrome) == roce::AethClass::ack)) {
        complete_response(qp, frame, now);
        return;
    }
    const roce::AethClass type = roce::classify_aeth(frame.aeth.syndrome);
    if (type == roce::AethClass::ack) {
        acknowledge(qp, psn, now);
        return;
    }
    ++qp.device->counters_of(qp).naks_received;
    switch (type) {
    case roce::AethClass::rnr_nak:
        acknowledge(qp, roce::psn_sub(psn, 1), now);
        if (qp.attr.rnr_retry != 7 && qp.req.rnr_retries_left-- <= 0) {
            fail_qp(qp, rdma::WcStatus::rnr_retry_exceeded);
            return;
        }
        qp.req.rnr_resume =
            now + rnr_timer_cycles(*qp.device, roce::aeth_value(frame.aeth.syndrome));
        rewind(qp, psn);
        // No transport timeout while the responder asked us to wait; resending re-arms it.
        qp.req.retransmit_deadline = 0;
        return;
    case roce::AethClass::nak_psn_sequence_error:
        acknowledge(qp, roce::psn_sub(psn, 1), now);
        rewind(qp, psn);
        return;
    case roce::AethClass::nak_remote_access_error:
        fail_on_nak(qp, psn, rdma::WcStatus::remote_access_error, now);
        return;
    case roce::AethClass::nak_remote_operational_error:
        fail_on_nak(qp, psn, rdma::WcStatus::remote_operation_error, now);
        return;
    default:
        fail_on_nak(qp, psn, rdma::WcStatus::remote_invalid_request_error, now);
        return;
    }
}

} // namespace prdma::swroce
