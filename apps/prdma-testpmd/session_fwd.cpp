// Forwarding: start hands each lcore the engine and settings (while it is parked) and lets it go;
// stop lets what is in flight complete, parks the lcores to read exact counters, and prints them.
#include <cstdio>
#include <thread>

#include <rte_cycles.h>

#include <prdma/format.hpp>

#include "session.hpp"
#include "stats_report.hpp"

namespace prdma::testpmd {

namespace {
constexpr std::uint64_t drain_ms = 3000; // a peer that went away leaves WRs that never complete
} // namespace

// Every QP's counters as they stand: the lcores' (a racy snapshot while they run, as testpmd
// reads its fwd_stream counters) and the device's.
std::vector<StreamStats> Session::raw_stream_stats() const {
    std::vector<StreamStats> stats(qps_.size());
    for (const auto& lcore : lcores_) {
        for (unsigned slot = 0; slot < lcore->stream_count; ++slot) {
            const Stream& stream = lcore->streams[slot];
            stats[stream.qp_index] = stream.stats;
        }
    }
    for (std::size_t i = 0; i < qps_.size(); ++i) {
        if (!qps_[i] || !qps_[i]->qp.ready()) {
            continue;
        }
        if (Result<rdma::QpStatus> status = qps_[i]->qp.query_status(); status) {
            stats[i].retransmissions = status->retransmissions;
            stats[i].timeouts = status->timeouts;
        }
    }
    return stats;
}

std::vector<StreamStats> Session::stream_stats() const {
    std::vector<StreamStats> stats = raw_stream_stats();
    for (std::size_t i = 0; i < stats.size() && i < baseline_.size(); ++i) {
        stats[i] -= baseline_[i];
    }
    return stats;
}

void Session::clear_stats() {
    baseline_ = raw_stream_stats();
    started_ = std::chrono::steady_clock::now();
}

Status Session::start(bool tx_first) {
    if (forwarding_) {
        return Error(StatusCode::busy, "forwarding is already started: `stop` first");
    }
    bool any = false;
    for (const auto& qp : qps_) {
        any = any || (qp && qp->peer);
    }
    if (!any) {
        return Error(StatusCode::not_connected, "no connected QP: `connect qp N` first");
    }
    if (config_.engine->kind == EngineKind::udsend && config_.fwd.size > mtu_bytes_) {
        return Error(StatusCode::invalid_parameter,
                     strformat("size %u: a datagram is at most the port's MTU (%u B): `set size`",
                               config_.fwd.size, mtu_bytes_));
    }
    if (Status parked = park_all(); !parked) {
        return parked;
    }
    for (auto& lcore : lcores_) {
        lcore->engine = config_.engine;
        lcore->config = config_.fwd;
        lcore->tx_first = tx_first;
    }
    clear_stats();
    forwarding_ = true;
    resume_all();
    std::printf("Start forwarding: %.*s engine, %zu lcores, burst %u, size %u%s\n",
                static_cast<int>(config_.engine->name.size()), config_.engine->name.data(),
                lcores_.size(), config_.fwd.burst, config_.fwd.size, tx_first ? ", tx_first" : "");
    return {};
}

Status Session::stop() {
    if (!forwarding_) {
        return Error(StatusCode::busy, "forwarding is not started");
    }
    std::printf("Telling lcores to stop...\nWaiting for lcores to finish...\n");
    const std::uint64_t deadline = rte_get_timer_cycles() + drain_ms * rte_get_timer_hz() / 1000;
    for (auto& lcore : lcores_) {
        lcore->drain_deadline = deadline; // read after the command's release store
        lcore->command.store(LcoreCommand::drain, std::memory_order_release);
    }
    for (auto& lcore : lcores_) {
        (void)wait_state(*lcore, LcoreState::drained, std::chrono::milliseconds(drain_ms + 2000));
    }
    stopped_ = std::chrono::steady_clock::now();
    forwarding_ = false;
    if (Status parked = park_all(); !parked) {
        return parked;
    }
    print_run_stats(std::chrono::duration<double>(stopped_ - started_).count());
    resume_all();
    std::printf("\nDone.\n");
    return {};
}

void Session::show_fwd_stats() const {
    const auto end = forwarding_ ? std::chrono::steady_clock::now() : stopped_;
    print_run_stats(std::chrono::duration<double>(end - started_).count());
}

void Session::print_run_stats(double seconds) const {
    const std::vector<StreamStats> stats = stream_stats();
    StatsReport report(seconds);
    for (const auto& lcore : lcores_) {
        StreamStats lcore_total;
        for (unsigned slot = 0; slot < lcore->stream_count; ++slot) {
            const Stream& stream = lcore->streams[slot];
            const EngineKind kind =
                config_.engine->kind == EngineKind::mixed ? stream.kind : config_.engine->kind;
            report.print_qp(stream.qp_index, lcore->lcore_id, kind, stats[stream.qp_index]);
            lcore_total += stats[stream.qp_index];
        }
        report.print_lcore(lcore->lcore_id, lcore->stream_count, lcore_total);
    }
    StreamStats total;
    for (const StreamStats& s : stats) {
        total += s;
    }
    report.print_total(total);
}

} // namespace prdma::testpmd
