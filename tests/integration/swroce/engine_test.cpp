// The swroce engine end to end in one process: two devices on crossed ring ports, RC QPs connected
// through the public API, data moved by SEND/RECV and WRITE and checked byte for byte, errors
// reported where the IBTA puts them.
#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <numeric>
#include <optional>
#include <set>
#include <thread>
#include <unistd.h>
#include <vector>

#include <gtest/gtest.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>

#include <prdma/mem/dma_memory.hpp>
#include <prdma/rdmadev/fastpath.hpp>
#include <prdma/rdmadev/rdmadev.hpp>
#include <prdma/roce/packet.hpp>
#include <prdma/roce/psn.hpp>

#include "../rdmadev/device_pair.hpp"
#include "eal_environment.hpp"

namespace prdma::rdma {
namespace {

const auto* const g_environment =
    test_support::add_eal_environment("swroce_engine_test", {"--log-level=prdma.*:error"});

struct Side {
    std::vector<WorkCompletion> backlog; // polled while waiting on the other side
    Context context;
    ProtectionDomain pd;
    CompletionQueue cq;
    QueuePair qp;
    mem::DmaBuffer buffer;
    MemoryRegionHandle mr;
    std::uint8_t* data() const { return static_cast<std::uint8_t*>(buffer.data()); }
    std::uint64_t addr() const { return reinterpret_cast<std::uint64_t>(buffer.data()); }
};

constexpr std::size_t kBufferSize = 1 << 20;

class EngineTest : public ::testing::Test {
protected:
    // Devargs added to the devices (the loss test drops frames, the wire test captures).
    virtual std::string extra_devargs() const { return {}; }
    virtual std::string extra_devargs_b() const { return extra_devargs(); }
    virtual bool ipv6() const { return false; }
    virtual unsigned queues() const { return 1; }
    virtual std::uint16_t b_group() const { return 0; } // queue group of b's CQ and QP
    virtual std::uint8_t transport_timeout() const { return 10; }
    // Both QPs told their peer repeats selectively (QpAttr::selective_repeat).
    virtual bool selective_repeat() const { return false; }

    void SetUp() override {
        pair_ = conformance::swroce_factory({extra_devargs(), extra_devargs_b(), ipv6(), queues()})
                    .make();
        a_ = make_side(pair_->a());
        b_ = make_side(pair_->b(), b_group());
        connect(*a_, *b_, pair_->gid_b());
        connect(*b_, *a_, pair_->gid_a());
    }
    void TearDown() override {
        a_.reset();
        b_.reset();
        pair_.reset();
    }

    static std::unique_ptr<Side> make_side(DeviceId device, std::uint16_t group = 0) {
        auto side = std::make_unique<Side>(
            Side{{},
                 std::move(Context::open(device).value()),
                 {},
                 {},
                 {},
                 std::move(mem::DmaBuffer::allocate(kBufferSize, 4096).value()),
                 {}});
        side->pd = std::move(side->context.alloc_pd().value());
        side->cq = std::move(side->context.create_cq(4096, group).value());
        side->qp = make_qp(*side);
        auto mr = side->pd.register_memory(side->buffer.data(), kBufferSize,
                                           mem::access_local_write | mem::access_remote_write |
                                               mem::access_remote_read | mem::access_remote_atomic);
        EXPECT_TRUE(mr.ok()) << mr.error().to_string();
        side->mr = std::move(mr.value());
        return side;
    }

    // A QP on the side's PD and CQ.
    static QueuePair make_qp(Side& side) {
        QpInitAttr init;
        init.pd = &side.pd;
        init.send_cq = &side.cq;
        init.recv_cq = &side.cq;
        init.caps.max_send_wr = 1024;
        init.caps.max_recv_wr = 1024;
        init.caps.max_inline_data = 128;
        return std::move(side.context.create_qp(init).value());
    }

    // A thread attached as b's poller that holds b's groups without running them until run(),
    // then drives them; it detaches (without a progress if never run) and is joined when the
    // owner goes, however the test ends (a failed ASSERT returns early).
    class IdleOwner {
    public:
        explicit IdleOwner(Side& b)
            : thread_([this, &b] {
                  auto poller = b.context.attach_poller();
                  phase_ = 1;
                  while (poller && phase_.load() == 1) {
                      std::this_thread::yield();
                  }
                  while (poller && phase_.load() == 2) {
                      (void)progress(poller.value());
                  }
              }) {
            while (phase_.load() == 0) {
                std::this_thread::yield();
            }
        }
        IdleOwner(const IdleOwner&) = delete;
        IdleOwner& operator=(const IdleOwner&) = delete;
        ~IdleOwner() {
            phase_ = 3;
            thread_.join();
        }
        void run() { phase_ = 2; }

    private:
        std::atomic<int> phase_{0}; // 0 attaching, 1 holding, 2 running, 3 leaving
        std::thread thread_;
    };

    // A modify of b's QP to ERR (request id 7) sent to an idle poller that then detaches
    // without running it.
    Status leave_a_modify() {
        const IdleOwner owner(*b_);
        QpAttr err;
        err.state = QpState::err;
        return b_->qp.modify(err, qp_attr_state, 7);
    }

    // CQ creates on b's `group` its idle owner has yet to take, until the mailbox takes no more.
    std::vector<CompletionQueue> fill_mailbox(std::uint16_t group) {
        std::vector<CompletionQueue> waiting;
        for (int i = 0; i < 4096; ++i) {
            auto cq = b_->context.create_cq(16, group, 1000 + i);
            if (!cq.ok()) {
                EXPECT_EQ(cq.code(), StatusCode::busy) << cq.error().to_string();
                break;
            }
            waiting.push_back(std::move(cq.value()));
        }
        return waiting;
    }

    // Connects at PSN 1000 both ways (the crafted frames of several tests count from there), with
    // the peer's MAC from its port (no ARP).
    void connect(Side& local, Side& remote, const Gid& remote_gid, std::uint8_t rnr_retry = 7) {
        connect_qp(local.qp, remote, remote.qp, remote_gid, rnr_retry);
    }
    void connect_qp(QueuePair& local, Side& remote, const QueuePair& remote_qp,
                    const Gid& remote_gid, std::uint8_t rnr_retry = 7) {
        std::vector<std::uint8_t> port(512);
        std::uint32_t got = static_cast<std::uint32_t>(port.size());
        ASSERT_TRUE(remote.context.query_port(1, port.data(), &got).ok());
        PortAttr remote_port;
        std::memcpy(&remote_port, port.data(), sizeof(remote_port));
        ConnectionDescriptor peer;
        peer.qpn = remote_qp.qpn();
        peer.psn = 1000;
        peer.gid = remote_gid;
        std::memcpy(peer.mac, remote_port.mac, sizeof(peer.mac));
        ConnectOptions options;
        options.sq_psn = 1000;
        options.timeout = transport_timeout(); // ~4 ms by default
        options.rnr_retry = rnr_retry;
        options.max_rd_atomic = 4;
        options.max_dest_rd_atomic = 4;
        options.min_rnr_timer = 1; // 10 us: keeps the RNR test short
        options.selective_repeat = selective_repeat();
        const Status status = local.connect(peer, options);
        ASSERT_TRUE(status.ok()) << status.error().to_string();
    }

    // Connects `qp` to `peer_qp` at `gid` with no MAC, so the device resolves it. connect() goes a
    // step at a time while a step pends; both control paths are polled (they drive the devices
    // here), so the peer answers the request.
    std::string connect_without_mac(Side& side, QueuePair& qp, const QueuePair& peer_qp,
                                    const Gid& gid, std::uint64_t id) {
        ConnectionDescriptor peer;
        peer.qpn = peer_qp.qpn();
        peer.psn = 1000;
        peer.gid = gid; // no MAC
        ConnectOptions options;
        options.sq_psn = 1000;
        options.max_rd_atomic = 4;
        options.max_dest_rd_atomic = 4;
        for (int step = 0; step < 4; ++step) {
            const Status started = qp.connect(peer, options, id + step);
            if (started.code() != StatusCode::pending) {
                return started.ok() ? "done" : started.error().to_string();
            }
            ControlCompletion done[8];
            std::optional<ControlCompletion> finished;
            const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
            while (!finished && std::chrono::steady_clock::now() < deadline) {
                Side& other = &side == a_.get() ? *b_ : *a_;
                (void)other.context.poll_control(done);
                const std::size_t n = side.context.poll_control(done);
                for (std::size_t k = 0; k < n; ++k) {
                    if (done[k].request_id == id + step) {
                        finished = done[k];
                    }
                }
            }
            if (!finished) {
                return "still pending after 5 s";
            }
            if (finished->status != StatusCode::ok) {
                return finished->message;
            }
        }
        return "not connected after 4 steps";
    }

    // Polls both sides (each drives its own device) until `side` has `count` completions or a few
    // seconds pass; what the other side completes meanwhile is kept for its own wait().
    std::vector<WorkCompletion> wait(Side& side, std::size_t count,
                                     std::chrono::milliseconds timeout = std::chrono::seconds(5)) {
        std::vector<WorkCompletion> done;
        done.swap(side.backlog);
        Side& other = &side == a_.get() ? *b_ : *a_;
        const auto deadline = std::chrono::steady_clock::now() + timeout;
        WorkCompletion wc[32];
        ControlCompletion control[4];
        while (done.size() < count && std::chrono::steady_clock::now() < deadline) {
            const std::uint16_t n = poll_cq(side.cq, {wc, 32});
            done.insert(done.end(), wc, wc + n);
            const std::uint16_t m = poll_cq(other.cq, {wc, 32});
            other.backlog.insert(other.backlog.end(), wc, wc + m);
            // Queue groups without a CQ here (the handover tests) are driven by the control path.
            (void)side.context.poll_control(control);
            (void)other.context.poll_control(control);
        }
        if (done.size() > count) {
            side.backlog.assign(done.begin() + static_cast<std::ptrdiff_t>(count), done.end());
            done.resize(count);
        }
        return done;
    }

    void post_receive(Side& side, std::uint64_t wr_id, std::uint64_t offset, std::uint32_t length) {
        RecvWr wr;
        wr.wr_id = wr_id;
        wr.num_sge = 1;
        wr.sge = {side.addr() + offset, length, side.mr.lkey()};
        ASSERT_EQ(post_recv(side.qp, {&wr, 1}), 1);
    }

    // Posts `wrs` on a, `chunk` at a time, polling a while its send queue is full.
    void post_all(const std::vector<SendWr>& wrs, std::size_t chunk) {
        for (std::size_t i = 0; i < wrs.size();) {
            const auto n =
                post_send(a_->qp, {wrs.data() + i,
                                   static_cast<std::uint16_t>(std::min(chunk, wrs.size() - i))});
            i += n;
            if (n == 0) {
                (void)wait(*a_, 0, std::chrono::milliseconds(1));
            }
        }
    }
    SendWr send_wr(Side& side, WrOpcode op, std::uint64_t offset, std::uint32_t length) {
        SendWr wr;
        wr.wr_id = 77;
        wr.opcode = op;
        wr.flags = send_signaled;
        wr.num_sge = 1;
        wr.sge = {side.addr() + offset, length, side.mr.lkey()};
        return wr;
    }

    static void fill(Side& side, std::uint64_t offset, std::size_t length, std::uint8_t seed) {
        for (std::size_t i = 0; i < length; ++i) {
            side.data()[offset + i] = static_cast<std::uint8_t>(seed + i * 7);
        }
    }

    struct Objects {
        CompletionQueue cq;
        QueuePair qp;
    };
    static Objects make_objects(Side& side) {
        Objects objects;
        objects.cq = std::move(side.context.create_cq(16).value());
        QpInitAttr init;
        init.pd = &side.pd;
        init.send_cq = &objects.cq;
        init.recv_cq = &objects.cq;
        objects.qp = std::move(side.context.create_qp(init).value());
        return objects;
    }

    // A device counter by name (the test fails if there is none).
    static std::uint64_t counter(Side& side, const std::string& name) {
        auto counters = side.context.query_stats();
        EXPECT_TRUE(counters.ok());
        for (const Counter& c : counters.value()) {
            if (c.name == name) {
                return c.value;
            }
        }
        ADD_FAILURE() << "no counter " << name;
        return 0;
    }

    std::unique_ptr<conformance::DevicePair> pair_;
    std::unique_ptr<Side> a_, b_;
};

TEST_F(EngineTest, SendReceiveSmall) {
    fill(*a_, 0, 64, 1);
    post_receive(*b_, 5, 4096, 256);
    SendWr wr = send_wr(*a_, WrOpcode::send, 0, 64);
    ASSERT_EQ(post_send(a_->qp, {&wr, 1}), 1);
    const auto sent = wait(*a_, 1);
    ASSERT_EQ(sent.size(), 1U);
    EXPECT_EQ(sent[0].status, WcStatus::success) << wc_status_name(sent[0].status);
    EXPECT_EQ(sent[0].opcode, WcOpcode::send);
    const auto received = wait(*b_, 1);
    ASSERT_EQ(received.size(), 1U);
    EXPECT_EQ(received[0].wr_id, 5U);
    EXPECT_EQ(received[0].status, WcStatus::success);
    EXPECT_EQ(received[0].byte_len, 64U);
    EXPECT_EQ(received[0].src_qpn, a_->qp.qpn());
    EXPECT_EQ(std::memcmp(a_->data(), b_->data() + 4096, 64), 0);
}

TEST_F(EngineTest, SendAcrossManyMtuSegmentsWithImmediate) {
    constexpr std::uint32_t length = 10000; // 10 packets at MTU 1024
    fill(*a_, 0, length, 3);
    post_receive(*b_, 6, 65536, length);
    SendWr wr = send_wr(*a_, WrOpcode::send_with_imm, 0, length);
    wr.imm_or_invalidate = 0xabcdef01;
    ASSERT_EQ(post_send(a_->qp, {&wr, 1}), 1);
    ASSERT_EQ(wait(*a_, 1).size(), 1U);
    const auto received = wait(*b_, 1);
    ASSERT_EQ(received.size(), 1U);
    EXPECT_EQ(received[0].byte_len, length);
    EXPECT_TRUE(received[0].flags & wc_with_imm);
    EXPECT_EQ(received[0].imm_or_invalidated, 0xabcdef01U);
    EXPECT_EQ(std::memcmp(a_->data(), b_->data() + 65536, length), 0);
}

TEST_F(EngineTest, WriteAndWriteWithImmediate) {
    constexpr std::uint32_t length = 100 * 1024 + 3;
    fill(*a_, 0, length, 9);
    SendWr wr = send_wr(*a_, WrOpcode::rdma_write, 0, length);
    wr.rdma.remote_addr = b_->addr() + 128;
    wr.rdma.rkey = b_->mr.rkey();
    ASSERT_EQ(post_send(a_->qp, {&wr, 1}), 1);
    const auto done = wait(*a_, 1);
    ASSERT_EQ(done.size(), 1U);
    EXPECT_EQ(done[0].status, WcStatus::success) << wc_status_name(done[0].status);
    EXPECT_EQ(done[0].opcode, WcOpcode::rdma_write);
    EXPECT_EQ(std::memcmp(a_->data(), b_->data() + 128, length), 0);

    post_receive(*b_, 8, 0, 0);
    SendWr imm = send_wr(*a_, WrOpcode::rdma_write_with_imm, 0, 4096);
    imm.rdma.remote_addr = b_->addr() + 512 * 1024;
    imm.rdma.rkey = b_->mr.rkey();
    imm.imm_or_invalidate = 42;
    ASSERT_EQ(post_send(a_->qp, {&imm, 1}), 1);
    ASSERT_EQ(wait(*a_, 1).size(), 1U);
    const auto received = wait(*b_, 1);
    ASSERT_EQ(received.size(), 1U);
    EXPECT_EQ(received[0].opcode, WcOpcode::recv_rdma_with_imm);
    EXPECT_EQ(received[0].imm_or_invalidated, 42U);
    EXPECT_EQ(std::memcmp(a_->data(), b_->data() + 512 * 1024, 4096), 0);
}

// The receive completion of a WRITE_WITH_IMM reports the whole WRITE (the RETH's DMA length), not
// the payload of its last packet.
TEST_F(EngineTest, WriteWithImmediateAcrossPacketsReportsTheWholeLength) {
    constexpr std::uint32_t length = 10000; // 10 packets at MTU 1024
    fill(*a_, 0, length, 13);
    post_receive(*b_, 9, 0, 0);
    SendWr imm = send_wr(*a_, WrOpcode::rdma_write_with_imm, 0, length);
    imm.rdma.remote_addr = b_->addr() + 65536;
    imm.rdma.rkey = b_->mr.rkey();
    imm.imm_or_invalidate = 0x01020304;
    ASSERT_EQ(post_send(a_->qp, {&imm, 1}), 1);
    ASSERT_EQ(wait(*a_, 1).size(), 1U);
    const auto received = wait(*b_, 1);
    ASSERT_EQ(received.size(), 1U);
    EXPECT_EQ(received[0].status, WcStatus::success) << wc_status_name(received[0].status);
    EXPECT_EQ(received[0].opcode, WcOpcode::recv_rdma_with_imm);
    EXPECT_EQ(received[0].byte_len, length);
    EXPECT_EQ(received[0].imm_or_invalidated, 0x01020304U);
    EXPECT_EQ(std::memcmp(a_->data(), b_->data() + 65536, length), 0);
}

// No receive for a multi-packet WRITE_WITH_IMM: its last packet is RNR-NAKed and resent, and the
// resent packet completes the WRITE once a receive is there (found over net_memif).
TEST_F(EngineTest, WriteWithImmediateWaitsForAReceiveThroughRnr) {
    constexpr std::uint32_t length = 5000;
    fill(*a_, 0, length, 17);
    SendWr imm = send_wr(*a_, WrOpcode::rdma_write_with_imm, 0, length);
    imm.rdma.remote_addr = b_->addr() + 65536;
    imm.rdma.rkey = b_->mr.rkey();
    imm.imm_or_invalidate = 5;
    ASSERT_EQ(post_send(a_->qp, {&imm, 1}), 1);
    EXPECT_TRUE(wait(*a_, 1, std::chrono::milliseconds(200)).empty())
        << "no receive posted: RNR NAKs, nothing completes";
    post_receive(*b_, 4, 0, 0);
    const auto sent = wait(*a_, 1);
    ASSERT_EQ(sent.size(), 1U);
    EXPECT_EQ(sent[0].status, WcStatus::success) << wc_status_name(sent[0].status);
    const auto received = wait(*b_, 1);
    ASSERT_EQ(received.size(), 1U);
    EXPECT_EQ(received[0].status, WcStatus::success) << wc_status_name(received[0].status);
    EXPECT_EQ(received[0].byte_len, length);
    EXPECT_EQ(std::memcmp(a_->data(), b_->data() + 65536, length), 0);
}

TEST_F(EngineTest, InlineAndMultiSgeAndUnsignaled) {
    fill(*a_, 0, 300, 5);
    post_receive(*b_, 1, 8192, 512);
    post_receive(*b_, 2, 16384, 512);
    SendWr inline_wr = send_wr(*a_, WrOpcode::send, 0, 100);
    inline_wr.flags = send_inline; // unsignaled: no send completion on success
    ASSERT_EQ(post_send(a_->qp, {&inline_wr, 1}), 1);
    std::memset(a_->data(), 0, 100); // inline data was copied at post time
    Sge sges[3] = {{a_->addr() + 100, 50, a_->mr.lkey()},
                   {a_->addr() + 200, 60, a_->mr.lkey()},
                   {a_->addr() + 150, 50, a_->mr.lkey()}};
    SendWr multi;
    multi.wr_id = 2;
    multi.opcode = WrOpcode::send;
    multi.flags = send_signaled;
    multi.num_sge = 3;
    multi.sg_list = sges;
    ASSERT_EQ(post_send(a_->qp, {&multi, 1}), 1);
    const auto sent = wait(*a_, 1);
    ASSERT_EQ(sent.size(), 1U);
    EXPECT_EQ(sent[0].wr_id, 2U) << "the unsignaled inline send completed silently";
    const auto received = wait(*b_, 2);
    ASSERT_EQ(received.size(), 2U);
    EXPECT_EQ(received[0].byte_len, 100U);
    for (int i = 0; i < 100; ++i) {
        EXPECT_EQ(b_->data()[8192 + i], static_cast<std::uint8_t>(5 + i * 7)) << i;
    }
    EXPECT_EQ(received[1].byte_len, 160U);
    EXPECT_EQ(std::memcmp(b_->data() + 16384, a_->data() + 100, 50), 0);
    EXPECT_EQ(std::memcmp(b_->data() + 16384 + 50, a_->data() + 200, 60), 0);
    EXPECT_EQ(std::memcmp(b_->data() + 16384 + 110, a_->data() + 150, 50), 0);
}

// A transport timer (~67 ms) far beyond the probe wait (1 ms, then 2 ms): a slow build on a busy
// machine answers the probe long before the timer could rewind the whole window.
class SlowPeerEngineTest : public EngineTest {
protected:
    std::uint8_t transport_timeout() const override { return 14; }
};

// A slow peer, not a lossy one: the stall probe resends the last packet, the peer then ACKs
// everything it had, and nothing more goes again. (The requester resent the rest of the WRITE
// after the probe: a descheduled peer drew 63 needless packets.)
TEST_F(SlowPeerEngineTest, AProbeAnsweredByAnAckOfEverythingResendsNothingElse) {
    constexpr std::uint32_t packets = 64; // 1 KiB MTU
    fill(*a_, 0, packets * 1024, 3);
    SendWr write = send_wr(*a_, WrOpcode::rdma_write, 0, packets * 1024);
    write.rdma.remote_addr = b_->addr() + 256 * 1024;
    write.rdma.rkey = b_->mr.rkey();
    ASSERT_EQ(post_send(a_->qp, {&write, 1}), 1);
    // Only a polls, for less than its transport timeout and more than the probe wait.
    WorkCompletion wc[4];
    const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(2500);
    while (std::chrono::steady_clock::now() < until) {
        ASSERT_EQ(poll_cq(a_->cq, {wc, 4}), 0);
    }
    ASSERT_GE(counter(*a_, "probes"), 1U) << "no probe in 2.5 ms";
    ASSERT_EQ(counter(*a_, "timeouts"), 0U) << "the test polled too long";
    const auto done = wait(*a_, 1);
    ASSERT_EQ(done.size(), 1U);
    EXPECT_EQ(done[0].status, WcStatus::success) << wc_status_name(done[0].status);
    // A slow build may draw one more probe while the first one's answer is on its way: each
    // probe is one packet, and nothing else may go twice.
    const std::uint64_t probes = counter(*a_, "probes");
    EXPECT_EQ(counter(*a_, "timeouts"), 0U);
    EXPECT_EQ(counter(*a_, "tx_packets"), packets + probes) << "packets sent twice";
    EXPECT_EQ(std::memcmp(b_->data() + 256 * 1024, a_->data(), packets * 1024), 0);
}

// An empty SGE is legal and may carry address 0 (verbs ignores its address): an inline post
// copies nothing from it. Under UBSan the copy from a null pointer failed this test.
TEST_F(EngineTest, InlineSendSkipsAnEmptySge) {
    fill(*a_, 0, 64, 9);
    post_receive(*b_, 1, 4096, 512);
    Sge sges[3] = {
        {a_->addr(), 40, a_->mr.lkey()}, {0, 0, 0}, {a_->addr() + 40, 24, a_->mr.lkey()}};
    SendWr wr;
    wr.wr_id = 3;
    wr.opcode = WrOpcode::send;
    wr.flags = send_inline | send_signaled;
    wr.num_sge = 3;
    wr.sg_list = sges;
    ASSERT_EQ(post_send(a_->qp, {&wr, 1}), 1);
    const auto sent = wait(*a_, 1);
    ASSERT_EQ(sent.size(), 1U);
    EXPECT_EQ(sent[0].status, WcStatus::success) << wc_status_name(sent[0].status);
    const auto received = wait(*b_, 1);
    ASSERT_EQ(received.size(), 1U);
    EXPECT_EQ(received[0].byte_len, 64U);
    EXPECT_EQ(std::memcmp(b_->data() + 4096, a_->data(), 64), 0);
}

// A receive's SGE list belongs to the caller only during the post (ibv_post_recv): the device
// scatters by its own copy, whatever the caller does with the array afterwards (found over
// net_memif, where the list was a vector gone before the SEND arrived).
TEST_F(EngineTest, ReceiveScattersByItsOwnCopyOfTheSgeList) {
    constexpr std::uint32_t length = 3000; // three packets, SGE boundaries inside them
    fill(*a_, 0, length, 23);
    std::array<Sge, 3> sges{Sge{b_->addr() + 100, 700, b_->mr.lkey()},
                            Sge{b_->addr() + 8192 + 3, 1500, b_->mr.lkey()},
                            Sge{b_->addr() + 16384, 4096, b_->mr.lkey()}};
    RecvWr recv;
    recv.wr_id = 11;
    recv.num_sge = 3;
    recv.sg_list = sges.data();
    ASSERT_EQ(post_recv(b_->qp, {&recv, 1}), 1);
    sges.fill(Sge{b_->addr() + 65536, 1, 0}); // the caller reuses its array
    SendWr send = send_wr(*a_, WrOpcode::send, 0, length);
    ASSERT_EQ(post_send(a_->qp, {&send, 1}), 1);
    ASSERT_EQ(wait(*a_, 1).size(), 1U);
    const auto received = wait(*b_, 1);
    ASSERT_EQ(received.size(), 1U);
    EXPECT_EQ(received[0].status, WcStatus::success) << wc_status_name(received[0].status);
    EXPECT_EQ(received[0].byte_len, length);
    EXPECT_EQ(std::memcmp(b_->data() + 100, a_->data(), 700), 0);
    EXPECT_EQ(std::memcmp(b_->data() + 8192 + 3, a_->data() + 700, 1500), 0);
    EXPECT_EQ(std::memcmp(b_->data() + 16384, a_->data() + 2200, 800), 0);
}

TEST_F(EngineTest, ManyMessagesInOrder) {
    constexpr int count = 500;
    for (int i = 0; i < count; ++i) {
        post_receive(*b_, static_cast<std::uint64_t>(i), static_cast<std::uint64_t>(i) * 1024,
                     1024);
    }
    for (int i = 0; i < count; ++i) {
        a_->data()[i] = static_cast<std::uint8_t>(i);
        SendWr wr = send_wr(*a_, WrOpcode::send, static_cast<std::uint64_t>(i), 1);
        wr.wr_id = static_cast<std::uint64_t>(i);
        // Doorbell batching: only every 16th post rings.
        if (i % 16 != 15 && i != count - 1) {
            wr.flags |= send_defer;
        }
        ASSERT_EQ(post_send(a_->qp, {&wr, 1}), 1) << i;
    }
    const auto sent = wait(*a_, count);
    ASSERT_EQ(sent.size(), static_cast<std::size_t>(count));
    const auto received = wait(*b_, count);
    ASSERT_EQ(received.size(), static_cast<std::size_t>(count));
    for (int i = 0; i < count; ++i) {
        EXPECT_EQ(sent[i].wr_id, static_cast<std::uint64_t>(i));
        EXPECT_EQ(received[i].wr_id, static_cast<std::uint64_t>(i));
        EXPECT_EQ(b_->data()[i * 1024], static_cast<std::uint8_t>(i));
    }
}

TEST_F(EngineTest, ReceiverNotReadyIsRetried) {
    fill(*a_, 0, 32, 2);
    SendWr wr = send_wr(*a_, WrOpcode::send, 0, 32);
    ASSERT_EQ(post_send(a_->qp, {&wr, 1}), 1);
    EXPECT_TRUE(wait(*a_, 1, std::chrono::milliseconds(200)).empty())
        << "no receive posted: RNR NAKs, nothing completes";
    post_receive(*b_, 3, 0, 64);
    const auto sent = wait(*a_, 1);
    ASSERT_EQ(sent.size(), 1U);
    EXPECT_EQ(sent[0].status, WcStatus::success);
    ASSERT_EQ(wait(*b_, 1).size(), 1U);
    // The RNR NAKs are counted for the device and for the QP that sent them.
    auto stats = b_->context.query_stats();
    ASSERT_TRUE(stats.ok());
    char qp_counter[64];
    std::snprintf(qp_counter, sizeof(qp_counter), "qp0x%x_naks_sent", b_->qp.qpn());
    std::uint64_t device_naks = 0;
    std::uint64_t qp_naks = 0;
    for (const Counter& c : stats.value()) {
        device_naks = c.name == "naks_sent" ? c.value : device_naks;
        qp_naks = c.name == qp_counter ? c.value : qp_naks;
    }
    EXPECT_GT(device_naks, 0U);
    EXPECT_EQ(qp_naks, device_naks);
}

TEST_F(EngineTest, BadRkeyFailsAtTheRequesterAndLeavesTargetMemoryAlone) {
    std::memset(b_->data(), 0x5a, 4096);
    fill(*a_, 0, 256, 1);
    SendWr wr = send_wr(*a_, WrOpcode::rdma_write, 0, 256);
    wr.rdma.remote_addr = b_->addr();
    wr.rdma.rkey = b_->mr.rkey() ^ 0x100; // another index
    SendWr next = send_wr(*a_, WrOpcode::send, 0, 8);
    next.wr_id = 78;
    ASSERT_EQ(post_send(a_->qp, {&wr, 1}), 1);
    ASSERT_EQ(post_send(a_->qp, {&next, 1}), 1);
    const auto done = wait(*a_, 2);
    ASSERT_EQ(done.size(), 2U);
    EXPECT_EQ(done[0].status, WcStatus::remote_access_error) << wc_status_name(done[0].status);
    EXPECT_EQ(done[1].status, WcStatus::wr_flush_error) << "later WRs flush";

    for (int i = 0; i < 4096; ++i) {
        ASSERT_EQ(b_->data()[i], 0x5a) << i;
    }
}

// IBTA responder classes A-C, as rxe: after sending the NAK the responder's QP goes to ERR too,
// its posted receives flush and its context hears qp_fatal.
TEST_F(EngineTest, TheResponderGoesToErrorAfterARemoteAccessNak) {
    post_receive(*b_, 41, 0, 64);
    SendWr wr = send_wr(*a_, WrOpcode::rdma_write, 0, 64);
    wr.rdma.remote_addr = b_->addr();
    wr.rdma.rkey = b_->mr.rkey() ^ 0x100;
    ASSERT_EQ(post_send(a_->qp, {&wr, 1}), 1);
    const auto done = wait(*a_, 1);
    ASSERT_EQ(done.size(), 1U);
    EXPECT_EQ(done[0].status, WcStatus::remote_access_error);
    const auto flushed = wait(*b_, 1);
    ASSERT_EQ(flushed.size(), 1U);
    EXPECT_EQ(flushed[0].wr_id, 41U);
    EXPECT_EQ(flushed[0].status, WcStatus::wr_flush_error);
    EXPECT_EQ(b_->qp.state(), QpState::err);
    Event events[4];
    const std::size_t n = b_->context.poll_events(events);
    ASSERT_GE(n, 1U);
    EXPECT_EQ(events[0].type, EventType::qp_fatal);
    EXPECT_EQ(events[0].qpn, b_->qp.qpn());
}

// A region deregistered while a request still uses it (the application's error) must fail that
// request, never read or write through the freed translation table.
TEST_F(EngineTest, ARegionDeregisteredMidReadStopsTheResponses) {
    auto buffer = mem::DmaBuffer::allocate(1 << 20, 4096);
    ASSERT_TRUE(buffer.ok());
    auto region = b_->pd.register_memory(buffer->data(), 1 << 20,
                                         mem::access_local_write | mem::access_remote_read);
    ASSERT_TRUE(region.ok());
    SendWr read = send_wr(*a_, WrOpcode::rdma_read, 0, 1 << 20);
    read.rdma.remote_addr = reinterpret_cast<std::uint64_t>(buffer->data());
    read.rdma.rkey = region->rkey();
    ASSERT_EQ(post_send(a_->qp, {&read, 1}), 1);
    (void)poll_cq(b_->cq, {}); // B takes the request and sends its first responses
    ASSERT_TRUE(region->deregister().ok());
    const auto done = wait(*a_, 1, std::chrono::seconds(10));
    ASSERT_EQ(done.size(), 1U);
    EXPECT_NE(done[0].status, WcStatus::success) << "1 MiB read from a region that went away";
}

TEST_F(EngineTest, ARegionDeregisteredMidWriteIsARemoteAccessError) {
    auto buffer = mem::DmaBuffer::allocate(1 << 20, 4096);
    ASSERT_TRUE(buffer.ok());
    auto region = b_->pd.register_memory(buffer->data(), 1 << 20,
                                         mem::access_local_write | mem::access_remote_write);
    ASSERT_TRUE(region.ok());
    SendWr write = send_wr(*a_, WrOpcode::rdma_write, 0, 1 << 20);
    write.rdma.remote_addr = reinterpret_cast<std::uint64_t>(buffer->data());
    write.rdma.rkey = region->rkey();
    ASSERT_EQ(post_send(a_->qp, {&write, 1}), 1); // the first packets leave at once
    (void)poll_cq(b_->cq, {});                    // B places some of them
    ASSERT_TRUE(region->deregister().ok());
    const auto done = wait(*a_, 1, std::chrono::seconds(10));
    ASSERT_EQ(done.size(), 1U);
    EXPECT_EQ(done[0].status, WcStatus::remote_access_error) << wc_status_name(done[0].status);
}

TEST_F(EngineTest, ALocalRegionDeregisteredUnderAQueuedWriteFailsIt) {
    auto buffer = mem::DmaBuffer::allocate(1 << 20, 4096);
    ASSERT_TRUE(buffer.ok());
    auto region = a_->pd.register_memory(buffer->data(), 1 << 20, mem::access_local_write);
    ASSERT_TRUE(region.ok());
    SendWr write;
    write.opcode = WrOpcode::rdma_write;
    write.flags = send_signaled;
    write.num_sge = 1;
    write.sge = {reinterpret_cast<std::uint64_t>(buffer->data()), 1 << 20, region->lkey()};
    write.rdma.remote_addr = b_->addr();
    write.rdma.rkey = b_->mr.rkey();
    ASSERT_EQ(post_send(a_->qp, {&write, 1}), 1); // part of it leaves now, the rest later
    ASSERT_TRUE(region->deregister().ok());
    const auto done = wait(*a_, 1, std::chrono::seconds(10));
    ASSERT_EQ(done.size(), 1U);
    EXPECT_EQ(done[0].status, WcStatus::local_protection_error) << wc_status_name(done[0].status);
}

// SEND_WITH_INV naming a key the responder may not invalidate (here a plain registration, not a
// fast-register region): the receive completes in error, the requester gets remote invalid
// request, and the key still works for nobody else's harm.
TEST_F(EngineTest, SendWithInvalidateOfAKeyThatCannotBeInvalidatedFails) {
    post_receive(*b_, 51, 0, 64);
    SendWr send = send_wr(*a_, WrOpcode::send_with_inv, 0, 16);
    send.imm_or_invalidate = b_->mr.rkey();
    ASSERT_EQ(post_send(a_->qp, {&send, 1}), 1);
    const auto sent = wait(*a_, 1);
    ASSERT_EQ(sent.size(), 1U);
    EXPECT_EQ(sent[0].status, WcStatus::remote_invalid_request_error)
        << wc_status_name(sent[0].status);
    const auto received = wait(*b_, 1);
    ASSERT_EQ(received.size(), 1U);
    EXPECT_EQ(received[0].wr_id, 51U);
    EXPECT_EQ(received[0].status, WcStatus::remote_invalid_request_error);
    EXPECT_TRUE(b_->mr.get()->valid()) << "the region was not invalidated";
    EXPECT_EQ(b_->qp.state(), QpState::err);
}

// A QP the engine moved to error by itself (a NAK here) says so when asked, as ibv_query_qp does,
// and modify checks transitions from there (found over net_memif: it still said RTS).
TEST_F(EngineTest, TheQpReportsTheErrorStateTheEngineMovedItTo) {
    SendWr wr = send_wr(*a_, WrOpcode::rdma_write, 0, 64);
    wr.rdma.remote_addr = b_->addr();
    wr.rdma.rkey = b_->mr.rkey() + 1;
    ASSERT_EQ(post_send(a_->qp, {&wr, 1}), 1);
    const auto done = wait(*a_, 1);
    ASSERT_EQ(done.size(), 1U);
    EXPECT_EQ(done[0].status, WcStatus::remote_access_error);
    EXPECT_EQ(a_->qp.state(), QpState::err);
    EXPECT_EQ(a_->qp.attributes().value().state, QpState::err);
    QpAttr attr;
    attr.timeout = 12;
    EXPECT_EQ(a_->qp.modify(attr, qp_attr_timeout).code(), StatusCode::invalid_parameter)
        << "an RTS-only attribute cannot be changed in ERR";
    attr.state = QpState::reset;
    EXPECT_TRUE(a_->qp.modify(attr, qp_attr_state).ok());
    EXPECT_EQ(a_->qp.state(), QpState::reset);
}

TEST_F(EngineTest, OutOfBoundsOfAValidRkeyIsARemoteAccessError) {
    const std::uint8_t last_byte = a_->data()[kBufferSize - 1];
    SendWr oob = send_wr(*b_, WrOpcode::rdma_write, 0, 64);
    oob.rdma.remote_addr = a_->addr() + kBufferSize - 32;
    oob.rdma.rkey = a_->mr.rkey();
    ASSERT_EQ(post_send(b_->qp, {&oob, 1}), 1);
    const auto oob_done = wait(*b_, 1);
    ASSERT_EQ(oob_done.size(), 1U);
    EXPECT_EQ(oob_done[0].status, WcStatus::remote_access_error);
    EXPECT_EQ(a_->data()[kBufferSize - 1], last_byte) << "not even the part inside was written";
}

TEST_F(EngineTest, ReadSmallLargeAndEmpty) {
    fill(*b_, 0, 512 * 1024, 11);
    SendWr small = send_wr(*a_, WrOpcode::rdma_read, 0, 64);
    small.rdma.remote_addr = b_->addr();
    small.rdma.rkey = b_->mr.rkey();
    ASSERT_EQ(post_send(a_->qp, {&small, 1}), 1);
    auto done = wait(*a_, 1);
    ASSERT_EQ(done.size(), 1U);
    EXPECT_EQ(done[0].status, WcStatus::success) << wc_status_name(done[0].status);
    EXPECT_EQ(done[0].opcode, WcOpcode::rdma_read);
    EXPECT_EQ(std::memcmp(a_->data(), b_->data(), 64), 0);

    constexpr std::uint32_t large = 512 * 1024 - 5; // 512 response packets at MTU 1024
    SendWr big = send_wr(*a_, WrOpcode::rdma_read, 4096, large);
    big.rdma.remote_addr = b_->addr() + 3;
    big.rdma.rkey = b_->mr.rkey();
    ASSERT_EQ(post_send(a_->qp, {&big, 1}), 1);
    done = wait(*a_, 1);
    ASSERT_EQ(done.size(), 1U);
    EXPECT_EQ(done[0].status, WcStatus::success) << wc_status_name(done[0].status);
    EXPECT_EQ(done[0].byte_len, large);
    EXPECT_EQ(std::memcmp(a_->data() + 4096, b_->data() + 3, large), 0);

    SendWr empty = send_wr(*a_, WrOpcode::rdma_read, 0, 0);
    empty.num_sge = 0;
    empty.rdma.remote_addr = b_->addr();
    empty.rdma.rkey = b_->mr.rkey();
    ASSERT_EQ(post_send(a_->qp, {&empty, 1}), 1);
    done = wait(*a_, 1);
    ASSERT_EQ(done.size(), 1U);
    EXPECT_EQ(done[0].status, WcStatus::success);
}

TEST_F(EngineTest, ManyReadsBeyondTheOutstandingLimitKeepOrder) {
    fill(*b_, 0, 64 * 1024, 13);
    constexpr int count = 40; // max_rd_atomic is 4: the requester paces them
    std::vector<SendWr> wrs(count);
    for (int i = 0; i < count; ++i) {
        wrs[i] = send_wr(*a_, WrOpcode::rdma_read, static_cast<std::uint64_t>(i) * 1500, 1500);
        wrs[i].wr_id = static_cast<std::uint64_t>(i);
        wrs[i].rdma.remote_addr = b_->addr() + static_cast<std::uint64_t>(i) * 1500;
        wrs[i].rdma.rkey = b_->mr.rkey();
    }
    // A WRITE in the middle, fenced behind the READs before it.
    wrs[20].opcode = WrOpcode::rdma_write;
    wrs[20].flags |= send_fence;
    wrs[20].rdma.remote_addr = b_->addr() + 900 * 1024;
    ASSERT_EQ(post_send(a_->qp, {wrs.data(), count}), count);
    const auto done = wait(*a_, count);
    ASSERT_EQ(done.size(), static_cast<std::size_t>(count));
    for (int i = 0; i < count; ++i) {
        EXPECT_EQ(done[i].wr_id, static_cast<std::uint64_t>(i)) << "completions in SQ order";
        EXPECT_EQ(done[i].status, WcStatus::success);
    }
    for (int i = 0; i < count; ++i) {
        if (i == 20) {
            continue;
        }
        EXPECT_EQ(std::memcmp(a_->data() + i * 1500, b_->data() + i * 1500, 1500), 0) << i;
    }
}

TEST_F(EngineTest, ReadWithABadRkeyIsARemoteAccessError) {
    SendWr wr = send_wr(*a_, WrOpcode::rdma_read, 0, 64);
    wr.rdma.remote_addr = b_->addr();
    wr.rdma.rkey = b_->mr.rkey() + 1; // stale variant
    ASSERT_EQ(post_send(a_->qp, {&wr, 1}), 1);
    const auto done = wait(*a_, 1);
    ASSERT_EQ(done.size(), 1U);
    EXPECT_EQ(done[0].status, WcStatus::remote_access_error);
}

TEST_F(EngineTest, AtomicsCompareSwapAndFetchAdd) {
    auto* target = reinterpret_cast<std::uint64_t*>(b_->data() + 8192);
    *target = 100;
    SendWr add = send_wr(*a_, WrOpcode::atomic_fetch_add, 0, 8);
    add.atomic.remote_addr = b_->addr() + 8192;
    add.atomic.rkey = b_->mr.rkey();
    add.atomic.compare_add = 23;
    ASSERT_EQ(post_send(a_->qp, {&add, 1}), 1);
    auto done = wait(*a_, 1);
    ASSERT_EQ(done.size(), 1U);
    EXPECT_EQ(done[0].status, WcStatus::success) << wc_status_name(done[0].status);
    EXPECT_EQ(done[0].opcode, WcOpcode::atomic_fetch_add);
    std::uint64_t original = 0;
    std::memcpy(&original, a_->data(), 8);
    EXPECT_EQ(original, 100U);
    EXPECT_EQ(*target, 123U);

    SendWr miss = send_wr(*a_, WrOpcode::atomic_cmp_swap, 8, 8);
    miss.atomic.remote_addr = b_->addr() + 8192;
    miss.atomic.rkey = b_->mr.rkey();
    miss.atomic.compare_add = 5; // not the value: no swap
    miss.atomic.swap = 999;
    SendWr hit = miss;
    hit.sge.addr = a_->addr() + 16;
    hit.atomic.compare_add = 123;
    ASSERT_EQ(post_send(a_->qp, {&miss, 1}), 1);
    ASSERT_EQ(post_send(a_->qp, {&hit, 1}), 1);
    done = wait(*a_, 2);
    ASSERT_EQ(done.size(), 2U);
    std::uint64_t miss_original = 0;
    std::uint64_t hit_original = 0;
    std::memcpy(&miss_original, a_->data() + 8, 8);
    std::memcpy(&hit_original, a_->data() + 16, 8);
    EXPECT_EQ(miss_original, 123U);
    EXPECT_EQ(hit_original, 123U);
    EXPECT_EQ(*target, 999U);
}

TEST_F(EngineTest, MisalignedAtomicIsAnInvalidRequest) {
    auto* target = reinterpret_cast<std::uint64_t*>(b_->data() + 8192);
    *target = 7;
    SendWr wr = send_wr(*a_, WrOpcode::atomic_fetch_add, 0, 8);
    wr.atomic.remote_addr = b_->addr() + 8193;
    wr.atomic.rkey = b_->mr.rkey();
    wr.atomic.compare_add = 1;
    ASSERT_EQ(post_send(a_->qp, {&wr, 1}), 1);
    const auto done = wait(*a_, 1);
    ASSERT_EQ(done.size(), 1U);
    EXPECT_EQ(done[0].status, WcStatus::remote_invalid_request_error);
    EXPECT_EQ(*target, 7U) << "target untouched";
}

// Many QPs on one queue group at once: each pair moves its own data, interleaved on the wire.
TEST_F(EngineTest, SixteenQueuePairsAtOnce) {
    constexpr int pairs = 16;
    constexpr std::uint32_t size = 5000;
    struct Pair {
        QueuePair a, b;
    };
    std::vector<Pair> qps(pairs);
    QpInitAttr init_a;
    init_a.pd = &a_->pd;
    init_a.send_cq = &a_->cq;
    init_a.recv_cq = &a_->cq;
    QpInitAttr init_b;
    init_b.pd = &b_->pd;
    init_b.send_cq = &b_->cq;
    init_b.recv_cq = &b_->cq;
    for (Pair& pair : qps) {
        pair.a = std::move(a_->context.create_qp(init_a).value());
        pair.b = std::move(b_->context.create_qp(init_b).value());
    }
    // Connect each pair with the same steps the fixture uses for its main QPs.
    for (Pair& pair : qps) {
        std::swap(a_->qp, pair.a);
        std::swap(b_->qp, pair.b);
        connect(*a_, *b_, pair_->gid_b());
        connect(*b_, *a_, pair_->gid_a());
        std::swap(a_->qp, pair.a);
        std::swap(b_->qp, pair.b);
    }
    fill(*a_, 0, pairs * size, 41);
    for (int i = 0; i < pairs; ++i) {
        RecvWr recv;
        recv.wr_id = static_cast<std::uint64_t>(i);
        recv.num_sge = 1;
        recv.sge = {b_->addr() + 512 * 1024 + static_cast<std::uint64_t>(i) * size, size,
                    b_->mr.lkey()};
        ASSERT_EQ(post_recv(qps[static_cast<std::size_t>(i)].b, {&recv, 1}), 1);
    }
    for (int i = 0; i < pairs; ++i) {
        SendWr write =
            send_wr(*a_, WrOpcode::rdma_write, static_cast<std::uint64_t>(i) * size, size);
        write.flags = {};
        write.rdma.remote_addr = b_->addr() + static_cast<std::uint64_t>(i) * size;
        write.rdma.rkey = b_->mr.rkey();
        SendWr send = send_wr(*a_, WrOpcode::send, static_cast<std::uint64_t>(i) * size, size);
        send.wr_id = static_cast<std::uint64_t>(i);
        ASSERT_EQ(post_send(qps[static_cast<std::size_t>(i)].a, {&write, 1}), 1);
        ASSERT_EQ(post_send(qps[static_cast<std::size_t>(i)].a, {&send, 1}), 1);
    }
    const auto sent = wait(*a_, pairs);
    ASSERT_EQ(sent.size(), static_cast<std::size_t>(pairs));
    const auto received = wait(*b_, pairs);
    ASSERT_EQ(received.size(), static_cast<std::size_t>(pairs));
    std::set<std::uint32_t> receiving_qps;
    for (const auto& wc : received) {
        EXPECT_EQ(wc.status, WcStatus::success);
        receiving_qps.insert(wc.qpn);
    }
    EXPECT_EQ(receiving_qps.size(), static_cast<std::size_t>(pairs));
    EXPECT_EQ(std::memcmp(b_->data(), a_->data(), pairs * size), 0) << "every WRITE";
    EXPECT_EQ(std::memcmp(b_->data() + 512 * 1024, a_->data(), pairs * size), 0) << "every SEND";
}

// A queue slot holds what the QP's caps allow and no more: a QP with one SGE and no inline data
// costs a fraction of one with the device's limits, its memory is reported, and it carries
// messages as before; SGEs beyond its caps and inline data it has no room for are refused.
TEST_F(EngineTest, QueueSlotsAreSizedToTheCapsTheQpWasCreatedWith) {
    const auto init_with = [](Side& side, std::uint32_t depth, std::uint32_t sges,
                              std::uint32_t inline_bytes) {
        QpInitAttr init;
        init.pd = &side.pd;
        init.send_cq = &side.cq;
        init.recv_cq = &side.cq;
        init.caps = {.max_send_wr = depth,
                     .max_recv_wr = depth,
                     .max_send_sge = sges,
                     .max_recv_sge = sges,
                     .max_inline_data = inline_bytes};
        return init;
    };
    const auto status_with = [&](std::uint32_t sges, std::uint32_t inline_bytes) {
        QueuePair qp =
            std::move(a_->context.create_qp(init_with(*a_, 128, sges, inline_bytes)).value());
        return qp.query_status().value();
    };
    const QpStatus small = status_with(1, 0);
    const QpStatus large = status_with(16, 256);
    EXPECT_LE(small.send_wqe_bytes, 256U);
    EXPECT_LE(small.recv_wqe_bytes, 64U);
    EXPECT_EQ(large.send_wqe_bytes, small.send_wqe_bytes + 16 * (sizeof(Sge) + 8) + 256);
    EXPECT_EQ(large.recv_wqe_bytes, small.recv_wqe_bytes + 16 * sizeof(Sge));
    EXPECT_EQ(large.memory_bytes - small.memory_bytes,
              128 * std::uint64_t{large.send_wqe_bytes - small.send_wqe_bytes} +
                  128 * std::uint64_t{large.recv_wqe_bytes - small.recv_wqe_bytes});
    EXPECT_GT(small.memory_bytes, 128 * std::uint64_t{small.send_wqe_bytes + small.recv_wqe_bytes});

    // The fixture's main QPs, remade with one SGE and no inline room, still move data.
    const QpInitAttr lean_a = init_with(*a_, 64, 1, 0);
    const QpInitAttr lean_b = init_with(*b_, 64, 1, 0);
    a_->qp = std::move(a_->context.create_qp(lean_a).value());
    b_->qp = std::move(b_->context.create_qp(lean_b).value());
    connect(*a_, *b_, pair_->gid_b());
    connect(*b_, *a_, pair_->gid_a());
    fill(*a_, 0, 6000, 3);
    post_receive(*b_, 7, 65536, 6000);
    SendWr write = send_wr(*a_, WrOpcode::rdma_write, 0, 3000);
    write.rdma.remote_addr = b_->addr() + 16384;
    write.rdma.rkey = b_->mr.rkey();
    SendWr send = send_wr(*a_, WrOpcode::send, 3000, 3000);
    ASSERT_EQ(post_send(a_->qp, {&write, 1}), 1);
    ASSERT_EQ(post_send(a_->qp, {&send, 1}), 1);
    const auto sent = wait(*a_, 2);
    ASSERT_EQ(sent.size(), 2U);
    EXPECT_EQ(sent[0].status, WcStatus::success);
    EXPECT_EQ(sent[1].status, WcStatus::success);
    const auto received = wait(*b_, 1);
    ASSERT_EQ(received.size(), 1U);
    EXPECT_EQ(received[0].byte_len, 3000U);
    EXPECT_EQ(std::memcmp(b_->data() + 16384, a_->data(), 3000), 0);
    EXPECT_EQ(std::memcmp(b_->data() + 65536, a_->data() + 3000, 3000), 0);

    Sge two[2] = {{a_->addr(), 8, a_->mr.lkey()}, {a_->addr() + 8, 8, a_->mr.lkey()}};
    SendWr too_many = send_wr(*a_, WrOpcode::send, 0, 16);
    too_many.num_sge = 2;
    too_many.sg_list = two;
    EXPECT_EQ(post_send(a_->qp, {&too_many, 1}), 0);
    EXPECT_EQ(post_error(a_->qp), StatusCode::invalid_parameter);
    SendWr inline_wr = send_wr(*a_, WrOpcode::send, 0, 8);
    inline_wr.flags = send_inline;
    EXPECT_EQ(post_send(a_->qp, {&inline_wr, 1}), 0);
    EXPECT_EQ(post_error(a_->qp), StatusCode::invalid_parameter);
    RecvWr recv_two;
    recv_two.num_sge = 2;
    recv_two.sg_list = two;
    EXPECT_EQ(post_recv(b_->qp, {&recv_two, 1}), 0);
    EXPECT_EQ(post_error(b_->qp), StatusCode::invalid_parameter);
}

// Seed 001: B fast-registers four 4 KiB pages of its buffer (out of order) under a new rkey, A
// writes and reads through it, B invalidates it and A's next access fails.
TEST_F(EngineTest, FastRegisterThenPeerAccessThenLocalInvalidate) {
    auto region = b_->pd.alloc_fast_reg_region(
        8, mem::access_local_write | mem::access_remote_write | mem::access_remote_read);
    ASSERT_TRUE(region.ok()) << region.error().to_string();
    const std::uint64_t base = b_->addr() + 256 * 1024; // 4 KiB aligned inside the DMA buffer
    const std::array<std::uint64_t, 4> pages{base + 3 * 4096, base, base + 2 * 4096, base + 4096};
    const mem::MemoryKey key = mem::next_key(region->lkey());
    SendWr reg;
    reg.wr_id = 500;
    reg.opcode = WrOpcode::fast_reg;
    reg.flags = send_signaled;
    reg.fast_reg.region = region->get();
    reg.fast_reg.pages = pages.data();
    reg.fast_reg.page_count = 4;
    reg.fast_reg.page_shift = 12;
    reg.fast_reg.first_byte_offset = 100;
    reg.fast_reg.length = 4 * 4096 - 100;
    reg.fast_reg.base_va = 0x7000000000ULL + 100;
    reg.fast_reg.key = key;
    reg.fast_reg.access =
        mem::access_local_write | mem::access_remote_write | mem::access_remote_read;
    ASSERT_EQ(post_send(b_->qp, {&reg, 1}), 1);
    auto done = wait(*b_, 1);
    ASSERT_EQ(done.size(), 1U);
    EXPECT_EQ(done[0].status, WcStatus::success) << wc_status_name(done[0].status);
    EXPECT_EQ(done[0].opcode, WcOpcode::fast_reg);
    EXPECT_EQ(region->rkey(), key) << "the remote token is readable once it returns";

    // A writes 200 bytes across the first page boundary of the new virtual range.
    fill(*a_, 0, 200, 21);
    SendWr write = send_wr(*a_, WrOpcode::rdma_write, 0, 200);
    write.rdma.remote_addr = 0x7000000000ULL + 4000;
    write.rdma.rkey = key;
    ASSERT_EQ(post_send(a_->qp, {&write, 1}), 1);
    done = wait(*a_, 1);
    ASSERT_EQ(done.size(), 1U);
    EXPECT_EQ(done[0].status, WcStatus::success) << wc_status_name(done[0].status);
    // VA 4000..4095 is page 0 of the list (base + 3 pages), 4096.. is page 1 (base).
    EXPECT_EQ(std::memcmp(b_->data() + 256 * 1024 + 3 * 4096 + 4000, a_->data(), 96), 0);
    EXPECT_EQ(std::memcmp(b_->data() + 256 * 1024, a_->data() + 96, 104), 0);

    SendWr read = send_wr(*a_, WrOpcode::rdma_read, 4096, 200);
    read.rdma.remote_addr = 0x7000000000ULL + 4000;
    read.rdma.rkey = key;
    ASSERT_EQ(post_send(a_->qp, {&read, 1}), 1);
    done = wait(*a_, 1);
    ASSERT_EQ(done.size(), 1U);
    EXPECT_EQ(std::memcmp(a_->data() + 4096, a_->data(), 200), 0);

    SendWr inv;
    inv.wr_id = 501;
    inv.opcode = WrOpcode::local_inv;
    inv.flags = send_signaled;
    inv.local_inv.key = key;
    ASSERT_EQ(post_send(b_->qp, {&inv, 1}), 1);
    done = wait(*b_, 1);
    ASSERT_EQ(done.size(), 1U);
    EXPECT_EQ(done[0].status, WcStatus::success);
    EXPECT_EQ(done[0].opcode, WcOpcode::local_inv);
    ASSERT_EQ(post_send(a_->qp, {&write, 1}), 1);
    done = wait(*a_, 1);
    ASSERT_EQ(done.size(), 1U);
    EXPECT_EQ(done[0].status, WcStatus::remote_access_error) << "the invalidated rkey is dead";
}

TEST_F(EngineTest, FastRegisterErrorsOfSeed001) {
    // Remote access asked of a region not initialised for it: access violation.
    auto local_only = b_->pd.alloc_fast_reg_region(4, mem::access_local_write);
    ASSERT_TRUE(local_only.ok());
    const std::uint64_t page = b_->addr() + 128 * 1024;
    SendWr reg;
    reg.opcode = WrOpcode::fast_reg;
    reg.flags = send_signaled;
    reg.fast_reg.region = local_only->get();
    reg.fast_reg.pages = &page;
    reg.fast_reg.page_count = 1;
    reg.fast_reg.length = 4096;
    reg.fast_reg.base_va = 0x10000;
    reg.fast_reg.key = mem::next_key(local_only->lkey());
    reg.fast_reg.access = mem::access_local_write | mem::access_remote_write;
    SendWr after = send_wr(*b_, WrOpcode::send, 0, 8);
    after.wr_id = 9;
    ASSERT_EQ(post_send(b_->qp, {&reg, 1}), 1);
    ASSERT_EQ(post_send(b_->qp, {&after, 1}), 1);
    const auto done = wait(*b_, 2);
    ASSERT_EQ(done.size(), 2U);
    EXPECT_EQ(done[0].status, WcStatus::local_protection_error) << wc_status_name(done[0].status);
    EXPECT_EQ(done[1].status, WcStatus::wr_flush_error);

    // Not connected: a QP that is not RTS takes no FAST_REG at all.
    Objects fresh = make_objects(*b_);
    SendWr early = reg;
    EXPECT_EQ(post_send(fresh.qp, {&early, 1}), 0);
}

TEST_F(EngineTest, SendWithInvalidateKillsThePeersKey) {
    auto region =
        b_->pd.alloc_fast_reg_region(1, mem::access_local_write | mem::access_remote_write);
    ASSERT_TRUE(region.ok());
    const std::uint64_t page = b_->addr() + 64 * 1024;
    const mem::MemoryKey key = mem::next_key(region->lkey());
    SendWr reg;
    reg.opcode = WrOpcode::fast_reg;
    reg.fast_reg.region = region->get();
    reg.fast_reg.pages = &page;
    reg.fast_reg.page_count = 1;
    reg.fast_reg.length = 4096;
    reg.fast_reg.base_va = 0x20000;
    reg.fast_reg.key = key;
    reg.fast_reg.access = mem::access_local_write | mem::access_remote_write;
    ASSERT_EQ(post_send(b_->qp, {&reg, 1}), 1); // unsignaled: completes silently
    post_receive(*b_, 3, 0, 64);
    SendWr send = send_wr(*a_, WrOpcode::send_with_inv, 0, 16);
    send.imm_or_invalidate = key;
    ASSERT_EQ(post_send(a_->qp, {&send, 1}), 1);
    ASSERT_EQ(wait(*a_, 1).size(), 1U);
    const auto received = wait(*b_, 1);
    ASSERT_EQ(received.size(), 1U);
    EXPECT_TRUE(received[0].flags & wc_with_inv);
    EXPECT_EQ(received[0].imm_or_invalidated, key);
    EXPECT_FALSE(region->get()->valid()) << "SEND_WITH_INV invalidated the named rkey";
}

TEST_F(EngineTest, WriteToAReadOnlyRegionIsARemoteAccessError) {
    auto read_only = b_->pd.register_memory(b_->data() + 128 * 1024, 4096,
                                            mem::access_from_wsp(mem::WspAccess::read));
    ASSERT_TRUE(read_only.ok()) << read_only.error().to_string();
    std::memset(b_->data() + 128 * 1024, 0x33, 4096);
    fill(*a_, 0, 64, 1);
    SendWr wr = send_wr(*a_, WrOpcode::rdma_write, 0, 64);
    wr.rdma.remote_addr = b_->addr() + 128 * 1024;
    wr.rdma.rkey = read_only->rkey();
    ASSERT_EQ(post_send(a_->qp, {&wr, 1}), 1);
    const auto done = wait(*a_, 1);
    ASSERT_EQ(done.size(), 1U);
    EXPECT_EQ(done[0].status, WcStatus::remote_access_error);
    for (int i = 0; i < 4096; ++i) {
        ASSERT_EQ(b_->data()[128 * 1024 + i], 0x33) << i;
    }
}

// IBTA: retry_cnt retransmissions, then retry exceeded; "7 means 7", not forever.
TEST_F(EngineTest, ExactlyRetryCountRetransmissionsWhenThePeerIsSilent) {
    QpAttr err;
    err.state = QpState::err;
    ASSERT_TRUE(b_->qp.modify(err, qp_attr_state).ok()); // b drops what a sends from now on
    SendWr wr = send_wr(*a_, WrOpcode::rdma_write, 0, 64);
    wr.rdma.remote_addr = b_->addr();
    wr.rdma.rkey = b_->mr.rkey();
    ASSERT_EQ(post_send(a_->qp, {&wr, 1}), 1);
    const auto done = wait(*a_, 1);
    ASSERT_EQ(done.size(), 1U);
    EXPECT_EQ(done[0].status, WcStatus::retry_exceeded);
    auto counters = a_->context.query_stats();
    ASSERT_TRUE(counters.ok());
    // Stall probes resend too, before each timeout; only the transport timer counts retries.
    char name[48];
    std::snprintf(name, sizeof(name), "qp0x%x_timeouts", a_->qp.qpn());
    std::uint64_t timeouts = 0;
    for (const Counter& c : counters.value()) {
        if (c.name == name) {
            timeouts = c.value;
        }
    }
    EXPECT_EQ(timeouts, 7U) << "retry_cnt is 7";
}

TEST_F(EngineTest, ExactlyRnrRetryCountThenRnrRetryExceeded) {
    // A fresh pair of QPs with rnr_retry 3 (the fixture's use 7, which means infinite).
    Objects qa = make_objects(*a_);
    Objects qb = make_objects(*b_);
    std::swap(a_->qp, qa.qp);
    std::swap(b_->qp, qb.qp);
    std::swap(a_->cq, qa.cq);
    connect(*a_, *b_, pair_->gid_b(), /*rnr_retry=*/3);
    connect(*b_, *a_, pair_->gid_a());
    QpAttr rts;
    rts.rnr_retry = 5;
    EXPECT_EQ(a_->qp.modify(rts, qp_attr_rnr_retry).code(), StatusCode::invalid_parameter)
        << "IBTA: rnr_retry is set on RTR -> RTS only";
    SendWr wr = send_wr(*a_, WrOpcode::send, 0, 16); // b never posts a receive
    ASSERT_EQ(post_send(a_->qp, {&wr, 1}), 1);
    const auto done = wait(*a_, 1);
    ASSERT_EQ(done.size(), 1U);
    EXPECT_EQ(done[0].status, WcStatus::rnr_retry_exceeded);
    auto counters = a_->context.query_stats();
    char name[48];
    std::snprintf(name, sizeof(name), "qp0x%x_naks_received", a_->qp.qpn());
    std::optional<std::uint64_t> naks;
    for (const Counter& c : counters.value()) {
        if (c.name == name) {
            naks = c.value;
        }
    }
    ASSERT_TRUE(naks.has_value()) << "no counter " << name;
    EXPECT_EQ(*naks, 4U) << "the first RNR NAK and three retries, each NAKed";
    std::swap(a_->qp, qa.qp);
    std::swap(b_->qp, qb.qp);
    std::swap(a_->cq, qa.cq);
}

TEST_F(EngineTest, BadLkeyIsALocalProtectionError) {
    SendWr wr = send_wr(*a_, WrOpcode::send, 0, 64);
    wr.sge.lkey = 0x12345600;
    ASSERT_EQ(post_send(a_->qp, {&wr, 1}), 1);
    const auto done = wait(*a_, 1);
    ASSERT_EQ(done.size(), 1U);
    EXPECT_EQ(done[0].status, WcStatus::local_protection_error);
    EXPECT_EQ(done[0].vendor_error, static_cast<std::uint32_t>(mem::KeyCheck::bad_index));
}

// 1 % of received frames lost on both sides (seeded, so every run loses the same frames): every
// byte still arrives through sequence NAKs, duplicates and the retransmission timer.
class LossyEngineTest : public EngineTest {
protected:
    std::string extra_devargs() const override { return ",drop=0.01,seed=7"; }
};

TEST_F(LossyEngineTest, EveryByteArrivesThroughRetransmission) {
    constexpr int messages = 200;
    constexpr std::uint32_t size = 3000; // 3 packets each
    fill(*a_, 0, 512 * 1024, 31);
    fill(*b_, 512 * 1024, 256 * 1024, 77);
    for (int i = 0; i < messages; ++i) {
        post_receive(*b_, static_cast<std::uint64_t>(i),
                     static_cast<std::uint64_t>(i) * 4096 % (256 * 1024), size);
    }
    std::vector<SendWr> wrs;
    for (int i = 0; i < messages; ++i) {
        SendWr wr = send_wr(*a_, WrOpcode::send, static_cast<std::uint64_t>(i) * 1000, size);
        wr.wr_id = static_cast<std::uint64_t>(i);
        wrs.push_back(wr);
    }
    SendWr write = send_wr(*a_, WrOpcode::rdma_write, 0, 256 * 1024);
    write.wr_id = 1000;
    write.rdma.remote_addr = b_->addr() + 256 * 1024;
    write.rdma.rkey = b_->mr.rkey();
    wrs.push_back(write);
    SendWr read = send_wr(*a_, WrOpcode::rdma_read, 768 * 1024, 256 * 1024);
    read.wr_id = 1001;
    read.rdma.remote_addr = b_->addr() + 512 * 1024;
    read.rdma.rkey = b_->mr.rkey();
    wrs.push_back(read);
    post_all(wrs, 64);
    const auto sent = wait(*a_, wrs.size(), std::chrono::seconds(20));
    ASSERT_EQ(sent.size(), wrs.size());
    for (std::size_t i = 0; i < sent.size(); ++i) {
        ASSERT_EQ(sent[i].status, WcStatus::success) << i << " " << wc_status_name(sent[i].status);
        ASSERT_EQ(sent[i].wr_id, wrs[i].wr_id) << "in order";
    }
    const auto received = wait(*b_, messages, std::chrono::seconds(5));
    ASSERT_EQ(received.size(), static_cast<std::size_t>(messages));
    // The last message landing in each receive slot is what must be there.
    for (int i = messages - 64; i < messages; ++i) {
        EXPECT_EQ(received[static_cast<std::size_t>(i)].byte_len, size);
        EXPECT_EQ(std::memcmp(b_->data() + static_cast<std::uint64_t>(i) * 4096 % (256 * 1024),
                              a_->data() + static_cast<std::uint64_t>(i) * 1000, size),
                  0)
            << i;
    }
    EXPECT_EQ(std::memcmp(b_->data() + 256 * 1024, a_->data(), 256 * 1024), 0) << "WRITE intact";
    EXPECT_EQ(std::memcmp(a_->data() + 768 * 1024, b_->data() + 512 * 1024, 256 * 1024), 0)
        << "READ intact";
    EXPECT_GT(counter(*a_, "rx_dropped_injected") + counter(*b_, "rx_dropped_injected"), 0U);
    EXPECT_GT(counter(*a_, "retransmissions"), 0U);
    char qp_name[32];
    std::snprintf(qp_name, sizeof(qp_name), "qp0x%x_retransmissions", a_->qp.qpn());
    EXPECT_EQ(counter(*a_, qp_name), counter(*a_, "retransmissions"))
        << "the one QP did every retransmission";
    std::snprintf(qp_name, sizeof(qp_name), "qp0x%x_tx_bytes", a_->qp.qpn());
    EXPECT_GE(counter(*a_, qp_name), 200U * 3000 + 256 * 1024) << "payload bytes sent";
    RecordProperty("retransmissions", std::to_string(counter(*a_, "retransmissions")));
    RecordProperty("dropped", std::to_string(counter(*a_, "rx_dropped_injected") +
                                             counter(*b_, "rx_dropped_injected")));
}

// ---- wire: what swroce transmits and receives, captured with pcap= ----------------------------

// Frames of a pcapng file (Enhanced Packet Blocks), as written on this (little-endian) host.
std::vector<std::vector<std::uint8_t>> read_pcapng(const std::string& path) {
    std::vector<std::vector<std::uint8_t>> frames;
    std::FILE* file = std::fopen(path.c_str(), "rb");
    if (file == nullptr) {
        return frames;
    }
    std::vector<std::uint8_t> bytes;
    std::uint8_t chunk[65536];
    for (std::size_t n; (n = std::fread(chunk, 1, sizeof(chunk), file)) > 0;) {
        bytes.insert(bytes.end(), chunk, chunk + n);
    }
    std::fclose(file);
    const auto u32 = [&](std::size_t at) {
        std::uint32_t v = 0;
        std::memcpy(&v, bytes.data() + at, 4);
        return v;
    };
    constexpr std::uint32_t enhanced_packet_block = 6;
    for (std::size_t at = 0; at + 12 <= bytes.size();) {
        const std::uint32_t type = u32(at);
        const std::uint32_t length = u32(at + 4);
        if (length < 12 || at + length > bytes.size()) {
            break;
        }
        if (type == enhanced_packet_block && length >= 32) {
            const std::uint32_t captured = u32(at + 20);
            frames.emplace_back(bytes.begin() + static_cast<std::ptrdiff_t>(at + 28),
                                bytes.begin() + static_cast<std::ptrdiff_t>(at + 28 + captured));
        }
        at += length;
    }
    return frames;
}

class WireCaptureTest : public EngineTest {
protected:
    std::string capture_path() const {
        return "/tmp/prdma-wire-" + std::to_string(::getpid()) + ".pcapng";
    }
    std::string extra_devargs() const override { return ",pcap=" + capture_path(); }
    std::string extra_devargs_b() const override { return {}; }
    void TearDown() override {
        EngineTest::TearDown();
        if (std::getenv("PRDMA_KEEP_CAPTURE") == nullptr) {
            std::remove(capture_path().c_str());
        }
    }
};

TEST_F(WireCaptureTest, EveryFrameDecodesWithAValidIcrc) {
    fill(*a_, 0, 64 * 1024, 3);
    fill(*b_, 0, 64 * 1024, 5);
    post_receive(*b_, 1, 0, 4096);
    SendWr send = send_wr(*a_, WrOpcode::send_with_imm, 0, 2500); // first/middle/last
    send.imm_or_invalidate = 7;
    SendWr write = send_wr(*a_, WrOpcode::rdma_write, 0, 3000);
    write.rdma.remote_addr = b_->addr() + 8192;
    write.rdma.rkey = b_->mr.rkey();
    SendWr read = send_wr(*a_, WrOpcode::rdma_read, 16384, 2100);
    read.rdma.remote_addr = b_->addr();
    read.rdma.rkey = b_->mr.rkey();
    SendWr cas = send_wr(*a_, WrOpcode::atomic_cmp_swap, 32768, 8);
    cas.atomic.remote_addr = b_->addr() + 40960;
    cas.atomic.rkey = b_->mr.rkey();
    SendWr add = send_wr(*a_, WrOpcode::atomic_fetch_add, 32776, 8);
    add.atomic.remote_addr = b_->addr() + 40960;
    add.atomic.rkey = b_->mr.rkey();
    add.atomic.compare_add = 1;
    for (SendWr* wr : {&send, &write, &read, &cas, &add}) {
        ASSERT_EQ(post_send(a_->qp, {wr, 1}), 1);
    }
    const auto done = wait(*a_, 5);
    ASSERT_EQ(done.size(), 5U);
    for (const auto& wc : done) {
        EXPECT_EQ(wc.status, WcStatus::success);
    }
    ASSERT_EQ(wait(*b_, 1).size(), 1U);

    const auto frames = read_pcapng(capture_path());
    ASSERT_GE(frames.size(), 14U) << "requests and responses in both directions";
    std::set<roce::Opcode> opcodes;
    for (std::size_t i = 0; i < frames.size(); ++i) {
        const roce::ParsedFrame parsed = roce::parse_roce_frame(frames[i]);
        ASSERT_TRUE(parsed.ok()) << "frame " << i << ": " << roce::parse_error_name(parsed.error);
        opcodes.insert(parsed.opcode());
        EXPECT_EQ(parsed.udp.dst_port, 4791);
        EXPECT_GE(parsed.udp.src_port, 0xc000) << "per-QP entropy port";
        EXPECT_TRUE(parsed.ipv4.dont_fragment);
    }
    for (roce::Opcode expected :
         {roce::Opcode::rc_send_first, roce::Opcode::rc_send_middle,
          roce::Opcode::rc_send_last_with_immediate, roce::Opcode::rc_rdma_write_first,
          roce::Opcode::rc_rdma_write_last, roce::Opcode::rc_rdma_read_request,
          roce::Opcode::rc_rdma_read_response_first, roce::Opcode::rc_rdma_read_response_last,
          roce::Opcode::rc_compare_swap, roce::Opcode::rc_fetch_add, roce::Opcode::rc_acknowledge,
          roce::Opcode::rc_atomic_acknowledge}) {
        EXPECT_TRUE(opcodes.contains(expected)) << roce::opcode_name(expected);
    }

    // And tshark reads every one of them as InfiniBand, with no malformed or error markers.
    const char* checker = std::getenv("PRDMA_CHECK_INFINIBAND");
    ASSERT_NE(checker, nullptr) << "meson sets PRDMA_CHECK_INFINIBAND to the checker script";
    const std::string command = std::string(checker) + " --min-frames 14 " + capture_path();
    EXPECT_EQ(std::system(command.c_str()), 0) << command;
}

// Selective repeat's NAKs on the wire (issue 30): IBTA sequence-error NAKs of the first missing
// PSN, each naming one missing PSN in its MSN. b drops a tenth of what it receives; a captures
// what it sends and receives, and tshark must read every frame as InfiniBand.
class SelectiveRepeatWireCaptureTest : public WireCaptureTest {
protected:
    bool selective_repeat() const override { return true; }
    std::string extra_devargs_b() const override { return ",rx_drop=0.1,seed=5"; }
};

TEST_F(SelectiveRepeatWireCaptureTest, NaksNameTheMissingPsnAndDecode) {
    fill(*a_, 0, 256 * 1024, 9);
    SendWr write = send_wr(*a_, WrOpcode::rdma_write, 0, 256 * 1024);
    write.rdma.remote_addr = b_->addr();
    write.rdma.rkey = b_->mr.rkey();
    ASSERT_EQ(post_send(a_->qp, {&write, 1}), 1);
    const auto done = wait(*a_, 1, std::chrono::seconds(10));
    ASSERT_EQ(done.size(), 1U);
    EXPECT_EQ(done[0].status, WcStatus::success);
    EXPECT_EQ(std::memcmp(b_->data(), a_->data(), 256 * 1024), 0);

    std::size_t naks = 0;
    std::size_t naming_a_later_psn = 0;
    for (const auto& bytes : read_pcapng(capture_path())) {
        const roce::ParsedFrame f = roce::parse_roce_frame(bytes);
        ASSERT_TRUE(f.ok()) << roce::parse_error_name(f.error);
        if (f.opcode() == roce::Opcode::rc_acknowledge &&
            f.aeth.syndrome == roce::nak_syndrome(roce::NakCode::psn_sequence_error)) {
            ++naks;
            // At or after the first missing PSN, or the one before it: go back N (a gap given up
            // when the machine held a's engine off for a third of a millisecond).
            EXPECT_FALSE(roce::psn_after(roce::psn_sub(f.bth.psn, 1), f.aeth.msn))
                << "MSN " << f.aeth.msn << " of NAK " << f.bth.psn;
            naming_a_later_psn += roce::psn_after(f.aeth.msn, f.bth.psn) ? 1U : 0U;
        }
    }
    EXPECT_GT(naks, 0U);
    EXPECT_GT(naming_a_later_psn, 0U) << "two gaps open at once, each NAKed";
    const std::uint64_t went_back =
        counter(*a_, "retransmissions") - counter(*a_, "probes") - counter(*a_, "timeouts");
    EXPECT_LE(went_back, 2 + counter(*a_, "selective_resends") / 4) << "selective, not go-back-N";
    const char* checker = std::getenv("PRDMA_CHECK_INFINIBAND");
    ASSERT_NE(checker, nullptr) << "meson sets PRDMA_CHECK_INFINIBAND to the checker script";
    const std::string command = std::string(checker) + " --min-frames 256 " + capture_path();
    EXPECT_EQ(std::system(command.c_str()), 0) << command;
}

// The same engine over IPv6 (RoCEv2 with IPv6 headers and a real UDP checksum), peers given by MAC.
class Ipv6EngineTest : public EngineTest {
protected:
    bool ipv6() const override { return true; }
};

TEST_F(Ipv6EngineTest, SendWriteAndReadOverIpv6) {
    fill(*a_, 0, 8192, 17);
    post_receive(*b_, 1, 0, 4096);
    SendWr send = send_wr(*a_, WrOpcode::send, 0, 3000);
    SendWr write = send_wr(*a_, WrOpcode::rdma_write, 0, 5000);
    write.rdma.remote_addr = b_->addr() + 65536;
    write.rdma.rkey = b_->mr.rkey();
    SendWr read = send_wr(*a_, WrOpcode::rdma_read, 16384, 5000);
    read.rdma.remote_addr = b_->addr() + 65536;
    read.rdma.rkey = b_->mr.rkey();
    for (SendWr* wr : {&send, &write, &read}) {
        ASSERT_EQ(post_send(a_->qp, {wr, 1}), 1);
    }
    const auto done = wait(*a_, 3);
    ASSERT_EQ(done.size(), 3U);
    for (const auto& wc : done) {
        EXPECT_EQ(wc.status, WcStatus::success) << wc_status_name(wc.status);
    }
    ASSERT_EQ(wait(*b_, 1).size(), 1U);
    EXPECT_EQ(std::memcmp(b_->data(), a_->data(), 3000), 0);
    EXPECT_EQ(std::memcmp(b_->data() + 65536, a_->data(), 5000), 0);
    EXPECT_EQ(std::memcmp(a_->data() + 16384, a_->data(), 5000), 0);
}

// Without the peer's MAC, an IPv6 RTR asks neighbour discovery (a solicitation to the peer's
// solicited-node group, answered by its advertisement), as an IPv4 one asks ARP; both sides
// learn, and the next RTR to the same peer is answered from the table.
TEST_F(Ipv6EngineTest, AnRtrWithoutAMacIsResolvedByNeighbourDiscovery) {
    QueuePair qp_a = make_qp(*a_);
    QueuePair qp_b = make_qp(*b_);
    ASSERT_EQ(connect_without_mac(*a_, qp_a, qp_b, pair_->gid_b(), 40), "done");
    EXPECT_GE(counter(*a_, "nd_solicitations_sent"), 1U);
    EXPECT_GE(counter(*a_, "nd_resolved"), 1U);
    EXPECT_GE(counter(*b_, "nd_advertisements_sent"), 1U);
    EXPECT_EQ(counter(*a_, "arp_requests_sent"), 0U);
    EXPECT_EQ(counter(*b_, "nd_rx_bad_checksum"), 0U) << "every check has its counter";
    // b learned a's MAC from the solicitation: its own RTR asks nobody.
    ASSERT_EQ(connect_without_mac(*b_, qp_b, qp_a, pair_->gid_a(), 50), "done");
    EXPECT_EQ(counter(*b_, "nd_solicitations_sent"), 0U);
    EXPECT_EQ(qp_a.state(), QpState::rts);
    EXPECT_EQ(qp_b.state(), QpState::rts);

    // The MAC found is the one traffic goes to: a WRITE lands and completes.
    fill(*a_, 0, 4096, 23);
    SendWr write = send_wr(*a_, WrOpcode::rdma_write, 0, 3000);
    write.rdma.remote_addr = b_->addr() + 8192;
    write.rdma.rkey = b_->mr.rkey();
    ASSERT_EQ(post_send(qp_a, {&write, 1}), 1);
    const auto done = wait(*a_, 1);
    ASSERT_EQ(done.size(), 1U);
    EXPECT_EQ(done[0].status, WcStatus::success) << wc_status_name(done[0].status);
    EXPECT_EQ(std::memcmp(b_->data() + 8192, a_->data(), 3000), 0);

    const std::uint64_t asked = counter(*a_, "nd_solicitations_sent");
    QueuePair again = make_qp(*a_);
    EXPECT_EQ(connect_without_mac(*a_, again, qp_b, pair_->gid_b(), 60), "done")
        << "a known neighbour answers at once";
    EXPECT_EQ(counter(*a_, "nd_solicitations_sent"), asked);
}

// Nobody owns the address: five solicitations 200 ms apart, then the RTR fails saying so.
TEST_F(Ipv6EngineTest, AnUnansweredSolicitationFailsTheRtr) {
    QueuePair qp = make_qp(*b_);
    ConnectionDescriptor nobody;
    nobody.qpn = 0x123;
    nobody.psn = 1;
    nobody.gid.raw = {0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x99};
    ConnectOptions options;
    options.until = QpState::rtr;
    ASSERT_EQ(qp.connect(nobody, options, 7).code(), StatusCode::pending);
    ControlCompletion done[8];
    std::optional<ControlCompletion> rtr;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (!rtr && std::chrono::steady_clock::now() < deadline) {
        (void)a_->context.poll_control(done);
        const std::size_t n = b_->context.poll_control(done);
        for (std::size_t i = 0; i < n; ++i) {
            if (done[i].request_id == 7) {
                rtr = done[i];
            }
        }
    }
    ASSERT_TRUE(rtr.has_value()) << "the RTR is still waiting after 5 s";
    EXPECT_EQ(rtr->status, StatusCode::not_connected);
    EXPECT_NE(rtr->message.find("no neighbour discovery reply from fd00::99 after 5 requests"),
              std::string::npos)
        << rtr->message;
    EXPECT_EQ(counter(*b_, "nd_solicitations_sent"), 5U);
    EXPECT_EQ(counter(*b_, "nd_failed"), 1U);
    // a saw five solicitations for someone else's address: nothing answered, nothing learned.
    EXPECT_EQ(counter(*a_, "nd_advertisements_sent"), 0U);
}

// An IPv6 device resolves IPv6 peers only: an IPv4-mapped GID without a MAC is refused with the
// reason, not sent into neighbour discovery.
TEST_F(Ipv6EngineTest, AnIpv4PeerWithoutAMacIsRefusedByAnIpv6Device) {
    QueuePair qp = make_qp(*b_);
    ConnectionDescriptor peer;
    peer.qpn = 0x123;
    peer.psn = 1;
    peer.gid = Gid::from_ipv4(0x0a000001);
    ConnectOptions options;
    options.until = QpState::rtr;
    const Status status = qp.connect(peer, options);
    ASSERT_FALSE(status.ok());
    EXPECT_EQ(status.code(), StatusCode::not_supported);
    EXPECT_NE(status.error().message().find("give dest_mac for the IPv4 peer 10.0.0.1"),
              std::string::npos)
        << status.error().message();
}

class Ipv6WireCaptureTest : public WireCaptureTest {
protected:
    bool ipv6() const override { return true; }
};

TEST_F(Ipv6WireCaptureTest, Ipv6FramesCarryAValidUdpChecksum) {
    fill(*a_, 0, 4096, 9);
    SendWr write = send_wr(*a_, WrOpcode::rdma_write, 0, 2500);
    write.rdma.remote_addr = b_->addr();
    write.rdma.rkey = b_->mr.rkey();
    ASSERT_EQ(post_send(a_->qp, {&write, 1}), 1);
    ASSERT_EQ(wait(*a_, 1).size(), 1U);
    const auto frames = read_pcapng(capture_path());
    ASSERT_GE(frames.size(), 4U);
    for (const auto& frame : frames) {
        const roce::ParsedFrame parsed = roce::parse_roce_frame(frame);
        ASSERT_TRUE(parsed.ok()) << roce::parse_error_name(parsed.error);
        EXPECT_EQ(parsed.ip_version, roce::IpVersion::ipv6);
        EXPECT_NE(parsed.udp.checksum, 0) << "IPv6 needs a UDP checksum";
    }
    // tshark verifies the UDP checksum over IPv6; a wrong one is an expert error.
    const char* checker = std::getenv("PRDMA_CHECK_INFINIBAND");
    ASSERT_NE(checker, nullptr);
    const std::string command =
        std::string(checker) + " --min-frames 4 " + capture_path() + " --udp-checksum";
    EXPECT_EQ(std::system(command.c_str()), 0) << command;
}

// The solicitation a sends and the advertisement b answers with are what tshark expects of ND:
// valid ICMPv6 checksums, hop limit 255, between the RoCE frames that follow.
TEST_F(Ipv6WireCaptureTest, NeighbourDiscoveryFramesDecodeWithValidChecksums) {
    QueuePair qp_a = make_qp(*a_);
    QueuePair qp_b = make_qp(*b_);
    ASSERT_EQ(connect_without_mac(*a_, qp_a, qp_b, pair_->gid_b(), 70), "done");
    ASSERT_EQ(connect_without_mac(*b_, qp_b, qp_a, pair_->gid_a(), 80), "done");
    fill(*a_, 0, 4096, 9);
    SendWr write = send_wr(*a_, WrOpcode::rdma_write, 0, 2500);
    write.rdma.remote_addr = b_->addr();
    write.rdma.rkey = b_->mr.rkey();
    ASSERT_EQ(post_send(qp_a, {&write, 1}), 1);
    ASSERT_EQ(wait(*a_, 1).size(), 1U);
    const char* checker = std::getenv("PRDMA_CHECK_INFINIBAND");
    ASSERT_NE(checker, nullptr);
    const std::string command = std::string(checker) + " --min-frames 6 " + capture_path() +
                                " --udp-checksum --neighbour-discovery 2";
    EXPECT_EQ(std::system(command.c_str()), 0) << command;
}

// Two queue groups per device; b's QP lives on group 1, so what a transmits on its queue 0 lands
// on b's queue 0 and must be handed over to group 1 (and b's answers, sent on queue 1, land on
// a's queue 1 while a's QP is on group 0).
class QueueGroupEngineTest : public EngineTest {
protected:
    unsigned queues() const override { return 2; }
    std::uint16_t b_group() const override { return 1; }
    // ~270 ms: two threads share two cores with the rest of the suite; an owner descheduled for a
    // while is not a lost peer.
    std::uint8_t transport_timeout() const override { return 16; }

    // A thread that owns b's group 1 by polling b's CQ from its first poll on, keeping what
    // completes; joined however the test ends (a failed ASSERT returns early).
    class GroupOwner {
    public:
        explicit GroupOwner(Side& b) : thread_([this, &b] { run(b); }) {
            while (!polling_.load()) {
                std::this_thread::yield();
            }
        }
        GroupOwner(const GroupOwner&) = delete;
        GroupOwner& operator=(const GroupOwner&) = delete;
        ~GroupOwner() {
            stop_ = true;
            thread_.join();
        }
        std::vector<WorkCompletion> completions() {
            const std::lock_guard lock(mutex_);
            return done_;
        }

    private:
        void run(Side& b) {
            WorkCompletion wc[16];
            while (!stop_.load()) {
                const std::uint16_t n = poll_cq(b.cq, {wc, 16});
                polling_ = true;
                const std::lock_guard lock(mutex_);
                done_.insert(done_.end(), wc, wc + n);
            }
        }
        std::atomic<bool> stop_{false};
        std::atomic<bool> polling_{false};
        std::mutex mutex_;
        std::vector<WorkCompletion> done_;
        std::thread thread_; // last: it starts once the members it uses exist
    };

    // `status` must be pending; drives both contexts until request `id` completes in success.
    void finish(const Status& status, std::uint64_t id) {
        ASSERT_EQ(status.code(), StatusCode::pending)
            << (status.ok() ? std::string("finished at once") : status.error().to_string());
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
        ControlCompletion done[4];
        while (std::chrono::steady_clock::now() < deadline) {
            (void)a_->context.poll_control(done);
            const std::size_t n = b_->context.poll_control(done);
            for (std::size_t i = 0; i < n; ++i) {
                if (done[i].request_id == id) {
                    ASSERT_EQ(done[i].status, StatusCode::ok) << done[i].message;
                    return;
                }
            }
        }
        FAIL() << "request " << id << " never completed";
    }
};

// A destroy waiting for room in one group's full mailbox holds up that group's requests only: a
// create for another group, whose owner has room, still goes to it.
TEST_F(QueueGroupEngineTest, ADestroyWaitingOnOneGroupHoldsUpNoOther) {
    std::vector<CompletionQueue> waiting; // released after the owner has left
    IdleOwner owner(*b_);
    waiting = fill_mailbox(1);
    ASSERT_EQ(b_->qp.destroy(1).code(), StatusCode::pending) << "b's QP is on group 1";
    auto other = b_->context.create_cq(16, 0, 2);
    ASSERT_TRUE(other.ok()) << other.error().to_string();
    auto again = b_->context.create_cq(16, 1, 3);
    ASSERT_FALSE(again.ok()) << "group 1's requests wait behind its destroy";
    EXPECT_NE(again.error().message().find("destroys wait"), std::string::npos)
        << again.error().message();
    owner.run();
    ControlCompletion done[64];
    bool destroyed = false;
    bool created = false;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!(destroyed && created) && std::chrono::steady_clock::now() < deadline) {
        const std::size_t n = b_->context.poll_control(done);
        for (std::size_t i = 0; i < n; ++i) {
            destroyed |= done[i].request_id == 1 && done[i].status == StatusCode::ok;
            created |= done[i].request_id == 2 && done[i].status == StatusCode::ok;
        }
    }
    EXPECT_TRUE(destroyed);
    EXPECT_TRUE(created);
}

TEST_F(QueueGroupEngineTest, FramesForAnotherGroupAreHandedOver) {
    fill(*a_, 0, 8192, 19);
    fill(*b_, 65536, 8192, 23);
    post_receive(*b_, 1, 0, 4096);
    SendWr send = send_wr(*a_, WrOpcode::send, 0, 3000);
    SendWr read = send_wr(*a_, WrOpcode::rdma_read, 16384, 5000);
    read.rdma.remote_addr = b_->addr() + 65536;
    read.rdma.rkey = b_->mr.rkey();
    ASSERT_EQ(post_send(a_->qp, {&send, 1}), 1);
    ASSERT_EQ(post_send(a_->qp, {&read, 1}), 1);
    const auto done = wait(*a_, 2);
    ASSERT_EQ(done.size(), 2U);
    for (const auto& wc : done) {
        EXPECT_EQ(wc.status, WcStatus::success) << wc_status_name(wc.status);
    }
    ASSERT_EQ(wait(*b_, 1).size(), 1U);
    EXPECT_EQ(std::memcmp(b_->data(), a_->data(), 3000), 0);
    EXPECT_EQ(std::memcmp(a_->data() + 16384, b_->data() + 65536, 5000), 0);
    EXPECT_GT(counter(*b_, "steering_misses"), 0U) << "a's frames arrived on b's group 0";
    EXPECT_EQ(counter(*b_, "group0_steering_misses"), counter(*b_, "steering_misses"))
        << "counted by the group that received them";
    EXPECT_EQ(counter(*b_, "group1_steering_misses"), 0U);
    EXPECT_GT(counter(*a_, "steering_misses"), 0U) << "b's answers arrived on a's group 1";
    EXPECT_EQ(counter(*a_, "handover_dropped") + counter(*b_, "handover_dropped"), 0U);
}

TEST_F(QueueGroupEngineTest, AGroupPolledByItsOwnThread) {
    // b's group 1 belongs to a thread of its own from its first poll; the main thread drives a,
    // and b's group 0 through poll_control, which must leave group 1 alone.
    std::atomic<bool> stop{false};
    std::atomic<bool> claimed{false};
    std::vector<WorkCompletion> b_done;
    constexpr int messages = 200;
    std::thread owner([&] {
        // Until every receive is in: b's group 1 may have done its work through poll_control
        // before this thread's first poll claimed it.
        WorkCompletion wc[16];
        b_done.insert(b_done.end(), wc, wc + poll_cq(b_->cq, {wc, 16})); // claims the group
        claimed = true;
        const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        while (!stop.load() || (b_done.size() < static_cast<std::size_t>(messages) &&
                                std::chrono::steady_clock::now() < give_up)) {
            const std::uint16_t n = poll_cq(b_->cq, {wc, 16});
            b_done.insert(b_done.end(), wc, wc + n);
        }
    });
    for (int i = 0; i < messages; ++i) {
        post_receive(*b_, static_cast<std::uint64_t>(i), static_cast<std::uint64_t>(i) * 2048,
                     2048);
    }
    fill(*a_, 0, 256 * 1024, 29);
    std::vector<SendWr> wrs;
    for (int i = 0; i < messages; ++i) {
        SendWr wr = send_wr(*a_, WrOpcode::send, static_cast<std::uint64_t>(i) * 1000, 2000);
        wr.wr_id = static_cast<std::uint64_t>(i);
        wrs.push_back(wr);
    }
    // The claim is a store with no handshake (ENGINE.md): the control path must not be driving
    // the group when its owner takes it.
    while (!claimed.load()) {
        std::this_thread::yield();
    }
    std::size_t posted = 0;
    std::size_t done = 0;
    std::size_t failed = 0;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    WorkCompletion wc[32];
    ControlCompletion control[4];
    while (done < static_cast<std::size_t>(messages) &&
           std::chrono::steady_clock::now() < deadline) {
        if (posted < wrs.size()) {
            posted += post_send(
                a_->qp, {wrs.data() + posted, static_cast<std::uint16_t>(
                                                  std::min<std::size_t>(32, wrs.size() - posted))});
        }
        const std::uint16_t n = poll_cq(a_->cq, {wc, 32});
        for (std::uint16_t i = 0; i < n; ++i) {
            failed += wc[i].status == WcStatus::success ? 0 : 1;
        }
        done += n;
        // b's answers arrive on a's group 1, which only a's control path drives here; b's
        // poll_control drives b's unclaimed group 0 only.
        (void)a_->context.poll_control(control);
        (void)b_->context.poll_control(control);
    }
    stop = true;
    owner.join();
    // The owner is gone: this thread may drive b's group 1 now, and drains what is still in flight
    // (a ring port's frames belong to the sender's pool, which closes first at teardown).
    for (int i = 0; i < 100; ++i) {
        (void)poll_cq(b_->cq, {wc, 32});
        (void)poll_cq(a_->cq, {wc, 32});
        (void)a_->context.poll_control(control);
    }
    ASSERT_EQ(done, static_cast<std::size_t>(messages));
    ASSERT_EQ(failed, 0U) << "every SEND completes in success";
    ASSERT_EQ(b_done.size(), static_cast<std::size_t>(messages));
    for (int i = 0; i < messages; ++i) {
        EXPECT_EQ(b_done[static_cast<std::size_t>(i)].wr_id, static_cast<std::uint64_t>(i));
        EXPECT_EQ(std::memcmp(b_->data() + i * 2048, a_->data() + i * 1000, 2000), 0) << i;
    }
    EXPECT_GT(counter(*b_, "steering_misses"), 0U);
}

// An SRQ for any_queue_group: b's QPs on groups 0 and 1, each group driven by a thread of its own,
// take from it at the same time while the main thread posts to it and resizes it. Every receive
// is taken once, every SEND lands whole in one, and each QP's SENDs land in order.
TEST_F(QueueGroupEngineTest, AnSrqSharedByGroupsIsTakenFromByEachGroupsThreadOnce) {
    auto cq0 = b_->context.create_cq(4096, 0);
    ASSERT_TRUE(cq0.ok()) << cq0.error().to_string();
    auto created = b_->context.create_srq(b_->pd, {32, 1}, any_queue_group);
    ASSERT_TRUE(created.ok()) << created.error().to_string();
    SharedReceiveQueue srq = std::move(created.value());
    EXPECT_EQ(srq.queue_group(), any_queue_group);
    const std::array<CompletionQueue*, 2> cqs{&cq0.value(), &b_->cq};
    std::array<QueuePair, 2> served;
    std::array<QueuePair, 2> clients;
    for (std::size_t g = 0; g < 2; ++g) {
        QpInitAttr init;
        init.pd = &b_->pd;
        init.send_cq = cqs[g];
        init.recv_cq = cqs[g];
        init.srq = &srq;
        auto qp = b_->context.create_qp(init);
        ASSERT_TRUE(qp.ok()) << qp.error().to_string();
        served[g] = std::move(qp.value());
        clients[g] = make_qp(*a_);
        connect_qp(clients[g], *b_, served[g], pair_->gid_b());
        connect_qp(served[g], *a_, clients[g], pair_->gid_a());
    }
    {
        // An SRQ of one group still serves that group's QPs only.
        auto single = b_->context.create_srq(b_->pd, {8, 1}, 0);
        ASSERT_TRUE(single.ok()) << single.error().to_string();
        QpInitAttr init;
        init.pd = &b_->pd;
        init.send_cq = &b_->cq;
        init.recv_cq = &b_->cq;
        init.srq = &single.value();
        EXPECT_EQ(b_->context.create_qp(init).code(), StatusCode::invalid_parameter);
    }
    constexpr std::uint32_t messages = 2000;
    constexpr std::uint32_t length = 64;
    constexpr std::uint64_t landing = 65536;
    fill(*a_, 0, std::size_t{messages} * length, 41);
    for (std::uint64_t k = 0; k < messages; ++k) {
        std::memcpy(a_->data() + k * length, &k, sizeof(k)); // each SEND says which it is
    }
    std::atomic<bool> stop{false};
    std::atomic<int> claimed{0};
    std::array<std::vector<WorkCompletion>, 2> taken;
    const auto drive = [&](std::size_t g) {
        WorkCompletion wc[16];
        std::uint16_t n = poll_cq(*cqs[g], {wc, 16}); // claims the group
        ++claimed;
        while (!stop.load()) {
            taken[g].insert(taken[g].end(), wc, wc + n);
            n = poll_cq(*cqs[g], {wc, 16});
        }
        taken[g].insert(taken[g].end(), wc, wc + n);
    };
    std::array<std::thread, 2> owners{std::thread(drive, 0), std::thread(drive, 1)};
    while (claimed.load() < 2) {
        std::this_thread::yield();
    }
    std::uint32_t posted = 0;
    std::uint32_t sent = 0;
    std::size_t done = 0;
    std::size_t failed = 0;
    bool resized = false;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    WorkCompletion wc[32];
    ControlCompletion control[4];
    while (done < messages && std::chrono::steady_clock::now() < deadline) {
        for (; posted < messages; ++posted) {
            RecvWr wr;
            wr.wr_id = posted;
            wr.num_sge = 1;
            wr.sge = {b_->addr() + landing + std::uint64_t{posted} * length, length, b_->mr.lkey()};
            if (post_srq_recv(srq, {&wr, 1}).posted == 0) {
                break;
            }
        }
        if (!resized && posted >= messages / 2) {
            ASSERT_TRUE(srq.resize(128).ok()) << "while both groups take";
            resized = true;
        }
        // A SEND only once a receive waits for it: no RNR NAK to slow the test.
        if (sent < posted) {
            SendWr wr = send_wr(*a_, WrOpcode::send, std::uint64_t{sent} * length, length);
            wr.wr_id = sent;
            sent += post_send(clients[sent % 2], {&wr, 1});
        }
        const std::uint16_t n = poll_cq(a_->cq, {wc, 32});
        for (std::uint16_t i = 0; i < n; ++i) {
            failed += wc[i].status == WcStatus::success ? 0 : 1;
        }
        done += n;
        (void)a_->context.poll_control(control); // b's answers arrive on a's group 1 too
    }
    stop = true;
    for (std::thread& owner : owners) {
        owner.join();
    }
    for (int i = 0; i < 100; ++i) { // what is still in flight, before the ports close
        (void)poll_cq(a_->cq, {wc, 32});
        (void)a_->context.poll_control(control);
    }
    ASSERT_EQ(done, messages);
    ASSERT_EQ(failed, 0U);
    std::set<std::uint64_t> receives;
    std::set<std::uint64_t> landed;
    for (std::size_t g = 0; g < 2; ++g) {
        EXPECT_EQ(taken[g].size(), messages / 2) << "group " << g;
        std::optional<std::uint64_t> previous;
        for (const WorkCompletion& got : taken[g]) {
            ASSERT_EQ(got.status, WcStatus::success) << wc_status_name(got.status);
            EXPECT_EQ(got.qpn, served[g].qpn());
            EXPECT_TRUE(receives.insert(got.wr_id).second) << "receive " << got.wr_id << " twice";
            std::uint64_t k = 0;
            const std::uint8_t* at = b_->data() + landing + got.wr_id * length;
            std::memcpy(&k, at, sizeof(k));
            ASSERT_LT(k, messages);
            EXPECT_EQ(k % 2, g) << "SENDs of client " << g << " land on its QP";
            EXPECT_TRUE(!previous || k > *previous) << "QP " << g << " in order";
            previous = k;
            EXPECT_TRUE(landed.insert(k).second) << "SEND " << k << " twice";
            EXPECT_EQ(std::memcmp(at, a_->data() + k * length, length), 0) << "SEND " << k;
        }
    }
    EXPECT_EQ(receives.size(), messages);
    EXPECT_EQ(landed.size(), messages);
}

TEST_F(QueueGroupEngineTest, AQpMadeThroughTheOwnerCarriesTrafficSteeredByQpn) {
    // b's group 1 belongs to a thread of its own. A new QP there is created, connected and
    // destroyed through that owner (pending requests); a's frames for it arrive on b's group 0,
    // which must hand them to group 1 knowing only the QPN.
    GroupOwner owner(*b_);

    QpInitAttr init;
    init.pd = &b_->pd;
    init.send_cq = &b_->cq;
    init.recv_cq = &b_->cq;
    QueuePair qp;
    ASSERT_NO_FATAL_FAILURE(finish(conformance::into(qp, b_->context.create_qp(init, 1)), 1));
    ASSERT_TRUE(qp.ready());
    // a's end, on a's group 0 (the main thread's); its CQ holds every completion a coalesced ACK
    // can bring at once.
    Objects local;
    local.cq = std::move(a_->context.create_cq(256).value());
    QpInitAttr local_init;
    local_init.pd = &a_->pd;
    local_init.send_cq = &local.cq;
    local_init.recv_cq = &local.cq;
    local.qp = std::move(a_->context.create_qp(local_init).value());

    QpAttr to_init;
    to_init.state = QpState::init;
    to_init.port = 1;
    to_init.access = mem::access_remote_write;
    const QpAttrMask init_mask = qp_attr_state | qp_attr_port | qp_attr_access_flags;
    ASSERT_TRUE(local.qp.modify(to_init, init_mask).ok());
    ASSERT_NO_FATAL_FAILURE(finish(qp.modify(to_init, init_mask, 2), 2));
    // Receives go on while the QP is in INIT: the owner reads its receive queue only once frames
    // for it arrive, after the RTR below has passed through the owner.
    constexpr int messages = 50;
    for (int i = 0; i < messages; ++i) {
        RecvWr wr;
        wr.wr_id = static_cast<std::uint64_t>(i);
        wr.num_sge = 1;
        wr.sge = {b_->addr() + static_cast<std::uint64_t>(i) * 4096, 4096, b_->mr.lkey()};
        ASSERT_EQ(post_recv(qp, {&wr, 1}), 1);
    }
    const auto rtr_to = [&](const Side& remote, std::uint32_t qpn, const Gid& gid) {
        std::vector<std::uint8_t> port(512);
        std::uint32_t got = static_cast<std::uint32_t>(port.size());
        EXPECT_TRUE(remote.context.query_port(1, port.data(), &got).ok());
        PortAttr remote_port;
        std::memcpy(&remote_port, port.data(), sizeof(remote_port));
        QpAttr rtr;
        rtr.state = QpState::rtr;
        rtr.dest_gid = gid;
        std::array<std::uint8_t, 6> mac{};
        std::memcpy(mac.data(), remote_port.mac, 6);
        rtr.dest_mac = mac;
        rtr.dest_qpn = qpn;
        rtr.rq_psn = 7;
        rtr.max_dest_rd_atomic = 1;
        rtr.min_rnr_timer = 1;
        return rtr;
    };
    const QpAttrMask rtr_mask = qp_attr_state | qp_attr_path_mtu | qp_attr_dest | qp_attr_dest_qpn |
                                qp_attr_rq_psn | qp_attr_max_dest_rd_atomic | qp_attr_min_rnr_timer;
    QpAttr rts;
    rts.state = QpState::rts;
    rts.sq_psn = 7;
    rts.timeout = 10;
    rts.retry_cnt = 7;
    rts.rnr_retry = 7;
    rts.max_rd_atomic = 1;
    const QpAttrMask rts_mask = qp_attr_state | qp_attr_sq_psn | qp_attr_timeout |
                                qp_attr_retry_cnt | qp_attr_rnr_retry | qp_attr_max_rd_atomic;
    const Status local_rtr = local.qp.modify(rtr_to(*b_, qp.qpn(), pair_->gid_b()), rtr_mask);
    ASSERT_TRUE(local_rtr.ok()) << local_rtr.error().to_string();
    ASSERT_TRUE(local.qp.modify(rts, rts_mask).ok());
    ASSERT_NO_FATAL_FAILURE(
        finish(qp.modify(rtr_to(*a_, local.qp.qpn(), pair_->gid_a()), rtr_mask, 3), 3));
    ASSERT_NO_FATAL_FAILURE(finish(qp.modify(rts, rts_mask, 4), 4));

    fill(*a_, 0, messages * 1000 + 3000, 41);
    int posted = 0;
    int sent = 0;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    WorkCompletion wc[16];
    ControlCompletion control[4];
    while (sent < messages && std::chrono::steady_clock::now() < deadline) {
        if (posted < messages) {
            SendWr wr =
                send_wr(*a_, WrOpcode::send, static_cast<std::uint64_t>(posted) * 1000, 3000);
            wr.wr_id = static_cast<std::uint64_t>(posted);
            posted += post_send(local.qp, {&wr, 1});
        }
        const std::uint16_t n = poll_cq(local.cq, {wc, 16});
        for (std::uint16_t i = 0; i < n; ++i) {
            EXPECT_EQ(wc[i].status, WcStatus::success) << wc_status_name(wc[i].status);
        }
        sent += n;
        (void)a_->context.poll_control(control); // a's group 1 receives b's ACKs
        (void)b_->context.poll_control(control); // b's group 0 receives a's SENDs
    }
    ASSERT_EQ(sent, messages);
    const auto received_all = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    std::vector<WorkCompletion> b_done = owner.completions();
    while (b_done.size() < static_cast<std::size_t>(messages)) {
        ASSERT_LT(std::chrono::steady_clock::now(), received_all) << "receives missing";
        std::this_thread::yield();
        b_done = owner.completions();
    }
    for (int i = 0; i < messages; ++i) {
        const WorkCompletion& done = b_done[static_cast<std::size_t>(i)];
        EXPECT_EQ(done.wr_id, static_cast<std::uint64_t>(i));
        EXPECT_EQ(done.status, WcStatus::success);
        EXPECT_EQ(done.qpn, qp.qpn());
        EXPECT_EQ(std::memcmp(b_->data() + i * 4096, a_->data() + i * 1000, 3000), 0) << i;
    }
    EXPECT_GT(counter(*b_, "group0_steering_misses"), 0U) << "arrived on group 0, handed over";
    EXPECT_EQ(counter(*b_, "group0_rx_unknown_qp"), 0U) << "group 0 never looks the QP up";

    ASSERT_NO_FATAL_FAILURE(finish(qp.destroy(5), 5));
}

TEST_F(QueueGroupEngineTest, ConnectThroughTheOwnerPendsAtEachStepWithTheCallersId) {
    // connect() on a QP whose group another thread polls: every step (INIT, RTR, RTS) must go
    // through the owner and pend with the caller's request id; connect() again goes on from
    // where the QP is. Before, INIT and RTS went with id 0 and failed busy.
    GroupOwner owner(*b_);
    QpInitAttr init;
    init.pd = &b_->pd;
    init.send_cq = &b_->cq;
    init.recv_cq = &b_->cq;
    QueuePair qp;
    ASSERT_NO_FATAL_FAILURE(finish(conformance::into(qp, b_->context.create_qp(init, 1)), 1));
    Objects local;
    local.cq = std::move(a_->context.create_cq(64).value());
    QpInitAttr local_init;
    local_init.pd = &a_->pd;
    local_init.send_cq = &local.cq;
    local_init.recv_cq = &local.cq;
    local.qp = std::move(a_->context.create_qp(local_init).value());
    ConnectionDescriptor mine{};
    std::uint32_t length = sizeof(mine);
    ASSERT_TRUE(local.qp.export_connection(nullptr, &mine, &length).ok());
    auto peer = import_connection(&mine, length);
    ASSERT_TRUE(peer.ok()) << peer.error().to_string();

    std::vector<QpState> seen;
    for (std::uint64_t id = 10; qp.state() != QpState::rts && id < 16; ++id) {
        const Status status = qp.connect(peer.value(), {}, id);
        if (status.ok()) {
            break;
        }
        ASSERT_NO_FATAL_FAILURE(finish(status, id));
        seen.push_back(qp.state());
    }
    EXPECT_EQ(qp.state(), QpState::rts);
    EXPECT_EQ(seen, (std::vector<QpState>{QpState::init, QpState::rtr, QpState::rts}));
    ASSERT_NO_FATAL_FAILURE(finish(qp.destroy(20), 20));
}

// Every operation under every fault the devargs inject, on both sides and in both directions, with
// every byte checked: go-back-N, duplicate handling and the ICRC must repair what the link does.
// A parameter that starts with "sr" runs the same with selective repeat on both QPs.
class FaultMatrixTest : public EngineTest, public ::testing::WithParamInterface<const char*> {
protected:
    std::string extra_devargs() const override {
        const std::string param = GetParam();
        return selective_repeat() ? param.substr(2) : param;
    }
    bool selective_repeat() const override { return std::string(GetParam()).rfind("sr", 0) == 0; }
    std::uint8_t transport_timeout() const override { return 12; } // ~17 ms: the tail's price
};

TEST_P(FaultMatrixTest, EveryOperationDeliversEveryByte) {
    constexpr int sends = 64;
    constexpr std::uint32_t size = 5000; // 5 packets each
    fill(*a_, 0, 512 * 1024, 13);
    fill(*b_, 512 * 1024, 256 * 1024, 91);
    for (int i = 0; i < sends; ++i) {
        post_receive(*b_, static_cast<std::uint64_t>(i),
                     static_cast<std::uint64_t>(i) * 8192 % (256 * 1024), size);
    }
    auto* counter_word = reinterpret_cast<std::uint64_t*>(b_->data() + 1000 * 1024);
    *counter_word = 0;
    std::vector<SendWr> wrs;
    for (int i = 0; i < sends; ++i) {
        SendWr wr = send_wr(*a_, WrOpcode::send, static_cast<std::uint64_t>(i) * 1000, size);
        wr.wr_id = static_cast<std::uint64_t>(i);
        wrs.push_back(wr);
        if (i % 8 == 0) { // atomics in between: each fetch-add returns the count so far
            SendWr add = send_wr(*a_, WrOpcode::atomic_fetch_add, 900 * 1024 + i * 8, 8);
            add.wr_id = 10000 + static_cast<std::uint64_t>(i);
            add.atomic.remote_addr = b_->addr() + 1000 * 1024;
            add.atomic.rkey = b_->mr.rkey();
            add.atomic.compare_add = 1;
            wrs.push_back(add);
        }
    }
    SendWr write = send_wr(*a_, WrOpcode::rdma_write, 0, 256 * 1024);
    write.wr_id = 1000;
    write.rdma.remote_addr = b_->addr() + 256 * 1024;
    write.rdma.rkey = b_->mr.rkey();
    wrs.push_back(write);
    SendWr read = send_wr(*a_, WrOpcode::rdma_read, 768 * 1024, 128 * 1024);
    read.wr_id = 1001;
    read.rdma.remote_addr = b_->addr() + 512 * 1024;
    read.rdma.rkey = b_->mr.rkey();
    wrs.push_back(read);
    post_all(wrs, 32);
    const auto sent = wait(*a_, wrs.size(), std::chrono::seconds(30));
    ASSERT_EQ(sent.size(), wrs.size());
    for (std::size_t i = 0; i < sent.size(); ++i) {
        ASSERT_EQ(sent[i].status, WcStatus::success) << i << " " << wc_status_name(sent[i].status);
        ASSERT_EQ(sent[i].wr_id, wrs[i].wr_id) << "in order, each once";
    }
    const auto received = wait(*b_, sends, std::chrono::seconds(10));
    ASSERT_EQ(received.size(), static_cast<std::size_t>(sends));
    for (int i = 0; i < sends; ++i) {
        EXPECT_EQ(received[static_cast<std::size_t>(i)].wr_id, static_cast<std::uint64_t>(i));
        EXPECT_EQ(received[static_cast<std::size_t>(i)].byte_len, size);
    }
    // The last SEND into each receive slot is what must be there.
    for (int i = sends - 32; i < sends; ++i) {
        EXPECT_EQ(std::memcmp(b_->data() + static_cast<std::uint64_t>(i) * 8192 % (256 * 1024),
                              a_->data() + static_cast<std::uint64_t>(i) * 1000, size),
                  0)
            << "SEND " << i;
    }
    EXPECT_EQ(std::memcmp(b_->data() + 256 * 1024, a_->data(), 256 * 1024), 0) << "WRITE";
    EXPECT_EQ(std::memcmp(a_->data() + 768 * 1024, b_->data() + 512 * 1024, 128 * 1024), 0)
        << "READ";
    // Executed once each, never twice, whatever was duplicated or retransmitted.
    EXPECT_EQ(*counter_word, static_cast<std::uint64_t>(sends / 8));
    for (int i = 0; i < sends; i += 8) {
        std::uint64_t original = 0;
        std::memcpy(&original, a_->data() + 900 * 1024 + i * 8, 8);
        EXPECT_EQ(original, static_cast<std::uint64_t>(i / 8)) << "fetch-add " << i / 8;
    }
    const std::string param = GetParam();
    const auto faults = [&](const char* what) {
        return counter(*a_, std::string("rx_") + what + "_injected") +
               counter(*a_, std::string("tx_") + what + "_injected") +
               counter(*b_, std::string("rx_") + what + "_injected") +
               counter(*b_, std::string("tx_") + what + "_injected");
    };
    for (const char* what : {"dropped", "reordered", "duplicated", "corrupted"}) {
        if (param.find(std::string(what).substr(0, 4)) != std::string::npos) {
            EXPECT_GT(faults(what), 0U) << what << " faults happened";
        }
    }
    if (param.find("corrupt") != std::string::npos) {
        EXPECT_GT(counter(*a_, "rx_bad_icrc") + counter(*b_, "rx_bad_icrc"), 0U)
            << "the ICRC caught the flipped bits";
    }
    if (selective_repeat()) {
        // A NAK resends one packet: passes back are the timers', a READ's, or a gap given up.
        const std::uint64_t went_back =
            counter(*a_, "retransmissions") - counter(*a_, "probes") - counter(*a_, "timeouts");
        EXPECT_LE(went_back, 2 + counter(*a_, "selective_resends") / 4);
        if (param.find("drop") != std::string::npos) {
            EXPECT_GT(counter(*a_, "selective_resends"), 0U);
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Faults, FaultMatrixTest,
                         ::testing::Values(",rx_drop=0.01,tx_drop=0.01,seed=3",
                                           ",rx_drop=0.1,tx_drop=0.1,seed=5",
                                           ",tx_reorder=0.05,reorder_depth=3,seed=7",
                                           ",rx_duplicate=0.05,tx_duplicate=0.05,seed=11",
                                           ",rx_corrupt=0.05,tx_corrupt=0.05,seed=13",
                                           ",tx_delay=0.05,delay_us=50,seed=17",
                                           "sr,rx_drop=0.1,tx_drop=0.1,seed=5",
                                           "sr,tx_reorder=0.05,reorder_depth=3,seed=7",
                                           "sr,rx_duplicate=0.05,tx_duplicate=0.05,seed=11"));

// Frames overtaken on the way (issue 30): b keeps what arrives past the gap and runs it when the
// late frame comes, so a reordering costs neither a NAK nor a go-back-N pass. Only what b receives
// is reordered (three later frames pass each), with traffic behind every one of them.
class ReorderTest : public EngineTest {
protected:
    std::string extra_devargs() const override { return {}; }
    std::string extra_devargs_b() const override {
        // Held at most 10 us: a reordered frame always comes before its gap's NAK is due (20 us
        // after the gap opened), also at the end of the stream where nothing passes it.
        return ",rx_reorder=0.05,reorder_depth=3,delay_us=10,seed=7";
    }
};

TEST_F(ReorderTest, OvertakenPacketsAreKeptNotResent) {
    constexpr int sends = 64;
    constexpr std::uint32_t size = 5000; // 5 packets each
    fill(*a_, 0, 512 * 1024, 29);
    for (int i = 0; i < sends; ++i) {
        post_receive(*b_, static_cast<std::uint64_t>(i), static_cast<std::uint64_t>(i) * 8192,
                     size);
    }
    std::vector<SendWr> wrs;
    SendWr write = send_wr(*a_, WrOpcode::rdma_write, 0, 256 * 1024); // 256 packets
    write.wr_id = 1000;
    write.rdma.remote_addr = b_->addr() + 768 * 1024;
    write.rdma.rkey = b_->mr.rkey();
    wrs.push_back(write);
    for (int i = 0; i < sends; ++i) {
        SendWr wr = send_wr(*a_, WrOpcode::send, static_cast<std::uint64_t>(i) * 1000, size);
        wr.wr_id = static_cast<std::uint64_t>(i);
        wrs.push_back(wr);
    }
    wrs.push_back(write); // traffic behind the last SEND's packets
    post_all(wrs, 32);
    const auto sent = wait(*a_, wrs.size(), std::chrono::seconds(30));
    ASSERT_EQ(sent.size(), wrs.size());
    for (const WorkCompletion& wc : sent) {
        ASSERT_EQ(wc.status, WcStatus::success) << wc.wr_id << " " << wc_status_name(wc.status);
    }
    const auto received = wait(*b_, sends, std::chrono::seconds(10));
    ASSERT_EQ(received.size(), static_cast<std::size_t>(sends));
    for (int i = 0; i < sends; ++i) {
        EXPECT_EQ(received[static_cast<std::size_t>(i)].wr_id, static_cast<std::uint64_t>(i));
        EXPECT_EQ(std::memcmp(b_->data() + static_cast<std::uint64_t>(i) * 8192,
                              a_->data() + static_cast<std::uint64_t>(i) * 1000, size),
                  0)
            << "SEND " << i;
    }
    EXPECT_EQ(std::memcmp(b_->data() + 768 * 1024, a_->data(), 256 * 1024), 0) << "WRITE";
    const std::uint64_t reordered = counter(*b_, "rx_reordered_injected");
    EXPECT_GE(reordered, 20U) << "the link reordered";
    EXPECT_GE(counter(*b_, "kept_past_gap"), reordered) << "each overtaking packet kept";
    // Go-back-N as IBTA has it NAKs every one of them (and a resends its window each time); a
    // gap at the very end may still wait out the NAK's delay.
    // A stall probe (a's thread descheduled for a millisecond) resends one packet: allowed.
    const std::uint64_t probes = counter(*a_, "probes");
    EXPECT_LE(counter(*b_, "naks_sent"), 2U);
    EXPECT_LE(counter(*a_, "retransmissions"), 2U + probes);
    EXPECT_LE(counter(*b_, "duplicates"), probes) << "nothing arrived twice";
}

// ---- Hostile and broken peers, and the defects of issue 10 ----------------------------------
// Frames are injected on a's ring port as if a's engine had sent them, so b's responder meets
// exactly the bytes a broken or hostile peer would put on the wire.
// The Ethernet address of the side's port 1.
std::array<std::uint8_t, 6> port_mac(Side& side) {
    std::vector<std::uint8_t> port(512);
    auto got = static_cast<std::uint32_t>(port.size());
    EXPECT_TRUE(side.context.query_port(1, port.data(), &got).ok());
    PortAttr attr;
    std::memcpy(&attr, port.data(), sizeof(attr));
    std::array<std::uint8_t, 6> mac{};
    std::memcpy(mac.data(), attr.mac, 6);
    return mac;
}

class PeerFrameTest : public EngineTest {
protected:
    void SetUp() override {
        EngineTest::SetUp();
        pool_ = rte_pktmbuf_pool_create(("inject" + std::to_string(++instance_)).c_str(), 2047, 0,
                                        0, 4096, SOCKET_ID_ANY);
        ASSERT_NE(pool_, nullptr);
        port_a_ = port_of_a();
        mac_a_ = mac_of(*a_);
        mac_b_ = mac_of(*b_);
    }
    void TearDown() override {
        EngineTest::TearDown();
        rte_mempool_free(pool_);
    }

    static std::array<std::uint8_t, 6> mac_of(Side& side) { return port_mac(side); }
    // The ethdev under device a: the newest ring port named "..a" (the pair names its ports
    // net_ring_cf<N>a and net_ring_cf<N>b). Every valid port is looked at, owned ones included:
    // swroce owns the port it runs on.
    static std::uint16_t port_of_a() {
        std::uint16_t found = RTE_MAX_ETHPORTS;
        for (std::uint16_t id = rte_eth_find_next(0); id < RTE_MAX_ETHPORTS;
             id = rte_eth_find_next(id + 1)) {
            char name[RTE_ETH_NAME_MAX_LEN] = {};
            if (rte_eth_dev_get_name_by_port(id, name) == 0) {
                const std::string text(name);
                if (text.rfind("net_ring_cf", 0) == 0 && text.back() == 'a') {
                    found = id;
                }
            }
        }
        EXPECT_NE(found, RTE_MAX_ETHPORTS) << "no ring port of device a";
        return found;
    }

    // A frame from a (10.0.0.1, a's QPN) to b's QP.
    roce::FrameHeaders from_a(roce::Opcode opcode, std::uint32_t psn) const {
        roce::FrameHeaders h;
        h.eth.src = mac_a_;
        h.eth.dst = mac_b_;
        h.ipv4.src = 0x0a000001;
        h.ipv4.dst = 0x0a000002;
        h.udp_src_port = 0xc000;
        h.bth.opcode = opcode;
        h.bth.dest_qp = b_->qp.qpn();
        h.bth.psn = psn;
        return h;
    }
    // Puts the frame on a's port (b receives it at its next poll); false if the port refused.
    bool inject(const roce::FrameHeaders& h, std::span<const std::uint8_t> payload) {
        rte_mbuf* m = rte_pktmbuf_alloc(pool_);
        EXPECT_NE(m, nullptr);
        const std::span<std::uint8_t> room(rte_pktmbuf_mtod(m, std::uint8_t*),
                                           rte_pktmbuf_tailroom(m));
        const roce::FrameLayout layout = roce::build_frame(h, payload, room);
        EXPECT_TRUE(layout.ok());
        m->data_len = static_cast<std::uint16_t>(layout.wire_length);
        m->pkt_len = layout.wire_length;
        if (rte_eth_tx_burst(port_a_, 0, &m, 1) != 1) {
            rte_pktmbuf_free(m);
            return false;
        }
        return true;
    }
    // A 64-byte WRITE ONLY of `byte`s to the start of b's region, with `psn`.
    bool inject_write(std::uint32_t psn, std::uint8_t byte) {
        roce::FrameHeaders h = from_a(roce::Opcode::rc_rdma_write_only, psn);
        h.reth = {b_->addr(), b_->mr.rkey(), 64};
        return inject(h, std::vector<std::uint8_t>(64, byte));
    }
    // Polls b alone for a while (a must not answer for the peer these tests play).
    std::vector<WorkCompletion> poll_b(int rounds = 200) {
        std::vector<WorkCompletion> done;
        WorkCompletion wc[32];
        for (int i = 0; i < rounds; ++i) {
            const std::uint16_t n = poll_cq(b_->cq, {wc, 32});
            done.insert(done.end(), wc, wc + n);
        }
        return done;
    }

    static inline int instance_ = 0;
    rte_mempool* pool_ = nullptr;
    std::uint16_t port_a_ = 0;
    std::array<std::uint8_t, 6> mac_a_{}, mac_b_{};
};

// An event a destroyed QP raised and nobody collected yet is not handed out as the event of a QP
// created after it, and a frame sent to the old number does not reach the new QP: QP numbers are
// not given out again at once.
TEST_F(PeerFrameTest, ADestroyedQpsEventNeverNamesItsSuccessor) {
    ASSERT_TRUE(inject(from_a(roce::Opcode::rc_send_middle, 1000), std::vector<std::uint8_t>(64)));
    (void)poll_b();
    ASSERT_EQ(b_->qp.state(), QpState::err) << "b raised qp_fatal, not polled";
    const std::uint32_t old = b_->qp.qpn();
    ASSERT_TRUE(b_->qp.destroy().ok());
    b_->qp = make_qp(*b_);
    EXPECT_NE(b_->qp.qpn(), old);
    Event events[8];
    const std::size_t n = b_->context.poll_events(events);
    for (std::size_t i = 0; i < n; ++i) {
        EXPECT_NE(events[i].qpn, b_->qp.qpn()) << "the old QP's event named the new one";
    }
    connect(*b_, *a_, pair_->gid_a());
    roce::FrameHeaders stale = from_a(roce::Opcode::rc_send_only, 1000);
    stale.bth.dest_qp = old;
    post_receive(*b_, 7, 0, 64);
    ASSERT_TRUE(inject(stale, std::vector<std::uint8_t>(16, 0x11)));
    EXPECT_TRUE(poll_b().empty()) << "a SEND to the old number took the new QP's receive";
}

// One SEND_MIDDLE or SEND_LAST at the expected PSN with no SEND_FIRST before it used to be
// scattered into a receive whose message never began (and, with depth 1, a delivered buffer was
// overwritten and its wr_id completed twice). It is an invalid request: NAKed, counted, and no
// byte of any receive buffer moves.
TEST_F(PeerFrameTest, SendMiddleOrLastWithoutFirstTouchesNoReceiveBuffer) {
    std::memset(b_->data(), 0x5a, 8192);
    post_receive(*b_, 41, 0, 4096);
    std::vector<std::uint8_t> payload(1024, 0xab);
    ASSERT_TRUE(inject(from_a(roce::Opcode::rc_send_middle, 1000), payload));
    ASSERT_TRUE(inject(from_a(roce::Opcode::rc_send_last, 1001),
                       std::span<const std::uint8_t>(payload).first(200)));
    const auto done = poll_b();
    for (const WorkCompletion& wc : done) {
        EXPECT_NE(wc.status, WcStatus::success) << "no receive may complete in success";
    }
    for (std::size_t i = 0; i < 8192; ++i) {
        ASSERT_EQ(b_->data()[i], 0x5a) << "receive buffer byte " << i << " changed";
    }
    EXPECT_EQ(counter(*b_, "resp_op_sequence"), 1U);
    EXPECT_EQ(b_->qp.state(), QpState::err) << "an invalid request takes the responder to ERR";
}

// Requests past a gap wait for it (issue 30), then run in PSN order behind the one that fills it:
// three WRITEs to the same bytes, the last two first, leave the last one's bytes.
TEST_F(PeerFrameTest, RequestsPastAGapRunInOrderWhenItFills) {
    std::memset(b_->data(), 0x5a, 256);
    ASSERT_TRUE(inject_write(1002, 0x33));
    ASSERT_TRUE(inject_write(1001, 0x22));
    (void)poll_b(1); // one burst: the gap is not yet older than its NAK's delay
    EXPECT_EQ(counter(*b_, "kept_past_gap"), 2U);
    for (std::size_t i = 0; i < 256; ++i) {
        ASSERT_EQ(b_->data()[i], 0x5a) << "nothing runs before the gap fills: byte " << i;
    }
    ASSERT_TRUE(inject_write(1000, 0x11));
    (void)poll_b(1); // filled before the NAK came due
    for (std::size_t i = 0; i < 64; ++i) {
        ASSERT_EQ(b_->data()[i], 0x33) << "the last WRITE in PSN order wins: byte " << i;
    }
    (void)poll_b();
    EXPECT_EQ(counter(*b_, "naks_sent"), 0U) << "a reordering is not a loss";
    EXPECT_EQ(b_->qp.state(), QpState::rts);
}

// A gap still open once a reordering would have filled it is a loss: NAKed, as IBTA's responder
// does at once, and what was kept behind it let go (the requester resends all of it).
TEST_F(PeerFrameTest, AGapThatStaysOpenIsNakedAndWhatWaitedLetGo) {
    ASSERT_TRUE(inject_write(1001, 0x55));
    ASSERT_TRUE(inject_write(1002, 0x55));
    (void)poll_b(1);
    EXPECT_EQ(rte_mempool_in_use_count(pool_), 2U) << "both kept";
    EXPECT_EQ(counter(*b_, "naks_sent"), 0U) << "not at once";
    std::this_thread::sleep_for(std::chrono::microseconds(200));
    (void)poll_b();
    EXPECT_EQ(counter(*b_, "naks_sent"), 1U) << "once";
    EXPECT_EQ(rte_mempool_in_use_count(pool_), 0U) << "let go with the NAK";
    EXPECT_EQ(b_->qp.state(), QpState::rts);
}

// Kept packets hold the port's mbufs: destroying the QP gives them back.
TEST_F(PeerFrameTest, KeptPacketsGoBackToThePoolWithTheirQp) {
    ASSERT_TRUE(inject_write(1002, 0x44));
    ASSERT_TRUE(inject_write(1003, 0x44));
    (void)poll_b(1); // before the gap's NAK lets them go
    EXPECT_EQ(rte_mempool_in_use_count(pool_), 2U) << "both kept";
    ASSERT_TRUE(b_->qp.destroy().ok());
    (void)poll_b();
    EXPECT_EQ(rte_mempool_in_use_count(pool_), 0U) << "freed with the QP";
}

// Selective repeat (issue 30): b's QP is told its peer keeps packets past a loss and resends only
// what is NAKed. The test plays that peer on a's port and reads what b sends back from it.
class SelectiveRepeatTest : public PeerFrameTest {
protected:
    bool selective_repeat() const override { return true; }

    struct Sent {
        roce::Opcode opcode;
        std::uint32_t psn;
        roce::Aeth aeth; // an ACK's or NAK's
    };
    // What b put on the wire to a since the last call (a's engine does not run: nothing polls it).
    std::vector<Sent> sent_by_b() {
        std::vector<Sent> out;
        rte_mbuf* burst[32];
        std::uint16_t n = 0;
        while ((n = rte_eth_rx_burst(port_a_, 0, burst, 32)) != 0) {
            for (std::uint16_t i = 0; i < n; ++i) {
                const roce::ParsedFrame f =
                    roce::parse_roce_frame({rte_pktmbuf_mtod(burst[i], const std::uint8_t*),
                                            rte_pktmbuf_data_len(burst[i])});
                if (f.ok()) {
                    out.push_back({f.opcode(), f.bth.psn,
                                   f.has(roce::ExtHeader::aeth) ? f.aeth : roce::Aeth{}});
                }
                rte_pktmbuf_free(burst[i]);
            }
        }
        return out;
    }
    // Each sequence-error NAK's PSN (the first missing one) and MSN (the one it names).
    using Nak = std::pair<std::uint32_t, std::uint32_t>;
    static std::vector<Nak> naks(const std::vector<Sent>& frames) {
        std::vector<Nak> out;
        for (const Sent& f : frames) {
            if (f.opcode == roce::Opcode::rc_acknowledge &&
                f.aeth.syndrome == roce::nak_syndrome(roce::NakCode::psn_sequence_error)) {
                out.emplace_back(f.psn, f.aeth.msn);
            }
        }
        return out;
    }
    static std::vector<std::uint32_t> psns(const std::vector<Sent>& frames) {
        std::vector<std::uint32_t> out;
        for (const Sent& f : frames) {
            out.push_back(f.psn);
        }
        return out;
    }
    // a's ACK (or NAK, by `syndrome`) of `psn` to b's requester, with `msn`.
    bool inject_ack(std::uint32_t psn, std::uint8_t syndrome, std::uint32_t msn = 0) {
        roce::FrameHeaders h = from_a(roce::Opcode::rc_acknowledge, psn);
        h.aeth = {syndrome, msn};
        return inject(h, {});
    }
    // b's WRITE of 8 packets (1 KiB MTU) to a, PSNs 1000 to 1007, sent and read off the wire.
    void write_eight_packets() {
        SendWr write = send_wr(*b_, WrOpcode::rdma_write, 0, 8 * 1024);
        write.rdma.remote_addr = a_->addr();
        write.rdma.rkey = a_->mr.rkey();
        ASSERT_EQ(post_send(b_->qp, {&write, 1}), 1);
        (void)poll_b(20);
        ASSERT_EQ(psns(sent_by_b()),
                  (std::vector<std::uint32_t>{1000, 1001, 1002, 1003, 1004, 1005, 1006, 1007}));
    }
};

// Each PSN missing behind what came is NAKed by itself once four later ones came (IBTA's NAK of the
// first missing PSN, naming the missing one in its MSN), what came stays kept through the NAKs,
// and the resends run everything in PSN order.
TEST_F(SelectiveRepeatTest, EachMissingPsnIsNakedAloneAndWhatCameAfterStays) {
    std::memset(b_->data(), 0x5a, 256);
    for (std::uint32_t psn = 1001; psn <= 1012; ++psn) {
        if (psn != 1004) { // 1000 and 1004 lost
            ASSERT_TRUE(inject_write(psn, static_cast<std::uint8_t>(psn)));
        }
    }
    (void)poll_b(1);
    EXPECT_EQ(naks(sent_by_b()), (std::vector<Nak>{{1000, 1000}, {1000, 1004}}));
    EXPECT_EQ(rte_mempool_in_use_count(pool_), 11U) << "all kept through the NAKs";
    ASSERT_TRUE(inject_write(1004, 0x04));
    (void)poll_b(1);
    EXPECT_EQ(b_->data()[0], 0x5a) << "nothing runs while 1000 is missing";
    (void)sent_by_b(); // 1000 NAKed again, if the machine was slow enough
    ASSERT_TRUE(inject_write(1000, 0x00));
    (void)poll_b();
    for (std::size_t i = 0; i < 64; ++i) {
        ASSERT_EQ(b_->data()[i], 1012 & 0xff) << "the last WRITE in PSN order wins: byte " << i;
    }
    const std::vector<Sent> after = sent_by_b();
    EXPECT_TRUE(naks(after).empty()) << "nothing more is missing";
    ASSERT_FALSE(after.empty());
    EXPECT_EQ(after.back().opcode, roce::Opcode::rc_acknowledge);
    EXPECT_EQ(after.back().psn, 1012U) << "the filled gaps acknowledged, whatever was asked";
    EXPECT_EQ(rte_mempool_in_use_count(pool_), 0U);
    EXPECT_LE(counter(*b_, "naks_sent"), 3U) << "1000 and 1004, and 1000 at most once again";
    EXPECT_EQ(b_->qp.state(), QpState::rts);
}

// The PSNs of a kept READ's span are its responses', never a request's: not missing, not NAKed.
TEST_F(SelectiveRepeatTest, AKeptReadsSpanIsNotMissing) {
    roce::FrameHeaders read = from_a(roce::Opcode::rc_rdma_read_request, 1001);
    read.reth = {b_->addr(), b_->mr.rkey(), 8 * 1024}; // PSNs 1001 to 1008 at 1 KiB
    ASSERT_TRUE(inject(read, {}));
    for (std::uint32_t psn = 1009; psn <= 1012; ++psn) {
        ASSERT_TRUE(inject_write(psn, 0x12));
    }
    (void)poll_b(1);
    EXPECT_EQ(naks(sent_by_b()), (std::vector<Nak>{{1000, 1000}})) << "1000 alone is missing";
    ASSERT_TRUE(inject_write(1000, 0x10));
    (void)poll_b();
    std::vector<std::uint32_t> responses;
    for (const Sent& f : sent_by_b()) {
        if (f.opcode != roce::Opcode::rc_acknowledge) {
            responses.push_back(f.psn);
        }
    }
    EXPECT_EQ(responses,
              (std::vector<std::uint32_t>{1001, 1002, 1003, 1004, 1005, 1006, 1007, 1008}));
    EXPECT_EQ(rte_mempool_in_use_count(pool_), 0U);
}

// A missing PSN whose resend does not come is NAKed again (its NAK or the resend was lost too).
TEST_F(SelectiveRepeatTest, APsnStillMissingIsNakedAgain) {
    for (std::uint32_t psn = 1001; psn <= 1005; ++psn) {
        ASSERT_TRUE(inject_write(psn, 0x55));
    }
    (void)poll_b(1);
    EXPECT_EQ(naks(sent_by_b()), (std::vector<Nak>{{1000, 1000}}));
    std::this_thread::sleep_for(std::chrono::microseconds(100));
    (void)poll_b(16); // an idle group looks at its QPs every 16th empty poll
    const std::vector<Nak> again = naks(sent_by_b());
    ASSERT_FALSE(again.empty()) << "NAKed again";
    for (const Nak& nak : again) {
        EXPECT_EQ(nak, Nak(1000, 1000)) << "1000 alone";
    }
    EXPECT_EQ(rte_mempool_in_use_count(pool_), 5U) << "still kept";
}

// A gap its requester never fills (it stopped) is given up after rounds of NAKs: the kept packets
// go back to the pool, and the last NAK names the PSN before the gap: go back N.
TEST_F(SelectiveRepeatTest, AGapThatNeverFillsIsGivenUp) {
    for (std::uint32_t psn = 1001; psn <= 1005; ++psn) {
        ASSERT_TRUE(inject_write(psn, 0x66));
    }
    std::vector<Nak> all;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while (rte_mempool_in_use_count(pool_) != 0 && std::chrono::steady_clock::now() < deadline) {
        (void)poll_b(16);
        const std::vector<Nak> got = naks(sent_by_b());
        all.insert(all.end(), got.begin(), got.end());
        std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
    EXPECT_EQ(rte_mempool_in_use_count(pool_), 0U) << "given up";
    ASSERT_GE(all.size(), 2U);
    EXPECT_EQ(all.back(), Nak(1000, 999)) << "go back N";
    EXPECT_EQ(b_->qp.state(), QpState::rts);
}

// A kept SEND that finds no receive when the gap fills draws an RNR NAK, and the ACK of the
// filled gap does not replace it: the requester must wait and resend from there.
TEST_F(SelectiveRepeatTest, AnRnrNakInsideTheKeptRunReachesTheRequester) {
    for (std::uint32_t psn = 1001; psn <= 1004; ++psn) {
        ASSERT_TRUE(inject(from_a(roce::Opcode::rc_send_only, psn), std::vector<std::uint8_t>(64)));
    }
    ASSERT_TRUE(inject_write(1000, 0x77)); // fills the gap: the SENDs run, with no receive posted
    (void)poll_b(1);
    std::vector<Sent> acks;
    for (const Sent& f : sent_by_b()) {
        if (f.opcode == roce::Opcode::rc_acknowledge) {
            acks.push_back(f);
        }
    }
    ASSERT_EQ(acks.size(), 1U);
    EXPECT_EQ(roce::aeth_type(acks[0].aeth.syndrome), roce::AckType::rnr_nak);
    EXPECT_EQ(acks[0].psn, 1001U);
    EXPECT_EQ(rte_mempool_in_use_count(pool_), 0U)
        << "the rest let go: it is resent after the wait";
}

// b's requester: a NAK from a peer that repeats selectively acknowledges what is before its PSN
// and resends the packet its MSN names, alone.
TEST_F(SelectiveRepeatTest, ANakResendsThePacketItNamesAlone) {
    ASSERT_NO_FATAL_FAILURE(write_eight_packets());
    ASSERT_TRUE(
        inject_ack(1001, roce::nak_syndrome(roce::NakCode::psn_sequence_error), /*msn=*/1003));
    EXPECT_TRUE(poll_b(20).empty()) << "the WRITE is not all acknowledged";
    const std::vector<std::uint32_t> resent = psns(sent_by_b());
    // A stall probe (b descheduled for the millisecond) would resend the last packet, 1007.
    EXPECT_EQ(std::count(resent.begin(), resent.end(), 1003U), 1) << "1003 resent";
    for (const std::uint32_t psn : {1001U, 1002U, 1004U, 1005U, 1006U}) {
        EXPECT_EQ(std::count(resent.begin(), resent.end(), psn), 0) << psn << ": not go-back-N";
    }
    EXPECT_EQ(counter(*b_, "selective_resends"), 1U);
    EXPECT_EQ(counter(*b_, "retransmissions"), counter(*b_, "probes"));
    ASSERT_TRUE(inject_ack(1007, roce::ack_syndrome()));
    const auto done = poll_b();
    ASSERT_EQ(done.size(), 1U);
    EXPECT_EQ(done[0].status, WcStatus::success);
}

// A peer that NAKs the same PSN again after each of three resends did not keep what came after
// it (a go-back-N peer whose MSN fell among our PSNs): the requester goes back N.
TEST_F(SelectiveRepeatTest, TheSamePsnNakedAgainAndAgainGoesBack) {
    ASSERT_NO_FATAL_FAILURE(write_eight_packets());
    std::vector<std::uint32_t> resent;
    for (int round = 0; round < 4; ++round) {
        ASSERT_TRUE(
            inject_ack(1001, roce::nak_syndrome(roce::NakCode::psn_sequence_error), /*msn=*/1003));
        (void)poll_b(20);
        resent = psns(sent_by_b());
        if (round < 3) {
            EXPECT_EQ(std::count(resent.begin(), resent.end(), 1004U), 0) << "round " << round;
        }
        std::this_thread::sleep_for(std::chrono::microseconds(30)); // past the same-loss guard
    }
    for (std::uint32_t psn = 1001; psn <= 1007; ++psn) {
        EXPECT_GE(std::count(resent.begin(), resent.end(), psn), 1) << psn << ": went back";
    }
    EXPECT_EQ(counter(*b_, "selective_resends"), 3U);
}

// A NAK whose MSN names nothing unacknowledged is a message count (the peer does not repeat
// selectively after all): go-back-N from its PSN, as IBTA says.
TEST_F(SelectiveRepeatTest, ANakWithARealMsnGoesBack) {
    ASSERT_NO_FATAL_FAILURE(write_eight_packets());
    ASSERT_TRUE(inject_ack(1003, roce::nak_syndrome(roce::NakCode::psn_sequence_error), /*msn=*/1));
    (void)poll_b(20);
    const std::vector<std::uint32_t> resent = psns(sent_by_b());
    for (std::uint32_t psn = 1003; psn <= 1007; ++psn) {
        EXPECT_GE(std::count(resent.begin(), resent.end(), psn), 1) << psn;
    }
    EXPECT_EQ(counter(*b_, "selective_resends"), 0U);
}

// A WRITE_MIDDLE with no WRITE_FIRST, and a WRITE_ONLY longer than its RETH, are refused too.
TEST_F(PeerFrameTest, WriteOutOfSequenceOrBeyondItsRethIsRefused) {
    std::memset(b_->data(), 0x5a, 4096);
    std::vector<std::uint8_t> payload(1024, 0xcd);
    roce::FrameHeaders only = from_a(roce::Opcode::rc_rdma_write_only, 1000);
    only.reth = {b_->addr(), b_->mr.rkey(), 100}; // 1024 bytes follow a RETH of 100
    ASSERT_TRUE(inject(only, payload));
    (void)poll_b();
    EXPECT_EQ(counter(*b_, "resp_length"), 1U);
    for (std::size_t i = 0; i < 4096; ++i) {
        ASSERT_EQ(b_->data()[i], 0x5a) << i;
    }
}

// Responses leave in PSN order: when one burst brings a SEND, an atomic and another SEND, the
// atomic ACK goes before the ACK of the SEND after it. (The coalesced ACK used to go first; the
// requester took it as the atomic's answer lost, asked again, got the same order again and ran
// out of retries: a slow build with duplicated frames failed the fault matrix that way.)
TEST_F(PeerFrameTest, AnAckNeverOvertakesTheAtomicAckOfAnEarlierRequest) {
    post_receive(*b_, 1, 0, 64);
    post_receive(*b_, 2, 64, 64);
    std::vector<std::uint8_t> payload(64, 0x11);
    auto* word = reinterpret_cast<std::uint64_t*>(b_->data() + 4096);
    *word = 5;
    ASSERT_TRUE(inject(from_a(roce::Opcode::rc_send_only, 1000), payload));
    roce::FrameHeaders add = from_a(roce::Opcode::rc_fetch_add, 1001);
    add.atomic_eth = {b_->addr() + 4096, b_->mr.rkey(), 3, 0};
    ASSERT_TRUE(inject(add, {}));
    roce::FrameHeaders last = from_a(roce::Opcode::rc_send_only, 1002);
    last.bth.ack_req = true;
    ASSERT_TRUE(inject(last, payload));
    (void)poll_b();
    EXPECT_EQ(*word, 8U);
    std::array<rte_mbuf*, 32> sent{};
    const std::uint16_t n = rte_eth_rx_burst(port_a_, 0, sent.data(), sent.size());
    std::vector<std::pair<roce::Opcode, std::uint32_t>> order;
    for (std::uint16_t i = 0; i < n; ++i) {
        const roce::ParsedFrame f = roce::parse_roce_frame(
            {rte_pktmbuf_mtod(sent[i], const std::uint8_t*), rte_pktmbuf_data_len(sent[i])});
        if (f.ok()) {
            order.emplace_back(f.opcode(), f.bth.psn);
        }
    }
    rte_pktmbuf_free_bulk(sent.data(), n);
    ASSERT_FALSE(order.empty());
    bool atomic_ack_seen = false;
    for (const auto& [opcode, psn] : order) {
        if (opcode == roce::Opcode::rc_atomic_acknowledge) {
            EXPECT_EQ(psn, 1001U);
            atomic_ack_seen = true;
        } else if (opcode == roce::Opcode::rc_acknowledge && roce::psn_after(psn, 1000)) {
            EXPECT_TRUE(atomic_ack_seen) << "the ACK of PSN " << psn << " went first";
        }
    }
    EXPECT_TRUE(atomic_ack_seen);
}

// A QP on an SRQ holds the receive a multi-packet SEND took at its first packet until the last.
// If the QP fails in between, that receive completes as a flush error (the application gets its
// buffer back), the QP's last WQE is reached, and the SRQ keeps the rest for its other QPs.
TEST_F(PeerFrameTest, AReceiveHeldMidSendIsFlushedWhenItsQpFails) {
    auto srq = b_->context.create_srq(b_->pd, {8, 1});
    ASSERT_TRUE(srq.ok()) << srq.error().to_string();
    QpInitAttr init;
    init.pd = &b_->pd;
    init.send_cq = &b_->cq;
    init.recv_cq = &b_->cq;
    init.srq = &srq.value();
    auto qp = b_->context.create_qp(init);
    ASSERT_TRUE(qp.ok()) << qp.error().to_string();
    connect_qp(qp.value(), *a_, a_->qp, pair_->gid_a());
    for (std::uint64_t i = 0; i < 2; ++i) {
        RecvWr wr;
        wr.wr_id = 70 + i;
        wr.num_sge = 1;
        wr.sge = {b_->addr() + i * 8192, 8192, b_->mr.lkey()};
        ASSERT_EQ(post_srq_recv(srq.value(), {&wr, 1}), 1);
    }
    roce::FrameHeaders first = from_a(roce::Opcode::rc_send_first, 1000);
    first.bth.dest_qp = qp.value().qpn();
    std::vector<std::uint8_t> payload(1024, 0x3c);
    ASSERT_TRUE(inject(first, payload));
    EXPECT_TRUE(poll_b().empty()) << "nothing completes before the SEND's last packet";
    EXPECT_EQ(srq.value().outstanding().value(), 1U) << "the SEND took one receive";

    QpAttr err;
    err.state = QpState::err;
    ASSERT_TRUE(qp.value().modify(err, qp_attr_state).ok());
    const auto done = poll_b();
    ASSERT_EQ(done.size(), 1U);
    EXPECT_EQ(done[0].wr_id, 70U);
    EXPECT_EQ(done[0].status, WcStatus::wr_flush_error);
    EXPECT_EQ(done[0].qpn, qp.value().qpn());
    std::array<Event, 16> events{};
    const std::size_t n = b_->context.poll_events(events);
    EXPECT_TRUE(std::any_of(events.begin(), events.begin() + static_cast<std::ptrdiff_t>(n),
                            [&](const Event& e) {
                                return e.type == EventType::qp_last_wqe_reached &&
                                       e.qpn == qp.value().qpn();
                            }))
        << "qp_last_wqe_reached for the QP on the SRQ";
    EXPECT_EQ(srq.value().outstanding().value(), 1U) << "the SRQ's other receive stays";
    qp.value() = {};
    EXPECT_TRUE(srq.value().destroy().ok());
}

// While the port refuses every frame, outstanding work still times out: retry_exceeded on time,
// the rest flushed, the QP in ERR. (Before, progress returned before any timer ran while the tx
// backlog held frames, so the WRITEs never completed.)
TEST_F(PeerFrameTest, OutstandingWorkTimesOutWhileThePortRefusesFrames) {
    // Fill the a->b ring: b is never polled here, so nothing drains it.
    std::vector<std::uint8_t> junk(64, 0);
    while (inject(from_a(roce::Opcode::rc_send_only, 5000), junk)) {
    }
    std::vector<SendWr> wrs;
    for (int i = 0; i < 64; ++i) {
        SendWr wr = send_wr(*a_, WrOpcode::rdma_write, 0, 64);
        wr.wr_id = static_cast<std::uint64_t>(i);
        wr.rdma.remote_addr = b_->addr();
        wr.rdma.rkey = b_->mr.rkey();
        wrs.push_back(wr);
    }
    ASSERT_EQ(post_send(a_->qp, {wrs.data(), 64}), 64);
    std::vector<WorkCompletion> done;
    WorkCompletion wc[32];
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (done.size() < 64 && std::chrono::steady_clock::now() < deadline) {
        const std::uint16_t n = poll_cq(a_->cq, {wc, 32});
        done.insert(done.end(), wc, wc + n);
    }
    ASSERT_EQ(done.size(), 64U) << "every WRITE completes although no frame can leave";
    EXPECT_EQ(done[0].status, WcStatus::retry_exceeded);
    for (std::size_t i = 1; i < done.size(); ++i) {
        EXPECT_EQ(done[i].status, WcStatus::wr_flush_error) << i;
    }
    EXPECT_EQ(a_->qp.state(), QpState::err);
}

// post_send refuses what is not an opcode: it takes the WRs before it and leaves the QP working.
TEST_F(EngineTest, AnOutOfRangeOpcodeIsRefusedAtPost) {
    SendWr good = send_wr(*a_, WrOpcode::rdma_write, 0, 64);
    good.rdma.remote_addr = b_->addr();
    good.rdma.rkey = b_->mr.rkey();
    SendWr bad = good;
    bad.wr_id = 99;
    bad.opcode = static_cast<WrOpcode>(200);
    const SendWr wrs[] = {good, bad};
    EXPECT_EQ(post_send(a_->qp, {wrs, 2}), 1) << "the WR with no valid opcode is not taken";
    const auto done = wait(*a_, 1);
    ASSERT_EQ(done.size(), 1U);
    EXPECT_EQ(done[0].status, WcStatus::success);
    EXPECT_EQ(a_->qp.state(), QpState::rts);
}

// A WR longer than 2^31 bytes fails with a local length error in send-queue order: the WRITE
// posted before it completes first (before, the error overtook it and the WRITE was flushed).
TEST_F(EngineTest, AnOverlongWrFailsInSendQueueOrder) {
    SendWr first = send_wr(*a_, WrOpcode::rdma_write, 0, 64);
    first.wr_id = 1;
    first.rdma.remote_addr = b_->addr();
    first.rdma.rkey = b_->mr.rkey();
    std::array<Sge, 2> sges = {Sge{a_->addr(), 0x80000000U, a_->mr.lkey()},
                               Sge{a_->addr(), 16, a_->mr.lkey()}};
    SendWr overlong = first;
    overlong.wr_id = 2;
    overlong.num_sge = 2;
    overlong.sg_list = sges.data();
    const SendWr wrs[] = {first, overlong};
    ASSERT_EQ(post_send(a_->qp, {wrs, 2}), 2);
    const auto done = wait(*a_, 2);
    ASSERT_EQ(done.size(), 2U);
    EXPECT_EQ(done[0].wr_id, 1U);
    EXPECT_EQ(done[0].status, WcStatus::success);
    EXPECT_EQ(done[1].wr_id, 2U);
    EXPECT_EQ(done[1].status, WcStatus::local_length_error);
}

// A WR's local error is reported on that WR (IBTA 10.8.3, rxe): posted in one call behind a valid
// READ, the failing WR carries its own error and the WRs after it flush; the READ before it
// completes or flushes, never blamed. Each local error path is tried in the middle position.
TEST_F(EngineTest, ALocalErrorIsReportedOnTheWrThatFailed) {
    struct Case {
        const char* name;
        WcStatus status;
    };
    const std::array<Case, 5> cases = {
        Case{"sge beyond its region", WcStatus::local_protection_error},
        Case{"unknown lkey", WcStatus::local_protection_error},
        Case{"read into a read-only region", WcStatus::local_protection_error},
        Case{"fast-register without a region", WcStatus::local_qp_operation_error},
        Case{"longer than 2^31 bytes", WcStatus::local_length_error}};
    auto read_only = a_->pd.register_memory(a_->data() + 512 * 1024, 4096, mem::AccessFlags{});
    ASSERT_TRUE(read_only.ok());
    const std::array<Sge, 2> overlong_sges = {Sge{a_->addr(), 0x80000000U, a_->mr.lkey()},
                                              Sge{a_->addr(), 16, a_->mr.lkey()}};
    for (std::size_t i = 0; i < cases.size(); ++i) {
        SCOPED_TRACE(cases[i].name);
        SendWr read = send_wr(*a_, WrOpcode::rdma_read, 0, 4096);
        read.wr_id = 1;
        read.rdma.remote_addr = b_->addr();
        read.rdma.rkey = b_->mr.rkey();
        SendWr bad = send_wr(*a_, WrOpcode::rdma_write, kBufferSize - 64, 128);
        bad.wr_id = 2;
        bad.rdma = read.rdma;
        if (i == 1) {
            bad.sge = {a_->addr(), 64, 0x12345600};
        } else if (i == 2) {
            bad.opcode = WrOpcode::rdma_read;
            bad.sge = {a_->addr() + 512 * 1024, 64, read_only->lkey()};
        } else if (i == 3) {
            bad = SendWr{};
            bad.wr_id = 2;
            bad.opcode = WrOpcode::fast_reg;
            bad.flags = send_signaled;
        } else if (i == 4) {
            bad.sge = {};
            bad.num_sge = 2;
            bad.sg_list = overlong_sges.data();
        }
        SendWr after = send_wr(*a_, WrOpcode::rdma_write, 8192, 64);
        after.wr_id = 3;
        after.rdma = read.rdma;
        const SendWr wrs[] = {read, bad, after};
        ASSERT_EQ(post_send(a_->qp, {wrs, 3}), 3);
        const auto done = wait(*a_, 3);
        ASSERT_EQ(done.size(), 3U);
        EXPECT_EQ(done[0].wr_id, 1U);
        EXPECT_TRUE(done[0].status == WcStatus::success ||
                    done[0].status == WcStatus::wr_flush_error)
            << wc_status_name(done[0].status);
        EXPECT_EQ(done[1].wr_id, 2U);
        EXPECT_EQ(done[1].status, cases[i].status) << wc_status_name(done[1].status);
        EXPECT_EQ(done[2].wr_id, 3U);
        EXPECT_EQ(done[2].status, WcStatus::wr_flush_error) << wc_status_name(done[2].status);
        EXPECT_EQ(a_->qp.state(), QpState::err);
        // A fresh connection for the next case.
        a_->qp = make_qp(*a_);
        b_->qp = make_qp(*b_);
        connect(*a_, *b_, pair_->gid_b());
        connect(*b_, *a_, pair_->gid_a());
    }
}

// An explicit poller (Context::attach_poller): a thread of b's own attaches to b's queue groups
// and only calls progress(); b's CQ is never polled by it. The main thread drives a, posts a
// receive on b (a doorbell: another thread drives b) and reaps b's CQ (only reaping). a's WRITE,
// READ and SEND complete; after the poller detaches, the main thread drives b again.
TEST_F(EngineTest, AnAttachedPollerDrivesItsGroupsWithoutACqPoll) {
    std::atomic<bool> attached{false};
    std::atomic<bool> stop{false};
    std::atomic<std::uint64_t> passes{0};
    std::string attach_error;
    std::thread poller_thread([&] {
        auto poller = b_->context.attach_poller();
        if (!poller) {
            attach_error = poller.error().to_string();
            attached = true;
            return;
        }
        attached = true;
        while (!stop.load(std::memory_order_relaxed)) {
            (void)progress(poller.value());
            passes.fetch_add(1, std::memory_order_relaxed);
        }
    }); // the poller detaches as it goes out of scope
    while (!attached.load()) {
        std::this_thread::yield();
    }
    ASSERT_TRUE(attach_error.empty()) << attach_error;
    // Attached elsewhere: this thread may not take the group too, and says who has it.
    auto second = b_->context.attach_poller(0);
    ASSERT_FALSE(second.ok());
    EXPECT_EQ(second.code(), StatusCode::busy);
    EXPECT_NE(second.error().message().find("another thread drives it"), std::string::npos)
        << second.error().message();
    EXPECT_EQ(b_->context.attach_poller(7).code(), StatusCode::invalid_parameter);

    const auto run = [&](SendWr wr) {
        EXPECT_EQ(post_send(a_->qp, {&wr, 1}), 1);
        WorkCompletion wc;
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
        while (poll_cq(a_->cq, {&wc, 1}) == 0 && std::chrono::steady_clock::now() < deadline) {
        }
        return wc;
    };
    fill(*a_, 0, 64 * 1024, 41);
    SendWr write = send_wr(*a_, WrOpcode::rdma_write, 0, 64 * 1024);
    write.rdma.remote_addr = b_->addr() + 128 * 1024;
    write.rdma.rkey = b_->mr.rkey();
    EXPECT_EQ(run(write).status, WcStatus::success);
    EXPECT_EQ(std::memcmp(a_->data(), b_->data() + 128 * 1024, 64 * 1024), 0);
    fill(*b_, 256 * 1024, 4096, 43);
    SendWr read = send_wr(*a_, WrOpcode::rdma_read, 512 * 1024, 4096);
    read.rdma.remote_addr = b_->addr() + 256 * 1024;
    read.rdma.rkey = b_->mr.rkey();
    EXPECT_EQ(run(read).status, WcStatus::success);
    EXPECT_EQ(std::memcmp(a_->data() + 512 * 1024, b_->data() + 256 * 1024, 4096), 0);
    post_receive(*b_, 61, 768 * 1024, 256);
    EXPECT_EQ(run(send_wr(*a_, WrOpcode::send, 0, 256)).status, WcStatus::success);
    WorkCompletion received;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (poll_cq(b_->cq, {&received, 1}) == 0 && std::chrono::steady_clock::now() < deadline) {
    }
    EXPECT_EQ(received.wr_id, 61U);
    EXPECT_EQ(received.status, WcStatus::success);
    EXPECT_EQ(std::memcmp(a_->data(), b_->data() + 768 * 1024, 256), 0);
    EXPECT_GT(passes.load(), 0U);

    stop = true;
    poller_thread.join();
    // Detached: this thread drives b again (its CQ poll claims the group).
    auto again = b_->context.attach_poller(0);
    ASSERT_TRUE(again.ok()) << again.error().to_string();
    again.value().detach();
    SendWr after = write;
    after.rdma.remote_addr = b_->addr() + 896 * 1024;
    const auto done = [&] {
        EXPECT_EQ(post_send(a_->qp, {&after, 1}), 1);
        return wait(*a_, 1);
    }();
    ASSERT_EQ(done.size(), 1U);
    EXPECT_EQ(done[0].status, WcStatus::success);
}

// A poller that detaches leaves what its groups' mailboxes held to whoever takes the group next:
// a destroy that takes it runs them first, so a modify sent to the poller does not run later on
// the freed QP (a use after free that ASan reports; the sanitize step runs this test).
TEST_F(EngineTest, ADestroyAfterTheOwnerLeftRunsTheRequestsItLeft) {
    const Status modify = leave_a_modify();
    ASSERT_EQ(modify.code(), StatusCode::pending);
    EXPECT_TRUE(b_->qp.destroy(8).ok()) << "nothing queued on the QP: it goes at once";
    ControlCompletion done[8];
    std::vector<std::uint64_t> order;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (order.size() < 1 && std::chrono::steady_clock::now() < deadline) {
        const std::size_t n = b_->context.poll_control(done);
        for (std::size_t i = 0; i < n; ++i) {
            EXPECT_EQ(done[i].status, StatusCode::ok) << done[i].message;
            order.push_back(done[i].request_id);
        }
    }
    ASSERT_EQ(order.size(), 1U);
    EXPECT_EQ(order[0], 7U);
}

// The same when the thread that takes the group next is a poller attaching: it runs what the
// last one left before it drives the group, so the QP's state is the modify's at once.
TEST_F(EngineTest, AnAttachingPollerRunsTheRequestsTheLastOneLeft) {
    const Status modify = leave_a_modify();
    ASSERT_EQ(modify.code(), StatusCode::pending);
    EXPECT_EQ(b_->qp.state(), QpState::rts) << "nobody has run the modify yet";
    auto poller = b_->context.attach_poller();
    ASSERT_TRUE(poller.ok()) << poller.error().to_string();
    EXPECT_EQ(b_->qp.state(), QpState::err) << "the attach ran the modify the last poller left";
    EXPECT_TRUE(b_->qp.destroy(8).ok());
}

// ARP's retries and its giving up are group 0's timers: a resolution started while nobody polled
// the group goes on when a poller takes it, and an unanswered one fails the RTR (here after five
// requests 200 ms apart) instead of leaving it pending for ever.
TEST_F(EngineTest, AnUnansweredArpFailsTheRtrWhileAPollerOwnsGroupZero) {
    QueuePair qp = make_qp(*b_);
    ConnectionDescriptor nobody;
    nobody.qpn = 0x123;
    nobody.psn = 1;
    nobody.gid = Gid::from_ipv4(0x0a6363fa); // 10.99.99.250: on the wire, but no one's address
    ConnectOptions options;
    options.until = QpState::rtr;
    ASSERT_EQ(qp.connect(nobody, options, 5).code(), StatusCode::pending);
    IdleOwner owner(*b_);
    owner.run();
    ControlCompletion done[8];
    std::optional<ControlCompletion> rtr;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (!rtr && std::chrono::steady_clock::now() < deadline) {
        const std::size_t n = b_->context.poll_control(done);
        for (std::size_t i = 0; i < n; ++i) {
            if (done[i].request_id == 5) {
                rtr = done[i];
            }
        }
    }
    ASSERT_TRUE(rtr.has_value()) << "the RTR is still waiting for ARP after 5 s";
    EXPECT_EQ(rtr->status, StatusCode::not_connected);
    EXPECT_NE(rtr->message.find("no ARP reply from 10.99.99.250 after 5 requests"),
              std::string::npos)
        << rtr->message;
}

// The same with nobody but the control path driving group 0, and the application polling it only
// every 50 ms: ARP's retries keep their 200 ms, so the RTR fails after about a second, not after
// sixteen idle polls per retry (4 s).
TEST_F(EngineTest, AnUnansweredArpFailsOnTimeWhenTheControlPathPollsRarely) {
    QueuePair qp = make_qp(*b_);
    ConnectionDescriptor nobody;
    nobody.qpn = 0x123;
    nobody.psn = 1;
    nobody.gid = Gid::from_ipv4(0x0a6363fb);
    ConnectOptions options;
    options.until = QpState::rtr;
    const auto start = std::chrono::steady_clock::now();
    ASSERT_EQ(qp.connect(nobody, options, 6).code(), StatusCode::pending);
    ControlCompletion done[8];
    std::optional<ControlCompletion> rtr;
    while (!rtr && std::chrono::steady_clock::now() - start < std::chrono::seconds(6)) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        const std::size_t n = b_->context.poll_control(done);
        for (std::size_t i = 0; i < n; ++i) {
            if (done[i].request_id == 6) {
                rtr = done[i];
            }
        }
    }
    const auto took = std::chrono::steady_clock::now() - start;
    ASSERT_TRUE(rtr.has_value()) << "the RTR is still waiting for ARP after 6 s";
    EXPECT_EQ(rtr->status, StatusCode::not_connected) << rtr->message;
    EXPECT_LT(took, std::chrono::milliseconds(2500))
        << "five requests 200 ms apart took "
        << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms";
}

// ARP is group 0's: while a poller owns that group, an RTR without the peer's MAC is resolved by
// the poller between two bursts (not refused), the first time with a request on the wire and the
// next from the table it filled.
TEST_F(EngineTest, AnRtrWithoutAMacIsResolvedByThePollerOwningGroupZero) {
    std::array<QueuePair, 2> qps{make_qp(*b_), make_qp(*b_)};
    IdleOwner owner(*b_);
    owner.run();
    ConnectionDescriptor peer;
    peer.qpn = a_->qp.qpn();
    peer.psn = 1;
    peer.gid = pair_->gid_a(); // no MAC: ARP finds it
    ConnectOptions options;
    options.until = QpState::rtr;
    // connect() goes a step at a time while the owner applies them (each one pending).
    const auto connect_step = [&](QueuePair& qp, std::uint64_t id) -> std::string {
        const Status started = qp.connect(peer, options, id);
        if (started.code() != StatusCode::pending) {
            return started.ok() ? "done" : started.error().to_string();
        }
        ControlCompletion done[8];
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
        while (std::chrono::steady_clock::now() < deadline) {
            (void)a_->context.poll_control(done); // a answers the ARP request
            const std::size_t n = b_->context.poll_control(done);
            for (std::size_t k = 0; k < n; ++k) {
                if (done[k].request_id == id) {
                    return done[k].status == StatusCode::ok ? "step" : done[k].message;
                }
            }
        }
        return "still pending after 5 s";
    };
    std::uint64_t requests_after_first = 0;
    for (std::size_t i = 0; i < qps.size(); ++i) {
        std::string outcome = "step";
        for (int step = 0; step < 4 && outcome == "step"; ++step) {
            outcome = connect_step(qps[i], 20 + i);
        }
        EXPECT_TRUE(outcome == "done" || outcome == "step") << "QP " << i << ": " << outcome;
        EXPECT_EQ(qps[i].state(), QpState::rtr) << "QP " << i;
        if (i == 0) {
            requests_after_first = counter(*b_, "arp_requests_sent");
            EXPECT_GE(requests_after_first, 1U);
        }
    }
    EXPECT_EQ(counter(*b_, "arp_requests_sent"), requests_after_first)
        << "the second RTR is answered from the table";
}

// A destroy is never refused for want of room in the owner's mailbox (the class frees its object
// whatever the driver says, so a refusal would lose the driver's QP or CQ): it waits behind the
// requests the owner has yet to take, the context counts the object until it is gone, and it is
// gone once the owner has caught up.
TEST_F(EngineTest, ADestroyWaitsForRoomInTheOwnersMailbox) {
    auto spare = b_->context.create_cq(16);
    ASSERT_TRUE(spare.ok());
    const Context::Resources before = b_->context.resources();
    std::vector<CompletionQueue> waiting; // released after the owner has left
    IdleOwner owner(*b_);
    waiting = fill_mailbox(0);
    ASSERT_LT(waiting.size(), 4096U) << "the mailbox never filled";
    EXPECT_EQ(b_->qp.destroy(1).code(), StatusCode::pending);
    EXPECT_EQ(spare.value().destroy(2).code(), StatusCode::pending);
    EXPECT_EQ(b_->context.resources().qps, before.qps) << "the driver still holds the QP";
    EXPECT_EQ(b_->context.resources().cqs, before.cqs + waiting.size());
    EXPECT_EQ(b_->context.create_cq(16, 0, 3).code(), StatusCode::busy)
        << "a create does not overtake the destroys waiting";

    owner.run();
    ControlCompletion done[64];
    std::set<std::uint64_t> destroyed;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (destroyed.size() < 2 && std::chrono::steady_clock::now() < deadline) {
        const std::size_t n = b_->context.poll_control(done);
        for (std::size_t i = 0; i < n; ++i) {
            if (done[i].request_id == 1 || done[i].request_id == 2) {
                EXPECT_EQ(done[i].status, StatusCode::ok) << done[i].message;
                destroyed.insert(done[i].request_id);
            }
        }
    }
    EXPECT_EQ(destroyed.size(), 2U);
    EXPECT_EQ(b_->context.resources().qps, before.qps - 1);
    EXPECT_EQ(b_->context.resources().cqs, before.cqs - 1 + waiting.size());
}

// ---- shared receive queues -------------------------------------------------------------------

// b serves two of a's QPs from one SRQ.
class SrqEngineTest : public EngineTest {
protected:
    void SetUp() override {
        EngineTest::SetUp();
        auto srq = b_->context.create_srq(b_->pd, {8, 2});
        ASSERT_TRUE(srq.ok()) << srq.error().to_string();
        srq_ = std::move(srq.value());
        for (int i = 0; i < 2; ++i) {
            QpInitAttr init;
            init.pd = &b_->pd;
            init.send_cq = &b_->cq;
            init.recv_cq = &b_->cq;
            init.srq = &srq_;
            auto qp = b_->context.create_qp(init);
            ASSERT_TRUE(qp.ok()) << qp.error().to_string();
            served_[i] = std::move(qp.value());
            clients_[i] = make_qp(*a_);
        }
        for (int i = 0; i < 2; ++i) {
            connect_qp(clients_[i], *b_, served_[i], pair_->gid_b());
            connect_qp(served_[i], *a_, clients_[i], pair_->gid_a());
        }
    }
    void TearDown() override {
        for (int i = 0; i < 2; ++i) {
            served_[i] = {};
            clients_[i] = {};
        }
        srq_ = {};
        EngineTest::TearDown();
    }
    // Two SGEs, back to back: a message longer than the first half crosses into the second,
    // which the QP reads from its own copy of the WR once the SRQ slot is given out again.
    void post_srq(std::uint64_t wr_id, std::uint64_t offset, std::uint32_t length) {
        const std::uint32_t half = length / 2;
        std::array<Sge, 2> sges{Sge{b_->addr() + offset, half, b_->mr.lkey()},
                                Sge{b_->addr() + offset + half, length - half, b_->mr.lkey()}};
        RecvWr wr;
        wr.wr_id = wr_id;
        wr.num_sge = 2;
        wr.sg_list = sges.data();
        ASSERT_EQ(post_srq_recv(srq_, {&wr, 1}), 1);
    }
    void send_on(int client, std::uint64_t offset, std::uint32_t length) {
        SendWr wr = send_wr(*a_, WrOpcode::send, offset, length);
        ASSERT_EQ(post_send(clients_[client], {&wr, 1}), 1);
    }
    std::vector<Event> srq_events() {
        std::array<Event, 16> events{};
        const std::size_t n = b_->context.poll_events(events);
        std::vector<Event> out;
        for (std::size_t i = 0; i < n; ++i) {
            if (events[i].type == EventType::srq_limit_reached) {
                out.push_back(events[i]);
            }
        }
        return out;
    }

    SharedReceiveQueue srq_;
    std::array<QueuePair, 2> served_;
    std::array<QueuePair, 2> clients_;
};

TEST_F(SrqEngineTest, TwoQpsTakeReceivesFromOneSrqWhileTheirSendsInterleave) {
    // A 5000-byte SEND (five packets) on one QP and small ones on the other at the same time:
    // each takes the next receive of the SRQ when its first packet arrives and keeps it to its
    // last, whatever comes in between.
    constexpr std::uint32_t long_length = 5000;
    fill(*a_, 0, long_length, 3);
    fill(*a_, 8192, 64, 9);
    for (std::uint64_t i = 0; i < 4; ++i) {
        post_srq(100 + i, 65536 + i * 8192, 8192);
    }
    send_on(0, 0, long_length);
    send_on(1, 8192, 64);
    send_on(1, 8192, 64);
    send_on(0, 0, long_length);
    ASSERT_EQ(wait(*a_, 4).size(), 4U);
    const auto received = wait(*b_, 4);
    ASSERT_EQ(received.size(), 4U);
    std::set<std::uint64_t> ids;
    for (const WorkCompletion& wc : received) {
        ASSERT_EQ(wc.status, WcStatus::success) << wc_status_name(wc.status);
        ids.insert(wc.wr_id);
        const bool long_one = wc.qpn == served_[0].qpn();
        EXPECT_EQ(wc.qpn, long_one ? served_[0].qpn() : served_[1].qpn());
        EXPECT_EQ(wc.src_qpn, long_one ? clients_[0].qpn() : clients_[1].qpn());
        EXPECT_EQ(wc.byte_len, long_one ? long_length : 64U);
        const std::uint64_t offset = 65536 + (wc.wr_id - 100) * 8192;
        EXPECT_EQ(std::memcmp(b_->data() + offset, a_->data() + (long_one ? 0 : 8192), wc.byte_len),
                  0)
            << "wr " << wc.wr_id;
    }
    EXPECT_EQ(ids, (std::set<std::uint64_t>{100, 101, 102, 103})) << "each receive taken once";
    EXPECT_EQ(srq_.outstanding().value(), 0U);
}

TEST_F(SrqEngineTest, AnEmptySrqIsReceiverNotReadyUntilTheApplicationPosts) {
    fill(*a_, 0, 32, 5);
    send_on(0, 0, 32);
    EXPECT_TRUE(wait(*a_, 1, std::chrono::milliseconds(200)).empty()) << "RNR NAKs meanwhile";
    EXPECT_GT(counter(*b_, "naks_sent"), 0U);
    post_srq(7, 65536, 64);
    const auto sent = wait(*a_, 1);
    ASSERT_EQ(sent.size(), 1U);
    EXPECT_EQ(sent[0].status, WcStatus::success);
    const auto received = wait(*b_, 1);
    ASSERT_EQ(received.size(), 1U);
    EXPECT_EQ(received[0].wr_id, 7U);
    EXPECT_EQ(std::memcmp(b_->data() + 65536, a_->data(), 32), 0);
}

TEST_F(SrqEngineTest, TheLimitEventFiresOncePerArming) {
    for (std::uint64_t i = 0; i < 5; ++i) {
        post_srq(i, 65536 + i * 1024, 1024);
    }
    ASSERT_TRUE(srq_.arm_limit(3).ok());
    EXPECT_EQ(srq_.limit().value(), 3U);
    EXPECT_EQ(srq_.arm_limit(9).code(), StatusCode::invalid_parameter) << "above max_wr";
    send_on(0, 0, 16); // 4 left: not below 3
    ASSERT_EQ(wait(*b_, 1).size(), 1U);
    EXPECT_TRUE(srq_events().empty());
    send_on(1, 0, 16); // 3 left
    send_on(0, 0, 16); // 2 left: below
    ASSERT_EQ(wait(*b_, 2).size(), 2U);
    const auto fired = srq_events();
    ASSERT_EQ(fired.size(), 1U);
    EXPECT_EQ(fired[0].srqn, srq_.srqn());
    EXPECT_EQ(srq_.limit().value(), 0U) << "disarmed once fired";
    send_on(1, 0, 16); // 1 left: not armed, no event
    ASSERT_EQ(wait(*b_, 1).size(), 1U);
    EXPECT_TRUE(srq_events().empty());
}

// A resize links a new ring behind the one posted to; the engine drains the old first. Twice
// before it gets there, so three rings are chained, and the receives go out in the order posted.
TEST_F(SrqEngineTest, AResizedSrqKeepsWhatItHeldAndGivesReceivesOutInOrder) {
    ASSERT_TRUE(b_->context.device_info().value().attr.capability_flags.has(cap_srq_resize));
    std::uint64_t next_id = 0;
    const auto post_many = [&](std::uint32_t count) {
        for (std::uint32_t i = 0; i < count; ++i, ++next_id) {
            post_srq(next_id, 65536 + next_id * 512, 512);
        }
    };
    const auto take = [&](std::uint32_t count) {
        for (std::uint32_t i = 0; i < count; ++i) {
            send_on(static_cast<int>(i % 2), 0, 300);
        }
        EXPECT_EQ(wait(*a_, count).size(), count);
        return wait(*b_, count);
    };
    fill(*a_, 0, 300, 4);
    post_many(8);
    auto received = take(2);
    ASSERT_EQ(received.size(), 2U);
    ASSERT_TRUE(srq_.resize(16).ok());
    EXPECT_EQ(srq_.caps().max_wr, 16U);
    EXPECT_EQ(srq_.outstanding().value(), 6U);
    post_many(10); // 16 held: the 6 left in the old ring count against the new one's 16
    RecvWr one;
    one.num_sge = 1;
    one.sge = {b_->addr(), 64, b_->mr.lkey()};
    EXPECT_EQ(post_srq_recv(srq_, {&one, 1}).reason, StatusCode::no_resources);
    ASSERT_TRUE(srq_.resize(40).ok());
    EXPECT_EQ(srq_.caps().max_wr, 64U) << "rounded up as at creation";
    post_many(20);
    EXPECT_EQ(srq_.outstanding().value(), 36U);
    // The limit counts every ring: 16 left after 20 more, spread over three rings, is not below
    // 10, though the oldest ring is empty by then.
    ASSERT_TRUE(srq_.arm_limit(10).ok());
    for (const WorkCompletion& wc : take(20)) {
        received.push_back(wc);
    }
    EXPECT_TRUE(srq_events().empty()) << "16 held";
    for (const WorkCompletion& wc : take(16)) {
        received.push_back(wc);
    }
    EXPECT_EQ(srq_events().size(), 1U);
    ASSERT_EQ(received.size(), 38U);
    std::map<std::uint32_t, std::vector<std::uint64_t>> per_qp;
    for (const WorkCompletion& wc : received) {
        ASSERT_EQ(wc.status, WcStatus::success) << wc_status_name(wc.status);
        EXPECT_EQ(std::memcmp(b_->data() + 65536 + wc.wr_id * 512, a_->data(), 300), 0)
            << "wr " << wc.wr_id;
        per_qp[wc.qpn].push_back(wc.wr_id);
    }
    std::set<std::uint64_t> ids;
    for (const auto& [qpn, taken] : per_qp) {
        EXPECT_TRUE(std::is_sorted(taken.begin(), taken.end())) << "QP " << qpn;
        ids.insert(taken.begin(), taken.end());
    }
    EXPECT_EQ(ids.size(), 38U) << "each receive taken once";
    EXPECT_EQ(*ids.rbegin(), 37U);
    EXPECT_EQ(srq_.outstanding().value(), 0U);
    // Empty now: it shrinks, and the rings drained are freed.
    ASSERT_TRUE(srq_.resize(4).ok());
    EXPECT_EQ(srq_.caps().max_wr, 4U);
    post_many(4);
    EXPECT_EQ(post_srq_recv(srq_, {&one, 1}).reason, StatusCode::no_resources);
    ASSERT_EQ(take(4).size(), 4U);
}

TEST_F(SrqEngineTest, AResizeThatWouldLoseWhatTheSrqHoldsIsRefused) {
    for (std::uint64_t i = 0; i < 6; ++i) {
        post_srq(i, 65536 + i * 1024, 1024);
    }
    EXPECT_EQ(srq_.resize(0).code(), StatusCode::invalid_parameter);
    EXPECT_EQ(srq_.resize(5).code(), StatusCode::invalid_parameter) << "6 held";
    EXPECT_EQ(srq_.resize(1U << 30).code(), StatusCode::invalid_parameter) << "beyond max_qp_wr";
    EXPECT_EQ(srq_.caps().max_wr, 8U) << "unchanged";
    ASSERT_TRUE(srq_.resize(7).ok());
    EXPECT_EQ(srq_.caps().max_wr, 8U) << "7 rounds up to the ring it has: no new ring";
    for (int i = 0; i < 4; ++i) {
        send_on(i % 2, 0, 16);
    }
    ASSERT_EQ(wait(*b_, 4).size(), 4U);
    // 2 held. The limit is checked against the size the SRQ gets (rounded up, as arm_limit's is
    // against the size it has), and with a new limit given, against that one.
    ASSERT_TRUE(srq_.arm_limit(7).ok());
    EXPECT_EQ(srq_.resize(3).code(), StatusCode::invalid_parameter) << "4 below the limit of 7";
    EXPECT_EQ(srq_.resize(2, 3).code(), StatusCode::invalid_parameter) << "2 below the new 3";
    EXPECT_EQ(srq_.caps().max_wr, 8U) << "nothing changed";
    EXPECT_EQ(srq_.limit().value(), 7U) << "nothing changed";
    ASSERT_TRUE(srq_.resize(3, 2).ok());
    EXPECT_EQ(srq_.caps().max_wr, 4U);
    EXPECT_EQ(srq_.limit().value(), 2U);
    EXPECT_EQ(srq_.outstanding().value(), 2U);
    // A limit of 4 fits the 4 the SRQ holds: asking for 3 again gets those 4, limit and all.
    ASSERT_TRUE(srq_.arm_limit(4).ok());
    ASSERT_TRUE(srq_.resize(3).ok());
    EXPECT_EQ(srq_.caps().max_wr, 4U);
    EXPECT_EQ(srq_.limit().value(), 4U);
}

TEST_F(SrqEngineTest, BadUseIsRefusedWithAReason) {
    RecvWr own;
    own.num_sge = 1;
    own.sge = {b_->addr(), 64, b_->mr.lkey()};
    const PostResult refused = post_recv(served_[0], {&own, 1});
    EXPECT_EQ(refused.posted, 0U);
    EXPECT_EQ(refused.reason, StatusCode::invalid_parameter) << "a QP on an SRQ posts there";

    std::array<Sge, 3> sges{};
    RecvWr many;
    many.num_sge = 3; // the SRQ takes 2
    many.sg_list = sges.data();
    EXPECT_EQ(post_srq_recv(srq_, {&many, 1}).reason, StatusCode::invalid_parameter);
    std::vector<RecvWr> full(9, own);
    const PostResult over = post_srq_recv(srq_, full);
    EXPECT_EQ(over.posted, 8U);
    EXPECT_EQ(over.reason, StatusCode::no_resources);

    EXPECT_EQ(b_->context.create_srq(b_->pd, {0, 1}).code(), StatusCode::invalid_parameter);
    EXPECT_EQ(b_->context.create_srq(b_->pd, {8, 1}, 5).code(), StatusCode::invalid_parameter);
    EXPECT_EQ(srq_.destroy().code(), StatusCode::busy) << "QPs use it";
    EXPECT_EQ(b_->context.close().code(), StatusCode::busy);
    served_[0] = {};
    served_[1] = {};
    EXPECT_TRUE(srq_.destroy().ok());
    EXPECT_EQ(b_->context.resources().srqs, 0U);
}

// An event the destroyed SRQ raised and nobody collected yet is not handed out as the event of
// an SRQ created after it: numbers are not given out again at once.
TEST_F(SrqEngineTest, ADestroyedSrqsEventNeverNamesItsSuccessor) {
    for (std::uint64_t i = 0; i < 2; ++i) {
        post_srq(i, 65536 + i * 1024, 1024);
    }
    ASSERT_TRUE(srq_.arm_limit(2).ok());
    send_on(0, 0, 16); // 1 left: below 2, the event is raised and not polled
    ASSERT_EQ(wait(*b_, 1).size(), 1U);
    const std::uint32_t old = srq_.srqn();
    served_[0] = {};
    served_[1] = {};
    ASSERT_TRUE(srq_.destroy().ok());
    auto next = b_->context.create_srq(b_->pd, {8, 1});
    ASSERT_TRUE(next.ok()) << next.error().to_string();
    EXPECT_NE(next.value().srqn(), old);
    for (const Event& event : srq_events()) {
        EXPECT_NE(event.srqn, next.value().srqn()) << "the old SRQ's event named the new one";
    }
}

TEST_F(SrqEngineTest, AQpThatFailsLeavesTheSrqToTheOthers) {
    // A QP's move to ERR flushes its own queues, not its SRQ's: the receives left there serve the
    // other QPs on it.
    post_srq(1, 65536, 8192);
    post_srq(2, 65536 + 8192, 8192);
    QpAttr err;
    err.state = QpState::err;
    fill(*a_, 0, 3000, 1);
    send_on(0, 0, 3000);
    ASSERT_EQ(wait(*b_, 1).size(), 1U) << "the SEND completes first";
    ASSERT_TRUE(served_[0].modify(err, qp_attr_state).ok());
    EXPECT_EQ(srq_.outstanding().value(), 1U) << "an SRQ is not flushed with its QPs";
    send_on(1, 0, 64);
    const auto other = wait(*b_, 1);
    ASSERT_EQ(other.size(), 1U);
    EXPECT_EQ(other[0].wr_id, 2U);
    EXPECT_EQ(other[0].status, WcStatus::success);
}

// ---- unreliable datagrams --------------------------------------------------------------------

constexpr std::uint32_t kUdQkey = 0x11111111; // ibv_ud_pingpong's

// A UD QP on the side's PD and CQ, taken to RTS with Q_Key kUdQkey (ibv_ud_pingpong's steps).
QueuePair make_ud_qp(Context& context, ProtectionDomain& pd, CompletionQueue& cq,
                     SharedReceiveQueue* srq = nullptr) {
    QpInitAttr init;
    init.pd = &pd;
    init.send_cq = &cq;
    init.recv_cq = &cq;
    init.srq = srq;
    init.type = QpType::ud;
    init.caps.max_send_wr = 64;
    init.caps.max_recv_wr = 64;
    init.caps.max_inline_data = 128;
    auto created = context.create_qp(init);
    EXPECT_TRUE(created.ok()) << created.error().to_string();
    QueuePair qp = std::move(created.value());
    QpAttr attr;
    attr.state = QpState::init;
    attr.port = 1;
    attr.qkey = kUdQkey;
    Status status = qp.modify(attr, qp_attr_state | qp_attr_port | qp_attr_qkey);
    EXPECT_TRUE(status.ok()) << status.error().to_string();
    attr.state = QpState::rtr;
    status = qp.modify(attr, qp_attr_state);
    EXPECT_TRUE(status.ok()) << status.error().to_string();
    attr.state = QpState::rts;
    attr.sq_psn = 7;
    status = qp.modify(attr, qp_attr_state | qp_attr_sq_psn);
    EXPECT_TRUE(status.ok()) << status.error().to_string();
    return qp;
}

// A UD QP on each side and an address handle on a towards b (its MAC given: no ARP).
class UdEngineTest : public PeerFrameTest {
protected:
    void SetUp() override {
        PeerFrameTest::SetUp();
        ud_a_ = make_ud_qp(a_->context, a_->pd, a_->cq);
        ud_b_ = make_ud_qp(b_->context, b_->pd, b_->cq);
        AhAttr attr;
        attr.dest_gid = pair_->gid_b();
        attr.dest_mac = mac_b_;
        auto ah = a_->pd.create_ah(attr);
        ASSERT_TRUE(ah.ok()) << ah.error().to_string();
        ah_to_b_ = std::move(ah.value());
        ASSERT_TRUE(ah_to_b_.ready());
    }
    void TearDown() override {
        ah_to_b_ = {};
        ud_a_ = {};
        ud_b_ = {};
        PeerFrameTest::TearDown();
    }
    void post_ud_receive(std::uint64_t wr_id, std::uint64_t offset, std::uint32_t length) {
        RecvWr wr = recv_wr(wr_id, {b_->addr() + offset, length, b_->mr.lkey()});
        ASSERT_EQ(post_recv(ud_b_, {&wr, 1}), 1);
    }
    SendWr datagram(std::uint64_t offset, std::uint32_t length) const {
        return ud_send_wr(55, {a_->addr() + offset, length, a_->mr.lkey()}, ah_to_b_, ud_b_.qpn(),
                          kUdQkey);
    }
    // A UD SEND from a's UD QP to b's, crafted (b alone is polled).
    roce::FrameHeaders ud_from_a(std::uint32_t qkey) const {
        roce::FrameHeaders h = from_a(roce::Opcode::ud_send_only, 3);
        h.bth.dest_qp = ud_b_.qpn();
        h.deth.qkey = qkey;
        h.deth.src_qp = ud_a_.qpn();
        return h;
    }

    QueuePair ud_a_;
    QueuePair ud_b_;
    AddressHandle ah_to_b_;

    // An AH to b at its GID alone: busy without a request id, pending with one until the
    // resolver finds b's MAC, then ready; a datagram sent through it arrives.
    void create_ah_without_a_mac() {
        AhAttr attr;
        attr.dest_gid = pair_->gid_b();
        const Context::Resources before = a_->context.resources();
        EXPECT_EQ(a_->pd.create_ah(attr).code(), StatusCode::busy);
        EXPECT_EQ(a_->context.resources().ahs, before.ahs) << "nothing kept of a busy creation";
        auto ah = a_->pd.create_ah(attr, 31);
        ASSERT_TRUE(ah.ok()) << ah.error().to_string();
        AddressHandle resolved = std::move(ah.value());
        EXPECT_FALSE(resolved.ready()) << "nobody has asked for b's MAC before";
        EXPECT_EQ(resolved.wr_handle(), nullptr) << "not usable while it pends";
        ControlCompletion done[8];
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
        std::optional<ControlCompletion> created;
        while (!resolved.ready() && !created && std::chrono::steady_clock::now() < deadline) {
            (void)b_->context.poll_control(done); // b answers the ARP request
            const std::size_t n = a_->context.poll_control(done);
            for (std::size_t i = 0; i < n; ++i) {
                if (done[i].request_id == 31) {
                    created = done[i];
                }
            }
        }
        if (created) {
            EXPECT_EQ(created->op, ControlOp::create_ah);
            EXPECT_EQ(created->status, StatusCode::ok) << created->message;
        }
        ASSERT_TRUE(resolved.ready());
        EXPECT_EQ(a_->context.resources().ahs, before.ahs + 1);
        auto again = a_->pd.create_ah(attr);
        ASSERT_TRUE(again.ok()) << "the MAC is known now: " << again.error().to_string();
        EXPECT_TRUE(again.value().ready());
        post_ud_receive(5, 0, 256);
        SendWr wr = ud_send_wr(5, {a_->addr(), 8, a_->mr.lkey()}, resolved, ud_b_.qpn(), kUdQkey);
        ASSERT_EQ(post_send(ud_a_, {&wr, 1}), 1);
        const auto got = wait(*b_, 1);
        ASSERT_EQ(got.size(), 1U);
        EXPECT_EQ(got[0].status, WcStatus::success);
    }
};

// What ibv_ud_pingpong reads: the payload 40 bytes into the receive, behind a GRH whose last 20
// bytes are the IPv4 header it came in; the sender's QPN and GID in the completion.
TEST_F(UdEngineTest, ADatagramArrivesBehindItsGrhWithTheSendersQpAndGid) {
    fill(*a_, 0, 1024, 11);
    std::memset(b_->data() + 65536, 0xee, 2048);
    post_ud_receive(9, 65536, 40 + 1024);
    SendWr wr = datagram(0, 1024); // the whole 1 KiB MTU
    wr.opcode = WrOpcode::send_with_imm;
    wr.imm_or_invalidate = 0xabcd1234;
    ASSERT_EQ(post_send(ud_a_, {&wr, 1}), 1);
    const auto sent = wait(*a_, 1);
    ASSERT_EQ(sent.size(), 1U);
    EXPECT_EQ(sent[0].status, WcStatus::success);
    EXPECT_EQ(sent[0].qpn, ud_a_.qpn());
    EXPECT_EQ(sent[0].byte_len, 1024U);
    const auto got = wait(*b_, 1);
    ASSERT_EQ(got.size(), 1U);
    const WorkCompletion& wc = got[0];
    ASSERT_EQ(wc.status, WcStatus::success) << wc_status_name(wc.status);
    EXPECT_EQ(wc.wr_id, 9U);
    EXPECT_EQ(wc.opcode, WcOpcode::recv);
    EXPECT_EQ(wc.qpn, ud_b_.qpn());
    EXPECT_EQ(wc.src_qpn, ud_a_.qpn());
    EXPECT_EQ(wc.byte_len, 40U + 1024U) << "byte_len counts the GRH, as verbs does";
    EXPECT_TRUE(wc.flags.has(wc_grh));
    EXPECT_TRUE(wc.flags.has(wc_with_imm));
    EXPECT_EQ(wc.imm_or_invalidated, 0xabcd1234U);
    EXPECT_EQ(wc.src_gid, pair_->gid_a());
    const std::uint8_t* grh = b_->data() + 65536;
    EXPECT_TRUE(std::all_of(grh, grh + 20, [](std::uint8_t b) { return b == 0; }));
    EXPECT_EQ(grh[20], 0x45) << "an IPv4 header without options";
    EXPECT_EQ(roce::load_be32(grh + 20 + 12), 0x0a000001U) << "source 10.0.0.1";
    EXPECT_EQ(roce::load_be32(grh + 20 + 16), 0x0a000002U) << "destination 10.0.0.2";
    EXPECT_EQ(std::memcmp(grh + 40, a_->data(), 1024), 0);
}

TEST_F(UdEngineTest, AWrongQkeyIsDroppedAndCounted) {
    post_ud_receive(1, 0, 256);
    const std::vector<std::uint8_t> payload(32, 0x5c);
    ASSERT_TRUE(inject(ud_from_a(kUdQkey + 1), payload));
    EXPECT_TRUE(poll_b().empty());
    EXPECT_EQ(counter(*b_, "rx_qkey_violations"), 1U);
    ASSERT_TRUE(inject(ud_from_a(kUdQkey), payload));
    const auto got = poll_b();
    ASSERT_EQ(got.size(), 1U) << "the receive was kept for the next datagram";
    EXPECT_EQ(got[0].status, WcStatus::success);
    EXPECT_EQ(got[0].byte_len, 72U);
    EXPECT_EQ(got[0].src_qpn, ud_a_.qpn()) << "from the DETH";
}

// IBTA 10.2.5: a WR's Q_Key with the high bit set is replaced by the sending QP's own.
TEST_F(UdEngineTest, AControlledQkeyIsSentAsTheQpsOwn) {
    post_ud_receive(1, 0, 256);
    SendWr wr = datagram(0, 16);
    wr.ud.remote_qkey = 0x80000000U;
    ASSERT_EQ(post_send(ud_a_, {&wr, 1}), 1);
    const auto got = wait(*b_, 1);
    ASSERT_EQ(got.size(), 1U) << "b's Q_Key is a's: the datagram is taken";
    EXPECT_EQ(got[0].status, WcStatus::success);
}

TEST_F(UdEngineTest, AMessageOverTheMtuOrNotASendIsRefusedAtPost) {
    SendWr big = datagram(0, 1025);
    const PostResult refused = post_send(ud_a_, {&big, 1});
    EXPECT_EQ(refused.posted, 0U);
    EXPECT_EQ(refused.reason, StatusCode::invalid_parameter) << "one packet of the 1 KiB MTU";
    SendWr write = datagram(0, 16);
    write.opcode = WrOpcode::rdma_write;
    EXPECT_EQ(post_send(ud_a_, {&write, 1}).reason, StatusCode::invalid_parameter);
    SendWr no_ah = datagram(0, 16);
    no_ah.ud.ah = nullptr;
    EXPECT_EQ(post_send(ud_a_, {&no_ah, 1}).reason, StatusCode::invalid_parameter);
    EXPECT_EQ(ud_a_.state(), QpState::rts) << "a refused post changes nothing";
}

TEST_F(UdEngineTest, AReceiveTooShortCompletesInErrorAndTheQpGoesOn) {
    post_ud_receive(1, 0, 40 + 16);
    SendWr wr = datagram(0, 64);
    ASSERT_EQ(post_send(ud_a_, {&wr, 1}), 1);
    const auto short_one = wait(*b_, 1);
    ASSERT_EQ(short_one.size(), 1U);
    EXPECT_EQ(short_one[0].status, WcStatus::local_length_error);
    EXPECT_EQ(counter(*b_, "rx_ud_too_long"), 1U);
    EXPECT_EQ(ud_b_.state(), QpState::rts);
    post_ud_receive(2, 4096, 40 + 64);
    ASSERT_EQ(post_send(ud_a_, {&wr, 1}), 1);
    const auto next = wait(*b_, 1);
    ASSERT_EQ(next.size(), 1U);
    EXPECT_EQ(next[0].status, WcStatus::success);
    EXPECT_EQ(next[0].wr_id, 2U);
}

TEST_F(UdEngineTest, WithoutAReceiveTheDatagramIsDroppedNotWaitedFor) {
    SendWr wr = datagram(0, 64);
    ASSERT_EQ(post_send(ud_a_, {&wr, 1}), 1);
    const auto sent = wait(*a_, 1);
    ASSERT_EQ(sent.size(), 1U);
    EXPECT_EQ(sent[0].status, WcStatus::success) << "a datagram completes once sent";
    (void)poll_b();
    EXPECT_EQ(counter(*b_, "rx_ud_dropped"), 1U);
    EXPECT_EQ(counter(*b_, "naks_sent"), 0U);
    post_ud_receive(3, 0, 256);
    ASSERT_EQ(post_send(ud_a_, {&wr, 1}), 1);
    ASSERT_EQ(wait(*b_, 1).size(), 1U);
}

// perftest's `-c UD --use-srq`: a UD QP on an SRQ takes each datagram's receive from it, and a
// datagram that finds the SRQ empty is dropped, as one that finds a QP's own queue empty.
TEST_F(UdEngineTest, AUdQpOnAnSrqTakesItsReceivesFromIt) {
    auto created = b_->context.create_srq(b_->pd, {8, 1});
    ASSERT_TRUE(created.ok()) << created.error().to_string();
    SharedReceiveQueue srq = std::move(created.value());
    QueuePair on_srq = make_ud_qp(b_->context, b_->pd, b_->cq, &srq);
    fill(*a_, 0, 64, 21);
    const SendWr wr =
        ud_send_wr(56, {a_->addr(), 64, a_->mr.lkey()}, ah_to_b_, on_srq.qpn(), kUdQkey);
    ASSERT_EQ(post_send(ud_a_, {&wr, 1}), 1);
    ASSERT_EQ(wait(*a_, 1).size(), 1U);
    EXPECT_TRUE(poll_b().empty());
    EXPECT_EQ(counter(*b_, "rx_ud_dropped"), 1U) << "the SRQ was empty";
    for (std::uint64_t i = 0; i < 2; ++i) {
        RecvWr recv = recv_wr(70 + i, {b_->addr() + 65536 + i * 4096, 40 + 64, b_->mr.lkey()});
        ASSERT_EQ(post_srq_recv(srq, {&recv, 1}), 1);
    }
    const SendWr two[2] = {wr, wr};
    ASSERT_EQ(post_send(ud_a_, {two, 2}), 2);
    const auto got = wait(*b_, 2);
    ASSERT_EQ(got.size(), 2U);
    for (std::uint64_t i = 0; i < 2; ++i) {
        ASSERT_EQ(got[i].status, WcStatus::success) << wc_status_name(got[i].status);
        EXPECT_EQ(got[i].wr_id, 70 + i);
        EXPECT_EQ(got[i].qpn, on_srq.qpn());
        EXPECT_EQ(got[i].src_qpn, ud_a_.qpn());
        EXPECT_EQ(got[i].byte_len, 40U + 64U);
        EXPECT_TRUE(got[i].flags.has(wc_grh));
        EXPECT_EQ(std::memcmp(b_->data() + 65536 + i * 4096 + 40, a_->data(), 64), 0);
    }
    EXPECT_EQ(srq.outstanding().value(), 0U);

    // A receive too short takes one WQE, completes in error, and the next datagram gets the
    // next WQE; the limit armed fires at the take that leaves fewer.
    RecvWr short_one = recv_wr(80, {b_->addr() + 65536, 40 + 16, b_->mr.lkey()});
    RecvWr fits = recv_wr(81, {b_->addr() + 69632, 40 + 64, b_->mr.lkey()});
    ASSERT_EQ(post_srq_recv(srq, {&short_one, 1}), 1);
    ASSERT_EQ(post_srq_recv(srq, {&fits, 1}), 1);
    ASSERT_TRUE(srq.arm_limit(2).ok());
    ASSERT_EQ(post_send(ud_a_, {two, 2}), 2);
    const auto next = wait(*b_, 2);
    ASSERT_EQ(next.size(), 2U);
    EXPECT_EQ(next[0].wr_id, 80U);
    EXPECT_EQ(next[0].status, WcStatus::local_length_error) << wc_status_name(next[0].status);
    EXPECT_EQ(next[1].wr_id, 81U);
    EXPECT_EQ(next[1].status, WcStatus::success) << wc_status_name(next[1].status);
    EXPECT_EQ(counter(*b_, "rx_ud_too_long"), 1U);
    std::array<Event, 16> events{};
    const std::size_t n = b_->context.poll_events(events);
    EXPECT_TRUE(std::any_of(
        events.begin(), events.begin() + static_cast<std::ptrdiff_t>(n), [&srq](const Event& e) {
            return e.type == EventType::srq_limit_reached && e.srqn == srq.srqn();
        }));

    // In ERR the QP's last WQE is reached; the SRQ keeps what it holds for its other QPs.
    RecvWr kept = recv_wr(82, {b_->addr() + 65536, 256, b_->mr.lkey()});
    ASSERT_EQ(post_srq_recv(srq, {&kept, 1}), 1);
    QpAttr err;
    err.state = QpState::err;
    ASSERT_TRUE(on_srq.modify(err, qp_attr_state).ok());
    (void)poll_b();
    const std::size_t m = b_->context.poll_events(events);
    EXPECT_TRUE(std::any_of(
        events.begin(), events.begin() + static_cast<std::ptrdiff_t>(m), [&on_srq](const Event& e) {
            return e.type == EventType::qp_last_wqe_reached && e.qpn == on_srq.qpn();
        }));
    EXPECT_EQ(srq.outstanding().value(), 1U);
    on_srq = {};
}

TEST_F(UdEngineTest, RcAndUdPacketsReachOnlyTheirOwnKindOfQp) {
    post_ud_receive(1, 0, 256);
    post_receive(*b_, 2, 4096, 256);
    roce::FrameHeaders rc_to_ud = from_a(roce::Opcode::rc_send_only, 1000);
    rc_to_ud.bth.dest_qp = ud_b_.qpn();
    ASSERT_TRUE(inject(rc_to_ud, std::vector<std::uint8_t>(16)));
    roce::FrameHeaders ud_to_rc = ud_from_a(kUdQkey);
    ud_to_rc.bth.dest_qp = b_->qp.qpn();
    ASSERT_TRUE(inject(ud_to_rc, std::vector<std::uint8_t>(16)));
    EXPECT_TRUE(poll_b().empty());
    EXPECT_EQ(counter(*b_, "rx_wrong_transport"), 2U);
}

// The AH's PD must be the QP's; a post copies the destination, so the AH may go right after it;
// and the PD is busy while an AH on it lives.
TEST_F(UdEngineTest, AnAhServesItsOwnPdAndMayGoOnceThePostReturns) {
    auto other_pd = a_->context.alloc_pd();
    ASSERT_TRUE(other_pd.ok());
    AhAttr attr = ah_to_b_.attr();
    auto foreign = other_pd.value().create_ah(attr);
    ASSERT_TRUE(foreign.ok()) << foreign.error().to_string();
    SendWr wrong =
        ud_send_wr(1, {a_->addr(), 16, a_->mr.lkey()}, foreign.value(), ud_b_.qpn(), kUdQkey);
    EXPECT_EQ(post_send(ud_a_, {&wrong, 1}).reason, StatusCode::invalid_parameter);
    EXPECT_EQ(other_pd.value().destroy().code(), StatusCode::busy) << "an AH lives on it";
    EXPECT_TRUE(foreign.value().destroy().ok());
    EXPECT_TRUE(other_pd.value().destroy().ok());

    post_ud_receive(4, 0, 256);
    fill(*a_, 0, 48, 3);
    SendWr wr = datagram(0, 48);
    ASSERT_EQ(post_send(ud_a_, {&wr, 1}), 1);
    ASSERT_TRUE(ah_to_b_.destroy().ok());
    const auto got = wait(*b_, 1);
    ASSERT_EQ(got.size(), 1U);
    EXPECT_EQ(got[0].status, WcStatus::success);
    EXPECT_EQ(std::memcmp(b_->data() + 40, a_->data(), 48), 0);
}

// Without a request id the caller cannot wait: busy, with the resolution started for its next
// call. With one the creation pends until ARP answers.
TEST_F(UdEngineTest, AnAhWithoutAMacIsResolvedWithArp) {
    create_ah_without_a_mac();
    EXPECT_GE(counter(*a_, "arp_requests_sent"), 1U);
}

// The same on IPv6 devices: neighbour discovery finds b's MAC.
class Ipv6UdQpTest : public UdEngineTest {
protected:
    bool ipv6() const override { return true; }
};

TEST_F(Ipv6UdQpTest, AnAhWithoutAMacIsResolvedWithNeighbourDiscovery) {
    create_ah_without_a_mac();
    EXPECT_GE(counter(*a_, "nd_solicitations_sent"), 1U);
    EXPECT_GE(counter(*b_, "nd_advertisements_sent"), 1U);
}

TEST_F(UdEngineTest, AnAhToAnAddressOfTheOtherFamilyOrGidIndexIsRefused) {
    AhAttr v6;
    v6.dest_gid.raw[0] = 0xfd;
    v6.dest_gid.raw[15] = 2;
    v6.dest_mac = mac_b_;
    EXPECT_EQ(a_->pd.create_ah(v6).code(), StatusCode::invalid_parameter);
    AhAttr index = ah_to_b_.attr();
    index.sgid_index = 1;
    EXPECT_EQ(a_->pd.create_ah(index).code(), StatusCode::invalid_parameter);
}

TEST_F(UdEngineTest, ABadLkeyFailsTheSendAndTheQp) {
    SendWr wr = datagram(0, 16);
    wr.sge.lkey ^= 0x100;
    ASSERT_EQ(post_send(ud_a_, {&wr, 1}), 1);
    const auto sent = wait(*a_, 1);
    ASSERT_EQ(sent.size(), 1U);
    EXPECT_EQ(sent[0].status, WcStatus::local_protection_error);
    EXPECT_EQ(ud_a_.state(), QpState::err);
}

TEST_F(UdEngineTest, UdTransitionsTakeAQkeyAndNoPeer) {
    QpInitAttr init;
    init.pd = &b_->pd;
    init.send_cq = &b_->cq;
    init.recv_cq = &b_->cq;
    init.type = QpType::ud;
    QueuePair qp = std::move(b_->context.create_qp(init).value());
    QpAttr attr;
    attr.state = QpState::init;
    EXPECT_EQ(qp.modify(attr, qp_attr_state | qp_attr_port).code(), StatusCode::invalid_parameter)
        << "RESET -> INIT needs the Q_Key";
    attr.qkey = 0x1234;
    ASSERT_TRUE(qp.modify(attr, qp_attr_state | qp_attr_port | qp_attr_qkey).ok());
    attr.state = QpState::rtr;
    EXPECT_EQ(qp.modify(attr, qp_attr_state | qp_attr_dest_qpn).code(),
              StatusCode::invalid_parameter)
        << "a UD QP has no destination QP";
    ASSERT_TRUE(qp.modify(attr, qp_attr_state).ok());
    EXPECT_EQ(qp.attributes().value().qkey, 0x1234U);
}

// Over IPv6 the GRH is the datagram's own 40-byte IPv6 header.
class Ipv6UdEngineTest : public EngineTest {
protected:
    bool ipv6() const override { return true; }
};

TEST_F(Ipv6UdEngineTest, TheGrhIsTheIpv6HeaderTheDatagramCameIn) {
    QueuePair ud_a = make_ud_qp(a_->context, a_->pd, a_->cq);
    QueuePair ud_b = make_ud_qp(b_->context, b_->pd, b_->cq);
    AhAttr attr;
    attr.dest_gid = pair_->gid_b();
    attr.dest_mac = port_mac(*b_);
    attr.hop_limit = 17;
    attr.traffic_class = 0x28;
    AddressHandle ah = std::move(a_->pd.create_ah(attr).value());
    fill(*a_, 0, 100, 3);
    RecvWr recv = recv_wr(1, {b_->addr(), 256, b_->mr.lkey()});
    ASSERT_EQ(post_recv(ud_b, {&recv, 1}), 1);
    SendWr wr = ud_send_wr(1, {a_->addr(), 100, a_->mr.lkey()}, ah, ud_b.qpn(), kUdQkey);
    ASSERT_EQ(post_send(ud_a, {&wr, 1}), 1);
    const auto done = wait(*b_, 1);
    ASSERT_EQ(done.size(), 1U);
    ASSERT_EQ(done[0].status, WcStatus::success) << wc_status_name(done[0].status);
    EXPECT_EQ(done[0].byte_len, 140U);
    EXPECT_EQ(done[0].src_gid, pair_->gid_a());
    const std::uint8_t* grh = b_->data();
    EXPECT_EQ(grh[0] >> 4, 6) << "IP version 6";
    EXPECT_EQ(((grh[0] & 0x0f) << 4) | (grh[1] >> 4), 0x28) << "the AH's traffic class";
    EXPECT_EQ(grh[7], 17) << "the AH's hop limit";
    EXPECT_TRUE(std::equal(grh + 8, grh + 24, pair_->gid_a().raw.begin()));
    EXPECT_TRUE(std::equal(grh + 24, grh + 40, pair_->gid_b().raw.begin()));
    EXPECT_EQ(std::memcmp(grh + 40, a_->data(), 100), 0);
}

class UdWireCaptureTest : public WireCaptureTest {};

// The datagrams swroce sends decode in tshark with a valid ICRC, DETH and all.
TEST_F(UdWireCaptureTest, DatagramsDecodeWithAValidIcrc) {
    QueuePair ud_a = make_ud_qp(a_->context, a_->pd, a_->cq);
    QueuePair ud_b = make_ud_qp(b_->context, b_->pd, b_->cq);
    AhAttr attr;
    attr.dest_gid = pair_->gid_b();
    attr.dest_mac = port_mac(*b_);
    AddressHandle ah = std::move(a_->pd.create_ah(attr).value());
    fill(*a_, 0, 1024, 7);
    RecvWr recv = recv_wr(1, {b_->addr(), 2048, b_->mr.lkey()});
    ASSERT_EQ(post_recv(ud_b, {&recv, 1}), 1);
    SendWr plain = ud_send_wr(1, {a_->addr(), 1000, a_->mr.lkey()}, ah, ud_b.qpn(), kUdQkey);
    SendWr imm = ud_send_wr(2, {a_->addr(), 3, a_->mr.lkey()}, ah, ud_b.qpn(), kUdQkey);
    imm.opcode = WrOpcode::send_with_imm;
    ASSERT_EQ(post_send(ud_a, {&plain, 1}), 1);
    ASSERT_EQ(post_send(ud_a, {&imm, 1}), 1);
    ASSERT_EQ(wait(*a_, 2).size(), 2U);
    ASSERT_EQ(wait(*b_, 1).size(), 1U);
    const auto frames = read_pcapng(capture_path());
    std::set<roce::Opcode> opcodes;
    for (const auto& frame : frames) {
        const roce::ParsedFrame parsed = roce::parse_roce_frame(frame);
        ASSERT_TRUE(parsed.ok()) << roce::parse_error_name(parsed.error);
        if (parsed.info->transport != roce::Transport::ud) {
            continue;
        }
        opcodes.insert(parsed.opcode());
        EXPECT_EQ(parsed.deth.qkey, kUdQkey);
        EXPECT_EQ(parsed.deth.src_qp, ud_a.qpn());
        EXPECT_EQ(parsed.bth.dest_qp, ud_b.qpn());
        EXPECT_FALSE(parsed.bth.ack_req);
    }
    EXPECT_EQ(opcodes, (std::set<roce::Opcode>{roce::Opcode::ud_send_only,
                                               roce::Opcode::ud_send_only_with_immediate}));
    const char* checker = std::getenv("PRDMA_CHECK_INFINIBAND");
    ASSERT_NE(checker, nullptr);
    const std::string command = std::string(checker) + " --min-frames 2 " + capture_path();
    EXPECT_EQ(std::system(command.c_str()), 0) << command;
}

} // namespace
} // namespace prdma::rdma
