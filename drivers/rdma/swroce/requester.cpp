// The requester (IBTA 9.4, rxe_req.c): send-queue WQEs become packets. Each WQE is segmented to
// the path MTU, its headers come from the QP, its payload is gathered through the lkeys checked
// when it is first sent; the send window bounds READs/atomics in flight and honours fences;
// FAST_REG and LOCAL_INV run when the send queue reaches them.
#include <algorithm>

#include <prdma/mem/sge_cursor.hpp>
#include <prdma/roce/psn.hpp>

#include "engine.hpp"
#include "fast_reg_error.hpp"
#include "segmenter.hpp"

namespace prdma::swroce {

namespace {

// Checks every SGE's lkey once, when the WQE is first transmitted. A failure is the WQE's own:
// it completes with it in send-queue order (pass_local), after the WRs before it.
// Inlined into the RC requester, as it was before ud.cpp called it too (callgrind: 24 instructions
// a WRITE otherwise).
[[gnu::always_inline]] inline bool check_local_keys(SwroceQp& qp, SendWqe& wqe) noexcept {
    if (wqe.checked || wqe.wr.flags.has(rdma::send_inline)) {
        wqe.checked = true;
        return true;
    }
    const mem::MemoryRegistry& registry = *qp.device->registry;
    // READ responses and atomic results are written into the SGEs; everything else is read.
    const mem::AccessFlags access =
        wqe.is_read_or_atomic() ? mem::access_local_write : mem::access_local_read;
    for (std::uint32_t i = 0; i < wqe.wr.num_sge; ++i) {
        const rdma::Sge& sge = wqe.sges()[i];
        const mem::KeyEntry* entry = nullptr;
        const mem::KeyCheck check =
            registry.check({sge.lkey, qp.pd, qp.connection, access, sge.addr, sge.length}, &entry);
        if (check != mem::KeyCheck::ok) {
            wqe.local_status = rdma::WcStatus::local_protection_error;
            wqe.local_vendor_error = static_cast<std::uint32_t>(check);
            return false;
        }
        wqe.entries()[i] = entry;
    }
    wqe.checked = true;
    return true;
}

// FAST_REG (seed 001) and LOCAL_INV execute when the send queue reaches them, so later WRs see
// their effect; they complete in order behind the remote WRs before them.
void execute_local(SwroceQp& qp, SendWqe& wqe) noexcept {
    if (wqe.local_status != rdma::WcStatus::success) {
        return; // failed at post: it only completes, in order
    }
    mem::MemoryRegistry& registry = *qp.device->registry;
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
        wqe.local_vendor_error = static_cast<std::uint32_t>(rdma::FastRegVendorError::no_region);
        return;
    }
    const mem::FastRegRequest request{
        reg.pages, reg.page_count, reg.page_shift, reg.first_byte_offset, reg.length, reg.base_va};
    mem::PageListError page_error = mem::PageListError::ok;
    const mem::FastRegResult result =
        registry.fast_register(*reg.region, qp.pd, reg.key, request, reg.access, &page_error);
    if (result == mem::FastRegResult::ok) {
        return;
    }
    // The consumer learns which rule it broke from the completion (rdma::FastRegVendorError).
    wqe.local_vendor_error = static_cast<std::uint32_t>(fast_reg_vendor_error(result, page_error));
    wqe.local_status =
        result == mem::FastRegResult::access_violation || result == mem::FastRegResult::wrong_pd
            ? rdma::WcStatus::local_protection_error
            : rdma::WcStatus::local_qp_operation_error;
}

// READs/atomics on the wire and not completed yet. One answered behind an earlier READ still
// counts: the responder frees its resources in order, and the earlier one's must stay there to
// answer our restart. Only a QP that ever carried one needs the
// count (a scan of what is in flight).
std::uint32_t outstanding_reads(SwroceQp& qp) noexcept {
    std::uint32_t count = 0;
    for (std::uint32_t i = 0; qp.req.reads_posted && i < qp.req.send_offset; ++i) {
        count += qp.send_queue.at(i).is_read_or_atomic() ? 1U : 0U;
    }
    return count;
}

// The responses a READ asks for when it is sent, [from, end): all of them the first time; when it
// is sent again, those from the first one missing to the next that arrived (IBTA 9.4.4: its PSN,
// VA and length move past what was placed). A repair asks for a range of its own.
struct ReadAsk {
    std::uint32_t from = 0;
    std::uint32_t end = 0;
};

ReadAsk read_ask(const SwroceQp& qp, const SendWqe& wqe) noexcept {
    return {wqe.responses, wqe.first_gap_end(qp.map_of(wqe))};
}

// The headers of packet `plan` of `wqe` (a READ: asking for `ask`).
roce::TransportHeaders request_headers(const SwroceQp& qp, const SendWqe& wqe,
                                       const PacketPlan& plan, std::uint32_t mtu,
                                       ReadAsk ask) noexcept {
    const bool read = wqe.wr.opcode == rdma::WrOpcode::rdma_read;
    const std::uint32_t psn =
        roce::psn_add(wqe.first_psn, wqe.is_read_or_atomic() ? ask.from : wqe.next_packet);
    roce::TransportHeaders h = headers_for(qp, plan.opcode, psn);
    const auto& info = roce::opcode_info(plan.opcode);
    h.bth.solicited = plan.last && wqe.wr.flags.has(rdma::send_solicited);
    if (info.has(roce::ExtHeader::reth)) {
        const std::uint64_t from = std::uint64_t{ask.from} * mtu;
        const std::uint64_t end = std::min<std::uint64_t>(wqe.length, std::uint64_t{ask.end} * mtu);
        const std::uint64_t offset = read ? from : 0;
        const std::uint64_t length = read ? end - from : wqe.length;
        h.reth = {wqe.wr.rdma.remote_addr + offset, wqe.wr.rdma.rkey,
                  static_cast<std::uint32_t>(length)};
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
    return h;
}

// A READ request or an atomic, built whole.
bool emit_read_or_atomic(SwroceQp& qp, TxBatch& tx, const SendWqe& wqe, const PacketPlan& plan,
                         ReadAsk ask, bool ack_req) noexcept {
    roce::TransportHeaders h = request_headers(qp, wqe, plan, qp.mtu(), ask);
    h.bth.ack_req = ack_req;
    return emit(qp, tx, h, Payload{&wqe, nullptr, 0, plan.offset, plan.length});
}

// Whether one more packet at `psn` fits the window of unacknowledged packets. A READ request
// always may go (max_rd_atomic bounds those), and so may the first unacknowledged packet.
bool in_window(const SwroceQp& qp, const SendWqe& wqe, std::uint32_t psn) noexcept {
    if (wqe.is_read_or_atomic()) {
        return true;
    }
    const std::int32_t ahead = roce::psn_diff(psn, qp.req.acked_psn);
    if (PRDMA_UNLIKELY(qp.req.probing)) {
        return !roce::psn_after(psn, qp.req.probe_psn);
    }
    return ahead <= static_cast<std::int32_t>(qp.req.window.packets());
}

// The last packet of a message asks for an ACK (IBTA), and so does every few packets inside a
// long one (SendWindow::ack_req_interval), so the window moves on before the message ends.
bool asks_for_ack(SwroceQp& qp, const PacketPlan& plan) noexcept {
    if (plan.last || ++qp.req.packets_since_ack_req >= qp.req.window.ack_req_interval()) {
        qp.req.packets_since_ack_req = 0;
        return true;
    }
    return false;
}

// Sends the packets of `wqe` still to go; false when the requester must stop for now (batch
// full, window full, no mbuf, or the QP failed).
bool send_packets(SwroceQp& qp, SendWqe& wqe, TxBatch& tx, std::uint64_t now) noexcept {
    const std::uint32_t mtu = qp.mtu();
    const Segmenter segments(wqe.wr.opcode, wqe.length, mtu);
    if (!wqe.assigned) {
        wqe.first_psn = qp.req.send_psn;
        wqe.psn_span = segments.psn_span();
        qp.req.send_psn = roce::psn_add(qp.req.send_psn, wqe.psn_span);
        wqe.assigned = true;
        if (wqe.is_read_or_atomic()) {
            wqe.read_seq = qp.req.read_seq_next++;
        }
    }
    // SENDs and WRITEs go out from the QP's prebuilt request headers (emit_request); a READ or
    // atomic request is built whole.
    const bool request = !wqe.is_read_or_atomic();
    const bool solicited = wqe.wr.flags.has(rdma::send_solicited);
    while (wqe.next_packet < segments.packet_count() && !tx.full()) {
        const PacketPlan plan = segments.packet(wqe.next_packet);
        const ReadAsk ask = request ? ReadAsk{} : read_ask(qp, wqe);
        const std::uint32_t psn =
            roce::psn_add(wqe.first_psn, request ? wqe.next_packet : ask.from);
        if (!in_window(qp, wqe, psn)) {
            return false;
        }
        if (plan.length > 0 && request && !wqe.keys_valid()) {
            // The local region went away while the WQE was queued: as a NIC would, fail it (in
            // send-queue order, as run_requester passes it now).
            wqe.local_status = rdma::WcStatus::local_protection_error;
            return false;
        }
        // A probe must be answered, wherever in a message it falls.
        const bool ack_req = asks_for_ack(qp, plan) || qp.req.probing;
        if (request ? !emit_request(qp, tx, wqe,
                                    {plan.opcode, psn, plan.offset, plan.length, ack_req,
                                     plan.last && solicited})
                    : !emit_read_or_atomic(qp, tx, wqe, plan, ask, ack_req)) {
            return false;
        }
        const std::uint32_t last_psn =
            request ? psn : roce::psn_add(wqe.first_psn, wqe.psn_span - 1);
        const bool first_send = roce::psn_after(last_psn, qp.req.sent_psn);
        if (first_send) {
            qp.req.sent_psn = last_psn;
        }
        // Only a packet sent the first time is timed (Karn). Toward a selective-repeat peer a
        // READ or atomic is timed too, so a QP that only READs has a round trip for its probes
        // (min_rtt). Go-back-N keeps its 1 ms probe floor there.
        if (!qp.req.timing && first_send && (request ? ack_req : qp.attr->selective_repeat)) {
            qp.req.timing = true;
            qp.req.timed_psn = psn;
            qp.req.timed_tsc = now;
            qp.req.timed_read = !request;
        }
        ++wqe.next_packet;
        if (qp.req.retransmit_deadline == 0) {
            arm_timer(qp, now);
            if (PRDMA_UNLIKELY(!request)) {
                hold_first_probe(qp, now);
            }
        }
    }
    return wqe.next_packet == segments.packet_count();
}

// The runs of responses of `wqe` still missing in [from, end), the responder's
// RepairRuns::capacity at most: the last takes the rest.
std::uint32_t missing_runs(const SendWqe& wqe, const ResponseMap* ahead, std::uint32_t from,
                           std::uint32_t end) noexcept {
    std::uint32_t runs = 0;
    for (bool in_run = false; from < end && runs < RepairRuns::capacity; ++from) {
        const bool missing = !wqe.placed(ahead, from);
        runs += missing && !in_run ? 1U : 0U;
        in_run = missing;
    }
    return runs;
}

// The responses of `wqe` asked for again and not yet sent, [repair_from, repair_end), as one READ
// request per run of them still missing, the responder's RepairRuns::capacity at most (the last
// takes the rest): gaps found in one burst are asked for apart, not with what came between. All
// go in one pass or none (false: the burst has no room, and the range waits whole for the next),
// so a READ's requests never outnumber the responder's runs. What came meanwhile (a response
// reordered past the slack) is not asked for: its answer would be a duplicate, and a timed one
// would never close its sample.
bool send_repair_runs(SwroceQp& qp, TxBatch& tx, SendWqe& wqe, std::uint64_t now) noexcept {
    const ResponseMap* ahead = qp.map_of(wqe);
    std::uint32_t from = std::max(wqe.repair_from, wqe.responses);
    std::uint32_t end = wqe.repair_end;
    while (end > from && wqe.placed(ahead, end - 1)) {
        --end;
    }
    const std::uint32_t runs = missing_runs(wqe, ahead, from, end);
    if (tx.count + runs > tx.mbufs.size()) {
        return false;
    }
    const PacketPlan plan = Segmenter(wqe.wr.opcode, wqe.length, qp.mtu()).packet(0);
    for (std::uint32_t sent = 0; sent < runs; ++sent) {
        while (wqe.placed(ahead, from)) {
            ++from;
        }
        ReadAsk run{from, sent + 1 == runs ? end : from + 1};
        while (run.end < end && !wqe.placed(ahead, run.end)) {
            ++run.end;
        }
        roce::TransportHeaders h = request_headers(qp, wqe, plan, qp.mtu(), run);
        h.bth.ack_req = true;
        if (!emit(qp, tx, h, Payload{})) {
            wqe.repair_from = from; // no mbuf: the rest next time
            return false;
        }
        // A repair waits behind the responses queued on the path, often a millisecond at
        // 1 MiB: the first response asked for times what the chase waits for.
        if (qp.req.repair_timed_psn == no_psn) {
            qp.req.repair_timed_psn = h.bth.psn;
            qp.req.repair_timed_tsc = now;
        }
        from = run.end;
    }
    wqe.repair_end = wqe.repair_from;
    return true;
}

// Lost responses asked for by themselves (ask_for_responses), ahead of anything new: a READ
// request for just those packets, an atomic again. Its responder answers both from the resource
// the request made (a duplicate is never executed again).
void send_repairs(SwroceQp& qp, TxBatch& tx, std::uint64_t now) noexcept {
    for (std::uint32_t i = 0; i < qp.send_queue.size(); ++i) {
        SendWqe& wqe = qp.send_queue.at(i);
        if (!wqe.assigned) {
            break;
        }
        if (wqe.repair_end <= wqe.repair_from) {
            continue; // nothing asked for
        }
        if (!wqe.is_read_or_atomic() || wqe.answered()) {
            wqe.repair_end = wqe.repair_from;
            continue;
        }
        if (!send_repair_runs(qp, tx, wqe, now)) {
            qp.req.repairs_pending = true;
            return;
        }
    }
}

// A packet a selective-repeat peer NAKed (resend_selected); false when it must wait for the
// next progress (no mbuf).
bool send_selected(SwroceQp& qp, TxBatch& tx, std::uint32_t psn) noexcept {
    const SendWqe* wqe = wqe_holding(qp, psn);
    if (wqe == nullptr || wqe->is_read_or_atomic() || !roce::psn_after(psn, qp.req.acked_psn)) {
        return true; // acknowledged meanwhile
    }
    const auto index = static_cast<std::uint32_t>(roce::psn_diff(psn, wqe->first_psn));
    const PacketPlan plan = Segmenter(wqe->wr.opcode, wqe->length, qp.mtu()).packet(index);
    // Not sent since a restart rewound it (the requester's own pass sends it), or its region went
    // away (that pass fails it).
    if (index >= wqe->next_packet || (plan.length > 0 && !wqe->keys_valid())) {
        return true;
    }
    const bool solicited = plan.last && wqe->wr.flags.has(rdma::send_solicited);
    return emit_request(qp, tx, *wqe,
                        {plan.opcode, psn, plan.offset, plan.length, true, solicited});
}

// The packets a selective-repeat peer NAKed, each alone and asking for an ACK, ahead of anything
// new: the peer keeps what came after them.
void send_resends(SwroceQp& qp, TxBatch& tx) noexcept {
    while (!qp.req.resends.empty() && !tx.full() && send_selected(qp, tx, qp.req.resends.front())) {
        qp.req.resends.pop();
    }
    qp.req.repairs_pending |= !qp.req.resends.empty();
}

// A FAST_REG or LOCAL_INV reached in send-queue order: run once (a restart passes it again
// without running it). False when it failed, or for a WR that failed where it stands: nothing
// after it is sent, and it completes in error when it reaches the head.
bool pass_local(SwroceQp& qp, SendWqe& wqe) noexcept {
    if (!wqe.assigned) {
        execute_local(qp, wqe);
        wqe.assigned = true;
        wqe.first_psn = qp.req.send_psn;
        wqe.psn_span = 0;
    }
    ++qp.req.send_offset;
    if (wqe.local_status != rdma::WcStatus::success) {
        qp.req.send_stopped = true;
        return false;
    }
    return true;
}

} // namespace

// ud.cpp's way in; RC's calls above stay inlined.
bool check_send_keys(SwroceQp& qp, SendWqe& wqe) noexcept {
    return check_local_keys(qp, wqe);
}

// What run_requester does for the local WRs at its position, and nothing else: they put nothing
// on the wire, so DEFER has nothing to hold back, and seed 001 wants a FAST_REG's key usable once
// the post returns. WRs posted after a held (deferred) remote WR still wait for it.
void run_local_at_post(SwroceQp& qp) noexcept {
    if (qp.state() != rdma::QpState::rts) {
        return;
    }
    while (qp.req.send_offset < qp.send_queue.size()) {
        SendWqe& wqe = qp.send_queue.at(qp.req.send_offset);
        if (!wqe.is_local() || wqe.assigned || qp.req.send_stopped) {
            break;
        }
        if (wqe.wr.flags.has(rdma::send_read_fence) && outstanding_reads(qp) > 0) {
            break;
        }
        if (!pass_local(qp, wqe)) {
            break;
        }
    }
    retire_local_heads(qp);
}

void run_requester(SwroceQp& qp, TxBatch& tx, std::uint64_t now) noexcept {
    if (qp.state() != rdma::QpState::rts || !qp.has_peer_mac() || qp.req.rnr_resume > now) {
        // A UD QP never has a peer's MAC: its requester costs an RC QP nothing.
        if (PRDMA_UNLIKELY(qp.type == rdma::QpType::ud)) {
            run_ud_requester(qp, tx);
        }
        return;
    }
    if (PRDMA_UNLIKELY(qp.req.repairs_pending)) {
        qp.req.repairs_pending = false; // each sets it again for what it leaves
        send_resends(qp, tx);
        if (qp.req.reads_posted) {
            send_repairs(qp, tx, now);
        }
    }
    std::uint32_t reads = outstanding_reads(qp);
    while (qp.req.send_offset < qp.send_queue.size() && !tx.full()) {
        SendWqe& wqe = qp.send_queue.at(qp.req.send_offset);
        if (qp.req.send_stopped && !wqe.assigned) {
            break; // posted after a WR that failed where it stands
        }
        if (wqe.is_local()) {
            if (!wqe.assigned && reads > 0 && wqe.wr.flags.has(rdma::send_read_fence)) {
                return; // NDK read fence: earlier READs finish first
            }
            if (!pass_local(qp, wqe)) {
                break;
            }
            continue;
        }
        if (wqe.answered()) {
            ++qp.req.send_offset; // all its responses came while a restart was to ask again
            ++reads;
            continue;
        }
        if (!check_local_keys(qp, wqe)) {
            pass_local(qp, wqe); // failed where it stands
            break;
        }
        qp.req.reads_posted |= wqe.is_read_or_atomic(); // here, not at post: the engine's own
        // A fence (or NDK's read fence) waits for earlier READs/atomics; max_rd_atomic bounds
        // how many of them may be outstanding.
        if (reads > 0 && wqe.wr.flags.any_of(rdma::send_fence | rdma::send_read_fence)) {
            return;
        }
        if (wqe.is_read_or_atomic() &&
            reads >= std::max<std::uint32_t>(qp.attr->max_rd_atomic, 1)) {
            return;
        }
        if (!send_packets(qp, wqe, tx, now)) {
            if (wqe.local_status != rdma::WcStatus::success) {
                pass_local(qp, wqe); // its keys went away between packets
                break;
            }
            return;
        }
        reads += wqe.is_read_or_atomic() ? 1U : 0U;
        ++qp.req.send_offset;
    }
    retire_local_heads(qp);
}

} // namespace prdma::swroce
