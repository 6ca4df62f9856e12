// swroce's control path: queues, QP state changes (with ARP resolution of the peer's MAC, which
// makes INIT->RTR pending), destroy with flush (pending while work is in flight), port queries,
// and the control requests a queue group's owner runs for it (ENGINE.md "Ownership"): once another
// thread polls a group, creating, changing and destroying that group's CQs and QPs is pending
// until the owner has done it between two bursts.
#include <algorithm>
#include <cstring>

#include <rte_cycles.h>
#include <rte_ether.h>
#include <rte_mbuf.h>
#include <rte_ring.h>

#include <prdma/format.hpp>
#include <prdma/roce/psn.hpp>

#include "engine.hpp"
#include "group_hold.hpp"
#include "swroce_log.hpp"

namespace prdma::swroce {

using rdma::driver::ControlToken;
using rdma::driver::Device;

namespace {

SwroceDevice& swroce(Device& device) {
    return *static_cast<SwroceDevice*>(device.driver_private());
}

void send_control_frame(SwroceDevice& dev, std::span<const std::uint8_t> frame,
                        SwroceCounters& counters) {
    rte_mbuf* mbuf = dev.port.copy_to_mbuf(0, frame);
    if (mbuf == nullptr) {
        ++counters.tx_no_mbuf;
        return;
    }
    // A port busy with RDMA traffic refuses it now and takes it on the next progress.
    send_frame(dev, 0, mbuf, counters);
}

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

// ---- requests for a queue group's owner -------------------------------------------------------

// What a call that may not pend says when the group belongs to another thread.
Error owned_elsewhere(unsigned group, const char* what) {
    return {StatusCode::busy,
            strformat("queue group %u is polled by another thread, which must %s itself: use the "
                      "form with a request_id (it completes through poll_control)",
                      group, what)};
}

Error pending_on_owner(unsigned group) {
    return {StatusCode::pending,
            strformat("queue group %u is polled by another thread; it finishes the request between "
                      "two bursts",
                      group)};
}

// Hands `request` to its group's owner; busy (nothing sent, the request freed) when too many are
// out already.
Status send_to_owner(SwroceDevice& dev, std::unique_ptr<GroupRequest> request) {
    const unsigned group = request->group;
    if (dev.control_in_flight >= rte_ring_get_capacity(dev.control_done) ||
        rte_ring_mp_enqueue(dev.groups[group]->control, request.get()) != 0) {
        return Error(StatusCode::busy,
                     strformat("%u control requests are waiting for their queue groups' owners "
                               "(group %u's ring holds %u); poll_control and try again",
                               dev.control_in_flight, group, control_ring_size));
    }
    (void)request.release(); // back through control_done
    ++dev.control_in_flight;
    return {};
}

std::unique_ptr<GroupRequest> make_request(GroupWork work, unsigned group,
                                           const ControlToken& token) {
    auto request = std::make_unique<GroupRequest>();
    request->work = work;
    request->group = group;
    request->token = token;
    return request;
}

// ---- CQs
// ------------------------------------------------------------------------------------------

Status create_cq(Device& device, const rdma::driver::CqInit& init, const ControlToken& token,
                 void** out) {
    SwroceDevice& dev = swroce(device);
    auto cq = std::make_unique<SwroceCq>();
    cq->device = &dev;
    cq->queue_group = init.queue_group;
    cq->ring = WorkRing<rdma::WorkCompletion>(init.cqe);
    const GroupHold hold(dev, init.queue_group);
    if (!hold) {
        // The CQ is written and polled by the group's owner only. Nothing of the group points at
        // it yet, so this hop publishes nothing: it is the rule (no control thread creates or
        // frees an object of a group another thread polls) kept without exceptions, so the
        // owner has seen the request before the application can name the CQ in a create_qp.
        if (!token.may_pend) {
            return owned_elsewhere(init.queue_group, "create the CQ");
        }
        auto request = make_request(GroupWork::create_cq, init.queue_group, token);
        request->cq = cq.get();
        if (Status sent = send_to_owner(dev, std::move(request)); !sent.ok()) {
            return sent;
        }
        *out = cq.get();
        dev.cqs.push_back(std::move(cq));
        return pending_on_owner(init.queue_group);
    }
    *out = cq.get();
    dev.cqs.push_back(std::move(cq));
    return {};
}

void erase_cq(SwroceDevice& dev, const SwroceCq* cq) {
    std::erase_if(dev.cqs, [cq](const auto& owned) { return owned.get() == cq; });
}

Status destroy_cq(Device& device, void* queue, const ControlToken& token) {
    SwroceDevice& dev = swroce(device);
    auto* cq = static_cast<SwroceCq*>(queue);
    if (std::none_of(dev.cqs.begin(), dev.cqs.end(),
                     [cq](const auto& owned) { return owned.get() == cq; })) {
        return Error(StatusCode::invalid_parameter, "not a CQ of this device");
    }
    const GroupHold hold(dev, cq->queue_group);
    if (!hold) {
        // No QP uses it (the class checked), but the owner may have pushed to it last (a QP
        // destroyed on the owner flushes into it): it is freed only after coming back.
        if (!token.may_pend) {
            return owned_elsewhere(cq->queue_group, "let go of the CQ");
        }
        auto request = make_request(GroupWork::destroy_cq, cq->queue_group, token);
        request->cq = cq;
        if (Status sent = send_to_owner(dev, std::move(request)); !sent.ok()) {
            return sent;
        }
        return pending_on_owner(cq->queue_group);
    }
    erase_cq(dev, cq);
    return {};
}

// ---- QPs
// ------------------------------------------------------------------------------------------

// Publishes a QP in its group's slot; run by whoever drives the group.
void publish_qp(SwroceDevice& dev, std::unique_ptr<SwroceQp>& qp) noexcept {
    const std::uint32_t slot = qp->qpn - first_qpn;
    QueueGroupState& group = *dev.groups[qp->queue_group];
    group.qp_slot_end = std::max(group.qp_slot_end, slot + 1);
    dev.qps[slot] = std::move(qp);
}

// The QP's queues, each slot pointing at its room in the stores; nothing is kept for SGEs, keys or
// inline bytes the caps do not allow.
void make_queues(SwroceQp& qp, const rdma::QpCaps& caps) {
    qp.receive_queue = WorkRing<RecvWqe>(caps.max_recv_wr);
    qp.send_queue = WorkRing<SendWqe>(caps.max_send_wr);
    const std::uint32_t sends = qp.send_queue.capacity();
    const std::uint32_t recvs = qp.receive_queue.capacity();
    const std::uint32_t send_sges = caps.max_send_sge > 1 ? caps.max_send_sge : 0;
    const std::uint32_t recv_sges = caps.max_recv_sge > 1 ? caps.max_recv_sge : 0;
    const std::uint32_t inline_room = caps.max_inline_data;
    WqeStores& stores = qp.wqe_stores;
    if (send_sges != 0) {
        stores.send_sges = std::make_unique<rdma::Sge[]>(std::size_t{sends} * send_sges);
        stores.send_entries =
            std::make_unique<const mem::KeyEntry*[]>(std::size_t{sends} * send_sges);
    }
    if (inline_room != 0) {
        stores.inline_bytes = std::make_unique<std::uint8_t[]>(std::size_t{sends} * inline_room);
    }
    if (recv_sges != 0) {
        stores.recv_sges = std::make_unique<rdma::Sge[]>(std::size_t{recvs} * recv_sges);
    }
    for (std::uint32_t i = 0; i < sends; ++i) {
        SendWqe& wqe = qp.send_queue.slot(i);
        if (send_sges != 0) {
            wqe.sge_store = &stores.send_sges[std::size_t{i} * send_sges];
            wqe.entry_store = &stores.send_entries[std::size_t{i} * send_sges];
        }
        if (inline_room != 0) {
            wqe.inline_store = &stores.inline_bytes[std::size_t{i} * inline_room];
        }
    }
    for (std::uint32_t i = 0; recv_sges != 0 && i < recvs; ++i) {
        qp.receive_queue.slot(i).sge_store = &stores.recv_sges[std::size_t{i} * recv_sges];
    }
    stores.bytes = std::size_t{sends} *
                       (send_sges * (sizeof(rdma::Sge) + sizeof(mem::KeyEntry*)) + inline_room) +
                   std::size_t{recvs} * recv_sges * sizeof(rdma::Sge);
}

Status create_qp(Device& device, const rdma::driver::QpInit& init, const ControlToken& token,
                 rdma::driver::QpCreated& out) {
    SwroceDevice& dev = swroce(device);
    const unsigned group = init.queue_group;
    const auto first = dev.qp_slot_taken.begin() + dev.first_slot(group);
    const auto slot = std::find(first, first + dev.qps_per_group, false);
    if (slot == first + dev.qps_per_group) {
        return Error(StatusCode::no_resources,
                     strformat("all %u QPs of queue group %u of %s are in use", dev.qps_per_group,
                               group, dev.name.c_str()));
    }
    const GroupHold hold(dev, group); // kept until the QP is in its slot
    const bool owned_by_other = !hold;
    if (owned_by_other && !token.may_pend) {
        return owned_elsewhere(group, "add the QP to its table");
    }
    auto qp = std::make_unique<SwroceQp>();
    qp->device = &dev;
    qp->qpn = first_qpn + static_cast<std::uint32_t>(slot - dev.qp_slot_taken.begin());
    qp->pd = init.pd;
    qp->send_cq = static_cast<SwroceCq*>(init.send_cq);
    qp->recv_cq = static_cast<SwroceCq*>(init.recv_cq);
    qp->queue_group = init.queue_group;
    qp->caps = init.caps;
    qp->signal_all = init.signal_all;
    make_queues(*qp, init.caps);
    const rdma::driver::QpCreated created{qp.get(), qp->qpn};
    if (owned_by_other) {
        // The group's progress scans its slots and its rx path looks QPs up there: only the owner
        // may write a slot while it polls.
        auto request = make_request(GroupWork::create_qp, group, token);
        request->token.qpn = qp->qpn;
        request->qp = qp.get();
        request->qp_storage = std::move(qp);
        if (Status sent = send_to_owner(dev, std::move(request)); !sent.ok()) {
            return sent;
        }
        *slot = true;
        out = created;
        return pending_on_owner(group);
    }
    *slot = true;
    publish_qp(dev, qp);
    out = created;
    return {};
}

void free_qp(SwroceDevice& dev, SwroceQp* qp) {
    const std::uint32_t slot = qp->qpn - first_qpn;
    // A post just before the destroy may have rung: taken now, so no ring names a freed QP.
    while (take_doorbells(dev, qp->queue_group) != 0) {
    }
    deactivate(*dev.groups[qp->queue_group], *qp);
    {
        const std::lock_guard lock(dev.qp_free_mutex);
        dev.qps[slot].reset();
    }
    dev.qp_slot_taken[slot] = false;
}

// Applies a checked modify (the class verified the transition and the mask); run by whoever
// drives the QP's group. No allocation: an owner runs it between bursts.
void apply_modify(SwroceQp& qp, const rdma::QpAttr& attr, rdma::QpAttrMask mask) noexcept {
    // A modify that names the peer without its MAC keeps the one ARP or an earlier modify found.
    const std::optional<std::array<std::uint8_t, 6>> known_mac = qp.attr.dest_mac;
    const rdma::QpState was = qp.state();
    rdma::driver::merge_qp_attr(qp.attr, attr, mask);
    qp.set_state(qp.attr.state);
    if (was == rdma::QpState::init && qp.state() == rdma::QpState::rtr) {
        qp.connection = qp.device->last_connection.fetch_add(1, std::memory_order_relaxed) + 1;
    }
    if (!qp.attr.dest_mac) {
        qp.attr.dest_mac = known_mac;
    }
    refresh_tx_headers(qp);
    if (mask.has(rdma::qp_attr_sq_psn)) {
        qp.req.send_psn = attr.sq_psn & roce::psn_mask;
        qp.req.acked_psn = roce::psn_sub(qp.req.send_psn, 1); // nothing sent, nothing missing
        qp.req.sent_psn = qp.req.acked_psn;
    }
    if (mask.has(rdma::qp_attr_rq_psn)) {
        qp.resp.expected_psn = attr.rq_psn;
    }
    if (mask.has(rdma::qp_attr_retry_cnt)) {
        qp.req.retries_left = attr.retry_cnt;
    }
    if (mask.has(rdma::qp_attr_rnr_retry)) {
        qp.req.rnr_retries_left = attr.rnr_retry;
    }
    if (!mask.has(rdma::qp_attr_state)) {
        return;
    }
    if (attr.state == rdma::QpState::err) {
        flush_queues(qp);
        report_error_state(qp, false); // the application's own ERR: last WQE, not fatal
    } else if (attr.state == rdma::QpState::reset) {
        // RESET forgets queued work without completing it (IBTA 10.3.1).
        qp.receive_queue.clear();
        qp.send_queue.clear();
        qp.attr.dest_mac.reset();
        // Nothing of the old connection survives: no restart point, no responder resource a
        // duplicate of an old request could be answered from.
        qp.req = RequesterState{};
        qp.resp = ResponderState{};
        qp.error_reported = false;
    }
}

// Applies a modify now when this thread may drive the QP's group (ok), or sends it to the owner
// (pending; the owner's completion carries `token`).
Status apply_or_send_modify(SwroceDevice& dev, SwroceQp& qp, const rdma::QpAttr& attr,
                            rdma::QpAttrMask mask, const ControlToken& token) {
    if (const GroupHold hold(dev, qp.queue_group); hold) {
        apply_modify(qp, attr, mask);
        return {};
    }
    auto request = make_request(GroupWork::modify_qp, qp.queue_group, token);
    request->qp = &qp;
    request->attr = attr;
    request->mask = mask;
    if (Status sent = send_to_owner(dev, std::move(request)); !sent.ok()) {
        return sent;
    }
    return pending_on_owner(qp.queue_group);
}

Status modify_qp(Device& device, void* queue, const rdma::QpAttr& attr, rdma::QpAttrMask mask,
                 const ControlToken& token) {
    SwroceDevice& dev = swroce(device);
    auto& qp = *static_cast<SwroceQp*>(queue);
    const bool to_rtr = mask.has(rdma::qp_attr_state) && attr.state == rdma::QpState::rtr;
    if (to_rtr && !attr.dest_mac) {
        const GroupHold arp_group(dev, 0); // the resolver and its frames are group 0's
        if (!arp_group) {
            // ARP belongs to queue group 0, which another thread polls now.
            return Error(StatusCode::not_supported,
                         "queue group 0 is polled by another thread: give dest_mac at RTR");
        }
        if (!attr.dest_gid.is_ipv4_mapped() || !dev.arp) {
            return Error(StatusCode::not_supported,
                         "swroce resolves IPv4 peers with ARP; give dest_mac for an IPv6 peer");
        }
        const std::uint32_t ip = attr.dest_gid.ipv4_host_order();
        const std::uint64_t now = rte_get_tsc_cycles();
        if (auto mac = dev.arp->lookup(ip, now)) {
            rdma::QpAttr resolved = attr;
            resolved.dest_mac = *mac;
            return apply_or_send_modify(dev, qp, resolved, mask, token);
        }
        ArpFrame frame;
        switch (dev.arp->request(ip, now, frame)) {
        case ArpRequestResult::send:
            send_control_frame(dev, frame.view(), dev.control_counters);
            ++dev.control_counters.arp_requests_sent;
            break;
        case ArpRequestResult::pending:
        case ArpRequestResult::already_known:
            break;
        case ArpRequestResult::no_resources:
            return Error(StatusCode::no_resources, "too many ARP resolutions in flight");
        case ArpRequestResult::invalid_target:
            return Error(StatusCode::invalid_parameter,
                         "the destination GID is not a unicast IPv4 peer address");
        }
        dev.pending_rtr.push_back(PendingRtr{&qp, token, ip, attr, mask});
        return Error(StatusCode::pending, "resolving the peer's MAC address with ARP");
    }
    return apply_or_send_modify(dev, qp, attr, mask, token);
}

Status destroy_qp(Device& device, void* queue, const ControlToken& token) {
    SwroceDevice& dev = swroce(device);
    auto* qp = static_cast<SwroceQp*>(queue);
    // A pending RTR of this QP will never finish now: it ends here, before the destroy.
    std::vector<PendingRtr> cancelled;
    std::erase_if(dev.pending_rtr, [&](const PendingRtr& p) {
        if (p.qp != qp) {
            return false;
        }
        cancelled.push_back(p);
        return true;
    });
    for (const PendingRtr& rtr : cancelled) {
        rdma::driver::complete_control(device, rtr.token, StatusCode::not_connected,
                                       "the QP was destroyed before its peer's MAC was resolved");
    }
    const GroupHold hold(dev, qp->queue_group);
    if (!hold) {
        // Its owner flushes it and takes it out of the table; it is freed when it comes back.
        auto request = make_request(GroupWork::destroy_qp, qp->queue_group, token);
        request->qp = qp;
        if (Status sent = send_to_owner(dev, std::move(request)); !sent.ok()) {
            return sent;
        }
        return pending_on_owner(qp->queue_group);
    }
    if (qp->receive_queue.empty() && qp->send_queue.empty()) {
        free_qp(dev, qp);
        return {};
    }
    // Work in flight: the QP goes to error and its WRs are flushed to the CQs before it is gone.
    qp->set_state(rdma::QpState::err);
    qp->destroying = true;
    dev.pending_destroy.push_back(PendingDestroy{qp, token});
    return Error(StatusCode::pending, "flushing the work still queued on the QP");
}

void finish_rtr(SwroceDevice& dev, std::uint32_t ip, std::optional<MacAddress> mac) {
    Device& device = *rdma::driver::device(dev.id);
    std::vector<PendingRtr> done;
    std::erase_if(dev.pending_rtr, [&](const PendingRtr& p) {
        if (p.ip != ip) {
            return false;
        }
        done.push_back(p);
        return true;
    });
    for (PendingRtr& pending : done) {
        if (mac) {
            pending.attr.dest_mac = *mac;
            // The QP's group may have been claimed by a thread since the request started.
            Status applied =
                apply_or_send_modify(dev, *pending.qp, pending.attr, pending.mask, pending.token);
            if (applied.code() != StatusCode::pending) {
                rdma::driver::complete_control(device, pending.token, applied.code(),
                                               applied.ok() ? std::string()
                                                            : applied.error().message());
            }
        } else {
            char text[16] = {};
            std::snprintf(text, sizeof(text), "%u.%u.%u.%u", ip >> 24, (ip >> 16) & 0xff,
                          (ip >> 8) & 0xff, ip & 0xff);
            rdma::driver::complete_control(
                device, pending.token, StatusCode::not_connected,
                strformat("no ARP reply from %s after %u requests: is the peer up on this link?",
                          text, dev.arp->config().max_tries));
        }
    }
}

} // namespace

void poll_arp(SwroceDevice& dev, std::uint64_t now) {
    std::array<ArpFrame, 8> retries;
    std::array<std::uint32_t, 8> failed{};
    const ArpPollResult polled = dev.arp->poll(now, retries, failed);
    for (std::size_t i = 0; i < polled.frames; ++i) {
        send_control_frame(dev, retries[i].view(), dev.control_counters);
        ++dev.control_counters.arp_requests_sent;
    }
    for (std::size_t i = 0; i < polled.failed; ++i) {
        ++dev.control_counters.arp_failed;
        finish_rtr(dev, failed[i], std::nullopt);
    }
}

namespace {

// ---- memory -------------------------------------------------------------------------------------
//
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

// ---- control progress ---------------------------------------------------------------------------

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

// Requests the owners have run: free what they handed back and complete them.
void collect_group_requests(Device& device) {
    SwroceDevice& dev = swroce(device);
    std::array<void*, 32> done{};
    unsigned n = 0;
    while ((n = rte_ring_dequeue_burst(dev.control_done, done.data(), done.size(), nullptr)) > 0) {
        for (unsigned i = 0; i < n; ++i) {
            std::unique_ptr<GroupRequest> request(static_cast<GroupRequest*>(done[i]));
            --dev.control_in_flight;
            switch (request->work) {
            case GroupWork::destroy_cq:
                erase_cq(dev, request->cq);
                break;
            case GroupWork::destroy_qp:
                dev.qp_slot_taken[request->qp->qpn - first_qpn] = false;
                {
                    const std::lock_guard lock(dev.qp_free_mutex);
                    request->qp_storage.reset(); // the owner took it out of the table
                }
                break;
            case GroupWork::quiesce: {
                QuiesceWait* wait = request->wait;
                if (--wait->outstanding == 0 && wait->unsent.empty()) {
                    const ControlToken token = wait->token;
                    std::erase_if(dev.quiesces, [wait](const auto& w) { return w.get() == wait; });
                    rdma::driver::complete_control(device, token, StatusCode::ok);
                }
                continue;
            }
            case GroupWork::create_cq:
            case GroupWork::create_qp:
            case GroupWork::modify_qp:
                break;
            }
            rdma::driver::complete_control(device, request->token, StatusCode::ok);
        }
    }
    // Quiescence requests a full ring turned away, asked again.
    for (const auto& wait : dev.quiesces) {
        if (!wait->unsent.empty()) {
            ask_for_quiescence(dev, *wait);
        }
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
                rdma::driver::raise_event(device, static_cast<rdma::EventType>(word >> 24), 0,
                                          static_cast<std::uint32_t>(word & 0xffffff));
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
    if (!dev.service_id) {
        if (const GroupHold arp_group(dev, 0); dev.arp && arp_group) {
            poll_arp(dev, rte_get_tsc_cycles());
        }
    }
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
            if (!send_to_owner(dev, std::move(request)).ok()) {
                dev.pending_destroy.push_back(pending); // the ring is full: next time
            }
            continue;
        }
        flush_queues(*pending.qp);
        free_qp(dev, pending.qp);
        rdma::driver::complete_control(device, pending.token, StatusCode::ok);
    }
    collect_group_requests(device);
    raise_recorded_events(device);
}

std::uint32_t qp_send_psn(Device&, void* queue) {
    return static_cast<SwroceQp*>(queue)->req.send_psn;
}

mem::ConnectionId qp_connection(Device&, void* queue) {
    return static_cast<SwroceQp*>(queue)->connection;
}

void query_qp(Device&, void* queue, rdma::QpAttr& attr) {
    const auto& qp = *static_cast<const SwroceQp*>(queue);
    // The engine moves a QP to ERR on its own (an error NAK, retries exhausted, a bad WR).
    attr.state = qp.state();
    attr.cur_state = qp.state();
    attr.dest_mac = qp.attr.dest_mac;
    attr.sq_psn = qp.req.send_psn;
}

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
           std::uint64_t{qp.receive_queue.capacity()} * sizeof(RecvWqe) + qp.wqe_stores.bytes;
}

rdma::QpStatus status_of(const SwroceQp& qp) {
    return {.qpn = qp.qpn,
            .state = qp.state(),
            .queue_group = qp.queue_group,
            .dest_qpn = qp.attr.dest_qpn,
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

void close_device(Device& device) {
    SwroceDevice* dev = &swroce(device);
    stop_progress_service(*dev);
    SWROCE_LOG(INFO, "%s: closing (port %s)", dev->name.c_str(), dev->port.name().c_str());
    std::unique_ptr<SwroceDevice> owned(dev);
    device.config.driver_private = nullptr;
}

} // namespace

bool handle_arp_frame(SwroceDevice& dev, std::span<const std::uint8_t> frame, std::uint64_t now,
                      SwroceCounters& counters) noexcept {
    if (!dev.arp) {
        return false;
    }
    ArpFrame reply;
    const ArpRxResult result = dev.arp->on_frame(frame, now, reply);
    if (result.error == ArpError::not_arp) {
        return false;
    }
    if (result.error != ArpError::ok) {
        ++counters.arp_errors[static_cast<std::size_t>(result.error) % counters.arp_errors.size()];
        return true;
    }
    if (result.reply_ready) {
        send_control_frame(dev, reply.view(), counters);
        ++counters.arp_replies_sent;
    }
    if (result.resolved) {
        ++counters.arp_resolved;
        finish_rtr(dev, result.resolved_ip, result.resolved_mac);
    }
    return true;
}

void run_group_requests(SwroceDevice& dev, unsigned group) noexcept {
    QueueGroupState& state = *dev.groups[group];
    std::array<void*, 16> requests; // filled by the dequeue
    const unsigned n =
        rte_ring_sc_dequeue_burst(state.control, requests.data(), requests.size(), nullptr);
    if (PRDMA_LIKELY(n == 0)) {
        return;
    }
    for (unsigned i = 0; i < n; ++i) {
        auto& request = *static_cast<GroupRequest*>(requests[i]);
        switch (request.work) {
        case GroupWork::create_qp:
            publish_qp(dev, request.qp_storage);
            break;
        case GroupWork::modify_qp:
            apply_modify(*request.qp, request.attr, request.mask);
            break;
        case GroupWork::destroy_qp: {
            SwroceQp& qp = *request.qp;
            qp.destroying = true;
            qp.set_state(rdma::QpState::err);
            flush_queues(qp); // the flush completions are in the CQs before the destroy completes
            deactivate(*dev.groups[qp.queue_group], qp);
            request.qp_storage =
                std::move(dev.qps[qp.qpn - first_qpn]); // freed by the control path
            break;
        }
        case GroupWork::create_cq:
        case GroupWork::destroy_cq:
        case GroupWork::quiesce:
            break; // see GroupWork: coming back is the point
        }
    }
    // The ring has room for every request out (send_to_owner caps them), so this never fails.
    (void)rte_ring_mp_enqueue_burst(dev.control_done, requests.data(), n, nullptr);
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
    .query_qp = query_qp,
    .close = close_device,
    .stats = stats,
    .qp_telemetry = qp_telemetry,
    .attach_poller = attach_poller,
    .detach_poller = detach_poller,
};

} // namespace prdma::swroce
