// The swroce data path in one process: two devices on a crossed pair of ring ports (what A sends,
// B receives), one thread driving both. What an application pays per operation when no wire is
// in the way:
//   BM_PostPollWrite   post one signaled WRITE on A and poll until its completion (B's engine
//                      answers in the same loop): the whole RC round trip in software
//   BM_WriteBurst      32 WRITEs in one post, then both engines polled until the last completes:
//                      the streaming case (bursts each way, one ACK), per WRITE
//   BM_SrqSend         post a receive on B's SRQ and a SEND on A, poll both completions: an SRQ
//                      of one queue group against one shared by every group
//   BM_PostWriteDeferred / BM_PollEmpty   the API costs alone: queueing a WR, polling an empty CQ
//   BM_FastRegPost32   post a FAST_REG of 32 pages and the LOCAL_INV that frees the region again,
//                      and poll both completions
#include <array>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>
#include <rte_bus_vdev.h>
#include <rte_eth_ring.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_ring.h>

#include <prdma/eal.hpp>
#include <prdma/mem/dma_memory.hpp>
#include <prdma/rdmadev/fastpath.hpp>
#include <prdma/rdmadev/rdmadev.hpp>

namespace {

using namespace prdma;
using namespace prdma::rdma;

constexpr std::size_t buffer_size = 8 << 20;

struct Side {
    Context context;
    ProtectionDomain pd;
    CompletionQueue cq;
    QueuePair qp;
    std::optional<mem::DmaBuffer> buffer;
    MemoryRegionHandle mr;
    std::array<std::uint8_t, 6> mac{};
    [[nodiscard]] std::uint64_t addr() const {
        return reinterpret_cast<std::uint64_t>(buffer->data());
    }
};

Result<Side> make_side(DeviceId device) {
    auto context = Context::open(device);
    if (!context) {
        return context.error();
    }
    Side side{std::move(context.value()), {}, {}, {}, std::nullopt, {}, {}};
    side.pd = std::move(side.context.alloc_pd().value());
    side.cq = std::move(side.context.create_cq(4096).value());
    QpInitAttr init;
    init.pd = &side.pd;
    init.send_cq = &side.cq;
    init.recv_cq = &side.cq;
    init.caps.max_send_wr = 1024;
    init.caps.max_inline_data = 128;
    side.qp = std::move(side.context.create_qp(init).value());
    side.buffer.emplace(std::move(mem::DmaBuffer::allocate(buffer_size, 4096).value()));
    side.mr = std::move(side.pd
                            .register_memory(side.buffer->data(), buffer_size,
                                             mem::access_local_write | mem::access_remote_write |
                                                 mem::access_remote_read)
                            .value());
    std::vector<std::uint8_t> port(512);
    std::uint32_t got = static_cast<std::uint32_t>(port.size());
    (void)side.context.query_port(1, port.data(), &got);
    PortAttr attr;
    std::memcpy(&attr, port.data(), sizeof(attr));
    std::memcpy(side.mac.data(), attr.mac, 6);
    return side;
}

// `local` (a QP of one side) to `remote_qp`, a QP of `remote`.
Status connect(QueuePair& local, const Side& remote, const QueuePair& remote_qp,
               const Gid& remote_gid) {
    ConnectionDescriptor peer;
    peer.qpn = remote_qp.qpn();
    peer.psn = 100;
    peer.gid = remote_gid;
    std::memcpy(peer.mac, remote.mac.data(), sizeof(peer.mac)); // no ARP in a benchmark
    ConnectOptions options;
    options.max_rd_atomic = 16;
    options.max_dest_rd_atomic = 16;
    options.min_rnr_timer = 1;
    options.sq_psn = 100;
    return local.connect(peer, options);
}

const Gid gid_a = Gid::from_ipv4(0x0a000001);
const Gid gid_b = Gid::from_ipv4(0x0a000002);

// EAL, the ring ports, both devices and a connected QP pair, made once for every benchmark.
struct Bed {
    std::optional<Eal> eal;
    std::optional<Side> a;
    std::optional<Side> b;
    std::string error;
    Bed() = default;
    Bed(Bed&&) = default;
    Bed& operator=(Bed&&) = delete;
    Bed(const Bed&) = delete;
    Bed& operator=(const Bed&) = delete;
    // Objects, then devices (they stop their ports), then the ports, before EAL goes.
    ~Bed() {
        a.reset();
        b.reset();
        if (eal) {
            for (const char* name : {"rdma_swroce_bench_a", "rdma_swroce_bench_b",
                                     "net_ring_bench_a", "net_ring_bench_b"}) {
                (void)rte_vdev_uninit(name);
            }
        }
    }
};

Bed& bed() {
    static Bed instance = [] {
        Bed bed;
        EalOptions options;
        options.program_name = "prdma-bench";
        options.args = {"-l", "0", "--log-level=lib.eal:error", "--log-level=prdma.*:warning",
                        "--no-telemetry"};
        // bench/callgrind-cost runs the EAL under valgrind, which needs "--no-huge -m 256".
        if (const char* extra = std::getenv("PRDMA_BENCH_EAL_ARGS"); extra != nullptr) {
            std::istringstream words(extra);
            for (std::string word; words >> word;) {
                options.args.push_back(word);
            }
        }
        auto eal = Eal::start(options);
        if (!eal) {
            bed.error = eal.error().to_string();
            return bed;
        }
        bed.eal.emplace(std::move(eal.value()));
        rte_ring* ab = rte_ring_create("bench_ab", 1024, static_cast<int>(rte_socket_id()),
                                       RING_F_SP_ENQ | RING_F_SC_DEQ);
        rte_ring* ba = rte_ring_create("bench_ba", 1024, static_cast<int>(rte_socket_id()),
                                       RING_F_SP_ENQ | RING_F_SC_DEQ);
        if (ab == nullptr || ba == nullptr ||
            rte_eth_from_rings("bench_a", &ba, 1, &ab, 1, rte_socket_id()) < 0 ||
            rte_eth_from_rings("bench_b", &ab, 1, &ba, 1, rte_socket_id()) < 0) {
            bed.error = "cannot make the ring ports";
            return bed;
        }
        auto a = create_device("rdma_swroce_bench_a,port=net_ring_bench_a,ip=10.0.0.1");
        auto b = create_device("rdma_swroce_bench_b,port=net_ring_bench_b,ip=10.0.0.2");
        if (!a || !b) {
            bed.error = !a ? a.error().to_string() : b.error().to_string();
            return bed;
        }
        auto side_a = make_side(a.value());
        auto side_b = make_side(b.value());
        if (!side_a || !side_b) {
            bed.error = "cannot make the QPs";
            return bed;
        }
        bed.a.emplace(std::move(side_a.value()));
        bed.b.emplace(std::move(side_b.value()));
        Status ca = connect(bed.a->qp, *bed.b, bed.b->qp, gid_b);
        Status cb = connect(bed.b->qp, *bed.a, bed.a->qp, gid_a);
        if (!ca.ok() || !cb.ok()) {
            bed.error = !ca.ok() ? ca.error().to_string() : cb.error().to_string();
        }
        return bed;
    }();
    return instance;
}

bool ready(benchmark::State& state) {
    if (!bed().error.empty()) {
        state.SkipWithError(bed().error.c_str());
        return false;
    }
    return true;
}

// Polls A until one completion arrives, driving B as the wire would.
WcStatus complete_one(Side& a, Side& b) {
    WorkCompletion wc;
    for (;;) {
        (void)poll_cq(b.cq, {});
        if (poll_cq(a.cq, {&wc, 1}) == 1) {
            return wc.status;
        }
    }
}

void BM_PostPollWrite(benchmark::State& state) {
    if (!ready(state)) {
        return;
    }
    Side& a = *bed().a;
    Side& b = *bed().b;
    const auto size = static_cast<std::uint32_t>(state.range(0));
    SendWr wr;
    wr.opcode = WrOpcode::rdma_write;
    wr.flags = send_signaled | (size <= 128 ? SendFlags(send_inline) : SendFlags());
    wr.num_sge = 1;
    wr.sge = {a.addr(), size, a.mr.lkey()};
    wr.rdma.remote_addr = b.addr();
    wr.rdma.rkey = b.mr.rkey();
    for (auto _ : state) {
        if (post_send(a.qp, {&wr, 1}) != 1 || complete_one(a, b) != WcStatus::success) {
            state.SkipWithError("WRITE failed");
            return;
        }
    }
    state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * size);
}
BENCHMARK(BM_PostPollWrite)->Arg(8)->Arg(64)->Arg(4096);

// The streaming case write_bw is made of: 32 WRITEs in one post (the last signalled), then
// both engines polled until its completion. Bursts of frames each way, one coalesced ACK; the
// time and the items are per WRITE.
void BM_WriteBurst(benchmark::State& state) {
    if (!ready(state)) {
        return;
    }
    Side& a = *bed().a;
    Side& b = *bed().b;
    const auto size = static_cast<std::uint32_t>(state.range(0));
    constexpr std::size_t burst = 32;
    std::array<SendWr, burst> wrs{};
    for (std::size_t i = 0; i < burst; ++i) {
        SendWr& wr = wrs[i];
        wr.opcode = WrOpcode::rdma_write;
        wr.flags = size <= 128 ? SendFlags(send_inline) : SendFlags();
        wr.num_sge = 1;
        wr.sge = {a.addr() + i * size, size, a.mr.lkey()};
        wr.rdma.remote_addr = b.addr() + i * size;
        wr.rdma.rkey = b.mr.rkey();
    }
    wrs[burst - 1].flags |= send_signaled;
    for (auto _ : state) {
        if (post_send(a.qp, {wrs.data(), burst}) != burst ||
            complete_one(a, b) != WcStatus::success) {
            state.SkipWithError("WRITE burst failed");
            return;
        }
    }
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * burst));
    state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * burst * size));
}
BENCHMARK(BM_WriteBurst)->Arg(64);

// Queueing one WR without ringing (NDK defer), then one ring for 64 of them: the post path alone.
void BM_PostWriteDeferred(benchmark::State& state) {
    if (!ready(state)) {
        return;
    }
    Side& a = *bed().a;
    Side& b = *bed().b;
    SendWr wr;
    wr.opcode = WrOpcode::rdma_write;
    wr.flags = send_defer;
    wr.num_sge = 1;
    wr.sge = {a.addr(), 8, a.mr.lkey()};
    wr.rdma.remote_addr = b.addr();
    wr.rdma.rkey = b.mr.rkey();
    std::uint32_t queued = 0;
    for (auto _ : state) {
        if (post_send(a.qp, {&wr, 1}) != 1) {
            state.SkipWithError("post refused");
            return;
        }
        if (++queued == 64) {
            state.PauseTiming();
            SendWr last = wr;
            last.flags = send_signaled;
            (void)post_send(a.qp, {&last, 1});
            (void)complete_one(a, b);
            queued = 0;
            state.ResumeTiming();
        }
    }
}
BENCHMARK(BM_PostWriteDeferred);

// An 8-byte SEND into a receive of a shared receive queue: post the receive on B's SRQ and the SEND
// on A, poll until both complete. Arg 0: an SRQ of B's one queue group (plain loads and stores
// between the poster and the engine). Arg 1: one made for any_queue_group, whose engines claim each
// receive with a compare-and-swap. One thread here, so the claim is uncontended: the difference is
// the locked instruction itself.
void BM_SrqSend(benchmark::State& state) {
    if (!ready(state)) {
        return;
    }
    Side& a = *bed().a;
    Side& b = *bed().b;
    auto srq = b.context.create_srq(b.pd, {64, 1}, state.range(0) != 0 ? any_queue_group : 0);
    QpInitAttr init;
    init.pd = &b.pd;
    init.send_cq = &b.cq;
    init.recv_cq = &b.cq;
    init.srq = srq ? &srq.value() : nullptr;
    auto served = b.context.create_qp(init);
    init.pd = &a.pd;
    init.send_cq = &a.cq;
    init.recv_cq = &a.cq;
    init.srq = nullptr;
    auto client = a.context.create_qp(init);
    if (!srq || !served || !client || !connect(client.value(), b, served.value(), gid_b).ok() ||
        !connect(served.value(), a, client.value(), gid_a).ok()) {
        state.SkipWithError("cannot make the SRQ and its QPs");
        return;
    }
    SendWr send;
    send.opcode = WrOpcode::send;
    send.flags = send_signaled | send_inline;
    send.num_sge = 1;
    send.sge = {a.addr(), 8, a.mr.lkey()};
    RecvWr receive;
    receive.num_sge = 1;
    receive.sge = {b.addr(), 64, b.mr.lkey()};
    WorkCompletion wc;
    for (auto _ : state) {
        if (post_srq_recv(srq.value(), {&receive, 1}) != 1 ||
            post_send(client.value(), {&send, 1}) != 1 || complete_one(a, b) != WcStatus::success) {
            state.SkipWithError("SEND failed");
            return;
        }
        while (poll_cq(b.cq, {&wc, 1}) == 0) {
        }
        if (wc.status != WcStatus::success) {
            state.SkipWithError("receive failed");
            return;
        }
    }
}
BENCHMARK(BM_SrqSend)->Arg(0)->Arg(1);

void BM_PollEmpty(benchmark::State& state) {
    if (!ready(state)) {
        return;
    }
    Side& a = *bed().a;
    WorkCompletion wc[16];
    for (auto _ : state) {
        benchmark::DoNotOptimize(poll_cq(a.cq, {wc, 16}));
    }
}
BENCHMARK(BM_PollEmpty);

void BM_FastRegPost32(benchmark::State& state) {
    if (!ready(state)) {
        return;
    }
    Side& a = *bed().a;
    Side& b = *bed().b;
    auto region =
        a.pd.alloc_fast_reg_region(32, mem::access_local_write | mem::access_remote_write);
    if (!region) {
        state.SkipWithError(region.error().to_string().c_str());
        return;
    }
    std::array<std::uint64_t, 32> pages{};
    for (std::size_t i = 0; i < pages.size(); ++i) {
        pages[i] = a.addr() + (1 << 20) + i * 4096;
    }
    SendWr wr;
    wr.opcode = WrOpcode::fast_reg;
    wr.flags = send_signaled;
    wr.fast_reg.region = region->get();
    wr.fast_reg.pages = pages.data();
    wr.fast_reg.page_count = 32;
    wr.fast_reg.page_shift = 12;
    wr.fast_reg.length = 32 * 4096;
    wr.fast_reg.base_va = 0x7000000000ULL;
    wr.fast_reg.access = mem::access_local_write | mem::access_remote_write;
    mem::MemoryKey key = region->lkey();
    for (auto _ : state) {
        key = mem::next_key(key);
        wr.fast_reg.key = key;
        // Seed 001: a region is registered again only once invalidated, so each iteration is
        // the pair an application posts around a buffer's use.
        std::array<SendWr, 2> pair{wr, SendWr{}};
        pair[1].opcode = WrOpcode::local_inv;
        pair[1].flags = send_signaled;
        pair[1].local_inv.key = key;
        if (post_send(a.qp, {pair.data(), 2}) != 2) {
            state.SkipWithError("FAST_REG refused");
            return;
        }
        for (int i = 0; i < 2; ++i) {
            if (const WcStatus status = complete_one(a, b); status != WcStatus::success) {
                state.SkipWithError(
                    ("FAST_REG/LOCAL_INV failed: " + std::string(wc_status_name(status))).c_str());
                return;
            }
        }
    }
}
BENCHMARK(BM_FastRegPost32);

} // namespace
