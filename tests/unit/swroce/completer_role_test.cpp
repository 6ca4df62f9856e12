// The completer role (completer.cpp, with the restarts of retransmit.cpp) driven by crafted ACKs,
// NAKs and READ responses for work the requester really put on the wire: completions in send-queue
// order, go-back-N restart points, the QP's fall into ERR, and what a hostile peer's answers do.
#include <array>
#include <cstring>

#include <gtest/gtest.h>

#include <prdma/roce/psn.hpp>

#include "role_fixture.hpp"

namespace prdma::swroce::test {
namespace {

using roce::Opcode;

class CompleterRoleTest : public RoleTest {
protected:
    // `count` single-packet WRITEs, wr_id 1..count, transmitted: PSNs sq_psn .. sq_psn+count-1.
    SentFrames transmit_writes(std::uint64_t count, std::uint64_t now) {
        for (std::uint64_t i = 0; i < count; ++i) {
            post_deferred(write_wr(i + 1, i * 1024, 100, 0x10000 + i * 0x1000));
        }
        SentFrames sent = run_requester_once(now);
        EXPECT_EQ(sent.size(), count);
        return sent;
    }
    // On the port's receive queue: `stale` ACKs for a PSN already behind (harmless), then the
    // ACK for sq_psn.
    void queue_answer_behind(std::uint32_t stale) {
        for (std::uint32_t i = 0; i <= stale; ++i) {
            roce::FrameHeaders ack =
                from_peer(Opcode::rc_acknowledge, i < stale ? sq_psn - 1 : sq_psn);
            ack.aeth = {roce::ack_syndrome(), 0};
            deliver(ack);
        }
    }
    // A READ of `packets` whole MTUs (wr_id 1, from PSN sq_psn), sent; the bytes its responses
    // carry.
    std::vector<std::uint8_t> send_read(std::uint32_t packets, std::uint8_t seed,
                                        std::uint64_t now) {
        post_deferred(read_wr(1, 0, std::size_t{packets} * mtu, 0x50000));
        EXPECT_EQ(run_requester_once(now).size(), 1U);
        return pattern(std::size_t{packets} * mtu, seed);
    }
    // Response `index` of a READ of `packets` whole MTUs whose first PSN is `first` (the READ
    // sent first: sq_psn), with its bytes of `data`.
    void answer_read(std::span<const std::uint8_t> data, std::uint32_t packets, std::uint32_t index,
                     std::uint64_t now, std::uint32_t first = sq_psn) {
        const Opcode opcode = index == 0             ? Opcode::rc_rdma_read_response_first
                              : index + 1 == packets ? Opcode::rc_rdma_read_response_last
                                                     : Opcode::rc_rdma_read_response_middle;
        roce::FrameHeaders h = from_peer(opcode, first + index);
        h.aeth = {roce::ack_syndrome(), 1};
        complete_with(h, now, data.subspan(std::size_t{index} * mtu, mtu));
    }
    // The READ `wr_id` completed alone, with `data` at the start of the local region, and no
    // response came twice.
    void expect_read_completed(std::uint64_t wr_id, std::span<const std::uint8_t> data) {
        const auto wcs = send_completions();
        ASSERT_EQ(wcs.size(), 1U);
        expect_completion(wcs[0], wr_id, rdma::WcStatus::success);
        EXPECT_EQ(std::memcmp(local(0), data.data(), data.size()), 0);
        EXPECT_EQ(counters().duplicates, 0U);
    }
    static void expect_completion(const rdma::WorkCompletion& wc, std::uint64_t wr_id,
                                  rdma::WcStatus status) {
        EXPECT_EQ(wc.wr_id, wr_id);
        EXPECT_EQ(wc.status, status) << rdma::wc_status_name(wc.status);
    }
};

TEST_F(CompleterRoleTest, AnAckCompletesTheWqesItCoversInOrder) {
    const std::uint64_t now = tsc();
    post_deferred(write_wr(1, 0, 3 * mtu - 72, 0x10000)); // sq_psn .. +2
    post_deferred(write_wr(2, 4096, 100, 0x20000));       // +3
    post_deferred(write_wr(3, 8192, 100, 0x30000));       // +4
    ASSERT_EQ(run_requester_once(now).size(), 5U);

    acknowledge(sq_psn + 1, roce::ack_syndrome(), now);
    EXPECT_TRUE(send_completions().empty()) << "WQE 1 ends at +2";
    EXPECT_EQ(qp().req.acked_psn, sq_psn + 1);

    acknowledge(sq_psn + 3, roce::ack_syndrome(), now);
    const auto wcs = send_completions();
    ASSERT_EQ(wcs.size(), 2U);
    expect_completion(wcs[0], 1, rdma::WcStatus::success);
    EXPECT_EQ(wcs[0].opcode, rdma::WcOpcode::rdma_write);
    EXPECT_EQ(wcs[0].byte_len, 3 * mtu - 72);
    expect_completion(wcs[1], 2, rdma::WcStatus::success);
    EXPECT_EQ(qp().send_queue.size(), 1U);
    EXPECT_NE(qp().req.retransmit_deadline, 0U) << "+4 is still unacknowledged";

    acknowledge(sq_psn + 4, roce::ack_syndrome(), now);
    const auto last = send_completions();
    ASSERT_EQ(last.size(), 1U);
    expect_completion(last[0], 3, rdma::WcStatus::success);
    EXPECT_TRUE(qp().send_queue.empty());
    EXPECT_EQ(qp().req.retransmit_deadline, 0U) << "nothing outstanding: no transport timer";
}

TEST_F(CompleterRoleTest, ASequenceErrorNakRestartsFromTheNakedPsnOnce) {
    const std::uint64_t now = tsc();
    const SentFrames sent = transmit_writes(4, now);
    const std::uint32_t window = qp().req.window.packets();
    acknowledge(sq_psn + 1, roce::nak_syndrome(roce::NakCode::psn_sequence_error), now);

    const auto wcs = send_completions();
    ASSERT_EQ(wcs.size(), 1U) << "the NAK acknowledges what came before it";
    expect_completion(wcs[0], 1, rdma::WcStatus::success);
    EXPECT_EQ(counters().naks_received, 1U);
    EXPECT_EQ(counters().retransmissions, 1U);
    EXPECT_EQ(qp().counters.retransmissions, 1U);
    EXPECT_LT(qp().req.window.packets(), window) << "a loss shrinks the window";
    EXPECT_EQ(qp().state(), rdma::QpState::rts);

    const SentFrames resent = run_requester_once(now);
    ASSERT_EQ(resent.size(), 3U) << "go back N from the NAKed PSN, not from the start";
    for (std::size_t i = 0; i < resent.size(); ++i) {
        EXPECT_EQ(resent[i].bth.psn, sq_psn + 1 + i);
        EXPECT_EQ(resent[i].opcode(), sent[i + 1].opcode());
        ASSERT_EQ(resent[i].payload.size(), sent[i + 1].payload.size());
        EXPECT_EQ(std::memcmp(resent[i].payload.data(), sent[i + 1].payload.data(),
                              resent[i].payload.size()),
                  0);
        EXPECT_EQ(resent[i].reth, sent[i + 1].reth);
    }

    // The same NAK again (sent before our restart could reach the responder): the same loss.
    acknowledge(sq_psn + 1, roce::nak_syndrome(roce::NakCode::psn_sequence_error), now);
    EXPECT_EQ(counters().naks_received, 2U);
    EXPECT_EQ(counters().retransmissions, 1U) << "one loss, one restart";
    EXPECT_EQ(run_requester_once(now).size(), 0U);
    EXPECT_TRUE(send_completions().empty());
}

TEST_F(CompleterRoleTest, ARestartInsideAMessageResumesAtTheNakedPacket) {
    const std::uint64_t now = tsc();
    post_deferred(write_wr(1, 0, 5 * mtu, 0x10000)); // sq_psn .. +4
    const SentFrames sent = run_requester_once(now);
    ASSERT_EQ(sent.size(), 5U);
    acknowledge(sq_psn + 2, roce::nak_syndrome(roce::NakCode::psn_sequence_error), now);
    EXPECT_TRUE(send_completions().empty()) << "the WRITE is not done";
    EXPECT_EQ(qp().req.acked_psn, sq_psn + 1);

    const SentFrames resent = run_requester_once(now);
    ASSERT_EQ(resent.size(), 3U) << "packets 2..4 again, not the whole message";
    EXPECT_EQ(resent[0].bth.psn, sq_psn + 2);
    EXPECT_EQ(resent[0].opcode(), Opcode::rc_rdma_write_middle);
    EXPECT_EQ(std::memcmp(resent[0].payload.data(), sent[2].payload.data(), mtu), 0);
    EXPECT_EQ(resent[2].opcode(), Opcode::rc_rdma_write_last);
    EXPECT_TRUE(resent[2].bth.ack_req);
}

TEST_F(CompleterRoleTest, AFastRestartForTheSameLossIsTakenOncePerGuardTime) {
    const std::uint64_t now = tsc();
    (void)transmit_writes(3, now);
    const std::uint64_t restarts = counters().retransmissions;
    EXPECT_TRUE(fast_restart(qp(), sq_psn + 1, now));
    EXPECT_FALSE(fast_restart(qp(), sq_psn + 1, now)) << "the same loss reported again at once";
    EXPECT_EQ(counters().retransmissions, restarts + 1);
    EXPECT_EQ(run_requester_once(now).size(), 2U);
    // A second later (far beyond two round trips) the same PSN is a new loss.
    EXPECT_TRUE(fast_restart(qp(), sq_psn + 1, now + dev().tsc_hz));
    EXPECT_EQ(counters().retransmissions, restarts + 2);
    EXPECT_EQ(run_requester_once(now + dev().tsc_hz).size(), 2U);
}

TEST_F(CompleterRoleTest, AnErrorNakFailsItsWqeWithItsStatusAndFlushesTheRest) {
    struct Case {
        roce::NakCode code;
        rdma::WcStatus status;
    };
    const Case cases[] = {
        {roce::NakCode::remote_access_error, rdma::WcStatus::remote_access_error},
        {roce::NakCode::invalid_request, rdma::WcStatus::remote_invalid_request_error},
        {roce::NakCode::remote_operational_error, rdma::WcStatus::remote_operation_error},
    };
    for (const Case& c : cases) {
        SCOPED_TRACE(rdma::wc_status_name(c.status));
        connect(rq_psn, sq_psn);
        post_receive(9, 0, 64);
        const std::uint64_t now = tsc();
        (void)transmit_writes(3, now);
        const std::uint64_t naks = counters().naks_received;
        acknowledge(sq_psn + 1, roce::nak_syndrome(c.code), now);

        const auto wcs = send_completions();
        ASSERT_EQ(wcs.size(), 3U);
        expect_completion(wcs[0], 1, rdma::WcStatus::success); // before the NAKed PSN
        expect_completion(wcs[1], 2, c.status);
        expect_completion(wcs[2], 3, rdma::WcStatus::wr_flush_error);
        const auto receives = recv_completions();
        ASSERT_EQ(receives.size(), 1U);
        expect_completion(receives[0], 9, rdma::WcStatus::wr_flush_error);
        EXPECT_EQ(qp().state(), rdma::QpState::err);
        EXPECT_TRUE(qp().send_queue.empty());
        EXPECT_EQ(counters().naks_received, naks + 1);
        EXPECT_EQ(run_requester_once(now).size(), 0U) << "a QP in ERR sends nothing";
    }
}

TEST_F(CompleterRoleTest, AnRnrNakArmsTheRnrTimerAndCompletesNothing) {
    const std::uint64_t now = tsc();
    for (std::uint64_t id = 1; id <= 2; ++id) {
        rdma::SendWr wr = write_wr(id, id * 1024, 100, 0);
        wr.opcode = rdma::WrOpcode::send;
        post_deferred(wr);
    }
    ASSERT_EQ(run_requester_once(now).size(), 2U);
    const int rnr_retries = qp().req.rnr_retries_left;
    constexpr std::uint8_t timer_code = 14;
    acknowledge(sq_psn, roce::rnr_nak_syndrome(timer_code), now);

    EXPECT_TRUE(send_completions().empty());
    EXPECT_EQ(qp().send_queue.size(), 2U);
    EXPECT_EQ(qp().state(), rdma::QpState::rts);
    EXPECT_EQ(counters().naks_received, 1U);
    EXPECT_EQ(qp().req.rnr_retries_left, rnr_retries - 1);
    const std::uint64_t resume = now + rnr_timer_cycles(dev(), timer_code);
    EXPECT_EQ(qp().req.rnr_resume, resume);
    EXPECT_EQ(qp().req.retransmit_deadline, 0U) << "no transport timeout while told to wait";

    EXPECT_EQ(run_requester_once(now).size(), 0U);
    EXPECT_EQ(run_requester_once(resume - 1).size(), 0U);
    const SentFrames resent = run_requester_once(resume);
    ASSERT_EQ(resent.size(), 2U) << "both SENDs again, from the NAKed one";
    EXPECT_EQ(resent[0].bth.psn, sq_psn);
    EXPECT_EQ(resent[0].opcode(), Opcode::rc_send_only);
    EXPECT_EQ(resent[1].bth.psn, sq_psn + 1);
}

// Everything sent acknowledged, the rest of the message not sent yet (its window was full, then
// other QPs had the port): nothing is lost, so no probe and no timeout. The transport timer ran on
// while a packet was merely numbered, and a probe then named the last PSN sent, already
// acknowledged, and held back every later packet: under 1,024 QPs sharing a congested port such
// QPs sent nothing until retry_exceeded.
TEST_F(CompleterRoleTest, NothingUnacknowledgedIsNeverProbedOrTimedOut) {
    const std::uint32_t window = qp().req.window.packets();
    constexpr std::uint32_t beyond = 8;
    ASSERT_LE(std::size_t{window + beyond} * mtu, local_length);
    post_deferred(write_wr(1, 0, (window + beyond) * mtu, 0x70000000));
    const std::uint64_t start = tsc();
    std::uint32_t sent = 0;
    for (std::size_t more = 1; more > 0; sent += static_cast<std::uint32_t>(more)) {
        more = run_requester_once(start).size();
    }
    ASSERT_EQ(sent, window) << "the window stops the WRITE inside";
    acknowledge(sq_psn + window - 1, roce::ack_syndrome(), start);
    EXPECT_EQ(qp().req.retransmit_deadline, 0U) << "every PSN sent is acknowledged";
    acknowledge(sq_psn + window + beyond - 1, roce::ack_syndrome(), start);
    EXPECT_EQ(counters().rx_bad_ack, 1U) << "an ACK for packets numbered but never sent";
    EXPECT_TRUE(send_completions().empty());

    // The requester's turn comes late: far beyond the probe's wait and the timer's retries.
    const std::uint64_t timeout = transport_timeout_cycles(qp());
    const std::uint64_t step = dev().tsc_hz / 1000;
    std::uint64_t now = start;
    for (; now < start + (qp().req.retries_left + 2) * timeout; now += step) {
        check_timer(qp(), now);
    }
    EXPECT_EQ(counters().probes, 0U);
    EXPECT_EQ(counters().timeouts, 0U);
    EXPECT_EQ(qp().state(), rdma::QpState::rts);
    const SentFrames rest = run_requester_once(now);
    ASSERT_EQ(rest.size(), beyond) << "the rest of the WRITE goes at its turn";
    EXPECT_EQ(rest[0].bth.psn, sq_psn + window);
    EXPECT_NE(qp().req.retransmit_deadline, 0U) << "sent again: the timer runs";
    acknowledge(sq_psn + window + beyond - 1, roce::ack_syndrome(), now);
    const auto wcs = send_completions();
    ASSERT_EQ(wcs.size(), 1U);
    expect_completion(wcs[0], 1, rdma::WcStatus::success);
}

// A restart waits for its turn at a congested port: that wait is ours, not a stall of the peer's.
// A probe taken then rewound the message to its last packet sent and dropped the restart point,
// so the packets between were never resent and the responder's NAK for them fell inside the
// restart's guard time.
TEST_F(CompleterRoleTest, ARestartNotYetSentIsNotProbedOver) {
    const std::uint64_t start = tsc();
    post_deferred(write_wr(1, 0, 6 * mtu, 0x10000)); // sq_psn .. +5
    ASSERT_EQ(run_requester_once(start).size(), 6U);
    acknowledge(sq_psn + 1, roce::nak_syndrome(roce::NakCode::psn_sequence_error), start);
    ASSERT_EQ(qp().req.acked_psn, sq_psn);
    for (std::uint64_t now = start; now < start + transport_timeout_cycles(qp()) / 2;
         now += dev().tsc_hz / 1000) {
        check_timer(qp(), now);
    }
    EXPECT_EQ(counters().probes, 0U) << "the restart has not gone out yet";
    const SentFrames resent = run_requester_once(start + transport_timeout_cycles(qp()) / 2);
    ASSERT_EQ(resent.size(), 5U) << "go-back-N from the NAKed packet";
    for (std::size_t i = 0; i < resent.size(); ++i) {
        EXPECT_EQ(resent[i].bth.psn, sq_psn + 1 + i);
    }
}

// A restart the halved window holds back waits for the peer's ACK; if that ACK is lost nothing
// else comes back, so a probe must go, and it resends the restart's last packet: probing the
// last packet ever sent would move the resend point past what the restart still has to resend.
TEST_F(CompleterRoleTest, ARestartTheWindowHoldsBackIsProbedAtItsLastPacket) {
    const std::uint32_t window = qp().req.window.packets();
    ASSERT_LE(std::size_t{window} * mtu, local_length);
    post_deferred(write_wr(1, 0, window * mtu, 0x70000000));
    const std::uint64_t start = tsc();
    std::uint32_t sent = 0;
    for (std::size_t more = 1; more > 0; sent += static_cast<std::uint32_t>(more)) {
        more = run_requester_once(start).size();
    }
    ASSERT_EQ(sent, window);
    acknowledge(sq_psn + 1, roce::nak_syndrome(roce::NakCode::psn_sequence_error), start);
    const std::uint32_t halved = qp().req.window.packets();
    ASSERT_LT(halved + 1, window);
    std::uint32_t resent = 0;
    for (std::size_t more = 1; more > 0; resent += static_cast<std::uint32_t>(more)) {
        more = run_requester_once(start).size();
    }
    ASSERT_EQ(resent, halved) << "the restart up to the halved window";
    // The ACK for the restart is lost.
    std::uint64_t now = start;
    for (; now < start + transport_timeout_cycles(qp()) / 4; now += dev().tsc_hz / 1000) {
        check_timer(qp(), now);
    }
    EXPECT_EQ(counters().probes, 1U) << "one probe, not one per look while it waits to go";
    const SentFrames probe = run_requester_once(now);
    ASSERT_EQ(probe.size(), 1U);
    EXPECT_EQ(probe[0].bth.psn, sq_psn + halved);
    EXPECT_TRUE(probe[0].bth.ack_req);
}

// A QP that only READs from a selective-repeat peer times each READ to its first response, and
// probes a stall after three of its shortest round trips: responses stream back to back, so
// silence means they stopped (a lost READ request, or a READ's tail lost), while a READ's sample
// may hold a queue of responses. It timed nothing and waited 1 ms for every probe: read_bw 64 KiB
// at 10 % loss both ways spent half its run waiting.
TEST_F(CompleterRoleTest, ASelectiveQpThatReadsProbesAStallAfterThreeOfItsShortestRoundTrips) {
    qp().attr->selective_repeat = true;
    const std::uint64_t us = dev().tsc_hz / 1'000'000;
    constexpr std::uint32_t packets = 8;
    const std::uint64_t t0 = tsc();
    const std::vector<std::uint8_t> first = send_read(packets, 0x52, t0);
    answer_read(first, packets, 0, t0 + 30 * us);
    EXPECT_EQ(qp().req.min_rtt, 30 * us) << "the READ's first response timed it";
    for (std::uint32_t i = 1; i < packets; ++i) {
        answer_read(first, packets, i, t0 + 30 * us);
    }
    ASSERT_EQ(send_completions().size(), 1U);
    // The next READ's first response waits 600 us behind a queue: the shortest stays.
    const std::uint64_t t1 = t0 + 100 * us;
    const std::uint32_t second_psn = sq_psn + packets;
    post_deferred(read_wr(2, 0, std::size_t{packets} * mtu, 0x50000));
    ASSERT_EQ(run_requester_once(t1).size(), 1U);
    check_timer(qp(), t1 + 500 * us);
    EXPECT_EQ(counters().probes, 0U) << "sent with nothing flowing: no stall before responses came";
    const std::vector<std::uint8_t> second = pattern(std::size_t{packets} * mtu, 0x53);
    const std::uint64_t quiet = t1 + 600 * us;
    for (std::uint32_t i = 0; i < 5; ++i) { // 5 to 7 lost, the LAST among them
        answer_read(second, packets, i, quiet, second_psn);
    }
    EXPECT_EQ(qp().req.min_rtt, 30 * us);
    EXPECT_EQ(qp().req.srtt, 0U) << "a READ's sample is no AckReq's";
    check_timer(qp(), quiet + 80 * us);
    EXPECT_EQ(counters().probes, 0U) << "within three of its shortest round trips";
    check_timer(qp(), quiet + 100 * us);
    EXPECT_EQ(counters().probes, 1U) << "not three of the 600 us one, nor 1 ms";
    const SentFrames probe = run_requester_once(quiet + 100 * us);
    ASSERT_EQ(probe.size(), 1U);
    EXPECT_EQ(probe[0].bth.psn, second_psn + 5);
    EXPECT_EQ(probe[0].reth.dma_length, 3 * mtu) << "what the READ still lacks";
    for (std::uint32_t i = 5; i < packets; ++i) {
        answer_read(second, packets, i, quiet + 150 * us, second_psn);
    }
    expect_read_completed(2, second);
}

// A selective QP that READ once and now WRITEs probes a WRITE's stall after three smoothed round
// trips, not after three of the shortest: an ACK comes a round trip with its queue after the
// packet that asked for it, and a needless probe holds the window until it is answered.
TEST_F(CompleterRoleTest, ASelectiveQpThatReadOnceProbesItsWritesByTheirSmoothedRoundTrip) {
    qp().attr->selective_repeat = true;
    const std::uint64_t us = dev().tsc_hz / 1'000'000;
    const std::uint64_t t0 = tsc();
    const std::vector<std::uint8_t> data = send_read(1, 0x55, t0);
    answer_read(data, 1, 0, t0 + 30 * us);
    ASSERT_EQ(send_completions().size(), 1U);
    ASSERT_EQ(qp().req.min_rtt, 30 * us);
    // A WRITE answered 300 us on, then another sent with nothing unacknowledged.
    const std::uint64_t t1 = t0 + 100 * us;
    post_deferred(write_wr(2, 0, 100, 0x10000));
    ASSERT_EQ(run_requester_once(t1).size(), 1U);
    acknowledge(sq_psn + 1, roce::ack_syndrome(), t1 + 300 * us);
    ASSERT_EQ(qp().req.srtt, 300 * us);
    const std::uint64_t t2 = t1 + 400 * us;
    post_deferred(write_wr(3, 0, 100, 0x10000));
    ASSERT_EQ(run_requester_once(t2).size(), 1U);
    check_timer(qp(), t2 + 800 * us);
    EXPECT_EQ(counters().probes, 0U) << "within three smoothed round trips (900 us)";
    check_timer(qp(), t2 + 1000 * us);
    EXPECT_EQ(counters().probes, 1U);
}

// Toward a go-back-N peer (rxe, a NIC) a QP that only READs keeps the 1 ms probe floor: its
// probes ask every READ again from its first gap, and nothing there was measured against a peer
// that drops what follows a lost request.
TEST_F(CompleterRoleTest, AGoBackNQpThatReadsKeepsTheMillisecondProbeFloor) {
    const std::uint64_t us = dev().tsc_hz / 1'000'000;
    constexpr std::uint32_t packets = 8;
    const std::uint64_t t0 = tsc();
    const std::vector<std::uint8_t> data = send_read(packets, 0x54, t0);
    for (std::uint32_t i = 0; i < 5; ++i) {
        answer_read(data, packets, i, t0 + 30 * us);
    }
    EXPECT_EQ(qp().req.min_rtt, 0U) << "its READs are not timed";
    check_timer(qp(), t0 + 30 * us + 900 * us);
    EXPECT_EQ(counters().probes, 0U);
    check_timer(qp(), t0 + 30 * us + 1001 * us);
    EXPECT_EQ(counters().probes, 1U);
}

// A poller or the service that finds a queue of answers (as prdma-perf's 1,024-QP write_bw left
// one between two polls): timers judged before they are read time out QPs whose ACKs are already
// here, and each resends its whole window with nothing lost.
TEST_F(CompleterRoleTest, TimersWaitForAnswersAlreadyInThePortsQueue) {
    const std::uint64_t start = tsc();
    (void)transmit_writes(1, start); // sq_psn: the transport timer runs
    queue_answer_behind(17U * rx_burst_size);
    qp().req.retransmit_deadline = start; // expired while nobody polled
    qp().req.probe_deadline = start;
    for (int i = 0; i < 40; ++i) {
        (void)progress_group(dev(), 0);
    }
    EXPECT_EQ(counters().timeouts, 0U);
    EXPECT_EQ(counters().probes, 0U);
    const auto wcs = send_completions();
    ASSERT_EQ(wcs.size(), 1U);
    expect_completion(wcs[0], 1, rdma::WcStatus::success);
}

// One poll takes more than one burst while bursts come full: perftest's bandwidth loop posts to
// every QP between two polls, and reading 16 frames a poll its 1,024 QPs fell behind their ACKs
// and timed out in waves (3,469 timeouts in one 2-second run, nothing lost).
TEST_F(CompleterRoleTest, APollReadsOnWhileBurstsComeFull) {
    const std::uint64_t start = tsc();
    (void)transmit_writes(1, start);
    queue_answer_behind(3U * rx_burst_size);
    std::array<rdma::WorkCompletion, 4> wcs{};
    ASSERT_EQ(swroce_poll_cq(qp().send_cq, wcs.data(), 4), 1U) << "the answer behind three bursts";
    expect_completion(wcs[0], 1, rdma::WcStatus::success);
}

TEST_F(CompleterRoleTest, AnAnswerForAPsnNeverSentIsIgnoredAndCounted) {
    const std::uint64_t now = tsc();
    (void)transmit_writes(1, now);
    acknowledge(sq_psn + 5, roce::ack_syndrome(), now);
    EXPECT_EQ(counters().rx_bad_ack, 1U);
    acknowledge(sq_psn + 5, roce::nak_syndrome(roce::NakCode::remote_access_error), now);
    EXPECT_EQ(counters().rx_bad_ack, 2U);
    acknowledge(sq_psn + 1, roce::rnr_nak_syndrome(1), now);
    EXPECT_EQ(counters().rx_bad_ack, 3U);

    EXPECT_TRUE(send_completions().empty());
    EXPECT_EQ(qp().state(), rdma::QpState::rts);
    EXPECT_EQ(qp().req.acked_psn, roce::psn_sub(sq_psn, 1));
    EXPECT_EQ(qp().req.rnr_resume, 0U);
    EXPECT_EQ(counters().naks_received, 0U);

    acknowledge(sq_psn, roce::ack_syndrome(), now);
    const auto wcs = send_completions();
    ASSERT_EQ(wcs.size(), 1U) << "the WRITE still completes with the real ACK";
    expect_completion(wcs[0], 1, rdma::WcStatus::success);
}

class ReadCompleterTest : public CompleterRoleTest {
protected:
    static constexpr std::uint32_t length = 3000;
    static constexpr std::uint64_t peer_va = 0x50000;

    void SetUp() override {
        CompleterRoleTest::SetUp();
        data_ = pattern(length, 0x31);
        post_deferred(read_wr(1, 0, length, peer_va));
        const SentFrames sent = run_requester_once(tsc());
        ASSERT_EQ(sent.size(), 1U);
        EXPECT_EQ(sent[0].opcode(), Opcode::rc_rdma_read_request);
        EXPECT_EQ(sent[0].bth.psn, sq_psn);
        EXPECT_EQ(sent[0].reth.va, peer_va);
        EXPECT_EQ(sent[0].reth.dma_length, length);
        snapshot();
    }
    // Response `index` of the READ (PSN sq_psn + index) carrying bytes [from, to) of the data.
    void answer(Opcode opcode, std::uint32_t index, std::uint32_t from, std::uint32_t to,
                std::uint64_t now) {
        roce::FrameHeaders h = from_peer(opcode, sq_psn + index);
        h.aeth = {roce::ack_syndrome(), 1};
        complete_with(h, now, std::span<const std::uint8_t>(data_).subspan(from, to - from));
    }
    std::vector<std::uint8_t> data_;
};

// A lost response is asked for by itself: the responses past it are placed, not dropped, and the
// READ asked again only for the missing packet. (It used to be asked again from the missing byte
// to its end, so one loss in a 1 MiB READ replayed half of it on average.)
TEST_F(ReadCompleterTest, AResponseGapAsksForTheMissingResponseAlone) {
    const std::uint64_t now = tsc();
    answer(Opcode::rc_rdma_read_response_first, 0, 0, mtu, now);
    EXPECT_EQ(qp().send_queue.front().responses, 1U);
    // The MIDDLE is lost; the LAST arrives and is placed.
    answer(Opcode::rc_rdma_read_response_last, 2, 2 * mtu, length, now);
    EXPECT_EQ(counters().read_repairs, 1U);
    EXPECT_EQ(counters().retransmissions, 0U) << "no go-back-N restart";
    EXPECT_TRUE(send_completions().empty());
    EXPECT_EQ(std::memcmp(local(2 * mtu), data_.data() + 2 * mtu, length - 2 * mtu), 0);
    for (const std::size_t i : changed_bytes()) {
        EXPECT_TRUE(i - local_offset < mtu || i - local_offset >= 2 * mtu)
            << "byte " << i << ": written where nothing arrived";
    }

    const SentFrames again = run_requester_once(now);
    ASSERT_EQ(again.size(), 1U);
    EXPECT_EQ(again[0].opcode(), Opcode::rc_rdma_read_request);
    EXPECT_EQ(again[0].bth.psn, sq_psn + 1);
    EXPECT_EQ(again[0].reth.va, peer_va + mtu);
    EXPECT_EQ(again[0].reth.dma_length, mtu) << "the missing response alone";
    EXPECT_EQ(run_requester_once(now).size(), 0U) << "asked for once";

    answer(Opcode::rc_rdma_read_response_middle, 1, mtu, 2 * mtu, now);
    const auto wcs = send_completions();
    ASSERT_EQ(wcs.size(), 1U);
    expect_completion(wcs[0], 1, rdma::WcStatus::success);
    EXPECT_EQ(wcs[0].opcode, rdma::WcOpcode::rdma_read);
    EXPECT_EQ(wcs[0].byte_len, length);
    EXPECT_EQ(std::memcmp(local(0), data_.data(), length), 0);
    EXPECT_EQ(qp().req.retransmit_deadline, 0U);
}

// Reordering, not loss: the MIDDLE overtakes the FIRST. Nothing is asked for again (one response
// overtaken by one is within reorder_slack); the late FIRST and the LAST complete the READ. (Every
// response overtaken used to be asked for at once: at 5 % reordering, one READ request in twenty
// responses, and as many duplicates.)
TEST_F(ReadCompleterTest, AResponseOvertakenByOneIsNotAskedForAgain) {
    const std::uint64_t now = tsc();
    answer(Opcode::rc_rdma_read_response_middle, 1, mtu, 2 * mtu, now);
    EXPECT_EQ(counters().read_repairs, 0U);
    EXPECT_EQ(run_requester_once(now).size(), 0U);
    answer(Opcode::rc_rdma_read_response_first, 0, 0, mtu, now); // the late FIRST
    EXPECT_EQ(qp().send_queue.front().responses, 2U);
    answer(Opcode::rc_rdma_read_response_last, 2, 2 * mtu, length, now);
    EXPECT_EQ(counters().read_repairs, 0U);
    EXPECT_EQ(counters().retransmissions, 0U);
    EXPECT_EQ(run_requester_once(now).size(), 0U) << "nothing asked";
    const auto wcs = send_completions();
    ASSERT_EQ(wcs.size(), 1U);
    expect_completion(wcs[0], 1, rdma::WcStatus::success);
    EXPECT_EQ(std::memcmp(local(0), data_.data(), length), 0);
    EXPECT_EQ(counters().duplicates, 0U);
}

// A longer READ: a response overtaken by three later ones is still only late; one overtaken by
// four is lost and asked for alone; once the READ's LAST came, whatever is missing is asked for
// at once (nothing after it could show it lost).
TEST_F(CompleterRoleTest, ResponsesAreAskedForOnceFourLaterOnesOrTheLastOvertookThem) {
    const std::uint64_t now = tsc();
    constexpr std::uint32_t packets = 16;
    const std::uint32_t length = packets * mtu;
    const std::vector<std::uint8_t> data = send_read(packets, 0x52, now);
    const auto answer = [&](std::uint32_t index) { answer_read(data, packets, index, now); };
    const auto expect_asked = [&](std::uint32_t index) {
        const SentFrames sent = run_requester_once(now);
        ASSERT_EQ(sent.size(), 1U);
        EXPECT_EQ(sent[0].bth.psn, sq_psn + index);
        EXPECT_EQ(sent[0].reth.dma_length, mtu) << "the missing response alone";
    };
    for (const std::uint32_t i : {0U, 1U, 3U, 4U, 5U, 2U}) { // 2 overtaken by three
        answer(i);
    }
    EXPECT_EQ(counters().read_repairs, 0U);
    EXPECT_EQ(run_requester_once(now).size(), 0U);
    for (const std::uint32_t i : {6U, 7U, 9U, 10U, 11U}) { // 8 lost
        answer(i);
    }
    EXPECT_EQ(counters().read_repairs, 0U) << "overtaken by three: maybe only late";
    answer(12);
    EXPECT_EQ(counters().read_repairs, 1U);
    expect_asked(8);
    answer(13);
    answer(15); // 14 lost, and the LAST came
    EXPECT_EQ(counters().read_repairs, 2U);
    expect_asked(14);
    answer(8);
    answer(14);
    const auto wcs = send_completions();
    ASSERT_EQ(wcs.size(), 1U);
    expect_completion(wcs[0], 1, rdma::WcStatus::success);
    EXPECT_EQ(std::memcmp(local(0), data.data(), length), 0);
    EXPECT_EQ(counters().duplicates, 0U);
}

// Two READs in flight; a response of the first is lost. The responder goes on answering the
// second, and those responses are good: each READ takes its own, only the first READ's missing
// response is asked for, and both complete in send-queue order.
TEST_F(ReadCompleterTest, ALaterReadTakesItsResponsesWhileAnEarlierOneWaitsForALostOne) {
    const std::uint64_t now = tsc();
    constexpr std::size_t second_off = 8192;
    post_deferred(read_wr(2, second_off, length, peer_va + 0x10000)); // PSNs sq_psn+3 .. +5
    const SentFrames second = run_requester_once(now);
    ASSERT_EQ(second.size(), 1U);
    ASSERT_EQ(second[0].bth.psn, sq_psn + 3);

    answer(Opcode::rc_rdma_read_response_first, 0, 0, mtu, now);
    // The first READ's MIDDLE is lost.
    answer(Opcode::rc_rdma_read_response_last, 2, 2 * mtu, length, now);
    answer(Opcode::rc_rdma_read_response_first, 3, 0, mtu, now);
    answer(Opcode::rc_rdma_read_response_middle, 4, mtu, 2 * mtu, now);
    answer(Opcode::rc_rdma_read_response_last, 5, 2 * mtu, length, now);
    EXPECT_EQ(counters().read_repairs, 1U) << "the second READ passing it asks nothing more yet";
    ASSERT_EQ(qp().send_queue.size(), 2U);
    EXPECT_EQ(qp().send_queue.at(1).responses, 3U);
    EXPECT_TRUE(send_completions().empty()) << "the second READ may not complete before the first";

    const SentFrames again = run_requester_once(now);
    ASSERT_EQ(again.size(), 1U) << "only the first READ's missing response is asked for";
    EXPECT_EQ(again[0].bth.psn, sq_psn + 1);
    EXPECT_EQ(again[0].reth.dma_length, mtu);

    answer(Opcode::rc_rdma_read_response_middle, 1, mtu, 2 * mtu, now);
    const auto wcs = send_completions();
    ASSERT_EQ(wcs.size(), 2U);
    expect_completion(wcs[0], 1, rdma::WcStatus::success);
    expect_completion(wcs[1], 2, rdma::WcStatus::success);
    EXPECT_EQ(std::memcmp(local(0), data_.data(), length), 0);
    EXPECT_EQ(std::memcmp(local(second_off), data_.data(), length), 0);
    EXPECT_TRUE(qp().send_queue.empty());
    EXPECT_EQ(qp().req.acked_psn, sq_psn + 5);
    EXPECT_EQ(qp().req.retransmit_deadline, 0U);
}

// The tail of a READ is lost, which nothing of its own shows: the first response of the next
// READ does, and the tail alone is asked for.
TEST_F(ReadCompleterTest, ALaterReadsResponseAsksForTheLostTailOfAnEarlierOne) {
    const std::uint64_t now = tsc();
    post_deferred(read_wr(2, 8192, length, peer_va + 0x10000)); // PSNs sq_psn+3 .. +5
    ASSERT_EQ(run_requester_once(now).size(), 1U);
    answer(Opcode::rc_rdma_read_response_first, 0, 0, mtu, now);
    // The MIDDLE and LAST of the first READ are lost.
    answer(Opcode::rc_rdma_read_response_first, 3, 0, mtu, now);
    EXPECT_EQ(counters().read_repairs, 1U);
    const SentFrames again = run_requester_once(now);
    ASSERT_EQ(again.size(), 1U);
    EXPECT_EQ(again[0].bth.psn, sq_psn + 1);
    EXPECT_EQ(again[0].reth.va, peer_va + mtu);
    EXPECT_EQ(again[0].reth.dma_length, length - mtu) << "the tail, to the READ's end";
}

// A response asked for alone can be lost too. Until its answer has had two round trips to come,
// what passes the READ asks nothing; after that, the next that passes asks again.
TEST_F(ReadCompleterTest, AResponseAskedForAndLostAgainIsAskedForOnceItsAnswerIsOverdue) {
    const std::uint64_t now = tsc();
    post_deferred(read_wr(2, 8192, length, peer_va + 0x10000));
    ASSERT_EQ(run_requester_once(now).size(), 1U);
    answer(Opcode::rc_rdma_read_response_first, 0, 0, mtu, now);
    answer(Opcode::rc_rdma_read_response_last, 2, 2 * mtu, length, now);
    ASSERT_EQ(run_requester_once(now).size(), 1U); // response 1 asked for; its answer is lost
    answer(Opcode::rc_rdma_read_response_first, 3, 0, mtu, now);
    EXPECT_EQ(counters().read_repairs, 1U) << "its answer may still come";
    EXPECT_EQ(run_requester_once(now).size(), 0U);

    const std::uint64_t later = now + dev().tsc_hz / 1000; // well past two round trips
    answer(Opcode::rc_rdma_read_response_middle, 4, mtu, 2 * mtu, later);
    EXPECT_EQ(counters().read_repairs, 2U);
    const SentFrames again = run_requester_once(later);
    ASSERT_EQ(again.size(), 1U);
    EXPECT_EQ(again[0].bth.psn, sq_psn + 1);
    EXPECT_EQ(again[0].reth.dma_length, mtu);
}

// A repair's round trip, measured, sets how long the next repair's answer may take before it is
// asked for again: behind a stream of 1 MiB READs the answer waits a millisecond in the queues,
// and asked for again every 100 us (restart_guard) each was answered several times over.
TEST_F(ReadCompleterTest, ARepairsMeasuredRoundTripSetsHowLongTheNextOnesAnswerMayTake) {
    const std::uint64_t t0 = tsc();
    const std::uint64_t us = dev().tsc_hz / 1'000'000;
    answer(Opcode::rc_rdma_read_response_first, 0, 0, mtu, t0);
    answer(Opcode::rc_rdma_read_response_last, 2, 2 * mtu, length, t0);
    ASSERT_EQ(run_requester_once(t0).size(), 1U); // response 1 asked for ...
    answer(Opcode::rc_rdma_read_response_middle, 1, mtu, 2 * mtu, t0 + 400 * us); // 400 us on
    EXPECT_EQ(qp().req.repair_rtt, 400 * us);
    ASSERT_EQ(send_completions().size(), 1U);

    const std::uint64_t t1 = t0 + 1000 * us;
    post_deferred(read_wr(2, 8192, length, peer_va + 0x10000));  // PSNs sq_psn+3 .. +5
    post_deferred(read_wr(3, 16384, length, peer_va + 0x20000)); // PSNs sq_psn+6 .. +8
    ASSERT_EQ(run_requester_once(t1).size(), 2U);
    answer(Opcode::rc_rdma_read_response_first, 3, 0, mtu, t1);
    answer(Opcode::rc_rdma_read_response_last, 5, 2 * mtu, length, t1);
    ASSERT_EQ(run_requester_once(t1).size(), 1U); // response 4 asked for; its answer is lost
    EXPECT_EQ(counters().read_repairs, 2U);
    answer(Opcode::rc_rdma_read_response_first, 6, 0, mtu, t1 + 500 * us);
    EXPECT_EQ(counters().read_repairs, 2U) << "within two measured round trips: maybe on its way";
    EXPECT_EQ(run_requester_once(t1 + 500 * us).size(), 0U);
    answer(Opcode::rc_rdma_read_response_middle, 7, mtu, 2 * mtu, t1 + 900 * us);
    EXPECT_EQ(counters().read_repairs, 3U) << "overdue";
    const SentFrames again = run_requester_once(t1 + 900 * us);
    ASSERT_EQ(again.size(), 1U);
    EXPECT_EQ(again[0].bth.psn, sq_psn + 4);
    EXPECT_EQ(again[0].reth.dma_length, mtu);
}

// A READ whose missing response came late, before the one asked for again went out, completes
// with that request still noted on its send-queue slot. A WRITE that later takes the slot must
// not carry it: when another READ then asks for a lost response, the requester used to send the
// WRITE's first packet again as a "repair" (a WQE of any kind with a noted request was taken).
TEST_F(ReadCompleterTest, ARepairNotedOnAReusedSlotSendsNothingForTheWriteThere) {
    std::uint64_t now = tsc();
    answer(Opcode::rc_rdma_read_response_first, 0, 0, mtu, now);
    answer(Opcode::rc_rdma_read_response_last, 2, 2 * mtu, length, now); // asks for response 1
    answer(Opcode::rc_rdma_read_response_middle, 1, mtu, 2 * mtu, now);  // ... which comes late
    ASSERT_EQ(send_completions().size(), 1U);
    ASSERT_TRUE(qp().send_queue.empty());
    // WRITEs round the ring up to its last slot, a READ there, and a WRITE in the first READ's
    // slot behind it, sent and not acknowledged.
    std::uint32_t psn = sq_psn + 3;
    const std::uint32_t slots = qp().send_queue.capacity();
    for (std::uint32_t i = 1; i + 1 < slots; ++i) {
        post_deferred(write_wr(100 + i, 0, 100, 0x10000));
        ASSERT_EQ(run_requester_once(now).size(), 1U) << "WRITE " << i;
        acknowledge(psn++, roce::ack_syndrome(), now);
        (void)send_completions();
    }
    const std::uint32_t read_psn = psn;
    post_deferred(read_wr(2, 8192, length, peer_va + 0x10000));
    post_deferred(write_wr(200, 0, 100, 0x10000));
    ASSERT_EQ(run_requester_once(now).size(), 2U);
    ASSERT_EQ(qp().send_queue.size(), 2U);
    // The READ loses a response and asks for it.
    answer(Opcode::rc_rdma_read_response_first, read_psn - sq_psn, 0, mtu, now);
    answer(Opcode::rc_rdma_read_response_last, read_psn - sq_psn + 2, 2 * mtu, length, now);
    const SentFrames again = run_requester_once(now);
    ASSERT_EQ(again.size(), 1U) << "the READ's request only, nothing for the WRITE";
    EXPECT_EQ(again[0].opcode(), Opcode::rc_rdma_read_request);
    EXPECT_EQ(again[0].bth.psn, read_psn + 1);
}

// Responses further past a missing one than the map holds are not kept; once the hole is filled,
// the responses after them show them missing, and they are asked for.
TEST_F(CompleterRoleTest, ResponsesBeyondTheMapAreAskedForOnceItMovesOn) {
    const std::uint64_t now = tsc();
    constexpr std::uint32_t packets = ResponseMap::capacity + 8;
    const std::uint32_t length = packets * mtu;
    const std::vector<std::uint8_t> data = send_read(packets, 0x44, now);
    const auto answer = [&](std::uint32_t index) { answer_read(data, packets, index, now); };
    for (std::uint32_t i = 1; i < ResponseMap::capacity + 4; ++i) { // response 0 is lost
        answer(i);
    }
    EXPECT_EQ(counters().read_repairs, 1U);
    ASSERT_EQ(run_requester_once(now).size(), 1U); // response 0 asked for
    answer(0);
    EXPECT_EQ(qp().send_queue.front().responses, ResponseMap::capacity);
    for (std::uint32_t i = ResponseMap::capacity + 4; i < packets; ++i) {
        answer(i);
    }
    EXPECT_GT(counters().read_repairs, 1U);
    const SentFrames again = run_requester_once(now);
    ASSERT_EQ(again.size(), 1U);
    EXPECT_EQ(again[0].bth.psn, sq_psn + ResponseMap::capacity);
    EXPECT_EQ(again[0].reth.dma_length, 4 * mtu) << "the four not kept";
    for (std::uint32_t i = ResponseMap::capacity; i < ResponseMap::capacity + 4; ++i) {
        answer(i);
    }
    const auto wcs = send_completions();
    ASSERT_EQ(wcs.size(), 1U);
    expect_completion(wcs[0], 1, rdma::WcStatus::success);
    EXPECT_EQ(std::memcmp(local(0), data.data(), length), 0);
}

// One lost response in a 1 MiB READ at a 1 KiB MTU: every response after it is kept, and the
// one asked for completes the READ. (The map held 256: behind a repair's round trip the rest of
// the READ was dropped and asked for again, two in five responses at 1 % loss.)
TEST_F(CompleterRoleTest, AOneMibReadKeepsEveryResponsePastItsFirstLostOne) {
    const std::uint64_t now = tsc();
    constexpr std::uint32_t packets = 1024;
    static_assert(packets <= ResponseMap::capacity);
    const std::uint32_t length = packets * mtu;
    const std::vector<std::uint8_t> data = send_read(packets, 0x47, now);
    const auto answer = [&](std::uint32_t index) { answer_read(data, packets, index, now); };
    for (std::uint32_t i = 1; i < packets; ++i) { // response 0 is lost
        answer(i);
    }
    const SentFrames again = run_requester_once(now);
    ASSERT_EQ(again.size(), 1U);
    EXPECT_EQ(again[0].bth.psn, sq_psn);
    EXPECT_EQ(again[0].reth.dma_length, mtu) << "the lost one alone";
    answer(0);
    const auto wcs = send_completions();
    ASSERT_EQ(wcs.size(), 1U);
    expect_completion(wcs[0], 1, rdma::WcStatus::success);
    EXPECT_EQ(std::memcmp(local(0), data.data(), length), 0);
    EXPECT_EQ(counters().read_repairs, 1U);
}

// The QP's response maps go to its oldest response_map_slots READs in flight. One past them
// keeps nothing past a gap: the first response past one asks for the READ again from the gap to
// its end, once, as go-back-N would (it used to wait for a probe); once older READs complete it
// takes a map and keeps what comes past a gap.
TEST_F(ReadCompleterTest, AReadPastTheMapSlotsAsksFromItsGapToItsEndUntilItHasAMap) {
    const std::uint64_t now = tsc();
    constexpr std::uint32_t reads = response_map_slots + 2;
    qp().attr->max_rd_atomic = reads;
    for (std::uint32_t k = 1; k < reads; ++k) {
        post_deferred(read_wr(1 + k, k * 4096, length, peer_va + k * 0x10000));
    }
    ASSERT_EQ(run_requester_once(now).size(), reads - 1);
    const auto psn_of = [](std::uint32_t read, std::uint32_t index) { return read * 3 + index; };
    const auto answer_whole = [&](std::uint32_t read) {
        answer(Opcode::rc_rdma_read_response_first, psn_of(read, 0), 0, mtu, now);
        answer(Opcode::rc_rdma_read_response_middle, psn_of(read, 1), mtu, 2 * mtu, now);
        answer(Opcode::rc_rdma_read_response_last, psn_of(read, 2), 2 * mtu, length, now);
    };
    answer_whole(0);
    ASSERT_EQ(send_completions().size(), 1U);
    // The last READ (sent 17th) is one past the maps still: its LAST past a lost MIDDLE.
    const std::uint32_t last = reads - 1;
    const SendWqe& tail = qp().send_queue.at(qp().send_queue.size() - 1);
    answer(Opcode::rc_rdma_read_response_first, psn_of(last, 0), 0, mtu, now);
    answer(Opcode::rc_rdma_read_response_last, psn_of(last, 2), 2 * mtu, length, now);
    EXPECT_EQ(qp().map_of(tail), nullptr);
    EXPECT_EQ(tail.responses, 1U);
    // READs 1 to 16, passed without a response, are asked for whole; the last from its gap.
    const SentFrames again = run_requester_once(now);
    ASSERT_EQ(again.size(), reads - 1);
    EXPECT_EQ(again[reads - 2].bth.psn, sq_psn + psn_of(last, 1));
    EXPECT_EQ(again[reads - 2].reth.dma_length, length - mtu) << "from the gap to the READ's end";
    answer(Opcode::rc_rdma_read_response_last, psn_of(last, 2), 2 * mtu, length, now);
    EXPECT_EQ(run_requester_once(now).size(), 0U) << "asked once";
    // READ 1 completes: the last READ takes its map (slot 17 % 16) and keeps a LAST past a gap.
    answer_whole(1);
    ASSERT_EQ(send_completions().size(), 1U);
    ASSERT_NE(qp().map_of(tail), nullptr);
    answer(Opcode::rc_rdma_read_response_last, psn_of(last, 2), 2 * mtu, length, now);
    EXPECT_TRUE(tail.placed(qp().map_of(tail), 2));
    answer(Opcode::rc_rdma_read_response_middle, psn_of(last, 1), mtu, 2 * mtu, now);
    EXPECT_EQ(tail.responses, 3U);
}

// A response asked for that arrives before the request went out (reordered past the slack) is
// not asked for: the request covered it and everything up to the other response it was merged
// with, whose answers were duplicates, and as the timed repair it never closed its sample.
TEST_F(CompleterRoleTest, AResponseThatCameBeforeItsRepairWentOutIsNotAskedFor) {
    const std::uint64_t now = tsc();
    constexpr std::uint32_t packets = 16;
    const std::uint32_t length = packets * mtu;
    const std::vector<std::uint8_t> data = send_read(packets, 0x61, now);
    // 2 lost, 8 overtaken by four: both asked for, in one pending request.
    for (const std::uint32_t i : {0U, 1U, 3U, 4U, 5U, 6U, 7U, 9U, 10U, 11U, 12U}) {
        answer_read(data, packets, i, now);
    }
    EXPECT_EQ(counters().read_repairs, 2U);
    answer_read(data, packets, 8, now); // ... 8 late, not lost
    const SentFrames again = run_requester_once(now);
    ASSERT_EQ(again.size(), 1U);
    EXPECT_EQ(again[0].bth.psn, sq_psn + 2);
    EXPECT_EQ(again[0].reth.dma_length, mtu) << "2 alone: 3 to 8 came";
    EXPECT_EQ(qp().req.repair_timed_psn, sq_psn + 2);
    for (const std::uint32_t i : {2U, 13U, 14U, 15U}) {
        answer_read(data, packets, i, now);
    }
    const auto wcs = send_completions();
    ASSERT_EQ(wcs.size(), 1U);
    expect_completion(wcs[0], 1, rdma::WcStatus::success);
    EXPECT_EQ(std::memcmp(local(0), data.data(), length), 0);
    EXPECT_EQ(counters().duplicates, 0U);
    EXPECT_EQ(qp().req.repair_timed_psn, no_psn);
}

// Two gaps of one READ found before the requester's next pass are asked for apart, each by its own
// request: one request over both asked again for everything between them (at 1 MiB and 10 % loss
// a fifth of the responses came twice).
TEST_F(CompleterRoleTest, TwoGapsOfAReadFoundAtOnceAreAskedForApart) {
    const std::uint64_t now = tsc();
    constexpr std::uint32_t packets = 16;
    const std::vector<std::uint8_t> data = send_read(packets, 0x62, now);
    for (const std::uint32_t i : {0U, 1U, 3U, 4U, 5U, 6U, 7U, 8U, 10U, 11U, 12U, 13U}) {
        answer_read(data, packets, i, now); // 2 and 9 lost
    }
    EXPECT_EQ(counters().read_repairs, 2U);
    const SentFrames again = run_requester_once(now);
    ASSERT_EQ(again.size(), 2U);
    EXPECT_EQ(again[0].bth.psn, sq_psn + 2);
    EXPECT_EQ(again[0].reth.dma_length, mtu);
    EXPECT_EQ(again[1].bth.psn, sq_psn + 9);
    EXPECT_EQ(again[1].reth.dma_length, mtu);
    EXPECT_EQ(again[1].reth.va, 0x50000U + 9 * mtu);
    for (const std::uint32_t i : {2U, 9U, 14U, 15U}) {
        answer_read(data, packets, i, now);
    }
    expect_read_completed(1, data);
}

// More gaps than the responder keeps repair runs for: the last request takes the rest, so the
// responder never merges them into one over everything.
TEST_F(CompleterRoleTest, GapsPastTheRespondersRepairRunsGoInTheLastRequest) {
    const std::uint64_t now = tsc();
    constexpr std::uint32_t packets = 32;
    const std::vector<std::uint8_t> data = send_read(packets, 0x63, now);
    for (std::uint32_t i = 0; i < 28; ++i) {
        if (i % 5 != 2) { // 2, 7, 12, 17, 22 and 27 lost
            answer_read(data, packets, i, now);
        }
    }
    answer_read(data, packets, packets - 1, now); // the LAST: every gap before it asked for
    static_assert(RepairRuns::capacity == 4, "six gaps: three alone, the last request the rest");
    const SentFrames again = run_requester_once(now);
    ASSERT_EQ(again.size(), RepairRuns::capacity);
    for (std::uint32_t k = 0; k + 1 < RepairRuns::capacity; ++k) {
        EXPECT_EQ(again[k].bth.psn, sq_psn + 2 + 5 * k);
        EXPECT_EQ(again[k].reth.dma_length, mtu);
    }
    EXPECT_EQ(again[3].bth.psn, sq_psn + 17);
    EXPECT_EQ(again[3].reth.dma_length, (packets - 1 - 17) * mtu) << "17 to the LAST's gap";
    EXPECT_EQ(run_requester_once(now).size(), 0U) << "all asked for, once";
}

// READs answered behind one still waiting hold their place in max_rd_atomic: the responder frees
// its resources in order, and a new READ would take the one our request needs answered from.
TEST_F(ReadCompleterTest, ReadsAnsweredBehindAWaitingOneStillCountAgainstMaxRdAtomic) {
    const std::uint64_t now = tsc();
    ASSERT_EQ(qp().attr->max_rd_atomic, 4U);
    for (std::uint64_t wr_id = 2; wr_id <= 5; ++wr_id) {
        post_deferred(read_wr(wr_id, wr_id * 4096, 100, peer_va + wr_id * 0x1000));
    }
    const SentFrames sent = run_requester_once(now);
    ASSERT_EQ(sent.size(), 3U) << "READs 2..4: four outstanding with the first";
    for (std::uint32_t psn = sq_psn + 3; psn < sq_psn + 6; ++psn) {
        roce::FrameHeaders h = from_peer(Opcode::rc_rdma_read_response_only, psn);
        h.aeth = {roce::ack_syndrome(), 1};
        complete_with(h, now, std::span<const std::uint8_t>(data_).first(100));
    }
    EXPECT_EQ(qp().send_queue.size(), 5U) << "nothing completes before the first READ";
    const SentFrames again = run_requester_once(now);
    ASSERT_EQ(again.size(), 1U) << "the first READ asked again, and READ 5 not sent";
    EXPECT_EQ(again[0].bth.psn, sq_psn);
}

// Every READ response carries its exact share: one MTU, and the rest in the last. A LAST of 100
// bytes where 952 are due used to complete the READ in success with byte_len 3000, though 852
// bytes of the target never arrived (responses were placed at responses * MTU and counted, never
// measured); now it is a bad response and the QP fails.
TEST_F(ReadCompleterTest, AShortLastResponseNeverCompletesTheReadInSuccess) {
    const std::uint64_t now = tsc();
    answer(Opcode::rc_rdma_read_response_first, 0, 0, mtu, now);
    answer(Opcode::rc_rdma_read_response_middle, 1, mtu, 2 * mtu, now);
    answer(Opcode::rc_rdma_read_response_last, 2, 2 * mtu, 2 * mtu + 100, now);
    for (const rdma::WorkCompletion& wc : send_completions()) {
        EXPECT_NE(wc.status, rdma::WcStatus::success)
            << "the READ completed in success with " << wc.byte_len << " bytes, "
            << length - (2 * mtu + 100) << " of which never arrived";
    }
}

// The same for a short FIRST: it used to be taken as a whole MTU, and the READ completed in
// success with bytes 100..1023 of its target never written.
TEST_F(ReadCompleterTest, AShortFirstResponseNeverCompletesTheReadInSuccess) {
    const std::uint64_t now = tsc();
    answer(Opcode::rc_rdma_read_response_first, 0, 0, 100, now);
    answer(Opcode::rc_rdma_read_response_middle, 1, mtu, 2 * mtu, now);
    answer(Opcode::rc_rdma_read_response_last, 2, 2 * mtu, length, now);
    for (const rdma::WorkCompletion& wc : send_completions()) {
        EXPECT_NE(wc.status, rdma::WcStatus::success)
            << "the READ completed in success with a hole in its target";
    }
}

TEST_F(CompleterRoleTest, AnAtomicAckPlacesTheOriginalValueAndCompletesTheAtomic) {
    const std::uint64_t now = tsc();
    rdma::SendWr wr = write_wr(1, 0, 8, 0);
    wr.opcode = rdma::WrOpcode::atomic_fetch_add;
    wr.atomic.remote_addr = 0x90000;
    wr.atomic.rkey = 0x77;
    wr.atomic.compare_add = 3;
    post_deferred(wr);
    const SentFrames sent = run_requester_once(now);
    ASSERT_EQ(sent.size(), 1U);
    EXPECT_EQ(sent[0].opcode(), Opcode::rc_fetch_add);
    EXPECT_EQ(sent[0].atomic_eth.va, 0x90000U);
    EXPECT_EQ(sent[0].atomic_eth.rkey, 0x77U);
    EXPECT_EQ(sent[0].atomic_eth.swap_add, 3U) << "the addend";
    snapshot();

    constexpr std::uint64_t original = 0x0102030405060708ULL;
    roce::FrameHeaders h = from_peer(Opcode::rc_atomic_acknowledge, sq_psn);
    h.aeth = {roce::ack_syndrome(), 1};
    h.atomic_ack_eth = {original};
    complete_with(h, now);
    const auto wcs = send_completions();
    ASSERT_EQ(wcs.size(), 1U);
    expect_completion(wcs[0], 1, rdma::WcStatus::success);
    EXPECT_EQ(wcs[0].opcode, rdma::WcOpcode::atomic_fetch_add);
    std::uint64_t placed = 0;
    std::memcpy(&placed, local(0), sizeof(placed));
    EXPECT_EQ(placed, original);
    for (const std::size_t i : changed_bytes()) {
        EXPECT_LT(i - local_offset, sizeof(placed)) << "byte " << i << " outside the target";
    }

    // The same atomic ACK again (a duplicate on the wire): nothing is outstanding to take it.
    complete_with(h, now);
    EXPECT_TRUE(send_completions().empty()) << "completed twice";
    EXPECT_EQ(counters().duplicates, 1U);
}

// An error NAK whose PSN was already acknowledged (stale, or forged: a responder NAKs only its
// expected PSN, after which it acknowledges nothing more) fails nothing. It used to fail whatever
// WQE was at the head: WRITE 2, which the responder never refused, completed with
// remote_access_error and took the QP to ERR. It is counted as a duplicate.
TEST_F(CompleterRoleTest, AnErrorNakForAnAcknowledgedPsnFailsNoOtherWqe) {
    const std::uint64_t now = tsc();
    (void)transmit_writes(2, now);
    acknowledge(sq_psn, roce::ack_syndrome(), now);
    const auto acked = send_completions();
    ASSERT_EQ(acked.size(), 1U);
    expect_completion(acked[0], 1, rdma::WcStatus::success);

    acknowledge(sq_psn, roce::nak_syndrome(roce::NakCode::remote_access_error), now);
    for (const rdma::WorkCompletion& wc : send_completions()) {
        ADD_FAILURE() << "wr_id " << wc.wr_id << " completed with "
                      << rdma::wc_status_name(wc.status) << " for a NAK of an acknowledged PSN";
    }
    EXPECT_EQ(qp().state(), rdma::QpState::rts) << rdma::qp_state_name(qp().state());
    EXPECT_EQ(counters().duplicates, 1U);
}

} // namespace
} // namespace prdma::swroce::test
