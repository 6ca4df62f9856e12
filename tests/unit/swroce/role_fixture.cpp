// The role test bed: one device per test (fresh counters, fresh QP), torn down in the order the
// driver needs: the QP to RESET (its queues forgotten), the objects, the context, then the
// device (it stops the port), the port and its rings.
#include "role_fixture.hpp"

#include <cstring>
#include <utility>

#include <rte_bus_vdev.h>
#include <rte_cycles.h>
#include <rte_errno.h>
#include <rte_eth_ring.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_ring.h>

#include <prdma/rdmadev/driver.hpp>
#include <prdma/rdmadev/fastpath.hpp>
#include <prdma/rdmadev/rdmadev.hpp>
#include <prdma/roce/psn.hpp>

#include "eal_environment.hpp"

namespace prdma::swroce::test {

namespace {

const auto* const g_environment =
    test_support::add_eal_environment("swroce_roles_test", {"--log-level=prdma.*:error"});

constexpr mem::AccessFlags remote_access = mem::access_local_write | mem::access_remote_write |
                                           mem::access_remote_read | mem::access_remote_atomic;

std::uint8_t pristine_byte(std::size_t i) {
    const bool in_remote = i >= remote_offset && i < remote_offset + remote_length;
    const bool in_local = i >= local_offset && i < local_offset + local_length;
    if (!in_remote && !in_local) {
        return guard_byte;
    }
    const auto b = static_cast<std::uint8_t>(i * 13 + 7);
    return b == guard_byte ? 0x11 : b;
}

} // namespace

SentFrames::~SentFrames() {
    for (rte_mbuf* m : mbufs_) {
        rte_pktmbuf_free(m);
    }
}

SentFrames SentFrames::take(TxBatch& tx) {
    SentFrames sent;
    sent.mbufs_.assign(tx.mbufs.begin(), tx.mbufs.begin() + tx.count);
    tx.count = 0;
    sent.frames_.reserve(sent.mbufs_.size());
    for (rte_mbuf* m : sent.mbufs_) {
        const std::span<const std::uint8_t> bytes(rte_pktmbuf_mtod(m, const std::uint8_t*),
                                                  rte_pktmbuf_data_len(m));
        sent.frames_.push_back(roce::parse_roce_frame(bytes));
        EXPECT_TRUE(sent.frames_.back().ok()) << "a role built a frame that does not parse: "
                                              << roce::parse_error_name(sent.frames_.back().error);
    }
    return sent;
}

void RoleTest::SetUp() {
    make_port_and_device();
    ASSERT_FALSE(HasFatalFailure());
    make_objects();
    ASSERT_FALSE(HasFatalFailure());
    connect(rq_psn, sq_psn);
}

void RoleTest::TearDown() {
    if (qp_) {
        rdma::QpAttr reset;
        reset.state = rdma::QpState::reset;
        EXPECT_TRUE(qp_.modify(reset, rdma::qp_attr_state).ok());
    }
    remote_mr_ = {};
    local_mr_ = {};
    qp_ = {};
    send_cq_ = {};
    recv_cq_ = {};
    {
        // Its destructor, not a move-assignment, so a PD still in use is left to its last child.
        const rdma::ProtectionDomain last = std::move(pd_);
    }
    if (context_) {
        std::array<rdma::ControlCompletion, 4> done;
        for (int i = 0; i < 100 && context_->resources().total() != 0; ++i) {
            (void)context_->poll_control(done);
        }
        EXPECT_EQ(context_->resources().total(), 0U) << "objects left behind";
    }
    context_.reset();
    buffer_.reset();
    (void)rte_vdev_uninit(("rdma_swroce_" + tag_).c_str());
    (void)rte_vdev_uninit(("net_ring_" + tag_).c_str());
    rte_ring_free(to_device_);
    rte_ring_free(from_device_);
}

void RoleTest::make_port_and_device() {
    static int instance = 0;
    tag_ = "roles" + std::to_string(instance++);
    const int socket = static_cast<int>(rte_socket_id());
    to_device_ =
        rte_ring_create((tag_ + "in").c_str(), 1024, socket, RING_F_SP_ENQ | RING_F_SC_DEQ);
    from_device_ =
        rte_ring_create((tag_ + "out").c_str(), 1024, socket, RING_F_SP_ENQ | RING_F_SC_DEQ);
    ASSERT_NE(to_device_, nullptr) << rte_strerror(rte_errno);
    ASSERT_NE(from_device_, nullptr) << rte_strerror(rte_errno);
    ASSERT_GE(rte_eth_from_rings(tag_.c_str(), &to_device_, 1, &from_device_, 1, rte_socket_id()),
              0)
        << rte_strerror(rte_errno);
    auto device =
        rdma::create_device("rdma_swroce_" + tag_ + ",port=net_ring_" + tag_ + ",ip=10.0.0.2");
    ASSERT_TRUE(device.ok()) << device.error().to_string();
    device_ = device.value();
    device_object_ =
        static_cast<SwroceDevice*>(rdma::driver::device(device_)->config.driver_private);
    ASSERT_NE(device_object_, nullptr);
}

void RoleTest::make_objects() {
    auto context = rdma::Context::open(device_);
    ASSERT_TRUE(context.ok()) << context.error().to_string();
    context_.emplace(std::move(context.value()));
    auto pd = context_->alloc_pd();
    ASSERT_TRUE(pd.ok()) << pd.error().to_string();
    pd_ = std::move(pd.value());
    auto send_cq = context_->create_cq(1024);
    auto recv_cq = context_->create_cq(1024);
    ASSERT_TRUE(send_cq.ok() && recv_cq.ok());
    send_cq_ = std::move(send_cq.value());
    recv_cq_ = std::move(recv_cq.value());
    rdma::QpInitAttr init;
    init.pd = &pd_;
    init.send_cq = &send_cq_;
    init.recv_cq = &recv_cq_;
    init.caps.max_send_wr = 64;
    init.caps.max_recv_wr = 64;
    auto qp = context_->create_qp(init);
    ASSERT_TRUE(qp.ok()) << qp.error().to_string();
    qp_ = std::move(qp.value());
    qp_object_ = static_cast<SwroceQp*>(qp_.driver_queue());
    ASSERT_NE(qp_object_, nullptr);

    auto buffer = mem::DmaBuffer::allocate(buffer_size, 4096);
    ASSERT_TRUE(buffer.ok()) << buffer.error().to_string();
    buffer_.emplace(std::move(buffer.value()));
    auto* base = static_cast<std::uint8_t*>(buffer_->data());
    for (std::size_t i = 0; i < buffer_size; ++i) {
        base[i] = pristine_byte(i);
    }
    snapshot();
    auto remote_mr = pd_.register_memory(base + remote_offset, remote_length, remote_access);
    auto local_mr = pd_.register_memory(base + local_offset, local_length,
                                        mem::access_local_write | mem::access_local_read);
    ASSERT_TRUE(remote_mr.ok()) << remote_mr.error().to_string();
    ASSERT_TRUE(local_mr.ok()) << local_mr.error().to_string();
    remote_mr_ = std::move(remote_mr.value());
    local_mr_ = std::move(local_mr.value());
}

void RoleTest::connect(std::uint32_t responder_psn, std::uint32_t requester_psn) {
    rdma::QpAttr reset;
    reset.state = rdma::QpState::reset;
    ASSERT_TRUE(qp_.modify(reset, rdma::qp_attr_state).ok());
    rdma::ConnectionDescriptor peer;
    peer.qpn = peer_qpn;
    peer.psn = responder_psn;
    peer.gid = rdma::Gid::from_ipv4(peer_ip);
    std::memcpy(peer.mac, peer_mac.data(), sizeof(peer.mac));
    rdma::ConnectOptions options;
    options.sq_psn = requester_psn;
    options.timeout = 18; // ~1 s: the tests run the timers themselves, if at all
    options.rnr_retry = 6;
    options.max_rd_atomic = 4;
    options.max_dest_rd_atomic = 4;
    options.min_rnr_timer = 1;
    const Status status = qp_.connect(peer, options);
    ASSERT_TRUE(status.ok()) << status.error().to_string();
    ASSERT_EQ(qp().state(), rdma::QpState::rts) << "the modify must apply at once: no owner";
    ASSERT_EQ(qp().mtu(), mtu);
}

std::uint8_t* RoleTest::remote(std::size_t offset) const {
    return static_cast<std::uint8_t*>(buffer_->data()) + remote_offset + offset;
}
std::uint64_t RoleTest::remote_va(std::size_t offset) const {
    return reinterpret_cast<std::uint64_t>(remote(offset));
}
std::uint8_t* RoleTest::local(std::size_t offset) const {
    return static_cast<std::uint8_t*>(buffer_->data()) + local_offset + offset;
}
std::uint64_t RoleTest::local_va(std::size_t offset) const {
    return reinterpret_cast<std::uint64_t>(local(offset));
}

std::vector<std::size_t> RoleTest::changed_bytes() const {
    const auto* now = static_cast<const std::uint8_t*>(buffer_->data());
    std::vector<std::size_t> changed;
    for (std::size_t i = 0; i < buffer_size; ++i) {
        if (now[i] != reference_[i]) {
            changed.push_back(i);
        }
    }
    return changed;
}

void RoleTest::snapshot() {
    const auto* now = static_cast<const std::uint8_t*>(buffer_->data());
    reference_.assign(now, now + buffer_size);
}

void RoleTest::post_receive(std::uint64_t wr_id, std::size_t local_off, std::uint32_t length) {
    rdma::RecvWr wr;
    wr.wr_id = wr_id;
    wr.num_sge = 1;
    wr.sge = {local_va(local_off), length, local_lkey()};
    ASSERT_EQ(rdma::post_recv(qp_, {&wr, 1}), 1);
}

void RoleTest::post_deferred(const rdma::SendWr& posted) {
    rdma::SendWr wr = posted;
    wr.flags |= rdma::send_defer;
    ASSERT_EQ(rdma::post_send(qp_, {&wr, 1}), 1);
}

rdma::SendWr RoleTest::write_wr(std::uint64_t wr_id, std::size_t local_off, std::uint32_t length,
                                std::uint64_t remote_addr) const {
    rdma::SendWr wr;
    wr.wr_id = wr_id;
    wr.opcode = rdma::WrOpcode::rdma_write;
    wr.flags = rdma::send_signaled;
    wr.num_sge = 1;
    wr.sge = {local_va(local_off), length, local_lkey()};
    wr.rdma.remote_addr = remote_addr;
    wr.rdma.rkey = 0x1234; // the peer's: never checked here
    return wr;
}

rdma::SendWr RoleTest::read_wr(std::uint64_t wr_id, std::size_t local_off, std::uint32_t length,
                               std::uint64_t remote_addr) const {
    rdma::SendWr wr = write_wr(wr_id, local_off, length, remote_addr);
    wr.opcode = rdma::WrOpcode::rdma_read;
    return wr;
}

std::vector<rdma::WorkCompletion> RoleTest::drain(SwroceCq& cq) {
    std::vector<rdma::WorkCompletion> out;
    while (!cq.ring.empty()) {
        out.push_back(cq.ring.front());
        cq.ring.pop();
    }
    return out;
}

roce::FrameHeaders RoleTest::from_peer(roce::Opcode opcode, std::uint32_t psn) const {
    roce::FrameHeaders h;
    h.eth.src = peer_mac;
    h.eth.dst = dev().port.mac();
    h.ipv4.src = peer_ip;
    h.ipv4.dst = our_ip;
    h.bth.opcode = opcode;
    h.bth.dest_qp = qp().qpn;
    h.bth.psn = psn & roce::psn_mask;
    return h;
}

namespace {

// A crafted frame parsed back: what rx.cpp hands the roles. False (test failed) if it does not
// build or parse.
bool build_and_parse(const roce::FrameHeaders& h, std::span<const std::uint8_t> payload,
                     std::vector<std::uint8_t>& bytes, roce::ParsedFrame& frame) {
    bytes.assign(payload.size() + 256, 0);
    const roce::FrameLayout layout = roce::build_frame(h, payload, bytes);
    if (!layout.ok()) {
        ADD_FAILURE() << "cannot build the frame: " << roce::build_error_name(layout.error);
        return false;
    }
    bytes.resize(layout.wire_length);
    if (roce::parse_roce_frame(bytes, frame) != roce::ParseError::ok) {
        ADD_FAILURE() << "the crafted frame does not parse: "
                      << roce::parse_error_name(frame.error);
        return false;
    }
    return true;
}

} // namespace

void RoleTest::respond_to(const roce::FrameHeaders& h, std::span<const std::uint8_t> payload) {
    std::vector<std::uint8_t> bytes;
    roce::ParsedFrame frame;
    if (build_and_parse(h, payload, bytes, frame)) {
        respond(qp(), frame);
    }
}

void RoleTest::deliver(const roce::FrameHeaders& h, std::span<const std::uint8_t> payload) {
    std::vector<std::uint8_t> bytes(payload.size() + 256, 0);
    const roce::FrameLayout layout = roce::build_frame(h, payload, bytes);
    ASSERT_TRUE(layout.ok()) << roce::build_error_name(layout.error);
    rte_mempool* pool = dev().port.mempool(0);
    ASSERT_NE(pool, nullptr);
    rte_mbuf* mbuf = rte_pktmbuf_alloc(pool);
    ASSERT_NE(mbuf, nullptr);
    char* room = rte_pktmbuf_append(mbuf, static_cast<std::uint16_t>(layout.wire_length));
    ASSERT_NE(room, nullptr);
    std::memcpy(room, bytes.data(), layout.wire_length);
    ASSERT_EQ(rte_ring_enqueue(to_device_, mbuf), 0);
}

void RoleTest::complete_with(const roce::FrameHeaders& h, std::uint64_t now,
                             std::span<const std::uint8_t> payload) {
    std::vector<std::uint8_t> bytes;
    roce::ParsedFrame frame;
    if (build_and_parse(h, payload, bytes, frame)) {
        complete(qp(), frame, now);
    }
}

void RoleTest::acknowledge(std::uint32_t psn, std::uint8_t syndrome, std::uint64_t now) {
    roce::FrameHeaders h = from_peer(roce::Opcode::rc_acknowledge, psn);
    h.aeth = {syndrome, 0};
    complete_with(h, now);
}

SentFrames RoleTest::run_requester_once(std::uint64_t now) {
    TxBatch tx;
    run_requester(qp(), tx, now);
    return SentFrames::take(tx);
}

std::uint64_t RoleTest::tsc() {
    return rte_get_tsc_cycles();
}

std::vector<std::uint8_t> RoleTest::pattern(std::size_t length, std::uint8_t seed) {
    std::vector<std::uint8_t> bytes(length);
    for (std::size_t i = 0; i < length; ++i) {
        bytes[i] = static_cast<std::uint8_t>(seed + i * 7 + (i >> 8));
    }
    return bytes;
}

} // namespace prdma::swroce::test
