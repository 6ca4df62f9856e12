// Frames out: a packet's headers from the QP, its payload gathered from a WQE or a region, the
// ICRC, and the batch handed to the port; what the port refuses waits in the group's backlog.
#include <algorithm>
#include <cstring>

#include <rte_cycles.h>
#include <rte_mbuf.h>

#include <prdma/mem/sge_cursor.hpp>
#include <prdma/roce/packet.hpp>
#include <prdma/roce/psn.hpp>

#include "engine.hpp"

namespace prdma::swroce {

namespace {

// Copies `length` bytes at `offset` of a packet's payload into `out`.
void copy_payload(const Payload& payload, std::uint8_t* out) noexcept {
    if (payload.wqe == nullptr) {
        mem::copy_from_region(*payload.region, payload.addr + payload.offset, payload.length, out);
        return;
    }
    const SendWqe& wqe = *payload.wqe;
    if (wqe.wr.flags.has(rdma::send_inline)) {
        std::memcpy(out, wqe.inline_store + payload.offset, payload.length);
        return;
    }
    wqe.cursor().gather(payload.offset, payload.length, out);
}

} // namespace

roce::FrameHeaders headers_towards(const SwroceDevice& dev, const rdma::Gid& gid,
                                   const MacAddress& mac) noexcept {
    roce::FrameHeaders h;
    h.eth.dst = mac;
    h.eth.src = dev.port.mac();
    if (dev.args.ip.is_v4) {
        h.ip_version = roce::IpVersion::ipv4;
        h.ipv4.src = dev.args.ip.ipv4_host_order();
        h.ipv4.dst = gid.ipv4_host_order();
    } else {
        h.eth.ether_type = roce::ethertype_ipv6;
        h.ip_version = roce::IpVersion::ipv6;
        std::copy(dev.args.ip.bytes.begin(), dev.args.ip.bytes.end(), h.ipv6.src.begin());
        std::copy(gid.raw.begin(), gid.raw.end(), h.ipv6.dst.begin());
    }
    return h;
}

namespace {

// Every header field of the QP's frames towards its peer: what its template is made from.
roce::FrameHeaders peer_headers(const SwroceQp& qp) noexcept {
    roce::FrameHeaders h = headers_towards(*qp.device, qp.attr->dest_gid, *qp.attr->dest_mac);
    h.udp_src_port = udp_source_port(qp);
    h.bth.dest_qp = qp.attr->dest_qpn;
    return h;
}

} // namespace

roce::TransportHeaders headers_for(const SwroceQp& qp, roce::Opcode opcode,
                                   std::uint32_t psn) noexcept {
    // Ethernet, IP and UDP come from the QP's template (emit): only the BTH is filled here.
    roce::TransportHeaders h;
    h.bth.opcode = opcode;
    h.bth.dest_qp = qp.attr->dest_qpn;
    h.bth.psn = psn & roce::psn_mask;
    return h;
}

void refresh_tx_headers(SwroceQp& qp) noexcept {
    if (!qp.has_peer_mac()) {
        return;
    }
    qp.tx_headers = roce::HeaderTemplate::make(peer_headers(qp));
    const roce::TransportHeaders ack = headers_for(qp, roce::Opcode::rc_acknowledge, 0);
    PrebuiltFrame& ack_frame = qp.ack_frame;
    ack_frame.layout = qp.tx_headers.build(ack, 0, ack_frame.bytes);
    const std::span<const std::uint8_t> datagram =
        std::span(ack_frame.bytes)
            .subspan(ack_frame.layout.ip_offset,
                     ack_frame.layout.frame_length - ack_frame.layout.ip_offset);
    const std::size_t psn_offset =
        ack_frame.layout.payload_offset - roce::aeth_size - 4U - ack_frame.layout.ip_offset;
    ack_frame.icrc = roce::icrc_prefix(datagram, psn_offset);
    const roce::TransportHeaders request = headers_for(qp, roce::Opcode::rc_send_only, 0);
    qp.request_frame.layout = qp.tx_headers.build(request, 0, qp.request_frame.bytes);
}

namespace {

// An mbuf of the QP's group for a frame, or nullptr (counted). The group takes them from its
// pool a stash at a time; a pool too short for a whole stash still gives single ones.
rte_mbuf* frame_mbuf(SwroceQp& qp) noexcept {
    SwroceDevice& dev = *qp.device;
    QueueGroupState& state = *dev.groups[qp.queue_group];
    if (PRDMA_LIKELY(state.mbuf_stash_count != 0)) {
        return state.mbuf_stash[--state.mbuf_stash_count];
    }
    rte_mempool* pool = dev.port.mempool(qp.queue_group);
    if (pool != nullptr &&
        rte_pktmbuf_alloc_bulk(pool, state.mbuf_stash.data(), state.mbuf_stash.size()) == 0) {
        state.mbuf_stash_count = static_cast<std::uint16_t>(state.mbuf_stash.size() - 1);
        return state.mbuf_stash[state.mbuf_stash_count];
    }
    rte_mbuf* mbuf = pool != nullptr ? rte_pktmbuf_alloc(pool) : nullptr;
    if (PRDMA_UNLIKELY(mbuf == nullptr)) {
        ++state.counters.tx_no_mbuf;
    }
    return mbuf;
}

// A finished frame of `wire_length` bytes joins the batch.
void enqueue_frame(SwroceQp& qp, TxBatch& tx, rte_mbuf* mbuf, std::uint32_t wire_length,
                   std::uint32_t payload_length) noexcept {
    mbuf->data_len = static_cast<std::uint16_t>(wire_length);
    mbuf->pkt_len = wire_length;
    tx.mbufs[tx.count++] = mbuf;
    count_event(qp, &QpCounters::tx_packets, &SwroceCounters::tx_packets);
    qp.counters.tx_bytes += payload_length;
}

// Pad, ICRC (and the IPv6 UDP checksum) over a frame whose headers and payload are in place; it
// joins the batch.
void seal_and_enqueue(SwroceQp& qp, TxBatch& tx, rte_mbuf* mbuf, const roce::FrameLayout& layout,
                      std::uint32_t payload_length, bool ipv4) noexcept {
    const std::span<std::uint8_t> frame(rte_pktmbuf_mtod(mbuf, std::uint8_t*), layout.wire_length);
    roce::seal_frame(frame, layout, ipv4);
    if (!ipv4) {
        roce::set_ipv6_udp_checksum(frame, layout);
    }
    enqueue_frame(qp, tx, mbuf, layout.wire_length, payload_length);
}

void finish_frame(SwroceQp& qp, TxBatch& tx, rte_mbuf* mbuf, const roce::FrameLayout& layout,
                  std::uint32_t payload_length) noexcept {
    seal_and_enqueue(qp, tx, mbuf, layout, payload_length, qp.tx_headers.ipv4());
}

} // namespace

bool emit(SwroceQp& qp, TxBatch& tx, const roce::TransportHeaders& h,
          const Payload& payload) noexcept {
    rte_mbuf* mbuf = frame_mbuf(qp);
    if (PRDMA_UNLIKELY(mbuf == nullptr)) {
        return false;
    }
    const std::span<std::uint8_t> room(rte_pktmbuf_mtod(mbuf, std::uint8_t*),
                                       rte_pktmbuf_tailroom(mbuf));
    // Ethernet, IP and UDP from the QP's template: only the BTH on is encoded per frame.
    const roce::FrameLayout layout = qp.tx_headers.build(h, payload.length, room);
    if (PRDMA_UNLIKELY(!layout.ok())) {
        rte_pktmbuf_free(mbuf);
        return false;
    }
    if (payload.length > 0) {
        copy_payload(payload, room.data() + layout.payload_offset);
    }
    finish_frame(qp, tx, mbuf, layout, payload.length);
    return true;
}

bool emit_request(SwroceQp& qp, TxBatch& tx, const SendWqe& wqe,
                  const RequestPacket& packet) noexcept {
    const PrebuiltFrame& prefix = qp.request_frame;
    const roce::OpcodeInfo& info = roce::opcode_info(packet.opcode);
    rte_mbuf* mbuf = frame_mbuf(qp);
    if (PRDMA_UNLIKELY(mbuf == nullptr)) {
        return false;
    }
    // The prefix's layout is a SEND ONLY's without payload: its BTH ends where its payload starts.
    roce::FrameLayout layout = prefix.layout;
    const std::uint32_t bth_offset = layout.payload_offset - roce::bth_size;
    layout.payload_offset = static_cast<std::uint16_t>(bth_offset + info.header_length);
    layout.payload_length = packet.length;
    layout.pad_count = static_cast<std::uint8_t>((0U - packet.length) & 0x3U);
    layout.frame_length =
        layout.payload_offset + packet.length + layout.pad_count + roce::icrc_size;
    layout.wire_length =
        std::max<std::uint32_t>(layout.frame_length, roce::ethernet_min_frame_size);
    if (PRDMA_UNLIKELY(layout.wire_length > rte_pktmbuf_tailroom(mbuf))) {
        rte_pktmbuf_free(mbuf);
        return false;
    }
    std::uint8_t* frame = rte_pktmbuf_mtod(mbuf, std::uint8_t*);
    std::memcpy(frame, prefix.bytes.data(), prefix.bytes.size()); // a data room holds it all
    qp.tx_headers.set_lengths({frame, layout.frame_length}, layout.frame_length - layout.ip_offset);
    std::uint8_t* ib = frame + bth_offset;
    roce::Bth bth;
    bth.opcode = packet.opcode;
    bth.solicited = packet.solicited;
    bth.pad_count = layout.pad_count;
    bth.dest_qp = qp.attr->dest_qpn;
    bth.ack_req = packet.ack_req;
    bth.psn = packet.psn & roce::psn_mask;
    roce::encode_bth(bth, {ib, roce::bth_size});
    if (info.has(roce::ExtHeader::reth)) {
        roce::encode_reth({wqe.wr.rdma.remote_addr, wqe.wr.rdma.rkey, wqe.length},
                          {ib + info.offset_of(roce::ExtHeader::reth), roce::reth_size});
    }
    if (info.has(roce::ExtHeader::immdt)) {
        roce::store_be32(ib + info.offset_of(roce::ExtHeader::immdt), wqe.wr.imm_or_invalidate);
    } else if (info.has(roce::ExtHeader::ieth)) {
        roce::store_be32(ib + info.offset_of(roce::ExtHeader::ieth), wqe.wr.imm_or_invalidate);
    }
    if (packet.length > 0) {
        copy_payload(Payload{&wqe, nullptr, 0, packet.offset, packet.length},
                     frame + layout.payload_offset);
    }
    finish_frame(qp, tx, mbuf, layout, packet.length);
    return true;
}

bool emit_datagram(SwroceQp& qp, TxBatch& tx, const SendWqe& wqe,
                   const roce::TransportHeaders& h) noexcept {
    rte_mbuf* mbuf = frame_mbuf(qp);
    if (PRDMA_UNLIKELY(mbuf == nullptr)) {
        return false;
    }
    const roce::HeaderTemplate& headers = *wqe.ud_headers;
    std::uint8_t* frame = rte_pktmbuf_mtod(mbuf, std::uint8_t*);
    const roce::FrameLayout layout =
        headers.build(h, wqe.length, {frame, rte_pktmbuf_tailroom(mbuf)});
    if (PRDMA_UNLIKELY(!layout.ok())) {
        rte_pktmbuf_free(mbuf);
        return false;
    }
    // The AH's template is every QP's: the source port is the sending QP's.
    const std::size_t udp_offset =
        layout.ip_offset + (headers.ipv4() ? roce::ipv4_header_size : roce::ipv6_header_size);
    roce::store_be16(frame + udp_offset, udp_source_port(qp));
    if (wqe.length > 0) {
        copy_payload(Payload{&wqe, nullptr, 0, 0, wqe.length}, frame + layout.payload_offset);
    }
    seal_and_enqueue(qp, tx, mbuf, layout, wqe.length, headers.ipv4());
    return true;
}

bool emit_ack(SwroceQp& qp, TxBatch& tx, std::uint32_t psn, const roce::Aeth& aeth) noexcept {
    const PrebuiltFrame& ack = qp.ack_frame;
    if (PRDMA_UNLIKELY(!ack.layout.ok())) {
        return false; // no peer yet: nothing to acknowledge to
    }
    rte_mbuf* mbuf = frame_mbuf(qp);
    if (PRDMA_UNLIKELY(mbuf == nullptr)) {
        return false;
    }
    std::uint8_t* frame = rte_pktmbuf_mtod(mbuf, std::uint8_t*);
    // A data room holds any frame of the port's MTU: the whole array fits. The BTH's first eight
    // bytes (opcode, destination QP) are the template's, and so is the CRC state up to them.
    std::memcpy(frame, ack.bytes.data(), ack.bytes.size());
    std::uint8_t* psn_word = frame + ack.layout.payload_offset - roce::aeth_size - 4U;
    roce::store_be32(psn_word, psn & roce::psn_mask); // AckReq clear
    roce::encode_aeth(aeth, {psn_word + 4, roce::aeth_size});
    if (PRDMA_UNLIKELY(!ack.icrc.ok())) {
        finish_frame(qp, tx, mbuf, ack.layout, 0);
        return true;
    }
    const std::span<std::uint8_t> datagram(frame + ack.layout.ip_offset,
                                           ack.layout.frame_length - ack.layout.ip_offset);
    roce::store_le32(datagram.data() + datagram.size() - roce::icrc_size,
                     roce::icrc_after_prefix(ack.icrc, datagram));
    if (!qp.tx_headers.ipv4()) {
        roce::set_ipv6_udp_checksum({frame, ack.layout.wire_length}, ack.layout);
    }
    enqueue_frame(qp, tx, mbuf, ack.layout.wire_length, 0);
    return true;
}

bool flush_backlog(SwroceDevice& dev, unsigned group) noexcept {
    QueueGroupState& state = *dev.groups[group];
    if (PRDMA_LIKELY(state.tx_backlog_count == 0)) {
        return true;
    }
    const std::uint16_t sent =
        dev.port.send_frames(group, state.tx_backlog.data(), state.tx_backlog_count);
    std::copy(state.tx_backlog.begin() + sent, state.tx_backlog.begin() + state.tx_backlog_count,
              state.tx_backlog.begin());
    state.tx_backlog_count = static_cast<std::uint16_t>(state.tx_backlog_count - sent);
    return state.tx_backlog_count == 0;
}

namespace {

// Only frames beyond the backlog's room are lost, counted, and left to the retransmission timer
// (or, for ARP, to the asker's next request).
void defer(QueueGroupState& state, rte_mbuf* mbuf, SwroceCounters& counters) noexcept {
    if (state.tx_backlog_count < state.tx_backlog.size()) {
        state.tx_backlog[state.tx_backlog_count++] = mbuf;
        ++counters.tx_deferred;
    } else {
        rte_pktmbuf_free(mbuf);
        ++counters.tx_dropped;
    }
}

} // namespace

bool transmit(SwroceDevice& dev, unsigned group, TxBatch& tx) noexcept {
    QueueGroupState& state = *dev.groups[group];
    if (PRDMA_UNLIKELY(state.tx_faults.active())) {
        // Called with an empty batch too: frames the injector held back come out when due.
        tx.count =
            state.tx_faults.apply(tx.mbufs.data(), tx.count, tx.mbufs.size(), rte_get_tsc_cycles(),
                                  dev.port.mempool(group), state.counters.tx_faults);
    }
    if (tx.count == 0) {
        return state.tx_backlog_count == 0; // an empty burst still costs a PMD call
    }
    capture_frames(dev, group, tx.mbufs.data(), tx.count, true);
    std::uint16_t sent = 0;
    if (PRDMA_LIKELY(state.tx_backlog_count == 0)) {
        for (int attempt = 0; attempt < 2 && sent < tx.count; ++attempt) {
            sent += dev.port.send_frames(group, tx.mbufs.data() + sent,
                                         static_cast<std::uint16_t>(tx.count - sent));
        }
    }
    for (std::uint16_t i = sent; i < tx.count; ++i) {
        defer(state, tx.mbufs[i], state.counters);
    }
    tx.count = 0;
    return state.tx_backlog_count == 0;
}

void send_frame(SwroceDevice& dev, unsigned group, rte_mbuf* mbuf,
                SwroceCounters& counters) noexcept {
    QueueGroupState& state = *dev.groups[group];
    if (state.tx_backlog_count == 0 && dev.port.send_frames(group, &mbuf, 1) == 1) {
        return;
    }
    defer(state, mbuf, counters);
}

} // namespace prdma::swroce
