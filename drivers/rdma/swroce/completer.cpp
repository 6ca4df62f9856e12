// The completer (IBTA 9.7.5, rxe_comp.c): ACKs complete send WQEs in order, READ responses and
// atomic ACKs are placed into the requester's buffers, NAKs restart (sequence error, RNR) or fail
// the QP (remote access, remote operation, invalid request).
#include <algorithm>
#include <cstring>
#include <span>

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

// The first READ or atomic still waiting for a response (acknowledgements stop where it lacks
// one), or nullptr.
const SendWqe* first_unanswered(SwroceQp& qp) noexcept {
    for (std::uint32_t i = 0; qp.req.reads_posted && i < qp.send_queue.size(); ++i) {
        const SendWqe& wqe = qp.send_queue.at(i);
        if (!wqe.assigned) {
            break;
        }
        if (wqe.is_read_or_atomic() && !wqe.answered()) {
            return &wqe;
        }
    }
    return nullptr;
}

// Completes, in send-queue order, what is done at the head: WQEs acknowledged up to acked_psn,
// READs and atomics with all their responses (which acknowledge everything up to their last PSN),
// local WRs. A READ answered behind one still waiting completes after it.
void retire_in_order(SwroceQp& qp, std::uint64_t now) noexcept {
    while (!qp.send_queue.empty()) {
        SendWqe& wqe = qp.send_queue.front();
        if (wqe.is_local()) {
            const std::uint32_t before = qp.send_queue.size();
            retire_local_heads(qp);
            if (qp.send_queue.size() == before) {
                return; // not reached yet, or the QP failed on it
            }
            continue;
        }
        if (wqe.is_read_or_atomic()) {
            if (!wqe.answered()) {
                return;
            }
            advance(qp, roce::psn_add(wqe.first_psn, wqe.psn_span - 1), now);
        } else if (qp.req.send_offset == 0 || !wqe.assigned ||
                   roce::psn_after(roce::psn_add(wqe.first_psn, wqe.psn_span - 1),
                                   qp.req.acked_psn)) {
            return;
        }
        complete_send(qp, wqe, rdma::WcStatus::success);
        qp.send_queue.pop();
        // A READ answered after a restart rewound it was never sent again: nothing to take back.
        qp.req.send_offset -= qp.req.send_offset > 0 ? 1U : 0U;
    }
}

// The responder has everything up to `psn`. An ACK past a READ or atomic whose responses have not
// all come means they were lost (responses precede the ACKs and responses of later requests):
// what was acknowledged stops where they are missing, and they are asked again at once.
void acknowledge(SwroceQp& qp, std::uint32_t psn, std::uint64_t now) noexcept {
    std::uint32_t limit = psn;
    if (const SendWqe* read = first_unanswered(qp); read != nullptr) {
        limit = roce::psn_sub(roce::psn_add(read->first_psn, read->responses), 1);
    }
    const bool answers_lost = roce::psn_after(psn, limit);
    advance(qp, answers_lost ? limit : psn, now);
    if (answers_lost && fast_restart(qp, roce::psn_next(limit), now, LossReport::response_gap)) {
        ++qp.device->counters_of(qp).read_restarts;
    }
    retire_in_order(qp, now);
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

// Places the payload of the response a READ or atomic expects next; false when the QP failed on it
// (a response of the wrong kind or length, a local key gone).
bool place_response(SwroceQp& qp, SendWqe& target, const roce::ParsedFrame& frame) noexcept {
    const bool atomic_ack = frame.opcode() == roce::Opcode::rc_atomic_acknowledge;
    if (atomic_ack != (target.wr.opcode != rdma::WrOpcode::rdma_read)) {
        fail_qp(qp, rdma::WcStatus::bad_response_error);
        return false;
    }
    std::uint8_t original[8];
    std::uint32_t offset = 0;
    std::span<const std::uint8_t> data = frame.payload;
    if (atomic_ack) {
        // Host order in the requester's buffer.
        std::memcpy(original, &frame.atomic_ack_eth.original_data, sizeof(original));
        data = original;
    } else {
        // Every response carries one MTU but the last, which carries the rest (IBTA 9.7.5.1.5;
        // a READ asked again from a later byte still answers in whole MTUs from there): any
        // other length would leave a hole in the target that completes in success.
        offset = target.responses * qp.mtu();
        const std::uint32_t due =
            offset < target.length ? std::min(qp.mtu(), target.length - offset) : 0;
        if (data.size() != due) {
            fail_qp(qp, rdma::WcStatus::bad_response_error);
            return false;
        }
    }
    if (!wqe_keys_valid(target)) {
        fail_qp(qp, rdma::WcStatus::local_protection_error);
        return false;
    }
    place_in_wqe(target, offset, data.data(), static_cast<std::uint32_t>(data.size()));
    ++target.responses;
    return true;
}

// A READ response or an atomic ACK, for the READ or atomic whose PSNs hold it. Each takes its
// responses in its own order, whatever an earlier one still lacks: the responder answers them in
// order, so what arrives for a later one is good, and a restart asks each only for what it lacks.
// A response implicitly acknowledges everything before its request (IBTA 9.7.5.1.3).
void complete_response(SwroceQp& qp, const roce::ParsedFrame& frame, std::uint64_t now) noexcept {
    const std::uint32_t psn = frame.bth.psn;
    SendWqe* target = wqe_holding(qp, psn);
    if (target == nullptr || !target->is_read_or_atomic()) {
        ++qp.device->counters_of(qp).duplicates; // nothing outstanding answers to it
        ++qp.counters.duplicates;
        return;
    }
    const std::uint32_t expected = roce::psn_add(target->first_psn, target->responses);
    const std::int32_t gap = roce::psn_diff(psn, expected);
    if (gap < 0) {
        ++qp.device->counters_of(qp).duplicates; // a replayed or late response
        ++qp.counters.duplicates;
        return;
    }
    acknowledge(qp, roce::psn_sub(target->first_psn, 1), now);
    if (qp.state() == rdma::QpState::err) {
        return;
    }
    if (gap > 0) {
        // Responses were lost: ask again, at once, from the first missing byte.
        if (fast_restart(qp, expected, now, LossReport::response_gap)) {
            ++qp.device->counters_of(qp).read_restarts;
        }
        return;
    }
    if (place_response(qp, *target, frame)) {
        acknowledge(qp, psn, now);
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
