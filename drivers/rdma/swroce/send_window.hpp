// The requester's window of unacknowledged packets. Go-back-N resends everything in flight
// behind a lost packet, so the window is what one loss costs: it shrinks on loss and grows back
// while packets are acknowledged (additive increase, multiplicative decrease, as TCP's congestion
// window), so a clean link runs at the full window and a lossy one at a window that keeps the
// resent share small.
#pragma once

#include <algorithm>
#include <cstdint>

namespace prdma::swroce {

class SendWindow {
public:
    // Enough in flight to keep a 100 Gb/s link busy for the microseconds a software peer takes
    // to answer; a loss then costs at most this many packets.
    static constexpr std::uint32_t max_packets = 256;
    // Below this the requester would wait for an ACK after every few packets.
    static constexpr std::uint32_t min_packets = 64;
    // Inside a long message every this many packets ask for an ACK (at most): progress is
    // acknowledged before the message ends, and a loss is noticed within that many packets.
    static constexpr std::uint32_t max_ack_req_interval = 32;
    // A selective-repeat peer's (ack_often): a lost ACK must not leave the whole window waiting
    // for a probe, and a loss costs no window to resend, so ACKs come four times as often.
    static constexpr std::uint32_t often_ack_req_interval = 8;

    [[nodiscard]] std::uint32_t packets() const noexcept { return packets_; }

    // Half a window between AckReqs: the ACK for the first half arrives while the second is
    // in flight, so a full window never waits on the transport timer.
    [[nodiscard]] std::uint32_t ack_req_interval() const noexcept {
        return std::min(ack_req_cap_, packets_ / 2);
    }
    void ack_often(bool often) noexcept {
        ack_req_cap_ = often ? often_ack_req_interval : max_ack_req_interval;
    }

    // `count` more packets acknowledged: one packet more of window per window acknowledged, and
    // one per eight acknowledged while below a quarter of the maximum, to climb out of a burst of
    // losses in a few round trips.
    void acknowledged(std::uint32_t count) noexcept {
        const std::uint32_t step = packets_ < max_packets / 4 ? min_packets : packets_;
        acked_ += count;
        while (acked_ >= step && packets_ < max_packets) {
            acked_ -= step;
            ++packets_;
        }
        if (packets_ == max_packets) {
            acked_ = 0;
        }
    }
    // A loss a NAK or a READ gap reported.
    void lost() noexcept {
        packets_ = std::max(min_packets, packets_ / 2);
        acked_ = 0;
    }
    // The transport timer expired: nothing came back for a whole timeout.
    void timed_out() noexcept {
        packets_ = min_packets;
        acked_ = 0;
    }

private:
    std::uint32_t packets_ = max_packets;
    std::uint32_t acked_ = 0;
    std::uint32_t ack_req_cap_ = max_ack_req_interval;
};

} // namespace prdma::swroce
