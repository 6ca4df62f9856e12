// The requester role (requester.cpp) run by hand: the packets a WQE becomes (opcodes, PSNs,
// headers, payload, AckReq cadence) and what bounds how many go out (the send window,
// max_rd_atomic), read back from the TxBatch it fills.
#include <cstring>

#include <gtest/gtest.h>

#include <prdma/roce/psn.hpp>

#include "role_fixture.hpp"
#include "segmenter.hpp"

namespace prdma::swroce::test {
namespace {

using roce::Opcode;

using RequesterRoleTest = RoleTest;

TEST_F(RequesterRoleTest, AMultiPacketWriteIsFirstMiddlesLastWithConsecutivePsns) {
    constexpr std::uint32_t first_psn = 0xfffffe; // the message crosses the PSN wrap
    connect(rq_psn, first_psn);
    constexpr std::uint32_t packets = 35; // more than one AckReq interval
    constexpr std::uint32_t length = packets * mtu - 100;
    constexpr std::uint64_t peer_va = 0x70000000;
    const auto data = pattern(length, 0x21);
    std::memcpy(local(0), data.data(), length);
    post_deferred(write_wr(1, 0, length, peer_va));
    const std::uint32_t interval = qp().req.window.ack_req_interval();
    ASSERT_GT(interval, 1U);
    ASSERT_LT(interval, packets) << "the message must span a mid-message AckReq";

    const SentFrames sent = run_requester_once(tsc());
    ASSERT_EQ(sent.size(), packets);
    for (std::uint32_t i = 0; i < packets; ++i) {
        SCOPED_TRACE(i);
        const roce::ParsedFrame& f = sent[i];
        const bool last = i + 1 == packets;
        const Opcode expected = i == 0 ? Opcode::rc_rdma_write_first
                                : last ? Opcode::rc_rdma_write_last
                                       : Opcode::rc_rdma_write_middle;
        EXPECT_EQ(f.opcode(), expected);
        EXPECT_EQ(f.bth.psn, roce::psn_add(first_psn, i));
        EXPECT_EQ(f.bth.dest_qp, peer_qpn);
        EXPECT_EQ(f.eth.dst, peer_mac);
        EXPECT_EQ(f.ipv4.src, our_ip);
        EXPECT_EQ(f.ipv4.dst, peer_ip);
        EXPECT_EQ(f.has(roce::ExtHeader::reth), i == 0) << "RETH on FIRST only";
        // AckReq on the last packet and every `interval` packets inside the message.
        EXPECT_EQ(f.bth.ack_req, last || (i + 1) % interval == 0);
        const std::uint32_t bytes = last ? length - i * mtu : mtu;
        ASSERT_EQ(f.payload.size(), bytes);
        EXPECT_EQ(std::memcmp(f.payload.data(), data.data() + std::size_t{i} * mtu, bytes), 0);
    }
    EXPECT_EQ(sent[0].reth.va, peer_va);
    EXPECT_EQ(sent[0].reth.rkey, 0x1234U);
    EXPECT_EQ(sent[0].reth.dma_length, length);
    EXPECT_EQ(qp().req.send_psn, roce::psn_add(first_psn, packets));
    EXPECT_EQ(run_requester_once(tsc()).size(), 0U) << "each packet goes once";
}

// SENDs and WRITEs go out from the QP's prebuilt request headers (emit_request); each frame must
// be, byte for byte, the one the header builder makes (emit) from headers set up here for the
// same packet: every SEND and WRITE opcode, payloads that need every pad count and span packets,
// inline and gathered, solicited or not, with immediate data or an rkey to invalidate.
TEST_F(RequesterRoleTest, APrebuiltRequestIsByteForByteTheBuiltOne) {
    connect(rq_psn, 0xfffffd); // the messages cross the PSN wrap
    const auto data = pattern(3 * mtu, 0x5a);
    std::memcpy(local(0), data.data(), data.size());
    struct Case {
        rdma::WrOpcode opcode;
        std::uint32_t length;
        bool inline_data;
        bool solicited;
    };
    std::vector<Case> cases;
    for (const rdma::WrOpcode op :
         {rdma::WrOpcode::rdma_write, rdma::WrOpcode::rdma_write_with_imm, rdma::WrOpcode::send,
          rdma::WrOpcode::send_with_imm, rdma::WrOpcode::send_with_inv}) {
        for (const std::uint32_t length : {0U, 1U, 2U, 3U, 8U, 61U, mtu, mtu + 1, 2 * mtu + 3}) {
            cases.push_back({op, length, false, length % 2 == 1});
        }
        cases.push_back({op, 13, true, true});
    }
    const auto bytes_of = [](rte_mbuf* m) {
        const auto* p = rte_pktmbuf_mtod(m, const std::uint8_t*);
        return std::vector<std::uint8_t>(p, p + rte_pktmbuf_data_len(m));
    };
    for (const Case& c : cases) {
        SCOPED_TRACE(testing::Message() << "opcode " << static_cast<int>(c.opcode) << " length "
                                        << c.length << (c.inline_data ? " inline" : ""));
        rdma::SendWr wr = write_wr(7, 0, c.length, 0x7000'0000'1234ULL);
        wr.opcode = c.opcode;
        wr.imm_or_invalidate = 0x89abcdefU;
        if (c.inline_data) {
            wr.flags |= rdma::send_inline;
        }
        if (c.solicited) {
            wr.flags |= rdma::send_solicited;
        }
        post_deferred(wr);
        TxBatch fast;
        run_requester(qp(), fast, tsc());
        const SendWqe& wqe = qp().send_queue.at(qp().send_queue.size() - 1);
        ASSERT_EQ(fast.count, wqe.psn_span);
        for (std::uint16_t k = 0; k < fast.count; ++k) {
            const std::vector<std::uint8_t> got = bytes_of(fast.mbufs[k]);
            roce::ParsedFrame parsed;
            ASSERT_EQ(roce::parse_roce_frame(got, parsed), roce::ParseError::ok) << "packet " << k;
            const PacketPlan plan = Segmenter(wqe.wr.opcode, wqe.length, mtu).packet(k);
            roce::TransportHeaders h =
                headers_for(qp(), plan.opcode, roce::psn_add(wqe.first_psn, k));
            h.bth.ack_req = parsed.bth.ack_req; // the cadence is another test's
            h.bth.solicited = plan.last && c.solicited;
            h.reth = {wr.rdma.remote_addr, wr.rdma.rkey, c.length};
            h.immediate = wr.imm_or_invalidate;
            h.invalidate_rkey = wr.imm_or_invalidate;
            TxBatch built;
            ASSERT_TRUE(emit(qp(), built, h, Payload{&wqe, nullptr, 0, plan.offset, plan.length}));
            EXPECT_EQ(got, bytes_of(built.mbufs[0])) << "packet " << k;
            rte_pktmbuf_free(built.mbufs[0]);
            rte_pktmbuf_free(fast.mbufs[k]);
        }
        acknowledge(roce::psn_add(wqe.first_psn, wqe.psn_span - 1), roce::ack_syndrome(), tsc());
        (void)send_completions();
    }
}

TEST_F(RequesterRoleTest, TheSendWindowCapsThePacketsInFlight) {
    const std::uint32_t window = qp().req.window.packets();
    const std::uint32_t packets = window + 44;
    ASSERT_LE(std::size_t{packets} * mtu, local_length);
    post_deferred(write_wr(1, 0, packets * mtu, 0x70000000));
    const std::uint64_t now = tsc();

    std::uint32_t in_flight = 0;
    for (int pass = 0; pass < 16; ++pass) {
        const SentFrames sent = run_requester_once(now);
        if (sent.size() == 0) {
            break;
        }
        for (std::size_t i = 0; i < sent.size(); ++i) {
            EXPECT_EQ(sent[i].bth.psn, sq_psn + in_flight + i);
        }
        in_flight += static_cast<std::uint32_t>(sent.size());
    }
    EXPECT_EQ(in_flight, window) << "no packet beyond the window until an ACK";

    // Ten packets acknowledged: ten more may go, no more.
    acknowledge(sq_psn + 9, roce::ack_syndrome(), now);
    const SentFrames more = run_requester_once(now);
    ASSERT_EQ(more.size(), 10U);
    EXPECT_EQ(more[0].bth.psn, sq_psn + window);
    EXPECT_EQ(more[9].bth.psn, sq_psn + window + 9);
    EXPECT_EQ(run_requester_once(now).size(), 0U);
}

TEST_F(RequesterRoleTest, MaxRdAtomicCapsTheReadsOutstanding) {
    const std::uint32_t limit = qp().attr->max_rd_atomic;
    ASSERT_GT(limit, 0U);
    for (std::uint32_t i = 0; i < limit + 2; ++i) {
        post_deferred(read_wr(i + 1, std::size_t{i} * 1024, 100, 0x80000 + i * 0x1000));
    }
    const SentFrames sent = run_requester_once(tsc());
    ASSERT_EQ(sent.size(), limit);
    for (std::uint32_t i = 0; i < limit; ++i) {
        EXPECT_EQ(sent[i].opcode(), Opcode::rc_rdma_read_request);
        EXPECT_EQ(sent[i].bth.psn, sq_psn + i);
        EXPECT_TRUE(sent[i].bth.ack_req);
    }
    EXPECT_EQ(qp().req.send_offset, limit);
}

} // namespace
} // namespace prdma::swroce::test
