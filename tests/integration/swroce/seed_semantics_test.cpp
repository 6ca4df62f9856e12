// The seeds' semantics that a consumer reads back from swroce (issue 11): why a post was refused
// (post_error, seed 001's "not connected"), connection-bound regions (seed 002), the reserved
// L_Key (seed 004) used in real work requests, a deferred FAST_REG's key readable once the post
// returns (seed 001), and one vendor error per FAST_REG rule. Two devices on crossed ring ports,
// real EAL.
#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <memory>
#include <vector>

#include <gtest/gtest.h>

#include <prdma/mem/dma_memory.hpp>
#include <prdma/rdmadev/fastpath.hpp>
#include <prdma/rdmadev/rdmadev.hpp>

#include "../rdmadev/device_pair.hpp"
#include "eal_environment.hpp"

namespace prdma::rdma {
namespace {

const auto* const g_environment =
    test_support::add_eal_environment("swroce_seed_semantics_test", {"--log-level=prdma.*:error"});

constexpr std::size_t kBufferSize = 1 << 20;
constexpr std::uint32_t kSendWr = 16;
constexpr std::uint32_t kMaxSge = 2;
constexpr std::uint32_t kMaxInline = 64;

struct Side {
    Context context;
    ProtectionDomain pd;
    CompletionQueue cq;
    QueuePair qp;
    mem::DmaBuffer buffer;
    MemoryRegionHandle mr;
    std::vector<WorkCompletion> backlog;
    [[nodiscard]] std::uint8_t* data() const { return static_cast<std::uint8_t*>(buffer.data()); }
    [[nodiscard]] std::uint64_t addr() const { return reinterpret_cast<std::uint64_t>(data()); }
};

class SeedSemantics : public ::testing::Test {
protected:
    void SetUp() override {
        pair_ = conformance::swroce_factory().make();
        a_ = make_side(pair_->a());
        b_ = make_side(pair_->b());
        bring_to(*a_, *b_, pair_->gid_b(), QpState::rts);
        bring_to(*b_, *a_, pair_->gid_a(), QpState::rts);
    }
    void TearDown() override {
        a_.reset();
        b_.reset();
        pair_.reset();
    }

    static std::unique_ptr<Side> make_side(DeviceId device) {
        auto side = std::make_unique<Side>(
            Side{std::move(Context::open(device).value()),
                 {},
                 {},
                 {},
                 std::move(mem::DmaBuffer::allocate(kBufferSize, 4096).value()),
                 {},
                 {}});
        side->pd = std::move(side->context.alloc_pd().value());
        side->cq = std::move(side->context.create_cq(1024).value());
        side->qp = make_qp(*side);
        auto mr = side->pd.register_memory(side->buffer.data(), kBufferSize,
                                           mem::access_local_write | mem::access_remote_write |
                                               mem::access_remote_read);
        EXPECT_TRUE(mr.ok()) << mr.error().to_string();
        side->mr = std::move(mr.value());
        return side;
    }

    static QueuePair make_qp(Side& side) {
        QpInitAttr init;
        init.pd = &side.pd;
        init.send_cq = &side.cq;
        init.recv_cq = &side.cq;
        init.caps.max_send_wr = kSendWr;
        init.caps.max_recv_wr = kSendWr;
        init.caps.max_send_sge = kMaxSge;
        init.caps.max_recv_sge = kMaxSge;
        init.caps.max_inline_data = kMaxInline;
        auto qp = side.context.create_qp(init);
        EXPECT_TRUE(qp.ok()) << qp.error().to_string();
        return std::move(qp.value());
    }

    // `remote`'s descriptor, as a peer would receive it out of band.
    static ConnectionDescriptor descriptor_of(const Side& remote) {
        std::array<std::uint8_t, sizeof(ConnectionDescriptor)> wire{};
        auto length = static_cast<std::uint32_t>(wire.size());
        EXPECT_TRUE(remote.qp.export_connection(nullptr, wire.data(), &length).ok());
        auto peer = import_connection(wire.data(), length);
        EXPECT_TRUE(peer.ok()) << peer.error().to_string();
        return peer.ok() ? peer.value() : ConnectionDescriptor{};
    }

    // INIT, then RTR, then RTS towards `remote`, stopping at `target`.
    static void bring_to(Side& local, Side& remote, const Gid& remote_gid, QpState target) {
        if (target == QpState::init) {
            QpAttr init;
            init.state = QpState::init;
            init.port = 1;
            init.access = mem::access_remote_write | mem::access_remote_read;
            ASSERT_TRUE(
                local.qp.modify(init, qp_attr_state | qp_attr_port | qp_attr_access_flags).ok());
            return;
        }
        ConnectionDescriptor peer = descriptor_of(remote);
        EXPECT_EQ(peer.gid, remote_gid);
        ConnectOptions options;
        options.until = target;
        options.timeout = 10;
        options.max_rd_atomic = 4;
        options.max_dest_rd_atomic = 4;
        options.min_rnr_timer = 1;
        const Status st = local.qp.connect(peer, options);
        ASSERT_TRUE(st.ok()) << st.error().to_string();
    }

    // Polls both sides until `side` has `count` completions or five seconds pass.
    std::vector<WorkCompletion> wait(Side& side, std::size_t count) {
        std::vector<WorkCompletion> done;
        done.swap(side.backlog);
        Side& other = &side == a_.get() ? *b_ : *a_;
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
        std::array<WorkCompletion, 32> wc;
        while (done.size() < count && std::chrono::steady_clock::now() < deadline) {
            const std::uint16_t n = poll_cq(side.cq, wc);
            done.insert(done.end(), wc.begin(), wc.begin() + n);
            const std::uint16_t m = poll_cq(other.cq, wc);
            other.backlog.insert(other.backlog.end(), wc.begin(), wc.begin() + m);
        }
        return done;
    }

    // A signaled WRITE of `length` bytes from a's buffer at `offset` to b's buffer at the same
    // offset, through b's MR.
    SendWr write_to_b(std::uint64_t offset, std::uint32_t length) const {
        SendWr wr;
        wr.wr_id = 7;
        wr.opcode = WrOpcode::rdma_write;
        wr.flags = send_signaled;
        wr.num_sge = 1;
        wr.sge = {a_->addr() + offset, length, a_->mr.lkey()};
        wr.rdma.remote_addr = b_->addr() + offset;
        wr.rdma.rkey = b_->mr.rkey();
        return wr;
    }

    // A FAST_REG of one 4 KiB page of b's buffer at `page_offset` under `key`.
    SendWr fast_reg(mem::MemoryRegion* region, mem::MemoryKey key,
                    const std::uint64_t* page) const {
        SendWr wr;
        wr.wr_id = 500;
        wr.opcode = WrOpcode::fast_reg;
        wr.flags = send_signaled;
        wr.fast_reg.region = region;
        wr.fast_reg.pages = page;
        wr.fast_reg.page_count = 1;
        wr.fast_reg.page_shift = 12;
        wr.fast_reg.length = 4096;
        wr.fast_reg.base_va = 0x40000;
        wr.fast_reg.key = key;
        wr.fast_reg.access = mem::access_local_write | mem::access_remote_write;
        return wr;
    }

    // a WRITEs 512 bytes of 0x5a to VA 0x40000 + 1024 of b (fast_reg()'s page) through `rkey`;
    // the WRITE's completion status.
    WcStatus write_to_fast_registered_page(mem::MemoryKey rkey) {
        std::memset(a_->data(), 0x5a, 512);
        SendWr write = write_to_b(0, 512);
        write.rdma.remote_addr = 0x40000 + 1024;
        write.rdma.rkey = rkey;
        if (post_send(a_->qp, {&write, 1}) != 1) {
            ADD_FAILURE() << "post refused: " << status_name(post_error(a_->qp));
            return WcStatus::general_error;
        }
        const auto written = wait(*a_, 1);
        if (written.size() != 1) {
            ADD_FAILURE() << "no completion for the WRITE";
            return WcStatus::general_error;
        }
        return written[0].status;
    }

    DeviceAttr query_device(const Side& side) const {
        std::vector<std::uint8_t> blob(4096);
        auto size = static_cast<std::uint32_t>(blob.size());
        EXPECT_TRUE(side.context.query_device(blob.data(), &size).ok());
        DeviceAttr attr;
        std::memcpy(&attr, blob.data(), sizeof(attr));
        return attr;
    }

    std::unique_ptr<conformance::DevicePair> pair_;
    std::unique_ptr<Side> a_;
    std::unique_ptr<Side> b_;
};

// ---- Item 3: a refused post says why ----

TEST_F(SeedSemantics, APostOnAQpNotConnectedIsRefusedAsNotConnected) {
    QueuePair qp = make_qp(*a_);
    std::swap(qp, a_->qp); // a_->qp is the new one, in RESET
    const SendWr wr = write_to_b(0, 64);
    RecvWr recv;
    recv.num_sge = 1;
    recv.sge = {a_->addr(), 64, a_->mr.lkey()};
    EXPECT_EQ(post_send(a_->qp, {&wr, 1}), 0);
    EXPECT_EQ(post_error(a_->qp), StatusCode::not_connected) << "RESET";
    EXPECT_EQ(post_recv(a_->qp, {&recv, 1}), 0);
    EXPECT_EQ(post_error(a_->qp), StatusCode::not_connected) << "post_recv in RESET";

    bring_to(*a_, *b_, pair_->gid_b(), QpState::init);
    EXPECT_EQ(post_send(a_->qp, {&wr, 1}), 0);
    EXPECT_EQ(post_error(a_->qp), StatusCode::not_connected) << "INIT";
    EXPECT_EQ(post_recv(a_->qp, {&recv, 1}), 1) << "a receive may be posted from INIT on";
    EXPECT_EQ(post_error(a_->qp), StatusCode::ok) << "the post took every WR";

    QueuePair rtr = make_qp(*a_);
    std::swap(rtr, a_->qp);
    bring_to(*a_, *b_, pair_->gid_b(), QpState::rtr);
    EXPECT_EQ(post_send(a_->qp, {&wr, 1}), 0);
    EXPECT_EQ(post_error(a_->qp), StatusCode::not_connected) << "RTR";
}

TEST_F(SeedSemantics, AFullQueueIsRefusedAsNoResources) {
    // Deferred: nothing rings, so the send queue only fills.
    std::vector<SendWr> wrs(4 * kSendWr, write_to_b(0, 64));
    for (SendWr& wr : wrs) {
        wr.flags = send_defer;
    }
    const std::uint16_t taken = post_send(a_->qp, wrs);
    EXPECT_GE(taken, kSendWr);
    EXPECT_LT(taken, wrs.size());
    EXPECT_EQ(post_error(a_->qp), StatusCode::no_resources);

    std::vector<RecvWr> recvs(4 * kSendWr);
    for (RecvWr& recv : recvs) {
        recv.num_sge = 1;
        recv.sge = {b_->addr(), 64, b_->mr.lkey()};
    }
    const std::uint16_t received = post_recv(b_->qp, recvs);
    EXPECT_LT(received, recvs.size());
    EXPECT_EQ(post_error(b_->qp), StatusCode::no_resources);
}

// verbs' bad_wr and errno in one value: how many WRs were taken and why the next one was not.
TEST_F(SeedSemantics, APostReturnsItsCountAndTheFirstRefusalsReasonTogether) {
    const SendWr good = write_to_b(0, 64);
    SendWr bad_opcode = good;
    bad_opcode.opcode = static_cast<WrOpcode>(200);
    const SendWr three[] = {good, bad_opcode, good};
    const PostResult refused = post_send(a_->qp, three);
    EXPECT_EQ(refused.posted, 1);
    EXPECT_EQ(refused.reason, StatusCode::invalid_parameter);
    const PostResult taken = post_send(a_->qp, {&good, 1});
    EXPECT_EQ(taken.posted, 1);
    EXPECT_EQ(taken.reason, StatusCode::ok) << "a post that took every WR has no reason";

    const QueuePair in_reset = make_qp(*a_);
    RecvWr recv;
    recv.num_sge = 1;
    recv.sge = {a_->addr(), 64, a_->mr.lkey()};
    const PostResult not_connected = post_recv(in_reset, {&recv, 1});
    EXPECT_EQ(not_connected.posted, 0);
    EXPECT_EQ(not_connected.reason, StatusCode::not_connected);

    const auto done = wait(*a_, 2);
    ASSERT_EQ(done.size(), 2U);
    EXPECT_EQ(done[0].status, WcStatus::success);
    EXPECT_EQ(done[1].status, WcStatus::success);
}

TEST_F(SeedSemantics, AnInvalidRequestIsRefusedAsInvalidParameter) {
    const SendWr good = write_to_b(0, 64);
    SendWr bad_opcode = good;
    bad_opcode.opcode = static_cast<WrOpcode>(200);
    const SendWr both[] = {good, bad_opcode};
    EXPECT_EQ(post_send(a_->qp, {both, 2}), 1) << "the WR before the bad one is taken";
    EXPECT_EQ(post_error(a_->qp), StatusCode::invalid_parameter) << "not an opcode";

    std::array<Sge, kMaxSge + 1> sges{};
    sges.fill({a_->addr(), 8, a_->mr.lkey()});
    SendWr too_many = good;
    too_many.num_sge = kMaxSge + 1;
    too_many.sg_list = sges.data();
    EXPECT_EQ(post_send(a_->qp, {&too_many, 1}), 0);
    EXPECT_EQ(post_error(a_->qp), StatusCode::invalid_parameter) << "more SGEs than max_send_sge";

    SendWr too_long = good;
    too_long.flags = send_signaled | send_inline;
    too_long.sge.length = kMaxInline + 1;
    EXPECT_EQ(post_send(a_->qp, {&too_long, 1}), 0);
    EXPECT_EQ(post_error(a_->qp), StatusCode::invalid_parameter) << "inline beyond the limit";

    SendWr no_list = good; // two SGEs and nowhere to read them from: used to crash the post
    no_list.num_sge = 2;
    EXPECT_EQ(post_send(a_->qp, {&no_list, 1}), 0);
    EXPECT_EQ(post_error(a_->qp), StatusCode::invalid_parameter) << "num_sge 2 without sg_list";

    RecvWr recv;
    recv.num_sge = kMaxSge + 1;
    recv.sg_list = sges.data();
    EXPECT_EQ(post_recv(a_->qp, {&recv, 1}), 0);
    EXPECT_EQ(post_error(a_->qp), StatusCode::invalid_parameter) << "more SGEs than max_recv_sge";
    RecvWr recv_no_list;
    recv_no_list.num_sge = 2;
    EXPECT_EQ(post_recv(a_->qp, {&recv_no_list, 1}), 0);
    EXPECT_EQ(post_error(a_->qp), StatusCode::invalid_parameter) << "num_sge 2 without sg_list";

    EXPECT_EQ(post_send(a_->qp, {&good, 1}), 1);
    EXPECT_EQ(post_error(a_->qp), StatusCode::ok);
    const auto done = wait(*a_, 2);
    ASSERT_EQ(done.size(), 2U);
    EXPECT_EQ(done[0].status, WcStatus::success);
    EXPECT_EQ(done[1].status, WcStatus::success);
    EXPECT_EQ(a_->qp.state(), QpState::rts) << "a refused WR leaves the QP working";
}

// API v2: a WR's SGEs are its sg_list whenever it has one, whatever num_sge is. One SGE given
// through sg_list used to be ignored for the empty `sge`: the WRITE moved 0 bytes and completed
// in success.
TEST_F(SeedSemantics, OneSgeThroughSgListIsTheSgeUsed) {
    std::memset(a_->data(), 0x6b, 512);
    const Sge only{a_->addr(), 512, a_->mr.lkey()};
    SendWr wr = write_to_b(0, 512);
    wr.sge = {};
    wr.sg_list = &only;
    ASSERT_EQ(post_send(a_->qp, {&wr, 1}), 1);
    const auto done = wait(*a_, 1);
    ASSERT_EQ(done.size(), 1U);
    EXPECT_EQ(done[0].status, WcStatus::success);
    EXPECT_EQ(done[0].byte_len, 512U);
    EXPECT_EQ(std::memcmp(b_->data(), a_->data(), 512), 0) << "the sg_list's bytes were not sent";
}

// ---- Item 5: the reserved L_Key ----

TEST_F(SeedSemantics, TheReservedLkeyIsAdvertisedAndIsEveryConsumersDmaKey) {
    const DeviceAttr attr = query_device(*a_);
    ASSERT_TRUE(attr.capability_flags.has(cap_reserved_lkey));
    ASSERT_NE(attr.reserved_lkey, 0U) << "the capability is set, so the key must be there";
    EXPECT_TRUE(query_device(*b_).capability_flags.has(cap_reserved_lkey));

    ProtectionDomain other_pd = std::move(a_->context.alloc_pd().value());
    Context other_context = std::move(Context::open(pair_->a()).value());
    ProtectionDomain other_context_pd = std::move(other_context.alloc_pd().value());
    auto dma = a_->pd.get_dma_region();
    auto dma_other_pd = other_pd.get_dma_region();
    auto dma_other_context = other_context_pd.get_dma_region();
    ASSERT_TRUE(dma.ok() && dma_other_pd.ok() && dma_other_context.ok());
    EXPECT_EQ(dma->lkey(), attr.reserved_lkey);
    EXPECT_EQ(dma_other_pd->lkey(), attr.reserved_lkey);
    EXPECT_EQ(dma_other_context->lkey(), attr.reserved_lkey);
    EXPECT_TRUE(dma->deregister().ok());
    EXPECT_TRUE(dma_other_pd->deregister().ok());
    EXPECT_TRUE(dma_other_context->deregister().ok());
    EXPECT_EQ(query_device(*a_).reserved_lkey, attr.reserved_lkey)
        << "no consumer's deregister frees the reserved key";
}

// A WRITE gathered through a's reserved L_Key, and a SEND scattered into b through b's: the key
// works in real work requests, with no region of the consumer's own.
// max_mr is what an application can register: the device's held DMA key is not among them.
TEST_F(SeedSemantics, EveryAdvertisedMrCanBeRegisteredAndNoMore) {
    const DeviceAttr attr = query_device(*b_);
    ASSERT_GT(attr.max_mr, 1U);
    ASSERT_LE(attr.max_mr, kBufferSize) << "one-byte regions at distinct offsets of the buffer";
    std::vector<MemoryRegionHandle> regions;
    regions.reserve(attr.max_mr);
    // b_->mr is one already; each one-byte region below is a new key (no two are the same).
    for (std::uint32_t i = 1; i < attr.max_mr; ++i) {
        auto mr = b_->pd.register_memory(b_->data() + i, 1, mem::access_local_write);
        ASSERT_TRUE(mr.ok()) << "region " << i + 1 << " of " << attr.max_mr << ": "
                             << mr.error().to_string();
        regions.push_back(std::move(mr.value()));
    }
    auto one_more = b_->pd.register_memory(b_->data(), 1, mem::access_local_write);
    EXPECT_EQ(one_more.code(), StatusCode::no_resources) << "max_mr + 1 registered";
    auto dma = b_->pd.get_dma_region();
    ASSERT_TRUE(dma.ok()) << "the DMA region takes no key of its own";
    EXPECT_EQ(dma->lkey(), static_cast<mem::MemoryKey>(attr.reserved_lkey));
}

TEST_F(SeedSemantics, TheReservedLkeyWorksInWorkRequests) {
    const auto lkey_a = static_cast<std::uint32_t>(query_device(*a_).reserved_lkey);
    const auto lkey_b = static_cast<std::uint32_t>(query_device(*b_).reserved_lkey);
    auto source = mem::DmaBuffer::allocate(8192, 4096);
    auto sink = mem::DmaBuffer::allocate(8192, 4096);
    ASSERT_TRUE(source.ok() && sink.ok());
    auto* src = static_cast<std::uint8_t*>(source->data());
    for (std::size_t i = 0; i < 8192; ++i) {
        src[i] = static_cast<std::uint8_t>(i * 13 + 5);
    }
    std::memset(sink->data(), 0, 8192);

    SendWr write = write_to_b(0, 3000);
    write.sge = {reinterpret_cast<std::uint64_t>(src), 3000, lkey_a};
    ASSERT_EQ(post_send(a_->qp, {&write, 1}), 1) << status_name(post_error(a_->qp));
    auto done = wait(*a_, 1);
    ASSERT_EQ(done.size(), 1U);
    EXPECT_EQ(done[0].status, WcStatus::success) << wc_status_name(done[0].status);
    EXPECT_EQ(std::memcmp(b_->data(), src, 3000), 0);

    RecvWr recv;
    recv.wr_id = 3;
    recv.num_sge = 1;
    recv.sge = {reinterpret_cast<std::uint64_t>(sink->data()), 8192, lkey_b};
    ASSERT_EQ(post_recv(b_->qp, {&recv, 1}), 1);
    SendWr send = write;
    send.opcode = WrOpcode::send;
    send.sge = {reinterpret_cast<std::uint64_t>(src) + 100, 5000, lkey_a};
    ASSERT_EQ(post_send(a_->qp, {&send, 1}), 1);
    done = wait(*a_, 1);
    ASSERT_EQ(done.size(), 1U);
    EXPECT_EQ(done[0].status, WcStatus::success) << wc_status_name(done[0].status);
    const auto received = wait(*b_, 1);
    ASSERT_EQ(received.size(), 1U);
    EXPECT_EQ(received[0].status, WcStatus::success) << wc_status_name(received[0].status);
    EXPECT_EQ(received[0].byte_len, 5000U);
    EXPECT_EQ(std::memcmp(sink->data(), src + 100, 5000), 0);
}

// ---- Item 6: a deferred FAST_REG's key is there when the post returns ----

TEST_F(SeedSemantics, ADeferredFastRegistersKeyIsReadableAndUsableOnReturn) {
    auto region =
        b_->pd.alloc_fast_reg_region(1, mem::access_local_write | mem::access_remote_write);
    ASSERT_TRUE(region.ok()) << region.error().to_string();
    const std::uint64_t page = b_->addr() + 256 * 1024;
    const mem::MemoryKey key = mem::next_key(region->lkey());
    SendWr reg = fast_reg(region->get(), key, &page);
    reg.flags = send_signaled | send_defer;
    ASSERT_EQ(post_send(b_->qp, {&reg, 1}), 1);
    const mem::MemoryKey token = region->rkey(); // seed 001: available once the call returns
    EXPECT_EQ(token, key);

    // The token read then is the one a peer writes through.
    const WcStatus written = write_to_fast_registered_page(token);
    EXPECT_EQ(written, WcStatus::success) << wc_status_name(written);
    EXPECT_EQ(std::memcmp(b_->data() + 256 * 1024 + 1024, a_->data(), 512), 0);
    const auto registered = wait(*b_, 1);
    ASSERT_EQ(registered.size(), 1U);
    EXPECT_EQ(registered[0].opcode, WcOpcode::fast_reg);
    EXPECT_EQ(registered[0].status, WcStatus::success);
}

// Seed 001: a FAST_REG executes in send-queue order. Behind a WRITE the application holds back
// (DEFER, no doorbell yet) it has not executed, so its key opens nothing to the peer: the same
// WRITE through the same key and address that succeeds above is a remote access error here, and
// not a byte of the page changes.
TEST_F(SeedSemantics, AFastRegistersKeyOpensNothingBeforeTheFastRegExecutes) {
    auto region =
        b_->pd.alloc_fast_reg_region(1, mem::access_local_write | mem::access_remote_write);
    ASSERT_TRUE(region.ok()) << region.error().to_string();
    const std::uint64_t page = b_->addr() + 256 * 1024;
    const mem::MemoryKey key = mem::next_key(region->lkey());

    SendWr held; // b's WRITE to a, posted but not rung
    held.wr_id = 9;
    held.opcode = WrOpcode::rdma_write;
    held.flags = send_signaled | send_defer;
    held.num_sge = 1;
    held.sge = {b_->addr(), 64, b_->mr.lkey()};
    held.rdma.remote_addr = a_->addr();
    held.rdma.rkey = a_->mr.rkey();
    ASSERT_EQ(post_send(b_->qp, {&held, 1}), 1);
    SendWr reg = fast_reg(region->get(), key, &page);
    reg.flags = send_signaled | send_defer;
    ASSERT_EQ(post_send(b_->qp, {&reg, 1}), 1);

    const WcStatus written = write_to_fast_registered_page(key);
    EXPECT_EQ(written, WcStatus::remote_access_error) << wc_status_name(written);
    EXPECT_TRUE(std::all_of(b_->data() + 256 * 1024, b_->data() + 256 * 1024 + 4096,
                            [](std::uint8_t byte) { return byte == 0; }))
        << "the peer wrote through a key whose FAST_REG had not executed";
}

// ---- Item 1: a connection-bound region lives and dies with its connection (seed 002) ----

class ConnectionRegion : public SeedSemantics {
protected:
    static constexpr std::uint64_t kOffset = 256 * 1024;
    static constexpr std::uint32_t kLength = 4096;

    void SetUp() override {
        SeedSemantics::SetUp();
        auto bound = b_->pd.register_for_connection(b_->qp, b_->data() + kOffset, kLength,
                                                    mem::WspAccess::read_write);
        ASSERT_TRUE(bound.ok()) << bound.error().to_string();
        bound_ = std::move(bound.value());
        std::memset(a_->data() + kOffset, 0x5a, kLength);
    }
    void TearDown() override {
        bound_ = {};
        SeedSemantics::TearDown();
    }

    // a WRITEs its bytes at kOffset into b's bound region; returns a's completion status.
    WcStatus write_through_bound_region() {
        SendWr wr = write_to_b(kOffset, kLength);
        wr.rdma.rkey = bound_.rkey();
        if (post_send(a_->qp, {&wr, 1}) != 1) {
            ADD_FAILURE() << "post refused: " << status_name(post_error(a_->qp));
            return WcStatus::general_error;
        }
        const auto done = wait(*a_, 1);
        if (done.size() != 1) {
            ADD_FAILURE() << "no completion for the WRITE";
            return WcStatus::general_error;
        }
        return done[0].status;
    }

    // Both QPs through ERR and RESET, then connected to each other again: same QPNs, same
    // peer, a new connection.
    void reconnect() {
        QpAttr attr;
        for (Side* side : {a_.get(), b_.get()}) {
            for (const QpState state : {QpState::err, QpState::reset}) {
                attr.state = state;
                ASSERT_TRUE(side->qp.modify(attr, qp_attr_state).ok());
            }
        }
        wait(*a_, 0); // the flushes, if any
        a_->backlog.clear();
        b_->backlog.clear();
        bring_to(*a_, *b_, pair_->gid_b(), QpState::rts);
        bring_to(*b_, *a_, pair_->gid_a(), QpState::rts);
    }

    [[nodiscard]] bool untouched() const {
        return std::all_of(b_->data() + kOffset, b_->data() + kOffset + kLength,
                           [](std::uint8_t byte) { return byte == 0; });
    }

    MemoryRegionHandle bound_;
};

TEST_F(ConnectionRegion, ThePeerWritesWhileTheConnectionLasts) {
    std::memset(b_->data() + kOffset, 0, kLength);
    EXPECT_EQ(write_through_bound_region(), WcStatus::success);
    EXPECT_EQ(b_->data()[kOffset], 0x5a);
    EXPECT_EQ(b_->data()[kOffset + kLength - 1], 0x5a);
}

TEST_F(ConnectionRegion, AReconnectedQpNoLongerOpensIt) {
    reconnect();
    std::memset(b_->data() + kOffset, 0, kLength);
    EXPECT_EQ(write_through_bound_region(), WcStatus::remote_access_error);
    EXPECT_TRUE(untouched()) << "the old connection's region took a new connection's WRITE";
}

TEST_F(ConnectionRegion, ANewQpWithTheSameNumberDoesNotOpenIt) {
    // swroce gives a QPN again only after its table slot has gone round (16383 QPs later with
    // 1024 slots): that QP is the case to test.
    const std::uint32_t qpn = b_->qp.qpn();
    ASSERT_TRUE(b_->qp.destroy().ok());
    b_->qp = make_qp(*b_);
    for (int i = 0; i < 20000 && b_->qp.qpn() != qpn; ++i) {
        ASSERT_TRUE(b_->qp.destroy().ok());
        b_->qp = make_qp(*b_);
    }
    ASSERT_EQ(b_->qp.qpn(), qpn) << "the QPN did not come back";
    QpAttr attr;
    for (const QpState state : {QpState::err, QpState::reset}) {
        attr.state = state;
        ASSERT_TRUE(a_->qp.modify(attr, qp_attr_state).ok());
    }
    bring_to(*a_, *b_, pair_->gid_b(), QpState::rts);
    bring_to(*b_, *a_, pair_->gid_a(), QpState::rts);
    std::memset(b_->data() + kOffset, 0, kLength);
    EXPECT_EQ(write_through_bound_region(), WcStatus::remote_access_error);
    EXPECT_TRUE(untouched());
}

TEST_F(ConnectionRegion, ItsLkeyFailsLocallyOnceTheConnectionEnds) {
    reconnect();
    SendWr wr;
    wr.wr_id = 9;
    wr.opcode = WrOpcode::rdma_write;
    wr.flags = send_signaled;
    wr.num_sge = 1;
    wr.sge = {b_->addr() + kOffset, 64, bound_.lkey()};
    wr.rdma.remote_addr = a_->addr();
    wr.rdma.rkey = a_->mr.rkey();
    ASSERT_EQ(post_send(b_->qp, {&wr, 1}), 1);
    const auto done = wait(*b_, 1);
    ASSERT_EQ(done.size(), 1U);
    EXPECT_EQ(done[0].status, WcStatus::local_protection_error) << wc_status_name(done[0].status);
}

TEST_F(ConnectionRegion, ItCannotBeRegisteredOnAQpTheEngineMovedToError) {
    // b's responder refuses a WRITE outside b's MR and moves b's QP to ERR on its own: the class
    // has not been told, yet a region for the ended connection must not be made.
    SendWr wr = write_to_b(0, 64);
    wr.rdma.remote_addr = b_->addr() + kBufferSize;
    ASSERT_EQ(post_send(a_->qp, {&wr, 1}), 1);
    const auto done = wait(*a_, 1);
    ASSERT_EQ(done.size(), 1U);
    ASSERT_EQ(done[0].status, WcStatus::remote_access_error);
    auto late =
        b_->pd.register_for_connection(b_->qp, b_->data(), kLength, mem::WspAccess::read_write);
    EXPECT_EQ(late.code(), StatusCode::not_connected);
}

TEST_F(ConnectionRegion, AWriteOnlyRegionIsNotReadableByThePeer) {
    auto write_only =
        b_->pd.register_for_connection(b_->qp, b_->data(), kLength, mem::WspAccess::write);
    ASSERT_TRUE(write_only.ok()) << write_only.error().to_string();
    SendWr read;
    read.wr_id = 3;
    read.opcode = WrOpcode::rdma_read;
    read.flags = send_signaled;
    read.num_sge = 1;
    read.sge = {a_->addr(), 64, a_->mr.lkey()};
    read.rdma.remote_addr = b_->addr();
    read.rdma.rkey = write_only->rkey();
    ASSERT_EQ(post_send(a_->qp, {&read, 1}), 1);
    const auto done = wait(*a_, 1);
    ASSERT_EQ(done.size(), 1U);
    EXPECT_EQ(done[0].status, WcStatus::remote_access_error) << wc_status_name(done[0].status);
}

// ---- Item 8: one access rule on every entry point ----

TEST_F(SeedSemantics, RemoteWriteWithoutLocalWriteIsRefusedOnEveryEntryPoint) {
    ProtectionDomain& pd = b_->pd;
    const mem::VirtualPiece piece{reinterpret_cast<std::uintptr_t>(b_->data()), 4096};
    auto sgl_of = [&](std::uint64_t iova) { return mem::SglElement{iova, 4096}; };
    const mem::SglElement element = sgl_of(b_->buffer.iova());
    auto cache = pd.create_registration_cache();
    ASSERT_TRUE(cache.ok()) << cache.error().to_string();
    constexpr std::uint32_t ndk_remote_bit =
        mem::ndk::allow_remote_write & ~mem::ndk::allow_local_write;
    for (const AccessFlags access :
         {AccessFlags{mem::access_remote_write}, AccessFlags{mem::access_remote_atomic},
          mem::access_from_ndk_flags(ndk_remote_bit)}) {
        SCOPED_TRACE(access.bits());
        EXPECT_EQ(pd.register_memory(b_->data(), 4096, access).code(),
                  StatusCode::invalid_parameter);
        EXPECT_EQ(pd.register_virtual({&piece, 1}, 12, access).code(),
                  StatusCode::invalid_parameter);
        EXPECT_EQ(pd.register_sgl({&element, 1}, 12, access).code(), StatusCode::invalid_parameter);
        EXPECT_EQ(pd.alloc_fast_reg_region(1, access).code(), StatusCode::invalid_parameter);
        EXPECT_EQ(cache.value()->acquire(b_->data(), 4096, access).code(),
                  StatusCode::invalid_parameter);
    }
    // NDK's ALLOW_REMOTE_WRITE is 0x30: it carries local write and passes everywhere.
    const AccessFlags ndk = mem::access_from_ndk_flags(mem::ndk::allow_remote_write);
    EXPECT_TRUE(pd.register_memory(b_->data(), 4096, ndk).ok());
    EXPECT_TRUE(pd.register_virtual({&piece, 1}, 12, ndk).ok());
    EXPECT_TRUE(pd.register_sgl({&element, 1}, 12, ndk).ok());
    EXPECT_TRUE(pd.alloc_fast_reg_region(1, ndk).ok());
    EXPECT_TRUE(cache.value()->acquire(b_->data(), 4096, ndk).ok());
}

// ---- Item 9: seed 000's virtual registration and the registration cache on a device's PD ----

TEST_F(SeedSemantics, AVirtualRegionInPiecesTakesAWriteAcrossThem) {
    // An MDL chain of two pieces: the tail of one page, then two whole pages elsewhere.
    const std::array<mem::VirtualPiece, 2> pieces{{
        {reinterpret_cast<std::uintptr_t>(b_->data()) + 64 * 1024 + 3072, 1024},
        {reinterpret_cast<std::uintptr_t>(b_->data()) + 128 * 1024, 8192},
    }};
    auto region =
        b_->pd.register_virtual(pieces, 12, mem::access_local_write | mem::access_remote_write);
    ASSERT_TRUE(region.ok()) << region.error().to_string();
    EXPECT_EQ(region->get()->remote_start(), pieces[0].va);
    EXPECT_EQ(region->get()->remote_end(), pieces[0].va + 9216);
    for (std::uint32_t i = 0; i < 9216; ++i) {
        a_->data()[i] = static_cast<std::uint8_t>(i * 13 + 1);
    }
    SendWr wr = write_to_b(0, 9216);
    wr.rdma.remote_addr = pieces[0].va;
    wr.rdma.rkey = region->rkey();
    ASSERT_EQ(post_send(a_->qp, {&wr, 1}), 1);
    const auto done = wait(*a_, 1);
    ASSERT_EQ(done.size(), 1U);
    ASSERT_EQ(done[0].status, WcStatus::success) << wc_status_name(done[0].status);
    EXPECT_EQ(std::memcmp(b_->data() + 64 * 1024 + 3072, a_->data(), 1024), 0);
    EXPECT_EQ(std::memcmp(b_->data() + 128 * 1024, a_->data() + 1024, 8192), 0);
    EXPECT_EQ(b_->data()[64 * 1024 + 4096], 0) << "a byte between the pieces was written";

    // Only the first piece may start inside a page, only the last end inside one.
    const std::array<mem::VirtualPiece, 2> ragged{{pieces[0], {pieces[1].va + 8, 4096}}};
    EXPECT_EQ(b_->pd.register_virtual(ragged, 12, mem::access_local_write).code(),
              StatusCode::invalid_parameter);
}

TEST_F(SeedSemantics, ARegistrationCacheOnThePdServesThePeersWrite) {
    const Context::Resources before = b_->context.resources();
    auto cache = b_->pd.create_registration_cache({4, 1 << 20});
    ASSERT_TRUE(cache.ok()) << cache.error().to_string();
    {
        auto held = cache.value()->acquire(b_->data() + 512 * 1024, 8192,
                                           mem::access_local_write | mem::access_remote_write);
        ASSERT_TRUE(held.ok()) << held.error().to_string();
        EXPECT_EQ(b_->context.resources().mrs, before.mrs + 1) << "counted as the PD's MR";
        auto again =
            cache.value()->acquire(b_->data() + 512 * 1024 + 4096, 64, mem::access_remote_write);
        ASSERT_TRUE(again.ok());
        EXPECT_EQ(again->rkey(), held->rkey());
        EXPECT_EQ(cache.value()->stats().hits, 1U);

        std::memset(a_->data() + 512 * 1024, 0x6b, 8192);
        SendWr wr = write_to_b(512 * 1024, 8192);
        wr.rdma.rkey = held->rkey();
        ASSERT_EQ(post_send(a_->qp, {&wr, 1}), 1);
        const auto done = wait(*a_, 1);
        ASSERT_EQ(done.size(), 1U);
        EXPECT_EQ(done[0].status, WcStatus::success) << wc_status_name(done[0].status);
        EXPECT_EQ(std::memcmp(b_->data() + 512 * 1024, a_->data() + 512 * 1024, 8192), 0);
    }
    cache.value().reset();
    EXPECT_EQ(b_->context.resources().mrs, before.mrs) << "the cache's regions went with it";
}

TEST_F(SeedSemantics, ARegistrationCacheKeepsItsPd) {
    ProtectionDomain pd = std::move(b_->context.alloc_pd().value());
    auto cache = pd.create_registration_cache();
    ASSERT_TRUE(cache.ok()) << cache.error().to_string();
    EXPECT_EQ(pd.destroy().code(), StatusCode::busy) << "the cache registers on the PD";
    cache.value().reset();
    EXPECT_TRUE(pd.destroy().ok());
    // A handle dropped first: the PD goes with the cache.
    const std::uint32_t pds = b_->context.resources().pds;
    auto dropped = std::move(b_->context.alloc_pd().value());
    auto orphan_cache = dropped.create_registration_cache();
    ASSERT_TRUE(orphan_cache.ok());
    dropped = ProtectionDomain{};
    EXPECT_EQ(b_->context.resources().pds, pds + 1);
    EXPECT_TRUE(orphan_cache.value()->acquire(b_->data(), 4096, mem::access_local_write).ok());
    orphan_cache.value().reset();
    EXPECT_EQ(b_->context.resources().pds, pds);
}

// ---- API v2: connect() from a descriptor ----

TEST_F(SeedSemantics, ImportConnectionRefusesWhatIsNotADescriptor) {
    const ConnectionDescriptor good = descriptor_of(*b_);
    auto refused = [](ConnectionDescriptor d, std::uint32_t length = sizeof(ConnectionDescriptor)) {
        return import_connection(&d, length).code();
    };
    EXPECT_EQ(import_connection(&good, sizeof(good)).code(), StatusCode::ok);
    EXPECT_EQ(import_connection(nullptr, sizeof(good)).code(), StatusCode::invalid_parameter);
    EXPECT_EQ(refused(good, sizeof(good) - 1), StatusCode::invalid_parameter);
    ConnectionDescriptor bad = good;
    bad.version = 2;
    EXPECT_EQ(refused(bad), StatusCode::invalid_parameter);
    bad = good;
    bad.size = 12;
    EXPECT_EQ(refused(bad), StatusCode::invalid_parameter);
    bad = good;
    bad.qpn = 0;
    EXPECT_EQ(refused(bad), StatusCode::invalid_parameter);
    bad.qpn = 0x1000000;
    EXPECT_EQ(refused(bad), StatusCode::invalid_parameter);
    bad = good;
    bad.psn = 0x1000000;
    EXPECT_EQ(refused(bad), StatusCode::invalid_parameter);
}

TEST_F(SeedSemantics, ConnectGoesOnFromWhereTheQpIsAndRefusesError) {
    const ConnectionDescriptor peer = descriptor_of(*b_);
    QpAttr attr;
    attr.state = QpState::err;
    ASSERT_TRUE(a_->qp.modify(attr, qp_attr_state).ok());
    EXPECT_EQ(a_->qp.connect(peer).code(), StatusCode::invalid_parameter) << "ERR: reset first";
    attr.state = QpState::reset;
    ASSERT_TRUE(a_->qp.modify(attr, qp_attr_state).ok());
    ConnectOptions wide;
    wide.sq_psn = 1U << 24;
    EXPECT_EQ(a_->qp.connect(peer, wide).code(), StatusCode::invalid_parameter)
        << "a send PSN past 24 bits";
    EXPECT_EQ(a_->qp.state(), QpState::reset) << "refused before any transition";
    ConnectOptions receive_only;
    receive_only.until = QpState::rtr;
    ASSERT_TRUE(a_->qp.connect(peer, receive_only).ok());
    EXPECT_EQ(a_->qp.state(), QpState::rtr);
    ASSERT_TRUE(a_->qp.connect(peer).ok());
    EXPECT_EQ(a_->qp.state(), QpState::rts);
    EXPECT_TRUE(a_->qp.connect(peer).ok()) << "already connected: nothing to do";
    // b's QP still expects a's old PSNs; reset and connect it to a's new descriptor.
    for (const QpState state : {QpState::err, QpState::reset}) {
        attr.state = state;
        ASSERT_TRUE(b_->qp.modify(attr, qp_attr_state).ok());
    }
    ASSERT_TRUE(b_->qp.connect(descriptor_of(*a_)).ok());
    std::memset(a_->data(), 0x33, 256);
    const SendWr wr = write_to_b(0, 256);
    ASSERT_EQ(post_send(a_->qp, {&wr, 1}), 1);
    const auto done = wait(*a_, 1);
    ASSERT_EQ(done.size(), 1U);
    EXPECT_EQ(done[0].status, WcStatus::success) << wc_status_name(done[0].status);
    EXPECT_EQ(std::memcmp(b_->data(), a_->data(), 256), 0);
}

// ---- Seed 001's READ_FENCE and SILENT_SUCCESS, observed on the data ----

class ReadFence : public SeedSemantics, public ::testing::WithParamInterface<SendFlags> {};

// a READs b's bytes into its buffer, then WRITEs that buffer back to b elsewhere. Fenced, the
// WRITE must carry what the READ brought, not what was there before.
TEST_P(ReadFence, AFencedWriteCarriesWhatTheReadBrought) {
    constexpr std::uint32_t length = 8192; // several READ responses
    for (std::uint32_t i = 0; i < length; ++i) {
        b_->data()[i] = static_cast<std::uint8_t>(i * 7 + 3);
    }
    std::memset(a_->data() + 64 * 1024, 0xee, length); // the stale bytes an unfenced WRITE sends
    std::array<SendWr, 2> wrs{};
    wrs[0] = write_to_b(64 * 1024, length);
    wrs[0].opcode = WrOpcode::rdma_read;
    wrs[0].wr_id = 1;
    wrs[0].rdma.remote_addr = b_->addr();
    wrs[1] = write_to_b(64 * 1024, length);
    wrs[1].wr_id = 2;
    wrs[1].flags = send_signaled | GetParam();
    wrs[1].rdma.remote_addr = b_->addr() + 256 * 1024;
    ASSERT_EQ(post_send(a_->qp, {wrs.data(), 2}), 2);
    const auto done = wait(*a_, 2);
    ASSERT_EQ(done.size(), 2U);
    EXPECT_EQ(done[1].status, WcStatus::success);
    EXPECT_EQ(std::memcmp(b_->data() + 256 * 1024, b_->data(), length), 0)
        << "the fenced WRITE went before the READ's data arrived";
}

INSTANTIATE_TEST_SUITE_P(FenceAndReadFence, ReadFence,
                         ::testing::Values(send_fence, send_read_fence));

// Seed 001: SILENT_SUCCESS hides a success only; a failing unsignaled WR still completes.
TEST_F(SeedSemantics, AnUnsignaledWrThatFailsStillCompletes) {
    SendWr wr = write_to_b(0, 64);
    wr.wr_id = 77;
    wr.flags = {};                    // unsignaled
    wr.rdma.rkey = b_->mr.rkey() + 1; // a stale variant of b's key
    ASSERT_EQ(post_send(a_->qp, {&wr, 1}), 1);
    const auto done = wait(*a_, 1);
    ASSERT_EQ(done.size(), 1U);
    EXPECT_EQ(done[0].wr_id, 77U);
    EXPECT_EQ(done[0].status, WcStatus::remote_access_error) << wc_status_name(done[0].status);
}

// ---- Item 7: each FAST_REG rule has its own vendor error ----

class FastRegRules : public SeedSemantics,
                     public ::testing::WithParamInterface<FastRegVendorError> {};

TEST_P(FastRegRules, TheCompletionNamesTheRuleBroken) {
    const FastRegVendorError rule = GetParam();
    auto region =
        b_->pd.alloc_fast_reg_region(1, mem::access_local_write | mem::access_remote_write);
    ASSERT_TRUE(region.ok());
    std::uint64_t page = b_->addr() + 128 * 1024;
    const mem::MemoryKey key = mem::next_key(region->lkey());
    SendWr reg = fast_reg(region->get(), key, &page);
    // A successful FAST_REG first, for the rules about registering again.
    if (rule == FastRegVendorError::still_valid ||
        rule == FastRegVendorError::variant_not_changed) {
        ASSERT_EQ(post_send(b_->qp, {&reg, 1}), 1);
        if (rule == FastRegVendorError::variant_not_changed) {
            SendWr inv;
            inv.opcode = WrOpcode::local_inv;
            inv.local_inv.key = key;
            ASSERT_EQ(post_send(b_->qp, {&inv, 1}), 1);
        } else {
            reg.fast_reg.key = mem::next_key(key);
        }
        const auto first = wait(*b_, 1);
        ASSERT_EQ(first.size(), 1U);
        ASSERT_EQ(first[0].status, WcStatus::success);
    }
    ProtectionDomain other_pd = std::move(b_->context.alloc_pd().value());
    auto foreign = other_pd.alloc_fast_reg_region(1, mem::access_local_write);
    auto local_only = b_->pd.alloc_fast_reg_region(1, mem::access_local_write);
    ASSERT_TRUE(foreign.ok() && local_only.ok());
    WcStatus status = WcStatus::local_qp_operation_error;
    switch (rule) {
    case FastRegVendorError::no_region:
        reg.fast_reg.region = nullptr;
        break;
    case FastRegVendorError::not_fast_reg_region:
        reg.fast_reg.region = b_->mr.get();
        reg.fast_reg.key = mem::next_key(b_->mr.lkey());
        break;
    case FastRegVendorError::key_index_changed:
        reg.fast_reg.key = mem::next_key(local_only->lkey());
        break;
    case FastRegVendorError::wrong_pd:
        reg.fast_reg.region = foreign->get();
        reg.fast_reg.key = mem::next_key(foreign->lkey());
        reg.fast_reg.access = mem::access_local_write;
        status = WcStatus::local_protection_error;
        break;
    case FastRegVendorError::access_violation:
        reg.fast_reg.region = local_only->get();
        reg.fast_reg.key = mem::next_key(local_only->lkey());
        status = WcStatus::local_protection_error;
        break;
    case FastRegVendorError::bad_access:
        reg.fast_reg.access = mem::access_remote_write; // without local write
        break;
    case FastRegVendorError::bad_page_size:
        reg.fast_reg.page_shift = 11;
        break;
    case FastRegVendorError::no_pages:
        reg.fast_reg.page_count = 0;
        break;
    case FastRegVendorError::too_many_pages:
        reg.fast_reg.page_count = 2;
        break;
    case FastRegVendorError::zero_length:
        reg.fast_reg.length = 0;
        break;
    case FastRegVendorError::fbo_beyond_page:
        reg.fast_reg.first_byte_offset = 4096;
        reg.fast_reg.length = 1;
        break;
    case FastRegVendorError::length_beyond_pages:
        reg.fast_reg.length = 4097;
        break;
    case FastRegVendorError::base_va_not_fbo_aligned:
        reg.fast_reg.base_va = 0x40001;
        break;
    case FastRegVendorError::address_overflow:
        reg.fast_reg.base_va = ~std::uint64_t{0xfff};
        break;
    case FastRegVendorError::page_not_aligned:
        page += 8;
        break;
    default:
        break; // still_valid, variant_not_changed: set up above
    }
    ASSERT_EQ(post_send(b_->qp, {&reg, 1}), 1);
    const auto done = wait(*b_, 1);
    ASSERT_EQ(done.size(), 1U);
    EXPECT_EQ(done[0].opcode, WcOpcode::fast_reg);
    EXPECT_EQ(done[0].status, status) << wc_status_name(done[0].status);
    EXPECT_EQ(done[0].vendor_error, static_cast<std::uint32_t>(rule));
}

INSTANTIATE_TEST_SUITE_P(
    EachRule, FastRegRules,
    ::testing::Values(FastRegVendorError::no_region, FastRegVendorError::not_fast_reg_region,
                      FastRegVendorError::key_index_changed,
                      FastRegVendorError::variant_not_changed, FastRegVendorError::still_valid,
                      FastRegVendorError::wrong_pd, FastRegVendorError::access_violation,
                      FastRegVendorError::bad_access, FastRegVendorError::bad_page_size,
                      FastRegVendorError::no_pages, FastRegVendorError::too_many_pages,
                      FastRegVendorError::zero_length, FastRegVendorError::fbo_beyond_page,
                      FastRegVendorError::length_beyond_pages,
                      FastRegVendorError::base_va_not_fbo_aligned,
                      FastRegVendorError::address_overflow, FastRegVendorError::page_not_aligned));

} // namespace
} // namespace prdma::rdma
