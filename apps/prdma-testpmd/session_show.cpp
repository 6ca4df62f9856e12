// The `show` displays: device (as testpmd's `show port info|stats|xstats`), QPs, CQs and MRs.
#include <cinttypes>
#include <cstdio>

#include <prdma/format.hpp>

#include "session.hpp"
#include "stats_report.hpp"

namespace prdma::testpmd {

void Session::show_device_info() const {
    Result<rdma::DeviceInfo> info = context_->device_info();
    if (!info) {
        std::printf("%s\n", info.error().to_string().c_str());
        return;
    }
    const rdma::DeviceAttr& a = info->attr;
    std::printf("\n********************* Infos for device %u *********************\n",
                unsigned{device_});
    std::printf("Name: %s\nArguments: %s\n", rdma::device_name(device_).c_str(),
                rdma::device_args(device_).c_str());
    std::printf("Node GUID: 0x%016" PRIx64 "\nVendor: 0x%x  device 0x%x  firmware 0x%x\n",
                a.node_guid, a.vendor_id, unsigned{a.device_id}, a.fw_version);
    std::printf("Max QPs: %u  max QP WRs: %u  max SGEs: %u  max CQs: %u  max CQEs: %u\n", a.max_qp,
                a.max_qp_wr, a.max_sge, a.max_cq, a.max_cqe);
    std::printf("Max MRs: %u  max MR size: %" PRIu64 "  max inline: %u  max fast-reg pages: %u\n",
                a.max_mr, a.max_mr_size, a.max_inline_data, a.max_fast_reg_pages);
    std::printf("Max outstanding reads/atomics: %u  queue groups: %u  max SRQs: %u\n",
                unsigned{a.max_qp_rd_atomic}, a.max_queue_groups, a.max_srq);
    for (const rdma::PortInfo& port : info->ports) {
        const rdma::PortAttr& p = port.attr;
        std::printf("Port %u: %s  active MTU %u  speed %u Mbps  MAC "
                    "%02x:%02x:%02x:%02x:%02x:%02x  GIDs %u\n",
                    unsigned{p.port_num}, p.state == rdma::PortState::active ? "active" : "down",
                    128U << static_cast<unsigned>(p.active_mtu), p.link_speed_mbps, p.mac[0],
                    p.mac[1], p.mac[2], p.mac[3], p.mac[4], p.mac[5], unsigned{p.gid_count});
    }
}

void Session::show_device_stats(bool all) const {
    Result<std::vector<rdma::Counter>> counters = context_->query_stats();
    if (!counters) {
        std::printf("%s\n", counters.error().to_string().c_str());
        return;
    }
    static constexpr std::string_view basic[] = {
        "rx_packets",          "tx_packets",         "retransmissions", "timeouts",
        "naks_sent",           "naks_received",      "duplicates",      "tx_dropped",
        "rx_dropped_injected", "tx_dropped_injected"};
    std::printf("\n  ######################## Device statistics for %s ########################\n",
                rdma::device_name(device_).c_str());
    for (const rdma::Counter& counter : *counters) {
        bool shown = all;
        for (const std::string_view name : basic) {
            shown = shown || counter.name == name;
        }
        if (shown) {
            std::printf("  %s: %" PRIu64 "\n", counter.name.c_str(), counter.value);
        }
    }
}

void Session::show_qps(std::optional<unsigned> index) const {
    if (index) {
        if (Status ok = check_qp(*index, false); !ok) {
            std::printf("Bad argument: %s\n", ok.error().message().c_str());
            return;
        }
    }
    std::printf("  %-4s %-8s %-6s %-6s %-10s %-18s %-10s %-8s %-8s %s\n", "QP", "qpn", "lcore",
                "state", "peer qpn", "buffer", "rkey", "sq psn", "rq psn", "retrans");
    for (std::size_t i = 0; i < qps_.size(); ++i) {
        if (!qps_[i] || (index && *index != i)) {
            continue;
        }
        const QpEntry& q = *qps_[i];
        const std::string peer = q.peer ? strformat("0x%06x", q.peer->qpn) : "-";
        Result<rdma::QpStatus> status = q.qp.query_status();
        const rdma::QpStatus now = status ? *status : rdma::QpStatus{};
        std::printf("  %-4zu 0x%06x %-6u %-6s %-10s %-18p 0x%08x 0x%06x 0x%06x %" PRIu64 "\n", i,
                    q.qp.qpn(), lcores_[q.lcore]->lcore_id,
                    std::string(rdma::qp_state_name(q.qp.state())).c_str(), peer.c_str(),
                    q.buffer->data(), q.mr.rkey(), now.send_psn, now.expected_psn,
                    now.retransmissions);
    }
}

void Session::show_cqs() const {
    std::printf("  %-4s %-6s %-12s %-9s %s\n", "CQ", "lcore", "queue group", "capacity", "QPs");
    for (std::size_t i = 0; i < cqs_.size(); ++i) {
        std::printf("  %-4zu %-6u %-12u %-9u %u\n", i, lcores_[i]->lcore_id,
                    unsigned{cqs_[i].queue_group()}, cqs_[i].capacity(), lcores_[i]->stream_count);
    }
}

void Session::show_mrs() const {
    std::printf("  %-10s %-18s %-10s %-10s %-10s\n", "MR", "address", "length", "lkey", "rkey");
    for (std::size_t i = 0; i < qps_.size(); ++i) {
        if (qps_[i]) {
            const QpEntry& q = *qps_[i];
            std::printf("  %-10s %-18p %-10zu 0x%08x 0x%08x\n", strformat("qp%zu", i).c_str(),
                        q.buffer->data(), q.buffer->size(), q.mr.lkey(), q.mr.rkey());
        }
    }
    for (std::size_t i = 0; i < mrs_.size(); ++i) {
        const UserMr& m = mrs_[i];
        std::printf("  %-10zu %-18p %-10zu 0x%08x 0x%08x%s\n", i, m.buffer.data(), m.buffer.size(),
                    m.mr.lkey(), m.mr.rkey(),
                    m.fast_registered
                        ? strformat("  fast-registered rkey 0x%08x", m.fast_key).c_str()
                        : "");
    }
}

} // namespace prdma::testpmd
