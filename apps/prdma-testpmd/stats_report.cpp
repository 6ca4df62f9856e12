// StatsReport: rates count completed operations (sends completed and messages received) over the
// whole run, and their bytes, as testpmd's throughput counts packets forwarded.
#include "stats_report.hpp"

#include <cinttypes>
#include <cstdio>
#include <string>

#include <prdma/rdmadev/work_request.hpp>

namespace prdma::testpmd {

const char* engine_kind_name(EngineKind kind) {
    switch (kind) {
    case EngineKind::write:
        return "write";
    case EngineKind::read:
        return "read";
    case EngineKind::send:
        return "send";
    case EngineKind::atomic:
        return "atomic";
    case EngineKind::echo:
        return "echo";
    case EngineKind::rxonly:
        return "rxonly";
    case EngineKind::mixed:
        return "mixed";
    case EngineKind::udsend:
        return "udsend";
    }
    return "?";
}

namespace {

std::string error_list(const StreamStats& stats) {
    std::string out;
    for (std::size_t i = 0; i < stats.wc_errors.size(); ++i) {
        if (stats.wc_errors[i] != 0) {
            out += std::string(out.empty() ? "" : " ") +
                   std::string(rdma::wc_status_name(static_cast<rdma::WcStatus>(i))) + "=" +
                   std::to_string(stats.wc_errors[i]);
        }
    }
    return out.empty() ? "none" : out;
}

} // namespace

void StatsReport::print_body(const StreamStats& s) const {
    const auto ops = static_cast<double>(s.tx_completed + s.rx_ops);
    const auto bytes = static_cast<double>(s.tx_bytes_completed + s.rx_bytes);
    std::printf("  TX-ops: %-14" PRIu64 " TX-bytes: %-16" PRIu64 " TX-completed: %-14" PRIu64
                " TX-bytes-completed: %" PRIu64 "\n",
                s.tx_posted, s.tx_bytes, s.tx_completed, s.tx_bytes_completed);
    std::printf("  RX-ops: %-14" PRIu64 " RX-bytes: %-16" PRIu64 " RX-verify-errors: %-10" PRIu64
                " Echoed: %" PRIu64 "\n",
                s.rx_ops, s.rx_bytes, s.rx_verify_errors, s.echoed);
    std::printf("  Errors: %" PRIu64 " (%s)  Post-refused: %" PRIu64 "  Retransmissions: %" PRIu64
                "  Timeouts: %" PRIu64 "\n",
                s.errors(), error_list(s).c_str(), s.post_refused, s.retransmissions, s.timeouts);
    std::printf("  Rate: %.3f Mops  %.3f Gbps  over %.3f s\n", ops / seconds_ / 1e6,
                bytes * 8 / seconds_ / 1e9, seconds_);
}

void StatsReport::print_qp(unsigned qp, unsigned lcore, EngineKind kind,
                           const StreamStats& stats) const {
    std::printf("\n  ---------------------- Forward statistics for QP %u (lcore %u, %s) "
                "----------------------\n",
                qp, lcore, engine_kind_name(kind));
    print_body(stats);
}

void StatsReport::print_lcore(unsigned lcore, unsigned qps, const StreamStats& stats) const {
    std::printf("\n  ---------------------- Forward statistics for lcore %u (%u QPs) "
                "----------------------\n",
                lcore, qps);
    print_body(stats);
}

void StatsReport::print_total(const StreamStats& stats) const {
    std::printf("\n  +++++++++++++++ Accumulated forward statistics for all QPs "
                "+++++++++++++++\n");
    print_body(stats);
    std::printf("  ++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++"
                "+++\n");
}

} // namespace prdma::testpmd
