// swroce's fault rates changed at run time (include/prdma/swroce/swroce.hpp): read back from the
// devargs, replaced, refused out of range or for a device that is not swroce, and in effect for
// the traffic that follows (WRITEs still complete, the drops show in the counters and in the
// sending QP's status). Two devices on crossed ring ports, real EAL, one thread (so the rule "no
// lcore inside a burst" holds).
#include <array>
#include <chrono>
#include <cmath>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include <prdma/mem/dma_memory.hpp>
#include <prdma/rdmadev/fastpath.hpp>
#include <prdma/rdmadev/rdmadev.hpp>
#include <prdma/swroce/swroce.hpp>

#include "../rdmadev/device_pair.hpp"
#include "eal_environment.hpp"

namespace prdma::rdma {
namespace {

const auto* const g_environment =
    test_support::add_eal_environment("swroce_runtime_faults_test", {"--log-level=prdma.*:error"});

constexpr std::size_t buffer_size = 1 << 16;

struct Side {
    Context context;
    ProtectionDomain pd;
    CompletionQueue cq;
    QueuePair qp;
    mem::DmaBuffer buffer;
    MemoryRegionHandle mr;
};

std::unique_ptr<Side> make_side(DeviceId device) {
    auto side =
        std::make_unique<Side>(Side{std::move(Context::open(device).value()),
                                    {},
                                    {},
                                    {},
                                    std::move(mem::DmaBuffer::allocate(buffer_size, 4096).value()),
                                    {}});
    side->pd = std::move(side->context.alloc_pd().value());
    side->cq = std::move(side->context.create_cq(256).value());
    side->qp = std::move(
        side->context.create_qp({.pd = &side->pd, .send_cq = &side->cq, .recv_cq = &side->cq})
            .value());
    side->mr = std::move(side->pd
                             .register_memory(side->buffer.data(), buffer_size,
                                              mem::access_local_write | mem::access_remote_write)
                             .value());
    return side;
}

void connect(Side& local, const Side& remote) {
    std::array<std::uint8_t, sizeof(ConnectionDescriptor)> wire{};
    auto length = static_cast<std::uint32_t>(wire.size());
    ASSERT_TRUE(remote.qp.export_connection(nullptr, wire.data(), &length).ok());
    ConnectOptions options;
    options.timeout = 8; // ~1 ms: the drops below are recovered quickly
    const Status connected =
        local.qp.connect(import_connection(wire.data(), length).value(), options);
    ASSERT_TRUE(connected.ok()) << connected.error().to_string();
}

std::uint64_t counter(const Side& side, const std::string& name) {
    Result<std::vector<Counter>> counters = side.context.query_stats();
    EXPECT_TRUE(counters.ok());
    if (!counters.ok()) {
        return 0;
    }
    for (const Counter& c : *counters) {
        if (c.name == name) {
            return c.value;
        }
    }
    return 0;
}

class RuntimeFaults : public ::testing::Test {
protected:
    void SetUp() override {
        pair_ =
            conformance::swroce_factory({.extra_a = ",rx_drop=0.01,tx_corrupt=0.02", .extra_b = ""})
                .make();
    }
    std::unique_ptr<conformance::DevicePair> pair_;
};

TEST_F(RuntimeFaults, TheRatesStartAsTheDevargsSayAndAreReplaced) {
    Result<swroce::DeviceFaults> before = swroce::get_faults(pair_->a());
    ASSERT_TRUE(before.ok()) << before.error().to_string();
    EXPECT_EQ(before->rx.drop, 0.01);
    EXPECT_EQ(before->tx.corrupt, 0.02);
    EXPECT_EQ(before->tx.drop, 0.0);

    const swroce::DeviceFaults wanted{.rx = {.drop = 0.1, .reorder = 0.2},
                                      .tx = {.duplicate = 0.3, .delay = 0.4}};
    ASSERT_TRUE(swroce::set_faults(pair_->a(), wanted).ok());
    const swroce::DeviceFaults after = swroce::get_faults(pair_->a()).value();
    EXPECT_EQ(after.rx.drop, 0.1);
    EXPECT_EQ(after.rx.reorder, 0.2);
    EXPECT_EQ(after.tx.duplicate, 0.3);
    EXPECT_EQ(after.tx.delay, 0.4);
    EXPECT_EQ(after.tx.corrupt, 0.0);
}

TEST_F(RuntimeFaults, ARateOutsideZeroToOneIsRefusedAndChangesNothing) {
    for (const double bad : {1.0, -0.1, std::nan("")}) {
        const Status refused = swroce::set_faults(pair_->a(), {.rx = {}, .tx = {.drop = bad}});
        ASSERT_FALSE(refused.ok());
        EXPECT_EQ(refused.code(), StatusCode::invalid_parameter);
        EXPECT_NE(refused.error().message().find("tx_drop="), std::string::npos)
            << refused.error().message();
    }
    EXPECT_EQ(swroce::get_faults(pair_->a()).value().rx.drop, 0.01);
}

TEST_F(RuntimeFaults, ADeviceThatIsNotSwroceIsNotSupported) {
    for (const DeviceId other : {DeviceId{200}, invalid_device}) {
        EXPECT_EQ(swroce::get_faults(other).code(), StatusCode::not_supported);
        EXPECT_EQ(swroce::set_faults(other, {}).code(), StatusCode::not_supported);
    }
}

TEST_F(RuntimeFaults, DropsSetAtRunTimeAreInjectedAndRecovered) {
    auto a = make_side(pair_->a());
    auto b = make_side(pair_->b());
    connect(*a, *b);
    connect(*b, *a);
    ASSERT_TRUE(swroce::set_faults(pair_->a(), {}).ok());
    ASSERT_TRUE(swroce::set_faults(pair_->b(), {.rx = {.drop = 0.3}, .tx = {}}).ok());
    constexpr int writes = 64;
    int done = 0;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    for (int posted = 0; done < writes && std::chrono::steady_clock::now() < deadline;) {
        if (posted == done) {
            SendWr wr;
            wr.opcode = WrOpcode::rdma_write;
            wr.flags = send_signaled;
            wr.num_sge = 1;
            wr.sge = {reinterpret_cast<std::uint64_t>(a->buffer.data()), 4096, a->mr.lkey()};
            wr.rdma = {.remote_addr = reinterpret_cast<std::uint64_t>(b->buffer.data()),
                       .rkey = b->mr.rkey()};
            ASSERT_EQ(post_send(a->qp, {&wr, 1}), 1);
            ++posted;
        }
        std::array<WorkCompletion, 4> wc;
        const std::uint16_t n = poll_cq(a->cq, wc);
        for (std::uint16_t i = 0; i < n; ++i) {
            ASSERT_EQ(wc[i].status, WcStatus::success) << wc_status_name(wc[i].status);
        }
        done += n;
        (void)poll_cq(b->cq, wc);
    }
    EXPECT_EQ(done, writes);
    EXPECT_GT(counter(*b, "rx_dropped_injected"), 0U);
    EXPECT_GT(counter(*a, "retransmissions"), 0U);
    EXPECT_EQ(counter(*a, "rx_dropped_injected"), 0U); // a's devargs drop was replaced by none

    // The one QP on each device carries all of its device's retransmissions.
    const Result<QpStatus> sender = a->qp.query_status();
    ASSERT_TRUE(sender.ok()) << sender.error().to_string();
    EXPECT_EQ(sender->qpn, a->qp.qpn());
    EXPECT_EQ(sender->dest_qpn, b->qp.qpn());
    EXPECT_EQ(sender->state, QpState::rts);
    EXPECT_EQ(sender->outstanding, 0U);
    EXPECT_EQ(sender->retransmissions, counter(*a, "retransmissions"));
    EXPECT_GT(sender->retransmissions, 0U);
    const Result<QpStatus> receiver = b->qp.query_status();
    ASSERT_TRUE(receiver.ok());
    EXPECT_EQ(receiver->expected_psn, (sender->acked_psn + 1) & 0xffffffU);
    EXPECT_EQ(receiver->retransmissions, 0U);
    EXPECT_EQ(QueuePair{}.query_status().code(), StatusCode::invalid_parameter);
}

} // namespace
} // namespace prdma::rdma
