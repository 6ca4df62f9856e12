// The requester's timers and restarts, from the TSC: the transport timer (IBTA 9.7.6.1.3), the RNR
// timer (table 45), go-back-N restart points, the fast restart a sequence-error NAK causes without
// waiting for the timer, and lost READ responses asked for again by themselves.
#include <algorithm>

#include <prdma/roce/psn.hpp>

#include "engine.hpp"

namespace prdma::swroce {

namespace {

// How long after a restart from PSN p another report of p is the same loss (a NAK sent before
// the restart reached the responder): two smoothed round trips, and at least 20 us.
std::uint64_t restart_guard(const SwroceQp& qp) noexcept {
    const std::uint64_t floor = qp.device->tsc_hz / 50'000;
    const std::uint64_t rtt = qp.req.srtt != 0 ? 2 * qp.req.srtt : 5 * floor;
    return std::max(rtt, floor);
}

// How long responses asked for again may take before they are asked for once more: two repair
// round trips, and at least restart_guard's floor; restart_guard before one was measured.
std::uint64_t repair_guard(const SwroceQp& qp) noexcept {
    return qp.req.repair_rtt != 0 ? std::max(2 * qp.req.repair_rtt, qp.device->tsc_hz / 50'000)
                                  : restart_guard(qp);
}

} // namespace

// IBTA: transport timer 4.096 us x 2^timeout; 0 means infinite. Every ACK re-arms it: a shift,
// not the floating-point product it was (2 % of a WRITE's round trip).
std::uint64_t transport_timeout_cycles(const SwroceQp& qp) noexcept {
    if (qp.attr->timeout == 0) {
        return 0;
    }
    return qp.device->timer_unit_cycles << std::min<unsigned>(qp.attr->timeout, 31);
}

// IBTA RNR NAK timer codes (table 45), in microseconds; code 0 is 655.36 ms.
std::uint64_t rnr_timer_cycles(const SwroceDevice& dev, std::uint8_t code) noexcept {
    static constexpr std::uint32_t micros[32] = {
        655360, 10,    20,    30,    40,    60,     80,     120,    160,    240,   320,
        480,    640,   960,   1280,  1920,  2560,   3840,   5120,   7680,   10240, 15360,
        20480,  30720, 40960, 61440, 81920, 122880, 163840, 245760, 327680, 491520};
    return micros[code & 31U] * dev.tsc_hz / 1'000'000;
}

namespace {

// How long a stall may last before it is probed: eight smoothed round trips and at least 1 ms
// (a peer's lcore may be descheduled that long on a shared core, and a needless probe still
// stops the window until it is answered), doubled per probe that brought nothing; never past the
// transport timer, which alone counts retries. A selective-repeat peer is probed after three
// round trips and at least 20 us: there a lost ACK of a filled gap, or a lost resend whose
// renewed NAK was lost too, would otherwise hold a full window for the millisecond, and the
// probe is answered by an ACK or by the NAK of what is still missing. Behind a READ or atomic
// (`read_tail`: the last PSN sent is one's), after three of the shortest round trips.
std::uint64_t probe_wait(const SwroceQp& qp, std::uint32_t probes, bool read_tail) noexcept {
    const RequesterState& req = qp.req;
    const std::uint64_t millisecond = qp.device->tsc_hz / 1'000;
    const std::uint64_t least = qp.device->tsc_hz / 50'000;
    std::uint64_t wait = 0;
    if (qp.attr->selective_repeat && read_tail && req.min_rtt != 0) {
        // READ responses stream back to back, so their silence means they stopped: a lost READ
        // request (the responder drops the requests past a window's PSNs), or a READ's tail
        // lost. Not the smoothed round trip: a READ's sample holds the queue of responses before
        // its first. Never more than the 1 ms it was before READs were timed (read_bw 64 KiB at
        // 10 % loss both ways waited 120 probes of 1 ms or more, half its run).
        wait = std::max(std::min(3 * req.min_rtt, millisecond), least);
    } else {
        // Before a round trip was measured, the go-back-N floor: nothing says the peer is near.
        const bool selective = qp.attr->selective_repeat && req.srtt != 0;
        wait = std::max((selective ? 3 : 8) * req.srtt, selective ? least : millisecond);
    }
    wait <<= std::min<std::uint32_t>(probes, 16);
    const std::uint64_t timeout = req.timeout_cycles;
    return timeout == 0 ? wait : std::min(wait, timeout / 2);
}

// Whether the last PSN sent is a READ's or an atomic's: a stall behind it is one of responses.
bool read_at_tail(SwroceQp& qp) noexcept {
    const SendWqe* last = wqe_holding(qp, qp.req.sent_psn);
    return last != nullptr && last->is_read_or_atomic();
}

} // namespace

// Worked out when a sample comes, not per packet or per ACK: the READ rule holds while READs are
// what is timed (a READ-only QP; not one that READ once and now WRITEs). A probe works out its
// next wait from what it finds at the tail.
void set_timer_periods(SwroceQp& qp) noexcept {
    RequesterState& req = qp.req;
    req.timeout_cycles = transport_timeout_cycles(qp);
    req.probe_wait_cycles = probe_wait(qp, 0, req.timed_read);
}

void arm_timer(SwroceQp& qp, std::uint64_t now) noexcept {
    RequesterState& req = qp.req;
    req.retransmit_deadline = req.timeout_cycles == 0 ? 0 : now + req.timeout_cycles;
    req.probes_without_progress = 0;
    req.probe_deadline = now + req.probe_wait_cycles;
}

// Nothing flowed before this READ: its first response may wait behind the peer's work for other
// QPs, and its silence is no stall until responses came (then probe_wait's READ rule).
void hold_first_probe(SwroceQp& qp, std::uint64_t now) noexcept {
    qp.req.probe_deadline = now + std::max(qp.req.probe_wait_cycles, qp.device->tsc_hz / 1'000);
}

// Every transmitted WQE from the one holding `from_psn` on is sent again from there: a message
// from its first unacknowledged packet, a READ for the responses it still lacks (IBTA 9.4.4), an
// atomic whole. WQEs wholly before `from_psn` stay as they are, and so does a READ or atomic
// already answered; FAST_REG and LOCAL_INV ran once and never run again.
void rewind(SwroceQp& qp, std::uint32_t from_psn) noexcept {
    std::uint32_t first_resend = qp.send_queue.size();
    for (std::uint32_t i = 0; i < qp.send_queue.size(); ++i) {
        SendWqe& wqe = qp.send_queue.at(i);
        if (!wqe.assigned) {
            break;
        }
        const std::int32_t into = roce::psn_diff(from_psn, wqe.first_psn);
        if (wqe.is_local() || wqe.answered() || into >= static_cast<std::int32_t>(wqe.psn_span)) {
            continue;
        }
        const bool resume_inside = into > 0 && !wqe.is_read_or_atomic();
        wqe.next_packet = resume_inside ? static_cast<std::uint32_t>(into) : 0;
        first_resend = std::min(first_resend, i);
        // Packets after a partially resent WQE were sent once; they go again in order.
        for (std::uint32_t j = i + 1; j < qp.send_queue.size() && qp.send_queue.at(j).assigned;
             ++j) {
            SendWqe& later = qp.send_queue.at(j);
            if (!later.is_local() && !later.answered()) {
                later.next_packet = 0;
            }
        }
        break;
    }
    qp.req.send_offset = std::min(qp.req.send_offset, first_resend);
    qp.req.timing = false;            // Karn: no round-trip sample across a restart
    qp.req.repair_timed_psn = no_psn; // nor a repair's: READs are asked again
    count_event(qp, &QpCounters::retransmissions, &SwroceCounters::retransmissions);
}

void skip_acknowledged(SwroceQp& qp) noexcept {
    while (qp.req.send_offset < qp.send_queue.size()) {
        SendWqe& wqe = qp.send_queue.at(qp.req.send_offset);
        // A READ or atomic is answered by its responses, never by an ACK.
        if (!wqe.assigned || wqe.is_local() || wqe.is_read_or_atomic()) {
            return;
        }
        const std::int32_t acked = roce::psn_diff(qp.req.acked_psn, wqe.first_psn) + 1;
        if (acked <= static_cast<std::int32_t>(wqe.next_packet)) {
            return;
        }
        if (acked < static_cast<std::int32_t>(wqe.psn_span)) {
            wqe.next_packet = static_cast<std::uint32_t>(acked);
            return;
        }
        wqe.next_packet = wqe.psn_span; // all of it arrived: transmitted, as far as we care
        ++qp.req.send_offset;
    }
}

bool fast_restart(SwroceQp& qp, std::uint32_t from_psn, std::uint64_t now) noexcept {
    // The same loss reported again before our restart could be seen (a NAK re-sent for an
    // AckReq). A NAK past the restart point is news: the responder has seen the restart and lost
    // something new.
    if (qp.req.restart_psn == from_psn && now - qp.req.restart_tsc < restart_guard(qp)) {
        return false;
    }
    rewind(qp, from_psn);
    qp.req.probing = false;
    qp.req.window.lost();
    qp.req.restart_psn = from_psn;
    qp.req.restart_tsc = now;
    return true;
}

void resend_selected(SwroceQp& qp, std::uint32_t nak_psn, std::uint32_t missing,
                     std::uint64_t now) noexcept {
    const std::uint32_t psn = missing;
    RequesterState& req = qp.req;
    // The peer NAKs a PSN again only after 40 us (nak_missing), or when a probe asks: not the
    // round trips a go-back-N restart waits out, or a lost resend would wait for a probe.
    if (req.resent_psn == psn) {
        const std::uint64_t age = now - req.resent_tsc;
        if (age < qp.device->tsc_hz / 50'000) {
            return; // NAKed again before our resend could have arrived
        }
        // A go-back-N peer whose MSN happens to fall among our PSNs NAKs it again and again: it
        // dropped what came after it. Only NAKs a round trip after the resend count (earlier
        // ones were on their way), and three resends of one packet in a row lost are rare.
        if (age >= restart_guard(qp) && ++req.resent_repeats >= 3) {
            req.resent_psn = no_psn;
            req.resent_repeats = 0;
            (void)fast_restart(qp, nak_psn, now);
            return;
        }
    } else {
        req.resent_repeats = 0;
    }
    SendWqe* wqe = wqe_holding(qp, psn);
    if (wqe == nullptr) {
        return;
    }
    if (wqe->is_read_or_atomic()) {
        // The request itself was lost. READs go back from it as with any peer: the restart asks
        // each READ after it for what it still lacks too, which under loss repairs more than the
        // one request (bench/loss read_bw 64 KiB, 10 % both ways: 361 MB/s asked alone, 758
        // going back). The later PSNs of a READ's span are its responses' and never come as
        // requests: the peer sees them missing too, and they ask for nothing.
        if (psn == wqe->first_psn) {
            (void)fast_restart(qp, psn, now);
        }
        return;
    }
    if (!req.resends.push(psn)) {
        return; // queued already, or no room: the peer NAKs it again
    }
    req.repairs_pending = true;
    req.resent_psn = psn;
    req.resent_tsc = now;
    // The window stays: it bounds what one loss costs a go-back-N peer, and here a loss costs
    // its one packet (the peer keeps a whole window, ReorderBuffer::selective_repeat_reach).
    req.timing = false; // Karn: no round-trip sample across a resend
    ++qp.device->counters_of(qp).selective_resends;
}

void ask_for_responses(SwroceQp& qp, SendWqe& wqe, std::uint32_t from, std::uint32_t end,
                       std::uint64_t now) noexcept {
    if (wqe.repair_end > wqe.repair_from) { // not sent yet: one range, sent by its runs
        from = std::min(from, wqe.repair_from);
        end = std::max(end, wqe.repair_end);
    }
    const std::int32_t timed = roce::psn_diff(qp.req.repair_timed_psn, wqe.first_psn);
    if (qp.req.repair_timed_psn != no_psn && timed >= static_cast<std::int32_t>(from) &&
        timed < static_cast<std::int32_t>(end)) {
        qp.req.repair_timed_psn = no_psn; // Karn: asked for again, its answer times neither ask
    }
    if (from == 0 && qp.req.timing && qp.req.timed_psn == wqe.first_psn) {
        qp.req.timing = false; // Karn: the READ's first response asked for again
    }
    wqe.repair_from = from;
    wqe.repair_end = end;
    wqe.repair_tsc = now;
    wqe.response_reach = std::max(wqe.response_reach, end);
    qp.req.repairs_pending = true;
    qp.req.window.lost();
    ++qp.device->counters_of(qp).read_repairs;
}

bool ask_for_missing(SwroceQp& qp, SendWqe& wqe, std::uint32_t upto, std::uint64_t now) noexcept {
    bool asked = false;
    std::uint32_t from = std::max(wqe.response_reach, wqe.responses);
    while (from < upto) {
        if (wqe.placed(qp.map_of(wqe), from)) {
            ++from;
            continue;
        }
        std::uint32_t end = from + 1;
        while (end < upto && !wqe.placed(qp.map_of(wqe), end)) {
            ++end;
        }
        ask_for_responses(qp, wqe, from, end, now);
        asked = true;
        from = end;
    }
    wqe.response_reach = std::max(wqe.response_reach, upto);
    return asked;
}

void chase_responses(SwroceQp& qp, SendWqe& wqe, std::uint64_t now) noexcept {
    if (wqe.response_reach < wqe.psn_span && ask_for_missing(qp, wqe, wqe.psn_span, now)) {
        return;
    }
    if (now - wqe.repair_tsc < repair_guard(qp)) {
        return; // what was asked for may still be on its way
    }
    ask_for_responses(qp, wqe, wqe.responses, wqe.first_gap_end(qp.map_of(wqe)), now);
}

namespace {

// The PSN the head of the send queue sends next (where a restart resends from), or no_psn.
std::uint32_t next_psn_to_send(SwroceQp& qp) noexcept {
    if (qp.req.send_offset >= qp.send_queue.size()) {
        return no_psn;
    }
    const SendWqe& wqe = qp.send_queue.at(qp.req.send_offset);
    if (!wqe.assigned || wqe.is_local()) {
        return no_psn;
    }
    return wqe.is_read_or_atomic() ? wqe.first_psn : roce::psn_add(wqe.first_psn, wqe.next_packet);
}

// Go-back-N learns of a loss from the packets behind it; when nothing is behind it (the tail of
// what was sent, or the ACK that would open the window, was lost) nothing would come back until
// the transport timer. A probe resends the last packet sent, alone and asking for an ACK, as
// TCP's tail loss probe does. The responder's answer says where it stands (IBTA 9.7.5.1.3): it
// had everything (a slow peer, or a lost ACK): a duplicate, re-ACKed, nothing else resent; the
// last packet alone was lost: taken and ACKed; more was lost: out of sequence, NAKed, and
// go-back-N restarts from the first missing packet. A needless probe costs one packet.
void probe_stall(SwroceQp& qp, std::uint64_t now) noexcept {
    RequesterState& req = qp.req;
    if (req.rnr_resume > now || !roce::psn_after(req.sent_psn, req.acked_psn)) {
        return; // waiting out an RNR NAK is not a stall, nor is having nothing unacknowledged
    }
    // Packets sent once that wait at our own port to go again (a restart the window lets go, or
    // the probe itself) are no stall of the peer's: look again a probe interval after they left.
    const std::uint32_t next = next_psn_to_send(qp);
    const bool resending = next != no_psn && !roce::psn_after(next, req.sent_psn);
    if (resending && (req.probing ? !roce::psn_after(next, req.probe_psn)
                                  : roce::psn_diff(next, req.acked_psn) <=
                                        static_cast<std::int32_t>(req.window.packets()))) {
        req.probe_deadline = now + probe_wait(qp, req.probes_without_progress, read_at_tail(qp));
        return;
    }
    // A READ at the tail is not resent alone: from the first unacknowledged PSN on, every READ is
    // asked again for the responses it still lacks, and an earlier READ may lack some too. Behind
    // a restart the window holds back, the probe is the restart's last packet: the last ever
    // sent would move the resend point past the packets still to go again.
    const SendWqe* last = wqe_holding(qp, req.sent_psn);
    const bool read = last != nullptr && last->wr.opcode == rdma::WrOpcode::rdma_read;
    req.probe_psn = read        ? roce::psn_next(req.acked_psn)
                    : resending ? roce::psn_sub(next, 1)
                                : req.sent_psn;
    rewind(qp, req.probe_psn);
    req.probing = true;
    ++qp.device->counters_of(qp).probes;
    ++req.probes_without_progress;
    req.probe_deadline = now + probe_wait(qp, req.probes_without_progress, read_at_tail(qp));
}

} // namespace

void check_timer(SwroceQp& qp, std::uint64_t now) noexcept {
    if (qp.req.retransmit_deadline == 0) {
        return;
    }
    if (now < qp.req.retransmit_deadline) {
        if (now >= qp.req.probe_deadline) {
            probe_stall(qp, now);
        }
        return;
    }
    if (qp.req.retries_left-- <= 0) {
        fail_qp(qp, rdma::WcStatus::retry_exceeded);
        return;
    }
    count_event(qp, &QpCounters::timeouts, &SwroceCounters::timeouts);
    rewind(qp, roce::psn_next(qp.req.acked_psn));
    qp.req.probing = false;
    qp.req.window.timed_out();
    qp.req.restart_psn = no_psn;
    arm_timer(qp, now);
}

} // namespace prdma::swroce
