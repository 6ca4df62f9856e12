// The rig is one process-wide object: EAL cannot start twice, and building a device per input
// would cost more than the input. Between inputs only the QP goes back to RESET (which forgets
// every bit of connection state) and the buffer is restored, so each input starts the same.
#include "responder_rig.hpp"

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>

#include <rte_bus_vdev.h>
#include <rte_errno.h>
#include <rte_eth_ring.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_ring.h>

#include <prdma/rdmadev/fastpath.hpp>
#include <prdma/rdmadev/rdmadev.hpp>
#include <prdma/roce/packet.hpp>

#include "arp.hpp"

namespace prdma::fuzz {

namespace {

// The buffer: four regions at odd-ish offsets (bounds must be exact to the byte, not to a page),
// guard bytes everywhere else.
constexpr std::size_t buffer_size = std::size_t{64} * 1024;
struct Span {
    std::size_t offset;
    std::size_t length;
};
constexpr Span region_rw{0x1008, 20000};
constexpr Span region_ro{0x7008, 4096};
constexpr Span region_wo{0x9008, 4096};
constexpr Span region_local{0xb000, 16384};
constexpr std::uint8_t guard_byte = 0xee;
constexpr std::size_t guard_run = 8; // this many guard bytes in a response: a leak

// Receives (wr_id 1-4) and requester work (wr_id 11-15), offsets into the local region. Receive 3
// names the read-only region's lkey, which has no local write: a SEND into it must be refused.
constexpr std::array<Span, 4> receive_spans = {{{0, 4096}, {4200, 700}, {5000, 900}, {6000, 64}}};
constexpr Span read_target_a{8000, 1000};
constexpr Span read_target_b{9200, 1100};
constexpr Span atomic_target{12400, 16}; // compare-swap's result, then fetch-add's
constexpr Span write_source{13000, 64};
constexpr Span send_source{13100, 64};

constexpr std::uint32_t our_ip = 0x0a000002;
constexpr std::uint32_t peer_ip = 0x0a000001;
constexpr std::uint32_t peer_qpn = 0xabc;
constexpr std::array<std::uint8_t, 6> peer_mac = {0x02, 0, 0, 0, 0, 0x01};
constexpr std::uint64_t peer_va = 0x10000;
constexpr std::uint32_t peer_rkey = 0x99;

[[noreturn]] __attribute__((format(printf, 1, 2))) void fail(const char* format, ...) {
    std::va_list args;
    va_start(args, format);
    std::fputs("responder fuzz: ", stderr);
    std::vfprintf(stderr, format, args);
    std::fputc('\n', stderr);
    va_end(args);
    std::abort();
}

template <typename T>
T must(Result<T> result, const char* what) {
    if (!result.ok()) {
        fail("%s: %s", what, result.error().to_string().c_str());
    }
    return std::move(result.value());
}

void must(const Status& status, const char* what) {
    if (!status.ok()) {
        fail("%s: %s", what, status.error().to_string().c_str());
    }
}

rdma::Mtu mtu_code(std::uint32_t bytes) {
    switch (bytes) {
    case 256:
        return rdma::Mtu::mtu_256;
    case 512:
        return rdma::Mtu::mtu_512;
    default:
        return rdma::Mtu::mtu_1024;
    }
}

std::uint8_t pristine_byte(std::size_t i) {
    const auto b = static_cast<std::uint8_t>(i * 13 + 7);
    return b == guard_byte ? 0x11 : b;
}

bool inside(std::size_t i, const Span& s) {
    return i >= s.offset && i < s.offset + s.length;
}

// Whether `bytes` holds guard_run guard bytes in a row. Not coverage-instrumented: the fuzzer
// must not learn the guard value from this comparison and write it into a region on purpose.
__attribute__((no_sanitize("coverage"))) bool has_guard_run(std::span<const std::uint8_t> bytes) {
    std::size_t run = 0;
    for (const std::uint8_t b : bytes) {
        run = b == guard_byte ? run + 1 : 0;
        if (run == guard_run) {
            return true;
        }
    }
    return false;
}

// Whether byte `i` of the buffer may differ from the pristine copy after `input`.
bool writable(std::size_t i, const ResponderInput& input) {
    if (inside(i, region_rw) || inside(i, region_wo)) {
        return true; // remote write access
    }
    if (!inside(i, region_local)) {
        return false;
    }
    const std::size_t local = i - region_local.offset;
    bool posted = false;
    if (input.receives) {
        for (const Span& s : receive_spans) {
            posted = posted || inside(local, s);
        }
    }
    if (input.requester_work) {
        posted = posted || inside(local, read_target_a) || inside(local, read_target_b) ||
                 inside(local, atomic_target);
    }
    return posted;
}

} // namespace

ResponderRig& ResponderRig::instance() {
    static ResponderRig rig;
    return rig;
}

ResponderRig::ResponderRig() {
    EalOptions options;
    options.program_name = "responder_fuzz";
    options.args = {"-l", "0", "--no-huge", "-m", "256", "--no-shconf", "--log-level", "*:error"};
    auto eal = Eal::start(options);
    if (!eal.ok()) {
        fail("EAL: %s", eal.error().to_string().c_str());
    }
    eal_.emplace(std::move(eal.value()));
    make_port_and_device();
    make_objects();
}

ResponderRig::~ResponderRig() {
    // Objects, then the device (it stops the port), then the port, its rings and the pool. RESET
    // first: a QP with work in flight would only be destroyed later, through poll_control.
    rdma::QpAttr reset;
    reset.state = rdma::QpState::reset;
    (void)qp_.modify(reset, rdma::qp_attr_state);
    regions_ = {};
    qp_ = {};
    cq_ = {};
    {
        // Its destructor, not a move-assignment: ProtectionDomain::operator= drops (leaks) a PD
        // whose destroy() is refused, where the destructor leaves it to its last child.
        const rdma::ProtectionDomain last = std::move(pd_);
    }
    std::array<rdma::ControlCompletion, 4> done;
    for (int i = 0; i < 100 && context_->resources().total() != 0; ++i) {
        (void)context_->poll_control(done);
    }
    context_.reset();
    buffer_.reset();
    (void)rte_vdev_uninit("rdma_swroce_fuzz");
    (void)rte_vdev_uninit("net_ring_fuzz");
    for (std::size_t q = 0; q < to_device_.size(); ++q) {
        rte_ring_free(to_device_[q]);
        rte_ring_free(from_device_[q]);
    }
    rte_mempool_free(pool_);
}

void ResponderRig::make_port_and_device() {
    const int socket = static_cast<int>(rte_socket_id());
    for (std::size_t q = 0; q < to_device_.size(); ++q) {
        const std::string suffix = std::to_string(q);
        to_device_[q] = rte_ring_create(("fuzz_in" + suffix).c_str(), 1024, socket,
                                        RING_F_SP_ENQ | RING_F_SC_DEQ);
        from_device_[q] = rte_ring_create(("fuzz_out" + suffix).c_str(), 1024, socket,
                                          RING_F_SP_ENQ | RING_F_SC_DEQ);
        if (to_device_[q] == nullptr || from_device_[q] == nullptr) {
            fail("rings: %s", rte_strerror(rte_errno));
        }
    }
    pool_ = rte_pktmbuf_pool_create("fuzz_frames", 1023, 0, 0,
                                    RTE_PKTMBUF_HEADROOM + max_frame_length, socket);
    if (pool_ == nullptr) {
        fail("mbuf pool: %s", rte_strerror(rte_errno));
    }
    if (rte_eth_from_rings("fuzz", to_device_.data(), to_device_.size(), from_device_.data(),
                           from_device_.size(), rte_socket_id()) < 0) {
        fail("net_ring port: %s", rte_strerror(rte_errno));
    }
    device_ = must(rdma::create_device("rdma_swroce_fuzz,port=net_ring_fuzz,ip=10.0.0.2,queues=2"),
                   "swroce device");
}

void ResponderRig::make_objects() {
    context_.emplace(must(rdma::Context::open(device_), "context"));
    pd_ = must(context_->alloc_pd(), "PD");
    cq_ = must(context_->create_cq(256), "CQ");
    rdma::QpInitAttr init;
    init.pd = &pd_;
    init.send_cq = &cq_;
    init.recv_cq = &cq_;
    init.caps.max_send_wr = 16;
    init.caps.max_recv_wr = 16;
    qp_ = must(context_->create_qp(init), "QP");
    buffer_.emplace(must(mem::DmaBuffer::allocate(buffer_size, 4096), "DMA buffer"));
    pristine_.resize(buffer_size, guard_byte);
    auto* base = static_cast<std::uint8_t*>(buffer_->data());
    const std::array<std::pair<Span, mem::AccessFlags>, fixup_regions> layout = {{
        {region_rw, mem::access_local_write | mem::access_remote_write | mem::access_remote_read |
                        mem::access_remote_atomic},
        {region_ro, mem::access_remote_read},
        {region_wo, mem::access_local_write | mem::access_remote_write},
        {region_local, mem::access_local_write},
    }};
    for (std::size_t r = 0; r < fixup_regions; ++r) {
        const auto& [span, access] = layout[r];
        for (std::size_t i = span.offset; i < span.offset + span.length; ++i) {
            pristine_[i] = pristine_byte(i);
        }
        regions_[r] = must(pd_.register_memory(base + span.offset, span.length, access), "MR");
        target_.regions[r] = {reinterpret_cast<std::uint64_t>(base + span.offset),
                              regions_[r].rkey()};
    }
    target_.qpn = qp_.qpn();
    target_.peer_ipv4 = peer_ip;
}

void ResponderRig::connect(const ResponderInput& input) {
    rdma::QpAttr reset;
    reset.state = rdma::QpState::reset;
    must(qp_.modify(reset, rdma::qp_attr_state), "modify to RESET");
    rdma::ConnectionDescriptor peer;
    peer.qpn = peer_qpn;
    peer.psn = input.psn_base;
    peer.gid = rdma::Gid::from_ipv4(peer_ip);
    std::memcpy(peer.mac, peer_mac.data(), sizeof(peer.mac));
    rdma::ConnectOptions options;
    options.path_mtu = mtu_code(input.path_mtu);
    options.sq_psn = input.psn_base;
    options.timeout = 18; // ~1 s: no retransmission inside one input
    options.rnr_retry = 6;
    options.max_rd_atomic = 4;
    options.max_dest_rd_atomic = 4;
    options.min_rnr_timer = 1;
    must(qp_.connect(peer, options), "connect");
    target_.request_psn_base = input.psn_base;
    target_.response_psn_base = input.psn_base;
}

void ResponderRig::post_work(const ResponderInput& input) {
    const std::uint64_t local = target_.regions[3].addr;
    const std::uint32_t lkey = regions_[3].lkey();
    if (input.receives) {
        const std::array<rdma::Sge, 2> two = {{
            {local + receive_spans[1].offset, static_cast<std::uint32_t>(receive_spans[1].length),
             lkey},
            {local + receive_spans[2].offset, static_cast<std::uint32_t>(receive_spans[2].length),
             lkey},
        }};
        std::array<rdma::RecvWr, 4> wrs{};
        wrs[0] = {1, 1, {local, 4096, lkey}, nullptr};
        wrs[1] = {2, 2, {}, two.data()};
        wrs[2] = {3, 1, {target_.regions[1].addr, 256, regions_[1].lkey()}, nullptr};
        wrs[3] = {4, 1, {local + receive_spans[3].offset, 64, lkey}, nullptr};
        if (rdma::post_recv(qp_, {wrs.data(), 4}) != 4) {
            fail("post_recv refused a receive");
        }
    }
    if (!input.requester_work) {
        return;
    }
    // The work of prdma's own captured conversation (make-seeds.py): a WRITE (PSN +0), a READ of
    // 2100 bytes (+1..+3 at MTU 1024), a compare-swap (+4), a fetch-add (+5), then a SEND.
    const std::array<rdma::Sge, 2> read_sges = {{
        {local + read_target_a.offset, static_cast<std::uint32_t>(read_target_a.length), lkey},
        {local + read_target_b.offset, static_cast<std::uint32_t>(read_target_b.length), lkey},
    }};
    std::array<rdma::SendWr, 5> wrs{};
    for (std::size_t i = 0; i < wrs.size(); ++i) {
        wrs[i].wr_id = 11 + i;
        wrs[i].flags = rdma::send_signaled;
        wrs[i].num_sge = 1;
        wrs[i].rdma.remote_addr = peer_va + 0x1000 * i;
        wrs[i].rdma.rkey = peer_rkey;
    }
    wrs[0].opcode = rdma::WrOpcode::rdma_write;
    wrs[0].sge = {local + write_source.offset, 64, lkey};
    wrs[1].opcode = rdma::WrOpcode::rdma_read;
    wrs[1].num_sge = 2;
    wrs[1].sg_list = read_sges.data();
    for (std::size_t i = 2; i < 4; ++i) {
        wrs[i].opcode = i == 2 ? rdma::WrOpcode::atomic_cmp_swap : rdma::WrOpcode::atomic_fetch_add;
        wrs[i].sge = {local + atomic_target.offset + 8 * (i - 2), 8, lkey};
        wrs[i].atomic.remote_addr = peer_va + 0x1000 * i;
        wrs[i].atomic.compare_add = 5;
        wrs[i].atomic.swap = 7;
        wrs[i].atomic.rkey = peer_rkey;
    }
    wrs[4].opcode = rdma::WrOpcode::send;
    wrs[4].sge = {local + send_source.offset, 64, lkey};
    if (rdma::post_send(qp_, wrs) != wrs.size()) {
        fail("post_send refused a work request");
    }
}

bool ResponderRig::inject(const InputFrame& frame) {
    rte_mbuf* m = rte_pktmbuf_alloc(pool_);
    if (m == nullptr) {
        return false;
    }
    auto* data = rte_pktmbuf_mtod(m, std::uint8_t*);
    std::memcpy(data, frame.bytes.data(), frame.bytes.size());
    const std::span<std::uint8_t> bytes(data, frame.bytes.size());
    fix_up_frame(bytes, frame.flags, target_);
    guard_runs_in_input_ = guard_runs_in_input_ || has_guard_run(bytes);
    m->data_len = static_cast<std::uint16_t>(bytes.size());
    m->pkt_len = static_cast<std::uint32_t>(bytes.size());
    const std::size_t queue = (frame.flags & frame_on_second_queue) != 0 ? 1 : 0;
    if (rte_ring_enqueue(to_device_[queue], m) != 0) {
        rte_pktmbuf_free(m);
        return false;
    }
    return true;
}

void ResponderRig::drive() {
    std::array<rdma::WorkCompletion, 32> wcs;
    std::array<rte_mbuf*, 64> sent;
    std::array<rdma::ControlCompletion, 4> control;
    // Rounds after the last frame was taken: its ACK, READ responses and the requester's answers.
    int quiet_rounds = 0;
    for (int round = 0; round < 10000 && quiet_rounds < 4; ++round) {
        // The CQ drives group 0 (this thread owns it); poll_control drives group 1, which no
        // thread has claimed.
        const std::uint16_t n = rdma::poll_cq(cq_, wcs);
        for (std::uint16_t i = 0; i < n; ++i) {
            check_completion(wcs[i]);
        }
        (void)context_->poll_control(control);
        bool idle = n == 0;
        for (std::size_t q = 0; q < from_device_.size(); ++q) {
            const unsigned out = rte_ring_dequeue_burst(
                from_device_[q], reinterpret_cast<void**>(sent.data()), sent.size(), nullptr);
            for (unsigned i = 0; i < out; ++i) {
                check_sent(sent[i]);
                rte_pktmbuf_free(sent[i]);
            }
            idle = idle && out == 0 && rte_ring_count(to_device_[q]) == 0;
        }
        quiet_rounds = idle ? quiet_rounds + 1 : 0;
    }
    std::array<rdma::Event, 16> events;
    while (context_->poll_events(events) != 0) {
    }
}

void ResponderRig::check_sent(const rte_mbuf* mbuf) const {
    const std::span<const std::uint8_t> bytes(rte_pktmbuf_mtod(mbuf, const std::uint8_t*),
                                              rte_pktmbuf_data_len(mbuf));
    if (swroce::parse_arp(bytes).ok()) {
        return; // an answer to an ARP request the fuzzer sent
    }
    const roce::ParsedFrame frame = roce::parse_roce_frame(bytes);
    if (!frame.ok()) {
        fail("the device sent a frame that does not parse: %s (%zu bytes)",
             std::string(roce::parse_error_name(frame.error)).c_str(), bytes.size());
    }
    if (frame.bth.dest_qp != peer_qpn || frame.ip_version != roce::IpVersion::ipv4 ||
        frame.ipv4.src != our_ip || frame.ipv4.dst != peer_ip) {
        fail("the device sent %s to QP %#x, %#x -> %#x: not its peer",
             std::string(frame.info->name).c_str(), frame.bth.dest_qp, frame.ipv4.src,
             frame.ipv4.dst);
    }
    const roce::Operation op = frame.info->operation;
    const bool carries_memory =
        op == roce::Operation::rdma_read_response || op == roce::Operation::atomic_acknowledge;
    const std::span<const std::uint8_t> answer =
        op == roce::Operation::atomic_acknowledge
            ? bytes.subspan(
                  frame.bth_offset + frame.info->offset_of(roce::ExtHeader::atomic_ack_eth), 8)
            : frame.payload;
    if (carries_memory && !guard_runs_in_input_ && has_guard_run(answer)) {
        fail("%s at PSN %#x carries guard bytes: memory outside a readable region leaked",
             std::string(frame.info->name).c_str(), frame.bth.psn);
    }
}

void ResponderRig::check_completion(const rdma::WorkCompletion& wc) {
    const bool receive = wc.wr_id >= 1 && wc.wr_id <= 4 && receives_;
    const bool send = wc.wr_id >= 11 && wc.wr_id <= 15 && requester_work_;
    if (!receive && !send) {
        fail("completion for wr_id %llu, which was never posted (status %s)",
             static_cast<unsigned long long>(wc.wr_id),
             std::string(rdma::wc_status_name(wc.status)).c_str());
    }
    if (completed_[wc.wr_id]++ != 0) {
        fail("wr_id %llu completed twice (status %s)", static_cast<unsigned long long>(wc.wr_id),
             std::string(rdma::wc_status_name(wc.status)).c_str());
    }
    if (receive && wc.status == rdma::WcStatus::success && wc.opcode == rdma::WcOpcode::recv) {
        const std::uint32_t room = wc.wr_id == 2   ? 1600
                                   : wc.wr_id == 3 ? 0
                                   : wc.wr_id == 1 ? 4096
                                                   : 64;
        if (wc.byte_len > room) {
            fail("receive %llu completed with %u bytes in %u bytes of buffer",
                 static_cast<unsigned long long>(wc.wr_id), wc.byte_len, room);
        }
    }
}

// 64 KiB compared per input: not coverage-instrumented (a traced comparison per byte costs more
// than the input itself, and the fuzzer has nothing to learn from it).
__attribute__((no_sanitize("coverage"))) void
ResponderRig::check_memory(const ResponderInput& input) const {
    const auto* now = static_cast<const std::uint8_t*>(buffer_->data());
    const std::uint8_t* before = pristine_.data();
    for (std::size_t word = 0; word < buffer_size; word += sizeof(std::uint64_t)) {
        std::uint64_t a = 0;
        std::uint64_t b = 0;
        std::memcpy(&a, now + word, sizeof(a));
        std::memcpy(&b, before + word, sizeof(b));
        if (a == b) {
            continue;
        }
        for (std::size_t i = word; i < word + sizeof(std::uint64_t); ++i) {
            if (now[i] != before[i] && !writable(i, input)) {
                fail("byte %#zx of the buffer changed (%#x -> %#x): outside every writable range",
                     i, before[i], now[i]);
            }
        }
    }
}

void ResponderRig::run(const ResponderInput& input) {
    std::memcpy(buffer_->data(), pristine_.data(), buffer_size);
    completed_ = {};
    receives_ = input.receives;
    requester_work_ = input.requester_work;
    guard_runs_in_input_ = false;
    connect(input);
    post_work(input);
    for (std::size_t i = 0; i < input.frame_count; ++i) {
        if (!inject(input.frames[i])) {
            fail("no room for frame %zu: the device stopped taking frames", i);
        }
        if (input.poll_each_frame) {
            drive();
        }
    }
    drive();
    check_memory(input);
    if (std::getenv("PRDMA_FUZZ_DEBUG") != nullptr) {
        print_counters();
    }
}

// PRDMA_FUZZ_DEBUG=1: the device counters that moved, after each input (why an input stops
// where it does: which drop, which responder stage).
void ResponderRig::print_counters() {
    const auto stats = context_->query_stats();
    if (!stats.ok()) {
        return;
    }
    for (const rdma::Counter& c : stats.value()) {
        const std::uint64_t before = std::exchange(last_counters_[c.name], c.value);
        if (c.value != before) {
            std::fprintf(stderr, "  %s +%llu\n", c.name.c_str(),
                         static_cast<unsigned long long>(c.value - before));
        }
    }
    std::fprintf(stderr, "  QP state %s\n", std::string(rdma::qp_state_name(qp_.state())).c_str());
}

} // namespace prdma::fuzz
