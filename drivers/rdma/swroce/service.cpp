// progress=service: the device's engine as a DPDK service (rte_service), run by an EAL service
// lcore (-s/-S), so a process whose threads never call into prdma still answers its peers' WRITEs,
// READs and atomics, and an application thread only posts and reaps. The trade-off is a core: the
// service lcore polls whether or not there is traffic.
//
// Who drives what: the service holds a group's owner word (GroupHold's) for one progress at a time
// and gives it back between two, so a control thread takes the group in between and acts on it
// directly (it raises holds_wanted, and the service leaves the group alone until it has its turn).
// Application threads touch only their ends of the queues: the producer side of a send or receive
// queue, the consumer side of a CQ (WorkRing), and the group's doorbell ring.
#include <rte_cycles.h>
#include <rte_lcore.h>
#include <rte_ring.h>
#include <rte_service.h>
#include <rte_service_component.h>

#include <prdma/format.hpp>

#include "engine.hpp"
#include "swroce_log.hpp"

namespace prdma::swroce {

namespace {

std::int32_t run_progress(void* arg) {
    SwroceDevice& dev = *static_cast<SwroceDevice*>(arg);
    for (unsigned group = 0; group < dev.groups.size(); ++group) {
        QueueGroupState& state = *dev.groups[group];
        if (state.holds_wanted.load(std::memory_order_relaxed) != 0) {
            continue; // a control thread waits for its turn
        }
        std::uintptr_t idle = 0;
        // seq_cst, as a polling thread's claim: deregistration's GroupHold relies on it.
        if (!state.owner.compare_exchange_strong(idle, dev.service_token(),
                                                 std::memory_order_seq_cst)) {
            continue;
        }
        (void)progress_group(dev, group);
        state.owner.store(0, std::memory_order_release);
    }
    return 0;
}

} // namespace

unsigned take_doorbells(SwroceDevice& dev, unsigned group) noexcept {
    QueueGroupState& state = *dev.groups[group];
    std::array<SwroceQp*, burst_size> rung;
    const unsigned count = rte_ring_sc_dequeue_burst(
        state.doorbell, reinterpret_cast<void**>(rung.data()), burst_size, nullptr);
    for (unsigned i = 0; i < count; ++i) {
        SwroceQp& qp = *rung[i];
        // Cleared before the queues are read: a post after this rings again.
        qp.rung.store(false, std::memory_order_seq_cst);
        if (qp.state() == rdma::QpState::err) {
            flush_queues(qp); // IBTA: WRs posted to a QP in error complete with flush errors
        } else {
            activate(state, qp);
        }
    }
    return count;
}

Status check_service_lcores(const std::string& device_name) {
    if (rte_service_lcore_count() <= 0) {
        return Error(StatusCode::invalid_parameter,
                     device_name + ": progress=service needs an EAL service lcore: pass "
                                   "-s <mask> or -S <lcore list> to EAL (that lcore then polls "
                                   "the device), or leave progress=service out");
    }
    return {};
}

Status start_progress_service(SwroceDevice& dev) {
    std::array<std::uint32_t, RTE_MAX_LCORE> lcores{};
    if (rte_service_lcore_list(lcores.data(), lcores.size()) <= 0) {
        return check_service_lcores(dev.name);
    }
    rte_service_spec spec{};
    const std::string name = "swroce_" + dev.name;
    std::snprintf(spec.name, sizeof(spec.name), "%s", name.c_str());
    spec.callback = run_progress;
    spec.callback_userdata = &dev;
    spec.socket_id = dev.port.socket();
    std::uint32_t id = 0;
    if (const int ret = rte_service_component_register(&spec, &id); ret != 0) {
        return Error(StatusCode::no_resources,
                     strformat("%s: cannot register the progress service: %s", dev.name.c_str(),
                               rte_strerror(-ret)));
    }
    dev.service_id = id;
    // Mapped to the first service lcore; EAL starts its service lcores after probing the --vdev
    // devices, and they already run for a device created later.
    const std::uint32_t lcore = lcores[0];
    if (const int ret = rte_service_map_lcore_set(id, lcore, 1); ret != 0) {
        stop_progress_service(dev);
        return Error(StatusCode::no_resources,
                     strformat("%s: cannot map the progress service to service lcore %u: %s",
                               dev.name.c_str(), lcore, rte_strerror(-ret)));
    }
    (void)rte_service_component_runstate_set(id, 1);
    (void)rte_service_runstate_set(id, 1);
    SWROCE_LOG(INFO, "%s: progress runs as service %u on service lcore %u", dev.name.c_str(), id,
               lcore);
    return {};
}

void stop_progress_service(SwroceDevice& dev) noexcept {
    if (!dev.service_id) {
        return;
    }
    const std::uint32_t id = *dev.service_id;
    (void)rte_service_runstate_set(id, 0);
    (void)rte_service_component_runstate_set(id, 0);
    // The lcore finishes the run it is in; nothing after this touches the device.
    const std::uint64_t deadline = rte_get_tsc_cycles() + rte_get_tsc_hz();
    while (rte_service_may_be_active(id) == 1 && rte_get_tsc_cycles() < deadline) {
        rte_pause();
    }
    (void)rte_service_component_unregister(id);
    dev.service_id.reset();
}

} // namespace prdma::swroce
