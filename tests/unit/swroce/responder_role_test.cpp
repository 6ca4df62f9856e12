// The responder role (responder.cpp) driven one crafted request at a time: what each stage lets
// through lands where it should and is acknowledged; what a stage refuses writes no byte,
// consumes no receive, is counted under its reason and owes the IBTA NAK for it; READs and atomics
// are answered by the frames send_responses() builds, and a duplicate is answered again from its
// responder resource, never executed twice.
#include <cstring>
#include <vector>

#include <gtest/gtest.h>
#include <rte_mbuf.h>

#include <prdma/roce/psn.hpp>

#include "role_fixture.hpp"

namespace prdma::swroce::test {
namespace {

using roce::Opcode;

class ResponderRoleTest : public RoleTest {
protected:
    // The ACK or NAK the responder owes, as send_ack() builds it.
    SentFrames owed_ack() {
        EXPECT_TRUE(qp().resp.ack_pending) << "the responder owes no ACK";
        TxBatch tx;
        send_ack(qp(), tx);
        EXPECT_FALSE(qp().resp.ack_pending);
        return SentFrames::take(tx);
    }
    // The READ responses and atomic ACKs the responder owes, as send_responses() builds them.
    SentFrames responses() {
        TxBatch tx;
        send_responses(qp(), tx);
        EXPECT_FALSE(qp().resp.responses_pending);
        return SentFrames::take(tx);
    }
    [[nodiscard]] std::uint64_t refused(ResponderError reason) const {
        return counters().responder(reason);
    }
    // Every byte that changed since the last snapshot lies in [offset, offset + length) of the
    // buffer's remote region.
    void expect_changes_only_in_remote(std::size_t offset, std::size_t length) const {
        for (const std::size_t i : changed_bytes()) {
            EXPECT_TRUE(i >= remote_offset + offset && i < remote_offset + offset + length)
                << "buffer byte " << i << " changed";
        }
    }
    // One frame to the peer: an ACK (or NAK) for `psn` with `syndrome`.
    static void expect_ack(const roce::ParsedFrame& f, std::uint32_t psn, std::uint8_t syndrome) {
        EXPECT_EQ(f.opcode(), Opcode::rc_acknowledge);
        EXPECT_EQ(f.bth.psn, psn);
        EXPECT_EQ(f.aeth.syndrome, syndrome)
            << roce::aeth_class_name(roce::classify_aeth(f.aeth.syndrome));
        EXPECT_EQ(f.bth.dest_qp, peer_qpn);
        EXPECT_EQ(f.ipv4.src, our_ip);
        EXPECT_EQ(f.ipv4.dst, peer_ip);
        EXPECT_EQ(f.eth.dst, peer_mac);
    }
    [[nodiscard]] std::uint64_t remote_u64(std::size_t offset) const {
        std::uint64_t value = 0;
        std::memcpy(&value, remote(offset), sizeof(value));
        return value;
    }
};

TEST_F(ResponderRoleTest, AnInOrderSendOnlyLandsInThePostedReceiveAndCompletesIt) {
    post_receive(7, 0, 4096);
    snapshot();
    const auto payload = pattern(300, 3);
    roce::FrameHeaders h = from_peer(Opcode::rc_send_only, rq_psn);
    h.bth.ack_req = true;
    respond_to(h, payload);

    const auto wcs = recv_completions();
    ASSERT_EQ(wcs.size(), 1U);
    EXPECT_EQ(wcs[0].wr_id, 7U);
    EXPECT_EQ(wcs[0].status, rdma::WcStatus::success);
    EXPECT_EQ(wcs[0].opcode, rdma::WcOpcode::recv);
    EXPECT_EQ(wcs[0].byte_len, payload.size());
    EXPECT_EQ(wcs[0].qpn, qp().qpn);
    EXPECT_EQ(wcs[0].src_qpn, peer_qpn);
    EXPECT_TRUE(qp().receive_queue.empty());
    EXPECT_EQ(std::memcmp(local(0), payload.data(), payload.size()), 0);
    for (const std::size_t i : changed_bytes()) {
        EXPECT_LT(i - local_offset, payload.size()) << "byte " << i << " beyond the payload";
    }
    EXPECT_EQ(qp().resp.expected_psn, rq_psn + 1);
    EXPECT_EQ(qp().resp.msn, 1U);

    const SentFrames ack = owed_ack();
    ASSERT_EQ(ack.size(), 1U);
    expect_ack(ack[0], rq_psn, roce::ack_syndrome());
    EXPECT_EQ(ack[0].aeth.msn, 1U);
}

TEST_F(ResponderRoleTest, APsnAheadOwesOneSequenceErrorNakAndWritesNothing) {
    post_receive(7, 0, 4096);
    snapshot();
    const auto payload = pattern(200, 5);
    respond_to(from_peer(Opcode::rc_send_only, rq_psn + 2), payload);

    EXPECT_EQ(refused(ResponderError::psn_sequence), 1U);
    EXPECT_EQ(counters().naks_sent, 1U);
    EXPECT_EQ(qp().counters.naks_sent, 1U);
    EXPECT_TRUE(changed_bytes().empty());
    EXPECT_TRUE(recv_completions().empty());
    EXPECT_EQ(qp().receive_queue.size(), 1U);
    EXPECT_EQ(qp().resp.expected_psn, rq_psn);

    // More packets past the same gap, not asking for an ACK: the NAK already owed covers them.
    respond_to(from_peer(Opcode::rc_send_only, rq_psn + 3), payload);
    EXPECT_EQ(refused(ResponderError::psn_sequence), 1U);
    EXPECT_TRUE(changed_bytes().empty());

    const SentFrames nak = owed_ack();
    ASSERT_EQ(nak.size(), 1U);
    expect_ack(nak[0], rq_psn, roce::nak_syndrome(roce::NakCode::psn_sequence_error));
    EXPECT_FALSE(qp().resp.error_after_nak) << "a sequence error is recovered, not fatal";

    // The requester goes back to the expected PSN: taken.
    roce::FrameHeaders again = from_peer(Opcode::rc_send_only, rq_psn);
    again.bth.ack_req = true;
    respond_to(again, payload);
    const auto wcs = recv_completions();
    ASSERT_EQ(wcs.size(), 1U);
    EXPECT_EQ(wcs[0].status, rdma::WcStatus::success);
    EXPECT_EQ(std::memcmp(local(0), payload.data(), payload.size()), 0);
}

TEST_F(ResponderRoleTest, ADuplicateSendIsAcknowledgedAgainAndPlacedNowhere) {
    post_receive(1, 0, 4096);
    post_receive(2, 8192, 4096);
    roce::FrameHeaders h = from_peer(Opcode::rc_send_only, rq_psn);
    h.bth.ack_req = true;
    respond_to(h, pattern(200, 1));
    (void)owed_ack();
    ASSERT_EQ(recv_completions().size(), 1U);
    std::memset(local(0), 0, 200); // the application has consumed the message
    snapshot();

    // The same PSN again (its ACK was lost), with other bytes: they must not land anywhere.
    respond_to(h, pattern(200, 9));
    EXPECT_EQ(counters().duplicates, 1U);
    EXPECT_EQ(qp().counters.duplicates, 1U);
    EXPECT_TRUE(changed_bytes().empty());
    EXPECT_TRUE(recv_completions().empty());
    EXPECT_EQ(qp().receive_queue.size(), 1U) << "the second receive is still posted";
    EXPECT_EQ(qp().resp.expected_psn, rq_psn + 1);
    EXPECT_EQ(qp().resp.msn, 1U);

    const SentFrames ack = owed_ack();
    ASSERT_EQ(ack.size(), 1U);
    expect_ack(ack[0], rq_psn, roce::ack_syndrome());
    EXPECT_EQ(ack[0].aeth.msn, 1U);
}

TEST_F(ResponderRoleTest, ASendMiddleOrLastWithoutFirstIsAnInvalidRequest) {
    for (const Opcode op : {Opcode::rc_send_middle, Opcode::rc_send_last}) {
        SCOPED_TRACE(roce::opcode_info(op).name);
        connect(rq_psn, sq_psn);
        post_receive(5, 0, 4096);
        snapshot();
        const std::uint64_t before = refused(ResponderError::op_sequence);
        respond_to(from_peer(op, rq_psn), pattern(op == Opcode::rc_send_middle ? mtu : 200, 4));

        EXPECT_EQ(refused(ResponderError::op_sequence), before + 1);
        EXPECT_TRUE(changed_bytes().empty());
        EXPECT_TRUE(recv_completions().empty());
        EXPECT_EQ(qp().receive_queue.size(), 1U) << "no receive consumed";
        EXPECT_EQ(qp().resp.in_message, InMessage::none);
        EXPECT_EQ(qp().resp.expected_psn, rq_psn);
        EXPECT_TRUE(qp().resp.error_after_nak) << "class A error: ERR once the NAK is out";
        const SentFrames nak = owed_ack();
        ASSERT_EQ(nak.size(), 1U);
        expect_ack(nak[0], rq_psn, roce::nak_syndrome(roce::NakCode::invalid_request));
    }
}

TEST_F(ResponderRoleTest, ASendFirstShorterThanThePathMtuIsAnInvalidRequest) {
    post_receive(5, 0, 4096);
    snapshot();
    respond_to(from_peer(Opcode::rc_send_first, rq_psn), pattern(mtu - 1, 2));

    EXPECT_EQ(refused(ResponderError::length), 1U);
    EXPECT_TRUE(changed_bytes().empty());
    EXPECT_TRUE(recv_completions().empty());
    EXPECT_EQ(qp().receive_queue.size(), 1U);
    EXPECT_EQ(qp().resp.in_message, InMessage::none) << "no message began";
    EXPECT_EQ(qp().resp.expected_psn, rq_psn);
    EXPECT_TRUE(qp().resp.error_after_nak);
    const SentFrames nak = owed_ack();
    ASSERT_EQ(nak.size(), 1U);
    expect_ack(nak[0], rq_psn, roce::nak_syndrome(roce::NakCode::invalid_request));
}

TEST_F(ResponderRoleTest, AWriteWithABadRkeyIsARemoteAccessNak) {
    // A variant never handed out, a key whose region grants no remote write, no region at all.
    const std::uint32_t stale = remote_rkey() ^ 0x01U;
    const std::uint32_t local_only = local_lkey();
    const std::uint32_t unknown = 0x00fffe00U;
    snapshot();
    std::uint64_t expected = 0;
    for (const std::uint32_t rkey : {stale, local_only, unknown}) {
        SCOPED_TRACE(rkey);
        roce::FrameHeaders h = from_peer(Opcode::rc_rdma_write_only, rq_psn);
        h.reth = {remote_va(0), rkey, 64};
        respond_to(h, pattern(64, 8));
        EXPECT_EQ(refused(ResponderError::remote_access), ++expected);
    }
    EXPECT_TRUE(changed_bytes().empty());
    EXPECT_EQ(qp().resp.expected_psn, rq_psn);
    EXPECT_TRUE(qp().resp.error_after_nak);
    const SentFrames nak = owed_ack();
    ASSERT_EQ(nak.size(), 1U);
    expect_ack(nak[0], rq_psn, roce::nak_syndrome(roce::NakCode::remote_access_error));
}

TEST_F(ResponderRoleTest, AWriteBeyondItsRegionIsARemoteAccessNakAndWritesNoByte) {
    struct Shape {
        const char* what;
        Opcode opcode;
        std::uint64_t va;
        std::uint32_t dma_length;
        std::uint32_t payload;
    };
    const Shape shapes[] = {
        {"crosses the end", Opcode::rc_rdma_write_only, remote_va(remote_length - 100), 200, 200},
        {"starts before the start", Opcode::rc_rdma_write_only, remote_va(0) - 8, 64, 64},
        {"wraps the address space", Opcode::rc_rdma_write_only, ~std::uint64_t{0} - 127, 256, 256},
        // Its own bytes would fit: the RETH names the whole message, which does not.
        {"FIRST of a message that ends beyond", Opcode::rc_rdma_write_first,
         remote_va(remote_length - mtu), 2 * mtu, mtu},
    };
    for (const Shape& shape : shapes) {
        SCOPED_TRACE(shape.what);
        connect(rq_psn, sq_psn);
        snapshot();
        const std::uint64_t before = refused(ResponderError::remote_access);
        roce::FrameHeaders h = from_peer(shape.opcode, rq_psn);
        h.reth = {shape.va, remote_rkey(), shape.dma_length};
        respond_to(h, pattern(shape.payload, 0x40));
        EXPECT_EQ(refused(ResponderError::remote_access), before + 1);
        EXPECT_TRUE(changed_bytes().empty()) << changed_bytes().size() << " bytes changed";
        EXPECT_EQ(qp().resp.in_message, InMessage::none);
        const SentFrames nak = owed_ack();
        ASSERT_EQ(nak.size(), 1U);
        expect_ack(nak[0], rq_psn, roce::nak_syndrome(roce::NakCode::remote_access_error));
    }
}

TEST_F(ResponderRoleTest, AWriteWithImmediateWithoutAReceiveIsAnRnrNakThatWritesNothing) {
    snapshot();
    roce::FrameHeaders h = from_peer(Opcode::rc_rdma_write_only_with_immediate, rq_psn);
    h.reth = {remote_va(0), remote_rkey(), 64};
    h.immediate = 0x1234;
    respond_to(h, pattern(64, 6));

    EXPECT_EQ(refused(ResponderError::receiver_not_ready), 1U);
    EXPECT_TRUE(changed_bytes().empty()) << "the resent WRITE must find the region as it was";
    EXPECT_EQ(qp().resp.expected_psn, rq_psn);
    EXPECT_FALSE(qp().resp.error_after_nak) << "RNR is retried, not fatal";
    const SentFrames nak = owed_ack();
    ASSERT_EQ(nak.size(), 1U);
    expect_ack(nak[0], rq_psn, roce::rnr_nak_syndrome(qp().attr->min_rnr_timer));
}

TEST_F(ResponderRoleTest, AReadRequestIsAnsweredWithTheRegionsBytesOneMtuAPacket) {
    constexpr std::size_t offset = 100;
    constexpr std::uint32_t length = 2500;
    const std::uint32_t packets = roce::packets_for(length, mtu);
    snapshot();
    roce::FrameHeaders h = from_peer(Opcode::rc_rdma_read_request, rq_psn);
    h.reth = {remote_va(offset), remote_rkey(), length};
    h.bth.ack_req = true;
    respond_to(h);

    EXPECT_EQ(qp().resp.expected_psn, rq_psn + packets) << "a READ takes one PSN per response";
    EXPECT_FALSE(qp().resp.ack_pending) << "a READ is answered by its responses, not an ACK";
    EXPECT_TRUE(qp().resp.responses_pending);
    const SentFrames sent = responses();
    ASSERT_EQ(sent.size(), packets);
    for (std::uint32_t i = 0; i < packets; ++i) {
        SCOPED_TRACE(i);
        const roce::ParsedFrame& f = sent[i];
        const Opcode expected = i == 0             ? Opcode::rc_rdma_read_response_first
                                : i + 1 == packets ? Opcode::rc_rdma_read_response_last
                                                   : Opcode::rc_rdma_read_response_middle;
        EXPECT_EQ(f.opcode(), expected);
        EXPECT_EQ(f.bth.psn, rq_psn + i);
        EXPECT_EQ(f.bth.dest_qp, peer_qpn);
        const std::uint32_t bytes = i + 1 == packets ? length - i * mtu : mtu;
        ASSERT_EQ(f.payload.size(), bytes);
        EXPECT_EQ(std::memcmp(f.payload.data(), remote(offset + std::size_t{i} * mtu), bytes), 0);
        // FIRST and LAST carry an AETH (IBTA 9.7.5.1.3); MIDDLE carries none.
        EXPECT_EQ(f.has(roce::ExtHeader::aeth), i == 0 || i + 1 == packets);
        if (f.has(roce::ExtHeader::aeth)) {
            EXPECT_EQ(f.aeth.syndrome, roce::ack_syndrome());
            EXPECT_EQ(f.aeth.msn, 1U);
        }
    }
    EXPECT_TRUE(changed_bytes().empty()) << "a READ writes nothing";
    TxBatch tx;
    send_responses(qp(), tx);
    EXPECT_EQ(tx.count, 0U) << "every response was sent once";
}

TEST_F(ResponderRoleTest, ADuplicateReadAskedFromTheMiddleIsAnsweredFromThere) {
    constexpr std::uint32_t length = 2500;
    roce::FrameHeaders h = from_peer(Opcode::rc_rdma_read_request, rq_psn);
    h.reth = {remote_va(0), remote_rkey(), length};
    respond_to(h);
    ASSERT_EQ(responses().size(), 3U);

    // The requester lost responses 1 and 2 and asks again for what it lacks (IBTA 9.4.4).
    roce::FrameHeaders again = from_peer(Opcode::rc_rdma_read_request, rq_psn + 1);
    again.reth = {remote_va(mtu), remote_rkey(), length - mtu};
    respond_to(again);
    EXPECT_EQ(counters().duplicates, 1U);
    EXPECT_EQ(qp().resp.expected_psn, rq_psn + 3) << "a duplicate moves nothing on";
    const SentFrames sent = responses();
    ASSERT_EQ(sent.size(), 2U);
    EXPECT_EQ(sent[0].opcode(), Opcode::rc_rdma_read_response_middle);
    EXPECT_EQ(sent[0].bth.psn, rq_psn + 1);
    EXPECT_EQ(std::memcmp(sent[0].payload.data(), remote(mtu), mtu), 0);
    EXPECT_EQ(sent[1].opcode(), Opcode::rc_rdma_read_response_last);
    EXPECT_EQ(sent[1].bth.psn, rq_psn + 2);
    ASSERT_EQ(sent[1].payload.size(), length - 2 * mtu);
    EXPECT_EQ(std::memcmp(sent[1].payload.data(), remote(std::size_t{2} * mtu), length - 2 * mtu),
              0);
}

// swroce's requester asks for lost responses alone. While the READ is still being answered,
// those go first and the READ goes on from where it was; already sent, they are sent again.
TEST_F(ResponderRoleTest, ADuplicateReadForAFewPacketsIsAnsweredAheadOfTheRestOfTheRead) {
    // READ A (50 packets) and READ B (30): one batch of 64 takes A and B's first 14.
    constexpr std::uint32_t packets_a = 50;
    constexpr std::uint32_t packets_b = 30;
    constexpr std::uint32_t psn_b = rq_psn + packets_a;
    roce::FrameHeaders h = from_peer(Opcode::rc_rdma_read_request, rq_psn);
    h.reth = {remote_va(0), remote_rkey(), packets_a * mtu};
    respond_to(h);
    h = from_peer(Opcode::rc_rdma_read_request, psn_b);
    h.reth = {remote_va(0), remote_rkey(), packets_b * mtu};
    respond_to(h);
    TxBatch tx;
    send_responses(qp(), tx);
    ASSERT_EQ(tx.count, 64U);
    const SentFrames first = SentFrames::take(tx);
    constexpr std::uint32_t sent_b = 64 - packets_a;

    // B's packets 20 and 21, not sent yet: B sends them in its own turn, once.
    const auto ask = [&](std::uint32_t index) {
        roce::FrameHeaders again = from_peer(Opcode::rc_rdma_read_request, psn_b + index);
        again.reth = {remote_va(std::size_t{index} * mtu), remote_rkey(), 2 * mtu};
        respond_to(again);
    };
    ask(20);
    // B's packets 5 and 6, sent (and lost): they go first.
    ask(5);
    EXPECT_EQ(counters().duplicates, 2U);
    const SentFrames sent = responses();
    ASSERT_EQ(sent.size(), 2U + packets_b - sent_b) << "the two asked for, then the rest, once";
    for (std::uint32_t i = 0; i < sent.size(); ++i) {
        SCOPED_TRACE(i);
        const std::uint32_t index = i < 2 ? 5 + i : sent_b + i - 2;
        EXPECT_EQ(sent[i].bth.psn, psn_b + index);
        ASSERT_EQ(sent[i].payload.size(), mtu);
        EXPECT_EQ(std::memcmp(sent[i].payload.data(), remote(std::size_t{index} * mtu), mtu), 0);
    }
    // The opcode of its place in the READ, as rxe answers a READ asked again from the middle.
    EXPECT_EQ(sent[0].opcode(), Opcode::rc_rdma_read_response_middle);
    EXPECT_EQ(sent[sent.size() - 1].opcode(), Opcode::rc_rdma_read_response_last);
    EXPECT_EQ(first[packets_a].opcode(), Opcode::rc_rdma_read_response_first);

    ask(5); // lost again
    EXPECT_EQ(responses().size(), 2U);
    EXPECT_EQ(refused(ResponderError::bad_duplicate), 0U);
}

// Responses asked for alone far apart in one READ, before the first ask was answered (a
// responder whose port is busy), are each sent alone: merged into one run, everything between
// them went again (ten responses resent per one lost, bench/loss read_bw 1 MiB at 1 %).
TEST_F(ResponderRoleTest, ResponsesAskedForFarApartAreSentAloneNotWithWhatLiesBetween) {
    constexpr std::uint32_t packets = remote_length / mtu;
    roce::FrameHeaders h = from_peer(Opcode::rc_rdma_read_request, rq_psn);
    h.reth = {remote_va(0), remote_rkey(), packets * mtu};
    respond_to(h);
    ASSERT_EQ(responses().size(), packets);
    const auto ask = [&](std::uint32_t index) {
        roce::FrameHeaders again = from_peer(Opcode::rc_rdma_read_request, rq_psn + index);
        again.reth = {remote_va(std::size_t{index} * mtu), remote_rkey(), mtu};
        respond_to(again);
    };
    for (const std::uint32_t index : {3U, 40U, 41U, 20U}) { // 41 joins 40's run
        ask(index);
    }
    const SentFrames sent = responses();
    ASSERT_EQ(sent.size(), 4U) << "the four asked for, nothing between";
    const std::uint32_t order[] = {3, 40, 41, 20};
    for (std::uint32_t i = 0; i < sent.size(); ++i) {
        SCOPED_TRACE(i);
        EXPECT_EQ(sent[i].bth.psn, rq_psn + order[i]);
        ASSERT_EQ(sent[i].payload.size(), mtu);
        EXPECT_EQ(std::memcmp(sent[i].payload.data(), remote(std::size_t{order[i]} * mtu), mtu), 0);
    }
    EXPECT_EQ(refused(ResponderError::bad_duplicate), 0U);
}

TEST_F(ResponderRoleTest, ADuplicateReadThatDoesNotRepeatItsReadIsDroppedAndCounted) {
    constexpr std::uint32_t length = 3 * mtu;
    roce::FrameHeaders h = from_peer(Opcode::rc_rdma_read_request, rq_psn);
    h.reth = {remote_va(0), remote_rkey(), length};
    respond_to(h);
    ASSERT_EQ(responses().size(), 3U);
    const auto ask = [&](std::uint32_t psn, std::uint64_t va, std::uint32_t rkey,
                         std::uint32_t bytes) {
        roce::FrameHeaders again = from_peer(Opcode::rc_rdma_read_request, psn);
        again.reth = {va, rkey, bytes};
        respond_to(again);
        return responses().size();
    };
    EXPECT_EQ(ask(rq_psn + 1, remote_va(0), remote_rkey(), mtu), 0U) << "VA not its PSN's";
    EXPECT_EQ(ask(rq_psn + 1, remote_va(mtu), remote_rkey() + 1, mtu), 0U) << "another rkey";
    EXPECT_EQ(ask(rq_psn + 1, remote_va(mtu), remote_rkey(), 3 * mtu), 0U) << "past its end";
    EXPECT_EQ(ask(rq_psn + 1, remote_va(mtu), remote_rkey(), mtu / 2), 0U) << "half a packet";
    EXPECT_EQ(refused(ResponderError::bad_duplicate), 4U);
    EXPECT_EQ(qp().state(), rdma::QpState::rts) << "a duplicate is dropped, not NAKed";
    EXPECT_TRUE(changed_bytes().empty());
    EXPECT_EQ(ask(rq_psn + 1, remote_va(mtu), remote_rkey(), mtu), 1U) << "a good one still is";
}

TEST_F(ResponderRoleTest, AReadBeyondItsRegionIsARemoteAccessNakAndSendsNoByte) {
    roce::FrameHeaders h = from_peer(Opcode::rc_rdma_read_request, rq_psn);
    h.reth = {remote_va(remote_length - 1000), remote_rkey(), 2000};
    respond_to(h);
    EXPECT_EQ(refused(ResponderError::remote_access), 1U);
    EXPECT_EQ(qp().resp.expected_psn, rq_psn);
    TxBatch tx;
    send_responses(qp(), tx);
    EXPECT_EQ(tx.count, 0U) << "no READ response for a refused READ";
    const SentFrames nak = owed_ack();
    ASSERT_EQ(nak.size(), 1U);
    expect_ack(nak[0], rq_psn, roce::nak_syndrome(roce::NakCode::remote_access_error));
}

class AtomicResponderTest : public ResponderRoleTest {
protected:
    static constexpr std::size_t target = 0x808;
    static constexpr std::uint64_t original = 0x1122334455667788ULL;
    static constexpr std::uint64_t addend = 5;

    void SetUp() override {
        ResponderRoleTest::SetUp();
        std::memcpy(remote(target), &original, sizeof(original));
        snapshot();
    }
    [[nodiscard]] roce::FrameHeaders fetch_add() const {
        roce::FrameHeaders h = from_peer(Opcode::rc_fetch_add, rq_psn);
        h.atomic_eth = {remote_va(target), remote_rkey(), addend, 0};
        return h;
    }
    // The one atomic ACK the responder owes, carrying `value`.
    void expect_atomic_ack(std::uint64_t value) {
        const SentFrames sent = responses();
        ASSERT_EQ(sent.size(), 1U);
        EXPECT_EQ(sent[0].opcode(), Opcode::rc_atomic_acknowledge);
        EXPECT_EQ(sent[0].bth.psn, rq_psn);
        EXPECT_EQ(sent[0].aeth.syndrome, roce::ack_syndrome());
        EXPECT_EQ(sent[0].atomic_ack_eth.original_data, value);
    }
};

TEST_F(AtomicResponderTest, FetchAddChangesTheValueOnceAndItsAckCarriesTheOriginal) {
    respond_to(fetch_add());
    EXPECT_EQ(remote_u64(target), original + addend);
    expect_changes_only_in_remote(target, sizeof(original));
    EXPECT_EQ(qp().resp.expected_psn, rq_psn + 1);
    EXPECT_FALSE(qp().resp.ack_pending) << "answered by an atomic ACK, not an ACK";
    expect_atomic_ack(original);
}

TEST_F(AtomicResponderTest, ADuplicateAtomicIsAnsweredFromItsSavedResultNotExecutedAgain) {
    respond_to(fetch_add());
    expect_atomic_ack(original);
    // The atomic ACK was lost; the requester sends the same atomic again.
    respond_to(fetch_add());
    EXPECT_EQ(counters().duplicates, 1U);
    EXPECT_EQ(remote_u64(target), original + addend) << "executed twice";
    EXPECT_EQ(qp().resp.expected_psn, rq_psn + 1);
    expect_atomic_ack(original);
}

TEST_F(AtomicResponderTest, AMisalignedAtomicIsAnInvalidRequestThatChangesNothing) {
    roce::FrameHeaders h = fetch_add();
    h.atomic_eth.va += 4;
    respond_to(h);
    EXPECT_EQ(refused(ResponderError::misaligned_atomic), 1U);
    EXPECT_TRUE(changed_bytes().empty());
    EXPECT_EQ(qp().resp.expected_psn, rq_psn);
    TxBatch tx;
    send_responses(qp(), tx);
    EXPECT_EQ(tx.count, 0U) << "no atomic ACK for a refused atomic";
    const SentFrames nak = owed_ack();
    ASSERT_EQ(nak.size(), 1U);
    expect_ack(nak[0], rq_psn, roce::nak_syndrome(roce::NakCode::invalid_request));
}

} // namespace
// An ACK is copied from the QP's prebuilt frame and patched (emit_ack); it must be, byte for
// byte, the frame the header builder makes for the same PSN and AETH, ACKs and NAKs alike, and
// still after a modify that changes the peer's QPN.
TEST_F(ResponderRoleTest, APrebuiltAckIsByteForByteTheBuiltOne) {
    const auto frame_bytes = [](const TxBatch& tx) {
        const rte_mbuf* m = tx.mbufs[0];
        const auto* data = rte_pktmbuf_mtod(m, const std::uint8_t*);
        return std::vector<std::uint8_t>(data, data + rte_pktmbuf_data_len(m));
    };
    struct Case {
        std::uint32_t psn;
        roce::Aeth aeth;
    };
    for (const Case& c :
         {Case{rq_psn, {roce::ack_syndrome(), 7}},
          Case{0xffffff, {roce::nak_syndrome(roce::NakCode::psn_sequence_error), 0x123456}},
          Case{0, {roce::rnr_nak_syndrome(12), 0}},
          Case{0x1234567, {roce::nak_syndrome(roce::NakCode::remote_access_error), 0xffffff}}}) {
        TxBatch built;
        roce::TransportHeaders h = headers_for(qp(), Opcode::rc_acknowledge, c.psn);
        h.aeth = c.aeth;
        ASSERT_TRUE(emit(qp(), built, h, Payload{}));
        TxBatch prebuilt;
        ASSERT_TRUE(emit_ack(qp(), prebuilt, c.psn, c.aeth));
        EXPECT_EQ(frame_bytes(prebuilt), frame_bytes(built)) << "PSN " << c.psn;
        const SentFrames a = SentFrames::take(built);
        const SentFrames b = SentFrames::take(prebuilt);
        ASSERT_EQ(b.size(), 1U);
        EXPECT_EQ(b[0].bth.psn, c.psn & roce::psn_mask);
        EXPECT_EQ(b[0].aeth, c.aeth);
    }
}

} // namespace prdma::swroce::test
