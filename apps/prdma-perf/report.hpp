// perftest's numbers and tables: the same statistics from the same timestamps, printed with
// perftest's headers and row formats (perftest_parameters.c: print_report_lat, print_report_bw,
// ctx_print_test_info), plus one JSON object per row for machines.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "options.hpp"
#include "perftest_wire.hpp"

namespace prdma::perf {

struct LatencyReport {
    std::uint64_t size = 0;
    std::uint64_t iterations = 0;
    double tps = 0; // -D only: transactions per second
    double t_min = 0, t_max = 0, t_typical = 0, t_avg = 0, t_stdev = 0, p99 = 0, p999 = 0;
};

// perftest's print_report_lat: deltas between consecutive post timestamps, sorted; WRITE and
// SEND report half of each round trip (rtt_factor 2), READ and atomics the whole one.
LatencyReport latency_report(std::span<const std::uint64_t> timestamps, double cycles_per_usec,
                             bool half_round_trip, std::uint64_t size);

struct BandwidthReport {
    std::uint64_t size = 0;
    std::uint64_t iterations = 0;
    double bw_peak = 0;    // MB/s (2^20 bytes) or Gb/s with --report_gbits
    double bw_average = 0; // same unit
    double msg_rate = 0;   // Mpps
    // send_bw -c UD's server: the datagrams it expected (-n on each QP) that never arrived; the
    // iterations are those that did.
    std::optional<std::uint64_t> lost;
};

// perftest's print_report_bw: the average over the whole run (first post to last completion) and
// the peak of the best single WR.
// `completed[j]` must hold the time WR j's completion was seen (a moderated completion counts for
// the cq_moderation WRs before it). No peak with `no_peak`, or above 20000 WRs (as perftest).
struct BandwidthInput {
    std::span<const std::uint64_t> posted;
    std::span<const std::uint64_t> completed;
    std::uint64_t iterations = 0; // all QPs
    double cycles_per_second = 0;
    std::uint64_t size = 0;
    std::uint32_t cq_moderation = 1;
    bool gbits = false;
    bool no_peak = false;
};
BandwidthReport bandwidth_report(const BandwidthInput& input);
// -D: iterations over a measured interval.
LatencyReport duration_latency_report(std::uint64_t iterations, std::uint64_t cycles,
                                      double cycles_per_usec, bool half_round_trip,
                                      std::uint64_t size);

// The lines perftest prints.
struct TestInfo {
    TestId test;
    std::string device;
    unsigned qps = 1;
    std::string link_type = "Ethernet";
    rdma::Mtu mtu = rdma::Mtu::mtu_1024;
    std::uint32_t tx_depth = 1;
    std::uint32_t rx_depth = 512;
    std::uint32_t cq_moderation = 1;
    std::uint32_t inline_size = 0;
    std::uint32_t out_reads = 16;
    int gid_index = 0;
    AtomicType atomic_type = AtomicType::fetch_and_add;
    std::uint32_t post_list = 1;
    bool bidirectional = false;
    bool use_srq = false;
    bool ud = false;    // -c UD
    bool client = true; // the side that posts (perftest prints TX depth for it)
};
std::string test_info_block(const TestInfo& info);
std::string address_lines(bool local, const KeyMessage& keys, Verb verb);
std::string latency_table_header(bool duration);
std::string latency_row(const LatencyReport& report, bool duration);
std::string bandwidth_table_header(bool gbits);
std::string bandwidth_row(const BandwidthReport& report, bool gbits);
// Under a row with `lost`: how many datagrams arrived of those sent.
std::string loss_line(const BandwidthReport& report);
std::string result_line(); // perftest's dashed separator

// What --verify checked for one result line (verifier.hpp).
struct VerifySummary {
    std::uint64_t bytes = 0;
    std::uint64_t messages = 0; // checked one by one as they arrived
    std::uint64_t buffers = 0;  // write_bw's passive side: receive buffers checked after the run
    std::uint64_t failures = 0; // wrong messages or buffers
};
// The line under a result row; a side that only sends or serves says the peer checks.
std::string verify_line(const VerifySummary& summary);

// -U and -H: perftest's "#, usec" list of the samples print_report_lat computes its statistics
// from, in the order measured (all of them) or sorted (without the largest two).
std::string latency_samples(std::span<const std::uint64_t> timestamps, double cycles_per_usec,
                            bool half_round_trip, bool sorted);

// perftest's --out_json object: "test_info" as the test-information block, "results" as one
// result row, with perftest's key names and number formats. `one_line` puts it on one line
// (--json, one object per row on stdout). --verify's counts follow perftest's keys in "results".
std::string perftest_json(const TestInfo& info, const LatencyReport& report, bool duration,
                          const std::optional<VerifySummary>& verify, bool one_line);
std::string perftest_json(const TestInfo& info, const BandwidthReport& report, bool gbits,
                          const std::optional<VerifySummary>& verify, bool one_line);

} // namespace prdma::perf
