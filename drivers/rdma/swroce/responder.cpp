// The responder (IBTA 9.7.4, rxe_resp.c): every request from the peer passes named stages, in
// order, and the first that refuses it answers with the IBTA NAK for its reason, counted:
//
//   check_psn          in order: go on; duplicate: re-ACK or replay; gap: sequence-error NAK
//   check_op_sequence  no MIDDLE/LAST without a FIRST, no new message inside one, same class
//   check_length       FIRST/MIDDLE exactly the path MTU, LAST/ONLY at most it, never beyond the
//                      RETH length or the posted receive
//   check_resources    a receive WQE for a SEND / WRITE_WITH_IMM (else RNR NAK)
//   check_rkey         key, PD, access, bounds and connection of a WRITE/READ/atomic
//   execute            place the payload, run the READ or atomic once
//   acknowledge        coalesced ACK when the requester asked for one
//
// A request that fails a stage touches no memory, completes nothing twice and never pops an
// empty ring. Invalid-request, remote-access and remote-operation NAKs take the QP to ERR once
// they are on their way (classes A-C, as rxe does). Duplicate READs and atomics are answered
// again from their responder resource, never executed twice.
#include <algorithm>

#include <prdma/mem/region_io.hpp>
#include <prdma/roce/psn.hpp>

#include "engine.hpp"

namespace prdma::swroce {

namespace {

// What the stages know of one request packet.
struct Request {
    const roce::ParsedFrame& frame;
    roce::Operation op;
    bool first;
    bool last;
    std::uint32_t psn;
    std::uint32_t payload;

    explicit Request(const roce::ParsedFrame& f) noexcept
        : frame(f), op(f.info->operation), first(f.info->position == roce::Position::first ||
                                                 f.info->position == roce::Position::only),
          last(f.info->position == roce::Position::last ||
               f.info->position == roce::Position::only),
          psn(f.bth.psn), payload(static_cast<std::uint32_t>(f.payload.size())) {}

    [[nodiscard]] bool is_read_or_atomic() const noexcept {
        return op == roce::Operation::rdma_read_request || op == roce::Operation::compare_swap ||
               op == roce::Operation::fetch_add;
    }
    [[nodiscard]] bool write_with_imm_last() const noexcept {
        return op == roce::Operation::rdma_write && last && frame.has(roce::ExtHeader::immdt);
    }
};

void count(SwroceQp& qp, ResponderError reason) noexcept {
    ++qp.device->counters_of(qp).responder(reason);
}

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
    count_event(qp, &QpCounters::naks_sent, &SwroceCounters::naks_sent);
}

// Refuses a request for `reason` with an error NAK: nothing after it is executed (the QP goes to
// ERR once the NAK is out).
void refuse(SwroceQp& qp, const Request& r, ResponderError reason, roce::NakCode code) noexcept {
    count(qp, reason);
    queue_nak(qp, code, r.psn);
    qp.resp.nak_sent = true;
}

void receiver_not_ready(SwroceQp& qp, const Request& r) noexcept {
    release_kept(qp); // the requester resends from here after the RNR wait
    count(qp, ResponderError::receiver_not_ready);
    queue_ack(qp, r.psn, roce::rnr_nak_syndrome(qp.attr->min_rnr_timer));
    count_event(qp, &QpCounters::naks_sent, &SwroceCounters::naks_sent);
}

// The responses a duplicate READ asks for, [into, end) of `res`: its rkey must be the READ's, its
// VA and length those of its PSN's packets, to the READ's end or a whole number of MTUs. False
// when they are not.
bool asked_again(const SwroceQp& qp, const ResponderResource& res, const roce::Reth& reth,
                 std::uint32_t into, std::uint32_t* end) noexcept {
    const std::uint64_t mtu = qp.mtu();
    const std::uint64_t offset = into * mtu;
    const std::uint64_t packets = reth.dma_length == 0 ? 1 : (reth.dma_length + mtu - 1) / mtu;
    if ((res.length > 0 && reth.rkey != res.key) || reth.va != res.va + offset ||
        into + packets > res.span) {
        return false;
    }
    *end = static_cast<std::uint32_t>(into + packets);
    const bool to_the_end = offset + reth.dma_length == res.length;
    return *end == res.span ? to_the_end : reth.dma_length == packets * mtu;
}

// A duplicate READ/atomic: answered again from its resource, never executed twice. A READ asked
// again to its end (a requester's restart: rxe's, a NIC's, ours) is answered from that packet on;
// one asked for a few packets (lost responses swroce asks for alone) gets those, ahead of what the
// READ still has to send, which goes on.
void replay(SwroceQp& qp, const Request& r) noexcept {
    for (ResponderResource& res : qp.resp.resources) {
        const std::int32_t into = roce::psn_diff(r.psn, res.psn);
        if (!res.valid || into < 0 || static_cast<std::uint32_t>(into) >= res.span) {
            continue;
        }
        const bool read = r.op == roce::Operation::rdma_read_request;
        std::uint32_t end = 0;
        if (read == res.atomic ||
            (read && !asked_again(qp, res, r.frame.reth, static_cast<std::uint32_t>(into), &end))) {
            count(qp, ResponderError::bad_duplicate);
            return;
        }
        const auto first = static_cast<std::uint32_t>(into);
        if (read && end == res.span) {
            res.run = {first, end};
        } else if (read) {
            end = std::min(end, res.run.next); // what the run has still to send it sends anyway
            if (first >= end) {
                return;
            }
            res.repairs.add({first, end});
        }
        res.sending = true;
        qp.resp.responses_pending = true;
        return;
    }
}

// ---- stage 1: PSN -------------------------------------------------------------------------
bool check_psn(SwroceQp& qp, const Request& r) noexcept {
    ResponderState& resp = qp.resp;
    const std::int32_t delta = roce::psn_diff(r.psn, resp.expected_psn);
    if (delta < 0) {
        // A duplicate: the ACK or response was lost or late.
        count_event(qp, &QpCounters::duplicates, &SwroceCounters::duplicates);
        if (r.is_read_or_atomic()) {
            replay(qp, r);
        } else {
            queue_ack(qp, roce::psn_sub(resp.expected_psn, 1), roce::ack_syndrome());
        }
        return false;
    }
    if (delta == 0) {
        return true;
    }
    nak_gap(qp, r.frame);
    return false;
}

// ---- stage 2: op sequence (IBTA 9.7.4.1.5) -------------------------------------------------
bool check_op_sequence(SwroceQp& qp, const Request& r) noexcept {
    const InMessage in = qp.resp.in_message;
    bool ok = false;
    switch (r.op) {
    case roce::Operation::send:
        ok = r.first ? in == InMessage::none : in == InMessage::send;
        break;
    case roce::Operation::rdma_write:
        ok = r.first ? in == InMessage::none : in == InMessage::write;
        break;
    case roce::Operation::rdma_read_request:
    case roce::Operation::compare_swap:
    case roce::Operation::fetch_add:
        ok = in == InMessage::none;
        break;
    default: // responses and ACKs never reach the responder; anything else is not a request
        refuse(qp, r, ResponderError::opcode, roce::NakCode::invalid_request);
        return false;
    }
    if (!ok) {
        refuse(qp, r, ResponderError::op_sequence, roce::NakCode::invalid_request);
    }
    return ok;
}

// ---- stage 3: length ------------------------------------------------------------------------
bool check_length(SwroceQp& qp, const Request& r) noexcept {
    const std::uint32_t mtu = qp.mtu();
    bool ok = r.last ? r.payload <= mtu : r.payload == mtu;
    if (r.op == roce::Operation::rdma_write) {
        if (r.first) {
            const std::uint32_t length = r.frame.reth.dma_length;
            // The RETH length bounds the message: every packet but the last is one MTU.
            ok =
                ok && length <= max_message_length && (r.last ? r.payload == length : length > mtu);
        } else {
            ok = ok &&
                 (r.last ? r.payload == qp.resp.write_length : r.payload < qp.resp.write_length);
        }
    } else if (r.op == roce::Operation::rdma_read_request) {
        ok = r.payload == 0 && r.frame.reth.dma_length <= max_message_length;
    } else if (r.op != roce::Operation::send) {
        ok = r.payload == 0; // atomics
    }
    if (!ok) {
        refuse(qp, r, ResponderError::length, roce::NakCode::invalid_request);
    }
    return ok;
}

// ---- stage 4: resources ---------------------------------------------------------------------
bool check_resources(SwroceQp& qp, const Request& r) noexcept {
    // A SEND needs its receive WQE from FIRST to LAST; WRITE_WITH_IMM consumes one with its last
    // packet. Without one, NAK before placing anything: the resent packet must find the message
    // exactly where this one left it.
    const bool needs_receive = r.op == roce::Operation::send || r.write_with_imm_last();
    if (needs_receive && !acquire_receive(qp)) {
        receiver_not_ready(qp, r);
        return false;
    }
    return true;
}

// ---- stage 5: keys --------------------------------------------------------------------------
// Checks an rkey for `access` over [va, va + length); false (NAKed) when refused.
bool check_rkey(SwroceQp& qp, const Request& r, mem::MemoryKey rkey, mem::AccessFlags access,
                std::uint64_t va, std::uint32_t length, const mem::KeyEntry** entry) noexcept {
    if (!qp.attr->access.any_of(access)) {
        refuse(qp, r, ResponderError::qp_access, roce::NakCode::remote_access_error);
        return false;
    }
    const mem::MemoryRegistry& registry = *qp.device->registry;
    if (registry.check({rkey, qp.pd, qp.connection, access, va, length}, entry) !=
        mem::KeyCheck::ok) {
        refuse(qp, r, ResponderError::remote_access, roce::NakCode::remote_access_error);
        return false;
    }
    return true;
}

bool check_keys(SwroceQp& qp, const Request& r) noexcept {
    ResponderState& resp = qp.resp;
    switch (r.op) {
    case roce::Operation::rdma_write:
        if (r.first) {
            const roce::Reth& reth = r.frame.reth;
            if (!check_rkey(qp, r, reth.rkey, mem::access_remote_write, reth.va, reth.dma_length,
                            &resp.write_entry)) {
                return false;
            }
            resp.write_key = reth.rkey;
            resp.write_va = reth.va;
            resp.write_length = reth.dma_length;
            resp.write_dma_length = reth.dma_length;
            return true;
        }
        if (PRDMA_UNLIKELY(!still_valid(resp.write_entry, resp.write_key))) {
            // The region went away (or was invalidated) in the middle of the WRITE.
            resp.write_entry = nullptr;
            refuse(qp, r, ResponderError::region_gone, roce::NakCode::remote_access_error);
            return false;
        }
        return true;
    case roce::Operation::compare_swap:
    case roce::Operation::fetch_add:
        if ((r.frame.atomic_eth.va & 7U) != 0) {
            refuse(qp, r, ResponderError::misaligned_atomic, roce::NakCode::invalid_request);
            return false;
        }
        return true; // the key is checked where the resource is made (execute_atomic)
    default:
        return true; // SEND checks lkeys while scattering; READ where its resource is made
    }
}

// ---- stage 6: execute -----------------------------------------------------------------------
void complete_receive(SwroceQp& qp, const roce::ParsedFrame& frame, std::uint32_t byte_len,
                      rdma::WcOpcode opcode, rdma::WcStatus status) noexcept {
    rdma::WorkCompletion wc;
    wc.wr_id = current_receive(qp).wr_id;
    wc.status = status;
    wc.opcode = opcode;
    wc.byte_len = byte_len;
    wc.qpn = qp.qpn;
    wc.src_qpn = qp.attr->dest_qpn;
    if (status == rdma::WcStatus::success && frame.has(roce::ExtHeader::immdt)) {
        wc.flags |= rdma::wc_with_imm;
        wc.imm_or_invalidated = frame.immediate;
    }
    if (status == rdma::WcStatus::success && frame.has(roce::ExtHeader::ieth)) {
        wc.flags |= rdma::wc_with_inv;
        wc.imm_or_invalidated = frame.invalidate_rkey;
    }
    receive_done(qp);
    qp.recv_cq->push(wc);
}

// Scatters a SEND payload into the head receive WQE; false when it does not fit or a receive
// lkey is refused (a local length/protection error).
[[gnu::always_inline]] inline bool scatter(SwroceQp& qp,
                                           std::span<const std::uint8_t> payload) noexcept {
    const RecvWqe& wqe = current_receive(qp);
    const mem::MemoryRegistry& registry = *qp.device->registry;
    // An SRQ's WQEs belong to its PD (the QPs on it may have others).
    const std::uint32_t pd = qp.srq != nullptr ? qp.srq->pd : qp.pd;
    std::uint32_t skip = qp.resp.recv_offset;
    std::size_t done = 0;
    for (std::uint32_t i = 0; i < wqe.num_sge && done < payload.size(); ++i) {
        const rdma::Sge& sge = wqe.sges()[i];
        if (skip >= sge.length) {
            skip -= sge.length;
            continue;
        }
        const auto take = static_cast<std::uint32_t>(
            std::min<std::size_t>(payload.size() - done, sge.length - skip));
        const mem::KeyEntry* entry = nullptr;
        if (registry.check(
                {sge.lkey, pd, qp.connection, mem::access_local_write, sge.addr + skip, take},
                &entry) != mem::KeyCheck::ok) {
            return false;
        }
        mem::copy_to_region(*entry, sge.addr + skip, payload.data() + done, take);
        done += take;
        skip = 0;
    }
    if (done < payload.size()) {
        return false;
    }
    qp.resp.recv_offset += static_cast<std::uint32_t>(payload.size());
    return true;
}

// False when the request failed here (NAK queued).
bool execute_send(SwroceQp& qp, const Request& r) noexcept {
    if (r.first) {
        qp.resp.recv_offset = 0;
    }
    if (!scatter(qp, r.frame.payload)) {
        complete_receive(qp, r.frame, qp.resp.recv_offset, rdma::WcOpcode::recv,
                         rdma::WcStatus::local_length_error);
        qp.resp.in_message = InMessage::none;
        refuse(qp, r, ResponderError::receive_too_short, roce::NakCode::invalid_request);
        return false;
    }
    qp.resp.in_message = r.last ? InMessage::none : InMessage::send;
    if (!r.last) {
        return true;
    }
    if (r.frame.has(roce::ExtHeader::ieth) &&
        qp.device->registry->invalidate(r.frame.invalidate_rkey, qp.pd) !=
            mem::InvalidateResult::ok) {
        // A key that is not ours to invalidate (wrong PD, not a fast-register region, stale): the
        // receive completes in error and the requester gets a NAK, as rxe does.
        complete_receive(qp, r.frame, qp.resp.recv_offset, rdma::WcOpcode::recv,
                         rdma::WcStatus::remote_invalid_request_error);
        refuse(qp, r, ResponderError::invalidate, roce::NakCode::invalid_request);
        return false;
    }
    complete_receive(qp, r.frame, qp.resp.recv_offset, rdma::WcOpcode::recv,
                     rdma::WcStatus::success);
    ++qp.resp.msn;
    return true;
}

void execute_write(SwroceQp& qp, const Request& r) noexcept {
    ResponderState& resp = qp.resp;
    mem::copy_to_region(*resp.write_entry, resp.write_va, r.frame.payload.data(), r.payload);
    resp.write_va += r.payload;
    resp.write_length -= r.payload;
    resp.in_message = r.last ? InMessage::none : InMessage::write;
    if (!r.last) {
        return;
    }
    if (r.frame.has(roce::ExtHeader::immdt)) {
        // byte_len is the whole WRITE's length (IBTA), not this packet's payload.
        complete_receive(qp, r.frame, resp.write_dma_length, rdma::WcOpcode::recv_rdma_with_imm,
                         rdma::WcStatus::success);
    }
    resp.write_entry = nullptr;
    ++resp.msn;
}

// Executes a READ or an atomic once, keeping what a duplicate needs in a responder resource.
void execute_read_atomic(SwroceQp& qp, const Request& r) noexcept {
    ResponderResource resource;
    resource.valid = true;
    resource.psn = r.psn;
    resource.sending = true;
    if (r.op == roce::Operation::rdma_read_request) {
        const roce::Reth& reth = r.frame.reth;
        if (reth.dma_length > 0) {
            if (!check_rkey(qp, r, reth.rkey, mem::access_remote_read, reth.va, reth.dma_length,
                            &resource.entry)) {
                return;
            }
            resource.key = reth.rkey;
        }
        const std::uint32_t mtu = qp.mtu();
        resource.va = reth.va;
        resource.length = reth.dma_length;
        resource.span = reth.dma_length == 0 ? 1U : (reth.dma_length + mtu - 1) / mtu;
        resource.run = {0, resource.span};
    } else {
        const roce::AtomicEth& atomic = r.frame.atomic_eth;
        const mem::KeyEntry* entry = nullptr;
        if (!check_rkey(qp, r, atomic.rkey, mem::access_remote_atomic, atomic.va, 8, &entry)) {
            return;
        }
        // One lcore owns the QP: the read-modify-write needs no atomic instruction against other
        // prdma lcores; the CPU sees an aligned 64-bit access.
        auto* target = reinterpret_cast<std::uint64_t*>(mem::KeyTable::host(*entry, atomic.va));
        resource.atomic = true;
        resource.span = 1;
        resource.original = *target;
        if (r.op == roce::Operation::compare_swap) {
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
    qp.resp.expected_psn = roce::psn_add(r.psn, resource.span);
    ++qp.resp.msn;
}

} // namespace

// ud.cpp's way in; execute_send's call stays inlined.
bool place_in_receive(SwroceQp& qp, std::span<const std::uint8_t> payload) noexcept {
    return scatter(qp, payload);
}

void nak_gap(SwroceQp& qp, const roce::ParsedFrame& frame) noexcept {
    // One NAK, then again only when the requester shows it lost that NAK or its retransmission:
    // a packet at or before the highest seen since (it went back again), or one that asks for an
    // acknowledgement (it waits for one that never came).
    ResponderState& resp = qp.resp;
    const std::uint32_t psn = frame.bth.psn;
    const bool first_nak = !resp.nak_sent;
    const bool new_pass = !first_nak && !roce::psn_after(psn, resp.nak_highest_psn);
    if (first_nak || new_pass || frame.bth.ack_req) {
        count(qp, ResponderError::psn_sequence);
        queue_nak(qp, roce::NakCode::psn_sequence_error, resp.expected_psn);
        resp.nak_sent = true;
    }
    if (first_nak || new_pass || roce::psn_after(psn, resp.nak_highest_psn)) {
        resp.nak_highest_psn = psn;
    }
}

void nak_kept_gap(SwroceQp& qp) noexcept {
    ResponderState& resp = qp.resp;
    if (resp.nak_sent || resp.kept.empty()) {
        return;
    }
    count(qp, ResponderError::psn_sequence);
    queue_nak(qp, roce::NakCode::psn_sequence_error, resp.expected_psn);
    resp.nak_sent = true;
    resp.nak_highest_psn = resp.kept.highest();
}

void ack_taken(SwroceQp& qp) noexcept {
    ResponderState& resp = qp.resp;
    if (resp.ack_pending && roce::aeth_type(resp.ack_syndrome) != roce::AckType::ack) {
        if (resp.ack_syndrome != roce::nak_syndrome(roce::NakCode::psn_sequence_error)) {
            return; // an RNR or error NAK must reach the requester
        }
        resp.ack_pending = false; // the gap it names is filled
    }
    queue_ack(qp, roce::psn_sub(qp.resp.expected_psn, 1), roce::ack_syndrome());
}

void respond(SwroceQp& qp, const roce::ParsedFrame& frame) noexcept {
    const Request r(frame);
    if (!check_psn(qp, r) || !check_op_sequence(qp, r) || !check_length(qp, r) ||
        !check_resources(qp, r) || !check_keys(qp, r)) {
        return;
    }
    switch (r.op) {
    case roce::Operation::send:
        if (!execute_send(qp, r)) {
            return;
        }
        break;
    case roce::Operation::rdma_write:
        execute_write(qp, r);
        break;
    default:
        execute_read_atomic(qp, r); // answered by responses, not by an ACK
        return;
    }
    // ---- stage 7: acknowledge ----
    qp.resp.nak_sent = false;
    qp.resp.expected_psn = roce::psn_next(r.psn);
    if (frame.bth.ack_req) {
        queue_ack(qp, r.psn, roce::ack_syndrome());
    }
}

void send_ack(SwroceQp& qp, TxBatch& tx) noexcept {
    // A selective-repeat peer reads a sequence-error NAK's MSN as the PSN to resend (nak_missing):
    // here the NAKed one itself.
    const bool names_psn = PRDMA_UNLIKELY(qp.resp.ack_syndrome ==
                                          roce::nak_syndrome(roce::NakCode::psn_sequence_error)) &&
                           qp.attr->selective_repeat;
    const std::uint32_t msn = names_psn ? qp.resp.ack_psn : qp.resp.msn & roce::psn_mask;
    if (emit_ack(qp, tx, qp.resp.ack_psn, {qp.resp.ack_syndrome, msn})) {
        qp.resp.ack_pending = false;
    }
}

namespace {

// Sends the atomic ACK of `res`; false when the batch is full.
bool send_atomic_response(SwroceQp& qp, TxBatch& tx, ResponderResource& res) noexcept {
    if (tx.full()) {
        return false;
    }
    roce::TransportHeaders h = headers_for(qp, roce::Opcode::rc_atomic_acknowledge, res.psn);
    h.aeth = {roce::ack_syndrome(), qp.resp.msn & roce::psn_mask};
    h.atomic_ack_eth = {res.original};
    if (!emit(qp, tx, h, Payload{})) {
        return false;
    }
    res.sending = false;
    return true;
}

// Sends what is left of `run` of `res`; false when the batch is full.
bool send_run(SwroceQp& qp, TxBatch& tx, const ResponderResource& res, ResponseRun& run) noexcept {
    const std::uint32_t mtu = qp.mtu();
    while (!run.done()) {
        if (tx.full()) {
            return false;
        }
        const std::uint32_t i = run.next;
        const bool first = i == 0;
        const bool last = i + 1 == res.span;
        const roce::Opcode opcode = first && last ? roce::Opcode::rc_rdma_read_response_only
                                    : first       ? roce::Opcode::rc_rdma_read_response_first
                                    : last        ? roce::Opcode::rc_rdma_read_response_last
                                                  : roce::Opcode::rc_rdma_read_response_middle;
        roce::TransportHeaders h = headers_for(qp, opcode, roce::psn_add(res.psn, i));
        h.aeth = {roce::ack_syndrome(), qp.resp.msn & roce::psn_mask};
        const std::uint32_t offset = i * mtu;
        const std::uint32_t length = std::min(mtu, res.length - std::min(res.length, offset));
        if (!emit(qp, tx, h, Payload{nullptr, res.entry, res.va, offset, length})) {
            return false;
        }
        ++run.next;
    }
    return true;
}

// Sends the READ responses of `res` still to go, those asked for alone first; false when the
// batch is full.
bool send_read_responses(SwroceQp& qp, TxBatch& tx, ResponderResource& res) noexcept {
    if (res.length > 0 && PRDMA_UNLIKELY(!still_valid(res.entry, res.key))) {
        // The region went away mid-READ: stop answering; the requester's retries run out.
        count(qp, ResponderError::region_gone);
        res.valid = false;
        res.sending = false;
        return true;
    }
    for (; !res.repairs.empty(); res.repairs.pop_front()) {
        if (!send_run(qp, tx, res, res.repairs.front())) {
            return false;
        }
    }
    if (!send_run(qp, tx, res, res.run)) {
        return false;
    }
    res.sending = false;
    return true;
}

} // namespace

void send_responses(SwroceQp& qp, TxBatch& tx) noexcept {
    for (std::uint32_t n = 0; n < max_responder_resources; ++n) {
        ResponderResource& res =
            qp.resp.resources[(qp.resp.next_resource + n) % max_responder_resources];
        if (!res.valid || !res.sending) {
            continue;
        }
        const bool done =
            res.atomic ? send_atomic_response(qp, tx, res) : send_read_responses(qp, tx, res);
        if (!done) {
            return;
        }
    }
    qp.resp.responses_pending = false; // every resource sent what it had
}

} // namespace prdma::swroce
