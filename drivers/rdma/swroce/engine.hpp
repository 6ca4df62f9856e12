// The RC engine's roles, as Linux rxe splits them (rxe_req.c, rxe_resp.c, rxe_comp.c), over one
// send-queue layer so no role imports another in a loop:
//
//   send_queue.cpp   completions of send WQEs, entering ERR once, flushing
//   requester.cpp    WQEs -> packets: segmenting, headers, gather, AckReq cadence, send window
//   responder.cpp    packets -> memory, as named stages; ACK/NAK; READ responses, atomics
//   completer.cpp    ACKs, NAKs and responses -> send completions, go-back-N restart points
//   retransmit.cpp   transport and RNR timers from the TSC
//   rx.cpp / tx.cpp  classify and steer received frames; build, batch and send frames
//   queue_group.cpp  progress: control requests, rx burst, roles, tx burst, timers
//
// Internal to the driver; tests/unit/swroce drives each role with crafted frames through it.
// Everything here runs on the lcore that polls the queue group: no allocation, no lock, no throw.
#pragma once

#include <array>
#include <cstdint>

#include <rte_ring.h>

#include <prdma/roce/packet.hpp>

#include "swroce_device.hpp"

struct rte_mbuf;

namespace prdma::swroce {

inline constexpr std::uint16_t burst_size = 32;
// Frames one progress takes from the port: the ACK it owes goes out after at most these many.
// perftest's write_bw reaps one completion per 100 WRs of a 128-deep queue; an ACK per 32 frames
// reached the requester when its peer had little or nothing left of the last 28, and both sides
// idled in turn (64 B write_bw over memif, 8 alternated runs: 2.49 Mpps at 32, 2.87 at 16).
inline constexpr std::uint16_t rx_burst_size = 16;
// How many progresses one poll_cq runs at most while rx bursts come full (a ring's worth of
// frames at 16 a burst would be 64; 8 keeps a poll under ~20 us).
inline constexpr unsigned max_progress_rounds_per_poll = 8;

// Frames one progress call builds before it hands them to the port.
struct TxBatch {
    std::array<rte_mbuf*, 64> mbufs; // left uninitialised: only [0, count) is ever read
    std::uint16_t count = 0;
    [[nodiscard]] bool full() const noexcept { return count == mbufs.size(); }
};

// One rx burst from the port; room for what the fault devargs add (duplicates, frames they held
// back).
struct RxBurst {
    std::array<rte_mbuf*, std::size_t{2} * burst_size> mbufs; // only [0, count) is ever read
    std::uint16_t count = 0;
};

// Where a packet's payload comes from: a send WQE's message, or a region (READ responses).
struct Payload {
    const SendWqe* wqe = nullptr;
    const mem::KeyEntry* region = nullptr;
    std::uint64_t addr = 0;
    std::uint32_t offset = 0;
    std::uint32_t length = 0;
};

// ---- tx.cpp ----
// Per-QP UDP source port: ECMP entropy, as rxe and RoCE NICs spread flows.
inline std::uint16_t udp_source_port(const SwroceQp& qp) noexcept {
    return static_cast<std::uint16_t>(0xc000U | (qp.qpn & 0x3fffU));
}
// Every header of this device's frames towards `gid` at `mac` up to the UDP header (source port
// and BTH left to the caller).
roce::FrameHeaders headers_towards(const SwroceDevice& dev, const rdma::Gid& gid,
                                   const MacAddress& mac) noexcept;
// The BTH of a packet of `qp` towards its peer; emit adds the rest from the QP's template.
roce::TransportHeaders headers_for(const SwroceQp& qp, roce::Opcode opcode,
                                   std::uint32_t psn) noexcept;
// Makes the QP's header template again from its attributes: whenever its peer may have changed.
void refresh_tx_headers(SwroceQp& qp) noexcept;
// Builds one frame into the batch; false when no mbuf could be had (counted).
bool emit(SwroceQp& qp, TxBatch& tx, const roce::TransportHeaders& h,
          const Payload& payload) noexcept;
// The QP's ACK or NAK for `psn` into the batch, from its prebuilt frame (PrebuiltFrame); false
// when no mbuf could be had (counted) or the QP has no peer yet.
bool emit_ack(SwroceQp& qp, TxBatch& tx, std::uint32_t psn, const roce::Aeth& aeth) noexcept;
// One packet of a SEND or WRITE message (not a READ request or an atomic, which `emit` builds).
struct RequestPacket {
    roce::Opcode opcode = roce::Opcode::rc_send_only;
    std::uint32_t psn = 0;
    std::uint32_t offset = 0; // of its payload in the message
    std::uint32_t length = 0;
    bool ack_req = false;
    bool solicited = false;
};
// Byte for byte what `emit` makes of the same packet, from the QP's prebuilt request headers:
// the lengths, the BTH fields and the extension headers written in place, no header build.
bool emit_request(SwroceQp& qp, TxBatch& tx, const SendWqe& wqe,
                  const RequestPacket& packet) noexcept;
// A UD WQE's one datagram: `h` (BTH, DETH, immediate) behind the headers it copied from its AH,
// the sending QP's UDP source port, the whole message as payload.
bool emit_datagram(SwroceQp& qp, TxBatch& tx, const SendWqe& wqe,
                   const roce::TransportHeaders& h) noexcept;
// Sends a batch; what the port refuses waits in the group's backlog. False: the backlog is not
// empty, so make no new frames until it is.
bool transmit(SwroceDevice& dev, unsigned group, TxBatch& tx) noexcept;
// Sends what the backlog holds; true when it is empty.
bool flush_backlog(SwroceDevice& dev, unsigned group) noexcept;
// One frame made outside a batch (ARP): sent now, or behind what the backlog holds.
void send_frame(SwroceDevice& dev, unsigned group, rte_mbuf* mbuf,
                SwroceCounters& counters) noexcept;

// ---- send_queue.cpp ----
void complete_send(SwroceQp& qp, const SendWqe& wqe, rdma::WcStatus status) noexcept;
// The QP goes to ERR with `status` for the head WQE; everything queued is flushed (IBTA 10.3.1).
void fail_qp(SwroceQp& qp, rdma::WcStatus status, std::uint32_t vendor_error = 0) noexcept;
// A responder error (class A-C): no WR of ours failed, so everything is flushed.
void fail_responder(SwroceQp& qp) noexcept;
// Completes local WRs that reached the head (nothing before them is outstanding).
void retire_local_heads(SwroceQp& qp) noexcept;
// A WR under way that fails where it stands (a READ whose local region went away): it completes
// with `status` once it reaches the head, the WRs before it complete first, nothing after it is
// sent, and the QP goes to error then.
void fail_in_order(SwroceQp& qp, SendWqe& wqe, rdma::WcStatus status) noexcept;
// The transmitted WQE whose packets include `psn` (a READ's: its responses), or nullptr.
SendWqe* wqe_holding(SwroceQp& qp, std::uint32_t psn) noexcept;

// ---- requester.cpp ----
// Checks every SGE's lkey once, when the WQE is first transmitted; false (the WQE's local_status
// says why) when one is refused.
bool check_send_keys(SwroceQp& qp, SendWqe& wqe) noexcept;
// Transmits what the send queue holds beyond what is already on the wire.
void run_requester(SwroceQp& qp, TxBatch& tx, std::uint64_t now) noexcept;
// Runs the FAST_REG / LOCAL_INV WRs that stand where the requester is, without transmitting: a
// post that does not ring (DEFER) still makes their keys valid before it returns.
void run_local_at_post(SwroceQp& qp) noexcept;

// ---- responder.cpp ----
// Scatters `payload` into the receive WQE the QP holds, from resp.recv_offset on; false when it
// does not fit or a receive lkey is refused (a local length or protection error).
bool place_in_receive(SwroceQp& qp, std::span<const std::uint8_t> payload) noexcept;
// One packet for the responder of `qp` (a request: SEND, WRITE, READ, atomic).
void respond(SwroceQp& qp, const roce::ParsedFrame& frame) noexcept;
// The coalesced ACK or NAK the responder owes.
void send_ack(SwroceQp& qp, TxBatch& tx) noexcept;
// Pending READ responses and atomic ACKs, oldest resource first.
void send_responses(SwroceQp& qp, TxBatch& tx) noexcept;
// The sequence-error NAK (or none) a request past a gap is owed, as IBTA's responder sends it.
void nak_gap(SwroceQp& qp, const roce::ParsedFrame& frame) noexcept;
// The NAK for the gap the kept packets wait behind, once, when it was not only a reordering.
void nak_kept_gap(SwroceQp& qp) noexcept;
// An ACK for everything taken so far, whether the requests asked for one or not (a filled gap a
// selective-repeat peer's window waits on); it waits behind the responses still to go.
void ack_taken(SwroceQp& qp) noexcept;

// ---- reorder.cpp: requests that arrive past a gap (ReorderBuffer) ----
// Keeps `mbuf`, a request of `qp` past a gap (its PSN after the expected one); false when it is
// not kept (too far ahead, the group keeps its most, or that PSN is kept already): the responder
// then takes it as IBTA's does.
bool keep_past_gap(SwroceDevice& dev, unsigned group, SwroceQp& qp, const roce::ParsedFrame& frame,
                   rte_mbuf* mbuf, std::uint64_t now) noexcept;
// After the responder took a packet (the expected PSN was `expected_before`): runs the kept
// packets its filling the gap put in sequence, through `frame` (the group's scratch), or lets
// them go when it drew a NAK.
void run_kept(SwroceDevice& dev, unsigned group, SwroceQp& qp, roce::ParsedFrame& frame,
              std::uint32_t expected_before, std::uint64_t now) noexcept;
// From the QP's turn in a progress: the NAK for a gap open longer than a reordering takes (20 us
// once a burst emptied the port's queue, so a late packet is not still waiting there; 80 us in
// any case), and what was kept behind it let go.
void nak_overdue_gap(SwroceQp& qp, std::uint64_t now) noexcept;
// The same for a selective-repeat peer, whose kept packets stay: a NAK for each PSN missing
// behind them (of the first missing PSN, naming the missing one in its MSN), once a PSN four past
// it came or the gap is overdue as above, and for all still missing again every 40 us while the
// first stays missing; after 8 such rounds the gap is given up (kept packets freed, the NAK asks
// the requester to go back N).
void nak_missing(SwroceQp& qp, TxBatch& tx, std::uint64_t now) noexcept;
// Frees every kept packet (the QP is reset, flushed, destroyed or given a new receive PSN).
void release_kept(SwroceQp& qp) noexcept;

// ---- completer.cpp ----
// One ACK, NAK, READ response or atomic ACK for the requester of `qp`.
void complete(SwroceQp& qp, const roce::ParsedFrame& frame, std::uint64_t now) noexcept;

// ---- ud.cpp ----
// Why a UD WR cannot be taken (invalid_parameter), or ok: SEND or SEND with immediate only, to a
// ready AH of the QP's PD, of one packet at most.
StatusCode admit_ud(const SwroceQp& qp, const rdma::SendWr& wr) noexcept;
// What a taken UD WR keeps of its AH: the datagram's headers.
void fill_ud(const rdma::SendWr& wr, SendWqe& wqe) noexcept;
// The UD requester: each WQE one datagram, completed once it is in the batch.
void run_ud_requester(SwroceQp& qp, TxBatch& tx) noexcept;
// One UD SEND for `qp`: its Q_Key checked, the GRH and payload placed in the next receive.
void receive_datagram(SwroceQp& qp, const roce::ParsedFrame& frame) noexcept;

// ---- retransmit.cpp ----
std::uint64_t transport_timeout_cycles(const SwroceQp& qp) noexcept;
std::uint64_t rnr_timer_cycles(const SwroceDevice& dev, std::uint8_t code) noexcept;
// Works out the periods arm_timer adds (the transport timeout, the stall probe's wait) from the
// QP's attributes and round-trip time: after a modify and after each new round-trip sample.
void set_timer_periods(SwroceQp& qp) noexcept;
void arm_timer(SwroceQp& qp, std::uint64_t now) noexcept;
// After arm_timer for a READ or atomic sent while nothing was unacknowledged: its first probe
// waits at least the millisecond floor.
void hold_first_probe(SwroceQp& qp, std::uint64_t now) noexcept;
// Go back N: the next requester pass resends from `from_psn`.
void rewind(SwroceQp& qp, std::uint32_t from_psn) noexcept;
// After a rewind, the responder may acknowledge packets the requester was about to send again
// (a probe answered by an ACK of everything: the peer was slow, nothing was lost): they are not
// sent again.
void skip_acknowledged(SwroceQp& qp) noexcept;
// The restart a sequence-error NAK asks for, at once; false when it reports a loss already being
// repaired.
bool fast_restart(SwroceQp& qp, std::uint32_t from_psn, std::uint64_t now) noexcept;
// What a selective-repeat peer's sequence-error NAK of `nak_psn` naming `missing` (in its MSN)
// asks of the requester: that packet alone, at once (a READ or atomic request: go back N from
// it), nothing after it. The same NAK again before the resend could have arrived is ignored;
// after three resends of it in a row the requester goes back N from `nak_psn`.
void resend_selected(SwroceQp& qp, std::uint32_t nak_psn, std::uint32_t missing,
                     std::uint64_t now) noexcept;
// Responses [from, end) of a READ or atomic were lost: the requester's next pass asks for them
// alone (a READ for just those packets, an atomic again), nothing else is sent again.
void ask_for_responses(SwroceQp& qp, SendWqe& wqe, std::uint32_t from, std::uint32_t end,
                       std::uint64_t now) noexcept;
// The responses of `wqe` before `upto` that neither arrived nor were asked for are asked for, a
// run at a time; response_reach moves to `upto`. False when none was missing.
bool ask_for_missing(SwroceQp& qp, SendWqe& wqe, std::uint32_t upto, std::uint64_t now) noexcept;
// A READ or atomic that something after it overtook lacks responses: its tail never came, or the
// responses asked for have not come in the time they should have. They are asked for again.
void chase_responses(SwroceQp& qp, SendWqe& wqe, std::uint64_t now) noexcept;
// The transport timer: a retry from the first unacknowledged packet, or retry_exceeded.
void check_timer(SwroceQp& qp, std::uint64_t now) noexcept;

// ---- rx.cpp ----
// One received frame on `group`. Returns true when the frame was handed over to another queue
// group (its QP lives there) and must not be freed here.
// `frame` is the burst's scratch: parsed into for each frame, nothing kept from one to the next.
bool handle_frame(SwroceDevice& dev, unsigned group, rte_mbuf* mbuf, std::uint64_t now,
                  bool handed_over, roce::ParsedFrame& frame) noexcept;

// One event counted where both readers look: the QP's own counters (QpStatus) and its group's,
// which the device's counters sum.
inline void count_event(SwroceQp& qp, std::uint64_t QpCounters::*per_qp,
                        std::uint64_t SwroceCounters::*per_group) noexcept {
    ++(qp.counters.*per_qp);
    ++(qp.device->counters_of(qp).*per_group);
}

// ---- queue_group.cpp ----
// Receive, protocol, transmit and timers for one queue group; returns the frames received.
std::uint16_t progress_group(SwroceDevice& dev, unsigned group) noexcept;
// The requester of one QP right after a post that rings the doorbell.
void kick_requester(SwroceQp& qp) noexcept;
// `qp` may have frames to make: its group's next progress serves it.
inline void activate(QueueGroupState& group, SwroceQp& qp) noexcept {
    if (!qp.active) {
        qp.active = true;
        group.active.push_back(&qp); // reserved for every QP of the group: never allocates
    }
}
// Takes a QP leaving its group's table out of the active list (control path, or the owner).
void deactivate(QueueGroupState& group, SwroceQp& qp) noexcept;

// ---- service.cpp (progress=service) and poller.cpp (Context::attach_poller) ----
// Whether the calling thread runs `group`'s engine itself when it posts: it drives the group, or
// nobody does (else a service or another thread's poller does, and the post rings instead).
inline bool posts_run_engine(const SwroceDevice& dev, unsigned group) noexcept {
    if (dev.service_id) {
        return false;
    }
    const std::uintptr_t owner = dev.groups[group]->owner.load(std::memory_order_relaxed);
    return owner == 0 || (owner & ~control_hold_bit) == this_thread_token();
}
// An application thread posted to `qp`: its group's engine looks at its queues next progress.
// One exchange on the QP's flag, and an enqueue only when the engine took the last ring.
inline void ring_doorbell(SwroceQp& qp) noexcept {
    if (!qp.rung.load(std::memory_order_relaxed) &&
        !qp.rung.exchange(true, std::memory_order_acq_rel)) {
        // Never full: sized for every QP of the group, each in it at most once.
        (void)rte_ring_mp_enqueue(qp.device->groups[qp.queue_group]->doorbell, &qp);
    }
}
// The engine's side: the QPs rung since the last progress become active (a QP in error has its
// new WRs flushed). Returns how many there were.
unsigned take_doorbells(SwroceDevice& dev, unsigned group) noexcept;
// Whether EAL has a service lcore for progress=service; the error says what to pass.
Status check_service_lcores(const std::string& device_name);
// Registers the device's progress service, maps it to an EAL service lcore and starts it; an
// error says what to pass to EAL when there is no service lcore.
Status start_progress_service(SwroceDevice& dev);
// Stops the service and waits until no lcore runs it (close).
void stop_progress_service(SwroceDevice& dev) noexcept;
// DeviceOps::attach_poller / detach_poller and FastPathOps::progress (poller.cpp).
Status attach_poller(rdma::driver::Device& device, std::optional<std::uint16_t> group,
                     void** poller);
void detach_poller(rdma::driver::Device& device, void* poller);
std::uint32_t swroce_progress(void* poller);
// ARP requests and neighbour solicitations due again, and resolutions given up on (neighbour.cpp);
// group 0's progress runs it. Returns when to look again: no_neighbour_due once none is in flight.
std::uint64_t poll_neighbours(SwroceDevice& dev, std::uint64_t now);

} // namespace prdma::swroce
