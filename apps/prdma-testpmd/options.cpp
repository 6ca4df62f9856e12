// parse_options: getopt_long over what EAL left, strict numbers (no trailing junk, no overflow).
#include "options.hpp"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <getopt.h>
#include <string_view>

#include <prdma/format.hpp>

#include "fwd_engine.hpp"

namespace prdma::testpmd {

namespace {

enum LongOnly : int {
    opt_cmdline_file = 256,
    opt_stats_period,
    opt_nb_qps,
    opt_burst,
    opt_size,
    opt_fwd,
    opt_peer,
    opt_device,
    opt_inline,
    opt_signal_every,
    opt_srq,
    opt_qp_type,
    opt_selective_repeat,
};

const option long_options[] = {
    {"interactive", no_argument, nullptr, 'i'},
    {"auto-start", no_argument, nullptr, 'a'},
    {"help", no_argument, nullptr, 'h'},
    {"cmdline-file", required_argument, nullptr, opt_cmdline_file},
    {"stats-period", required_argument, nullptr, opt_stats_period},
    {"nb-qps", required_argument, nullptr, opt_nb_qps},
    {"burst", required_argument, nullptr, opt_burst},
    {"size", required_argument, nullptr, opt_size},
    {"fwd", required_argument, nullptr, opt_fwd},
    {"peer", required_argument, nullptr, opt_peer},
    {"device", required_argument, nullptr, opt_device},
    {"inline", required_argument, nullptr, opt_inline},
    {"signal-every", required_argument, nullptr, opt_signal_every},
    {"srq", no_argument, nullptr, opt_srq},
    {"qp-type", required_argument, nullptr, opt_qp_type},
    {"selective-repeat", no_argument, nullptr, opt_selective_repeat},
    {nullptr, 0, nullptr, 0},
};

Result<unsigned> number(const char* name, const char* text, unsigned low, unsigned high) {
    char* end = nullptr;
    errno = 0;
    const unsigned long value = std::strtoul(text, &end, 10);
    if (*text == '\0' || *text == '-' || *end != '\0' || errno != 0 || value < low ||
        value > high) {
        return Error(StatusCode::invalid_parameter,
                     strformat("--%s '%s': a whole number in [%u, %u]", name, text, low, high));
    }
    return static_cast<unsigned>(value);
}

Status parse_peer(const std::string& text, TestpmdOptions& o) {
    const std::size_t colon = text.rfind(':');
    o.peer_host = text.substr(0, colon);
    if (colon != std::string::npos) {
        Result<unsigned> port = number("peer", text.substr(colon + 1).c_str(), 1, 65535);
        if (!port) {
            return Error(StatusCode::invalid_parameter,
                         strformat("--peer '%s': HOST[:PORT], PORT in [1, 65535]", text.c_str()));
        }
        o.peer_port = static_cast<std::uint16_t>(*port);
    }
    return {};
}

Status apply(int c, const char* arg, TestpmdOptions& o) {
    Result<unsigned> n = 0U;
    switch (c) {
    case 'i':
        o.interactive = true;
        return {};
    case 'a':
        o.autostart = true;
        return {};
    case 'h':
        o.help = true;
        return {};
    case opt_cmdline_file:
        o.cmdline_file = arg;
        return {};
    case opt_stats_period:
        n = number("stats-period", arg, 1, 86400);
        o.stats_period = n ? *n : 0;
        break;
    case opt_nb_qps:
        n = number("nb-qps", arg, 0, 256);
        o.nb_qps = n ? *n : 0;
        break;
    case opt_burst:
        n = number("burst", arg, 1, max_burst);
        o.fwd.burst = n ? *n : 0;
        break;
    case opt_size:
        n = number("size", arg, 1, max_message);
        o.fwd.size = n ? *n : 0;
        break;
    case opt_inline:
        n = number("inline", arg, 0, 1024);
        o.fwd.inline_size = n ? *n : 0;
        break;
    case opt_signal_every:
        n = number("signal-every", arg, 1, 256);
        o.fwd.signal_every = n ? *n : 0;
        break;
    case opt_fwd:
        if (find_engine(arg) == nullptr) {
            return Error(
                StatusCode::invalid_parameter,
                strformat("--fwd '%s': write, read, send, atomic, echo, mixed, rxonly or udsend",
                          arg));
        }
        o.engine = arg;
        o.engine_given = true;
        return {};
    case opt_peer:
        return parse_peer(arg, o);
    case opt_device:
        o.device = arg;
        return {};
    case opt_srq:
        o.srq = true;
        return {};
    case opt_qp_type:
        if (std::string_view(arg) != "rc" && std::string_view(arg) != "ud") {
            return Error(StatusCode::invalid_parameter, strformat("--qp-type '%s': rc or ud", arg));
        }
        o.ud = std::string_view(arg) == "ud";
        return {};
    case opt_selective_repeat:
        o.selective_repeat = true;
        return {};
    default:
        return Error(StatusCode::invalid_parameter, "unknown option (--help lists them)");
    }
    return n ? Status{} : Status{n.error()};
}

} // namespace

void print_usage(const char* program) {
    std::printf("usage: %s [EAL options] -- [options]\n"
                "  -i, --interactive      run the prompt (after --cmdline-file and -a)\n"
                "  -a, --auto-start       connect every QP with the peer and start forwarding\n"
                "  --cmdline-file FILE    run the commands in FILE, then the prompt (-i) or exit\n"
                "  --stats-period N       without -i: print the forward statistics every N s until "
                "SIGINT\n"
                "  --nb-qps N             QPs created at start-up (default 1; 0 to 256)\n"
                "  --burst N              WRs per burst (default 32; 1 to %u)\n"
                "  --size N               message bytes (default 64; 1 to %u)\n"
                "  --inline N             inline WRITE/SEND payloads up to N bytes (default 0)\n"
                "  --signal-every N       one signaled WR every N (default 16)\n"
                "  --fwd ENGINE           write, read, send, atomic, echo, mixed, rxonly, udsend\n"
                "                         (default write; udsend under --qp-type ud)\n"
                "  --peer [HOST][:PORT]   the peer's TCP address; without HOST listen on PORT "
                "(default 18515)\n"
                "  --device NAME          the rdma device (default: the first)\n"
                "  --srq                  each lcore's QPs take their receives from one shared\n"
                "                         receive queue of %u (send, echo, rxonly)\n"
                "  --qp-type rc|ud        the QPs' transport (default rc); UD QPs run udsend,\n"
                "                         datagrams to every peer QP in turn, and rxonly\n"
                "  --selective-repeat     RC: after a loss resend only what the peer NAKs (the\n"
                "                         peer must say so too; without, go-back-N)\n",
                program, max_burst, max_message, srq_slots);
}

Result<TestpmdOptions> parse_options(int argc, char** argv) {
    TestpmdOptions o;
    optind = 1;
    opterr = 0;
    int c = 0;
    while ((c = getopt_long(argc, argv, ":iah", long_options, nullptr)) != -1) {
        if (c == '?' || c == ':') {
            // optopt is a short option's letter; a long option's value is no letter.
            const std::string which = optopt > 0 && optopt < opt_cmdline_file
                                          ? std::string("-") + static_cast<char>(optopt)
                                          : std::string(argv[optind - 1]);
            return Error(StatusCode::invalid_parameter,
                         strformat("%s option '%s' (--help lists them)",
                                   c == ':' ? "missing the value of" : "unknown", which.c_str()));
        }
        if (Status ok = apply(c, optarg, o); !ok) {
            return ok.error();
        }
    }
    if (optind < argc) {
        return Error(
            StatusCode::invalid_parameter,
            strformat("unexpected argument '%s' (--help lists the options)", argv[optind]));
    }
    if (o.ud && o.selective_repeat) {
        return Error(StatusCode::invalid_parameter,
                     "--selective-repeat is RC's: a datagram is never resent");
    }
    if (o.ud && !o.engine_given) {
        o.engine = "udsend";
    }
    if (const char* misfit = engine_misfit(*find_engine(o.engine), o.ud); misfit != nullptr) {
        return Error(StatusCode::invalid_parameter,
                     strformat("--fwd %s: %s", o.engine.c_str(), misfit));
    }
    return o;
}

} // namespace prdma::testpmd
