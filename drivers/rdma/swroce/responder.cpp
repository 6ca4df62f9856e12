// The responder (IBTA 9.7.4, rxe_resp.c): requests from the peer are checked and executed in PSN
// order, and answered with coalesced ACKs, NAKs, READ responses and atomic ACKs. Duplicate READs
// and atomics are answered again from their responder resource, never executed twice.
#include <algorithm>

#include <prdma/mem/region_io.hpp>
#include <prdma/roce/psn.hpp>

#include "engine.hpp"

namespace prdma::swroce {

namespace {

void queue_ack(SwroceQp& qp, std::uint32_t psn, std::uint8_t syndrome) noexcept {
    // An error NAK waiting to go out is never displaced by a later ACK or RNR NAK: the requester
    // must learn which WR failed.
    if (qp.resp.ack_pending && roce::aeth_type(qp.resp.ack_syndrome) == roce::AckType::nak) {
        return;
    }
    qp.resp.ack_pending = true;
    qp.resp.ack_psn = psn;
    qp.resp.ack_syndrome = syndrome;
}

void queue_nak(SwroceQp& qp, roce::NakCode code, std::uint32_t psn) noexcept {
    queue_ack(qp, psn, roce::nak_syndrome(code));
    qp.resp.error_after_nak = qp.resp.error_after_nak || code == roce::NakCode::invalid_request ||
                              code == roce::NakCode::remote_access_error ||
                              code == roce::NakCode::remote_operational_error;
    ++qp.device->counters_of(qp).naks_sent;
    ++qp.counters.naks_sent;
}

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
    std::uint32_t skip = qp.resp.recv_offset;
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
        mem::copy_to_region(*entry, sge.addr + skip, payload.data() + done, take);
        done += take;
        skip = 0;
    }
    if (done < payload.size()) {
        return false; // the message is longer than the receive buffers
    }
    qp.resp.recv_offset += static_cast<std::uint32_t>(payload.size());
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
                qp.resp.nak_sent = true;
                return;
            }
            resource.key = frame.reth.rkey;
        }
        const std::uint32_t mtu = qp.mtu();
        resource.va = frame.reth.va;
        resource.length = length;
        resource.span = length == 0 ? 1U : (length + mtu - 1) / mtu;
    } else {
        const roce::AtomicEth& atomic = frame.atomic_eth;
        if ((atomic.va & 7U) != 0) {
            queue_nak(qp, roce::NakCode::invalid_request, psn); // atomics are 8-byte aligned
            qp.resp.nak_sent = true;
            return;
        }
        const mem::KeyEntry* entry = nullptr;
        const mem::KeyCheck check = registry.check(
            {atomic.rkey, qp.pd, qp.qpn, mem::access_remote_atomic, atomic.va, 8}, &entry);
        if (check != mem::KeyCheck::ok || (qp.attr.access & mem::access_remote_atomic) == 0) {
            queue_nak(qp, roce::NakCode::remote_access_error, psn);
            qp.resp.nak_sent = true;
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
    qp.resp.resources[qp.resp.next_resource] = resource;
    qp.resp.responses_pending = true;
    qp.resp.next_resource = (qp.resp.next_resource + 1) % max_responder_resources;
    qp.resp.nak_sent = false;
    qp.resp.expected_psn = roce::psn_add(psn, resource.span);
    ++qp.resp.msn;
}

// A duplicate READ/atomic: answered again from its resource, never executed twice. A READ asked
// again from a PSN inside its range is answered from that response on.
void replay(SwroceQp& qp, std::uint32_t psn) noexcept {
    for (ResponderResource& resource : qp.resp.resources) {
        const std::int32_t into = roce::psn_diff(psn, resource.psn);
        if (resource.valid && into >= 0 && static_cast<std::uint32_t>(into) < resource.span) {
            resource.next_packet = static_cast<std::uint32_t>(into);
            resource.sending = true;
            qp.resp.responses_pending = true;
            return;
        }
    }
}

} // namespace

void respond(SwroceQp& qp, const roce::ParsedFrame& frame) noexcept {
    const std::uint32_t psn = frame.bth.psn;
    const std::int32_t delta = roce::psn_diff(psn, qp.resp.expected_psn);
    if (delta < 0) {
        // A duplicate: the ACK or response was lost or late.
        ++qp.device->counters_of(qp).duplicates;
        if (is_read_or_atomic_request(frame.info->operation)) {
            replay(qp, psn);
        } else {
            queue_ack(qp, roce::psn_sub(qp.resp.expected_psn, 1), roce::ack_syndrome());
        }
        return;
    }
    if (delta > 0) {
        if (!qp.resp.nak_sent) {
            qp.resp.nak_sent = true;
            queue_nak(qp, roce::NakCode::psn_sequence_error, qp.resp.expected_psn);
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
            qp.resp.recv_offset = 0;
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
                wc.byte_len = qp.resp.recv_offset;
                wc.qpn = qp.qpn;
                wc.src_qpn = qp.attr.dest_qpn;
                qp.receive_queue.pop();
                qp.recv_cq->push(wc);
                queue_nak(qp, roce::NakCode::invalid_request, psn);
                qp.resp.nak_sent = true;
                return;
            }
            complete_receive(qp, frame, qp.resp.recv_offset, rdma::WcOpcode::recv);
            ++qp.resp.msn;
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
                qp.resp.nak_sent = true;
                return;
            }
            qp.resp.write_entry = entry;
            qp.resp.write_key = frame.reth.rkey;
            qp.resp.write_va = frame.reth.va;
            qp.resp.write_length = frame.reth.dma_length;
            qp.resp.write_dma_length = frame.reth.dma_length;
        }
        if (qp.resp.write_entry == nullptr || frame.payload.size() > qp.resp.write_length) {
            queue_nak(qp, roce::NakCode::invalid_request, psn);
            return;
        }
        if (PRDMA_UNLIKELY(!still_valid(qp.resp.write_entry, qp.resp.write_key))) {
            // The region went away (or was invalidated) in the middle of the WRITE.
            qp.resp.write_entry = nullptr;
            queue_nak(qp, roce::NakCode::remote_access_error, psn);
            qp.resp.nak_sent = true;
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
        mem::copy_to_region(*qp.resp.write_entry, qp.resp.write_va, frame.payload.data(),
                            static_cast<std::uint32_t>(frame.payload.size()));
        qp.resp.write_va += frame.payload.size();
        qp.resp.write_length -= static_cast<std::uint32_t>(frame.payload.size());
        if (last) {
            if (frame.has(roce::ExtHeader::immdt)) {
                // byte_len is the whole WRITE's length (IBTA), not this packet's payload.
                complete_receive(qp, frame, qp.resp.write_dma_length,
                                 rdma::WcOpcode::recv_rdma_with_imm);
            }
            qp.resp.write_entry = nullptr;
            ++qp.resp.msn;
        }
    } else if (is_read_or_atomic_request(info.operation)) {
        execute_read_atomic(qp, frame); // answered by responses, not by an ACK
        return;
    } else {
        queue_nak(qp, roce::NakCode::invalid_request, psn);
        return;
    }
    qp.resp.nak_sent = false;
    qp.resp.expected_psn = roce::psn_next(psn);
    if (frame.bth.ack_req) {
        queue_ack(qp, psn, roce::ack_syndrome());
    }
}

void send_ack(SwroceQp& qp, TxBatch& tx) noexcept {
    roce::FrameHeaders h = headers_for(qp, roce::Opcode::rc_acknowledge, qp.resp.ack_psn);
    h.aeth = {qp.resp.ack_syndrome, qp.resp.msn & roce::psn_mask};
    if (emit(qp, tx, h, Payload{})) {
        qp.resp.ack_pending = false;
    }
}

// Transmits pending READ responses and atomic ACKs, oldest resource first.
void send_responses(SwroceQp& qp, TxBatch& tx) noexcept {
    const std::uint32_t mtu = qp.mtu();
    for (std::uint32_t n = 0; n < max_responder_resources; ++n) {
        ResponderResource& res =
            qp.resp.resources[(qp.resp.next_resource + n) % max_responder_resources];
        if (!res.valid || !res.sending) {
            continue;
        }
        if (res.atomic) {
            if (tx.full()) {
                return;
            }
            roce::FrameHeaders h = headers_for(qp, roce::Opcode::rc_atomic_acknowledge, res.psn);
            h.aeth = {roce::ack_syndrome(), qp.resp.msn & roce::psn_mask};
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
            h.aeth = {roce::ack_syndrome(), qp.resp.msn & roce::psn_mask};
            const std::uint32_t offset = i * mtu;
            const std::uint32_t length = std::min(mtu, res.length - std::min(res.length, offset));
            if (!emit(qp, tx, h, Payload{nullptr, res.entry, res.va, offset, length})) {
                return;
            }
            ++res.next_packet;
        }
        res.sending = false;
    }
    qp.resp.responses_pending = false; // every resource sent what it had
}

} // namespace prdma::swroce
