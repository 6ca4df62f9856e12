#include "options.hpp"

#include <algorithm>
#include <charconv>
#include <cstdio>

namespace prdma::perf {

namespace {

struct OptionSpec {
    char short_name; // 0 when only the long form exists
    std::string_view long_name;
    bool takes_value;
};

// perftest's names for what applies to an RC test; anything else is refused, not ignored.
constexpr OptionSpec option_specs[] = {
    {'s', "size", true},
    {'a', "all", false},
    {'n', "iters", true},
    {'D', "duration", true},
    {'q', "qp", true},
    {'m', "mtu", true},
    {'F', "CPU-freq", false},
    {'x', "gid-index", true},
    {'p', "port", true},
    {'I', "inline_size", true},
    {0, "report_gbits", false},
    {'A', "atomic_type", true},
    {'t', "tx-depth", true},
    {'r', "rx-depth", true},
    {'Q', "cq-mod", true},
    {'o', "outs", true},
    {'c', "connection", true},
    {'d', "ib-dev", true},
    {'i', "ib-port", true},
    {'u', "qp-timeout", true},
    {'h', "help", false},
    {'V', "version", false},
    {'H', "report-histogrm", false},
    {'U', "report-unsorted", false},
    {'b', "bidirectional", false},
    {'l', "post_list", true},
    {'N', "noPeak", false},
    {0, "run_infinitely", false},
    {0, "out_json", false},
    {0, "out_json_file", true},
    {0, "dev", true},
    {0, "json", false},
    {0, "sizes", true},
    {0, "stats", false},
    {0, "perform_warm_up", false},
    {0, "use-srq", false},
    {0, "selective-repeat", false},
    {0, "verify", false},
    {0, "verify-corrupt-at", true},
};

const OptionSpec* find_short(char name) {
    for (const auto& spec : option_specs) {
        if (spec.short_name == name) {
            return &spec;
        }
    }
    return nullptr;
}

// getopt_long's rules: an exact name, or a prefix of exactly one name.
Result<const OptionSpec*> find_long(std::string_view name) {
    const OptionSpec* prefix_of = nullptr;
    unsigned prefixes = 0;
    for (const auto& spec : option_specs) {
        if (spec.long_name == name) {
            return &spec;
        }
        if (!name.empty() && spec.long_name.starts_with(name)) {
            prefix_of = &spec;
            ++prefixes;
        }
    }
    if (prefixes > 1) {
        return Error(StatusCode::invalid_parameter,
                     "option '--" + std::string(name) + "' is ambiguous (see --help)");
    }
    if (prefix_of == nullptr) {
        return Error(StatusCode::invalid_parameter,
                     "unknown option '--" + std::string(name) + "' (see --help)");
    }
    return prefix_of;
}

Error bad(const std::string& message) {
    return {StatusCode::invalid_parameter, message};
}

template <typename T>
bool parse_number(std::string_view text, T& out) {
    const char* end = text.data() + text.size();
    auto [ptr, ec] = std::from_chars(text.data(), end, out);
    return ec == std::errc() && ptr == end;
}

Result<std::uint64_t> number(std::string_view option, std::string_view text, std::uint64_t low,
                             std::uint64_t high) {
    std::uint64_t value = 0;
    if (!parse_number(text, value) || value < low || value > high) {
        return bad("option " + std::string(option) + ": '" + std::string(text) +
                   "' is not a number in " + std::to_string(low) + ".." + std::to_string(high));
    }
    return value;
}

// --verify checks against a known number of messages laid out in a known way; what would make
// that unknown is refused rather than checked loosely.
Status check_verify(const PerfOptions& o) {
    if (!o.verify) {
        return o.verify_corrupt_at ? Status{bad("--verify-corrupt-at needs --verify")} : Status{};
    }
    if (o.duration_seconds != 0) {
        return bad("--verify needs a known number of iterations: use -n, not -D");
    }
    if (o.warm_up) {
        return bad("--verify cannot be combined with --perform_warm_up (the unmeasured WRs would "
                   "change what the checked ones find)");
    }
    if (o.test.verb == Verb::atomic && o.sizes != std::vector<std::uint64_t>{8}) {
        return bad("--verify: atomic tests run one size, 8 bytes (each run adds to the same "
                   "counters)");
    }
    if (o.verify_corrupt_at && *o.verify_corrupt_at >= o.iterations) {
        return bad("--verify-corrupt-at " + std::to_string(*o.verify_corrupt_at) +
                   ": the run has iterations 0.." + std::to_string(o.iterations - 1));
    }
    const VerifyBuffers buffers = verify_buffers(o);
    const std::uint64_t bytes = std::uint64_t{buffers.slots} * buffers.stride * o.qps;
    if (bytes > max_verify_buffer_bytes) {
        const bool receiver = o.test.verb == Verb::send && !o.server;
        return bad("--verify gives each message in flight a buffer of its own: " +
                   std::to_string(buffers.slots) + " x " + std::to_string(buffers.stride) +
                   " bytes x " + std::to_string(o.qps) + " QP(s) is more than " +
                   std::to_string(max_verify_buffer_bytes >> 20) + " MiB; lower " +
                   (receiver ? "-r" : "-t") + ", the message size or -q");
    }
    return {};
}

// perftest: 1000, except ib_write_bw's 5000.
std::uint64_t default_iterations(TestId test) {
    return test.kind == Kind::bandwidth && test.verb == Verb::write ? 5000 : 1000;
}

std::uint64_t default_size(TestId test) {
    if (test.verb == Verb::atomic) {
        return 8;
    }
    return test.kind == Kind::latency ? 2 : 65536;
}

} // namespace

std::optional<TestId> parse_test_name(std::string_view name) {
    for (std::string_view prefix : {"ib_", "prdma_"}) {
        if (name.starts_with(prefix)) {
            name.remove_prefix(prefix.size());
        }
    }
    static constexpr std::pair<std::string_view, Verb> verbs[] = {{"write", Verb::write},
                                                                  {"read", Verb::read},
                                                                  {"send", Verb::send},
                                                                  {"atomic", Verb::atomic}};
    for (const auto& [verb_name, verb] : verbs) {
        if (name.starts_with(verb_name)) {
            const std::string_view tail = name.substr(verb_name.size());
            if (tail == "_lat") {
                return TestId{verb, Kind::latency};
            }
            if (tail == "_bw") {
                return TestId{verb, Kind::bandwidth};
            }
        }
    }
    return std::nullopt;
}

std::string test_name(TestId test) {
    static constexpr std::string_view verbs[] = {"write", "read", "send", "atomic"};
    return std::string(verbs[static_cast<unsigned>(test.verb)]) +
           (test.kind == Kind::latency ? "_lat" : "_bw");
}

CommandLine split_command_line(std::span<const std::string> args) {
    CommandLine line;
    const auto separator = std::find(args.begin(), args.end(), "--");
    if (separator == args.end()) {
        line.perf_args.assign(args.begin(), args.end());
        return line;
    }
    line.eal_given = separator != args.begin();
    line.eal_args.assign(args.begin(), separator);
    line.perf_args.assign(separator + 1, args.end());
    return line;
}

namespace {

// One option as given: its spec, how the user spelled it (for messages), its value.
struct GivenOption {
    const OptionSpec* spec = nullptr;
    std::string shown;
    std::string value;
};

// Takes an option's value from the rest of its word or from the next word.
Status take_value(GivenOption& given, std::optional<std::string> attached,
                  std::span<const std::string> args, std::size_t& i) {
    if (!given.spec->takes_value) {
        if (attached) {
            return bad("option " + given.shown + " takes no value");
        }
        return {};
    }
    if (!attached) {
        if (i + 1 >= args.size()) {
            return bad("option " + given.shown + " needs a value");
        }
        attached = args[++i];
    }
    given.value = *attached;
    return {};
}

// getopt_long's command line: `--name`, `--name=value`, `--name value` (or an unambiguous prefix
// of the name); `-x`, `-xvalue`, `-x value`, and short flags bundled, `-aF` or `-Fs64`, the
// value-taking one last. Every other word is the server's name.
Result<std::vector<GivenOption>> split_options(std::span<const std::string> args,
                                               std::optional<std::string>& server) {
    std::vector<GivenOption> options;
    for (std::size_t i = 0; i < args.size(); ++i) {
        const std::string& arg = args[i];
        if (arg.starts_with("--")) {
            const auto eq = arg.find('=');
            auto spec = find_long(std::string_view{arg}.substr(2, eq - 2));
            if (!spec) {
                return spec.error();
            }
            GivenOption given{spec.value(), arg.substr(0, eq), {}};
            const auto attached =
                eq == std::string::npos ? std::nullopt : std::optional(arg.substr(eq + 1));
            if (Status st = take_value(given, attached, args, i); !st.ok()) {
                return st.error();
            }
            options.push_back(std::move(given));
        } else if (arg.size() >= 2 && arg[0] == '-') {
            for (std::size_t c = 1; c < arg.size(); ++c) {
                const OptionSpec* spec = find_short(arg[c]);
                std::string shown = "-";
                shown += arg[c];
                if (spec == nullptr) {
                    std::string message = "unknown option '" + shown + "'";
                    if (arg.size() > 2) {
                        message += " in '" + arg + "'";
                    }
                    return bad(message + " (see --help)");
                }
                GivenOption given{spec, std::move(shown), {}};
                const bool rest = spec->takes_value && c + 1 < arg.size();
                if (Status st = take_value(
                        given, rest ? std::optional(arg.substr(c + 1)) : std::nullopt, args, i);
                    !st.ok()) {
                    return st.error();
                }
                options.push_back(std::move(given));
                if (spec->takes_value) {
                    break;
                }
            }
        } else {
            if (server) {
                return bad("more than one server name: '" + *server + "' and '" + arg + "'");
            }
            server = arg;
        }
    }
    return options;
}

// perftest's rules for the reporting and posting modes, with its defaults.
Status check_modes(PerfOptions& o) {
    const bool latency = o.test.kind == Kind::latency;
    if ((o.histogram || o.unsorted) && (!latency || o.duration_seconds != 0)) {
        return bad("-H and -U report latency samples: latency tests without -D only");
    }
    if (latency && (o.no_peak || o.bidirectional || o.run_infinitely || o.post_list > 1)) {
        return bad(std::string(o.no_peak          ? "-N"
                               : o.bidirectional  ? "-b"
                               : o.run_infinitely ? "--run_infinitely"
                                                  : "-l") +
                   " is available in bandwidth tests only (as in perftest)");
    }
    if (o.bidirectional && o.verify) {
        return bad("--verify checks one direction; it cannot be combined with -b");
    }
    if (o.use_srq && o.test.verb != Verb::send) {
        return bad("--use-srq: a shared receive queue takes SENDs; send_lat and send_bw only (as "
                   "in perftest)");
    }
    if (o.ud && o.test.verb != Verb::send) {
        return bad("-c UD: a datagram is a SEND; send_lat and send_bw only");
    }
    if (o.ud && o.bidirectional) {
        // Each side would wait for the other's lost datagrams while it still sends its own.
        return bad("-c UD with -b is not supported: send_bw -c UD runs one way");
    }
    if (o.ud && o.verify) {
        // A lost datagram would read as a corrupted one.
        return bad("-c UD with --verify is not supported");
    }
    if (o.ud && o.selective_repeat) {
        return bad("--selective-repeat is RC's: a datagram is never resent");
    }
    if (o.use_srq && o.verify) {
        return bad("--verify checks each QP's messages in that QP's receive buffers; with "
                   "--use-srq any QP takes any buffer: they cannot be combined");
    }
    if (o.run_infinitely) {
        if (o.iterations != 0) {
            return bad("--run_infinitely runs until stopped: it cannot be combined with -n");
        }
        if (o.duration_seconds == 0) {
            o.duration_seconds = 5; // perftest's interval between lines
        }
    }
    if (!latency && (o.duration_seconds != 0 || o.run_infinitely)) {
        o.no_peak = true; // perftest measures no peak in a timed run
    }
    return {};
}

// -l, once the defaults are known: perftest's rules.
Status check_post_list(PerfOptions& o) {
    if (o.post_list == 1) {
        return {};
    }
    if (!o.cq_moderation_given) {
        o.cq_moderation = o.post_list; // perftest: one completion per list
    } else if (o.post_list % o.cq_moderation != 0) {
        return bad("-l " + std::to_string(o.post_list) +
                   ": the post list must be a multiple of the CQ moderation (-Q " +
                   std::to_string(o.cq_moderation) + ")");
    }
    if (o.duration_seconds == 0 && o.iterations % o.post_list != 0) {
        return bad("-l " + std::to_string(o.post_list) +
                   ": the number of iterations must be a multiple of the post list");
    }
    if (o.tx_depth < o.post_list) {
        return bad("-l " + std::to_string(o.post_list) + ": a list of " +
                   std::to_string(o.post_list) + " WRs does not fit a send queue of " +
                   std::to_string(o.tx_depth) + " (-t)");
    }
    return {};
}

} // namespace

Result<PerfOptions> parse_perf_options(TestId test, std::span<const std::string> args) {
    PerfOptions o;
    o.test = test;
    std::optional<std::uint64_t> size;
    auto given = split_options(args, o.server);
    if (!given) {
        return given.error();
    }
    std::vector<const OptionSpec*> seen;
    for (const GivenOption& option : given.value()) {
        const std::string_view shown = option.shown;
        if (std::find(seen.begin(), seen.end(), option.spec) != seen.end()) {
            return bad("option " + option.shown + " is given twice");
        }
        seen.push_back(option.spec);
        const std::string_view name = option.spec->long_name;
        const std::string& v = option.value;
        if (name == "size") {
            // perftest's suffixes: 64K, 1M.
            std::string digits = v;
            std::uint64_t scale = 1;
            if (!digits.empty() && (digits.back() == 'K' || digits.back() == 'k')) {
                scale = 1024;
                digits.pop_back();
            } else if (!digits.empty() && (digits.back() == 'M' || digits.back() == 'm')) {
                scale = std::uint64_t{1024} * 1024;
                digits.pop_back();
            }
            auto n = number(shown, digits, 1, max_message_size / scale);
            if (n) {
                n = n.value() * scale;
            }
            if (!n) {
                return bad(n.error().message() + " (the largest message is " +
                           std::to_string(max_message_size) + " bytes, as with -a)");
            }
            size = n.value();
        } else if (name == "all") {
            o.run_all = true;
        } else if (name == "iters") {
            auto n = number(shown, v, 5, 100'000'000);
            if (!n) {
                return n.error();
            }
            o.iterations = n.value();
        } else if (name == "duration") {
            auto n = number(shown, v, 1, 3600);
            if (!n) {
                return n.error();
            }
            o.duration_seconds = static_cast<unsigned>(n.value());
        } else if (name == "qp") {
            if (test.kind != Kind::bandwidth) {
                return bad("multiple QPs (-q) are only available in bandwidth tests");
            }
            auto n = number(shown, v, 1, max_qps);
            if (!n) {
                return n.error();
            }
            o.qps = static_cast<unsigned>(n.value());
        } else if (name == "mtu") {
            static constexpr std::pair<unsigned, rdma::Mtu> mtus[] = {{256, rdma::Mtu::mtu_256},
                                                                      {512, rdma::Mtu::mtu_512},
                                                                      {1024, rdma::Mtu::mtu_1024},
                                                                      {2048, rdma::Mtu::mtu_2048},
                                                                      {4096, rdma::Mtu::mtu_4096}};
            unsigned bytes = 0;
            const auto* match = std::find_if(std::begin(mtus), std::end(mtus), [&](const auto& m) {
                return parse_number(std::string_view{v}, bytes) && m.first == bytes;
            });
            if (match == std::end(mtus)) {
                return bad("option " + std::string(shown) + ": '" + v +
                           "' is not an MTU; choose from {256,512,1024,2048,4096}");
            }
            o.mtu = match->second;
        } else if (name == "CPU-freq") {
            o.cpu_freq_warning_off = true;
        } else if (name == "gid-index") {
            auto n = number(shown, v, 0, 64);
            if (!n) {
                return n.error();
            }
            o.gid_index = static_cast<int>(n.value());
        } else if (name == "port") {
            auto n = number(shown, v, 1, 65535);
            if (!n) {
                return n.error();
            }
            o.tcp_port = static_cast<std::uint16_t>(n.value());
        } else if (name == "inline_size") {
            if (test.verb == Verb::read || test.verb == Verb::atomic) {
                return bad("inline data (-I) does not apply to READ and atomic tests");
            }
            auto n = number(shown, v, 0, 912);
            if (!n) {
                return n.error();
            }
            o.inline_size = static_cast<std::uint32_t>(n.value());
            o.inline_given = true;
        } else if (name == "report_gbits") {
            o.report_gbits = true;
        } else if (name == "atomic_type") {
            if (test.verb != Verb::atomic) {
                return bad("the atomic type (-A) applies to atomic_lat and atomic_bw only");
            }
            if (v == "CMP_AND_SWAP") {
                o.atomic_type = AtomicType::cmp_and_swap;
            } else if (v == "FETCH_AND_ADD") {
                o.atomic_type = AtomicType::fetch_and_add;
            } else {
                return bad("option " + std::string(shown) + ": '" + v +
                           "' is not CMP_AND_SWAP or FETCH_AND_ADD");
            }
        } else if (name == "tx-depth") {
            auto n = number(shown, v, 1, 15000);
            if (!n) {
                return n.error();
            }
            o.tx_depth = static_cast<std::uint32_t>(n.value());
        } else if (name == "rx-depth") {
            auto n = number(shown, v, 1, 4096);
            if (!n) {
                return n.error();
            }
            o.rx_depth = static_cast<std::uint32_t>(n.value());
        } else if (name == "cq-mod") {
            auto n = number(shown, v, 1, 1024);
            if (!n) {
                return n.error();
            }
            o.cq_moderation = static_cast<std::uint32_t>(n.value());
            o.cq_moderation_given = true;
        } else if (name == "outs") {
            if (test.verb != Verb::read && test.verb != Verb::atomic) {
                return bad("outstanding reads (-o) apply to READ and atomic tests only");
            }
            auto n = number(shown, v, 1, 16);
            if (!n) {
                return n.error();
            }
            o.out_reads = static_cast<std::uint32_t>(n.value());
        } else if (name == "connection") {
            if (v != "RC" && v != "UD") {
                return bad("option " + std::string(shown) + ": connection type '" + v +
                           "' is not supported; prdma-perf runs RC and UD");
            }
            o.ud = v == "UD";
        } else if (name == "ib-port") {
            if (v != "1") {
                return bad("option " + std::string(shown) + ": the device has one port (1)");
            }
        } else if (name == "qp-timeout") {
            auto n = number(shown, v, 0, 31);
            if (!n) {
                return n.error();
            }
            o.qp_timeout = static_cast<std::uint8_t>(n.value());
        } else if (name == "ib-dev" || name == "dev") {
            o.device = v;
        } else if (name == "json") {
            o.json = true;
        } else if (name == "out_json") {
            o.out_json = true;
        } else if (name == "out_json_file") {
            if (v.empty()) {
                return bad("option " + std::string(shown) + " needs a file name");
            }
            o.out_json_file = v;
        } else if (name == "report-histogrm") {
            o.histogram = true;
        } else if (name == "report-unsorted") {
            o.unsorted = true;
        } else if (name == "bidirectional") {
            o.bidirectional = true;
        } else if (name == "noPeak") {
            o.no_peak = true;
        } else if (name == "run_infinitely") {
            o.run_infinitely = true;
        } else if (name == "post_list") {
            auto n = number(shown, v, 1, 4096);
            if (!n) {
                return n.error();
            }
            o.post_list = static_cast<std::uint32_t>(n.value());
        } else if (name == "stats") {
            o.stats = true;
        } else if (name == "perform_warm_up") {
            if (test.kind != Kind::bandwidth || test.verb == Verb::send) {
                return bad("--perform_warm_up is valid in atomic, read and write bandwidth tests "
                           "only (as in perftest)");
            }
            o.warm_up = true;
        } else if (name == "use-srq") {
            o.use_srq = true;
        } else if (name == "selective-repeat") {
            o.selective_repeat = true;
        } else if (name == "verify") {
            o.verify = true;
        } else if (name == "verify-corrupt-at") {
            auto n = number(shown, v, 0, 100'000'000);
            if (!n) {
                return n.error();
            }
            o.verify_corrupt_at = n.value();
        } else if (name == "sizes") {
            std::size_t start = 0;
            while (start <= v.size()) {
                const auto comma = std::min(v.find(',', start), v.size());
                auto n = number(shown, std::string_view{v}.substr(start, comma - start), 1,
                                max_message_size);
                if (!n) {
                    return n.error();
                }
                o.sizes.push_back(n.value());
                start = comma + 1;
            }
        } else if (name == "help") {
            o.help = true;
        } else if (name == "version") {
            o.version = true;
        }
    }
    if (Status st = check_modes(o); !st.ok()) {
        return st.error();
    }
    if (o.run_all && (size || !o.sizes.empty())) {
        return bad("-a runs every size from 2 to 2^23; do not combine it with -s or --sizes");
    }
    if (size && !o.sizes.empty()) {
        return bad("give either -s or --sizes, not both");
    }
    if (o.duration_seconds != 0 && (o.iterations != 0 || o.run_all)) {
        return bad("-D runs for a time: it cannot be combined with -n or -a");
    }
    if (test.verb == Verb::atomic) {
        if ((size && *size != 8) || o.run_all) {
            return bad("atomic tests move 8 bytes; -s and -a do not apply");
        }
    }
    // Ascending and once each: write_lat's poll byte (the last byte of a message) is then a byte
    // no earlier, smaller message of the run wrote, as with perftest's -a.
    std::sort(o.sizes.begin(), o.sizes.end());
    o.sizes.erase(std::unique(o.sizes.begin(), o.sizes.end()), o.sizes.end());
    if (o.run_all) {
        for (unsigned shift = 1; shift <= 23; ++shift) {
            o.sizes.push_back(1ULL << shift);
        }
    } else if (size) {
        o.sizes.push_back(*size);
    } else if (o.sizes.empty()) {
        o.sizes.push_back(default_size(test));
    }
    if (o.iterations == 0) {
        o.iterations = default_iterations(test);
    }
    if (o.tx_depth == 0) {
        o.tx_depth = test.kind == Kind::latency ? 1 : 128;
    }
    // perftest clamps the queues to the work there is.
    o.tx_depth = static_cast<std::uint32_t>(std::min<std::uint64_t>(o.tx_depth, o.iterations));
    o.rx_depth = static_cast<std::uint32_t>(std::min<std::uint64_t>(o.rx_depth, o.iterations));
    if (Status st = check_post_list(o); !st.ok()) {
        return st.error();
    }
    if (test.kind == Kind::bandwidth && o.cq_moderation > o.tx_depth) {
        o.cq_moderation = o.tx_depth; // perftest lowers it the same way
    }
    if (!o.inline_given) {
        // perftest's defaults: write_lat inlines up to 220 bytes, send_lat up to 236 (188 over
        // UD), the bandwidth tests nothing.
        if (test.kind == Kind::latency && test.verb == Verb::write) {
            o.inline_size = 220;
        } else if (test.kind == Kind::latency && test.verb == Verb::send) {
            o.inline_size = o.ud ? 188 : 236; // perftest's DEF_INLINE_SEND_UD under -c UD
        } else {
            o.inline_size = 0;
        }
    }
    if (Status st = check_verify(o); !st.ok()) {
        return st.error();
    }
    return o;
}

std::uint32_t receives_per_qp(const PerfOptions& o) {
    return o.use_srq ? std::max<std::uint32_t>(1, o.rx_depth / o.qps) : o.rx_depth;
}

VerifyBuffers verify_buffers(const PerfOptions& o) {
    if (!o.verify || o.test.kind == Kind::latency) {
        return {};
    }
    std::uint32_t slots = 0;
    if (o.server) {
        slots = o.tx_depth; // a requester: sources or destinations
    } else if (o.test.verb == Verb::send) {
        slots = o.rx_depth; // send_bw's receiver
    } else {
        return {}; // a passive target
    }
    const std::uint64_t largest =
        o.test.verb == Verb::atomic ? 8 : *std::max_element(o.sizes.begin(), o.sizes.end());
    return {slots, (largest + 63) / 64 * 64};
}

std::string usage(TestId test) {
    return "Usage:\n"
           "  prdma-perf " +
           test_name(test) +
           " [EAL options --] [options] [server]   (client with a server name, server without)\n"
           "\nOptions (perftest's):\n"
           "  -s, --size=<size>        message size, K/M suffixes (default 2 latency, 65536 bw, 8 "
           "atomic)\n"
           "  -a, --all                every size from 2 to 2^23\n"
           "  -n, --iters=<iters>      iterations (default 1000; write_bw 5000)\n"
           "  -D, --duration=<sec>     run for a time instead of a number of iterations\n"
           "  -q, --qp=<n>             QPs, bandwidth tests (1..1024, default 1)\n"
           "  -m, --mtu=<mtu>          path MTU 256..4096 (default: the port's)\n"
           "  -F, --CPU-freq           do not warn about CPU frequency scaling\n"
           "  -x, --gid-index=<i>      GID index (default 0)\n"
           "  -p, --port=<port>        TCP port of the exchange (default 18515)\n"
           "  -I, --inline_size=<n>    inline size (default 220 write_lat, 236 send_lat, else 0)\n"
           "      --report_gbits       bandwidth in Gb/s instead of MB/s\n"
           "      --perform_warm_up    unmeasured WRs before each size (write/read/atomic_bw)\n"
           "  -A, --atomic_type=<t>    CMP_AND_SWAP or FETCH_AND_ADD (default FETCH_AND_ADD)\n"
           "  -t, --tx-depth=<n>       send queue depth (default 1 latency, 128 bandwidth)\n"
           "  -r, --rx-depth=<n>       receive queue depth (default 512)\n"
           "  -Q, --cq-mod=<n>         completions per signaled WR in bandwidth tests (100)\n"
           "  -o, --outs=<n>           outstanding reads/atomics (default: the device's maximum)\n"
           "  -u, --qp-timeout=<t>     QP timeout, 4.096 us x 2^t (default 14)\n"
           "  -d, --ib-dev=<name>      the prdma device (default: the first)\n"
           "  -H, --report-histogrm    latency: every sample kept, sorted (\"#, usec\" lines)\n"
           "  -U, --report-unsorted    latency: every sample, in the order measured\n"
           "  -b, --bidirectional      bandwidth: both sides post; each prints the sum\n"
           "                           (write_bw, read_bw, atomic_bw)\n"
           "  -l, --post_list=<n>      bandwidth: n WRs per post call (-Q defaults to n)\n"
           "  -N, --noPeak             bandwidth: no peak (always so with -D)\n"
           "      --run_infinitely     bandwidth: a line every -D seconds (default 5) until\n"
           "                           stopped (send_bw's receiver prints its own lines)\n"
           "      --out_json           also write the result as perftest's JSON object to\n"
           "                           perftest_out.json (rewritten per result: the last stays)\n"
           "      --out_json_file=<f>  that file's name instead\n"
           "      --use-srq            send_lat, send_bw: every QP takes its receives from one\n"
           "                           shared receive queue of rx_depth receives\n"
           "  -c, --connection=<RC|UD> send_lat, send_bw: UD sends datagrams of at most the\n"
           "                           MTU; send_bw's server says how many of -n were lost\n"
           "                           (default RC)\n"
           "\nprdma additions:\n"
           "      --dev=<name>         same as -d\n"
           "      --sizes=<a,b,...>    a list of sizes\n"
           "      --json               the same JSON objects on stdout instead of the tables,\n"
           "                           one per result, each on one line\n"
           "      --stats              the device's counters on stderr at the end\n"
           "      --selective-repeat   RC: after a loss resend only what the peer NAKs; give\n"
           "                           it to both sides, and only when the peer is prdma\n"
           "      --verify             patterned payloads; the receiving side checks every byte\n"
           "                           and exits 1 on a mismatch (give it to both sides)\n"
           "      --verify-corrupt-at=<n>  testing aid for --verify: damage one byte of\n"
           "                           iteration n's data (counting from 0)\n"
           "  -h, --help               this text\n"
           "  -V, --version            prdma's version and the perftest version it speaks\n"
           "\nWithout EAL options each side makes a net_memif port (server role on the side\n"
           "without a host name; 4224-byte ring buffers, so the path MTU is 4096) and an\n"
           "rdma_swroce device on it, on its own core.\n";
}

} // namespace prdma::perf
