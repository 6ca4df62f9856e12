// swroce's device ops: port queries, memory (deregistration waits for the groups' owners), the
// control progress that finishes pending requests and raises events, and the ops table. The
// objects' control paths are cq_control.cpp, qp_control.cpp and owner_mailbox.cpp.
#include "swroce_control.hpp"

#include <algorithm>
#include <cstring>

#include <rte_cycles.h>
#include <rte_ether.h>
#include <rte_mbuf.h>
#include <rte_ring.h>

#include <prdma/format.hpp>
#include <prdma/roce/psn.hpp>

#include "group_hold.hpp"
#include "swroce_log.hpp"

namespace prdma::swroce {

namespace {

Status query_port(Device& device, std::uint8_t port, rdma::driver::PortInfo& out) {
    SwroceDevice& dev = swroce(device);
    if (port != 1) {
        return Error(StatusCode::invalid_parameter, strformat("swroce has one port, not %u", port));
    }
    out.state = dev.port.link_up() ? rdma::PortState::active : rdma::PortState::down;
    out.max_mtu = dev.path_mtu;
    out.active_mtu = dev.path_mtu;
    out.link_speed_mbps = dev.port.link_speed_mbps();
    std::copy(dev.port.mac().begin(), dev.port.mac().end(), out.mac);
    out.gids = {dev.gid};
    out.max_msg_size = 1ULL << 31;
    return {};
}

// Port events (ibv_async_event PORT_ACTIVE / PORT_ERR) when the link changes.
void watch_link(Device& device) {
    SwroceDevice& dev = swroce(device);
    const bool up = dev.port.link_up();
    if (up != dev.link_was_up) {
        dev.link_was_up = up;
        rdma::driver::raise_event(
            device, up ? rdma::EventType::port_active : rdma::EventType::port_error, 1);
    }
}

// QP events the data paths recorded, raised on the control path (raise_event locks).
void raise_recorded_events(Device& device) {
    SwroceDevice& dev = swroce(device);
    std::array<void*, 32> events{};
    for (const auto& group : dev.groups) {
        unsigned n = 0;
        while ((n = rte_ring_dequeue_burst(group->events, events.data(), events.size(), nullptr)) >
               0) {
            for (unsigned i = 0; i < n; ++i) {
                const auto word = reinterpret_cast<std::uintptr_t>(events[i]);
                const auto type = static_cast<rdma::EventType>(word >> 24);
                const auto number = static_cast<std::uint32_t>(word & 0xffffff);
                const bool srq = type == rdma::EventType::srq_limit_reached;
                rdma::driver::raise_event(device, type, 0, srq ? 0 : number, srq ? number : 0);
            }
        }
    }
}

void control_progress(Device& device) {
    SwroceDevice& dev = swroce(device);
    watch_link(device);
    // Groups no thread has claimed (or that this thread polls) are driven from here: ARP replies,
    // ACKs and READ responses go on before the application's first poll. A progress service
    // drives them all itself (service.cpp).
    for (unsigned group = 0; group < dev.port.queue_groups() && !dev.service_id; ++group) {
        if (const GroupHold hold(dev, group); hold) {
            (void)progress_group(dev, group);
        }
    }
    finish_neighbour_outcomes(dev);
    // Destroys wait until their queued work is flushed to the CQs; the flush happens here, on the
    // caller's poll, so the completions are visible before the destroy completes. A group claimed
    // by a thread since the destroy began gets it done by its owner instead.
    std::vector<PendingDestroy> destroys;
    destroys.swap(dev.pending_destroy);
    for (PendingDestroy& pending : destroys) {
        const GroupHold hold(dev, pending.qp->queue_group);
        if (!hold) {
            auto request =
                make_request(GroupWork::destroy_qp, pending.qp->queue_group, pending.token);
            request->qp = pending.qp;
            send_destroy_to_owner(dev, std::move(request));
            continue;
        }
        flush_queues(*pending.qp);
        free_qp(dev, pending.qp);
        rdma::driver::complete_control(device, pending.token, StatusCode::ok);
    }
    collect_group_requests(device);
    raise_recorded_events(device);
}

void close_device(Device& device) {
    SwroceDevice* dev = &swroce(device);
    stop_progress_service(*dev);
    SWROCE_LOG(INFO, "%s: closing (port %s)", dev->name.c_str(), dev->port.name().c_str());
    std::unique_ptr<SwroceDevice> owned(dev);
    device.config.driver_private = nullptr;
}

} // namespace

// The class's MemoryRegistry (keys and translation tables) is device-wide, not per group: every
// group's data path checks keys in it, so no single owner can take a registration over for the
// others. Registration: swroce has no copy of its own to load (register_mr is null) and the class
// publishes the new key from the control thread at once. That is safe for every correct user (no
// one can name the new key before the call returns it); a stale or forged key probing the index
// meanwhile meets an entry whose fields were written before its state turned valid. That ordering
// is program order only (the KeyTable uses no atomics): x86-TSO keeps it; a weakly ordered CPU
// would need a release store / acquire load on the entry's state (a lib/mem follow-up).
//
// Deregistration is where the device must really wait: a polling thread may be in the middle of a
// burst that already checked the key and is about to translate through the region's table. The
// class retires the region (the key is dead at once) and swroce asks every group another thread
// owns for a quiescent point — a `quiesce` request that comes back only after that owner has
// finished the burst it was in. When all are back, the table is freed. (A key a QP cached across
// bursts, in a queued WQE or a READ being answered, is not covered: deregistering a region with
// work in flight on it is the application's error, as with any verbs device.)
void ask_for_quiescence(SwroceDevice& dev, QuiesceWait& wait) {
    std::vector<unsigned> unsent;
    for (unsigned group : wait.unsent) {
        auto request = make_request(GroupWork::quiesce, group, wait.token);
        request->wait = &wait;
        if (send_to_owner(dev, std::move(request)).ok()) {
            ++wait.outstanding;
        } else {
            unsent.push_back(group); // asked again on the next control progress
        }
    }
    wait.unsent.swap(unsent);
}

Status deregister_mr(Device& device, const mem::MemoryRegion&, const ControlToken& token) {
    SwroceDevice& dev = swroce(device);
    auto wait = std::make_unique<QuiesceWait>();
    wait->token = token;
    for (unsigned group = 0; group < dev.groups.size(); ++group) {
        // Not a plain look at the owner word: the key was retired by a plain store, and a thread
        // claiming the group right now could read the key before that store is visible while
        // this thread reads no owner (store-load reordering, even on x86). The hold's
        // compare-and-swap is a full barrier on this side, as the claim's is on the other: either
        // the claim came first and the group is asked, or the claimer meets the dead key. (That
        // the key table itself uses plain stores is the lib/mem follow-up ENGINE.md names.)
        if (const GroupHold hold(dev, group); !hold) {
            wait->unsent.push_back(group);
        }
    }
    if (wait->unsent.empty()) {
        return {}; // every data path of the device runs on this thread, between bursts now
    }
    ask_for_quiescence(dev, *wait);
    dev.quiesces.push_back(std::move(wait));
    return Error(StatusCode::pending,
                 "other threads poll this device: the region's table is freed once each has "
                 "finished the burst it was in");
}

// Designated, so a reader sees which function is which op.
const rdma::driver::DeviceOps swroce_ops = {
    .query_port = query_port,
    .create_cq = create_cq,
    .destroy_cq = destroy_cq,
    .create_qp = create_qp,
    .modify_qp = modify_qp,
    .destroy_qp = destroy_qp,
    .register_mr = nullptr, // the engine reads the class's registry itself: see "memory" above
    .deregister_mr = deregister_mr,
    .control_progress = control_progress,
    .qp_send_psn = qp_send_psn,
    .qp_connection = qp_connection,
    .qp_state = qp_state,
    .close = close_device,
    .stats = stats,
    .qp_telemetry = qp_telemetry,
    .attach_poller = attach_poller,
    .detach_poller = detach_poller,
    .create_srq = create_srq,
    .destroy_srq = destroy_srq,
    .arm_srq_limit = arm_srq_limit,
    .resize_srq = resize_srq,
    .query_srq = query_srq,
    .create_ah = create_ah,
    .destroy_ah = destroy_ah,
};

} // namespace prdma::swroce
