// prdma-perf's command line: `prdma-perf TEST [EAL options] -- [perftest options] [server]`.
// perftest's option names, defaults and limits for everything that applies to an RC test on one
// port; a few prdma extensions (--dev, --json, --sizes, --stats, --verify) are named so they
// cannot clash.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <prdma/rdmadev/types.hpp>
#include <prdma/status.hpp>

namespace prdma::perf {

enum class Verb : std::uint8_t { write, read, send, atomic };
enum class Kind : std::uint8_t { latency, bandwidth };
enum class AtomicType : std::uint8_t { cmp_and_swap, fetch_and_add };

struct TestId {
    Verb verb = Verb::write;
    Kind kind = Kind::latency;
};
// "write_lat" ... "atomic_bw"; also accepts perftest's names ("ib_write_lat") and the installed
// wrappers' ("prdma_write_lat").
std::optional<TestId> parse_test_name(std::string_view name);
std::string test_name(TestId test);

inline constexpr std::uint64_t max_message_size = 8ULL << 20; // perftest's MAX_SIZE for RC
inline constexpr unsigned max_qps = 1024;

struct PerfOptions {
    TestId test;
    std::optional<std::string> server; // client when a host name is given
    std::uint16_t tcp_port = 18515;
    std::vector<std::uint64_t> sizes;  // -s, -a (2..2^23) or --sizes
    bool run_all = false;              // -a
    std::uint64_t iterations = 0;      // -n; 0 = test default
    unsigned duration_seconds = 0;     // -D: run for a time instead of -n
    unsigned qps = 1;                  // -q
    std::optional<rdma::Mtu> mtu;      // -m; absent = the port's active MTU
    bool cpu_freq_warning_off = false; // -F
    int gid_index = 0;                 // -x (RoCE: GID index 0 is the device's address)
    std::uint32_t inline_size = 0;     // -I; set from the test's default when not given
    bool inline_given = false;
    bool report_gbits = false;                          // --report_gbits
    AtomicType atomic_type = AtomicType::fetch_and_add; // -A
    std::uint32_t tx_depth = 0;                         // -t; 0 = test default
    std::uint32_t rx_depth = 512;                       // -r
    std::uint32_t cq_moderation = 100;                  // -Q
    bool cq_moderation_given = false;
    std::uint32_t out_reads = 16; // -o (clamped to the device's maximum)
    std::uint8_t qp_timeout = 14; // -u
    std::string device;           // --dev / -d
    bool histogram = false;       // -H: every kept latency sample, sorted
    bool unsorted = false;        // -U: every latency sample, in the order measured
    bool bidirectional = false;   // -b: both sides post; each prints the sum of both
    std::uint32_t post_list = 1;  // -l: WRs per post_send, linked as one list
    bool no_peak = false;         // -N (forced by -D and --run_infinitely, as perftest)
    bool run_infinitely = false;  // --run_infinitely: a line every -D seconds until killed
    bool out_json = false;        // --out_json: perftest's JSON object in out_json_file
    std::string out_json_file = "perftest_out.json"; // --out_json_file
    bool json = false;    // --json: the same objects on stdout, one per line
    bool stats = false;   // --stats: the device counters on stderr at the end
    bool warm_up = false; // --perform_warm_up: unmeasured WRs before each size (bw)
    bool verify = false;  // --verify: patterned payloads, every received byte checked
    bool use_srq = false; // --use-srq: every QP takes its receives from one SRQ (SEND tests)
    bool ud = false;      // -c UD: datagrams to an address handle per QP (SEND tests)
    // --selective-repeat: the peer is prdma-perf given it too (QpAttr::selective_repeat)
    bool selective_repeat = false;
    std::optional<std::uint64_t> verify_corrupt_at; // --verify-corrupt-at: a test aid (verify.hpp)
    bool help = false;
    bool version = false;
};

// Parses perftest options (everything after the `--`, or all of argv when there are no EAL
// options). Errors name the option and the rule it broke.
Result<PerfOptions> parse_perf_options(TestId test, std::span<const std::string> args);
std::string usage(TestId test);

// --verify's own buffers on a side: with several messages in flight each has a buffer of its own
// (a sender's source, a READ's or atomic's destination, a send_bw receive), so none is rewritten
// before its message is done. Latency tests and passive targets need none (slots 0).
struct VerifyBuffers {
    std::uint32_t slots = 0; // per QP
    std::uint64_t stride = 0;
};
VerifyBuffers verify_buffers(const PerfOptions& options);
// The receives a QP has posted ahead of its messages: rx_depth, or under --use-srq its share of
// the SRQ's rx_depth (perftest's split), at least one.
std::uint32_t receives_per_qp(const PerfOptions& options);
// What those buffers may take on one side, all QPs together.
inline constexpr std::uint64_t max_verify_buffer_bytes = 256ULL << 20;

// Splits `prdma-perf TEST [EAL options] -- [perftest options]`: EAL options are those before a
// `--`; without one, everything is a perftest option.
struct CommandLine {
    std::vector<std::string> eal_args;
    std::vector<std::string> perf_args;
    bool eal_given = false;
};
CommandLine split_command_line(std::span<const std::string> args);

} // namespace prdma::perf
