// The completer (IBTA 9.7.5, rxe_comp.c): ACKs complete send WQEs in order, READ responses and
// atomic ACKs are placed into the requester's buffers, NAKs restart (sequence error, RNR) or fail
// the QP (remote access, remote operation, invalid request).
#include <algorithm>
#include <cstring>

#include <prdma/mem/sge_cursor.hpp>
#include <prdma/roce/psn.hpp>

#include "engine.hpp"

namespace prdma::swroce {

namespace {

// Forward progress: the responder has everything up to `psn`. Every advance resets the retry
// counts and restarts the transport timer (a long message making steady progress never runs out
// of retries), and may close a round-trip sample.
void advance(SwroceQp& qp, std::uint32_t psn, std::uint64_t now) noexcept {
    RequesterState& req = qp.req;
    if (!roce::psn_after(psn, req.acked_psn)) {
        return;
    }
    req.window.acknowledged(static_cast<std::uint32_t>(roce::psn_diff(psn, req.acked_psn)));
    req.acked_psn = psn;
    skip_acknowledged(qp);
    req.probing = false;
    req.retries_left = qp.attr.retry_cnt;
    req.rnr_retries_left = qp.attr.rnr_retry;
    arm_timer(qp, now);
    if (req.timing && !roce::psn_after(req.timed_psn, psn)) {
        const std::uint64_t sample = now - req.timed_tsc;
        req.srtt = req.srtt == 0 ? sample : (7 * req.srtt + sample) / 8;
        req.timing = false;
    }
}

// Whether `psn` is one this requester has sent (an ACK or response beyond that is bogus).
bool was_sent(const SwroceQp& qp, std::uint32_t psn) noexcept {
    return roce::psn_after(qp.req.send_psn, psn);
}

// The transport timer runs only while some PSN sent is unacknowledged.
void stop_timer_when_idle(SwroceQp& qp) noexcept {
    if (!roce::psn_after(qp.req.send_psn, roce::psn_next(qp.req.acked_psn))) {
        qp.req.retransmit_deadline = 0;
    }
}

// Completes, in order, every transmitted WQE whose last PSN is at or before `psn`.
// An ACK past a READ or atomic whose responses have not all come means they were lost (responses
// precede the ACKs of later requests): what was acknowledged stops where they are missing, and
// the READ or atomic is asked again at once.
void acknowledge(SwroceQp& qp, std::uint32_t psn, std::uint64_t now) noexcept {
    std::uint32_t limit = psn;
    // Every WQE sent at least once counts, including one a restart is about to send again.
    for (std::uint32_t i = 0; qp.req.reads_posted && i < qp.send_queue.size(); ++i) {
        const SendWqe& wqe = qp.send_queue.at(i);
        if (!wqe.assigned) {
            break;
        }
        if (wqe.is_read_or_atomic()) {
            limit = roce::psn_sub(roce::psn_add(wqe.first_psn, wqe.responses), 1);
            break;
        }
    }
    const bool answers_lost = roce::psn_after(psn, limit);
    advance(qp, answers_lost ? limit : psn, now);
    if (answers_lost && fast_restart(qp, roce::psn_next(limit), now)) {
        ++qp.device->counters_of(qp).read_restarts;
    }
    while (!qp.send_queue.empty() && qp.req.send_offset > 0) {
        SendWqe& wqe = qp.send_queue.front();
        const std::uint32_t last_psn = roce::psn_add(wqe.first_psn, wqe.psn_span - 1);
        // READs and atomics complete with their responses, never with an ACK; a WR that failed
        // where it stands completes in error (retire_local_heads), never in success.
        if (roce::psn_after(last_psn, psn) || wqe.is_read_or_atomic() ||
            wqe.local_status != rdma::WcStatus::success) {
            break;
        }
        complete_send(qp, wqe, rdma::WcStatus::success);
        qp.send_queue.pop();
        --qp.req.send_offset;
    }
    retire_local_heads(qp);
    stop_timer_when_idle(qp);
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
        ++qp.counters.duplicates;
        return;
    }
    SendWqe& target = qp.send_queue.at(index);
    const std::uint32_t expected = roce::psn_add(target.first_psn, target.responses);
    const std::int32_t gap = roce::psn_diff(psn, expected);
    if (gap < 0) {
        ++qp.device->counters_of(qp).duplicates; // a replayed or late response
        ++qp.counters.duplicates;
        return;
    }
    // Everything before the request was executed by the responder (IBTA 9.7.5.1.3).
    acknowledge(qp, roce::psn_sub(target.first_psn, 1), now);
    if (qp.send_queue.empty() || &qp.send_queue.front() != &target) {
        return;
    }
    if (gap > 0) {
        // Responses were lost: ask again, at once, from the first missing byte.
        if (fast_restart(qp, expected, now, LossReport::response_gap)) {
            ++qp.device->counters_of(qp).read_restarts;
        }
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
        // Every response carries one MTU but the last, which carries the rest (IBTA 9.7.5.1.5;
        // a READ asked again from a later byte still answers in whole MTUs from there): any
        // other length would leave a hole in the target that completes in success.
        const std::uint32_t offset = target.responses * qp.mtu();
        const std::uint32_t due =
            offset < target.length ? std::min(qp.mtu(), target.length - offset) : 0;
        if (frame.payload.size() != due) {
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
        advance(qp, psn, now);
        if (target.responses < target.psn_span) {
            return;
        }
    }
    advance(qp, psn, now);
    complete_send(qp, target, rdma::WcStatus::success);
    qp.send_queue.pop();
    --qp.req.send_offset;
    retire_local_heads(qp);
    stop_timer_when_idle(qp);
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
    if (PRDMA_UNLIKELY(!was_sent(qp, psn))) {
        ++qp.device->counters_of(qp).rx_bad_ack; // for a PSN never sent: a buggy or hostile peer
        return;
    }
    const bool response = frame.opcode() != roce::Opcode::rc_acknowledge;
    // A READ response's AETH (first/last/only) or an atomic ACK's may be a NAK; middles have none.
    const bool has_aeth = frame.has(roce::ExtHeader::aeth);
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
    if (!roce::psn_after(psn, qp.req.acked_psn)) {
        // A NAK names the responder's expected PSN, which it has since acknowledged: stale
        // (reordered on the way) or forged. It fails nothing and restarts nothing.
        ++qp.device->counters_of(qp).duplicates;
        ++qp.counters.duplicates;
        return;
    }
    ++qp.device->counters_of(qp).naks_received;
    ++qp.counters.naks_received;
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
        (void)fast_restart(qp, psn, now);
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
