// swroce's control path: queues, QP state changes (with ARP resolution of the peer's MAC, which
// makes INIT->RTR pending), destroy with flush (pending while work is in flight), port queries.
#include <algorithm>
#include <cstring>

#include <rte_cycles.h>
#include <rte_ether.h>
#include <rte_mbuf.h>

#include <prdma/format.hpp>

#include "swroce_device.hpp"
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
    if (mbuf == nullptr || dev.port.send_frames(0, &mbuf, 1) != 1) {
        if (mbuf != nullptr) {
            rte_pktmbuf_free(mbuf);
        }
        ++counters.tx_dropped;
    }
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

Result<void*> create_cq(Device& device, const rdma::driver::CqInit& init) {
    SwroceDevice& dev = swroce(device);
    auto cq = std::make_unique<SwroceCq>();
    cq->device = &dev;
    cq->queue_group = init.queue_group;
    cq->ring = WorkRing<rdma::WorkCompletion>(init.cqe);
    void* raw = cq.get();
    dev.cqs.push_back(std::move(cq));
    return raw;
}

Status destroy_cq(Device& device, void* cq) {
    SwroceDevice& dev = swroce(device);
    const auto it = std::find_if(dev.cqs.begin(), dev.cqs.end(),
                                 [cq](const auto& owned) { return owned.get() == cq; });
    if (it == dev.cqs.end()) {
        return Error(StatusCode::invalid_parameter, "not a CQ of this device");
    }
    dev.cqs.erase(it);
    return {};
}

Result<rdma::driver::QpCreated> create_qp(Device& device, const rdma::driver::QpInit& init) {
    SwroceDevice& dev = swroce(device);
    const auto slot = std::find(dev.qps.begin(), dev.qps.end(), nullptr);
    if (slot == dev.qps.end()) {
        return Error(StatusCode::no_resources,
                     strformat("all %u QPs of %s are in use", dev.max_qp, dev.name.c_str()));
    }
    dev.qp_slots_used =
        std::max(dev.qp_slots_used, static_cast<std::uint32_t>(slot - dev.qps.begin()) + 1);
    auto qp = std::make_unique<SwroceQp>();
    qp->device = &dev;
    qp->qpn = first_qpn + static_cast<std::uint32_t>(slot - dev.qps.begin());
    qp->pd = init.pd;
    qp->send_cq = static_cast<SwroceCq*>(init.send_cq);
    qp->recv_cq = static_cast<SwroceCq*>(init.recv_cq);
    qp->queue_group = init.queue_group;
    qp->caps = init.caps;
    qp->signal_all = init.signal_all;
    qp->receive_queue = WorkRing<RecvWqe>(init.caps.max_recv_wr);
    qp->send_queue = WorkRing<SendWqe>(init.caps.max_send_wr);
    rdma::driver::QpCreated created{qp.get(), qp->qpn};
    *slot = std::move(qp);
    return created;
}

void free_qp(SwroceDevice& dev, SwroceQp* qp) {
    dev.qps[qp->qpn - first_qpn].reset();
}

// Applies a checked modify (the class verified the transition and the mask).
void apply_modify(SwroceQp& qp, const rdma::QpAttr& attr, std::uint32_t mask) {
    rdma::driver::merge_qp_attr(qp.attr, attr, mask);
    if ((mask & rdma::qp_attr_sq_psn) != 0) {
        qp.send_psn = attr.sq_psn;
    }
    if ((mask & rdma::qp_attr_rq_psn) != 0) {
        qp.expected_psn = attr.rq_psn;
    }
    if ((mask & rdma::qp_attr_retry_cnt) != 0) {
        qp.retries_left = attr.retry_cnt;
    }
    if ((mask & rdma::qp_attr_rnr_retry) != 0) {
        qp.rnr_retries_left = attr.rnr_retry;
    }
    if ((mask & rdma::qp_attr_dest) != 0 && attr.dest_mac) {
        qp.dest_mac = *attr.dest_mac;
    }
    if ((mask & rdma::qp_attr_state) == 0) {
        return;
    }
    qp.state = attr.state;
    if (attr.state == rdma::QpState::err) {
        flush_queues(qp);
    } else if (attr.state == rdma::QpState::reset) {
        // RESET forgets queued work without completing it (IBTA 10.3.1).
        qp.receive_queue.clear();
        qp.send_queue.clear();
        qp.dest_mac.reset();
        qp.send_offset = 0;
        qp.send_stopped = false;
        qp.retransmit_deadline = 0;
        qp.recv_offset = 0;
        qp.write_entry = nullptr;
        qp.nak_sent = false;
        qp.ack_pending = false;
        qp.msn = 0;
    }
}

Status modify_qp(Device& device, void* queue, const rdma::QpAttr& attr, std::uint32_t mask,
                 const ControlToken& token) {
    SwroceDevice& dev = swroce(device);
    auto& qp = *static_cast<SwroceQp*>(queue);
    const bool to_rtr = (mask & rdma::qp_attr_state) != 0 && attr.state == rdma::QpState::rtr;
    if (to_rtr && !attr.dest_mac) {
        if (!dev.may_drive(0)) {
            // ARP belongs to queue group 0, which another thread polls now.
            return Error(StatusCode::not_supported,
                         "queue group 0 is polled by another thread: give dest_mac at RTR");
        }
        if (!attr.dest_gid.is_ipv4_mapped() || !dev.arp) {
            return Error(StatusCode::not_supported,
                         "swroce resolves IPv4 peers with ARP; give dest_mac for an IPv6 peer");
        }
        const std::uint32_t ip = (std::uint32_t{attr.dest_gid.raw[12]} << 24) |
                                 (std::uint32_t{attr.dest_gid.raw[13]} << 16) |
                                 (std::uint32_t{attr.dest_gid.raw[14]} << 8) |
                                 attr.dest_gid.raw[15];
        const std::uint64_t now = rte_get_tsc_cycles();
        if (auto mac = dev.arp->lookup(ip, now)) {
            rdma::QpAttr resolved = attr;
            resolved.dest_mac = *mac;
            apply_modify(qp, resolved, mask);
            return {};
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
    apply_modify(qp, attr, mask);
    return {};
}

Status destroy_qp(Device& device, void* queue, const ControlToken& token) {
    SwroceDevice& dev = swroce(device);
    auto* qp = static_cast<SwroceQp*>(queue);
    // A pending RTR of this QP will never finish now.
    std::erase_if(dev.pending_rtr, [qp](const PendingRtr& p) { return p.qp == qp; });
    if (qp->receive_queue.empty() && qp->send_queue.empty()) {
        free_qp(dev, qp);
        return {};
    }
    // Work in flight: the QP goes to error and its WRs are flushed to the CQs before it is gone.
    qp->state = rdma::QpState::err;
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
            apply_modify(*pending.qp, pending.attr, pending.mask);
            rdma::driver::complete_control(device, pending.token, StatusCode::ok);
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

void control_progress(Device& device) {
    SwroceDevice& dev = swroce(device);
    watch_link(device);
    // Groups no thread has claimed (or that this thread polls) are driven from here: ARP replies,
    // ACKs and READ responses go on before the application's first poll.
    for (unsigned group = 0; group < dev.port.queue_groups(); ++group) {
        if (dev.may_drive(group)) {
            progress_group(dev, group);
        }
    }
    if (dev.arp && dev.may_drive(0)) {
        poll_arp(dev, rte_get_tsc_cycles());
    }
    // Destroys wait until their queued work is flushed to the CQs; the flush happens here, on the
    // caller's poll, so the completions are visible before the destroy completes.
    std::vector<PendingDestroy> destroys;
    destroys.swap(dev.pending_destroy);
    for (PendingDestroy& pending : destroys) {
        flush_queues(*pending.qp);
        free_qp(dev, pending.qp);
        rdma::driver::complete_control(device, pending.token, StatusCode::ok);
    }
}

std::uint32_t qp_send_psn(Device&, void* queue) {
    return static_cast<SwroceQp*>(queue)->send_psn;
}

void query_qp(Device&, void* queue, rdma::QpAttr& attr) {
    const auto& qp = *static_cast<const SwroceQp*>(queue);
    // The engine moves a QP to ERR on its own (an error NAK, retries exhausted, a bad WR).
    attr.state = qp.state;
    attr.cur_state = qp.state;
    if (qp.dest_mac) {
        attr.dest_mac = *qp.dest_mac;
    }
    attr.sq_psn = qp.send_psn;
}

void append_counters(const std::string& prefix, const SwroceCounters& c,
                     std::vector<rdma::Counter>& out) {
    const std::pair<const char*, std::uint64_t> values[] = {
        {"rx_packets", c.rx_packets},
        {"tx_packets", c.tx_packets},
        {"rx_bad_frame", c.rx_bad_frame},
        {"rx_bad_icrc", c.rx_bad_icrc},
        {"rx_unknown_qp", c.rx_unknown_qp},
        {"rx_not_handled", c.rx_not_handled},
        {"rx_dropped_injected", c.rx_dropped_injected},
        {"duplicates", c.duplicates},
        {"naks_sent", c.naks_sent},
        {"naks_received", c.naks_received},
        {"retransmissions", c.retransmissions},
        {"tx_no_mbuf", c.tx_no_mbuf},
        {"tx_dropped", c.tx_dropped},
        {"tx_deferred", c.tx_deferred},
        {"steering_misses", c.steering_misses},
        {"handover_dropped", c.handover_dropped},
        {"arp_requests_sent", c.arp_requests_sent},
        {"arp_replies_sent", c.arp_replies_sent},
        {"arp_resolved", c.arp_resolved},
        {"arp_failed", c.arp_failed},
    };
    for (const auto& [name, value] : values) {
        out.push_back({prefix + name, value});
    }
}

SwroceCounters& operator+=(SwroceCounters& sum, const SwroceCounters& g) {
    sum.rx_packets += g.rx_packets;
    sum.tx_packets += g.tx_packets;
    sum.rx_bad_frame += g.rx_bad_frame;
    sum.rx_bad_icrc += g.rx_bad_icrc;
    sum.rx_unknown_qp += g.rx_unknown_qp;
    sum.rx_not_handled += g.rx_not_handled;
    sum.rx_dropped_injected += g.rx_dropped_injected;
    sum.duplicates += g.duplicates;
    sum.naks_sent += g.naks_sent;
    sum.naks_received += g.naks_received;
    sum.retransmissions += g.retransmissions;
    sum.tx_no_mbuf += g.tx_no_mbuf;
    sum.tx_dropped += g.tx_dropped;
    sum.tx_deferred += g.tx_deferred;
    sum.steering_misses += g.steering_misses;
    sum.handover_dropped += g.handover_dropped;
    sum.arp_requests_sent += g.arp_requests_sent;
    sum.arp_replies_sent += g.arp_replies_sent;
    sum.arp_resolved += g.arp_resolved;
    sum.arp_failed += g.arp_failed;
    return sum;
}

// Device totals first, then each queue group ("group1_..."), then each QP ("qp0x11_...").
// Group and QP counters belong to their polling threads; a control-path read is a snapshot.
void stats(Device& device, std::vector<rdma::Counter>& out) {
    const SwroceDevice& dev = swroce(device);
    SwroceCounters total = dev.control_counters;
    for (const auto& group : dev.groups) {
        total += group->counters;
    }
    append_counters("", total, out);
    for (std::size_t g = 0; g < dev.groups.size(); ++g) {
        append_counters("group" + std::to_string(g) + "_", dev.groups[g]->counters, out);
    }
    for (std::uint32_t slot = 0; slot < dev.qp_slots_used; ++slot) {
        const SwroceQp* qp = dev.qps[slot].get();
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
            {"naks_sent", c.naks_sent},
            {"naks_received", c.naks_received},
            {"duplicates", c.duplicates},
        };
        for (const auto& [name, value] : values) {
            out.push_back({prefix + name, value});
        }
    }
}

void close_device(Device& device) {
    SwroceDevice* dev = &swroce(device);
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

bool SwroceCq::push(const rdma::WorkCompletion& wc) noexcept {
    if (PRDMA_UNLIKELY(ring.full())) {
        ++overflows;
        return false;
    }
    ring.push_slot() = wc;
    return true;
}

void flush_queues(SwroceQp& qp) noexcept {
    while (!qp.receive_queue.empty()) {
        rdma::WorkCompletion wc;
        wc.wr_id = qp.receive_queue.front().wr_id;
        wc.status = rdma::WcStatus::wr_flush_error;
        wc.opcode = rdma::WcOpcode::recv;
        wc.qpn = qp.qpn;
        qp.recv_cq->push(wc);
        qp.receive_queue.pop();
    }
    while (!qp.send_queue.empty()) {
        rdma::WorkCompletion wc;
        wc.wr_id = qp.send_queue.front().wr.wr_id;
        wc.status = rdma::WcStatus::wr_flush_error;
        wc.opcode = wc_opcode_of(qp.send_queue.front().wr.opcode);
        wc.qpn = qp.qpn;
        qp.send_cq->push(wc);
        qp.send_queue.pop();
    }
    qp.send_offset = 0;
    qp.retransmit_deadline = 0;
}

const rdma::driver::DeviceOps swroce_ops = {
    query_port,       create_cq,   destroy_cq, create_qp,    modify_qp, destroy_qp,
    control_progress, qp_send_psn, query_qp,   close_device, stats,
};

} // namespace prdma::swroce
