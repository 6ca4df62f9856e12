// Statistics (xstats-style counters) and per-QP telemetry.
#include <algorithm>
#include <cstring>

#include <rte_cycles.h>
#include <rte_ether.h>
#include <rte_mbuf.h>
#include <rte_ring.h>

#include <prdma/format.hpp>
#include <prdma/roce/psn.hpp>

#include "group_hold.hpp"
#include "swroce_control.hpp"
#include "swroce_log.hpp"

namespace prdma::swroce {

namespace {

void append_counters(const std::string& prefix, const SwroceCounters& c,
                     std::vector<rdma::Counter>& out) {
    for_each_counter(
        [&](std::string_view name, std::uint64_t value) {
            out.push_back({prefix + std::string(name), value});
        },
        c);
}

SwroceCounters& operator+=(SwroceCounters& sum, const SwroceCounters& g) {
    for_each_counter(
        [](std::string_view, std::uint64_t& total, std::uint64_t value) { total += value; }, sum,
        g);
    return sum;
}

// The port's own: what it skipped while its link was down (a memif peer gone), over all groups.
void append_link_down_counters(const SwroceDevice& dev, std::vector<rdma::Counter>& out) {
    std::uint64_t dropped = 0;
    std::uint64_t polls = 0;
    for (unsigned g = 0; g < dev.groups.size(); ++g) {
        const PortLinkDownCounters c = dev.port.link_down_counters(g);
        dropped += c.tx_dropped_link_down;
        polls += c.rx_polls_link_down;
    }
    out.push_back({"tx_dropped_link_down", dropped});
    out.push_back({"rx_polls_link_down", polls});
}

// One queue slot with its room in the stores.
std::uint32_t send_wqe_bytes(const rdma::QpCaps& caps) {
    const std::uint32_t sges = caps.max_send_sge > 1 ? caps.max_send_sge : 0;
    return static_cast<std::uint32_t>(sizeof(SendWqe) +
                                      sges * (sizeof(rdma::Sge) + sizeof(mem::KeyEntry*)) +
                                      caps.max_inline_data);
}

std::uint32_t recv_wqe_bytes(const rdma::QpCaps& caps) {
    const std::uint32_t sges = caps.max_recv_sge > 1 ? caps.max_recv_sge : 0;
    return static_cast<std::uint32_t>(sizeof(RecvWqe) + sges * sizeof(rdma::Sge));
}

std::uint64_t qp_memory_bytes(const SwroceQp& qp) {
    return sizeof(SwroceQp) + std::uint64_t{qp.send_queue.capacity()} * sizeof(SendWqe) +
           std::uint64_t{qp.receive_queue.capacity()} * sizeof(RecvWqe) + qp.wqe_stores.bytes +
           (qp.reorder_room ? ReorderBuffer::selective_repeat_reach * sizeof(ReorderBuffer::Slot)
                            : 0) +
           (qp.response_maps ? response_map_slots * sizeof(ResponseMap) : 0);
}

rdma::QpStatus status_of(const SwroceQp& qp) {
    return {.qpn = qp.qpn,
            .state = qp.state(),
            .queue_group = qp.queue_group,
            .dest_qpn = qp.attr->dest_qpn,
            .send_psn = qp.req.send_psn,
            .acked_psn = qp.req.acked_psn,
            .expected_psn = qp.resp.expected_psn,
            .outstanding = qp.send_queue.size(),
            .retries_left = qp.req.retries_left,
            .rnr_retries_left = qp.req.rnr_retries_left,
            .retransmissions = qp.counters.retransmissions,
            .timeouts = qp.counters.timeouts,
            .memory_bytes = qp_memory_bytes(qp),
            .send_wqe_bytes = send_wqe_bytes(qp.caps),
            .recv_wqe_bytes = recv_wqe_bytes(qp.caps)};
}

} // namespace

// Device totals first, then each queue group ("group1_..."), then each QP ("qp0x11_...").
// Group and QP counters belong to their polling threads; a control-path read is a snapshot.
void stats(Device& device, std::vector<rdma::Counter>& out) {
    SwroceDevice& dev = swroce(device);
    SwroceCounters total = dev.control_counters;
    for (const auto& group : dev.groups) {
        total += group->counters;
    }
    append_counters("", total, out);
    append_link_down_counters(dev, out);
    for (std::size_t g = 0; g < dev.groups.size(); ++g) {
        append_counters("group" + std::to_string(g) + "_", dev.groups[g]->counters, out);
    }
    const std::lock_guard lock(dev.qp_free_mutex); // telemetry reads this from its own thread
    for (const auto& owned : dev.qps) {
        const SwroceQp* qp = owned.get();
        if (qp == nullptr) {
            continue;
        }
        const std::string prefix = strformat("qp0x%x_", qp->qpn);
        const QpCounters& c = qp->counters;
        const std::pair<const char*, std::uint64_t> values[] = {
            {"tx_packets", c.tx_packets},
            {"rx_packets", c.rx_packets},
            {"tx_bytes", c.tx_bytes},
            {"rx_bytes", c.rx_bytes},
            {"retransmissions", c.retransmissions},
            {"timeouts", c.timeouts},
            {"naks_sent", c.naks_sent},
            {"naks_received", c.naks_received},
            {"duplicates", c.duplicates},
        };
        for (const auto& [name, value] : values) {
            out.push_back({prefix + name, value});
        }
    }
}

// Telemetry's view of the QP table (see DeviceOps::qp_telemetry); one QP is one lookup.
void qp_telemetry(Device& device, std::optional<std::uint32_t> only,
                  std::vector<rdma::QpStatus>& out) {
    SwroceDevice& dev = swroce(device);
    const std::lock_guard lock(dev.qp_free_mutex);
    if (only) {
        if (const SwroceQp* qp = dev.qp_by_number(*only); qp != nullptr) {
            out.push_back(status_of(*qp));
        }
        return;
    }
    for (const auto& owned : dev.qps) {
        if (owned != nullptr) {
            out.push_back(status_of(*owned));
        }
    }
}

} // namespace prdma::swroce
