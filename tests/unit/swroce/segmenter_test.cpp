// WR -> packets, checked against what Linux rxe put on the wire (tests/data/roce-pcaps).
#include <gtest/gtest.h>

#include "segmenter.hpp"

namespace prdma::swroce {
namespace {

using roce::Opcode;

TEST(Segmenter, SendOf2500BytesAtMtu1024LikeRxe) {
    // rc_send_pingpong.pcap: 2500-byte messages at path MTU 1024 are First/Middle/Last.
    const Segmenter seg(rdma::WrOpcode::send, 2500, 1024);
    ASSERT_EQ(seg.packet_count(), 3U);
    EXPECT_EQ(seg.psn_span(), 3U);
    EXPECT_EQ(seg.packet(0).opcode, Opcode::rc_send_first);
    EXPECT_EQ(seg.packet(0).length, 1024U);
    EXPECT_FALSE(seg.packet(0).last);
    EXPECT_EQ(seg.packet(1).opcode, Opcode::rc_send_middle);
    EXPECT_EQ(seg.packet(1).offset, 1024U);
    EXPECT_EQ(seg.packet(2).opcode, Opcode::rc_send_last);
    EXPECT_EQ(seg.packet(2).length, 452U);
    EXPECT_TRUE(seg.packet(2).last);
}

TEST(Segmenter, WriteOf4096BytesLikeRxe) {
    // write_bw_4096.pcap: First, Middle x2, Last per message.
    const Segmenter seg(rdma::WrOpcode::rdma_write, 4096, 1024);
    ASSERT_EQ(seg.packet_count(), 4U);
    EXPECT_EQ(seg.packet(0).opcode, Opcode::rc_rdma_write_first);
    EXPECT_EQ(seg.packet(1).opcode, Opcode::rc_rdma_write_middle);
    EXPECT_EQ(seg.packet(2).opcode, Opcode::rc_rdma_write_middle);
    EXPECT_EQ(seg.packet(3).opcode, Opcode::rc_rdma_write_last);
    EXPECT_EQ(seg.packet(3).length, 1024U) << "an exact multiple ends with a full packet";
}

TEST(Segmenter, SinglePacketMessagesAreOnly) {
    EXPECT_EQ(Segmenter(rdma::WrOpcode::send, 64, 1024).packet(0).opcode, Opcode::rc_send_only);
    EXPECT_EQ(Segmenter(rdma::WrOpcode::rdma_write, 1024, 1024).packet(0).opcode,
              Opcode::rc_rdma_write_only);
    EXPECT_EQ(Segmenter(rdma::WrOpcode::send_with_imm, 8, 1024).packet(0).opcode,
              Opcode::rc_send_only_with_immediate);
    EXPECT_EQ(Segmenter(rdma::WrOpcode::send_with_inv, 8, 1024).packet(0).opcode,
              Opcode::rc_send_only_with_invalidate);
    EXPECT_EQ(Segmenter(rdma::WrOpcode::rdma_write_with_imm, 8, 1024).packet(0).opcode,
              Opcode::rc_rdma_write_only_with_immediate);
}

TEST(Segmenter, ZeroLengthIsOneEmptyOnlyPacket) {
    const Segmenter seg(rdma::WrOpcode::send, 0, 1024);
    ASSERT_EQ(seg.packet_count(), 1U);
    EXPECT_EQ(seg.packet(0).opcode, Opcode::rc_send_only);
    EXPECT_EQ(seg.packet(0).length, 0U);
    EXPECT_TRUE(seg.packet(0).last);
}

TEST(Segmenter, ImmediateAndInvalidateRideOnTheLastPacket) {
    const Segmenter imm(rdma::WrOpcode::rdma_write_with_imm, 3000, 1024);
    EXPECT_EQ(imm.packet(0).opcode, Opcode::rc_rdma_write_first);
    EXPECT_EQ(imm.packet(2).opcode, Opcode::rc_rdma_write_last_with_immediate);
    const Segmenter inv(rdma::WrOpcode::send_with_inv, 3000, 1024);
    EXPECT_EQ(inv.packet(2).opcode, Opcode::rc_send_last_with_invalidate);
}

TEST(Segmenter, ReadIsOneRequestSpanningOnePsnPerResponse) {
    // read_lat_4096.pcap: one request, First/Middle/Middle/Last responses.
    const Segmenter read(rdma::WrOpcode::rdma_read, 4096, 1024);
    EXPECT_EQ(read.packet_count(), 1U);
    EXPECT_EQ(read.psn_span(), 4U);
    EXPECT_EQ(read.packet(0).opcode, Opcode::rc_rdma_read_request);
    EXPECT_EQ(Segmenter(rdma::WrOpcode::rdma_read, 0, 1024).psn_span(), 1U);
    EXPECT_EQ(Segmenter(rdma::WrOpcode::rdma_read, 1, 1024).psn_span(), 1U);
}

TEST(Segmenter, AtomicsAreOnePacket) {
    const Segmenter cas(rdma::WrOpcode::atomic_cmp_swap, 8, 1024);
    EXPECT_EQ(cas.packet_count(), 1U);
    EXPECT_EQ(cas.psn_span(), 1U);
    EXPECT_EQ(cas.packet(0).opcode, Opcode::rc_compare_swap);
    EXPECT_EQ(Segmenter(rdma::WrOpcode::atomic_fetch_add, 8, 4096).packet(0).opcode,
              Opcode::rc_fetch_add);
}

TEST(Segmenter, LargeMessageAtEveryMtu) {
    for (std::uint32_t mtu : {256U, 512U, 1024U, 2048U, 4096U}) {
        const std::uint32_t length = (1U << 20) + 17;
        const Segmenter seg(rdma::WrOpcode::rdma_write, length, mtu);
        std::uint64_t total = 0;
        for (std::uint32_t i = 0; i < seg.packet_count(); ++i) {
            const PacketPlan plan = seg.packet(i);
            EXPECT_EQ(plan.offset, total);
            if (!plan.last) {
                EXPECT_EQ(plan.length, mtu) << "first and middle packets are exactly one MTU";
            }
            total += plan.length;
        }
        EXPECT_EQ(total, length);
        EXPECT_EQ(seg.packet_count(), (length + mtu - 1) / mtu);
    }
}

} // namespace
} // namespace prdma::swroce
