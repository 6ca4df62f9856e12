// Frames in: classify (ARP or ND, RoCE, anything else), check (parse with ICRC), steer (a frame for
// another queue group's QP goes to that group's handover ring), and hand each RoCE packet to the
// responder or the completer of its QP. A malformed frame is dropped and counted by reason.
#include <algorithm>

#include <rte_mbuf.h>
#include <rte_ring.h>

#include <prdma/roce/packet.hpp>
#include <prdma/roce/psn.hpp>

#include "engine.hpp"

namespace prdma::swroce {

namespace {

// Whether a frame comes from the QP's connected peer: its source address is the peer's GID (an
// IPv4 source as the IPv4-mapped GID).
bool from_peer(const SwroceQp& qp, const roce::ParsedFrame& frame) noexcept {
    const auto& gid = qp.attr->dest_gid.raw;
    if (frame.ip_version == roce::IpVersion::ipv6) {
        return std::equal(gid.begin(), gid.end(), frame.ipv6.src.begin());
    }
    const std::uint32_t peer = (std::uint32_t{gid[12]} << 24) | (std::uint32_t{gid[13]} << 16) |
                               (std::uint32_t{gid[14]} << 8) | gid[15];
    return frame.ipv4.src == peer;
}

} // namespace

bool handle_frame(SwroceDevice& dev, unsigned group, rte_mbuf* mbuf, std::uint64_t now,
                  bool handed_over, roce::ParsedFrame& frame) noexcept {
    SwroceCounters& counters = dev.groups[group]->counters;
    const std::span<const std::uint8_t> bytes(rte_pktmbuf_mtod(mbuf, const std::uint8_t*),
                                              rte_pktmbuf_data_len(mbuf));
    if (!handed_over) {
        ++counters.rx_packets;
        // ARP and ND belong to group 0 (the resolver is one per device); elsewhere they are
        // handed over.
        if (group == 0 && is_neighbour_frame(bytes) &&
            handle_neighbour_frame(dev, bytes, now, counters, mbuf)) {
            return false;
        }
    }
    // A handed-over frame was checked by the group that received it.
    roce::ParseOptions options;
    options.verify_icrc = !handed_over;
    options.verify_ipv4_checksum = !handed_over;
    options.transport_fields_only = true; // the roles read no Ethernet or UDP field
    if (roce::parse_roce_frame(bytes, frame, options) != roce::ParseError::ok) {
        // Only what the device's resolver could take: ARP on IPv4, ND on IPv6.
        const bool maybe_neighbour =
            (frame.error == roce::ParseError::not_ip && dev.arp != nullptr) ||
            (frame.error == roce::ParseError::not_udp && dev.nd != nullptr &&
             is_icmpv6_frame(bytes));
        if (maybe_neighbour && group != 0 && dev.groups[0]->handover != nullptr &&
            rte_ring_enqueue(dev.groups[0]->handover, mbuf) == 0) {
            return true; // possibly ARP or ND: group 0 decides
        }
        ++counters.rx_bad_frame;
        counters.rx_bad_icrc += frame.error == roce::ParseError::bad_icrc ? 1 : 0;
        return false;
    }
    if (!handed_over) {
        capture_frames(dev, group, &mbuf, 1, false);
    }
    const unsigned target = dev.group_of_qpn(frame.bth.dest_qp);
    if (PRDMA_UNLIKELY(target != group && target < dev.groups.size())) {
        // The port's steering put it on our queue; the QP's own lcore takes it from its ring. The
        // QPN names the group: another group's QP table is never read here.
        ++counters.steering_misses;
        if (rte_ring_enqueue(dev.groups[target]->handover, mbuf) == 0) {
            return true;
        }
        ++counters.handover_dropped; // the retransmission timer recovers it
        return false;
    }
    SwroceQp* qp = dev.qp_by_number(frame.bth.dest_qp);
    if (qp == nullptr || qp->destroying || qp->state() == rdma::QpState::reset ||
        qp->state() == rdma::QpState::init) {
        ++counters.rx_unknown_qp;
        return false;
    }
    if (PRDMA_UNLIKELY(frame.info->transport != roce::Transport::rc ||
                       qp->type != rdma::QpType::rc)) {
        if (qp->type == rdma::QpType::ud && frame.info->transport == roce::Transport::ud) {
            receive_datagram(*qp, frame); // from anyone: a UD QP has no connected peer
        } else {
            ++counters.rx_wrong_transport; // IBTA drops it silently
        }
        return false;
    }
    if (PRDMA_UNLIKELY(!from_peer(*qp, frame))) {
        ++counters.rx_wrong_source; // only the connected peer may talk to an RC QP
        return false;
    }
    ++qp->counters.rx_packets;
    qp->counters.rx_bytes += frame.payload.size();
    const roce::Operation op = frame.info->operation;
    if (op == roce::Operation::acknowledge || op == roce::Operation::atomic_acknowledge ||
        op == roce::Operation::rdma_read_response) {
        complete(*qp, frame, now);
    } else if (qp->state() != rdma::QpState::err) {
        // A handed-over frame is from another group's pool, which this group does not budget.
        if (PRDMA_UNLIKELY(roce::psn_after(frame.bth.psn, qp->resp.expected_psn)) && !handed_over &&
            keep_past_gap(dev, group, *qp, frame, mbuf, now)) {
            activate(*dev.groups[group], *qp); // its gap's NAK may come due
            return true;
        }
        const std::uint32_t expected = qp->resp.expected_psn;
        respond(*qp, frame);
        if (PRDMA_UNLIKELY(!qp->resp.kept.empty())) {
            run_kept(dev, group, *qp, frame, expected, now);
        }
    }
    activate(*dev.groups[group], *qp); // an ACK, a response, or a window opened for its requester
    return false;
}

} // namespace prdma::swroce
