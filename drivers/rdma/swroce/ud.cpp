// Unreliable datagrams (IBTA 9.8, rxe's UD paths): a UD WQE is one packet to the QP its AH and
// WR name, never acknowledged, complete once it is in the batch; a UD SEND received is checked
// against the QP's Q_Key and placed behind the 40-byte GRH verbs applications expect, or dropped
// and counted. No PSN is checked, nothing is retried, no peer is connected.
#include <algorithm>
#include <array>
#include <cstring>

#include <prdma/roce/psn.hpp>

#include "engine.hpp"
#include "shared_receive_queue.hpp"

namespace prdma::swroce {

namespace {

// IBTA 10.2.5: a WR's Q_Key with the high bit set is not sent; the QP's own is, so an
// application cannot claim a controlled Q_Key.
constexpr std::uint32_t controlled_qkey_bit = 0x80000000U;
constexpr std::size_t grh_size = 40;

std::uint64_t message_length(const rdma::SendWr& wr) noexcept {
    std::uint64_t length = 0;
    for (std::uint32_t i = 0; i < wr.num_sge; ++i) {
        length += wr.sges()[i].length;
    }
    return length;
}

} // namespace

StatusCode admit_ud(const SwroceQp& qp, const rdma::SendWr& wr) noexcept {
    if (wr.opcode != rdma::WrOpcode::send && wr.opcode != rdma::WrOpcode::send_with_imm) {
        return StatusCode::invalid_parameter; // a datagram carries a SEND, nothing else
    }
    const auto* ah = static_cast<const SwroceAh*>(wr.ud.ah);
    if (PRDMA_UNLIKELY(ah == nullptr || !ah->ready.load(std::memory_order_acquire) ||
                       ah->pd != qp.pd || wr.ud.remote_qpn > roce::psn_mask)) {
        return StatusCode::invalid_parameter;
    }
    if (PRDMA_UNLIKELY(wr.num_sge > qp.caps.max_send_sge || wr.num_sge > max_send_sge ||
                       (wr.num_sge > 1 && wr.sg_list == nullptr))) {
        return StatusCode::invalid_parameter;
    }
    // One packet: the port's MTU bounds a message. Refused here, where the application hears of
    // it, rather than completed without sending anything (IBTA C10-93.1.1, what rxe does).
    if (PRDMA_UNLIKELY(message_length(wr) > qp.mtu())) {
        return StatusCode::invalid_parameter;
    }
    return StatusCode::ok;
}

void fill_ud(const rdma::SendWr& wr, SendWqe& wqe) noexcept {
    *wqe.ud_headers = static_cast<const SwroceAh*>(wr.ud.ah)->headers;
}

namespace {

roce::TransportHeaders datagram_headers(const SwroceQp& qp, const SendWqe& wqe) noexcept {
    roce::TransportHeaders h;
    const bool imm = wqe.wr.opcode == rdma::WrOpcode::send_with_imm;
    h.bth.opcode = imm ? roce::Opcode::ud_send_only_with_immediate : roce::Opcode::ud_send_only;
    h.bth.solicited = wqe.wr.flags.has(rdma::send_solicited);
    h.bth.dest_qp = wqe.wr.ud.remote_qpn;
    h.bth.psn = qp.req.send_psn;
    const std::uint32_t qkey = wqe.wr.ud.remote_qkey;
    h.deth.qkey = (qkey & controlled_qkey_bit) != 0 ? qp.attr->qkey : qkey;
    h.deth.src_qp = qp.qpn;
    h.immediate = wqe.wr.imm_or_invalidate;
    return h;
}

} // namespace

void run_ud_requester(SwroceQp& qp, TxBatch& tx) noexcept {
    if (qp.state() != rdma::QpState::rts) {
        return; // SQD starts nothing new (posts still queue)
    }
    while (!qp.send_queue.empty() && !tx.full()) {
        SendWqe& wqe = qp.send_queue.front();
        if (PRDMA_UNLIKELY(wqe.local_status != rdma::WcStatus::success ||
                           !check_send_keys(qp, wqe))) {
            // To ERR, as rxe does (IBTA would allow SQE, receives going on).
            fail_qp(qp, wqe.local_status, wqe.local_vendor_error);
            return;
        }
        if (!emit_datagram(qp, tx, wqe, datagram_headers(qp, wqe))) {
            return; // no mbuf: the next progress tries again
        }
        qp.req.send_psn = roce::psn_add(qp.req.send_psn, 1);
        complete_send(qp, wqe, rdma::WcStatus::success);
        qp.send_queue.pop();
    }
}

namespace {

// The GRH a verbs application finds ahead of the payload (IBTA 11.4.1.2; RoCE v2 as rxe and
// rdma-core have it): an IPv6 datagram's 40-byte header as it came, an IPv4 one's 20-byte header
// in the last 20 bytes behind zeros.
std::array<std::uint8_t, grh_size> grh_of(const roce::ParsedFrame& frame) noexcept {
    std::array<std::uint8_t, grh_size> grh{};
    const std::uint8_t* ip = frame.ip_datagram.data();
    if (frame.ip_version == roce::IpVersion::ipv4) {
        std::memcpy(grh.data() + (grh_size - roce::ipv4_header_size), ip, roce::ipv4_header_size);
    } else {
        std::memcpy(grh.data(), ip, grh_size);
    }
    return grh;
}

rdma::Gid source_gid(const roce::ParsedFrame& frame) noexcept {
    if (frame.ip_version == roce::IpVersion::ipv4) {
        return rdma::Gid::from_ipv4(frame.ipv4.src);
    }
    rdma::Gid gid;
    std::copy(frame.ipv6.src.begin(), frame.ipv6.src.end(), gid.raw.begin());
    return gid;
}

std::uint64_t receive_length(const RecvWqe& wqe) noexcept {
    std::uint64_t length = 0;
    for (std::uint32_t i = 0; i < wqe.num_sge; ++i) {
        length += wqe.sges()[i].length;
    }
    return length;
}

} // namespace

void receive_datagram(SwroceQp& qp, const roce::ParsedFrame& frame) noexcept {
    SwroceCounters& counters = qp.device->counters_of(qp);
    const rdma::QpState state = qp.state();
    if (PRDMA_UNLIKELY(state == rdma::QpState::err)) {
        ++counters.rx_ud_dropped;
        return;
    }
    if (PRDMA_UNLIKELY(frame.deth.qkey != qp.attr->qkey)) {
        ++counters.rx_qkey_violations; // IBTA 10.2.4: dropped silently, counted
        return;
    }
    if (PRDMA_UNLIKELY(!acquire_receive(qp))) {
        ++counters.rx_ud_dropped; // no receive posted: a datagram is not waited for
        return;
    }
    const RecvWqe& receive = current_receive(qp); // the QP's own, or the one taken from its SRQ
    ++qp.counters.rx_packets;
    qp.counters.rx_bytes += frame.payload.size();
    const auto byte_len = static_cast<std::uint32_t>(grh_size + frame.payload.size());
    rdma::WorkCompletion wc;
    wc.wr_id = receive.wr_id;
    wc.opcode = rdma::WcOpcode::recv;
    wc.qpn = qp.qpn;
    wc.src_qpn = frame.deth.src_qp;
    wc.byte_len = byte_len;
    wc.src_gid = source_gid(frame);
    qp.resp.recv_offset = 0;
    const std::array<std::uint8_t, grh_size> grh = grh_of(frame);
    if (receive_length(receive) < byte_len) {
        // As rxe's class D error: the receive completes in error and the UD QP goes on.
        wc.status = rdma::WcStatus::local_length_error;
        ++counters.rx_ud_too_long;
    } else if (!place_in_receive(qp, grh) || !place_in_receive(qp, frame.payload)) {
        wc.status = rdma::WcStatus::local_protection_error;
    } else {
        wc.flags |= rdma::wc_grh;
        if (frame.has(roce::ExtHeader::immdt)) {
            wc.flags |= rdma::wc_with_imm;
            wc.imm_or_invalidated = frame.immediate;
        }
    }
    receive_done(qp);
    qp.recv_cq->push(wc);
}

} // namespace prdma::swroce
