// The raw DPDK floor under swroce: what net_memif alone costs between two processes, with the
// same framing swroce uses (messages cut into frames of at most 4096 bytes of payload plus the
// 58 bytes of Ethernet/IPv4/UDP/BTH/ICRC a RoCEv2 frame carries). Its data path is DPDK's alone;
// prdma's common library only closes the port safely.
//
//   prdma-memif-floor --role server|client --socket PATH --mode latency|rate --sizes 8,64,...
//                     [--iterations N] [--seconds S] [--core C]
//
// latency: the client sends a message (all its frames), the server answers with the same number
//          of frames once it has them all; the client reports the round trip (median, min, p99).
// rate:    the client streams messages for S seconds; the server counts what arrives and reports
//          messages and bytes per second as the receiver saw them.
// Output: one JSON object per size on stdout (the side that measured prints it); errors, DPDK's
// and this program's, go to stderr.
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

#include <prdma/status.hpp>

#include "interrupt_thread.hpp"

namespace {

using prdma::run_on_interrupt_thread;
using prdma::Status;

constexpr std::uint32_t frame_payload = 4096; // swroce's path MTU over memif (bsize=4224)
constexpr std::uint32_t frame_overhead = 58;  // Ethernet 14 + IPv4 20 + UDP 8 + BTH 12 + ICRC 4
constexpr std::uint16_t burst = 32;
constexpr std::uint32_t control_bytes = 60; // a "stop"/"go" frame

struct Options {
    bool server = true;
    std::string socket;
    std::string mode = "latency";
    std::vector<std::uint32_t> sizes{8};
    std::uint64_t iterations = 20000;
    double seconds = 1.0;
    int core = 0;
};

// DPDK 22.11 makes the prefix's runtime directory even with --in-memory and leaves it behind at
// every exit; the prefix is this process's own, so the directory goes with it.
std::string g_runtime_dir;

void remove_runtime_dir() {
    if (!g_runtime_dir.empty()) {
        std::error_code ignored;
        std::filesystem::remove_all(g_runtime_dir, ignored);
        g_runtime_dir.clear();
    }
}

[[noreturn]] void die(const std::string& what) {
    std::fprintf(stderr, "prdma-memif-floor: %s\n", what.c_str());
    remove_runtime_dir();
    std::exit(1);
}

constexpr std::size_t max_message = 8U << 20; // the buffer every message is sent from

// A whole number in [min, max], or the program stops naming the option and the value.
std::uint64_t number(const std::string& key, const std::string& text, std::uint64_t min,
                     std::uint64_t max) {
    char* end = nullptr;
    errno = 0;
    const unsigned long long value = std::strtoull(text.c_str(), &end, 10);
    if (text.empty() || text[0] == '-' || *end != '\0' || errno != 0 || value < min ||
        value > max) {
        die(key + " needs a whole number " + std::to_string(min) + ".." + std::to_string(max) +
            ", not '" + text + "'");
    }
    return value;
}

void parse_sizes(const std::string& value, Options& o) {
    o.sizes.clear();
    for (std::size_t start = 0; start <= value.size();) {
        const std::size_t comma = std::min(value.find(',', start), value.size());
        o.sizes.push_back(static_cast<std::uint32_t>(
            number("--sizes", value.substr(start, comma - start), 1, max_message)));
        start = comma + 1;
    }
}

Options parse(int argc, char** argv) {
    Options o;
    for (int i = 1; i < argc; ++i) {
        const std::string key = argv[i];
        if (i + 1 >= argc) {
            die("option " + key + " needs a value");
        }
        const std::string value = argv[++i];
        if (key == "--role") {
            if (value != "server" && value != "client") {
                die("--role is server or client, not '" + value + "'");
            }
            o.server = value == "server";
        } else if (key == "--socket") {
            o.socket = value;
        } else if (key == "--mode") {
            o.mode = value;
        } else if (key == "--sizes") {
            parse_sizes(value, o);
        } else if (key == "--iterations") {
            o.iterations = number(key, value, 1, 1'000'000'000);
        } else if (key == "--seconds") {
            char* end = nullptr;
            o.seconds = std::strtod(value.c_str(), &end);
            if (*end != '\0' || !(o.seconds > 0 && o.seconds <= 3600)) {
                die("--seconds needs a duration in (0, 3600], not '" + value + "'");
            }
        } else if (key == "--core") {
            o.core = static_cast<int>(number(key, value, 0, RTE_MAX_LCORE - 1));
        } else {
            die("unknown option " + key);
        }
    }
    if (o.socket.empty() || (o.mode != "latency" && o.mode != "rate")) {
        die("usage: --role server|client --socket PATH --mode latency|rate --sizes a,b,...");
    }
    return o;
}

struct Port {
    std::uint16_t id = 0;
    rte_mempool* pool = nullptr;
};

std::uint32_t frames_for(std::uint32_t size) {
    return size == 0 ? 1 : (size + frame_payload - 1) / frame_payload;
}

std::uint32_t frame_length(std::uint32_t size, std::uint32_t index) {
    const std::uint32_t offset = index * frame_payload;
    return frame_overhead + std::min(frame_payload, size - std::min(size, offset));
}

// Sends `count` frames carrying `size` bytes as swroce would; the payload is copied in, as swroce
// gathers it from the application's buffer.
void send_message(const Port& port, const std::uint8_t* data, std::uint32_t size) {
    const std::uint32_t count = frames_for(size);
    rte_mbuf* frames[burst];
    for (std::uint32_t sent = 0; sent < count;) {
        const auto n = static_cast<std::uint16_t>(std::min<std::uint32_t>(burst, count - sent));
        if (rte_pktmbuf_alloc_bulk(port.pool, frames, n) != 0) {
            continue;
        }
        for (std::uint16_t i = 0; i < n; ++i) {
            const std::uint32_t length = frame_length(size, sent + i);
            auto* out = reinterpret_cast<std::uint8_t*>(
                rte_pktmbuf_append(frames[i], static_cast<std::uint16_t>(length)));
            if (out == nullptr) {
                die("a frame does not fit an mbuf");
            }
            std::memcpy(out + frame_overhead, data + std::size_t{sent + i} * frame_payload,
                        length - frame_overhead);
            out[0] = static_cast<std::uint8_t>(sent + i == count - 1); // last-frame mark
        }
        std::uint16_t done = 0;
        while (done < n) {
            done +=
                rte_eth_tx_burst(port.id, 0, frames + done, static_cast<std::uint16_t>(n - done));
        }
        sent += n;
    }
}

// Receives until a frame marked last arrived; copies the payload out as swroce places it.
std::uint32_t receive_message(const Port& port, std::uint8_t* data) {
    rte_mbuf* frames[burst];
    std::uint32_t bytes = 0;
    for (;;) {
        const std::uint16_t n = rte_eth_rx_burst(port.id, 0, frames, burst);
        bool last = false;
        for (std::uint16_t i = 0; i < n; ++i) {
            const auto* in = rte_pktmbuf_mtod(frames[i], const std::uint8_t*);
            const std::uint32_t payload = rte_pktmbuf_data_len(frames[i]) - frame_overhead;
            std::memcpy(data + std::min<std::uint32_t>(bytes, (8U << 20) - payload),
                        in + frame_overhead, payload);
            bytes += payload;
            last = last || in[0] == 1;
            rte_pktmbuf_free(frames[i]);
        }
        if (last) {
            return bytes;
        }
    }
}

void run_latency(const Options& o, const Port& port, std::vector<std::uint8_t>& buffer) {
    for (const std::uint32_t size : o.sizes) {
        const std::uint64_t warmup = std::min<std::uint64_t>(1000, o.iterations / 10);
        std::vector<double> rtt;
        rtt.reserve(o.iterations);
        const auto hz = static_cast<double>(rte_get_tsc_hz());
        for (std::uint64_t i = 0; i < warmup + o.iterations; ++i) {
            if (o.server) {
                (void)receive_message(port, buffer.data());
                send_message(port, buffer.data(), size);
                continue;
            }
            const std::uint64_t start = rte_rdtsc();
            send_message(port, buffer.data(), size);
            (void)receive_message(port, buffer.data());
            if (i >= warmup) {
                rtt.push_back(static_cast<double>(rte_rdtsc() - start) / hz * 1e6);
            }
        }
        if (!o.server) {
            std::sort(rtt.begin(), rtt.end());
            std::printf(
                "{\"mode\":\"latency\",\"bytes\":%u,\"iterations\":%zu,\"rtt_median_us\":%.4f,"
                "\"half_rtt_us\":%.4f,\"rtt_min_us\":%.4f,\"rtt_p99_us\":%.4f}\n",
                size, rtt.size(), rtt[rtt.size() / 2], rtt[rtt.size() / 2] / 2, rtt.front(),
                rtt[rtt.size() * 99 / 100]);
            std::fflush(stdout);
        }
    }
}

// The client streams for o.seconds, then sends a last-marked frame; the server counts between
// its first frame and that one, and reports.
void run_rate(const Options& o, const Port& port, std::vector<std::uint8_t>& buffer) {
    const auto hz = static_cast<double>(rte_get_tsc_hz());
    for (const std::uint32_t size : o.sizes) {
        if (!o.server) {
            const std::uint64_t end = rte_rdtsc() + static_cast<std::uint64_t>(o.seconds * hz);
            const std::uint32_t count = frames_for(size);
            rte_mbuf* frames[burst];
            std::uint32_t in_message = 0;
            while (rte_rdtsc() < end) {
                if (rte_pktmbuf_alloc_bulk(port.pool, frames, burst) != 0) {
                    continue;
                }
                for (rte_mbuf* frame : frames) {
                    const std::uint32_t length = frame_length(size, in_message);
                    auto* out = reinterpret_cast<std::uint8_t*>(
                        rte_pktmbuf_append(frame, static_cast<std::uint16_t>(length)));
                    if (out == nullptr) {
                        die("a frame does not fit an mbuf");
                    }
                    std::memcpy(out + frame_overhead,
                                buffer.data() + std::size_t{in_message} * frame_payload,
                                length - frame_overhead);
                    out[0] = 0;
                    out[1] = static_cast<std::uint8_t>(in_message + 1 == count); // message end
                    in_message = in_message + 1 == count ? 0 : in_message + 1;
                }
                std::uint16_t done = 0;
                while (done < burst) {
                    done += rte_eth_tx_burst(port.id, 0, frames + done,
                                             static_cast<std::uint16_t>(burst - done));
                }
            }
            send_message(port, buffer.data(), 0);       // the stop mark
            (void)receive_message(port, buffer.data()); // the server's go-ahead for the next size
            continue;
        }
        std::uint64_t messages = 0;
        std::uint64_t bytes = 0;
        std::uint64_t first = 0;
        std::uint64_t last_seen = 0;
        rte_mbuf* frames[burst];
        bool stop = false;
        while (!stop) {
            const std::uint16_t n = rte_eth_rx_burst(port.id, 0, frames, burst);
            if (n != 0) {
                last_seen = rte_rdtsc();
                if (first == 0) {
                    first = last_seen;
                }
            }
            for (std::uint16_t i = 0; i < n; ++i) {
                const auto* in = rte_pktmbuf_mtod(frames[i], const std::uint8_t*);
                const std::uint32_t payload = rte_pktmbuf_data_len(frames[i]) - frame_overhead;
                if (in[0] == 1) {
                    stop = true;
                } else {
                    std::memcpy(buffer.data(), in + frame_overhead, payload);
                    bytes += payload;
                    messages += in[1];
                }
                rte_pktmbuf_free(frames[i]);
            }
        }
        const double seconds = static_cast<double>(last_seen - first) / hz;
        std::printf("{\"mode\":\"rate\",\"bytes\":%u,\"messages\":%llu,\"seconds\":%.4f,"
                    "\"mpps\":%.4f,\"mb_per_s\":%.2f}\n",
                    size, static_cast<unsigned long long>(messages), seconds,
                    static_cast<double>(messages) / seconds / 1e6,
                    static_cast<double>(bytes) / seconds / 1048576.0);
        std::fflush(stdout);
        send_message(port, buffer.data(), 0);
    }
}

// DPDK 22.11's memif handles its peer's disconnect on the EAL interrupt thread, and its stop and
// close run the same teardown: both sides close at about the same moment, so the port stops and
// closes on that thread (run_on_interrupt_thread says more).
void close_port(std::uint16_t port_id) {
    const Status ran = run_on_interrupt_thread(
        [port_id] {
            (void)rte_eth_dev_stop(port_id);
            (void)rte_eth_dev_close(port_id);
        },
        std::chrono::seconds(5));
    if (!ran.ok()) {
        std::fprintf(stderr, "prdma-memif-floor: closing the port: %s\n",
                     ran.error().message().c_str());
    }
}

} // namespace

int main(int argc, char** argv) {
    const Options o = parse(argc, argv);
    const std::string vdev =
        "--vdev=net_memif0,role=" + std::string(o.server ? "server" : "client") +
        ",socket=" + o.socket + ",socket-abstract=no,id=0,bsize=4224";
    const std::string core = std::to_string(o.core);
    const std::string prefix = "--file-prefix=memif_floor_" + std::to_string(::getpid());
    std::vector<std::string> args = {"prdma-memif-floor",   "-l",       core,
                                     "--in-memory",         "--no-pci", "--no-telemetry",
                                     "--log-level=*:error", prefix,     vdev};
    std::vector<char*> argv_eal;
    argv_eal.reserve(args.size());
    for (std::string& a : args) {
        argv_eal.push_back(a.data());
    }
    const int init = rte_eal_init(static_cast<int>(argv_eal.size()), argv_eal.data());
    g_runtime_dir = rte_eal_get_runtime_dir(); // made early in init, so a failed init may leave it
    if (init < 0) {
        die("rte_eal_init failed");
    }
    Port port;
    if (rte_eth_dev_get_port_by_name("net_memif0", &port.id) != 0) {
        die("no net_memif0");
    }
    port.pool = rte_pktmbuf_pool_create("floor", 8191, 256, 0, RTE_PKTMBUF_HEADROOM + 4224,
                                        static_cast<int>(rte_socket_id()));
    rte_eth_conf conf{};
    if (port.pool == nullptr || rte_eth_dev_configure(port.id, 1, 1, &conf) != 0 ||
        rte_eth_rx_queue_setup(port.id, 0, 1024, rte_socket_id(), nullptr, port.pool) != 0 ||
        rte_eth_tx_queue_setup(port.id, 0, 1024, rte_socket_id(), nullptr) != 0 ||
        rte_eth_dev_start(port.id) != 0) {
        die("cannot start the memif port");
    }
    for (int i = 0;; ++i) {
        rte_eth_link link{};
        rte_eth_link_get_nowait(port.id, &link);
        if (link.link_status == RTE_ETH_LINK_UP) {
            break;
        }
        if (i > 2000) {
            die("the memif link did not come up");
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    std::vector<std::uint8_t> buffer(max_message, 0x5a);
    if (o.mode == "latency") {
        run_latency(o, port, buffer);
    } else {
        run_rate(o, port, buffer);
    }
    // Both sides are quiet now (the last exchange was answered); close after a moment so the
    // peer's last burst is not cut (DPDK 22.11's memif dislikes a peer vanishing mid-burst).
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    close_port(port.id);
    rte_eal_cleanup();
    remove_runtime_dir();
    return 0;
}
