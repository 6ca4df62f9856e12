// The requester's timers, from the TSC: the transport timer (IBTA 9.7.6.1.3) and the RNR timer
// (table 45), and go-back-N restart points.
#include <algorithm>

#include <prdma/roce/psn.hpp>

#include "engine.hpp"

namespace prdma::swroce {

// IBTA: transport timer 4.096 us x 2^timeout; 0 means infinite.
std::uint64_t transport_timeout_cycles(const SwroceQp& qp) noexcept {
    if (qp.attr.timeout == 0) {
        return 0;
    }
    const double seconds =
        4.096e-6 * static_cast<double>(1ULL << std::min<unsigned>(qp.attr.timeout, 31));
    return static_cast<std::uint64_t>(seconds * static_cast<double>(qp.device->tsc_hz));
}

// IBTA RNR NAK timer codes (table 45), in microseconds; code 0 is 655.36 ms.
std::uint64_t rnr_timer_cycles(const SwroceDevice& dev, std::uint8_t code) noexcept {
    static constexpr std::uint32_t micros[32] = {
        655360, 10,    20,    30,    40,    60,     80,     120,    160,    240,   320,
        480,    640,   960,   1280,  1920,  2560,   3840,   5120,   7680,   10240, 15360,
        20480,  30720, 40960, 61440, 81920, 122880, 163840, 245760, 327680, 491520};
    return micros[code & 31U] * dev.tsc_hz / 1'000'000;
}

void arm_timer(SwroceQp& qp, std::uint64_t now) noexcept {
    const std::uint64_t timeout = transport_timeout_cycles(qp);
    qp.req.retransmit_deadline = timeout == 0 ? 0 : now + timeout;
}

void rewind(SwroceQp& qp, std::uint32_t from_psn) noexcept {
    for (std::uint32_t i = 0; i < qp.send_queue.size(); ++i) {
        SendWqe& wqe = qp.send_queue.at(i);
        if (!wqe.assigned) {
            break;
        }
        const std::int32_t into = roce::psn_diff(from_psn, wqe.first_psn);
        // A READ keeps the responses it has; it is asked again for the rest.
        wqe.next_packet =
            i == 0 && into > 0 && !wqe.is_read_or_atomic() ? static_cast<std::uint32_t>(into) : 0;
    }
    qp.req.send_offset = 0;
    ++qp.device->counters_of(qp).retransmissions;
    ++qp.counters.retransmissions;
}

void check_timer(SwroceQp& qp, std::uint64_t now) noexcept {
    if (qp.req.retransmit_deadline == 0 || now < qp.req.retransmit_deadline) {
        return;
    }
    if (qp.req.retries_left-- <= 0) {
        fail_qp(qp, rdma::WcStatus::retry_exceeded);
        return;
    }
    rewind(qp, qp.send_queue.empty() ? qp.req.send_psn : qp.send_queue.front().first_psn);
    arm_timer(qp, now);
}

} // namespace prdma::swroce
