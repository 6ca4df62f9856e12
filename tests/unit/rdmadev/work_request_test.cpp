// The work-request builders (work_request.hpp): each sets its opcode, its remote fields and its SGE
// count together, and nothing else.
#include <array>

#include <gtest/gtest.h>

#include <prdma/rdmadev/work_request.hpp>

namespace prdma::rdma {
namespace {

constexpr Sge kLocal{0x1000, 64, 0x1234};

void expect_one_sge(const SendWr& wr, std::uint64_t wr_id) {
    EXPECT_EQ(wr.wr_id, wr_id);
    EXPECT_EQ(wr.num_sge, 1);
    EXPECT_EQ(wr.sg_list, nullptr);
    EXPECT_EQ(wr.sge.addr, kLocal.addr);
    EXPECT_EQ(wr.sge.length, kLocal.length);
    EXPECT_EQ(wr.sge.lkey, kLocal.lkey);
    EXPECT_EQ(wr.imm_or_invalidate, 0U);
}

TEST(WorkRequestBuilders, SendWriteAndReadCarryTheirOpcodeSgeAndRemoteFields) {
    const SendWr send = send_wr(1, kLocal);
    expect_one_sge(send, 1);
    EXPECT_EQ(send.opcode, WrOpcode::send);
    EXPECT_TRUE(send.flags.has(send_signaled));

    const SendWr write = write_wr(2, kLocal, 0xabc000, 0x77, send_inline);
    expect_one_sge(write, 2);
    EXPECT_EQ(write.opcode, WrOpcode::rdma_write);
    EXPECT_EQ(write.rdma.remote_addr, 0xabc000U);
    EXPECT_EQ(write.rdma.rkey, 0x77U);
    EXPECT_TRUE(write.flags.has(send_inline));
    EXPECT_FALSE(write.flags.has(send_signaled)) << "flags given replace the default";

    const SendWr read = read_wr(3, kLocal, 0xdef000, 0x88);
    expect_one_sge(read, 3);
    EXPECT_EQ(read.opcode, WrOpcode::rdma_read);
    EXPECT_EQ(read.rdma.remote_addr, 0xdef000U);
    EXPECT_EQ(read.rdma.rkey, 0x88U);
}

TEST(WorkRequestBuilders, AtomicsCarryTheirOperands) {
    const SendWr add = fetch_add_wr(4, kLocal, 0x5000, 0x99, 7);
    expect_one_sge(add, 4);
    EXPECT_EQ(add.opcode, WrOpcode::atomic_fetch_add);
    EXPECT_EQ(add.atomic.remote_addr, 0x5000U);
    EXPECT_EQ(add.atomic.rkey, 0x99U);
    EXPECT_EQ(add.atomic.compare_add, 7U);
    EXPECT_EQ(add.atomic.swap, 0U);

    const SendWr swap = compare_swap_wr(5, kLocal, 0x6000, 0xaa, 10, 20);
    expect_one_sge(swap, 5);
    EXPECT_EQ(swap.opcode, WrOpcode::atomic_cmp_swap);
    EXPECT_EQ(swap.atomic.remote_addr, 0x6000U);
    EXPECT_EQ(swap.atomic.rkey, 0xaaU);
    EXPECT_EQ(swap.atomic.compare_add, 10U);
    EXPECT_EQ(swap.atomic.swap, 20U);
}

TEST(WorkRequestBuilders, AListOfSgesSetsItsCountToo) {
    const std::array<Sge, 3> list = {kLocal, kLocal, kLocal};
    SendWr write = write_wr(6, kLocal, 0x7000, 0xbb);
    EXPECT_EQ(&with_sges(write, list), &write);
    EXPECT_EQ(write.num_sge, 3);
    EXPECT_EQ(write.sg_list, list.data());
    EXPECT_EQ(write.sges(), list.data());

    RecvWr recv = recv_wr(8, kLocal);
    EXPECT_EQ(recv.wr_id, 8U);
    EXPECT_EQ(recv.num_sge, 1);
    EXPECT_EQ(recv.sges(), &recv.sge);
    with_sges(recv, std::span<const Sge>(list).first(2));
    EXPECT_EQ(recv.num_sge, 2);
    EXPECT_EQ(recv.sges(), list.data());
}

TEST(WorkRequestBuilders, FastRegisterAndInvalidateCarryTheirKeyAndNoSge) {
    const std::array<std::uint64_t, 2> pages = {0x10000, 0x11000};
    FastRegFields map;
    map.pages = pages.data();
    map.page_count = 2;
    map.length = 0x1800;
    map.base_va = 0x10000;
    map.key = 0x000305;
    map.access = mem::access_remote_write | mem::access_local_write;
    const SendWr reg = fast_reg_wr(9, map, send_signaled | send_fence);
    EXPECT_EQ(reg.wr_id, 9U);
    EXPECT_EQ(reg.opcode, WrOpcode::fast_reg);
    EXPECT_EQ(reg.num_sge, 0);
    EXPECT_TRUE(reg.flags.has(SendFlag::fence));
    EXPECT_EQ(reg.fast_reg.pages, pages.data());
    EXPECT_EQ(reg.fast_reg.page_count, 2U);
    EXPECT_EQ(reg.fast_reg.key, 0x000305U);
    EXPECT_EQ(reg.fast_reg.access, map.access);

    const SendWr inv = local_inv_wr(10, 0x000305);
    EXPECT_EQ(inv.opcode, WrOpcode::local_inv);
    EXPECT_EQ(inv.num_sge, 0);
    EXPECT_TRUE(inv.flags.has(SendFlag::signaled));
    EXPECT_EQ(inv.local_inv.key, 0x000305U);
}

TEST(WorkRequestBuilders, ADefaultWrIsAllZero) {
    SendWr wr; // default-initialized, as most callers make one
    EXPECT_EQ(wr.wr_id, 0U);
    EXPECT_EQ(wr.num_sge, 0);
    EXPECT_EQ(wr.fast_reg.region, nullptr);
    EXPECT_EQ(wr.fast_reg.pages, nullptr);
    EXPECT_EQ(wr.fast_reg.length, 0U);
}

} // namespace
} // namespace prdma::rdma
