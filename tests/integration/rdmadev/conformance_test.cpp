// The rdmadev conformance suite: what every driver must do, written against the public API only
// and run once per driver factory (DevicePair). Seed 003's status paths, object lifetimes, the QP
// state machine on a real device, the pending control paths (also with a queue group polled by
// another thread), asynchronous events, and device removal.
#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <rte_cycles.h>

#include <prdma/eal.hpp>
#include <prdma/format.hpp>
#include <prdma/mem/dma_memory.hpp>
#include <prdma/rdmadev/fastpath.hpp>
#include <prdma/rdmadev/rdmadev.hpp>

#include "device_pair.hpp"
#include "eal_environment.hpp"

namespace prdma::rdma::conformance {

namespace {

const auto* const g_environment =
    prdma::test_support::add_eal_environment("rdmadev_conformance", {"--log-level=prdma.*:error"});

// A thread that polls one CQ, and so owns its queue group from its first poll on, as an
// application's polling lcore does. The group's fast path is the owner's: posts are handed to it
// with run(). It keeps polling (driving the group, running what the device hands its owner) until
// stop(), then destroys its own CQ (the owner may) and ends.
class GroupOwner {
public:
    explicit GroupOwner(CompletionQueue cq) : cq_(std::move(cq)) {
        thread_ = std::thread([this] { loop(); });
        while (!polling_.load()) {
            std::this_thread::yield();
        }
    }
    GroupOwner(const GroupOwner&) = delete;
    GroupOwner& operator=(const GroupOwner&) = delete;
    GroupOwner(GroupOwner&&) = delete;
    GroupOwner& operator=(GroupOwner&&) = delete;
    ~GroupOwner() { stop(); }

    // For QpInitAttr only: nobody else polls it.
    CompletionQueue& cq() { return cq_; }
    // Runs `work` on the owner thread between two polls and returns once it has run.
    void run(std::function<void()> work) {
        {
            const std::lock_guard lock(mutex_);
            work_ = std::move(work);
        }
        for (;;) {
            {
                const std::lock_guard lock(mutex_);
                if (!work_) {
                    return;
                }
            }
            std::this_thread::yield();
        }
    }
    std::vector<WorkCompletion> completions() {
        const std::lock_guard lock(mutex_);
        return done_;
    }
    void stop() {
        if (thread_.joinable()) {
            stop_ = true;
            thread_.join();
        }
    }
    [[nodiscard]] bool released() const { return released_; }

private:
    void loop() {
        WorkCompletion wc[16];
        while (!stop_.load()) {
            const std::uint16_t n = poll_cq(cq_, {wc, 16});
            polling_ = true;
            const std::lock_guard lock(mutex_);
            done_.insert(done_.end(), wc, wc + n);
            if (work_) {
                work_();
                work_ = nullptr;
            }
        }
        released_ = cq_.destroy().ok();
    }

    CompletionQueue cq_;
    std::atomic<bool> stop_{false};
    std::atomic<bool> polling_{false};
    std::mutex mutex_;
    std::function<void()> work_;
    std::vector<WorkCompletion> done_;
    bool released_ = false;
    std::thread thread_;
};

class Conformance : public ::testing::TestWithParam<DriverFactory> {
protected:
    void SetUp() override {
        pair_ = GetParam().make();
        ASSERT_NE(pair_->a(), invalid_device);
        ASSERT_NE(pair_->b(), invalid_device);
    }
    void TearDown() override { pair_.reset(); }

    Context open(DeviceId device) {
        auto context = Context::open(device);
        EXPECT_TRUE(context.ok()) << context.error().to_string();
        return std::move(context.value());
    }

    // Polls both contexts until `context` reports a completion or `timeout` passes.
    std::optional<ControlCompletion> wait_control(Context& context, Context& peer,
                                                  std::chrono::milliseconds timeout) {
        const auto deadline = std::chrono::steady_clock::now() + timeout;
        std::vector<ControlCompletion> done(4);
        while (std::chrono::steady_clock::now() < deadline) {
            std::vector<ControlCompletion> peer_done(4);
            (void)peer.poll_control(peer_done);
            if (context.poll_control({done.data(), 1}) == 1) {
                return done[0];
            }
            std::this_thread::sleep_for(std::chrono::microseconds(200));
        }
        return std::nullopt;
    }

    // For a request that may pend: ok (nothing to wait for), or pending and then its completion,
    // which must name `request_id` and `op` and say ok. `must_pend`: the driver is known to pend
    // here (DevicePair::owned_group_pends), so finishing at once is wrong too.
    ::testing::AssertionResult completes(Context& context, Context& peer, const Status& status,
                                         std::uint64_t request_id, ControlOp op, bool must_pend,
                                         ControlCompletion* out = nullptr) {
        if (status.ok()) {
            if (must_pend) {
                return ::testing::AssertionFailure()
                       << control_op_name(op) << " finished at once; this driver must pend here";
            }
            return ::testing::AssertionSuccess();
        }
        if (status.code() != StatusCode::pending) {
            return ::testing::AssertionFailure() << status.error().to_string();
        }
        const auto done = wait_control(context, peer, std::chrono::seconds(5));
        if (!done) {
            return ::testing::AssertionFailure() << "request " << request_id << " ("
                                                 << control_op_name(op) << ") never completed";
        }
        if (done->request_id != request_id || done->op != op || done->status != StatusCode::ok) {
            return ::testing::AssertionFailure()
                   << "completion " << done->request_id << " " << control_op_name(done->op) << " "
                   << status_name(done->status) << " (" << done->message << "), expected "
                   << request_id << " " << control_op_name(op) << " ok";
        }
        if (out != nullptr) {
            *out = *done;
        }
        return ::testing::AssertionSuccess();
    }

    // The peer's port MAC, so an RTR needs no address resolution.
    std::array<std::uint8_t, 6> mac_of(Context& context) {
        std::vector<std::uint8_t> buffer(512);
        std::uint32_t got = static_cast<std::uint32_t>(buffer.size());
        EXPECT_TRUE(context.query_port(1, buffer.data(), &got).ok());
        PortAttr port;
        std::memcpy(&port, buffer.data(), sizeof(port));
        std::array<std::uint8_t, 6> mac{};
        std::memcpy(mac.data(), port.mac, mac.size());
        return mac;
    }
    static constexpr QpAttrMask init_mask = qp_attr_state | qp_attr_port | qp_attr_access_flags;
    static QpAttr init_attr() {
        QpAttr attr;
        attr.state = QpState::init;
        attr.port = 1;
        attr.access = mem::access_remote_write | mem::access_remote_read;
        return attr;
    }
    // RTS with a short transport timer (4.096 us x 2^8 ~ 1 ms) and one retry: a silent peer
    // makes the QP fail in a few milliseconds.
    static constexpr QpAttrMask rts_mask = qp_attr_state | qp_attr_sq_psn | qp_attr_timeout |
                                           qp_attr_retry_cnt | qp_attr_rnr_retry |
                                           qp_attr_max_rd_atomic;
    static QpAttr quick_rts_attr() {
        QpAttr attr;
        attr.state = QpState::rts;
        attr.sq_psn = 200;
        attr.timeout = 8;
        attr.retry_cnt = 1;
        attr.rnr_retry = 0;
        attr.max_rd_atomic = 1;
        return attr;
    }

    struct Objects {
        ProtectionDomain pd;
        CompletionQueue cq;
        QueuePair qp;
    };
    Objects make_qp(Context& context) {
        Objects objects;
        objects.pd = std::move(context.alloc_pd().value());
        objects.cq = std::move(context.create_cq(256).value());
        QpInitAttr init;
        init.pd = &objects.pd;
        init.send_cq = &objects.cq;
        init.recv_cq = &objects.cq;
        auto qp = context.create_qp(init);
        EXPECT_TRUE(qp.ok()) << qp.error().to_string();
        objects.qp = std::move(qp.value());
        return objects;
    }
    static Status to_init(QueuePair& qp) {
        QpAttr attr;
        attr.state = QpState::init;
        attr.port = 1;
        attr.access = mem::access_remote_write | mem::access_remote_read;
        return qp.modify(attr, qp_attr_state | qp_attr_port | qp_attr_access_flags);
    }
    static QpAttr rtr_attr(const Gid& gid, std::uint32_t dest_qpn) {
        QpAttr attr;
        attr.state = QpState::rtr;
        attr.path_mtu = Mtu::mtu_1024;
        attr.dest_gid = gid;
        attr.dest_qpn = dest_qpn;
        attr.rq_psn = 100;
        attr.max_dest_rd_atomic = 1;
        attr.min_rnr_timer = 12;
        return attr;
    }
    static constexpr QpAttrMask rtr_mask = qp_attr_state | qp_attr_path_mtu | qp_attr_dest |
                                           qp_attr_dest_qpn | qp_attr_rq_psn |
                                           qp_attr_max_dest_rd_atomic | qp_attr_min_rnr_timer;

    std::unique_ptr<DevicePair> pair_;
};

// ---- devices ------------------------------------------------------------------------------------

TEST_P(Conformance, DevicesAreListedAndFoundByName) {
    const auto ids = device_list();
    EXPECT_NE(std::find(ids.begin(), ids.end(), pair_->a()), ids.end());
    EXPECT_GE(device_count(), 2U);
    const std::string name = device_name(pair_->a());
    ASSERT_FALSE(name.empty());
    EXPECT_EQ(find_device(name).value(), pair_->a());
    EXPECT_EQ(find_device("no_such_rdma_device").code(), StatusCode::invalid_parameter);
    EXPECT_EQ(Context::open(invalid_device).code(), StatusCode::invalid_parameter);
}

TEST_P(Conformance, BadDevargsAreRejectedWithAClearMessage) {
    for (const auto& [devargs, word] : pair_->bad_devargs()) {
        auto created = create_device(devargs);
        ASSERT_FALSE(created.ok()) << devargs;
        EXPECT_NE(created.error().message().find(word), std::string::npos)
            << devargs << ": " << created.error().message();
    }
}

// ---- seed 003: queries --------------------------------------------------------------------------

TEST_P(Conformance, QueryDeviceWholeAndSelfRelative) {
    Context context = open(pair_->a());
    std::uint32_t size = 0;
    EXPECT_EQ(context.query_device(nullptr, &size).code(), StatusCode::buffer_too_small);
    ASSERT_GT(size, sizeof(DeviceAttr)) << "the required size is reported";
    std::vector<std::uint8_t> buffer(size + 64, 0xee);
    std::uint32_t got = static_cast<std::uint32_t>(buffer.size());
    ASSERT_TRUE(context.query_device(buffer.data(), &got).ok());
    EXPECT_EQ(got, size);
    EXPECT_EQ(buffer[size], 0xee) << "nothing written past the answer";

    DeviceAttr attr;
    std::memcpy(&attr, buffer.data(), sizeof(attr));
    EXPECT_EQ(attr.version, attr_version_current);
    EXPECT_EQ(attr.size, size);
    EXPECT_GE(attr.port_count, 1);
    EXPECT_NE(attr.page_size_support & (1ULL << 12), 0U) << "4 KiB pages";
    EXPECT_TRUE(attr.capability_flags.has(cap_rc));
    EXPECT_GT(attr.max_qp, 0U);
    EXPECT_GT(attr.max_qp_wr, 0U);
    EXPECT_GT(attr.max_sge, 0U);
    EXPECT_GT(attr.max_cqe, 0U);
    EXPECT_GT(attr.max_mr, 0U);
    EXPECT_GT(attr.max_mr_size, 0U);
    // Offsets, never pointers: the port block and its GID table are found from the buffer alone.
    const PortAttr* port = attr_at<PortAttr>(buffer.data(), attr.port_attr_offset);
    EXPECT_EQ(port->port_num, 1);
    EXPECT_EQ(port->version, attr_version_current);
    ASSERT_GE(port->gid_count, 1);
    const Gid* gid = attr_at<Gid>(port, port->gid_table_offset);
    EXPECT_EQ(*gid, pair_->gid_a());
    EXPECT_GE(port->pkey_count, 1);
    EXPECT_EQ(*attr_at<std::uint16_t>(port, port->pkey_table_offset), 0xffff);
    EXPECT_EQ(port->next_port_offset == 0, attr.port_count == 1);
}

// Seed 003: the answer is self-relative, so a copy elsewhere (another buffer, another process)
// reads the same with the original gone: the copy sits at an odd 8-byte-aligned offset of a
// larger buffer and the original is poisoned before the copy is read.
TEST_P(Conformance, QueryDeviceCopiedElsewhereReadsTheSameWithTheOriginalGone) {
    Context context = open(pair_->a());
    std::uint32_t size = 0;
    (void)context.query_device(nullptr, &size);
    std::vector<std::uint64_t> original((size + 7) / 8);
    std::uint32_t got = size;
    ASSERT_TRUE(context.query_device(original.data(), &got).ok());
    std::vector<std::uint64_t> elsewhere(original.size() + 3);
    std::memcpy(elsewhere.data() + 3, original.data(), size);
    std::memset(original.data(), 0xee, size);

    const auto* attr = reinterpret_cast<const DeviceAttr*>(elsewhere.data() + 3);
    EXPECT_EQ(attr->size, size);
    ASSERT_GE(attr->port_count, 1);
    const PortAttr* port = attr_at<PortAttr>(attr, attr->port_attr_offset);
    const auto* end = reinterpret_cast<const std::uint8_t*>(attr) + size;
    for (std::uint8_t n = 1; n <= attr->port_count; ++n) {
        ASSERT_LT(reinterpret_cast<const std::uint8_t*>(port), end);
        EXPECT_EQ(port->port_num, n);
        ASSERT_GE(port->gid_count, 1);
        const Gid* gid = attr_at<Gid>(port, port->gid_table_offset);
        ASSERT_LE(reinterpret_cast<const std::uint8_t*>(gid + port->gid_count), end);
        if (n == 1) {
            EXPECT_EQ(*gid, pair_->gid_a());
        }
        EXPECT_EQ(*attr_at<std::uint16_t>(port, port->pkey_table_offset), 0xffff);
        port = attr_at<PortAttr>(port, port->next_port_offset);
    }
}

// The typed attributes are the blob's, read out of it.
TEST_P(Conformance, DeviceInfoIsTheQueryDeviceAnswerTyped) {
    Context context = open(pair_->a());
    const auto info = context.device_info();
    ASSERT_TRUE(info.ok()) << info.error().to_string();
    std::uint32_t size = 0;
    (void)context.query_device(nullptr, &size);
    std::vector<std::uint64_t> blob((size + 7) / 8);
    ASSERT_TRUE(context.query_device(blob.data(), &size).ok());
    EXPECT_EQ(std::memcmp(&info->attr, blob.data(), sizeof(DeviceAttr)), 0);
    ASSERT_EQ(info->ports.size(), info->attr.port_count);
    const PortInfo& port = info->ports.front();
    EXPECT_EQ(port.attr.port_num, 1);
    ASSERT_EQ(port.gids.size(), port.attr.gid_count);
    EXPECT_EQ(port.gids.front(), pair_->gid_a());
    ASSERT_EQ(port.pkeys.size(), port.attr.pkey_count);
    EXPECT_EQ(port.pkeys.front(), 0xffff);
    std::vector<std::uint8_t> port_blob(4096);
    auto port_size = static_cast<std::uint32_t>(port_blob.size());
    ASSERT_TRUE(context.query_port(1, port_blob.data(), &port_size).ok());
    EXPECT_EQ(std::memcmp(&port.attr, port_blob.data(), sizeof(PortAttr)), 0);

    ASSERT_TRUE(context.close().ok());
    EXPECT_EQ(context.device_info().code(), StatusCode::invalid_parameter) << "closed";
}

TEST_P(Conformance, QueryDevicePrefixTooSmallOverflowAndVersion) {
    Context context = open(pair_->a());
    std::uint32_t size = 0;
    (void)context.query_device(nullptr, &size);

    // A prefix: the caller wants only the first fields.
    std::vector<std::uint8_t> prefix(24, 0xee);
    std::uint32_t got = static_cast<std::uint32_t>(prefix.size());
    EXPECT_EQ(context.query_device(prefix.data(), &got).code(), StatusCode::buffer_overflow);
    EXPECT_EQ(got, 24U) << "bytes returned";
    AttrHeader header;
    std::memcpy(&header, prefix.data(), sizeof(header));
    EXPECT_EQ(header.size, size) << "the header names the size required";
    EXPECT_EQ(header.version, attr_version_current);

    std::uint8_t tiny[4] = {0xee, 0xee, 0xee, 0xee};
    got = sizeof(tiny);
    EXPECT_EQ(context.query_device(tiny, &got).code(), StatusCode::buffer_too_small);
    EXPECT_EQ(tiny[0], 0xee) << "nothing written when not even the header fits";
    EXPECT_EQ(got, size);

    got = 8;
    EXPECT_EQ(context.query_device(nullptr, &got).code(), StatusCode::invalid_parameter);
    EXPECT_EQ(context.query_device(prefix.data(), nullptr).code(), StatusCode::invalid_parameter);
    got = static_cast<std::uint32_t>(prefix.size());
    EXPECT_EQ(context.query_device(prefix.data(), &got, 99).code(), StatusCode::invalid_parameter);
}

TEST_P(Conformance, QueryPortByOneBasedNumber) {
    Context context = open(pair_->a());
    std::vector<std::uint8_t> buffer(1024);
    std::uint32_t got = static_cast<std::uint32_t>(buffer.size());
    ASSERT_TRUE(context.query_port(1, buffer.data(), &got).ok());
    PortAttr port;
    std::memcpy(&port, buffer.data(), sizeof(port));
    EXPECT_EQ(port.port_num, 1);
    EXPECT_EQ(port.size, got);
    EXPECT_GE(mtu_bytes(port.active_mtu), 256U);
    EXPECT_EQ(*attr_at<Gid>(buffer.data(), port.gid_table_offset), pair_->gid_a());
    got = static_cast<std::uint32_t>(buffer.size());
    EXPECT_EQ(context.query_port(0, buffer.data(), &got).code(), StatusCode::invalid_parameter);
    EXPECT_EQ(context.query_port(9, buffer.data(), &got).code(), StatusCode::invalid_parameter);
    got = 12;
    EXPECT_EQ(context.query_port(1, buffer.data(), &got).code(), StatusCode::buffer_overflow);
}

// ---- seed 003: open/close and object lifetimes --------------------------------------------------

TEST_P(Conformance, CloseIsBusyWhileResourcesAreHeld) {
    Context context = open(pair_->a());
    {
        auto pd = context.alloc_pd();
        ASSERT_TRUE(pd.ok());
        EXPECT_EQ(context.resources().pds, 1U);
        const Status busy = context.close();
        EXPECT_EQ(busy.code(), StatusCode::busy);
        EXPECT_NE(busy.error().message().find("1 PDs"), std::string::npos)
            << busy.error().message();
    }
    EXPECT_EQ(context.resources().total(), 0U);
    EXPECT_TRUE(context.close().ok());
}

TEST_P(Conformance, ClientsAreIndependent) {
    Context first = open(pair_->a());
    Context second = open(pair_->a());
    auto pd = first.alloc_pd();
    ASSERT_TRUE(pd.ok());
    EXPECT_EQ(second.resources().total(), 0U);
    EXPECT_TRUE(second.close().ok()) << "another client's PD does not make this one busy";
}

TEST_P(Conformance, ParentsAreBusyWhileChildrenLive) {
    Context context = open(pair_->a());
    Objects objects = make_qp(context);
    EXPECT_EQ(objects.pd.destroy().code(), StatusCode::busy);
    EXPECT_EQ(objects.cq.destroy().code(), StatusCode::busy);
    EXPECT_TRUE(objects.qp.destroy().ok());
    EXPECT_TRUE(objects.cq.destroy().ok());
    EXPECT_TRUE(objects.pd.destroy().ok());
    EXPECT_TRUE(context.close().ok());
}

// Assigning over a PD that still has children is a drop, as its destructor is: the PD goes with
// the last child instead of leaking (it leaked, and the context stayed busy for ever).
TEST_P(Conformance, AssigningOverABusyPdHandsItToItsLastChild) {
    Context context = open(pair_->a());
    Objects objects = make_qp(context);
    objects.pd = ProtectionDomain{};
    EXPECT_EQ(context.resources().pds, 1U) << "the QP still holds it";
    EXPECT_TRUE(objects.qp.destroy().ok());
    EXPECT_TRUE(objects.cq.destroy().ok());
    EXPECT_EQ(context.resources().total(), 0U);
    EXPECT_TRUE(context.close().ok());
}

TEST_P(Conformance, ObjectsMayOutliveTheirContextHandle) {
    std::optional<Context> context(open(pair_->a()));
    auto pd = context->alloc_pd();
    ASSERT_TRUE(pd.ok());
    context.reset(); // the PD keeps the client's state alive
    EXPECT_TRUE(pd->destroy().ok());
}

// Seed 003 CloseCa ends the client: every later call on the handle says so instead of crashing.
// An empty region handle (never filled, moved from, deregistered) has no region and no keys;
// it used to hand out a reference through a null pointer.
TEST_P(Conformance, AnEmptyRegionHandleHasNoRegionAndNoKeys) {
    Context context = open(pair_->a());
    auto pd = context.alloc_pd();
    ASSERT_TRUE(pd.ok());
    auto buffer = mem::DmaBuffer::allocate(4096);
    ASSERT_TRUE(buffer.ok());
    auto mr = pd->register_memory(buffer->data(), 4096, mem::access_local_write);
    ASSERT_TRUE(mr.ok()) << mr.error().to_string();
    MemoryRegionHandle moved = std::move(mr.value());
    const MemoryRegionHandle never;
    for (const MemoryRegionHandle* empty :
         {static_cast<const MemoryRegionHandle*>(&mr.value()), &never}) {
        EXPECT_FALSE(*empty);
        EXPECT_EQ(empty->get(), nullptr);
        EXPECT_EQ(empty->lkey(), 0U);
        EXPECT_EQ(empty->rkey(), 0U);
    }
    ASSERT_NE(moved.get(), nullptr);
    EXPECT_TRUE(moved.deregister().ok());
    EXPECT_EQ(moved.get(), nullptr);
    EXPECT_TRUE(moved.deregister().ok()) << "deregistering an empty handle is a no-op";
}

TEST_P(Conformance, EveryCallOnAClosedContextFailsCleanly) {
    Context context = open(pair_->a());
    Context other = open(pair_->a());
    ASSERT_TRUE(context.close().ok());
    const auto says_closed = [](const Status& status) {
        if (status.code() != StatusCode::invalid_parameter) {
            return ::testing::AssertionFailure() << "status " << status_name(status.code());
        }
        if (status.error().message().find("closed") == std::string::npos) {
            return ::testing::AssertionFailure() << status.error().message();
        }
        return ::testing::AssertionSuccess();
    };
    const auto error_of = [](const auto& result) {
        return result.ok() ? Status{} : Status(result.error());
    };
    std::vector<std::uint8_t> buffer(4096);
    auto size = static_cast<std::uint32_t>(buffer.size());
    EXPECT_TRUE(says_closed(context.query_device(buffer.data(), &size)));
    EXPECT_TRUE(says_closed(context.query_port(1, buffer.data(), &size)));
    EXPECT_TRUE(says_closed(error_of(context.alloc_pd())));
    EXPECT_TRUE(says_closed(error_of(context.create_cq(16))));
    CompletionQueue cq;
    EXPECT_TRUE(says_closed(into(cq, context.create_cq(16, 0, 1))));
    EXPECT_FALSE(cq);
    auto pd = other.alloc_pd();
    auto other_cq = other.create_cq(16);
    ASSERT_TRUE(pd.ok() && other_cq.ok());
    QpInitAttr init;
    init.pd = &pd.value();
    init.send_cq = &other_cq.value();
    init.recv_cq = &other_cq.value();
    EXPECT_TRUE(says_closed(error_of(context.create_qp(init))));
    QueuePair qp;
    EXPECT_TRUE(says_closed(into(qp, context.create_qp(init, 2))));
    EXPECT_FALSE(qp);
    EXPECT_TRUE(says_closed(error_of(context.query_stats())));
    EXPECT_TRUE(says_closed(context.close()));
    ControlCompletion done[2];
    EXPECT_EQ(context.poll_control(done), 0U);
    Event events[2];
    EXPECT_EQ(context.poll_events(events), 0U);
    EXPECT_EQ(context.resources().total(), 0U);
    EXPECT_EQ(context.device(), invalid_device);

    // A moved-from handle is no more open than a closed one.
    Context moved = std::move(other);
    size = static_cast<std::uint32_t>(buffer.size());
    EXPECT_TRUE(says_closed(other.query_device(buffer.data(), &size)));  // NOLINT: use after move
    EXPECT_TRUE(says_closed(other.query_port(1, buffer.data(), &size))); // NOLINT: use after move
    EXPECT_TRUE(moved.query_device(buffer.data(), &size).ok());
}

TEST_P(Conformance, CreateRejectsBadArguments) {
    Context context = open(pair_->a());
    EXPECT_EQ(context.create_cq(0).code(), StatusCode::invalid_parameter);
    EXPECT_EQ(context.create_cq(1U << 30).code(), StatusCode::invalid_parameter);
    EXPECT_EQ(context.create_cq(16, 999).code(), StatusCode::invalid_parameter);
    auto pd = context.alloc_pd();
    auto cq = context.create_cq(16);
    ASSERT_TRUE(pd.ok() && cq.ok());
    QpInitAttr init;
    EXPECT_EQ(context.create_qp(init).code(), StatusCode::invalid_parameter);
    init.pd = &pd.value();
    init.send_cq = &cq.value();
    init.recv_cq = &cq.value();
    init.caps.max_send_wr = 1U << 30;
    EXPECT_EQ(context.create_qp(init).code(), StatusCode::invalid_parameter);
    Context other = open(pair_->a());
    auto foreign_pd = other.alloc_pd();
    init.caps = {};
    init.pd = &foreign_pd.value();
    EXPECT_EQ(context.create_qp(init).code(), StatusCode::invalid_parameter);
}

// Each rejection names what is wrong: zero caps are not "too large", and a cap above the device
// names itself and the device limit it exceeds.
TEST_P(Conformance, CreateQpRejectionsSayWhatIsWrong) {
    Context context = open(pair_->a());
    std::vector<std::uint8_t> buffer(4096);
    auto size = static_cast<std::uint32_t>(buffer.size());
    ASSERT_TRUE(context.query_device(buffer.data(), &size).ok());
    DeviceAttr attr;
    std::memcpy(&attr, buffer.data(), sizeof(attr));
    auto pd = context.alloc_pd();
    auto cq = context.create_cq(16);
    ASSERT_TRUE(pd.ok() && cq.ok());
    const auto message_of = [&context](const QpInitAttr& init) {
        auto qp = context.create_qp(init);
        EXPECT_EQ(qp.code(), StatusCode::invalid_parameter);
        return qp.ok() ? std::string() : qp.error().message();
    };

    QpInitAttr init;
    init.pd = &pd.value();
    init.send_cq = &cq.value();
    std::string message = message_of(init);
    const std::string_view missing = "missing: ";
    ASSERT_NE(message.find(missing), std::string::npos) << message;
    EXPECT_EQ(message.substr(message.find(missing) + missing.size()), "receive CQ") << message;

    init.recv_cq = &cq.value();
    init.caps = QpCaps{0, 0, 0, 0, 0};
    message = message_of(init);
    EXPECT_NE(message.find("QP caps max_send_wr, max_recv_wr, max_send_sge, max_recv_sge are 0"),
              std::string::npos)
        << message;
    EXPECT_EQ(message.find("exceed"), std::string::npos) << message;
    EXPECT_EQ(message.find("max_inline_data"), std::string::npos) << "0 inline is fine";

    init.caps = QpCaps{};
    init.caps.max_recv_wr = 0;
    message = message_of(init);
    EXPECT_NE(message.find("QP cap max_recv_wr is 0; it must be at least 1"), std::string::npos)
        << message;
    EXPECT_EQ(message.find("max_send_wr"), std::string::npos) << message;

    init.caps = QpCaps{};
    init.caps.max_send_wr = attr.max_qp_wr + 1;
    init.caps.max_inline_data = attr.max_inline_data + 1;
    message = message_of(init);
    EXPECT_NE(message.find(strformat("max_send_wr %u exceeds the device's max_qp_wr %u",
                                     attr.max_qp_wr + 1, attr.max_qp_wr)),
              std::string::npos)
        << message;
    EXPECT_NE(message.find(strformat("max_inline_data %u exceeds the device's max_inline_data %u",
                                     attr.max_inline_data + 1, attr.max_inline_data)),
              std::string::npos)
        << message;
    EXPECT_EQ(message.find("max_recv_wr"), std::string::npos) << "only what is wrong: " << message;

    init.caps = QpCaps{};
    init.caps.max_recv_sge = attr.max_sge + 1;
    message = message_of(init);
    EXPECT_NE(message.find(strformat("max_recv_sge %u exceeds the device's max_sge %u",
                                     attr.max_sge + 1, attr.max_sge)),
              std::string::npos)
        << message;

    Context other = open(pair_->a());
    auto foreign_cq = other.create_cq(16);
    ASSERT_TRUE(foreign_cq.ok());
    init.caps = QpCaps{};
    init.send_cq = &foreign_cq.value();
    message = message_of(init);
    EXPECT_NE(message.find("the send CQ of a QP must belong to the context"), std::string::npos)
        << message;
}

// ---- memory regions -----------------------------------------------------------------------------

TEST_P(Conformance, MemoryRegistrationPaths) {
    Context context = open(pair_->a());
    auto pd = context.alloc_pd();
    ASSERT_TRUE(pd.ok());
    auto buffer = mem::DmaBuffer::allocate(64 * 1024, 4096);
    ASSERT_TRUE(buffer.ok());
    auto mr = pd->register_memory(buffer->data(), buffer->size(),
                                  mem::access_local_write | mem::access_remote_read);
    ASSERT_TRUE(mr.ok()) << mr.error().to_string();
    EXPECT_NE(mr->lkey(), 0U);
    EXPECT_NE(mr->rkey(), 0U);
    EXPECT_EQ(mr->get()->local_start(), reinterpret_cast<std::uint64_t>(buffer->data()));
    EXPECT_EQ(context.resources().mrs, 1U);
    EXPECT_EQ(pd->destroy().code(), StatusCode::busy);

    int on_stack = 0;
    EXPECT_EQ(pd->register_memory(&on_stack, sizeof(on_stack), mem::access_local_write).code(),
              StatusCode::invalid_parameter)
        << "only DMA memory can be registered";
    EXPECT_EQ(pd->register_memory(buffer->data(), 64, mem::access_remote_write).code(),
              StatusCode::invalid_parameter)
        << "remote write needs local write";

    auto dma = pd->get_dma_region();
    ASSERT_TRUE(dma.ok());
    EXPECT_NE(dma->lkey(), 0U);
    EXPECT_EQ(dma->rkey(), 0U);
    auto fast = pd->alloc_fast_reg_region(32, mem::access_local_write | mem::access_remote_write);
    ASSERT_TRUE(fast.ok());
    EXPECT_FALSE(fast->get()->valid()) << "invalid until a FAST_REG registers pages";
    EXPECT_EQ(context.resources().mrs, 3U);
    EXPECT_TRUE(mr->deregister().ok());
    dma = MemoryRegionHandle{};
    fast = MemoryRegionHandle{};
    EXPECT_EQ(context.resources().mrs, 0U);
    EXPECT_TRUE(pd->destroy().ok());
}

TEST_P(Conformance, ConnectionBoundRegistrationNeedsAConnectedQp) {
    Context context = open(pair_->a());
    Objects objects = make_qp(context);
    auto buffer = mem::DmaBuffer::allocate(4096);
    ASSERT_TRUE(buffer.ok());
    auto early = objects.pd.register_for_connection(objects.qp, buffer->data(), 4096,
                                                    mem::WspAccess::read_write);
    EXPECT_EQ(early.code(), StatusCode::not_connected);
}

// Seed 002: dwFlags is one of MEM_READ, MEM_WRITE, MEM_READWRITE; anything else is invalid flags
// (WSAEINVAL), and the message names the bits that are wrong.
TEST_P(Conformance, ConnectionBoundRegistrationRefusesInvalidWspFlags) {
    Context context = open(pair_->a());
    Objects objects = make_qp(context);
    auto buffer = mem::DmaBuffer::allocate(4096);
    ASSERT_TRUE(buffer.ok());
    const auto bad = [](std::uint8_t raw) { return static_cast<mem::WspAccess>(raw); };
    // Checked before the connection: a bad argument is bad in any state.
    EXPECT_EQ(objects.pd.register_for_connection(objects.qp, buffer->data(), 4096, bad(0x4)).code(),
              StatusCode::invalid_parameter);

    ASSERT_TRUE(to_init(objects.qp).ok());
    QpAttr rtr = rtr_attr(pair_->gid_b(), 0x321);
    rtr.dest_mac = std::array<std::uint8_t, 6>{0x02, 0, 0, 0, 0, 0x43};
    ASSERT_TRUE(objects.qp.modify(rtr, rtr_mask).ok());
    for (const mem::WspAccess good :
         {mem::WspAccess::read, mem::WspAccess::write, mem::WspAccess::read_write}) {
        auto mr = objects.pd.register_for_connection(objects.qp, buffer->data(), 4096, good);
        EXPECT_TRUE(mr.ok()) << mr.error().to_string();
    }
    const std::pair<std::uint8_t, const char*> cases[] = {
        {0x0, "0x0 grants nothing"}, {0x4, "unknown bits 0x4"},   {0x7, "unknown bits 0x4"},
        {0x81, "unknown bits 0x80"}, {0xff, "unknown bits 0xfc"},
    };
    for (const auto& [raw, words] : cases) {
        auto mr = objects.pd.register_for_connection(objects.qp, buffer->data(), 4096, bad(raw));
        ASSERT_FALSE(mr.ok()) << "WSP access 0x" << std::hex << unsigned{raw} << " registered";
        EXPECT_EQ(mr.code(), StatusCode::invalid_parameter);
        EXPECT_NE(mr.error().message().find(words), std::string::npos) << mr.error().message();
        MemoryRegionHandle out;
        EXPECT_EQ(into(out, objects.pd.register_for_connection(objects.qp, buffer->data(), 4096,
                                                               bad(raw), 30))
                      .code(),
                  StatusCode::invalid_parameter);
        EXPECT_FALSE(out);
    }
    EXPECT_EQ(context.resources().mrs, 0U) << "nothing was registered for a refused call";
}

// ---- QP state machine ---------------------------------------------------------------------------

TEST_P(Conformance, QpStateMachineOnTheDevice) {
    Context context = open(pair_->a());
    Objects objects = make_qp(context);
    QueuePair& qp = objects.qp;
    EXPECT_EQ(qp.state(), QpState::reset);
    EXPECT_NE(qp.qpn(), 0U);
    EXPECT_LE(qp.qpn(), 0xffffffU);

    QpAttr rts;
    rts.state = QpState::rts;
    EXPECT_EQ(qp.modify(rts, qp_attr_state).code(), StatusCode::invalid_parameter)
        << "RESET -> RTS is illegal";
    QpAttr init;
    init.state = QpState::init;
    const Status missing = qp.modify(init, qp_attr_state);
    EXPECT_EQ(missing.code(), StatusCode::invalid_parameter);
    EXPECT_NE(missing.error().message().find("access_flags"), std::string::npos);
    ASSERT_TRUE(to_init(qp).ok());
    EXPECT_EQ(qp.state(), QpState::init);

    QpAttr rtr = rtr_attr(pair_->gid_b(), 0x123);
    rtr.dest_mac = std::array<std::uint8_t, 6>{0x02, 0, 0, 0, 0, 0x42};
    rtr.rq_psn = 1U << 24;
    EXPECT_EQ(qp.modify(rtr, rtr_mask).code(), StatusCode::invalid_parameter) << "PSNs are 24-bit";
    rtr.rq_psn = 100;
    ASSERT_TRUE(qp.modify(rtr, rtr_mask).ok()) << "a known MAC needs no resolution";
    EXPECT_EQ(qp.state(), QpState::rtr);
    EXPECT_EQ(qp.attributes().value().dest_qpn, 0x123U);

    QpAttr to_rts;
    to_rts.state = QpState::rts;
    to_rts.sq_psn = 555;
    to_rts.timeout = 14;
    to_rts.retry_cnt = 7;
    to_rts.rnr_retry = 7;
    to_rts.max_rd_atomic = 1;
    ASSERT_TRUE(qp.modify(to_rts, qp_attr_state | qp_attr_sq_psn | qp_attr_timeout |
                                      qp_attr_retry_cnt | qp_attr_rnr_retry | qp_attr_max_rd_atomic)
                    .ok());
    EXPECT_EQ(qp.state(), QpState::rts);
    EXPECT_EQ(qp.attributes().value().sq_psn, 555U);

    QpAttr cur;
    cur.cur_state = QpState::init;
    cur.state = QpState::rts;
    EXPECT_EQ(qp.modify(cur, qp_attr_state | qp_attr_cur_state).code(),
              StatusCode::invalid_parameter)
        << "cur_state must match";

    QpAttr err;
    err.state = QpState::err;
    ASSERT_TRUE(qp.modify(err, qp_attr_state).ok());
    EXPECT_EQ(qp.state(), QpState::err);
    EXPECT_EQ(qp.modify(rts, qp_attr_state).code(), StatusCode::invalid_parameter);
    QpAttr reset;
    reset.state = QpState::reset;
    ASSERT_TRUE(qp.modify(reset, qp_attr_state).ok());
    EXPECT_EQ(qp.state(), QpState::reset);
}

TEST_P(Conformance, PostingFollowsTheQpState) {
    Context context = open(pair_->a());
    Objects objects = make_qp(context);
    RecvWr recv;
    recv.wr_id = 7;
    EXPECT_EQ(post_recv(objects.qp, {&recv, 1}), 0) << "nothing is taken in RESET";
    SendWr send;
    send.wr_id = 9;
    EXPECT_EQ(post_send(objects.qp, {&send, 1}), 0) << "sends need RTS";
    ASSERT_TRUE(to_init(objects.qp).ok());
    EXPECT_EQ(post_recv(objects.qp, {&recv, 1}), 1) << "receives may be posted from INIT";
    WorkCompletion wc;
    EXPECT_EQ(poll_cq(objects.cq, {&wc, 1}), 0);

    // ERR flushes what is queued, and what is posted afterwards.
    QpAttr err;
    err.state = QpState::err;
    ASSERT_TRUE(objects.qp.modify(err, qp_attr_state).ok());
    ASSERT_EQ(poll_cq(objects.cq, {&wc, 1}), 1);
    EXPECT_EQ(wc.wr_id, 7U);
    EXPECT_EQ(wc.status, WcStatus::wr_flush_error);
    EXPECT_EQ(wc.qpn, objects.qp.qpn());
    EXPECT_EQ(post_recv(objects.qp, {&recv, 1}), 1);
    ASSERT_EQ(poll_cq(objects.cq, {&wc, 1}), 1);
    EXPECT_EQ(wc.status, WcStatus::wr_flush_error);
}

// ---- pending control paths (seed 003) ---------------------------------------------------------

TEST_P(Conformance, RtrIsPendingWhileThePeersAddressIsResolved) {
    Context context = open(pair_->a());
    Context peer = open(pair_->b());
    Objects objects = make_qp(context);
    ASSERT_TRUE(to_init(objects.qp).ok());
    const Status status = objects.qp.modify(rtr_attr(pair_->gid_b(), 0x77), rtr_mask, 4242);
    ASSERT_EQ(status.code(), StatusCode::pending) << (status.ok() ? "" : status.error().message());
    EXPECT_EQ(objects.qp.state(), QpState::init) << "nothing changes until it completes";
    EXPECT_EQ(objects.qp.modify(rtr_attr(pair_->gid_b(), 0x77), rtr_mask).code(), StatusCode::busy)
        << "one control request per QP at a time";
    EXPECT_EQ(objects.qp.attributes().code(), StatusCode::busy)
        << "the device may be writing them: they are read once the modify completes";

    const auto done = wait_control(context, peer, std::chrono::seconds(5));
    ASSERT_TRUE(done.has_value()) << "the pending modify never completed";
    EXPECT_EQ(done->request_id, 4242U);
    EXPECT_EQ(done->op, ControlOp::modify_qp);
    EXPECT_EQ(done->status, StatusCode::ok) << done->message;
    EXPECT_EQ(done->qpn, objects.qp.qpn());
    EXPECT_EQ(objects.qp.state(), QpState::rtr);
    const Result<QpAttr> queried = objects.qp.attributes();
    ASSERT_TRUE(queried.ok()) << queried.error().message();
    const QpAttr& attr = queried.value();
    EXPECT_EQ(attr.state, QpState::rtr);
    EXPECT_EQ(attr.dest_qpn, 0x77U) << "the request the driver applied, kept once";
    ASSERT_TRUE(attr.dest_mac.has_value()) << "the resolved MAC is part of the QP now";

    // The peer's port MAC is what was resolved.
    std::vector<std::uint8_t> buffer(512);
    std::uint32_t got = static_cast<std::uint32_t>(buffer.size());
    ASSERT_TRUE(peer.query_port(1, buffer.data(), &got).ok());
    PortAttr peer_port;
    std::memcpy(&peer_port, buffer.data(), sizeof(peer_port));
    EXPECT_EQ(std::memcmp(attr.dest_mac->data(), peer_port.mac, 6), 0);

    // Resolved once, known afterwards: a second QP to the same peer completes at once.
    Objects second = make_qp(context);
    ASSERT_TRUE(to_init(second.qp).ok());
    EXPECT_TRUE(second.qp.modify(rtr_attr(pair_->gid_b(), 0x78), rtr_mask).ok());
}

TEST_P(Conformance, RtrFailsWhenNobodyAnswers) {
    Context context = open(pair_->a());
    Context peer = open(pair_->b());
    Objects objects = make_qp(context);
    ASSERT_TRUE(to_init(objects.qp).ok());
    ASSERT_EQ(objects.qp.modify(rtr_attr(pair_->unreachable_gid(), 0x77), rtr_mask, 9).code(),
              StatusCode::pending);
    const auto done = wait_control(context, peer, std::chrono::seconds(10));
    ASSERT_TRUE(done.has_value());
    EXPECT_EQ(done->request_id, 9U);
    EXPECT_EQ(done->status, StatusCode::not_connected);
    EXPECT_FALSE(done->message.empty());
    EXPECT_EQ(objects.qp.state(), QpState::init) << "a failed modify leaves the state alone";
}

TEST_P(Conformance, DestroyIsPendingWhileWorkIsInFlight) {
    Context context = open(pair_->a());
    Context peer = open(pair_->b());
    Objects objects = make_qp(context);
    ASSERT_TRUE(to_init(objects.qp).ok());
    RecvWr recv[3];
    for (std::uint64_t i = 0; i < 3; ++i) {
        recv[i].wr_id = 100 + i;
    }
    ASSERT_EQ(post_recv(objects.qp, {recv, 3}), 3);
    const std::uint32_t qpn = objects.qp.qpn();
    ASSERT_EQ(objects.qp.destroy(31).code(), StatusCode::pending);
    EXPECT_FALSE(objects.qp) << "the handle lets go; the context finishes the destroy";
    EXPECT_EQ(context.resources().qps, 1U) << "still there until it completes";
    EXPECT_EQ(objects.cq.destroy().code(), StatusCode::busy);

    const auto done = wait_control(context, peer, std::chrono::seconds(5));
    ASSERT_TRUE(done.has_value());
    EXPECT_EQ(done->request_id, 31U);
    EXPECT_EQ(done->op, ControlOp::destroy_qp);
    EXPECT_EQ(done->status, StatusCode::ok);
    EXPECT_EQ(done->qpn, qpn);
    EXPECT_EQ(context.resources().qps, 0U);
    // The flushed receives reached the CQ before the destroy completed.
    WorkCompletion wc[4];
    ASSERT_EQ(poll_cq(objects.cq, {wc, 4}), 3);
    for (std::uint64_t i = 0; i < 3; ++i) {
        EXPECT_EQ(wc[i].wr_id, 100 + i);
        EXPECT_EQ(wc[i].status, WcStatus::wr_flush_error);
    }
    EXPECT_TRUE(objects.cq.destroy().ok());
}

TEST_P(Conformance, IdleQpIsDestroyedAtOnce) {
    Context context = open(pair_->a());
    Objects objects = make_qp(context);
    EXPECT_TRUE(objects.qp.destroy().ok());
    EXPECT_EQ(context.resources().qps, 0U);
}

// ---- pending forms of create, destroy and registration (seed 003) ----------------------------

TEST_P(Conformance, PendingFormsCompleteAtOnceWhenNoOtherThreadPolls) {
    Context context = open(pair_->a());
    auto pd = context.alloc_pd();
    ASSERT_TRUE(pd.ok());
    CompletionQueue cq;
    ASSERT_TRUE(into(cq, context.create_cq(64, 0, 11)).ok());
    EXPECT_TRUE(cq.ready());
    QpInitAttr init;
    init.pd = &pd.value();
    init.send_cq = &cq;
    init.recv_cq = &cq;
    QueuePair qp;
    ASSERT_TRUE(into(qp, context.create_qp(init, 12)).ok());
    EXPECT_TRUE(qp.ready());
    EXPECT_NE(qp.qpn(), 0U);
    EXPECT_TRUE(qp.modify(init_attr(), init_mask, 13).ok());
    EXPECT_EQ(qp.state(), QpState::init);

    auto buffer = mem::DmaBuffer::allocate(8192, 4096);
    ASSERT_TRUE(buffer.ok());
    MemoryRegionHandle mr;
    ASSERT_TRUE(into(mr, pd->register_memory(buffer->data(), 8192,
                                             mem::access_local_write | mem::access_remote_read, 14))
                    .ok());
    EXPECT_TRUE(mr.ready());
    EXPECT_NE(mr.lkey(), 0U);
    EXPECT_NE(mr.rkey(), 0U);
    MemoryRegionHandle fast;
    ASSERT_TRUE(into(fast, pd->alloc_fast_reg_region(
                               8, mem::access_local_write | mem::access_remote_write, 15))
                    .ok());
    EXPECT_TRUE(fast.ready());
    MemoryRegionHandle dma;
    ASSERT_TRUE(into(dma, pd->get_dma_region(20)).ok());
    EXPECT_TRUE(dma.ready());
    EXPECT_NE(dma.lkey(), 0U);
    MemoryRegionHandle sgl;
    const mem::SglElement elements[] = {{buffer->iova(), 8192}};
    ASSERT_TRUE(into(sgl, pd->register_sgl(elements, 12, mem::access_local_write, 21)).ok());
    EXPECT_TRUE(sgl.ready());
    MemoryRegionHandle bound;
    EXPECT_EQ(into(bound, pd->register_for_connection(qp, buffer->data(), 4096,
                                                      mem::WspAccess::read_write, 22))
                  .code(),
              StatusCode::not_connected)
        << "the QP is only in INIT";
    EXPECT_FALSE(bound);
    EXPECT_EQ(context.resources().total(), 7U);
    EXPECT_TRUE(dma.deregister(23).ok());
    EXPECT_TRUE(sgl.deregister(24).ok());
    EXPECT_EQ(context.resources().total(), 5U);

    EXPECT_TRUE(mr.deregister(16).ok());
    EXPECT_FALSE(mr);
    EXPECT_TRUE(fast.deregister(17).ok());
    EXPECT_TRUE(qp.destroy(18).ok());
    EXPECT_TRUE(cq.destroy(19).ok());
    ControlCompletion done[4];
    EXPECT_EQ(context.poll_control(done), 0U) << "what finished at once has no completion";
    EXPECT_EQ(context.resources().total(), 1U);
}

TEST_P(Conformance, CreateModifyDestroyOnAGroupAnotherThreadPolls) {
    Context context = open(pair_->a());
    Context peer = open(pair_->b());
    auto pd = context.alloc_pd();
    ASSERT_TRUE(pd.ok());
    GroupOwner owner(std::move(context.create_cq(64, 0).value()));
    const bool pends = pair_->owned_group_pends();

    if (pends) {
        // The forms that cannot pend say why, and point at the ones that can.
        auto now = context.create_cq(16, 0);
        ASSERT_EQ(now.code(), StatusCode::busy);
        EXPECT_NE(now.error().message().find("request_id"), std::string::npos)
            << now.error().message();
    }

    CompletionQueue cq;
    Status status = into(cq, context.create_cq(64, 0, 21));
    EXPECT_TRUE(cq) << "the handle holds the CQ from the call on";
    if (status.code() == StatusCode::pending) {
        EXPECT_FALSE(cq.ready());
        EXPECT_EQ(context.resources().cqs, 2U) << "a CQ being created counts";
        QpInitAttr early;
        early.pd = &pd.value();
        early.send_cq = &cq;
        early.recv_cq = &cq;
        QueuePair too_early;
        const Status refused = into(too_early, context.create_qp(early, 99));
        ASSERT_EQ(refused.code(), StatusCode::busy) << "a QP needs a ready CQ";
        EXPECT_NE(refused.error().message().find("pending"), std::string::npos)
            << refused.error().message();
        EXPECT_EQ(cq.destroy().code(), StatusCode::busy);
    }
    ASSERT_TRUE(completes(context, peer, status, 21, ControlOp::create_cq, pends));
    EXPECT_TRUE(cq.ready());

    QpInitAttr init;
    init.pd = &pd.value();
    init.send_cq = &cq;
    init.recv_cq = &cq;
    QueuePair qp;
    status = into(qp, context.create_qp(init, 22));
    if (status.code() == StatusCode::pending) {
        EXPECT_FALSE(qp.ready());
        EXPECT_EQ(qp.modify(init_attr(), init_mask).code(), StatusCode::busy);
        EXPECT_EQ(qp.destroy().code(), StatusCode::busy);
    }
    ControlCompletion created;
    ASSERT_TRUE(completes(context, peer, status, 22, ControlOp::create_qp, pends, &created));
    ASSERT_TRUE(qp.ready());
    EXPECT_NE(qp.qpn(), 0U);
    if (status.code() == StatusCode::pending) {
        EXPECT_EQ(created.qpn, qp.qpn()) << "the completion names the new QP";
    }

    status = qp.modify(init_attr(), init_mask, 23);
    if (status.code() == StatusCode::pending) {
        EXPECT_EQ(qp.state(), QpState::reset) << "nothing changes until it completes";
    }
    ASSERT_TRUE(completes(context, peer, status, 23, ControlOp::modify_qp, pends));
    EXPECT_EQ(qp.state(), QpState::init);

    const std::uint32_t qpn = qp.qpn();
    status = qp.destroy(24);
    EXPECT_FALSE(qp) << "the handle lets go at once";
    if (status.code() == StatusCode::pending) {
        EXPECT_EQ(context.resources().qps, 1U) << "counted until it completes";
        EXPECT_EQ(cq.destroy().code(), StatusCode::busy);
    }
    ControlCompletion destroyed;
    ASSERT_TRUE(completes(context, peer, status, 24, ControlOp::destroy_qp, pends, &destroyed));
    if (status.code() == StatusCode::pending) {
        EXPECT_EQ(destroyed.qpn, qpn);
    }
    EXPECT_EQ(context.resources().qps, 0U);

    status = cq.destroy(25);
    EXPECT_FALSE(cq);
    ASSERT_TRUE(completes(context, peer, status, 25, ControlOp::destroy_cq, pends));
    EXPECT_EQ(context.resources().cqs, 1U) << "only the owner's own CQ is left";
    owner.stop();
    EXPECT_TRUE(owner.released()) << "the owner destroys its own CQ at once";
    EXPECT_EQ(context.resources().cqs, 0U);
}

TEST_P(Conformance, RegistrationWhileAnotherThreadPollsTheDevice) {
    Context context = open(pair_->a());
    Context peer = open(pair_->b());
    auto pd = context.alloc_pd();
    ASSERT_TRUE(pd.ok());
    GroupOwner owner(std::move(context.create_cq(64, 0).value()));
    const bool pends = pair_->owned_group_pends();
    auto buffer = mem::DmaBuffer::allocate(16384, 4096);
    ASSERT_TRUE(buffer.ok());
    const AccessFlags access = mem::access_local_write | mem::access_remote_read;

    // Registration may finish at once (swroce publishes the key from the control thread).
    MemoryRegionHandle mr;
    Status status = into(mr, pd->register_memory(buffer->data(), 8192, access, 31));
    ASSERT_TRUE(completes(context, peer, status, 31, ControlOp::register_mr, false));
    ASSERT_TRUE(mr.ready());
    EXPECT_NE(mr.rkey(), 0U);
    {
        // Another reference to the same region: dropping it is never a wait.
        auto again = pd->register_memory(buffer->data(), 8192, access);
        ASSERT_TRUE(again.ok() || again.code() == StatusCode::busy);
        if (again.ok()) {
            EXPECT_EQ(again->rkey(), mr.rkey());
        }
    }
    ControlCompletion none[2];
    EXPECT_EQ(context.poll_control(none), 0U);

    // The last deregistration waits until no polling thread can still be using the region.
    status = mr.deregister(32);
    EXPECT_FALSE(mr);
    if (status.code() == StatusCode::pending) {
        EXPECT_EQ(context.resources().mrs, 1U);
        EXPECT_EQ(pd->destroy().code(), StatusCode::busy) << "the PD waits for its MR";
    }
    ASSERT_TRUE(completes(context, peer, status, 32, ControlOp::deregister_mr, pends));
    EXPECT_EQ(context.resources().mrs, 0U);

    // A FAST_REG region, and a handle dropped instead of deregistered: request_id 0.
    MemoryRegionHandle fast;
    status = into(fast, pd->alloc_fast_reg_region(8, mem::access_local_write, 33));
    ASSERT_TRUE(completes(context, peer, status, 33, ControlOp::register_mr, false));
    ASSERT_TRUE(fast.ready());
    fast = MemoryRegionHandle{};
    if (pends) {
        EXPECT_EQ(context.resources().mrs, 1U);
        ASSERT_TRUE(completes(context, peer, Error(StatusCode::pending, "dropped"), 0,
                              ControlOp::deregister_mr, true));
    }
    EXPECT_EQ(context.resources().mrs, 0U);
    EXPECT_TRUE(pd->destroy().ok());
    owner.stop();
}

TEST_P(Conformance, AHandleDroppedWhileItsCreationPendsIsDestroyedLater) {
    Context context = open(pair_->a());
    Context peer = open(pair_->b());
    auto pd = context.alloc_pd();
    ASSERT_TRUE(pd.ok());
    GroupOwner owner(std::move(context.create_cq(64, 0).value()));
    if (!pair_->owned_group_pends()) {
        GTEST_SKIP() << "this driver does not pend creates";
    }
    CompletionQueue cq;
    ASSERT_EQ(into(cq, context.create_cq(32, 0, 41)).code(), StatusCode::pending);
    cq = CompletionQueue{};
    EXPECT_EQ(context.resources().cqs, 2U) << "still there until created and destroyed";
    ASSERT_TRUE(completes(context, peer, Error(StatusCode::pending, "create"), 41,
                          ControlOp::create_cq, true));
    ASSERT_TRUE(completes(context, peer, Error(StatusCode::pending, "the library's destroy"), 0,
                          ControlOp::destroy_cq, true));
    EXPECT_EQ(context.resources().cqs, 1U);

    QpInitAttr init;
    init.pd = &pd.value();
    init.send_cq = &owner.cq();
    init.recv_cq = &owner.cq();
    QueuePair qp;
    ASSERT_EQ(into(qp, context.create_qp(init, 42)).code(), StatusCode::pending);
    qp = QueuePair{};
    ASSERT_TRUE(completes(context, peer, Error(StatusCode::pending, "create"), 42,
                          ControlOp::create_qp, true));
    ASSERT_TRUE(completes(context, peer, Error(StatusCode::pending, "the library's destroy"), 0,
                          ControlOp::destroy_qp, true));
    EXPECT_EQ(context.resources().qps, 0U);
    owner.stop();
    EXPECT_TRUE(owner.released());
}

TEST_P(Conformance, PendingRequestsFailWhenTheDeviceIsRemoved) {
    Context context = open(pair_->a());
    GroupOwner owner(std::move(context.create_cq(64, 0).value()));
    CompletionQueue cq;
    const Status status = into(cq, context.create_cq(16, 0, 51));
    if (status.code() != StatusCode::pending) {
        GTEST_SKIP() << "this driver created the CQ at once";
    }
    // The owner goes away; whatever it did with the request, nobody polled its completion.
    owner.stop();
    ASSERT_TRUE(remove_device(pair_->a()).ok());
    ControlCompletion done[4];
    ASSERT_EQ(context.poll_control(done), 1U);
    EXPECT_EQ(done[0].request_id, 51U);
    EXPECT_EQ(done[0].op, ControlOp::create_cq);
    EXPECT_EQ(done[0].status, StatusCode::device_removed);
    EXPECT_FALSE(done[0].message.empty());
    EXPECT_FALSE(cq.ready());
    EXPECT_TRUE(cq.destroy().ok()) << "a handle whose creation failed just goes";
    EXPECT_TRUE(context.close().ok());
}

TEST_P(Conformance, ConnectionDescriptorExport) {
    Context context = open(pair_->a());
    Objects objects = make_qp(context);
    std::uint32_t length = 4;
    std::uint8_t small[4] = {};
    EXPECT_EQ(objects.qp.export_connection(nullptr, small, &length).code(),
              StatusCode::buffer_too_small);
    EXPECT_EQ(length, sizeof(ConnectionDescriptor));
    ConnectionDescriptor descriptor;
    length = sizeof(descriptor);
    ASSERT_TRUE(objects.qp.export_connection(nullptr, &descriptor, &length).ok());
    EXPECT_EQ(descriptor.qpn, objects.qp.qpn());
    EXPECT_EQ(descriptor.gid, pair_->gid_a());
    EXPECT_EQ(descriptor.size, sizeof(ConnectionDescriptor));
}

// ---- events
// --------------------------------------------------------------------------------------

TEST_P(Conformance, PortEventsFollowTheLink) {
    Context context = open(pair_->a());
    Context second = open(pair_->a());
    ControlCompletion none[1];
    Event events[4];
    (void)context.poll_control(none);
    EXPECT_EQ(context.poll_events(events), 0U) << "no change, no event";
    ASSERT_TRUE(pair_->set_link_a(false));
    (void)context.poll_control(none); // control progress notices the link
    ASSERT_EQ(context.poll_events(events), 1U);
    EXPECT_EQ(events[0].type, EventType::port_error);
    EXPECT_EQ(events[0].port, 1);
    ASSERT_EQ(second.poll_events(events), 1U) << "every context hears about the port";
    EXPECT_EQ(events[0].type, EventType::port_error);
    std::vector<std::uint8_t> buffer(512);
    std::uint32_t got = static_cast<std::uint32_t>(buffer.size());
    ASSERT_TRUE(context.query_port(1, buffer.data(), &got).ok());
    PortAttr port;
    std::memcpy(&port, buffer.data(), sizeof(port));
    EXPECT_EQ(port.state, PortState::down);
    ASSERT_TRUE(pair_->set_link_a(true));
    (void)context.poll_control(none);
    ASSERT_EQ(context.poll_events(events), 1U);
    EXPECT_EQ(events[0].type, EventType::port_active);
}

TEST_P(Conformance, QpFatalThenLastWqeWhenRetriesRunOut) {
    Context context = open(pair_->a());
    Context other = open(pair_->a());
    Context peer = open(pair_->b());
    Objects objects = make_qp(context);
    auto buffer = mem::DmaBuffer::allocate(4096);
    ASSERT_TRUE(buffer.ok());
    auto mr = objects.pd.register_memory(buffer->data(), 4096, mem::access_local_write);
    ASSERT_TRUE(mr.ok());
    // Connected to a QPN nobody has on the peer: nothing is ever acknowledged.
    ASSERT_TRUE(to_init(objects.qp).ok());
    QpAttr rtr = rtr_attr(pair_->gid_b(), 0xabcde);
    rtr.dest_mac = mac_of(peer);
    ASSERT_TRUE(objects.qp.modify(rtr, rtr_mask).ok());
    ASSERT_TRUE(objects.qp.modify(quick_rts_attr(), rts_mask).ok());
    Event events[8];
    EXPECT_EQ(context.poll_events(events), 0U) << "connecting raises nothing";

    SendWr send;
    send.wr_id = 5;
    send.opcode = WrOpcode::send;
    send.flags = send_signaled;
    send.num_sge = 1;
    send.sge = {reinterpret_cast<std::uint64_t>(buffer->data()), 64, mr->lkey()};
    ASSERT_EQ(post_send(objects.qp, {&send, 1}), 1);
    WorkCompletion wc;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (poll_cq(objects.cq, {&wc, 1}) == 0 && std::chrono::steady_clock::now() < deadline) {
    }
    ASSERT_EQ(wc.wr_id, 5U) << "no completion";
    EXPECT_EQ(wc.status, WcStatus::retry_exceeded);

    ASSERT_EQ(context.poll_events(events), 2U);
    EXPECT_EQ(objects.qp.state(), QpState::err) << "qp_fatal tells the class too";
    EXPECT_EQ(events[0].type, EventType::qp_fatal);
    EXPECT_EQ(events[0].qpn, objects.qp.qpn());
    EXPECT_EQ(events[1].type, EventType::qp_last_wqe_reached);
    EXPECT_EQ(events[1].qpn, objects.qp.qpn());
    EXPECT_EQ(other.poll_events(events), 0U) << "a QP's events go to the context that holds it";

    // Once per entry into ERR: what is posted now is flushed without another event.
    RecvWr recv;
    recv.wr_id = 6;
    ASSERT_EQ(post_recv(objects.qp, {&recv, 1}), 1);
    ASSERT_EQ(poll_cq(objects.cq, {&wc, 1}), 1);
    EXPECT_EQ(wc.status, WcStatus::wr_flush_error);
    EXPECT_EQ(context.poll_events(events), 0U);
}

TEST_P(Conformance, LastWqeReachedWhenTheApplicationMovesTheQpToError) {
    Context context = open(pair_->a());
    Objects objects = make_qp(context);
    ASSERT_TRUE(to_init(objects.qp).ok());
    RecvWr recv[2];
    recv[0].wr_id = 1;
    recv[1].wr_id = 2;
    ASSERT_EQ(post_recv(objects.qp, {recv, 2}), 2);
    QpAttr err;
    err.state = QpState::err;
    ASSERT_TRUE(objects.qp.modify(err, qp_attr_state).ok());
    WorkCompletion wc[4];
    ASSERT_EQ(poll_cq(objects.cq, {wc, 4}), 2);
    EXPECT_EQ(wc[1].status, WcStatus::wr_flush_error);
    Event events[4];
    ASSERT_EQ(context.poll_events(events), 1U) << "last WQE reached, and no qp_fatal";
    EXPECT_EQ(events[0].type, EventType::qp_last_wqe_reached);
    EXPECT_EQ(events[0].qpn, objects.qp.qpn());

    // Every entry into ERR has its own.
    QpAttr reset;
    reset.state = QpState::reset;
    ASSERT_TRUE(objects.qp.modify(reset, qp_attr_state).ok());
    ASSERT_TRUE(to_init(objects.qp).ok());
    EXPECT_EQ(context.poll_events(events), 0U);
    ASSERT_TRUE(objects.qp.modify(err, qp_attr_state).ok());
    ASSERT_EQ(context.poll_events(events), 1U);
    EXPECT_EQ(events[0].type, EventType::qp_last_wqe_reached);
}

TEST_P(Conformance, QpFatalFromAGroupAnotherThreadPolls) {
    Context context = open(pair_->a());
    Context peer = open(pair_->b());
    auto pd = context.alloc_pd();
    ASSERT_TRUE(pd.ok());
    auto buffer = mem::DmaBuffer::allocate(4096);
    ASSERT_TRUE(buffer.ok());
    auto mr = pd->register_memory(buffer->data(), 4096, mem::access_local_write);
    ASSERT_TRUE(mr.ok());
    GroupOwner owner(std::move(context.create_cq(256, 0).value()));
    const bool pends = pair_->owned_group_pends();

    // Created and connected while the owner polls: every step goes through it.
    QpInitAttr init;
    init.pd = &pd.value();
    init.send_cq = &owner.cq();
    init.recv_cq = &owner.cq();
    QueuePair qp;
    ASSERT_TRUE(completes(context, peer, into(qp, context.create_qp(init, 61)), 61,
                          ControlOp::create_qp, pends));
    ASSERT_TRUE(completes(context, peer, qp.modify(init_attr(), init_mask, 62), 62,
                          ControlOp::modify_qp, pends));
    QpAttr rtr = rtr_attr(pair_->gid_b(), 0xabcde);
    rtr.dest_mac = mac_of(peer);
    ASSERT_TRUE(
        completes(context, peer, qp.modify(rtr, rtr_mask, 63), 63, ControlOp::modify_qp, pends));
    ASSERT_TRUE(completes(context, peer, qp.modify(quick_rts_attr(), rts_mask, 64), 64,
                          ControlOp::modify_qp, pends));
    ASSERT_EQ(qp.state(), QpState::rts);

    // The post is the owner's to make; the retries run out on its thread.
    SendWr send;
    send.wr_id = 66;
    send.opcode = WrOpcode::send;
    send.flags = send_signaled;
    send.num_sge = 1;
    send.sge = {reinterpret_cast<std::uint64_t>(buffer->data()), 64, mr->lkey()};
    std::uint16_t posted = 0;
    owner.run([&] { posted = post_send(qp, {&send, 1}); });
    ASSERT_EQ(posted, 1);
    std::vector<Event> seen;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (seen.size() < 2 && std::chrono::steady_clock::now() < deadline) {
        Event events[4];
        const std::size_t n = context.poll_events(events);
        seen.insert(seen.end(), events, events + n);
        std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    ASSERT_EQ(seen.size(), 2U) << "the events the owner's engine recorded reach poll_events";
    EXPECT_EQ(seen[0].type, EventType::qp_fatal);
    EXPECT_EQ(seen[0].qpn, qp.qpn());
    EXPECT_EQ(seen[1].type, EventType::qp_last_wqe_reached);
    EXPECT_EQ(qp.state(), QpState::err);
    const auto completions = owner.completions();
    ASSERT_EQ(completions.size(), 1U);
    EXPECT_EQ(completions[0].wr_id, 66U);
    EXPECT_EQ(completions[0].status, WcStatus::retry_exceeded);

    ASSERT_TRUE(completes(context, peer, qp.destroy(65), 65, ControlOp::destroy_qp, pends));
    owner.stop();
    EXPECT_TRUE(owner.released());
}

// ---- device removal (seed 000's forced close) -------------------------------------------------

TEST_P(Conformance, RemovedDeviceFailsEveryCallUntilReleased) {
    Context context = open(pair_->a());
    Objects objects = make_qp(context);
    auto buffer = mem::DmaBuffer::allocate(4096);
    auto mr = objects.pd.register_memory(buffer->data(), 4096, mem::access_local_write);
    ASSERT_TRUE(mr.ok());
    const std::string name = device_name(pair_->a());
    ASSERT_TRUE(remove_device(pair_->a()).ok());

    Event events[4];
    ASSERT_EQ(context.poll_events(events), 1U);
    EXPECT_EQ(events[0].type, EventType::device_removed);
    EXPECT_FALSE(find_device(name).ok());

    std::vector<std::uint8_t> attr(1024);
    std::uint32_t got = static_cast<std::uint32_t>(attr.size());
    EXPECT_EQ(context.query_device(attr.data(), &got).code(), StatusCode::device_removed);
    EXPECT_EQ(context.alloc_pd().code(), StatusCode::device_removed);
    EXPECT_EQ(context.create_cq(16).code(), StatusCode::device_removed);
    EXPECT_EQ(to_init(objects.qp).code(), StatusCode::device_removed);
    EXPECT_EQ(objects.pd.register_memory(buffer->data(), 64, mem::access_local_write).code(),
              StatusCode::device_removed);
    RecvWr recv;
    EXPECT_EQ(post_recv(objects.qp, {&recv, 1}), 0) << "the fast path is a no-op now";
    WorkCompletion wc;
    EXPECT_EQ(poll_cq(objects.cq, {&wc, 1}), 0);
    EXPECT_EQ(Context::open(pair_->a()).code(), StatusCode::device_removed);

    // Releasing always works, and then the client can close.
    EXPECT_EQ(context.close().code(), StatusCode::busy);
    EXPECT_TRUE(mr->deregister().ok());
    EXPECT_TRUE(objects.qp.destroy().ok());
    EXPECT_TRUE(objects.cq.destroy().ok());
    EXPECT_TRUE(objects.pd.destroy().ok());
    EXPECT_TRUE(context.close().ok());
}

INSTANTIATE_TEST_SUITE_P(Drivers, Conformance, ::testing::Values(swroce_factory()),
                         [](const ::testing::TestParamInfo<DriverFactory>& param) {
                             return param.param.name;
                         });

} // namespace
} // namespace prdma::rdma::conformance
