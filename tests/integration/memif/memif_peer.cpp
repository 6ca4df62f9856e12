// One side of a two-process swroce session over net_memif (run by memif_session_test.py):
//   swroce-memif-peer --role server|client --socket PATH --oob-port N --mode MODE --core N
// Each side starts its own EAL with a memif port and a swroce device on it, exchanges connection
// descriptors over TCP on 127.0.0.1, connects an RC QP and runs the mode. Both sides pass a
// barrier before closing their ports: DPDK 22.11's memif can crash the survivor when its peer
// disconnects mid-burst.
//
// Modes: verify (every opcode and size), latency and rate (benchmarks, bench/memif-session), and
// the conformance modes of memif_data_modes.cpp and memif_key_modes.cpp.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <unistd.h>
#include <vector>

#include <prdma/eal.hpp>

#include "memif_session.hpp"

namespace memif_peer {
namespace {

struct Options {
    bool server = true;
    std::string socket_path;
    int oob_port = 0;
    std::string mode = "verify";
    int core = 0;
};

Options parse(int argc, char** argv) {
    Options o;
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string key = argv[i];
        const std::string value = argv[i + 1];
        if (key == "--role") {
            o.server = value == "server";
        } else if (key == "--socket") {
            o.socket_path = value;
        } else if (key == "--oob-port") {
            o.oob_port = std::stoi(value);
        } else if (key == "--mode") {
            o.mode = value;
        } else if (key == "--core") {
            o.core = std::stoi(value);
        } else {
            die("unknown option " + key);
        }
    }
    if (o.socket_path.empty() || o.oob_port == 0) {
        die("usage: --role server|client --socket PATH --oob-port N [--mode MODE]");
    }
    return o;
}

// Client drives, server serves; every byte is checked on the side that receives it.
int run_verify(Session& s, Oob& oob, bool server) {
    const std::uint32_t sizes[] = {0, 1, 8, 63, 64, 1000, 4096, 4097, 65536, 1 << 20};
    if (server) {
        for (std::size_t i = 0; i < kBuffer; ++i) {
            s.data()[i] = pattern(i, 99); // what the client READs
        }
        for (std::uint32_t size : sizes) {
            post_receive(s, 2 << 20, size);
            oob.barrier([&] { drive(s); }); // receive posted
            const WorkCompletion wc = wait_one(s);
            if (wc.byte_len != size) {
                die("SEND of " + std::to_string(size) + " arrived as " +
                    std::to_string(wc.byte_len));
            }
            for (std::uint32_t i = 0; i < size; ++i) {
                if (s.data()[(2 << 20) + i] != pattern(i, size)) {
                    die("SEND of " + std::to_string(size) + " corrupted at byte " +
                        std::to_string(i));
                }
            }
            oob.barrier([&] { drive(s); }); // checked
        }
        // The client WRITEs 1 MiB at offset 3 MiB, then tells us with a SEND.
        post_receive(s, 0, 16);
        oob.barrier([&] { drive(s); });
        wait_one(s);
        for (std::uint32_t i = 0; i < (1 << 20); ++i) {
            if (s.data()[(3 << 20) + i] != pattern(i, 5)) {
                die("WRITE corrupted at byte " + std::to_string(i));
            }
        }
        oob.barrier([&] { drive(s); }); // the client READs and runs atomics; we only serve
        oob.barrier([&] { drive(s); });
        std::uint64_t counter = 0;
        std::memcpy(&counter, s.data() + (1 << 20), 8);
        if (counter != 1000 + 10 * 7) {
            die("fetch-add total " + std::to_string(counter));
        }
        std::printf("memif-peer server: verified SEND %zu sizes, 1 MiB WRITE, atomics\n",
                    std::size(sizes));
        return 0;
    }
    for (std::uint32_t size : sizes) {
        g_step = "SEND of " + std::to_string(size);
        for (std::uint32_t i = 0; i < size; ++i) {
            s.data()[i] = pattern(i, size);
        }
        oob.barrier([&] { drive(s); });
        SendWr wr = wr_for(s, WrOpcode::send, 0, size);
        post(s, wr);
        wait_one(s);
        oob.barrier([&] { drive(s); });
    }
    for (std::uint32_t i = 0; i < (1 << 20); ++i) {
        s.data()[i] = pattern(i, 5);
    }
    oob.barrier([&] { drive(s); });
    g_step = "1 MiB WRITE";
    SendWr write = wr_for(s, WrOpcode::rdma_write, 0, 1 << 20);
    write.rdma.remote_addr = s.peer.address + (3 << 20);
    write.rdma.rkey = s.peer.rkey;
    write.flags = {}; // unsignaled: the SEND after it completes both (RC ordering)
    post(s, write);
    SendWr note = wr_for(s, WrOpcode::send, 0, 16);
    post(s, note);
    wait_one(s);
    oob.barrier([&] { drive(s); });
    g_step = "1 MiB READ";
    // From a server range nothing else wrote: [32 KiB + 5, 32 KiB + 5 + 960 KiB).
    constexpr std::uint32_t read_length = (1 << 20) - (64 << 10);
    constexpr std::uint32_t read_from = (32 << 10) + 5;
    SendWr read = wr_for(s, WrOpcode::rdma_read, 1 << 20, read_length);
    read.rdma.remote_addr = s.peer.address + read_from;
    read.rdma.rkey = s.peer.rkey;
    post(s, read);
    wait_one(s);
    for (std::uint32_t i = 0; i < read_length; ++i) {
        if (s.data()[(1 << 20) + i] != pattern(read_from + i, 99)) {
            die("READ corrupted at byte " + std::to_string(i));
        }
    }
    // Atomics on the server's 8 bytes at 1 MiB: compare-swap to 1000, then 10 fetch-adds of 7.
    std::uint64_t current = 0;
    std::memcpy(&current, &s.data()[0], 0);
    SendWr probe = wr_for(s, WrOpcode::rdma_read, 2 << 20, 8);
    probe.rdma.remote_addr = s.peer.address + (1 << 20);
    probe.rdma.rkey = s.peer.rkey;
    post(s, probe);
    wait_one(s);
    std::memcpy(&current, s.data() + (2 << 20), 8);
    SendWr cas = wr_for(s, WrOpcode::atomic_cmp_swap, 2 << 20, 8);
    cas.atomic.remote_addr = s.peer.address + (1 << 20);
    cas.atomic.rkey = s.peer.rkey;
    cas.atomic.compare_add = current;
    cas.atomic.swap = 1000;
    post(s, cas);
    wait_one(s);
    for (int i = 0; i < 10; ++i) {
        SendWr add = wr_for(s, WrOpcode::atomic_fetch_add, (2 << 20) + 8, 8);
        add.atomic.remote_addr = s.peer.address + (1 << 20);
        add.atomic.rkey = s.peer.rkey;
        add.atomic.compare_add = 7;
        post(s, add);
        wait_one(s);
    }
    oob.barrier([&] { drive(s); });
    std::printf("memif-peer client: SEND 0 B..1 MiB, 1 MiB WRITE, 960 KiB READ, atomics: ok\n");
    return 0;
}

// ib_write_lat's method: each side WRITEs the iteration number into the other's buffer and
// spins on its own buffer for the peer's; the client times round trips.
int run_latency(Session& s, Oob& oob, bool server) {
    constexpr int warmup = 1000;
    constexpr int iterations = 20000;
    volatile std::uint64_t* mine = reinterpret_cast<volatile std::uint64_t*>(s.data());
    *mine = 0;
    oob.barrier([&] { drive(s); });
    std::vector<double> rtt;
    rtt.reserve(iterations);
    for (int i = 1; i <= warmup + iterations; ++i) {
        const auto start = std::chrono::steady_clock::now();
        if (!server) {
            *reinterpret_cast<std::uint64_t*>(s.data() + 64) = static_cast<std::uint64_t>(i);
            SendWr wr = wr_for(s, WrOpcode::rdma_write, 64, 8);
            wr.flags = send_inline | (i % 64 == 0 ? SendFlags(send_signaled) : SendFlags());
            wr.rdma.remote_addr = s.peer.address;
            wr.rdma.rkey = s.peer.rkey;
            post(s, wr);
        }
        WorkCompletion wc;
        while (*mine != static_cast<std::uint64_t>(i)) {
            (void)poll_cq(s.cq, {&wc, 1});
        }
        if (server) {
            *reinterpret_cast<std::uint64_t*>(s.data() + 64) = static_cast<std::uint64_t>(i);
            SendWr wr = wr_for(s, WrOpcode::rdma_write, 64, 8);
            wr.flags = send_inline | (i % 64 == 0 ? SendFlags(send_signaled) : SendFlags());
            wr.rdma.remote_addr = s.peer.address;
            wr.rdma.rkey = s.peer.rkey;
            post(s, wr);
        } else if (i > warmup) {
            rtt.push_back(
                std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
                    .count());
        }
    }
    // Let the last WRITE's ACK come home before the barrier.
    const auto drain = std::chrono::steady_clock::now() + std::chrono::milliseconds(50);
    WorkCompletion wc;
    while (std::chrono::steady_clock::now() < drain) {
        (void)poll_cq(s.cq, {&wc, 1});
    }
    oob.barrier([&] { drive(s); });
    if (!server) {
        std::sort(rtt.begin(), rtt.end());
        const double median = rtt[rtt.size() / 2];
        std::printf("memif-peer client: 8 B WRITE ping-pong over memif, %d iterations: round trip "
                    "median %.2f us (half %.2f us), min %.2f us, p99 %.2f us\n",
                    iterations, median, median / 2, rtt.front(), rtt[rtt.size() * 99 / 100]);
    }
    return 0;
}

// A stream of 64 B WRITEs for two seconds, one signaled per 64.
int run_rate(Session& s, Oob& oob, bool server) {
    oob.barrier([&] { drive(s); });
    if (server) {
        const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(2300);
        WorkCompletion wc;
        while (std::chrono::steady_clock::now() < end) {
            (void)poll_cq(s.cq, {&wc, 1});
        }
        oob.barrier([&] { drive(s); });
        return 0;
    }
    std::uint64_t posted = 0;
    std::uint64_t completed = 0;
    const std::uint32_t depth = 512;
    const auto start = std::chrono::steady_clock::now();
    const auto end = start + std::chrono::seconds(2);
    WorkCompletion wcs[32];
    std::vector<SendWr> batch(16);
    while (std::chrono::steady_clock::now() < end) {
        if (posted - completed + 16 <= depth) {
            for (int k = 0; k < 16; ++k) {
                SendWr& wr = batch[k];
                wr = wr_for(s, WrOpcode::rdma_write, 0, 64);
                wr.flags = (posted + static_cast<std::uint64_t>(k) + 1) % 64 == 0
                               ? SendFlags(send_signaled)
                               : SendFlags();
                wr.flags |= k < 15 ? SendFlags(send_defer) : SendFlags();
                wr.rdma.remote_addr = s.peer.address + static_cast<std::uint64_t>(k) * 64;
                wr.rdma.rkey = s.peer.rkey;
            }
            posted += post_send(s.qp, {batch.data(), 16});
        }
        const std::uint16_t n = poll_cq(s.cq, {wcs, 32});
        for (std::uint16_t i = 0; i < n; ++i) {
            if (wcs[i].status != WcStatus::success) {
                die("rate: completion failed");
            }
        }
        completed += 64ULL * n;
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    // Only every 64th WRITE is signaled: wait for those; the rest completed silently before them.
    while (completed + 64 <= posted) {
        const std::uint16_t n = poll_cq(s.cq, {wcs, 32});
        completed += 64ULL * n;
    }
    oob.barrier([&] { drive(s); });
    std::printf("memif-peer client: 64 B WRITE stream over memif: %.3f Mpps (%llu messages in "
                "%.2f s)\n",
                static_cast<double>(posted) / seconds / 1e6,
                static_cast<unsigned long long>(posted), seconds);
    return 0;
}

using ModeFn = int (*)(Session&, Oob&, bool);

struct Mode {
    const char* name;
    ModeFn run;
};

constexpr Mode kModes[] = {
    {"verify", run_verify},
    {"latency", run_latency},
    {"rate", run_rate},
    {"imm", run_imm},
    {"inline-sge", run_inline_sge},
    {"many-qps", run_many_qps},
    {"fast-reg", run_fast_reg},
    {"errors", run_errors},
    {"sleeping-target", run_sleeping_target},
};

ModeFn find_mode(const std::string& name) {
    for (const Mode& mode : kModes) {
        if (name == mode.name) {
            return mode.run;
        }
    }
    die("unknown mode " + name);
}

int run(int argc, char** argv) {
    const Options options = parse(argc, argv);
    const ModeFn mode = find_mode(options.mode);
    const std::string ip = options.server ? "10.0.0.1" : "10.0.0.2";
    // The sleeping target's engine runs on a service lcore (its --core); its main lcore, on the
    // other core, only sleeps.
    const bool service = options.server && options.mode == "sleeping-target";
    const std::string core = std::to_string(options.core);
    const std::string main_core = std::to_string(options.core == 0 ? 1 : 0);
    EalOptions eal_options;
    eal_options.program_name = "swroce-memif-peer";
    eal_options.args = {"-l", service ? core + "," + main_core : core};
    if (service) {
        eal_options.args.insert(eal_options.args.end(), {"--main-lcore", main_core, "-S", core});
    }
    eal_options.args.insert(
        eal_options.args.end(),
        {"--log-level=lib.eal:error", "--log-level=pmd.net.memif:error",
         "--vdev=net_memif0,role=" + std::string(options.server ? "server" : "client") +
             ",socket=" + options.socket_path + ",socket-abstract=no,id=0",
         "--vdev=rdma_swroce0,port=net_memif0,ip=" + ip + (service ? ",progress=service" : "")});
    auto eal = check(Eal::start(eal_options), "EAL");
    const DeviceId device = check(find_device("rdma_swroce0"), "find_device");
    Session s{Mtu::mtu_1024,
              check(Context::open(device), "open"),
              {},
              {},
              {},
              check(mem::DmaBuffer::allocate(kBuffer, 4096), "buffer"),
              {},
              {}};
    g_context = &s.context;
    s.pd = check(s.context.alloc_pd(), "alloc_pd");
    s.cq = check(s.context.create_cq(8192), "create_cq");
    s.qp = make_qp(s);
    s.mr = check(s.pd.register_memory(s.buffer.data(), kBuffer,
                                      mem::access_local_write | mem::access_remote_write |
                                          mem::access_remote_read | mem::access_remote_atomic),
                 "register_memory");
    // memif's link comes up once both sides are there.
    std::vector<std::uint8_t> port(512);
    for (int attempt = 0;; ++attempt) {
        std::uint32_t got = static_cast<std::uint32_t>(port.size());
        check(s.context.query_port(1, port.data(), &got), "query_port");
        PortAttr attr;
        std::memcpy(&attr, port.data(), sizeof(attr));
        if (attr.state == PortState::active) {
            s.mtu = attr.active_mtu;
            break;
        }
        if (attempt > 1000) {
            die("memif link did not come up");
        }
        ::usleep(10'000);
    }
    Oob oob(options.server, options.oob_port);
    connect(s, oob);
    oob.barrier([&] { drive(s); });
    const int rc = mode(s, oob, options.server);
    // Traffic has stopped on both sides; only now may either close its port.
    g_step = "closing";
    oob.barrier([&] { drive(s); });
    s.qp = QueuePair{};
    s.mr = MemoryRegionHandle{};
    s.cq = CompletionQueue{};
    s.pd = ProtectionDomain{};
    std::fflush(stdout);
    return rc;
}

} // namespace
} // namespace memif_peer

int main(int argc, char** argv) {
    return memif_peer::run(argc, argv);
}
