// QP control: create, modify (INIT->RTR pends on ARP resolution of the peer's MAC), destroy with
// flush (pending while work is in flight), and the QP facts the class asks the driver for.
#include <algorithm>
#include <cstring>
#include <span>

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

// The QP's queues, each slot pointing at its room in the stores; nothing is kept for SGEs, keys or
// inline bytes the caps do not allow.
void make_queues(SwroceQp& qp, const rdma::QpCaps& caps) {
    const bool ud = qp.type == rdma::QpType::ud;
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
    if (ud) {
        stores.ud_headers = std::make_unique<roce::HeaderTemplate[]>(sends);
    }
    for (std::uint32_t i = 0; i < sends; ++i) {
        SendWqe& wqe = qp.send_queue.slot(i);
        if (ud) {
            wqe.ud_headers = &stores.ud_headers[i];
        }
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
                   std::size_t{recvs} * recv_sges * sizeof(rdma::Sge) +
                   (ud ? std::size_t{sends} * sizeof(roce::HeaderTemplate) : 0);
}

} // namespace

// Applies a modify now when this thread may drive the QP's group (ok), or sends it to the owner
// (pending; the owner's completion carries `token`).
Status apply_or_send_modify(SwroceDevice& dev, SwroceQp& qp, const QpModify& modify,
                            const ControlToken& token) {
    if (const GroupHold hold(dev, qp.queue_group); hold) {
        apply_modify(qp, modify);
        return {};
    }
    auto request = make_request(GroupWork::modify_qp, qp.queue_group, token);
    request->qp = &qp;
    request->modify = modify;
    if (Status sent = send_to_owner(dev, std::move(request)); !sent.ok()) {
        return sent;
    }
    return pending_on_owner(qp.queue_group);
}

// Publishes a QP in its group's slot; run by whoever drives the group.
void publish_qp(SwroceDevice& dev, std::unique_ptr<SwroceQp>& qp) noexcept {
    const std::uint32_t slot = dev.slot_of_qpn(qp->qpn);
    QueueGroupState& group = *dev.groups[qp->queue_group];
    group.qp_slot_end = std::max(group.qp_slot_end, slot + 1);
    dev.qps[slot] = std::move(qp);
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
    if (init.attr == nullptr) {
        return Error(StatusCode::invalid_parameter, "create_qp needs the QP's attribute block");
    }
    const GroupHold hold(dev, group); // kept until the QP is in its slot
    const bool owned_by_other = !hold;
    if (owned_by_other && !token.may_pend) {
        return owned_elsewhere(group, "add the QP to its table");
    }
    auto qp = std::make_unique<SwroceQp>();
    qp->device = &dev;
    qp->qpn = dev.qpn_of_slot(static_cast<std::uint32_t>(slot - dev.qp_slot_taken.begin()));
    qp->pd = init.pd;
    qp->send_cq = static_cast<SwroceCq*>(init.send_cq);
    qp->recv_cq = static_cast<SwroceCq*>(init.recv_cq);
    qp->queue_group = init.queue_group;
    qp->caps = init.caps;
    qp->signal_all = init.signal_all;
    qp->attr = init.attr;
    qp->type = init.type;
    if (qp->type == rdma::QpType::ud) {
        qp->attr->path_mtu = dev.path_mtu; // a datagram is one packet of the port's MTU at most
    }
    make_queues(*qp, init.caps);
    if (qp->type == rdma::QpType::rc) {
        qp->response_maps = std::make_unique<ResponseMap[]>(response_map_slots);
    }
    qp->srq = static_cast<SwroceSrq*>(init.srq);
    if (qp->srq != nullptr && qp->srq->max_sge > 1) {
        qp->held_sges = std::make_unique<rdma::Sge[]>(qp->srq->max_sge);
    }
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
    const std::uint32_t slot = dev.slot_of_qpn(qp->qpn);
    // A post just before the destroy may have rung: taken now, so no ring names a freed QP.
    while (take_doorbells(dev, qp->queue_group) != 0) {
    }
    deactivate(*dev.groups[qp->queue_group], *qp);
    release_kept(*qp);
    {
        const std::lock_guard lock(dev.qp_free_mutex);
        dev.qps[slot].reset();
    }
    dev.release_qp_slot(slot);
}

// Applies a checked modify (the class verified the transition and the mask); run by whoever
// drives the QP's group. No allocation: an owner runs it between bursts.
void apply_modify(SwroceQp& qp, const QpModify& modify) noexcept {
    const rdma::QpAttr& attr = *modify.attr;
    const rdma::QpAttrMask mask = modify.mask;
    // A modify that names the peer without its MAC keeps the one ARP or an earlier modify found.
    const std::optional<MacAddress> known_mac = qp.attr->dest_mac;
    const rdma::QpState was = qp.state();
    rdma::driver::merge_qp_attr(*qp.attr, attr, mask);
    if (mask.has(rdma::qp_attr_state)) {
        qp.set_state(attr.state);
    }
    if (was == rdma::QpState::init && qp.state() == rdma::QpState::rtr) {
        qp.connection = qp.device->last_connection.fetch_add(1, std::memory_order_relaxed) + 1;
    }
    if (modify.resolved_mac) {
        qp.attr->dest_mac = modify.resolved_mac;
    } else if (!qp.attr->dest_mac) {
        qp.attr->dest_mac = known_mac;
    }
    refresh_tx_headers(qp);
    set_timer_periods(qp);
    if (mask.has(rdma::qp_attr_sq_psn)) {
        qp.req.send_psn = attr.sq_psn & roce::psn_mask;
        qp.req.acked_psn = roce::psn_sub(qp.req.send_psn, 1); // nothing sent, nothing missing
        qp.req.sent_psn = qp.req.acked_psn;
    }
    if (mask.has(rdma::qp_attr_rq_psn)) {
        release_kept(qp); // kept behind the old sequence
        qp.resp.expected_psn = attr.rq_psn;
    }
    if (was == rdma::QpState::init && qp.state() == rdma::QpState::rtr) {
        qp.req.window.ack_often(qp.attr->selective_repeat);
        // Nothing is kept before RTR: the room can change hands.
        qp.resp.kept.lend(
            qp.attr->selective_repeat && qp.reorder_room
                ? std::span(qp.reorder_room.get(), ReorderBuffer::selective_repeat_reach)
                : std::span<ReorderBuffer::Slot>());
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
        qp.attr->dest_mac.reset();
        // Nothing of the old connection survives: no restart point, no responder resource a
        // duplicate of an old request could be answered from.
        qp.req = RequesterState{};
        qp.forget_reads();
        set_timer_periods(qp);
        release_kept(qp);
        qp.resp = ResponderState{};
        qp.attr->selective_repeat = false; // a new connection says again what its peer does
        qp.error_reported = false;
    }
}

Status modify_qp(Device& device, void* queue, const rdma::QpAttr& attr, rdma::QpAttrMask mask,
                 const ControlToken& token) {
    SwroceDevice& dev = swroce(device);
    auto& qp = *static_cast<SwroceQp*>(queue);
    const bool to_rtr = mask.has(rdma::qp_attr_state) && attr.state == rdma::QpState::rtr;
    if (mask.has(rdma::qp_attr_selective_repeat) && attr.selective_repeat && !qp.reorder_room) {
        // Here, on the control thread: the QP is in INIT (the mask is INIT -> RTR's only), so its
        // engine does not look at the room until the modify is applied.
        qp.reorder_room =
            std::make_unique<ReorderBuffer::Slot[]>(ReorderBuffer::selective_repeat_reach);
    }
    if (to_rtr && !attr.dest_mac && qp.type == rdma::QpType::rc) {
        if (!resolves(dev, attr.dest_gid)) {
            return unresolvable_peer(dev, attr.dest_gid);
        }
        Result<MacAddress> mac = resolve_peer(
            dev, PendingResolution{&qp, token, attr.dest_gid, QpModify{&attr, mask, {}}});
        if (!mac) {
            return mac.error();
        }
        return apply_or_send_modify(dev, qp, QpModify{&attr, mask, mac.value()}, token);
    }
    return apply_or_send_modify(dev, qp, QpModify{&attr, mask, {}}, token);
}

Status destroy_qp(Device& device, void* queue, const ControlToken& token) {
    SwroceDevice& dev = swroce(device);
    auto* qp = static_cast<SwroceQp*>(queue);
    // A pending RTR of this QP will never finish now: it ends here, before the destroy.
    for (const PendingResolution& rtr :
         take_pending(dev, [qp](const PendingResolution& p) { return p.qp == qp; })) {
        rdma::driver::complete_control(device, rtr.token, StatusCode::not_connected,
                                       "the QP was destroyed before its peer's MAC was resolved");
    }
    const GroupHold hold(dev, qp->queue_group);
    if (!hold) {
        // Its owner flushes it and takes it out of the table; it is freed when it comes back.
        auto request = make_request(GroupWork::destroy_qp, qp->queue_group, token);
        request->qp = qp;
        send_destroy_to_owner(dev, std::move(request));
        return pending_on_owner(qp->queue_group);
    }
    if (qp->receive_queue.empty() && qp->send_queue.empty() && !qp->resp.holds_receive) {
        free_qp(dev, qp);
        return {};
    }
    // Work in flight: the QP goes to error and its WRs are flushed to the CQs before it is gone.
    qp->set_state(rdma::QpState::err);
    qp->destroying = true;
    dev.pending_destroy.push_back(PendingDestroy{qp, token});
    return Error(StatusCode::pending, "flushing the work still queued on the QP");
}

std::uint32_t qp_send_psn(Device&, void* queue) {
    return static_cast<SwroceQp*>(queue)->req.send_psn;
}

mem::ConnectionId qp_connection(Device&, void* queue) {
    return static_cast<SwroceQp*>(queue)->connection;
}

rdma::QpState qp_state(Device&, void* queue) {
    return static_cast<const SwroceQp*>(queue)->state();
}

} // namespace prdma::swroce
