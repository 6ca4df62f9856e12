// The RC engine: requester (WQE -> packets), responder (packets -> memory, receive completions,
// ACK/NAK), completer (ACK/NAK -> send completions, go-back-N retransmission). Runs to completion
// on the lcore that polls the queue group; nothing here allocates, locks or throws.
#include <algorithm>
#include <cstring>

#include <rte_cycles.h>
#include <rte_ether.h>
#include <rte_mbuf.h>
#include <rte_ring.h>

#include <prdma/roce/packet.hpp>
#include <prdma/roce/psn.hpp>

#include "segmenter.hpp"
#include "swroce_device.hpp"

namespace prdma::swroce {

namespace {

constexpr std::uint16_t burst_size = 32;

// Transmit batch of one progress call.
struct TxBatch {
    std::array<rte_mbuf*, 64> mbufs; // left uninitialised: only [0, count) is ever read
    std::uint16_t count = 0;
    [[nodiscard]] bool full() const noexcept { return count == mbufs.size(); }
};

std::uint32_t peer_ipv4(const SwroceQp& qp) noexcept {
    const auto& raw = qp.attr.dest_gid.raw;
    return (std::uint32_t{raw[12]} << 24) | (std::uint32_t{raw[13]} << 16) |
           (std::uint32_t{raw[14]} << 8) | raw[15];
}

// IBTA: transport timer 4.096 us x 2^timeout; 0 means infinite.
std::uint64_t transport_timeout_cycles(const SwroceQp& qp) noexcept {
    if (qp.attr.timeout == 0) {
        return 0;
    }
    const double seconds =
        4.096e-6 * static_cast<double>(1ULL << std::min<unsigned>(qp.attr.timeout, 31));
    return static_cast<std::uint64_t>(seconds * static_cast<double>(qp.device->tsc_hz));
}

// IBTA RNR NAK timer codes (table 45), in microseconds; code 0 is 655.36 ms.
std::uint64_t rnr_timer_cycles(const SwroceDevice& dev, std::uint8_t code) noexcept {
    static constexpr std::uint32_t micros[32] = {
        655360, 10,    20,    30,    40,    60,     80,     120,    160,    240,   320,
        480,    640,   960,   1280,  1920,  2560,   3840,   5120,   7680,   10240, 15360,
        20480,  30720, 40960, 61440, 81920, 122880, 163840, 245760, 327680, 491520};
    return micros[code & 31U] * dev.tsc_hz / 1'000'000;
}

roce::FrameHeaders headers_for(const SwroceQp& qp, roce::Opcode opcode,
                               std::uint32_t psn) noexcept {
    const SwroceDevice& dev = *qp.device;
    roce::FrameHeaders h;
    h.eth.dst = *qp.dest_mac;
    h.eth.src = dev.port.mac();
    if (dev.args.ip.is_v4) {
        h.ip_version = roce::IpVersion::ipv4;
        h.ipv4.src = dev.args.ip.ipv4_host_order();
        h.ipv4.dst = peer_ipv4(qp);
    } else {
        h.eth.ether_type = roce::ethertype_ipv6;
        h.ip_version = roce::IpVersion::ipv6;
        std::copy(dev.args.ip.bytes.begin(), dev.args.ip.bytes.end(), h.ipv6.src.begin());
        std::copy(qp.attr.dest_gid.raw.begin(), qp.attr.dest_gid.raw.end(), h.ipv6.dst.begin());
    }
    // Per-QP source port: ECMP entropy, as rxe and RoCE NICs spread flows.
    h.udp_src_port = static_cast<std::uint16_t>(0xc000U | (qp.qpn & 0x3fffU));
    h.bth.opcode = opcode;
    h.bth.dest_qp = qp.attr.dest_qpn;
    h.bth.psn = psn & roce::psn_mask;
    return h;
}

// Copies `length` bytes at `offset` of the WQE's message into `out`, through its checked lkeys.
// Every SGE of a WQE still maps what it was checked for (see still_valid); inline data has no
// keys to lose.
bool wqe_keys_valid(const SendWqe& wqe) noexcept {
    if ((wqe.wr.flags & rdma::send_inline) != 0) {
        return true;
    }
    for (std::uint32_t i = 0; i < wqe.wr.num_sge; ++i) {
        if (PRDMA_UNLIKELY(!still_valid(wqe.entries[i], wqe.sges[i].lkey))) {
            return false;
        }
    }
    return true;
}

void gather(const SendWqe& wqe, std::uint32_t offset, std::uint32_t length,
            std::uint8_t* out) noexcept {
    if ((wqe.wr.flags & rdma::send_inline) != 0) {
        std::memcpy(out, wqe.inline_data.data() + offset, length);
        return;
    }
    for (std::uint32_t i = 0; i < wqe.wr.num_sge && length > 0; ++i) {
        const rdma::Sge& sge = wqe.sges[i];
        if (offset >= sge.length) {
            offset -= sge.length;
            continue;
        }
        const std::uint32_t take = std::min(length, sge.length - offset);
        const mem::KeyEntry& entry = *wqe.entries[i];
        const std::uint64_t addr = sge.addr + offset;
        if (entry.identity) {
            std::memcpy(out, reinterpret_cast<const void*>(addr), take);
        } else {
            mem::TranslationTable::Cursor cursor(*entry.table, addr, take);
            std::uint8_t* dst = out;
            for (mem::Chunk chunk; cursor.next(chunk);) {
                std::memcpy(dst, chunk.host, chunk.length);
                dst += chunk.length;
            }
        }
        out += take;
        length -= take;
        offset = 0;
    }
}

// Copies `length` bytes to a checked region address (identity or through its table).
void place(const mem::KeyEntry& entry, std::uint64_t addr, const std::uint8_t* data,
           std::uint32_t length) noexcept {
    if (entry.identity) {
        std::memcpy(reinterpret_cast<void*>(addr), data, length);
        return;
    }
    mem::TranslationTable::Cursor cursor(*entry.table, addr, length);
    for (mem::Chunk chunk; cursor.next(chunk);) {
        std::memcpy(chunk.host, data, chunk.length);
        data += chunk.length;
    }
}

// Reads `length` bytes at a checked region address (identity or through its table).
void read_region(const mem::KeyEntry& entry, std::uint64_t addr, std::uint32_t length,
                 std::uint8_t* out) noexcept {
    if (entry.identity) {
        std::memcpy(out, reinterpret_cast<const void*>(addr), length);
        return;
    }
    mem::TranslationTable::Cursor cursor(*entry.table, addr, length);
    for (mem::Chunk chunk; cursor.next(chunk);) {
        std::memcpy(out, chunk.host, chunk.length);
        out += chunk.length;
    }
}

// Where a packet's payload comes from: a send WQE's message, or a region (READ responses).
struct Payload {
    const SendWqe* wqe = nullptr;
    const mem::KeyEntry* region = nullptr;
    std::uint64_t addr = 0;
    std::uint32_t offset = 0;
    std::uint32_t length = 0;
};

bool emit(SwroceQp& qp, TxBatch& tx, const roce::FrameHeaders& h, const Payload& payload) noexcept {
    const std::uint32_t offset = payload.offset;
    const std::uint32_t length = payload.length;
    SwroceDevice& dev = *qp.device;
    rte_mempool* pool = dev.port.mempool(qp.queue_group);
    rte_mbuf* mbuf = pool != nullptr ? rte_pktmbuf_alloc(pool) : nullptr;
    if (PRDMA_UNLIKELY(mbuf == nullptr)) {
        ++dev.counters_of(qp).tx_no_mbuf;
        return false;
    }
    const std::span<std::uint8_t> room(rte_pktmbuf_mtod(mbuf, std::uint8_t*),
                                       rte_pktmbuf_tailroom(mbuf));
    const roce::FrameLayout layout = roce::build_frame_headers(h, length, room);
    if (PRDMA_UNLIKELY(!layout.ok())) {
        rte_pktmbuf_free(mbuf);
        return false;
    }
    if (length > 0) {
        std::uint8_t* out = room.data() + layout.payload_offset;
        if (payload.wqe != nullptr) {
            gather(*payload.wqe, offset, length, out);
        } else {
            read_region(*payload.region, payload.addr + offset, length, out);
        }
    }
    roce::finalize_frame(room.first(layout.wire_length), layout);
    if (h.ip_version == roce::IpVersion::ipv6) {
        roce::set_ipv6_udp_checksum(room.first(layout.wire_length), layout);
    }
    mbuf->data_len = static_cast<std::uint16_t>(layout.wire_length);
    mbuf->pkt_len = layout.wire_length;
    tx.mbufs[tx.count++] = mbuf;
    ++dev.counters_of(qp).tx_packets;
    ++qp.counters.tx_packets;
    qp.counters.tx_bytes += length;
    return true;
}

void complete_send(SwroceQp& qp, const SendWqe& wqe, rdma::WcStatus status) noexcept {
    const bool signaled = qp.signal_all || (wqe.wr.flags & rdma::send_signaled) != 0;
    if (status == rdma::WcStatus::success && !signaled) {
        return; // silent success
    }
    rdma::WorkCompletion wc;
    wc.wr_id = wqe.wr.wr_id;
    wc.status = status;
    wc.opcode = wc_opcode_of(wqe.wr.opcode);
    wc.byte_len = wqe.length;
    wc.qpn = qp.qpn;
    qp.send_cq->push(wc);
}

// The QP goes to ERR with `status` for the head WQE; everything queued is flushed (IBTA 10.3.1).
void fail_qp(SwroceQp& qp, rdma::WcStatus status, std::uint32_t vendor_error = 0) noexcept {
    if (!qp.send_queue.empty()) {
        rdma::WorkCompletion wc;
        wc.wr_id = qp.send_queue.front().wr.wr_id;
        wc.status = status;
        wc.opcode = wc_opcode_of(qp.send_queue.front().wr.opcode);
        wc.qpn = qp.qpn;
        wc.vendor_error = vendor_error;
        qp.send_cq->push(wc);
        qp.send_queue.pop();
    }
    qp.state = rdma::QpState::err;
    qp.attr.state = rdma::QpState::err;
    flush_queues(qp);
    report_error_state(qp, true);
}

// A responder error (class A-C): no WR of ours failed, so everything is flushed.
void fail_responder(SwroceQp& qp) noexcept {
    if (qp.state == rdma::QpState::err) {
        return;
    }
    qp.state = rdma::QpState::err;
    qp.attr.state = rdma::QpState::err;
    flush_queues(qp);
    report_error_state(qp, true);
}

// Checks every SGE's lkey once, when the WQE is first transmitted.
bool check_local_keys(SwroceQp& qp, SendWqe& wqe) noexcept {
    if (wqe.checked || (wqe.wr.flags & rdma::send_inline) != 0) {
        wqe.checked = true;
        return true;
    }
    const mem::MemoryRegistry& registry = *rdma::driver::device(qp.device->id)->registry;
    // READ responses and atomic results are written into the SGEs; everything else is read.
    const mem::AccessFlags access =
        wqe.is_read_or_atomic() ? mem::access_local_write : mem::access_local_read;
    for (std::uint32_t i = 0; i < wqe.wr.num_sge; ++i) {
        const rdma::Sge& sge = wqe.sges[i];
        const mem::KeyEntry* entry = nullptr;
        const mem::KeyCheck check =
            registry.check({sge.lkey, qp.pd, qp.qpn, access, sge.addr, sge.length}, &entry);
        if (check != mem::KeyCheck::ok) {
            fail_qp(qp, rdma::WcStatus::local_protection_error, static_cast<std::uint32_t>(check));
            return false;
        }
        wqe.entries[i] = entry;
    }
    wqe.checked = true;
    return true;
}

void arm_timer(SwroceQp& qp, std::uint64_t now) noexcept {
    const std::uint64_t timeout = transport_timeout_cycles(qp);
    qp.retransmit_deadline = timeout == 0 ? 0 : now + timeout;
}

// FAST_REG (seed 001) and LOCAL_INV execute when the send queue reaches them, so later WRs see
// their effect; they complete in order behind the remote WRs before them.
void execute_local(SwroceQp& qp, SendWqe& wqe) noexcept {
    mem::MemoryRegistry& registry = *rdma::driver::device(qp.device->id)->registry;
    if (wqe.wr.opcode == rdma::WrOpcode::local_inv) {
        const mem::InvalidateResult result = registry.invalidate(wqe.wr.local_inv.key, qp.pd);
        if (result != mem::InvalidateResult::ok) {
            wqe.local_status = rdma::WcStatus::local_protection_error;
        }
        return;
    }
    const rdma::FastRegFields& reg = wqe.wr.fast_reg;
    if (reg.region == nullptr) {
        wqe.local_status = rdma::WcStatus::local_qp_operation_error;
        return;
    }
    const mem::FastRegRequest request{
        reg.pages, reg.page_count, reg.page_shift, reg.first_byte_offset, reg.length, reg.base_va};
    switch (registry.fast_register(*reg.region, qp.pd, reg.key, request, reg.access)) {
    case mem::FastRegResult::ok:
        return;
    case mem::FastRegResult::access_violation:
    case mem::FastRegResult::wrong_pd:
        wqe.local_status = rdma::WcStatus::local_protection_error;
        return;
    default:
        wqe.local_status = rdma::WcStatus::local_qp_operation_error;
        return;
    }
}

// Completes local WRs that reached the head (nothing before them is outstanding).
void retire_local_heads(SwroceQp& qp) noexcept {
    while (!qp.send_queue.empty() && qp.send_offset > 0 && qp.send_queue.front().is_local()) {
        SendWqe& wqe = qp.send_queue.front();
        if (wqe.local_status != rdma::WcStatus::success) {
            fail_qp(qp, wqe.local_status);
            return;
        }
        complete_send(qp, wqe, rdma::WcStatus::success);
        qp.send_queue.pop();
        --qp.send_offset;
    }
}

// Transmits what the send queue holds beyond what is already on the wire.
void run_requester(SwroceQp& qp, TxBatch& tx, std::uint64_t now) noexcept {
    if (qp.state != rdma::QpState::rts || !qp.dest_mac || qp.rnr_resume > now || qp.send_stopped) {
        return;
    }
    const std::uint32_t mtu = rdma::mtu_bytes(qp.attr.path_mtu);
    std::uint32_t outstanding_reads = 0; // READ/atomic WQEs on the wire, unanswered
    // Only a QP that ever carried a READ or atomic needs the count (a scan of what is in flight).
    for (std::uint32_t i = 0; qp.reads_posted && i < qp.send_offset; ++i) {
        outstanding_reads += qp.send_queue.at(i).is_read_or_atomic() ? 1U : 0U;
    }
    while (qp.send_offset < qp.send_queue.size() && !tx.full()) {
        SendWqe& wqe = qp.send_queue.at(qp.send_offset);
        if (wqe.is_local()) {
            if (outstanding_reads > 0 && (wqe.wr.flags & rdma::send_read_fence) != 0) {
                return; // NDK read fence: earlier READs finish first
            }
            execute_local(qp, wqe);
            wqe.assigned = true;
            wqe.first_psn = qp.send_psn;
            wqe.psn_span = 0;
            ++qp.send_offset;
            if (wqe.local_status != rdma::WcStatus::success) {
                qp.send_stopped = true;
                break;
            }
            continue;
        }
        if (!check_local_keys(qp, wqe)) {
            return;
        }
        // A fence (or NDK's read fence) waits for earlier READs/atomics; max_rd_atomic bounds
        // how many of them may be outstanding.
        if (outstanding_reads > 0 &&
            (wqe.wr.flags & (rdma::send_fence | rdma::send_read_fence)) != 0) {
            return;
        }
        if (wqe.is_read_or_atomic() &&
            outstanding_reads >= std::max<std::uint32_t>(qp.attr.max_rd_atomic, 1)) {
            return;
        }
        const Segmenter segments(wqe.wr.opcode, wqe.length, mtu);
        if (!wqe.assigned) {
            wqe.first_psn = qp.send_psn;
            wqe.psn_span = segments.psn_span();
            qp.send_psn = roce::psn_add(qp.send_psn, wqe.psn_span);
            wqe.assigned = true;
        }
        while (wqe.next_packet < segments.packet_count() && !tx.full()) {
            const PacketPlan plan = segments.packet(wqe.next_packet);
            // A READ asked again asks only for what has not arrived (IBTA 9.4.4): its PSN, VA and
            // length move past the responses already placed.
            const bool read = wqe.wr.opcode == rdma::WrOpcode::rdma_read;
            const std::uint32_t done = read ? wqe.responses * mtu : 0;
            const std::uint32_t psn =
                roce::psn_add(wqe.first_psn, read ? wqe.responses : wqe.next_packet);
            roce::FrameHeaders h = headers_for(qp, plan.opcode, psn);
            const auto& info = roce::opcode_info(plan.opcode);
            h.bth.ack_req = plan.last;
            h.bth.solicited = plan.last && (wqe.wr.flags & rdma::send_solicited) != 0;
            if (info.has(roce::ExtHeader::reth)) {
                h.reth = {wqe.wr.rdma.remote_addr + done, wqe.wr.rdma.rkey, wqe.length - done};
            }
            if (info.has(roce::ExtHeader::immdt)) {
                h.immediate = wqe.wr.imm_or_invalidate;
            }
            if (info.has(roce::ExtHeader::ieth)) {
                h.invalidate_rkey = wqe.wr.imm_or_invalidate;
            }
            if (info.has(roce::ExtHeader::atomic_eth)) {
                h.atomic_eth = {wqe.wr.atomic.remote_addr, wqe.wr.atomic.rkey, wqe.wr.atomic.swap,
                                wqe.wr.atomic.compare_add};
                if (wqe.wr.opcode == rdma::WrOpcode::atomic_fetch_add) {
                    h.atomic_eth.swap_add = wqe.wr.atomic.compare_add; // the addend
                    h.atomic_eth.compare = 0;
                }
            }
            if (plan.length > 0 && !wqe.is_read_or_atomic() && !wqe_keys_valid(wqe)) {
                // The local region went away while the WQE was queued: as a NIC would, fail it.
                fail_qp(qp, rdma::WcStatus::local_protection_error);
                return;
            }
            if (!emit(qp, tx, h, Payload{&wqe, nullptr, 0, plan.offset, plan.length})) {
                return;
            }
            ++wqe.next_packet;
            if (qp.retransmit_deadline == 0) {
                arm_timer(qp, now);
            }
        }
        if (wqe.next_packet < segments.packet_count()) {
            return; // batch full
        }
        outstanding_reads += wqe.is_read_or_atomic() ? 1U : 0U;
        ++qp.send_offset;
    }
    retire_local_heads(qp);
}

// Go back N: retransmit from the first unacknowledged packet of the head WQE.
void rewind(SwroceQp& qp, std::uint32_t from_psn) noexcept {
    for (std::uint32_t i = 0; i < qp.send_queue.size(); ++i) {
        SendWqe& wqe = qp.send_queue.at(i);
        if (!wqe.assigned) {
            break;
        }
        const std::int32_t into = roce::psn_diff(from_psn, wqe.first_psn);
        // A READ keeps the responses it has; it is asked again for the rest.
        wqe.next_packet =
            i == 0 && into > 0 && !wqe.is_read_or_atomic() ? static_cast<std::uint32_t>(into) : 0;
    }
    qp.send_offset = 0;
    ++qp.device->counters_of(qp).retransmissions;
    ++qp.counters.retransmissions;
}

void send_ack(SwroceQp& qp, TxBatch& tx) noexcept {
    roce::FrameHeaders h = headers_for(qp, roce::Opcode::rc_acknowledge, qp.ack_psn);
    h.aeth = {qp.ack_syndrome, qp.msn & roce::psn_mask};
    if (emit(qp, tx, h, Payload{})) {
        qp.ack_pending = false;
    }
}

void queue_ack(SwroceQp& qp, std::uint32_t psn, std::uint8_t syndrome) noexcept {
    // An error NAK waiting to go out is never displaced by a later ACK or RNR NAK: the requester
    // must learn which WR failed.
    if (qp.ack_pending && roce::aeth_type(qp.ack_syndrome) == roce::AckType::nak) {
        return;
    }
    qp.ack_pending = true;
    qp.ack_psn = psn;
    qp.ack_syndrome = syndrome;
}

void queue_nak(SwroceQp& qp, roce::NakCode code, std::uint32_t psn) noexcept {
    queue_ack(qp, psn, roce::nak_syndrome(code));
    qp.error_after_nak = qp.error_after_nak || code == roce::NakCode::invalid_request ||
                         code == roce::NakCode::remote_access_error ||
                         code == roce::NakCode::remote_operational_error;
    ++qp.device->counters_of(qp).naks_sent;
    ++qp.counters.naks_sent;
}

// ---- responder ------------------------------------------------------------------------------

void complete_receive(SwroceQp& qp, const roce::ParsedFrame& frame, std::uint32_t byte_len,
                      rdma::WcOpcode opcode) noexcept {
    rdma::WorkCompletion wc;
    wc.wr_id = qp.receive_queue.front().wr_id;
    wc.status = rdma::WcStatus::success;
    wc.opcode = opcode;
    wc.byte_len = byte_len;
    wc.qpn = qp.qpn;
    wc.src_qpn = qp.attr.dest_qpn;
    if (frame.has(roce::ExtHeader::immdt)) {
        wc.flags |= rdma::wc_with_imm;
        wc.imm_or_invalidated = frame.immediate;
    }
    if (frame.has(roce::ExtHeader::ieth)) {
        wc.flags |= rdma::wc_with_inv;
        wc.imm_or_invalidated = frame.invalidate_rkey;
    }
    qp.receive_queue.pop();
    qp.recv_cq->push(wc);
}

// Scatters a SEND payload into the head receive WQE; false on a local length/protection error.
bool scatter(SwroceQp& qp, std::span<const std::uint8_t> payload) noexcept {
    const RecvWqe& wqe = qp.receive_queue.front();
    const rdma::Sge* sges = wqe.sges.data();
    const mem::MemoryRegistry& registry = *rdma::driver::device(qp.device->id)->registry;
    std::uint32_t skip = qp.recv_offset;
    std::size_t done = 0;
    for (std::uint32_t i = 0; i < wqe.num_sge && done < payload.size(); ++i) {
        const rdma::Sge& sge = sges[i];
        if (skip >= sge.length) {
            skip -= sge.length;
            continue;
        }
        const auto take = static_cast<std::uint32_t>(
            std::min<std::size_t>(payload.size() - done, sge.length - skip));
        const mem::KeyEntry* entry = nullptr;
        if (registry.check(
                {sge.lkey, qp.pd, qp.qpn, mem::access_local_write, sge.addr + skip, take},
                &entry) != mem::KeyCheck::ok) {
            return false;
        }
        place(*entry, sge.addr + skip, payload.data() + done, take);
        done += take;
        skip = 0;
    }
    if (done < payload.size()) {
        return false; // the message is longer than the receive buffers
    }
    qp.recv_offset += static_cast<std::uint32_t>(payload.size());
    return true;
}

bool is_read_or_atomic_request(roce::Operation op) noexcept {
    return op == roce::Operation::rdma_read_request || op == roce::Operation::compare_swap ||
           op == roce::Operation::fetch_add;
}

// Executes a READ or an atomic once, keeping what a duplicate needs in a responder resource.
void execute_read_atomic(SwroceQp& qp, const roce::ParsedFrame& frame) noexcept {
    const std::uint32_t psn = frame.bth.psn;
    const roce::Operation op = frame.info->operation;
    const mem::MemoryRegistry& registry = *rdma::driver::device(qp.device->id)->registry;
    ResponderResource resource;
    resource.valid = true;
    resource.psn = psn;
    resource.sending = true;
    if (op == roce::Operation::rdma_read_request) {
        const std::uint32_t length = frame.reth.dma_length;
        if (length > 0) {
            const mem::KeyCheck check = registry.check(
                {frame.reth.rkey, qp.pd, qp.qpn, mem::access_remote_read, frame.reth.va, length},
                &resource.entry);
            if (check != mem::KeyCheck::ok || (qp.attr.access & mem::access_remote_read) == 0) {
                queue_nak(qp, roce::NakCode::remote_access_error, psn);
                qp.nak_sent = true;
                return;
            }
            resource.key = frame.reth.rkey;
        }
        const std::uint32_t mtu = rdma::mtu_bytes(qp.attr.path_mtu);
        resource.va = frame.reth.va;
        resource.length = length;
        resource.span = length == 0 ? 1U : (length + mtu - 1) / mtu;
    } else {
        const roce::AtomicEth& atomic = frame.atomic_eth;
        if ((atomic.va & 7U) != 0) {
            queue_nak(qp, roce::NakCode::invalid_request, psn); // atomics are 8-byte aligned
            qp.nak_sent = true;
            return;
        }
        const mem::KeyEntry* entry = nullptr;
        const mem::KeyCheck check = registry.check(
            {atomic.rkey, qp.pd, qp.qpn, mem::access_remote_atomic, atomic.va, 8}, &entry);
        if (check != mem::KeyCheck::ok || (qp.attr.access & mem::access_remote_atomic) == 0) {
            queue_nak(qp, roce::NakCode::remote_access_error, psn);
            qp.nak_sent = true;
            return;
        }
        // One lcore owns the QP: the read-modify-write needs no atomic instruction against other
        // prdma lcores; the CPU sees an aligned 64-bit access.
        auto* target = reinterpret_cast<std::uint64_t*>(mem::KeyTable::host(*entry, atomic.va));
        resource.atomic = true;
        resource.span = 1;
        resource.original = *target;
        if (op == roce::Operation::compare_swap) {
            if (resource.original == atomic.compare) {
                *target = atomic.swap_add;
            }
        } else {
            *target = resource.original + atomic.swap_add;
        }
    }
    qp.resources[qp.next_resource] = resource;
    qp.responses_pending = true;
    qp.next_resource = (qp.next_resource + 1) % max_responder_resources;
    qp.nak_sent = false;
    qp.expected_psn = roce::psn_add(psn, resource.span);
    ++qp.msn;
}

// A duplicate READ/atomic: answered again from its resource, never executed twice. A READ asked
// again from a PSN inside its range is answered from that response on.
void replay(SwroceQp& qp, std::uint32_t psn) noexcept {
    for (ResponderResource& resource : qp.resources) {
        const std::int32_t into = roce::psn_diff(psn, resource.psn);
        if (resource.valid && into >= 0 && static_cast<std::uint32_t>(into) < resource.span) {
            resource.next_packet = static_cast<std::uint32_t>(into);
            resource.sending = true;
            qp.responses_pending = true;
            return;
        }
    }
}

void respond(SwroceQp& qp, const roce::ParsedFrame& frame) noexcept {
    const std::uint32_t psn = frame.bth.psn;
    const std::int32_t delta = roce::psn_diff(psn, qp.expected_psn);
    if (delta < 0) {
        // A duplicate: the ACK or response was lost or late.
        ++qp.device->counters_of(qp).duplicates;
        if (is_read_or_atomic_request(frame.info->operation)) {
            replay(qp, psn);
        } else {
            queue_ack(qp, roce::psn_sub(qp.expected_psn, 1), roce::ack_syndrome());
        }
        return;
    }
    if (delta > 0) {
        if (!qp.nak_sent) {
            qp.nak_sent = true;
            queue_nak(qp, roce::NakCode::psn_sequence_error, qp.expected_psn);
        }
        return;
    }
    const roce::OpcodeInfo& info = *frame.info;
    const bool first =
        info.position == roce::Position::first || info.position == roce::Position::only;
    const bool last =
        info.position == roce::Position::last || info.position == roce::Position::only;
    const mem::MemoryRegistry& registry = *rdma::driver::device(qp.device->id)->registry;

    if (info.operation == roce::Operation::send) {
        if (first) {
            if (qp.receive_queue.empty()) {
                queue_ack(qp, psn, roce::rnr_nak_syndrome(qp.attr.min_rnr_timer));
                ++qp.device->counters_of(qp).naks_sent;
                ++qp.counters.naks_sent;
                return; // not consumed: the requester resends after the RNR timer
            }
            qp.recv_offset = 0;
        }
        if (!scatter(qp, frame.payload)) {
            rdma::WorkCompletion wc;
            wc.wr_id = qp.receive_queue.front().wr_id;
            wc.status = rdma::WcStatus::local_length_error;
            wc.opcode = rdma::WcOpcode::recv;
            wc.qpn = qp.qpn;
            qp.receive_queue.pop();
            qp.recv_cq->push(wc);
            queue_nak(qp, roce::NakCode::invalid_request, psn);
            return;
        }
        if (last) {
            if (frame.has(roce::ExtHeader::ieth) &&
                rdma::driver::device(qp.device->id)
                        ->registry->invalidate(frame.invalidate_rkey, qp.pd) !=
                    mem::InvalidateResult::ok) {
                // A key that is not ours to invalidate (wrong PD, not a fast-register region,
                // stale): the receive completes in error and the requester gets a NAK, as rxe
                // does (IBTA: remote invalid request).
                rdma::WorkCompletion wc;
                wc.wr_id = qp.receive_queue.front().wr_id;
                wc.status = rdma::WcStatus::remote_invalid_request_error;
                wc.opcode = rdma::WcOpcode::recv;
                wc.byte_len = qp.recv_offset;
                wc.qpn = qp.qpn;
                wc.src_qpn = qp.attr.dest_qpn;
                qp.receive_queue.pop();
                qp.recv_cq->push(wc);
                queue_nak(qp, roce::NakCode::invalid_request, psn);
                qp.nak_sent = true;
                return;
            }
            complete_receive(qp, frame, qp.recv_offset, rdma::WcOpcode::recv);
            ++qp.msn;
        }
    } else if (info.operation == roce::Operation::rdma_write) {
        if (first) {
            const mem::KeyEntry* entry = nullptr;
            const mem::KeyCheck check =
                registry.check({frame.reth.rkey, qp.pd, qp.qpn, mem::access_remote_write,
                                frame.reth.va, frame.reth.dma_length},
                               &entry);
            if (check != mem::KeyCheck::ok || (qp.attr.access & mem::access_remote_write) == 0) {
                // The requester fails this WR and flushes the rest; what follows it here is
                // neither executed nor NAKed again (ePSN stays, nak_sent suppresses NAKs).
                queue_nak(qp, roce::NakCode::remote_access_error, psn);
                qp.nak_sent = true;
                return;
            }
            qp.write_entry = entry;
            qp.write_key = frame.reth.rkey;
            qp.write_va = frame.reth.va;
            qp.write_length = frame.reth.dma_length;
            qp.write_dma_length = frame.reth.dma_length;
        }
        if (qp.write_entry == nullptr || frame.payload.size() > qp.write_length) {
            queue_nak(qp, roce::NakCode::invalid_request, psn);
            return;
        }
        if (PRDMA_UNLIKELY(!still_valid(qp.write_entry, qp.write_key))) {
            // The region went away (or was invalidated) in the middle of the WRITE.
            qp.write_entry = nullptr;
            queue_nak(qp, roce::NakCode::remote_access_error, psn);
            qp.nak_sent = true;
            return;
        }
        // WRITE_WITH_IMM consumes a receive with its last packet. Without one, NAK before placing
        // anything: the resent packet must find the WRITE exactly where this one left it.
        if (last && frame.has(roce::ExtHeader::immdt) && qp.receive_queue.empty()) {
            queue_ack(qp, psn, roce::rnr_nak_syndrome(qp.attr.min_rnr_timer));
            ++qp.device->counters_of(qp).naks_sent;
            ++qp.counters.naks_sent;
            return;
        }
        place(*qp.write_entry, qp.write_va, frame.payload.data(),
              static_cast<std::uint32_t>(frame.payload.size()));
        qp.write_va += frame.payload.size();
        qp.write_length -= static_cast<std::uint32_t>(frame.payload.size());
        if (last) {
            if (frame.has(roce::ExtHeader::immdt)) {
                // byte_len is the whole WRITE's length (IBTA), not this packet's payload.
                complete_receive(qp, frame, qp.write_dma_length,
                                 rdma::WcOpcode::recv_rdma_with_imm);
            }
            qp.write_entry = nullptr;
            ++qp.msn;
        }
    } else if (is_read_or_atomic_request(info.operation)) {
        execute_read_atomic(qp, frame); // answered by responses, not by an ACK
        return;
    } else {
        queue_nak(qp, roce::NakCode::invalid_request, psn);
        return;
    }
    qp.nak_sent = false;
    qp.expected_psn = roce::psn_next(psn);
    if (frame.bth.ack_req) {
        queue_ack(qp, psn, roce::ack_syndrome());
    }
}

// ---- completer ------------------------------------------------------------------------------

// Completes, in order, every transmitted WQE whose last PSN is at or before `psn`.
void acknowledge(SwroceQp& qp, std::uint32_t psn, std::uint64_t now) noexcept {
    bool progress = false;
    while (!qp.send_queue.empty() && qp.send_offset > 0) {
        SendWqe& wqe = qp.send_queue.front();
        const std::uint32_t last_psn = roce::psn_add(wqe.first_psn, wqe.psn_span - 1);
        // READs and atomics complete with their responses, never with an ACK.
        if (roce::psn_after(last_psn, psn) || wqe.is_read_or_atomic()) {
            break;
        }
        complete_send(qp, wqe, rdma::WcStatus::success);
        qp.send_queue.pop();
        --qp.send_offset;
        progress = true;
    }
    if (progress) {
        qp.retries_left = qp.attr.retry_cnt;
        qp.rnr_retries_left = qp.attr.rnr_retry;
    }
    retire_local_heads(qp);
    if (qp.send_offset == 0 && (qp.send_queue.empty() || qp.send_queue.front().next_packet == 0)) {
        qp.retransmit_deadline = 0;
    } else if (progress) {
        arm_timer(qp, now);
    }
}

// Writes `data` into a WQE's SGEs at `offset` (READ responses, atomic results); the SGE lkeys
// were checked for local write when the WQE was sent.
void place_in_wqe(const SendWqe& wqe, std::uint32_t offset, const std::uint8_t* data,
                  std::uint32_t length) noexcept {
    for (std::uint32_t i = 0; i < wqe.wr.num_sge && length > 0; ++i) {
        const rdma::Sge& sge = wqe.sges[i];
        if (offset >= sge.length) {
            offset -= sge.length;
            continue;
        }
        const std::uint32_t take = std::min(length, sge.length - offset);
        place(*wqe.entries[i], sge.addr + offset, data, take);
        data += take;
        length -= take;
        offset = 0;
    }
}

// A READ response or an atomic ACK for the oldest READ/atomic WQE. It implicitly acknowledges
// everything before the request (IBTA 9.7.5.1.3).
void complete_response(SwroceQp& qp, const roce::ParsedFrame& frame, std::uint64_t now) noexcept {
    const std::uint32_t psn = frame.bth.psn;
    std::uint32_t index = 0;
    while (index < qp.send_offset && !qp.send_queue.at(index).is_read_or_atomic()) {
        ++index;
    }
    if (index == qp.send_offset) {
        ++qp.device->counters_of(qp).duplicates; // nothing outstanding answers to it
        return;
    }
    SendWqe& target = qp.send_queue.at(index);
    const std::uint32_t expected = roce::psn_add(target.first_psn, target.responses);
    if (psn != expected) {
        ++qp.device->counters_of(qp).duplicates; // a replayed or early response: go-back-N resends
        return;
    }
    acknowledge(qp, roce::psn_sub(target.first_psn, 1), now);
    if (qp.send_queue.empty() || &qp.send_queue.front() != &target) {
        return;
    }
    if (frame.opcode() == roce::Opcode::rc_atomic_acknowledge) {
        if (!target.is_read_or_atomic() || target.wr.opcode == rdma::WrOpcode::rdma_read) {
            fail_qp(qp, rdma::WcStatus::bad_response_error);
            return;
        }
        const std::uint64_t original = frame.atomic_ack_eth.original_data;
        std::uint8_t bytes[8];
        std::memcpy(bytes, &original, sizeof(bytes)); // host order in the requester's buffer
        if (!wqe_keys_valid(target)) {
            fail_qp(qp, rdma::WcStatus::local_protection_error);
            return;
        }
        place_in_wqe(target, 0, bytes, sizeof(bytes));
    } else {
        if (target.wr.opcode != rdma::WrOpcode::rdma_read) {
            fail_qp(qp, rdma::WcStatus::bad_response_error);
            return;
        }
        const std::uint32_t offset = target.responses * rdma::mtu_bytes(qp.attr.path_mtu);
        if (offset + frame.payload.size() > target.length) {
            fail_qp(qp, rdma::WcStatus::bad_response_error);
            return;
        }
        if (!wqe_keys_valid(target)) {
            fail_qp(qp, rdma::WcStatus::local_protection_error);
            return;
        }
        place_in_wqe(target, offset, frame.payload.data(),
                     static_cast<std::uint32_t>(frame.payload.size()));
        ++target.responses;
        qp.retries_left = qp.attr.retry_cnt; // forward progress
        if (target.responses < target.psn_span) {
            arm_timer(qp, now);
            return;
        }
    }
    complete_send(qp, target, rdma::WcStatus::success);
    qp.send_queue.pop();
    --qp.send_offset;
    retire_local_heads(qp);
    qp.retries_left = qp.attr.retry_cnt;
    if (qp.send_offset == 0) {
        qp.retransmit_deadline = 0;
    } else {
        arm_timer(qp, now);
    }
}

void complete(SwroceQp& qp, const roce::ParsedFrame& frame, std::uint64_t now) noexcept {
    const std::uint32_t psn = frame.bth.psn;
    const bool response = frame.opcode() != roce::Opcode::rc_acknowledge;
    // A READ response's AETH (first/last/only) or an atomic ACK's may be a NAK; middles have none.
    const bool has_aeth = frame.has(roce::ExtHeader::aeth);
    if (response &&
        (!has_aeth || roce::classify_aeth(frame.aeth.syndrome) == roce::AethClass::ack)) {
        if (qp.retransmit_deadline != 0) {
            arm_timer(qp, now);
        }
        complete_response(qp, frame, now);
        return;
    }
    // Any response shows the peer is alive: the transport timer starts over (IBTA 9.7.6.1.3).
    if (qp.retransmit_deadline != 0) {
        arm_timer(qp, now);
    }
    switch (roce::classify_aeth(frame.aeth.syndrome)) {
    case roce::AethClass::ack:
        acknowledge(qp, psn, now);
        return;
    case roce::AethClass::rnr_nak:
        ++qp.device->counters_of(qp).naks_received;
        acknowledge(qp, roce::psn_sub(psn, 1), now);
        if (qp.attr.rnr_retry != 7 && qp.rnr_retries_left-- <= 0) {
            fail_qp(qp, rdma::WcStatus::rnr_retry_exceeded);
            return;
        }
        qp.rnr_resume = now + rnr_timer_cycles(*qp.device, roce::aeth_value(frame.aeth.syndrome));
        rewind(qp, psn);
        // No transport timeout while the responder asked us to wait; resending re-arms it.
        qp.retransmit_deadline = 0;
        return;
    case roce::AethClass::nak_psn_sequence_error:
        ++qp.device->counters_of(qp).naks_received;
        acknowledge(qp, roce::psn_sub(psn, 1), now);
        rewind(qp, psn);
        return;
    case roce::AethClass::nak_remote_access_error:
        ++qp.device->counters_of(qp).naks_received;
        acknowledge(qp, roce::psn_sub(psn, 1), now);
        fail_qp(qp, rdma::WcStatus::remote_access_error);
        return;
    case roce::AethClass::nak_remote_operational_error:
        ++qp.device->counters_of(qp).naks_received;
        acknowledge(qp, roce::psn_sub(psn, 1), now);
        fail_qp(qp, rdma::WcStatus::remote_operation_error);
        return;
    default:
        ++qp.device->counters_of(qp).naks_received;
        acknowledge(qp, roce::psn_sub(psn, 1), now);
        fail_qp(qp, rdma::WcStatus::remote_invalid_request_error);
        return;
    }
}

void check_timer(SwroceQp& qp, std::uint64_t now) noexcept {
    if (qp.retransmit_deadline == 0 || now < qp.retransmit_deadline) {
        return;
    }
    if (qp.retries_left-- <= 0) {
        fail_qp(qp, rdma::WcStatus::retry_exceeded);
        return;
    }
    rewind(qp, qp.send_queue.empty() ? qp.send_psn : qp.send_queue.front().first_psn);
    arm_timer(qp, now);
}

// One received frame on `group`. Returns true when the frame was handed over to another queue
// group (its QP lives there) and must not be freed here.
bool handle_frame(SwroceDevice& dev, unsigned group, rte_mbuf* mbuf, std::uint64_t now,
                  bool handed_over) noexcept {
    SwroceCounters& counters = dev.groups[group]->counters;
    const std::span<const std::uint8_t> bytes(rte_pktmbuf_mtod(mbuf, const std::uint8_t*),
                                              rte_pktmbuf_data_len(mbuf));
    if (!handed_over) {
        ++counters.rx_packets;
        // ARP belongs to group 0 (the resolver is one per device); elsewhere it is handed over.
        if (group == 0 && handle_arp_frame(dev, bytes, now, counters)) {
            return false;
        }
    }
    roce::ParsedFrame frame;
    // A handed-over frame was checked by the group that received it.
    roce::ParseOptions options;
    options.verify_icrc = !handed_over;
    options.verify_ipv4_checksum = !handed_over;
    if (roce::parse_roce_frame(bytes, frame, options) != roce::ParseError::ok) {
        if (frame.error == roce::ParseError::not_ip && group != 0 &&
            dev.groups[0]->handover != nullptr &&
            rte_ring_enqueue(dev.groups[0]->handover, mbuf) == 0) {
            return true; // possibly ARP: group 0 decides
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
    if (qp == nullptr || qp->destroying || qp->state == rdma::QpState::reset ||
        qp->state == rdma::QpState::init) {
        ++counters.rx_unknown_qp;
        return false;
    }
    ++qp->counters.rx_packets;
    qp->counters.rx_bytes += frame.payload.size();
    const std::uint64_t naks_before = counters.naks_received;
    const std::uint64_t duplicates_before = counters.duplicates;
    const roce::Operation op = frame.info->operation;
    if (op == roce::Operation::acknowledge || op == roce::Operation::atomic_acknowledge ||
        op == roce::Operation::rdma_read_response) {
        complete(*qp, frame, now);
    } else if (qp->state != rdma::QpState::err) {
        respond(*qp, frame);
    }
    qp->counters.naks_received += counters.naks_received - naks_before;
    qp->counters.duplicates += counters.duplicates - duplicates_before;
    return false;
}

// Transmits pending READ responses and atomic ACKs, oldest resource first.
void send_responses(SwroceQp& qp, TxBatch& tx) noexcept {
    const std::uint32_t mtu = rdma::mtu_bytes(qp.attr.path_mtu);
    for (std::uint32_t n = 0; n < max_responder_resources; ++n) {
        ResponderResource& res = qp.resources[(qp.next_resource + n) % max_responder_resources];
        if (!res.valid || !res.sending) {
            continue;
        }
        if (res.atomic) {
            if (tx.full()) {
                return;
            }
            roce::FrameHeaders h = headers_for(qp, roce::Opcode::rc_atomic_acknowledge, res.psn);
            h.aeth = {roce::ack_syndrome(), qp.msn & roce::psn_mask};
            h.atomic_ack_eth = {res.original};
            if (!emit(qp, tx, h, Payload{})) {
                return;
            }
            res.sending = false;
            continue;
        }
        if (res.length > 0 && PRDMA_UNLIKELY(!still_valid(res.entry, res.key))) {
            // The region went away mid-READ: stop answering; the requester's retries run out.
            res.valid = false;
            res.sending = false;
            continue;
        }
        while (res.next_packet < res.span) {
            if (tx.full()) {
                return;
            }
            const std::uint32_t i = res.next_packet;
            const bool first = i == 0;
            const bool last = i + 1 == res.span;
            const roce::Opcode opcode = first && last ? roce::Opcode::rc_rdma_read_response_only
                                        : first       ? roce::Opcode::rc_rdma_read_response_first
                                        : last        ? roce::Opcode::rc_rdma_read_response_last
                                                      : roce::Opcode::rc_rdma_read_response_middle;
            roce::FrameHeaders h = headers_for(qp, opcode, roce::psn_add(res.psn, i));
            h.aeth = {roce::ack_syndrome(), qp.msn & roce::psn_mask};
            const std::uint32_t offset = i * mtu;
            const std::uint32_t length = std::min(mtu, res.length - std::min(res.length, offset));
            if (!emit(qp, tx, h, Payload{nullptr, res.entry, res.va, offset, length})) {
                return;
            }
            ++res.next_packet;
        }
        res.sending = false;
    }
    qp.responses_pending = false; // every resource sent what it had
}

// Sends what the backlog holds; true when it is empty.
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

// Sends a batch; what the port refuses waits in the group's backlog (false: stop making frames
// until it is out). Only frames beyond the backlog's room are lost, counted, and left to the
// retransmission timer.
bool transmit(SwroceDevice& dev, unsigned group, TxBatch& tx) noexcept {
    QueueGroupState& state = *dev.groups[group];
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
        if (state.tx_backlog_count < state.tx_backlog.size()) {
            state.tx_backlog[state.tx_backlog_count++] = tx.mbufs[i];
            ++state.counters.tx_deferred;
        } else {
            rte_pktmbuf_free(tx.mbufs[i]);
            ++state.counters.tx_dropped;
        }
    }
    tx.count = 0;
    return state.tx_backlog_count == 0;
}

// The drop= devarg: loses received frames with that probability, from a generator seeded by
// seed=, so a loss run repeats exactly.
bool drop_injected(SwroceDevice& dev, SwroceCounters& counters) noexcept {
    if (PRDMA_LIKELY(dev.args.drop <= 0.0)) {
        return false;
    }
    std::uint64_t x = dev.drop_state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    dev.drop_state = x;
    const double sample = static_cast<double>(x >> 11) * 0x1.0p-53;
    if (sample < dev.args.drop) {
        ++counters.rx_dropped_injected;
        return true;
    }
    return false;
}

} // namespace

void progress_group(SwroceDevice& dev, unsigned group) noexcept {
    // Control requests first (a QP created for this group takes part in this very burst; one being
    // destroyed is gone before the scan).
    run_group_requests(dev, group);
    std::array<rte_mbuf*, burst_size> mbufs; // filled by the bursts below
    const std::uint64_t now = rte_get_tsc_cycles();
    QueueGroupState& state = *dev.groups[group];
    const std::uint16_t received = dev.port.receive_frames(group, mbufs.data(), burst_size);
    for (std::uint16_t i = 0; i < received; ++i) {
        rte_mbuf* mbuf = mbufs[i];
        if (drop_injected(dev, state.counters)) {
            rte_pktmbuf_free(mbuf);
            continue;
        }
        if (!handle_frame(dev, group, mbuf, now, false)) {
            rte_pktmbuf_free(mbuf);
        }
    }
    // Frames other groups received for our QPs (and, on group 0, possible ARP).
    const unsigned handed = rte_ring_dequeue_burst(
        state.handover, reinterpret_cast<void**>(mbufs.data()), burst_size, nullptr);
    for (unsigned i = 0; i < handed; ++i) {
        const std::span<const std::uint8_t> bytes(rte_pktmbuf_mtod(mbufs[i], const std::uint8_t*),
                                                  rte_pktmbuf_data_len(mbufs[i]));
        const bool arp = group == 0 && handle_arp_frame(dev, bytes, now, state.counters);
        // handle_frame keeps the mbuf only if it hands it on again, which a frame for one of our
        // QPs never needs.
        if (arp || !handle_frame(dev, group, mbufs[i], now, true)) {
            rte_pktmbuf_free(mbufs[i]);
        }
    }
    // Frames the port refused last time go first; while any wait, make no new ones.
    if (!flush_backlog(dev, group)) {
        return;
    }
    TxBatch tx;
    for (std::uint32_t slot = dev.first_slot(group); slot < state.qp_slot_end; ++slot) {
        SwroceQp* qp = dev.qps[slot].get();
        if (qp == nullptr || qp->queue_group != group || qp->destroying) {
            continue;
        }
        if (qp->ack_pending && qp->dest_mac) {
            if (tx.full() && !transmit(dev, group, tx)) {
                return;
            }
            send_ack(*qp, tx);
            if (!qp->ack_pending && qp->error_after_nak) {
                // The NAK is in the batch; the responder's error takes the QP to ERR, flushing
                // both queues (the requester learns of it from the NAK).
                qp->error_after_nak = false;
                fail_responder(*qp);
            }
        }
        if (qp->responses_pending && qp->dest_mac && qp->state != rdma::QpState::err) {
            send_responses(*qp, tx);
            if (tx.full()) {
                if (!transmit(dev, group, tx)) {
                    return;
                }
                send_responses(*qp, tx);
            }
        }
        if (qp->state == rdma::QpState::rts) {
            check_timer(*qp, now);
            run_requester(*qp, tx, now);
        }
        if (tx.full() && !transmit(dev, group, tx)) {
            return;
        }
    }
    (void)transmit(dev, group, tx);
}

void kick_requester(SwroceQp& qp) noexcept {
    if (!flush_backlog(*qp.device, qp.queue_group)) {
        return; // the next progress sends it, after what waits
    }
    TxBatch tx;
    run_requester(qp, tx, rte_get_tsc_cycles());
    (void)transmit(*qp.device, qp.queue_group, tx);
}

} // namespace prdma::swroce
