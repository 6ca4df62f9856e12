// The rdma devices in DPDK's telemetry, as ethdev has /ethdev/*: /rdmadev/list, info, stats,
// qp_list and qp_info, read with dpdk-telemetry.py from a running application.
//
// The callbacks run on the telemetry thread. They reach a device under the class's lock (it
// cannot be removed meanwhile) and read what the data path counts as a snapshot, as ethdev's
// stats are read while the port runs.
#include <cerrno>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include <rte_common.h>
#include <rte_telemetry.h>

#include <prdma/format.hpp>
#include <prdma/rdmadev/driver.hpp>
#include <prdma/rdmadev/rdmadev.hpp>

#include "objects.hpp"

namespace prdma::rdma {
namespace {

// "12" or "12,17": the numbers of a command's parameters, or nothing when they are malformed.
std::optional<std::vector<std::uint32_t>> parse_params(const char* params, std::size_t count) {
    std::vector<std::uint32_t> values;
    const char* at = params;
    while (at != nullptr && *at != '\0' && values.size() < count) {
        char* end = nullptr;
        errno = 0;
        const unsigned long value = std::strtoul(at, &end, 0);
        if (end == at || errno != 0 || value > UINT32_MAX || (*end != ',' && *end != '\0')) {
            return std::nullopt;
        }
        values.push_back(static_cast<std::uint32_t>(value));
        at = *end == ',' ? end + 1 : end;
    }
    if (values.size() != count || (at != nullptr && *at != '\0')) {
        return std::nullopt;
    }
    return values;
}

int handle_list(const char* /*cmd*/, const char* /*params*/, rte_tel_data* d) {
    rte_tel_data_start_array(d, RTE_TEL_INT_VAL);
    for (DeviceId id : device_list()) {
        rte_tel_data_add_array_int(d, static_cast<int>(id));
    }
    return 0;
}

int handle_info(const char* /*cmd*/, const char* params, rte_tel_data* d) {
    const auto ids = parse_params(params, 1);
    if (!ids) {
        return -EINVAL;
    }
    const bool found = detail::with_live_device((*ids)[0], [&](driver::Device& dev) {
        const DeviceAttr a = detail::device_attr(dev);
        rte_tel_data_start_dict(d);
        rte_tel_data_add_dict_string(d, "name", dev.config.name.c_str());
        rte_tel_data_add_dict_string(d, "devargs", detail::device_args_of(dev).c_str());
        rte_tel_data_add_dict_string(d, "node_guid", guid_string(a.node_guid).c_str());
        rte_tel_data_add_dict_u64(d, "vendor_id", a.vendor_id);
        rte_tel_data_add_dict_u64(d, "max_qp", a.max_qp);
        rte_tel_data_add_dict_u64(d, "max_qp_wr", a.max_qp_wr);
        rte_tel_data_add_dict_u64(d, "max_sge", a.max_sge);
        rte_tel_data_add_dict_u64(d, "max_cqe", a.max_cqe);
        rte_tel_data_add_dict_u64(d, "max_mr", a.max_mr);
        rte_tel_data_add_dict_u64(d, "max_mr_size", a.max_mr_size);
        rte_tel_data_add_dict_u64(d, "max_queue_groups", a.max_queue_groups);
        rte_tel_data_add_dict_u64(d, "max_srq", a.max_srq);
        rte_tel_data_add_dict_u64(d, "max_ah", a.max_ah);
        rte_tel_data_add_dict_u64(d, "port_count", dev.config.port_count);
        driver::PortInfo port;
        if (dev.config.ops->query_port(dev, 1, port).ok()) {
            rte_tel_data_add_dict_string(
                d, "port1_state", port.state == PortState::active ? "PORT_ACTIVE" : "PORT_DOWN");
            rte_tel_data_add_dict_u64(d, "port1_active_mtu", mtu_bytes(port.active_mtu));
            rte_tel_data_add_dict_u64(d, "port1_max_mtu", mtu_bytes(port.max_mtu));
        }
    });
    return found ? 0 : -EINVAL;
}

int handle_stats(const char* /*cmd*/, const char* params, rte_tel_data* d) {
    const auto ids = parse_params(params, 1);
    if (!ids) {
        return -EINVAL;
    }
    std::vector<Counter> counters;
    const bool found = detail::with_live_device(
        (*ids)[0], [&](driver::Device& dev) { dev.config.ops->stats(dev, counters); });
    if (!found) {
        return -EINVAL;
    }
    rte_tel_data_start_dict(d);
    for (const Counter& c : counters) {
        // A dictionary holds RTE_TEL_MAX_DICT_ENTRIES: the device's totals come first.
        if (rte_tel_data_add_dict_u64(d, c.name.c_str(), c.value) != 0) {
            break;
        }
    }
    return 0;
}

// The device's QPs (or the one numbered `only`), or nothing when there is no such device or its
// driver does not say.
std::optional<std::vector<QpStatus>> qps_of(DeviceId id,
                                            std::optional<std::uint32_t> only = std::nullopt) {
    std::vector<QpStatus> qps;
    bool supported = false;
    const bool found = detail::with_live_device(id, [&](driver::Device& dev) {
        if (dev.config.ops->qp_telemetry != nullptr) {
            supported = true;
            dev.config.ops->qp_telemetry(dev, only, qps);
        }
    });
    if (!found || !supported) {
        return std::nullopt;
    }
    return qps;
}

int handle_qp_list(const char* /*cmd*/, const char* params, rte_tel_data* d) {
    const auto ids = parse_params(params, 1);
    const auto qps = ids ? qps_of((*ids)[0]) : std::nullopt;
    if (!qps) {
        return -EINVAL;
    }
    rte_tel_data_start_array(d, RTE_TEL_INT_VAL);
    for (const QpStatus& qp : *qps) {
        rte_tel_data_add_array_int(d, static_cast<int>(qp.qpn));
    }
    return 0;
}

int handle_qp_info(const char* /*cmd*/, const char* params, rte_tel_data* d) {
    const auto ids = parse_params(params, 2);
    const auto qps = ids ? qps_of((*ids)[0], (*ids)[1]) : std::nullopt;
    if (!qps || qps->empty()) {
        return -EINVAL;
    }
    const QpStatus& qp = qps->front();
    rte_tel_data_start_dict(d);
    rte_tel_data_add_dict_u64(d, "qpn", qp.qpn);
    rte_tel_data_add_dict_string(d, "state", std::string(qp_state_name(qp.state)).c_str());
    rte_tel_data_add_dict_u64(d, "queue_group", qp.queue_group);
    rte_tel_data_add_dict_u64(d, "dest_qpn", qp.dest_qpn);
    rte_tel_data_add_dict_u64(d, "send_psn", qp.send_psn);
    rte_tel_data_add_dict_u64(d, "acked_psn", qp.acked_psn);
    rte_tel_data_add_dict_u64(d, "expected_psn", qp.expected_psn);
    rte_tel_data_add_dict_u64(d, "outstanding", qp.outstanding);
    rte_tel_data_add_dict_int(d, "retries_left", qp.retries_left);
    rte_tel_data_add_dict_int(d, "rnr_retries_left", qp.rnr_retries_left);
    rte_tel_data_add_dict_u64(d, "retransmissions", qp.retransmissions);
    rte_tel_data_add_dict_u64(d, "timeouts", qp.timeouts);
    rte_tel_data_add_dict_u64(d, "memory_bytes", qp.memory_bytes);
    rte_tel_data_add_dict_u64(d, "send_wqe_bytes", qp.send_wqe_bytes);
    rte_tel_data_add_dict_u64(d, "recv_wqe_bytes", qp.recv_wqe_bytes);
    return 0;
}

} // namespace
} // namespace prdma::rdma

// Registered at load, before rte_eal_init starts the telemetry thread (as ethdev's commands are).
RTE_INIT(prdma_rdmadev_telemetry) {
    using namespace prdma::rdma;
    rte_telemetry_register_cmd("/rdmadev/list", handle_list, "Returns the rdma device ids.");
    rte_telemetry_register_cmd("/rdmadev/info", handle_info,
                               "Returns a device's attributes. Parameters: int device_id");
    rte_telemetry_register_cmd("/rdmadev/stats", handle_stats,
                               "Returns a device's counters. Parameters: int device_id");
    rte_telemetry_register_cmd("/rdmadev/qp_list", handle_qp_list,
                               "Returns a device's QP numbers. Parameters: int device_id");
    rte_telemetry_register_cmd("/rdmadev/qp_info", handle_qp_info,
                               "Returns a QP's state, PSNs, outstanding WRs and retries. "
                               "Parameters: int device_id,int qpn");
}
