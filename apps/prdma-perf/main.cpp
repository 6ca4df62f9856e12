// prdma-perf: perftest's eight RC tests on a prdma device.
//
//   prdma-perf TEST [EAL options --] [perftest options] [server]
//   prdma_write_lat [EAL options --] [perftest options] [server]      (installed links)
//
// TEST is write_lat, write_bw, read_lat, read_bw, send_lat, send_bw, atomic_lat or atomic_bw.
// Without EAL options each side makes its own net_memif port (role=server on the side without a
// host name) and an rdma_swroce device on it, pinned to its own core, so
//   prdma-perf write_lat            and            prdma-perf write_lat 127.0.0.1
// in two shells just work. The out-of-band exchange is perftest 6.06's, byte for byte, so a real
// ib_write_lat can be the peer (perftest_wire.hpp); the tables are perftest's (report.hpp).
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

#include <rte_cycles.h>

#include <prdma/build_config.hpp>
#include <prdma/eal.hpp>

#include "core_placement.hpp"
#include "oob_channel.hpp"
#include "options.hpp"
#include "perf_session.hpp"
#include "perftest_wire.hpp"
#include "report.hpp"
#include "test_runners.hpp"
#include "verifier.hpp"
#include "verify_steps.hpp"

namespace {

using namespace prdma;
using namespace prdma::perf;
using namespace std::chrono_literals;

// What one side of the exchange keeps: the channel, our keys and theirs.
struct Exchange {
    OobChannel& oob;
    std::vector<KeyMessage> mine;
    std::vector<KeyMessage> theirs;
};

// perftest's ctx_hand_shake: one key message each way (the GID form: RoCE always has a GID).
Status hand_shake(Exchange& x, unsigned qp) {
    const std::string message = format_keys(x.mine[qp], true);
    std::string reply(key_message_size_gid, '\0');
    if (Status st = x.oob.exchange(message.data(), reply.data(), reply.size()); !st.ok()) {
        return st;
    }
    auto keys = parse_keys(reply, true);
    if (!keys) {
        return keys.error();
    }
    x.theirs[qp] = keys.value();
    return {};
}

// perftest's ctx_close_connection: a last hand shake, then "done" and its NUL.
Status close_connection(Exchange& x) {
    if (Status st = hand_shake(x, 0); !st.ok()) {
        return st;
    }
    static constexpr char done[] = "done";
    return x.oob.write_all(done, sizeof(done));
}

Status xchg_bw_reports(OobChannel& oob, const BwReport& mine, BwReport& theirs) {
    const auto out = format_bw_report(mine);
    std::array<std::array<std::uint8_t, 8>, 5> in{};
    for (std::size_t i = 0; i < out.size(); ++i) {
        if (Status st = oob.exchange(out[i].data(), in[i].data(), 8); !st.ok()) {
            return st;
        }
    }
    theirs = parse_bw_report(in);
    return {};
}

// Result rows, and under --verify what was checked for each (the text table gets a line under
// the row, the JSON object carries it); --json rows replace the text on stdout, --out_json
// rewrites its file with each row as perftest does (the file holds the last one).
class Printer {
public:
    Printer(const PerfOptions& o, Verifier* verifier) : options_(o), verifier_(verifier) {}
    void set_info(const TestInfo& info) { info_ = info; }
    void text(const std::string& s) const {
        if (!options_.json) {
            std::fputs(s.c_str(), stdout);
            std::fflush(stdout);
        }
    }
    Status latency(const LatencyReport& r) const {
        const auto verified = summary();
        const bool duration = options_.duration_seconds != 0;
        if (options_.json) {
            std::fputs(perftest_json(info_, r, duration, verified, true).c_str(), stdout);
        } else {
            std::fputs(latency_row(r, duration).c_str(), stdout);
        }
        verify_line_for(verified);
        return write_json_file(perftest_json(info_, r, duration, verified, false));
    }
    Status bandwidth(const BandwidthReport& r) const {
        const auto verified = summary();
        const bool gbits = options_.report_gbits;
        if (options_.json) {
            std::fputs(perftest_json(info_, r, gbits, verified, true).c_str(), stdout);
        } else {
            std::fputs(bandwidth_row(r, gbits).c_str(), stdout);
            if (r.lost) {
                std::fputs(loss_line(r).c_str(), stdout);
            }
        }
        verify_line_for(verified);
        return write_json_file(perftest_json(info_, r, gbits, verified, false));
    }

private:
    [[nodiscard]] std::optional<VerifySummary> summary() const {
        return verifier_ != nullptr ? std::optional(verifier_->take_summary()) : std::nullopt;
    }
    void verify_line_for(const std::optional<VerifySummary>& verified) const {
        if (verified && !options_.json) {
            std::fputs(verify_line(*verified).c_str(), stdout);
        }
        std::fflush(stdout);
    }
    [[nodiscard]] Status write_json_file(const std::string& object) const {
        if (!options_.out_json) {
            return {};
        }
        std::FILE* file = std::fopen(options_.out_json_file.c_str(), "w");
        if (file == nullptr) {
            return Error(StatusCode::invalid_parameter, "--out_json: cannot write " +
                                                            options_.out_json_file + ": " +
                                                            std::strerror(errno));
        }
        const bool written = std::fputs(object.c_str(), file) >= 0;
        if (std::fclose(file) != 0 || !written) {
            return Error(StatusCode::internal, "--out_json: writing " + options_.out_json_file +
                                                   " failed: " + std::strerror(errno));
        }
        return {};
    }

    const PerfOptions& options_;
    Verifier* verifier_;
    TestInfo info_;
};

std::uint32_t cache_line_size() {
    const long line = ::sysconf(_SC_LEVEL1_DCACHE_LINESIZE);
    return line > 0 ? static_cast<std::uint32_t>(line) : 64;
}

std::uint32_t page_size() {
    const long page = ::sysconf(_SC_PAGESIZE);
    return page > 0 ? static_cast<std::uint32_t>(page) : 4096;
}

void print_counters(const PerfSession& session) {
    auto counters = session.context().query_stats();
    if (!counters) {
        return;
    }
    for (const rdma::Counter& counter : counters.value()) {
        if (counter.value != 0) {
            std::fprintf(stderr, "  %s=%llu\n", counter.name.c_str(),
                         static_cast<unsigned long long>(counter.value));
        }
    }
}

Status run_test(PerfOptions o, PerfSession& session, Verifier* verifier);

// write_bw --verify, passive side: the end check expects the run its own options describe; the
// client's report says what it ran.
Status check_same_run(const PerfOptions& o, const BwReport& theirs) {
    const std::uint64_t iterations = o.iterations * o.qps;
    if (theirs.size == o.sizes.back() && theirs.iterations == iterations) {
        return {};
    }
    return Error(StatusCode::invalid_parameter,
                 "--verify: the client ran " + std::to_string(theirs.iterations) + " WRITEs of " +
                     std::to_string(theirs.size) + " bytes last, this side expected " +
                     std::to_string(iterations) + " of " + std::to_string(o.sizes.back()) +
                     "; give both sides the same -n, sizes and -q");
}

// One run, from the device to the last line. Returns what main returns.
Status run(const PerfOptions& o) {
    auto opened = PerfSession::open(o);
    if (!opened) {
        return opened.error();
    }
    PerfSession& session = opened.value();
    std::optional<Verifier> verifier;
    if (o.verify) {
        verifier.emplace(o.test, o.verify_corrupt_at);
    }
    Status status = run_test(o, session, verifier ? &*verifier : nullptr);
    if (status.ok() && verifier && verifier->failed()) {
        // Found during the run, reported once both sides finished it.
        status = Error(StatusCode::internal, "--verify: " + verifier->failure());
    }
    if (o.stats) {
        print_counters(session);
    }
    if (!o.server && status.ok()) {
        // Both sides saw each other finish; the client now closes its port. DPDK 22.11's memif
        // can crash a side that is polling while its peer disconnects, so the server (the memif
        // server in the embedded default) polls nothing until the client is gone.
        std::this_thread::sleep_for(250ms);
    }
    return status;
}

// What the measured phase of a run works with, once the QPs are connected.
struct Phase {
    const PerfOptions& o;
    PerfSession& session;
    Exchange& x;
    const Printer& print;
    Verifier* verifier;
    WalkParams walk;
    bool client;
};

// Waiting for a peer that runs its whole test: allow for long runs.
constexpr auto whole_test = std::chrono::milliseconds(3600s);

// The latency tests' measured phase and closing exchange, in each perftest tool's order.
Status latency_phase(const Phase& ph) {
    const PerfOptions& o = ph.o;
    PerfSession& session = ph.session;
    Exchange& x = ph.x;
    OobChannel& oob = x.oob;
    const Printer& print = ph.print;
    Verifier* const verifier = ph.verifier;
    const bool client = ph.client;
    const Verb verb = o.test.verb;
    const auto tsc_hz = static_cast<double>(rte_get_tsc_hz());
    const bool duration = o.duration_seconds != 0;
    const bool half_round_trip = verb == Verb::write || verb == Verb::send;
    print.text(latency_table_header(duration));
    const bool passive = !client && (verb == Verb::read || verb == Verb::atomic);
    if (passive) {
        oob.set_timeout(whole_test);
        if (Status st = close_connection(x); !st.ok()) {
            return st;
        }
        if (verifier != nullptr) {
            print.text(verify_line(verifier->take_summary()));
        }
        print.text(result_line());
        return oob.finish();
    }
    for (unsigned index = 0; index < o.sizes.size(); ++index) {
        const std::uint64_t size = o.sizes[index];
        const VerifyRun verify{verifier, index};
        LatencySamples samples;
        Status st;
        if (verb == Verb::write) {
            st = run_write_latency(session, o, size, x.theirs[0], !client, samples, verify);
        } else if (verb == Verb::send) {
            const std::uint32_t receives = receives_per_qp(o);
            if (st = post_receives(session, o, size, receives, verify); st.ok()) {
                st = hand_shake(x, 0); // the peer's receives are posted too
            }
            if (st.ok()) {
                st = run_send_latency(session, o, size, !client, samples, verify);
            }
        } else if (verb == Verb::read) {
            st = run_read_latency(session, o, size, x.theirs[0], samples, verify);
        } else {
            st = run_atomic_latency(session, o, x.theirs[0], samples, verify);
        }
        if (!st.ok()) {
            return st;
        }
        if (o.unsorted || o.histogram) {
            // perftest's -U and -H lists, then the table's header again above the row.
            if (o.unsorted) {
                print.text(
                    latency_samples(samples.timestamps, tsc_hz / 1e6, half_round_trip, false));
            }
            if (o.histogram) {
                print.text(
                    latency_samples(samples.timestamps, tsc_hz / 1e6, half_round_trip, true));
            }
            print.text(latency_table_header(false));
        }
        const LatencyReport report =
            duration ? duration_latency_report(samples.duration_iterations, samples.duration_cycles,
                                               tsc_hz / 1e6, half_round_trip, size)
                     : latency_report(samples.timestamps, tsc_hz / 1e6, half_round_trip, size);
        if (Status printed = print.latency(report); !printed.ok()) {
            return printed;
        }
    }
    if (verb == Verb::write) {
        print.text(result_line());
        return oob.finish(); // ib_write_lat has no closing exchange
    }
    oob.set_timeout(whole_test);
    if (verb == Verb::send) {
        print.text(result_line());
        if (Status st = close_connection(x); !st.ok()) {
            return st;
        }
    } else {
        if (Status st = close_connection(x); !st.ok()) {
            return st;
        }
        print.text(result_line());
    }
    return oob.finish();
}

// perftest's numbers for one bandwidth run: timed runs report their average only.
BandwidthReport report_for(const PerfOptions& o, const BandwidthSamples& samples,
                           std::uint64_t size, bool no_peak) {
    const auto tsc_hz = static_cast<double>(rte_get_tsc_hz());
    if (o.duration_seconds != 0) {
        BandwidthReport r;
        r.size = size;
        r.iterations = samples.iterations;
        const double seconds = static_cast<double>(samples.duration_cycles) / tsc_hz;
        if (seconds > 0) {
            const auto bytes = static_cast<double>(size * samples.iterations);
            r.bw_average = bytes / seconds / (o.report_gbits ? 125e6 : 1048576.0);
            r.msg_rate = static_cast<double>(samples.iterations) / seconds / 1e6;
        }
        return r;
    }
    BandwidthInput in;
    in.posted = samples.posted;
    in.completed = samples.completed;
    in.iterations = samples.iterations;
    in.cycles_per_second = tsc_hz;
    in.size = size;
    in.cq_moderation = samples.cq_moderation;
    in.gbits = o.report_gbits;
    in.no_peak = no_peak || o.no_peak;
    return bandwidth_report(in);
}

BandwidthSamples samples_for(const Phase& ph, std::uint64_t size) {
    const PerfOptions& o = ph.o;
    BandwidthSamples samples;
    samples.cycle_buffer = ph.walk.cycle_buffer;
    samples.cache_line = ph.walk.cache_line;
    // perftest moderates completions, but not for large single-size runs (nor a post list's).
    const bool unmoderated =
        o.sizes.size() == 1 && !o.cq_moderation_given && o.post_list == 1 && size > 8192;
    samples.cq_moderation = unmoderated ? 1 : o.cq_moderation;
    return samples;
}

// write_bw, read_bw, atomic_bw without -b: the server is a passive target and prints the client's
// line (under --run_infinitely it serves until the client stops).
Status passive_target_phase(const Phase& ph) {
    const PerfOptions& o = ph.o;
    Exchange& x = ph.x;
    BwReport theirs;
    if (o.run_infinitely) {
        x.oob.set_timeout(std::chrono::hours(24 * 365));
        Status st = hand_shake(x, 0);
        if (!st.ok() && st.error().code() == StatusCode::not_connected) {
            ph.print.text(" The client stopped (--run_infinitely)\n");
            return {};
        }
        return st;
    }
    if (Status st = hand_shake(x, 0); !st.ok()) {
        return st;
    }
    if (Status st = xchg_bw_reports(x.oob, BwReport{}, theirs); !st.ok()) {
        return st;
    }
    if (ph.verifier != nullptr && o.test.verb == Verb::write) {
        if (Status st = check_same_run(o, theirs); !st.ok()) {
            return st;
        }
        check_write_bw_end(*ph.verifier, ph.session, o, ph.walk);
    }
    BandwidthReport r;
    r.size = theirs.size;
    r.iterations = theirs.iterations;
    r.bw_peak = theirs.bw_peak;
    r.bw_average = theirs.bw_average;
    r.msg_rate = theirs.msg_rate;
    if (Status st = ph.print.bandwidth(r); !st.ok()) {
        return st;
    }
    if (Status st = close_connection(x); !st.ok()) {
        return st;
    }
    ph.print.text(result_line());
    return x.oob.finish();
}

// --run_infinitely: one line per -D interval, each its own timed run, until the process is
// stopped (perftest keeps posting across lines; here the interval's WRs complete first). With
// `rx` (send_bw -b) the peer's SENDs are received in the same loop.
Status run_infinitely(const Phase& ph, ReceiveSide* rx = nullptr) {
    const std::uint64_t size = ph.o.sizes.front();
    for (;;) {
        BandwidthSamples samples = samples_for(ph, size);
        if (Status st = run_bandwidth(ph.session, ph.o, size, ph.x.theirs, samples, {}, rx);
            !st.ok()) {
            return st;
        }
        if (Status st = ph.print.bandwidth(report_for(ph.o, samples, size, true)); !st.ok()) {
            return st;
        }
    }
}

// One size of write_bw, read_bw, atomic_bw (or send_bw -b, with `rx`) on the posting side; with
// -b both sides post and each reports the sum of both directions (perftest's
// print_full_bw_report).
Result<BandwidthReport> requester_run(const Phase& ph, unsigned index, ReceiveSide* rx = nullptr) {
    const PerfOptions& o = ph.o;
    const std::uint64_t size = o.sizes[index];
    BandwidthSamples samples = samples_for(ph, size);
    if (o.bidirectional) {
        if (Status st = hand_shake(ph.x, 0); !st.ok()) { // both start together
            return st.error();
        }
    }
    if (o.warm_up) {
        // Enough WRs to cycle the port's rings and the buffers through once, not measured:
        // first use costs page faults (memif maps its rings lazily) a NIC would not have.
        PerfOptions warm = o;
        warm.iterations = std::max<std::uint64_t>(2048, 2ULL * o.tx_depth);
        BandwidthSamples ignored = samples;
        if (Status st = run_bandwidth(ph.session, warm, size, ph.x.theirs, ignored); !st.ok()) {
            return st.error();
        }
    }
    if (Status st =
            run_bandwidth(ph.session, o, size, ph.x.theirs, samples, {ph.verifier, index}, rx);
        !st.ok()) {
        return st.error();
    }
    BandwidthReport r = report_for(o, samples, size, false);
    if (o.bidirectional) {
        BwReport theirs;
        const BwReport mine{r.size, r.iterations, r.bw_peak, r.bw_average, r.msg_rate};
        if (Status st = xchg_bw_reports(ph.x.oob, mine, theirs); !st.ok()) {
            return st.error();
        }
        r.bw_peak += theirs.bw_peak;
        r.bw_average += theirs.bw_average;
        r.msg_rate += theirs.msg_rate;
    }
    return r;
}

// One size of send_bw. The receiving side posts rx_depth receives before the handshake that lets
// the sender start; without -b the server only receives and measures its side itself (no peak,
// as perftest); with -b both sides send and receive in one loop. Under -c UD the server stops once
// the client has moved on and counts what never came; the receives those datagrams would have
// taken stay posted for the next size (`waiting`, per QP), so each is as long as the largest.
Result<BandwidthReport> send_bandwidth_run(const Phase& ph, unsigned index,
                                           std::vector<std::uint64_t>& waiting) {
    const PerfOptions& o = ph.o;
    const std::uint64_t size = o.sizes[index];
    const VerifyRun verify{ph.verifier, index};
    const std::uint64_t receive_size =
        o.ud ? *std::max_element(o.sizes.begin(), o.sizes.end()) : size;
    ReceiveSide rx(ph.session.qp_count(), receive_size, o.iterations, receives_per_qp(o));
    if (o.ud) {
        rx.datagram_length = ph.session.receive_length(size);
    }
    if (!ph.client || o.bidirectional) {
        if (Status st =
                post_receives(ph.session, o, receive_size, receives_per_qp(o), verify, waiting);
            !st.ok()) {
            return st.error();
        }
    }
    if (o.bidirectional) {
        return requester_run(ph, index, &rx); // its handshake starts both sides together
    }
    if (Status st = hand_shake(ph.x, 0); !st.ok()) {
        return st.error();
    }
    BandwidthSamples samples = samples_for(ph, size);
    const SenderDone sender_done =
        o.ud ? SenderDone([&oob = ph.x.oob] { return oob.peer_moved_on(); }) : SenderDone();
    const Status st =
        ph.client ? run_bandwidth(ph.session, o, size, ph.x.theirs, samples, verify)
                  : run_send_bandwidth_server(ph.session, o, rx, samples, verify, sender_done);
    if (!st.ok()) {
        return st.error();
    }
    BandwidthReport r = report_for(o, samples, size, !ph.client);
    if (o.ud && !ph.client) {
        r.lost = samples.lost;
        for (unsigned q = 0; q < rx.received.size(); ++q) {
            waiting[q] = rx.posted[q] - rx.received[q];
        }
    }
    return r;
}

// send_bw --run_infinitely: the client SENDs a line per interval; the server receives, keeps its
// receives posted and prints what arrived in each interval until the client goes away. With -b
// both sides do both and each prints its own direction.
Status send_infinitely(const Phase& ph) {
    const PerfOptions& o = ph.o;
    const std::uint64_t size = o.sizes.front();
    ReceiveSide rx(ph.session.qp_count(), size, UINT64_MAX, receives_per_qp(o));
    if (!ph.client || o.bidirectional) {
        if (Status st = post_receives(ph.session, o, size, receives_per_qp(o)); !st.ok()) {
            return st;
        }
    }
    if (Status st = hand_shake(ph.x, 0); !st.ok()) {
        return st;
    }
    if (ph.client || o.bidirectional) {
        return run_infinitely(ph, o.bidirectional ? &rx : nullptr);
    }
    for (;;) {
        BandwidthSamples samples = samples_for(ph, size);
        if (Status st = run_send_bandwidth_server(ph.session, o, rx, samples); !st.ok()) {
            return st;
        }
        if (samples.iterations == 0 && ph.x.oob.peer_closed()) {
            ph.print.text(" The client stopped (--run_infinitely)\n");
            return {};
        }
        if (Status st = ph.print.bandwidth(report_for(o, samples, size, true)); !st.ok()) {
            return st;
        }
    }
}

Status send_bandwidth_phase(const Phase& ph) {
    const PerfOptions& o = ph.o;
    Exchange& x = ph.x;
    if (o.run_infinitely) {
        return send_infinitely(ph);
    }
    if (o.ud) {
        // A perftest server that lost datagrams waits two minutes for them before it answers.
        x.oob.set_timeout(whole_test);
    }
    std::vector<std::uint64_t> waiting(ph.session.qp_count(), 0);
    for (unsigned index = 0; index < o.sizes.size(); ++index) {
        auto r = send_bandwidth_run(ph, index, waiting);
        if (!r) {
            return r.error();
        }
        if (Status st = ph.print.bandwidth(r.value()); !st.ok()) {
            return st;
        }
        if (o.sizes.size() > 1) {
            if (Status st = hand_shake(x, 0); !st.ok()) {
                return st;
            }
        }
    }
    ph.print.text(result_line());
    x.oob.set_timeout(whole_test);
    if (Status st = close_connection(x); !st.ok()) {
        return st;
    }
    return x.oob.finish();
}

// The bandwidth tests' measured phase and closing exchange.
Status bandwidth_phase(const Phase& ph) {
    const PerfOptions& o = ph.o;
    Exchange& x = ph.x;
    ph.print.text(bandwidth_table_header(o.report_gbits));
    if (o.test.verb == Verb::send) {
        return send_bandwidth_phase(ph);
    }
    x.oob.set_timeout(whole_test);
    if (!ph.client && !o.bidirectional) {
        return passive_target_phase(ph);
    }
    if (o.run_infinitely) {
        return run_infinitely(ph);
    }
    BwReport last;
    for (unsigned index = 0; index < o.sizes.size(); ++index) {
        auto r = requester_run(ph, index);
        if (!r) {
            return r.error();
        }
        if (Status st = ph.print.bandwidth(r.value()); !st.ok()) {
            return st;
        }
        last = BwReport{r->size, r->iterations, r->bw_peak, r->bw_average, r->msg_rate};
    }
    ph.print.text(result_line());
    if (!o.bidirectional) { // the passive server prints the client's last line
        BwReport ignored;
        if (Status st = hand_shake(x, 0); !st.ok()) {
            return st;
        }
        if (Status st = xchg_bw_reports(x.oob, last, ignored); !st.ok()) {
            return st;
        }
    }
    if (Status st = close_connection(x); !st.ok()) {
        return st;
    }
    return x.oob.finish();
}

// By value: -c UD trims -a's sizes to the MTU once it is agreed.
Status run_test(PerfOptions o, PerfSession& session, Verifier* verifier) {
    const bool client = o.server.has_value();
    const Verb verb = o.test.verb;
    const bool latency = o.test.kind == Kind::latency;
    Printer print(o, verifier);

    if (!client) {
        print.text("\n************************************\n* Waiting for client to connect... "
                   "*\n************************************\n");
    }
    auto channel = client ? OobChannel::connect(*o.server, o.tcp_port, 5s)
                          : OobChannel::accept(o.tcp_port, 600s);
    if (!channel) {
        return channel.error();
    }
    OobChannel& oob = channel.value();
    oob.set_timeout(30s);

    // Versions: a peer older than 5.70 is refused, as perftest refuses it.
    const VersionMessage my_version = format_version(perftest_version);
    VersionMessage their_version{};
    if (Status st = oob.exchange(my_version.data(), their_version.data(), their_version.size());
        !st.ok()) {
        return st;
    }
    auto peer_version = parse_version(their_version);
    if (!peer_version) {
        return peer_version.error();
    }
    const double remote = version_number(peer_version.value());
    if (remote < minimum_peer_version) {
        return Error(StatusCode::not_supported,
                     "the peer speaks perftest version '" + peer_version.value() +
                         "'; versions older than 5.70 are not supported");
    }
    // Page and cache-line size: both sides use the larger of each.
    std::uint32_t cycle_buffer = page_size();
    std::uint32_t cache_line = cache_line_size();
    if (remote >= 5.32) {
        const auto mine = format_sys_data(cycle_buffer, cache_line);
        std::array<std::uint8_t, 8> theirs{};
        for (std::size_t half = 0; half < 2; ++half) {
            if (Status st = oob.exchange(mine.data() + 4 * half, theirs.data() + 4 * half, 4);
                !st.ok()) {
                return st;
            }
        }
        const SysData peer = parse_sys_data(theirs);
        cycle_buffer = std::max(cycle_buffer, peer.cycle_buffer);
        cache_line = std::max(cache_line, peer.cache_line_size);
    }
    // MTU: ours (the port's, or -m when lower), then the smaller of the two.
    auto port = session.wait_port_active(o.gid_index);
    if (!port) {
        return port.error();
    }
    rdma::Mtu mtu = port->active_mtu;
    if (o.mtu) {
        if (*o.mtu > port->active_mtu) {
            print.text("Requested mtu is higher than active mtu \nChanging to active mtu - " +
                       std::to_string(static_cast<int>(port->active_mtu)) + "\n");
        } else {
            mtu = *o.mtu;
        }
    }
    if (remote >= 5.1) {
        const auto mine = format_mtu(mtu);
        std::array<char, 4> theirs{};
        const std::size_t size = remote >= 5.31 ? 2 : 4;
        std::array<char, 4> padded{mine[0], mine[1], 0, 0};
        if (Status st = oob.exchange(padded.data(), theirs.data(), size); !st.ok()) {
            return st;
        }
        auto peer_mtu = parse_mtu(std::span<const char, 2>(theirs.data(), 2));
        if (peer_mtu && peer_mtu.value() < mtu) {
            mtu = peer_mtu.value();
        }
    }

    if (o.ud) {
        // A datagram is one packet: -a stops at the MTU, as perftest's does; a size asked for
        // beyond it is refused before anything is allocated.
        const std::uint64_t limit = rdma::mtu_bytes(mtu);
        if (o.run_all) {
            if (std::erase_if(o.sizes, [limit](std::uint64_t n) { return n > limit; }) > 0) {
                print.text(" Max msg size in UD is MTU " + std::to_string(limit) +
                           "\n Changing to this MTU\n");
            }
        } else if (std::any_of(o.sizes.begin(), o.sizes.end(),
                               [limit](std::uint64_t n) { return n > limit; })) {
            return Error(StatusCode::invalid_parameter,
                         "-c UD: a datagram is one packet; messages of at most the MTU (" +
                             std::to_string(limit) + " B)");
        }
    }
    if (Status st = session.allocate(o, cycle_buffer); !st.ok()) {
        return st;
    }
    oob.set_progress([&session] { session.drive(); });
    Exchange x{oob, session.local_keys(port.value()), {}};
    x.theirs.resize(x.mine.size());
    for (KeyMessage& keys : x.mine) {
        keys.out_reads = (verb == Verb::read || verb == Verb::atomic) ? o.out_reads : 1;
    }

    TestInfo info;
    info.test = o.test;
    info.device = session.device_name();
    info.qps = session.qp_count();
    info.mtu = mtu;
    info.tx_depth = o.tx_depth;
    info.rx_depth = o.rx_depth;
    info.cq_moderation = o.cq_moderation;
    info.inline_size = o.inline_size;
    info.out_reads = o.out_reads;
    info.gid_index = o.gid_index;
    info.atomic_type = o.atomic_type;
    info.post_list = o.post_list;
    info.bidirectional = o.bidirectional;
    info.use_srq = o.use_srq;
    info.ud = o.ud;
    info.client = client;
    print.set_info(info);
    print.text(test_info_block(info));

    // Hand shakes and connection, in the order each perftest tool has them.
    const unsigned qps = session.qp_count();
    const bool one_first = latency && verb != Verb::send; // write/read/atomic_lat
    const bool one_after_connect = verb == Verb::send;    // send_lat, send_bw
    if (one_first) {
        if (Status st = hand_shake(x, 0); !st.ok()) {
            return st;
        }
    }
    for (unsigned i = 0; i < qps; ++i) {
        if (Status st = hand_shake(x, i); !st.ok()) {
            return st;
        }
    }
    if (Status st = session.connect(x.mine, x.theirs, mtu); !st.ok()) {
        return st;
    }
    if (one_after_connect) {
        if (Status st = hand_shake(x, 0); !st.ok()) {
            return st;
        }
    }
    for (unsigned i = 0; i < qps; ++i) {
        print.text(address_lines(true, x.mine[i], verb));
    }
    for (unsigned i = 0; i < qps; ++i) {
        if (Status st = hand_shake(x, i); !st.ok()) {
            return st;
        }
        print.text(address_lines(false, x.theirs[i], verb));
    }
    const WalkParams walk{cycle_buffer, cache_line};
    if (verifier != nullptr) {
        prepare_verification(*verifier, session, o, x.mine, x.theirs, walk);
    }
    if (!one_after_connect) { // the additional hand shake after RTR
        if (Status st = hand_shake(x, 0); !st.ok()) {
            return st;
        }
    }

    const Phase phase{o, session, x, print, verifier, walk, client};
    return latency ? latency_phase(phase) : bandwidth_phase(phase);
}

// The embedded default: a memif port whose socket is named after the TCP port, server role on
// the side without a host name, and a swroce device on it.
Result<std::vector<std::string>> default_eal_args(const PerfOptions& o) {
    const bool client = o.server.has_value();
    const std::string socket = "/tmp/prdma-perf-" + std::to_string(o.tcp_port) + ".sock";
    if (client) {
        // DPDK 22.11's memif client fails to start unless the server's socket exists.
        const auto deadline = std::chrono::steady_clock::now() + 10s;
        while (!std::filesystem::exists(socket)) {
            if (std::chrono::steady_clock::now() > deadline) {
                return Error(StatusCode::not_connected,
                             "no prdma-perf server on this host: " + socket +
                                 " does not exist (start the server side first; for another "
                                 "host or port type, give EAL options)");
            }
            std::this_thread::sleep_for(20ms);
        }
    } else {
        std::error_code ignored;
        std::filesystem::remove(socket, ignored); // a previous server's, if it died
    }
    return std::vector<std::string>{
        "--log-level=lib.eal:error", "--log-level=pmd.net.memif:error",
        "--log-level=prdma.*:warning",
        // Ring buffers that hold a frame of IB MTU 4096: the client's lay them out, and the
        // server, which cannot see them, is told the MTU its client's hold.
        "--vdev=net_memif0,role=" + std::string(client ? "client" : "server") +
            ",socket=" + socket + ",socket-abstract=no,id=0,bsize=4224",
        "--vdev=rdma_swroce0,port=net_memif0,ip=" + std::string(client ? "10.0.0.2" : "10.0.0.1") +
            ",mtu=4096"};
}

int fail(const std::string& message) noexcept {
    std::fflush(stdout);
    std::fprintf(stderr, "prdma-perf: %s\n", message.c_str());
    return 1;
}

int run_main(int argc, char** argv) {
    std::vector<std::string> args(argv + 1, argv + argc);
    const std::string program = std::filesystem::path(argv[0]).filename().string();
    std::optional<TestId> test;
    if (program.starts_with("prdma_")) {
        test = parse_test_name(program);
    }
    if (!test) {
        if (args.empty() || args[0] == "-h" || args[0] == "--help") {
            std::printf("Usage: prdma-perf TEST [EAL options --] [perftest options] [server]\n"
                        "TEST: write_lat write_bw read_lat read_bw send_lat send_bw atomic_lat "
                        "atomic_bw\n`prdma-perf TEST --help` shows the options.\n");
            return args.empty() ? 1 : 0;
        }
        test = parse_test_name(args[0]);
        if (!test) {
            return fail("unknown test '" + args[0] +
                        "'; choose write_lat, write_bw, read_lat, read_bw, send_lat, send_bw, "
                        "atomic_lat or atomic_bw");
        }
        args.erase(args.begin());
    }
    const CommandLine line = split_command_line(args);
    auto parsed = parse_perf_options(*test, line.perf_args);
    if (!parsed) {
        return fail(parsed.error().message());
    }
    const PerfOptions& options = parsed.value();
    if (options.help) {
        std::fputs(usage(*test).c_str(), stdout);
        return 0;
    }
    if (options.version) {
        // perftest's line first, for scripts that parse it.
        std::printf("Version: %s\nprdma-perf %s (prdma), speaking perftest %s's exchange\n",
                    std::string(perftest_version).c_str(), PRDMA_VERSION_STRING,
                    std::string(perftest_version).c_str());
        return 0;
    }
    // send_bw --run_infinitely is the exception: each side's lines are its own intervals.
    const bool both_sides_loop =
        options.test.kind == Kind::latency
            ? options.test.verb == Verb::write || options.test.verb == Verb::send
            : options.test.verb == Verb::send && !options.run_infinitely;
    if (options.duration_seconds != 0 && both_sides_loop) {
        return fail("-D is not supported for " + test_name(options.test) +
                    ": both sides run the loop and must agree on its length; use -n");
    }
    EalOptions eal_options;
    eal_options.program_name = "prdma-perf";
    if (line.eal_given) {
        eal_options.args = line.eal_args;
    } else {
        auto defaults = default_eal_args(options);
        if (!defaults) {
            return fail(defaults.error().message());
        }
        eal_options.args = defaults.value();
    }
    if (Status placed = place_near_port(eal_options.args, options.server.has_value());
        !placed.ok()) {
        return fail("placing the process near its port: " + placed.error().message());
    }
    auto eal = Eal::start(eal_options);
    if (!eal) {
        return fail("EAL: " + eal.error().message());
    }
    const Status status = run(options);
    // Remove the devices before EAL's own cleanup, which would close their ports first (in vdev
    // order) while they are still started.
    for (const rdma::DeviceId device : rdma::device_list()) {
        (void)rdma::remove_device(device);
    }
    if (!status.ok()) {
        return fail(status.error().message());
    }
    return 0;
}

} // namespace

int main(int argc, char** argv) {
    // Standard-library allocations are the only things that throw here; say so, never abort.
    try {
        return run_main(argc, argv);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "prdma-perf: unexpected error: %s\n", e.what());
        return 1;
    }
}
