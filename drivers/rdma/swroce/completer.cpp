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
    req.resent_repeats = 0; // the peer took something: it keeps what it is sent
    req.retries_left = qp.attr->retry_cnt;
    req.rnr_retries_left = qp.attr->rnr_retry;
    arm_timer(qp, now);
    if (req.timing && !roce::psn_after(req.timed_psn, psn)) {
        const std::uint64_t sample = now - req.timed_tsc;
        if (!req.timed_read) {
            req.srtt = req.srtt == 0 ? sample : (7 * req.srtt + sample) / 8;
        }
        req.min_rtt = req.min_rtt == 0 ? sample : std::min(req.min_rtt, sample);
        req.timing = false;
        set_timer_periods(qp);
    }
}

// Whether `psn` is one this requester has sent, not merely numbered (an ACK or response beyond
// that is bogus: it would complete a WR that never left).
bool was_sent(const SwroceQp& qp, std::uint32_t psn) noexcept {
    return !roce::psn_after(psn, qp.req.sent_psn);
}

// The transport timer runs only while some PSN sent is unacknowledged: a message numbered but
// held back (its window was full, or other QPs had the port) has nothing the peer could answer.
void stop_timer_when_idle(SwroceQp& qp) noexcept {
    if (!roce::psn_after(qp.req.sent_psn, qp.req.acked_psn)) {
        qp.req.retransmit_deadline = 0;
    }
}

// An acknowledgement up to `psn` (an ACK, or a response to a later request) passes the READs and
// atomics before it, and the responder answers requests in order: a response of theirs that has
// not come was lost, and is asked for again (chase_responses). Returns how far the
// acknowledgement goes: to the first response still missing.
std::uint32_t chase_lost_responses(SwroceQp& qp, std::uint32_t psn, std::uint64_t now) noexcept {
    std::uint32_t limit = psn;
    bool missing = false;
    for (std::uint32_t i = 0; qp.req.reads_posted && i < qp.send_queue.size(); ++i) {
        SendWqe& wqe = qp.send_queue.at(i);
        if (!wqe.assigned || roce::psn_after(wqe.first_psn, psn)) {
            break;
        }
        if (!wqe.is_read_or_atomic() || wqe.answered()) {
            continue;
        }
        if (!missing) {
            missing = true;
            limit = roce::psn_sub(roce::psn_add(wqe.first_psn, wqe.responses), 1);
        }
        if (roce::psn_after(roce::psn_add(wqe.first_psn, wqe.psn_span - 1), psn)) {
            break; // its own responses are what is being acknowledged
        }
        chase_responses(qp, wqe, now);
    }
    return limit;
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
        const bool read = wqe.is_read_or_atomic();
        complete_send(qp, wqe, rdma::WcStatus::success);
        qp.send_queue.pop();
        if (read) {
            qp.retire_read();
        }
        // A READ answered after a restart rewound it was never sent again: nothing to take back.
        qp.req.send_offset -= qp.req.send_offset > 0 ? 1U : 0U;
    }
}

// The responder has everything up to `psn`, but what the acknowledgement passes without its
// responses (those were lost, and are asked for again).
void acknowledge(SwroceQp& qp, std::uint32_t psn, std::uint64_t now) noexcept {
    advance(qp, chase_lost_responses(qp, psn, now), now);
    retire_in_order(qp, now);
    stop_timer_when_idle(qp);
}

// Writes `data` into a WQE's SGEs at `offset` (READ responses, atomic results); the SGE lkeys
// were checked for local write when the WQE was sent.
void place_in_wqe(const SendWqe& wqe, std::uint32_t offset, const std::uint8_t* data,
                  std::uint32_t length) noexcept {
    wqe.cursor().scatter(offset, data, length);
}

// Places the payload of response `index` of a READ or atomic; false when the QP failed on it (a
// response of the wrong kind or length, a local key gone).
bool place_response(SwroceQp& qp, SendWqe& target, ResponseMap* ahead,
                    const roce::ParsedFrame& frame, std::uint32_t index) noexcept {
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
        // responses asked for again still answer in whole MTUs from a packet boundary): any
        // other length would leave a hole in the target that completes in success.
        offset = index * qp.mtu();
        const std::uint32_t due =
            offset < target.length ? std::min(qp.mtu(), target.length - offset) : 0;
        if (data.size() != due) {
            fail_qp(qp, rdma::WcStatus::bad_response_error);
            return false;
        }
    }
    if (!target.keys_valid()) {
        fail_in_order(qp, target, rdma::WcStatus::local_protection_error);
        return false;
    }
    place_in_wqe(target, offset, data.data(), static_cast<std::uint32_t>(data.size()));
    if (index == target.responses) {
        target.responses += ahead != nullptr ? ahead->fill_first() : 1;
    } else {
        ahead->mark(index - target.responses); // complete_response kept it only with a map
    }
    return true;
}

// The first response a repair asked for came (send_repairs timed it): a sample of how long a
// repair takes. One longer than the transport timeout is no round trip (a PSN met again after
// the 24-bit space wrapped) and is dropped.
void take_repair_sample(SwroceQp& qp, std::uint64_t now) noexcept {
    RequesterState& req = qp.req;
    const std::uint64_t sample = now - req.repair_timed_tsc;
    req.repair_timed_psn = no_psn;
    if (req.timeout_cycles != 0 && sample > req.timeout_cycles) {
        return;
    }
    req.repair_rtt = req.repair_rtt == 0 ? sample : (7 * req.repair_rtt + sample) / 8;
}

// How many later responses of a READ may overtake a missing one before it is taken as lost: a
// reordered one is not asked for again (bench/loss read_bw 1 MiB, 5 % reordered: every reordered
// response was asked for again, one repair in twenty responses), and a lost one costs three
// packets' time more. TCP's three duplicate ACKs; the responder's NAK waits for a PSN 4 past a gap.
constexpr std::uint32_t reorder_slack = 3;

// Response `index` of `wqe` was placed: responses missing more than reorder_slack before it are
// asked for again by themselves, and all those missing once the READ's last one came (nothing
// after it would show them lost, and the wait would be a probe's).
void note_response(SwroceQp& qp, SendWqe& wqe, std::uint32_t index, std::uint64_t now) noexcept {
    if (index == wqe.response_reach) {
        wqe.response_reach = index + 1; // in order
        return;
    }
    const bool last = index + 1 == wqe.psn_span;
    if (last || index > wqe.response_reach + reorder_slack) {
        (void)ask_for_missing(qp, wqe, last ? index : index - reorder_slack, now);
    }
    while (wqe.response_reach <= index && wqe.placed(qp.map_of(wqe), wqe.response_reach)) {
        ++wqe.response_reach;
    }
}

// A READ response or an atomic ACK, for the READ or atomic whose PSNs hold it. Each is placed
// where its PSN says, whatever an earlier one still lacks (the responder answers in order, so
// what arrives is good); responses overtaken by more than reorder_slack later ones were lost, and
// they alone are asked for again. A response implicitly acknowledges everything before its
// request (IBTA 9.7.5.1.3).
void complete_response(SwroceQp& qp, const roce::ParsedFrame& frame, std::uint64_t now) noexcept {
    SendWqe* target = wqe_holding(qp, frame.bth.psn);
    const auto index =
        target == nullptr
            ? 0U
            : static_cast<std::uint32_t>(roce::psn_diff(frame.bth.psn, target->first_psn));
    if (target == nullptr || !target->is_read_or_atomic() ||
        target->placed(qp.map_of(*target), index)) {
        if (frame.bth.psn == qp.req.repair_timed_psn) {
            qp.req.repair_timed_psn = no_psn; // its first answer came before: times nothing
        }
        count_event(qp, &QpCounters::duplicates,
                    &SwroceCounters::duplicates); // replayed, late, or nothing outstanding
        return;
    }
    acknowledge(qp, roce::psn_sub(target->first_psn, 1), now);
    if (qp.state() == rdma::QpState::err) {
        return;
    }
    // Its map may have come free by what that acknowledged.
    ResponseMap* ahead = qp.map_of(*target);
    if (index != target->responses && ahead == nullptr) {
        // Older READs hold every map: nothing past a gap can be kept, so the READ is asked
        // again from its first missing response to its end, once, as go-back-N would.
        if (target->response_reach < target->psn_span) {
            ask_for_responses(qp, *target, target->responses, target->psn_span, now);
        }
        return;
    }
    if (index - target->responses >= ResponseMap::capacity) {
        return; // too far past a missing one to keep: asked for again once the map moves on
    }
    if (!place_response(qp, *target, ahead, frame, index)) {
        return;
    }
    // Responses still coming are no stall, whether or not they acknowledge anything: a READ's
    // lost response waits for its repair behind the stream of later READs (a millisecond of
    // queues at 1 MiB), and a probe would ask every READ again from its first gap.
    qp.req.probe_deadline = now + qp.req.probe_wait_cycles;
    qp.req.probes_without_progress = 0;
    if (PRDMA_UNLIKELY(frame.bth.psn == qp.req.repair_timed_psn)) {
        take_repair_sample(qp, now);
    }
    note_response(qp, *target, index, now);
    if (target->responses > 0) {
        acknowledge(qp, roce::psn_add(target->first_psn, target->responses - 1), now);
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
        count_event(qp, &QpCounters::duplicates, &SwroceCounters::duplicates);
        return;
    }
    count_event(qp, &QpCounters::naks_received, &SwroceCounters::naks_received);
    switch (type) {
    case roce::AethClass::rnr_nak:
        acknowledge(qp, roce::psn_sub(psn, 1), now);
        if (qp.attr->rnr_retry != 7 && qp.req.rnr_retries_left-- <= 0) {
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
        if (qp.state() == rdma::QpState::err) {
            return; // what it acknowledged failed the QP: nothing is resent
        }
        if (qp.attr->selective_repeat) {
            // A selective-repeat peer names in the MSN one missing PSN at or after the first, and
            // keeps what came after it. An MSN outside what is unacknowledged is a real MSN: the
            // peer goes back, after all.
            const std::uint32_t missing = frame.aeth.msn;
            if (!roce::psn_after(psn, missing) && was_sent(qp, missing)) {
                resend_selected(qp, psn, missing, now);
                return;
            }
            if (missing == roce::psn_sub(psn, 1)) {
                qp.req.restart_psn = no_psn; // it gave the gap up: go back, whatever came before
            }
        }
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
