// prdma-testpmd's own options, after EAL's and `--` (testpmd's names where testpmd has them:
// -i, -a, --cmdline-file, --stats-period, --nb-qps as --rxq/--txq, --burst, --fwd).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <prdma/status.hpp>

#include "fwd_lcore.hpp"

namespace prdma::testpmd {

struct TestpmdOptions {
    bool interactive = false;
    bool autostart = false;
    std::string cmdline_file;
    unsigned stats_period = 0; // seconds; 0: none
    unsigned nb_qps = 1;
    FwdConfig fwd;
    std::string engine = "write";
    std::string device;
    std::string peer_host; // empty: listen
    std::uint16_t peer_port = 18515;
    bool srq = false;              // one shared receive queue per forwarding lcore
    bool ud = false;               // --qp-type ud: the QPs are UD (engines udsend and rxonly)
    bool selective_repeat = false; // RC QPs recover by selective repeat (both sides must ask)
    bool engine_given = false;
    bool help = false;
};

// Every mistake is invalid_parameter with a message naming the option and what it takes.
Result<TestpmdOptions> parse_options(int argc, char** argv);
void print_usage(const char* program);

} // namespace prdma::testpmd
