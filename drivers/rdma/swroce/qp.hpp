// An swroce queue pair (RC, or UD: ud.cpp): its send and receive queues, its CQs, and the state
// each engine role keeps on it (requester, completer, retransmission, responder). Every field has
// one owner role and one copy. Its configuration (the peer's GID, MAC and QPN, timers, limits) is
// the class's block (QpInit::attr), written here only by apply_modify (and by create_qp, before
// the QP is published, for a UD QP's path MTU: the port's); its state is a runtime fact of its
// own. Internal to the driver.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <memory>

#include <prdma/mem/memory_key.hpp>
#include <prdma/mem/region_io.hpp>
#include <prdma/mem/sge_cursor.hpp>
#include <prdma/rdmadev/driver.hpp>
#include <prdma/roce/packet.hpp>

#include "reorder_buffer.hpp"
#include "resend_queue.hpp"
#include "response_map.hpp"
#include "send_window.hpp"
#include "work_ring.hpp"

namespace prdma::swroce {

struct SwroceDevice;
struct SwroceSrq;

struct SwroceCq {
    SwroceDevice* device = nullptr;
    std::uint16_t queue_group = 0;
    WorkRing<rdma::WorkCompletion> ring;
    std::uint64_t overflows = 0; // completions lost to a full CQ (a CQ error event is raised)
    // Completion events (arm_cq): the application's eventfd, -1 for none, and whether the next
    // completion writes it. `armed` is set by the reaping thread and taken by the group's driver.
    int event_fd = -1;
    std::atomic<bool> armed{false};

    // Queues a completion; false (counted) when the CQ is full.
    bool push(const rdma::WorkCompletion& wc) noexcept;
};

inline constexpr std::uint32_t max_send_sge = 16;
inline constexpr std::uint32_t max_recv_sge = 16;
inline constexpr std::uint32_t max_inline_data = 256;
// The largest message (IBTA: 2^31 bytes).
inline constexpr std::uint64_t max_message_length = 1ULL << 31;

// A receive-queue entry: the WR's id and its own copy of the SGEs, taken at post time (the
// caller's sg_list is only valid during the post, as ibv_post_recv's is). One SGE is kept in the
// entry; more go to the slot's room in the QP's store, sized to the QP's max_recv_sge.
struct RecvWqe {
    std::uint64_t wr_id = 0;
    std::uint32_t num_sge = 0;
    rdma::Sge sge{};
    rdma::Sge* sge_store = nullptr; // set at creation; null when max_recv_sge <= 1

    [[nodiscard]] const rdma::Sge* sges() const noexcept { return num_sge > 1 ? sge_store : &sge; }
};

using mem::still_valid;

// READs and atomics are answered by responses and bounded by max_rd_atomic.
constexpr bool wqe_is_read_or_atomic(rdma::WrOpcode opcode) noexcept {
    return opcode == rdma::WrOpcode::rdma_read || opcode == rdma::WrOpcode::atomic_cmp_swap ||
           opcode == rdma::WrOpcode::atomic_fetch_add;
}

// A send-queue entry: the WR with what must outlive the post (its SGEs, its inline payload) and
// the requester's progress on it. A WR's one SGE stays in `wr.sge`; more SGEs, their checked keys
// and inline payloads go to the slot's room in the QP's stores (WqeStores), sized to the caps the
// QP was created with, so an entry is a few cache lines whatever the device's limits.
struct SendWqe {
    rdma::SendWr wr;                            // wr.sg_list is null or this slot's sge_store
    const mem::KeyEntry* first_entry = nullptr; // the checked lkey of a one-SGE WR
    // This slot's room (set at creation; null where the QP's caps need none).
    rdma::Sge* sge_store = nullptr;              // max_send_sge > 1
    const mem::KeyEntry** entry_store = nullptr; // max_send_sge > 1
    std::uint8_t* inline_store = nullptr;        // max_inline_data > 0
    // A UD QP's: the datagram's Ethernet, IP and UDP headers, copied from its AH at post (so the
    // AH may go once the post returns, as a NIC copies the address vector into its WQE).
    roce::HeaderTemplate* ud_headers = nullptr;
    std::uint32_t length = 0;    // message bytes
    std::uint32_t first_psn = 0; // assigned when first transmitted
    std::uint32_t psn_span = 0;
    std::uint32_t next_packet = 0; // next packet of this WQE to (re)transmit
    std::uint32_t responses = 0;   // response packets placed in order (READ, atomic ACK)
    // A READ's or atomic's place in the order they were sent: which ResponseMap holds the
    // responses placed past the first one missing (SwroceQp::map_of).
    std::uint32_t read_seq = 0;
    // Responses below this arrived or were asked for again; one missing past it is asked for
    // once later ones show it lost (ask_for_missing), not merely overtaken.
    std::uint32_t response_reach = 0;
    // Responses to ask for again by themselves at the requester's next pass, [repair_from,
    // repair_end) (none when equal), and when they were last asked for.
    std::uint32_t repair_from = 0;
    std::uint32_t repair_end = 0;
    std::uint64_t repair_tsc = 0;
    bool assigned = false; // first_psn / psn_span are set
    bool checked = false;  // SGE lkeys verified
    // A WR that fails where it stands (FAST_REG / LOCAL_INV rules, a bad WR found at post)
    // completes with this status once it reaches the head, in send-queue order, and the QP goes
    // to error then; nothing after it is transmitted.
    rdma::WcStatus local_status = rdma::WcStatus::success;
    std::uint32_t local_vendor_error = 0;

    [[nodiscard]] const rdma::Sge* sges() const noexcept { return wr.sges(); }
    // The checked key entries, in SGE order (written when the WQE is first sent).
    [[nodiscard]] const mem::KeyEntry** entries() noexcept {
        return wr.num_sge > 1 ? entry_store : &first_entry;
    }
    [[nodiscard]] mem::SgeCursor<rdma::Sge> cursor() const noexcept {
        return {{sges(), wr.num_sge}, {wr.num_sge > 1 ? entry_store : &first_entry, wr.num_sge}};
    }

    // Every SGE still maps what it was checked for; inline data has no keys to lose.
    [[nodiscard]] bool keys_valid() const noexcept {
        return wr.flags.has(rdma::send_inline) || cursor().keys_valid();
    }

    [[nodiscard]] bool is_local() const noexcept {
        return wr.opcode == rdma::WrOpcode::fast_reg || wr.opcode == rdma::WrOpcode::local_inv ||
               local_status != rdma::WcStatus::success;
    }

    [[nodiscard]] bool is_read_or_atomic() const noexcept {
        return wqe_is_read_or_atomic(wr.opcode);
    }

    // A READ or atomic all of whose responses were placed: done, though it completes only once
    // everything before it has.
    [[nodiscard]] bool answered() const noexcept {
        return is_read_or_atomic() && assigned && responses == psn_span;
    }

    // Whether response `index` was placed (before the first missing one, or kept past it in
    // `ahead`, the WQE's map if it has one).
    [[nodiscard]] bool placed(const ResponseMap* ahead, std::uint32_t index) const noexcept {
        return index < responses ||
               (ahead != nullptr && index > responses &&
                index - responses < ResponseMap::capacity && ahead->holds(index - responses));
    }

    // One past the run of responses missing from the first on: up to the next that arrived, or
    // the end when none after it did.
    [[nodiscard]] std::uint32_t first_gap_end(const ResponseMap* ahead) const noexcept {
        const std::uint32_t hole = ahead == nullptr ? 0 : ahead->first_hole();
        return hole == 0 ? psn_span : responses + hole;
    }
};

// READ response packets of a resource still to send, [next, end). Each goes out as the opcode its
// place in the whole READ gives (FIRST only for packet 0, LAST only for the last), answered again
// or not: rxe does the same, and its requester takes a READ asked again from the middle only so.
struct ResponseRun {
    std::uint32_t next = 0;
    std::uint32_t end = 0;
    [[nodiscard]] bool done() const noexcept { return next == end; }
};

// Responses of one READ a requester asked for again by themselves, in the order asked: a few
// disjoint runs, so two losses far apart cost their own packets, not everything between (one
// merged run resent ten responses per one lost, bench/loss read_bw 1 MiB at 1 % loss). A run that
// touches queued ones takes them in; with all taken, the nearest grows to cover the new one.
class RepairRuns {
public:
    static constexpr std::uint32_t capacity = 4;

    void add(ResponseRun run) noexcept {
        std::uint32_t kept = 0;
        for (std::uint32_t i = 0; i < count_; ++i) {
            if (run.next <= runs_[i].end && run.end >= runs_[i].next) {
                run = join(run, runs_[i]); // every run it touches is taken into it
            } else {
                runs_[kept++] = runs_[i];
            }
        }
        count_ = kept;
        if (count_ < capacity) {
            runs_[count_++] = run;
            return;
        }
        std::uint32_t nearest = 0;
        for (std::uint32_t i = 1; i < capacity; ++i) {
            if (distance(run, runs_[i]) < distance(run, runs_[nearest])) {
                nearest = i;
            }
        }
        runs_[nearest] = join(runs_[nearest], run);
    }
    [[nodiscard]] bool empty() const noexcept { return count_ == 0; }
    [[nodiscard]] ResponseRun& front() noexcept { return runs_[0]; }
    void pop_front() noexcept {
        for (std::uint32_t i = 1; i < count_; ++i) {
            runs_[i - 1] = runs_[i];
        }
        --count_;
    }

private:
    static ResponseRun join(ResponseRun a, ResponseRun b) noexcept {
        return {std::min(a.next, b.next), std::max(a.end, b.end)};
    }
    // Responses between two runs that do not touch.
    static std::uint32_t distance(ResponseRun a, ResponseRun b) noexcept {
        return a.next > b.end ? a.next - b.end : b.next - a.end;
    }

    std::array<ResponseRun, capacity> runs_{};
    std::uint32_t count_ = 0;
};

// IBTA "responder resources": one per READ or atomic the peer may have outstanding, kept after
// execution so a duplicate request is answered from here and never executed twice.
struct ResponderResource {
    bool valid = false;
    bool atomic = false;
    std::uint32_t psn = 0;  // of the request
    std::uint32_t span = 0; // response packets (PSNs) of a READ
    const mem::KeyEntry* entry = nullptr;
    mem::MemoryKey key = 0; // the rkey `entry` was checked for: still_valid() before each use
    std::uint64_t va = 0;
    std::uint32_t length = 0;
    std::uint64_t original = 0; // an atomic's result
    ResponseRun run;            // the READ's responses, or the rest of them asked for again
    RepairRuns repairs;         // a few asked for again by themselves: sent ahead of `run`
    bool sending = false;
};
inline constexpr std::uint32_t max_responder_resources = 16;

// What one QP did, for the stats query (written by its group's thread).
struct QpCounters {
    std::uint64_t tx_packets = 0;
    std::uint64_t rx_packets = 0;
    std::uint64_t tx_bytes = 0; // payload
    std::uint64_t rx_bytes = 0;
    std::uint64_t retransmissions = 0; // go-back-N restarts (timeout, NAK, probe)
    std::uint64_t timeouts = 0;        // of them, transport timer expiries
    std::uint64_t naks_sent = 0;
    std::uint64_t naks_received = 0;
    std::uint64_t duplicates = 0;
};

// The message the responder is in the middle of (IBTA 9.4: FIRST, MIDDLE..., LAST).
enum class InMessage : std::uint8_t { none, send, write };

inline constexpr std::uint32_t no_psn = 0xffffffffU; // outside the 24-bit PSN space

// Requester, completer and retransmission state.
struct RequesterState {
    std::uint32_t send_psn = 0;    // next PSN to assign to a new message
    std::uint32_t send_offset = 0; // WQEs from the head already fully transmitted
    // The last PSN the responder acknowledged (cumulatively, or implicitly by a response): a
    // go-back-N restart resends from the packet after it, never from the start of a message.
    std::uint32_t acked_psn = 0;
    // The highest PSN ever put on the wire (a READ or atomic: the last of its span), restarts
    // or not: what a stall probe resends, how far an ACK may go, and while acked_psn is short of
    // it the transport timer runs (send_psn numbers messages the port may not have taken yet).
    std::uint32_t sent_psn = 0;
    bool reads_posted = false; // a READ or atomic ever reached the requester (never reset)
    // A WR failed where it stands (FAST_REG rules, a bad WR at post): nothing posted after it is
    // ever transmitted; what came before still is, retransmissions included.
    bool send_stopped = false;
    std::uint64_t retransmit_deadline = 0; // TSC; 0 = nothing unacknowledged
    // What arm_timer adds to now, from the attributes and srtt (set_timer_periods): every ACK
    // re-arms the timers, so they are worked out when those change, not per packet.
    std::uint64_t timeout_cycles = 0;    // the transport timer's; 0 = it never fires
    std::uint64_t probe_wait_cycles = 0; // a stall's, before any probe
    // A stall (no ACK for several round trips: the last packets or their ACK lost) is resent
    // at this TSC, long before the transport timer; each probe without progress doubles the wait.
    std::uint64_t probe_deadline = 0;
    std::uint32_t probes_without_progress = 0;
    bool probing = false; // a probe is out: nothing beyond its one packet is sent until an answer
    std::uint32_t probe_psn = 0;
    int retries_left = 0;
    int rnr_retries_left = 0;
    std::uint64_t rnr_resume = 0;            // TSC at which an RNR-NAKed transmission may resume
    std::uint32_t packets_since_ack_req = 0; // AckReq cadence inside long messages
    SendWindow window;
    // Something goes again by itself, ahead of anything new: responses some WQE asks for again
    // (repair_from), or packets a selective-repeat peer NAKed (resends).
    bool repairs_pending = false;
    // The last restart a sequence-error NAK or a READ gap caused, so the same loss reported twice
    // (a NAK re-sent for an AckReq, more responses past the gap) restarts once.
    std::uint32_t restart_psn = no_psn;
    std::uint64_t restart_tsc = 0;
    // The last packet a selective-repeat peer's NAK had resent alone, when, and how often in a
    // row it was NAKed again since (resend_selected): a peer that NAKs the same PSN again and
    // again does not keep what came after it, after all. Apart from restart_psn, which guards
    // the go-back-N restarts.
    std::uint32_t resent_psn = no_psn;
    std::uint64_t resent_tsc = 0;
    std::uint32_t resent_repeats = 0;
    // Packets a selective-repeat peer NAKed, each to go again alone (resend_selected).
    ResendQueue resends;
    // READs and atomics numbered as they are first sent (SendWqe::read_seq), and the oldest
    // still in flight: its ResponseMap is the first of the QP's (SwroceQp::map_of).
    std::uint32_t read_seq_next = 0;
    std::uint32_t read_seq_head = 0;
    // Round-trip time, smoothed, from one timed AckReq packet at a time (none across a restart,
    // as Karn's rule says): how long the same loss may be reported again.
    std::uint64_t srtt = 0;
    // The shortest round trip timed: those samples, and toward a selective-repeat peer a READ or
    // atomic sent the first time, to its first response (timed_read). How long a QP that READs
    // waits before it probes a stall (probe_wait); a READ's sample is not srtt's, it holds the
    // queue of responses before the READ's first (300 us at 64 KiB, several ms at 1 MiB).
    std::uint64_t min_rtt = 0;
    std::uint32_t timed_psn = 0;
    std::uint64_t timed_tsc = 0;
    bool timing = false;
    bool timed_read = false; // what is timed, or was last, is a READ's or atomic's round trip
    // A READ repair's round trip, smoothed, from the first response of one repair at a time
    // (none when asked again): how long responses asked for may take before they are asked for
    // again (chase_responses). Apart from srtt: a response merely reordered past the slack
    // answers its repair early, and the probe timers must not shrink by it.
    std::uint64_t repair_rtt = 0;
    std::uint32_t repair_timed_psn = no_psn;
    std::uint64_t repair_timed_tsc = 0;
};

// Responder state.
struct ResponderState {
    std::uint32_t expected_psn = 0;
    std::uint32_t msn = 0;
    InMessage in_message = InMessage::none;
    std::uint32_t recv_offset = 0; // bytes of the current SEND placed in the receive WQE
    // On an SRQ: the message in progress has taken its WQE from the SRQ into held_receive.
    bool holds_receive = false;
    const mem::KeyEntry* write_entry = nullptr; // the checked rkey of the WRITE in progress
    mem::MemoryKey write_key = 0;
    std::uint64_t write_va = 0;
    std::uint32_t write_length = 0;     // bytes of it still to come
    std::uint32_t write_dma_length = 0; // its RETH length: a WRITE_WITH_IMM's byte_len
    std::array<ResponderResource, max_responder_resources> resources{};
    std::uint32_t next_resource = 0; // round-robin slot for the next READ/atomic
    bool responses_pending = false;  // some resource may have responses to send
    // A sequence-error NAK is out for expected_psn; the highest PSN seen past the gap since then
    // tells a new go-back-N pass (a PSN at or before it) from the rest of the old one.
    bool nak_sent = false;
    std::uint32_t nak_highest_psn = 0;
    // An invalid-request / remote-access / remote-operation NAK is queued: once it is on its way
    // the QP goes to ERR (IBTA responder classes A-C; what rxe does).
    bool error_after_nak = false;
    bool ack_pending = false;
    std::uint32_t ack_psn = 0;
    std::uint8_t ack_syndrome = 0;
    // Packets that came past a gap, waiting for it to fill (reorder.cpp). They hold mbufs: freed
    // by release_kept before the state is reset or the QP goes away.
    ReorderBuffer kept;
};

// A frame of the QP's, made from its template whenever its peer may have changed (see
// refresh_tx_headers). Its ACK, whole: only the PSN, the AETH and the ICRC differ from one ACK
// to the next, so sending one is a copy, two words and the ICRC of those 8 bytes from the CRC state
// kept at the PSN (emit_ack). A request's headers up to and with the BTH (of a SEND ONLY without
// payload): a data packet copies them and writes its lengths, BTH fields, extension headers,
// payload and ICRC (emit_request), not a header build.
struct PrebuiltFrame {
    std::array<std::uint8_t, 96> bytes{}; // the longest: an ACK with tagged IPv6, 86 bytes
    roce::FrameLayout layout;             // not ok() until the QP has a peer
    roce::IcrcPrefix icrc;                // an ACK's, up to its PSN
};

// The rooms of a QP's WQE slots, sized at creation to its caps: SGEs beyond the first, their
// checked keys, inline payloads.
struct WqeStores {
    std::unique_ptr<rdma::Sge[]> send_sges;
    std::unique_ptr<const mem::KeyEntry*[]> send_entries;
    std::unique_ptr<std::uint8_t[]> inline_bytes;
    std::unique_ptr<rdma::Sge[]> recv_sges;
    std::unique_ptr<roce::HeaderTemplate[]> ud_headers; // a UD QP's, one per send slot
    std::size_t bytes = 0;                              // what they hold
};

struct SwroceQp {
    SwroceDevice* device = nullptr;
    QpCounters counters;
    std::uint32_t qpn = 0;
    std::uint32_t pd = 0;
    rdma::QpType type = rdma::QpType::rc;
    SwroceCq* send_cq = nullptr;
    SwroceCq* recv_cq = nullptr;
    std::uint16_t queue_group = 0;
    rdma::QpCaps caps{};
    bool signal_all = false;
    // Its peer (GID, MAC, QPN), timers and limits: the class's block (QpInit::attr), written
    // only by apply_modify on whoever drives the group (and by create_qp before it is published).
    rdma::QpAttr* attr = nullptr;
    // The Ethernet, IP and UDP headers of its frames, from `attr` (refresh_tx_headers).
    roce::HeaderTemplate tx_headers;
    PrebuiltFrame ack_frame;         // from tx_headers (refresh_tx_headers)
    PrebuiltFrame request_frame;     // the same
    WorkRing<RecvWqe> receive_queue; // unused on an SRQ
    // On an SRQ (shared_receive_queue.hpp): where its WQEs come from, and the one the message in
    // progress took (its SGEs copied into held_sges, sized to the SRQ's max_sge).
    SwroceSrq* srq = nullptr;
    RecvWqe held_receive;
    std::unique_ptr<rdma::Sge[]> held_sges;
    WorkRing<SendWqe> send_queue;
    WqeStores wqe_stores; // the rooms the queues' slots point into
    // Room for a selective-repeat peer's packets past a loss (resp.kept lends it), allocated by the
    // first modify that sets QpAttr::selective_repeat, kept until the QP is destroyed.
    std::unique_ptr<ReorderBuffer::Slot[]> reorder_room;
    // response_map_slots maps for its READs and atomics in flight (an RC QP's; null for UD).
    std::unique_ptr<ResponseMap[]> response_maps;
    RequesterState req;
    ResponderState resp;
    StatusCode post_error = StatusCode::ok; // why the last post took fewer WRs than offered
    // From INIT to RTR until ERR or RESET: what a connection-bound region (seed 002) must match.
    mem::ConnectionId connection = mem::no_connection;
    bool destroying = false;
    bool active = false; // in its group's active list (QueueGroupState::active)
    // progress=service: in its group's doorbell ring, not yet taken by the engine (set by the
    // posting thread, cleared by the engine before it looks at the queues).
    std::atomic<bool> rung{false};
    bool error_reported = false; // qp_fatal / last_wqe_reached recorded for this entry into ERR
    // Written by whoever drives the group (a modify, the engine's own move to ERR) and read by
    // control threads (DeviceOps::qp_state): relaxed, a plain load and store on the data path.
    std::atomic<rdma::QpState> current_state{rdma::QpState::reset};

    [[nodiscard]] rdma::QpState state() const noexcept {
        return current_state.load(std::memory_order_relaxed);
    }
    void set_state(rdma::QpState state) noexcept {
        current_state.store(state, std::memory_order_relaxed);
        if (state == rdma::QpState::err || state == rdma::QpState::reset) {
            connection = mem::no_connection; // its bound regions are unusable from now on
        }
    }
    [[nodiscard]] bool has_peer_mac() const noexcept { return attr->dest_mac.has_value(); }
    // The map of a READ or atomic in flight, or null when older ones hold every map.
    [[nodiscard]] ResponseMap* map_of(const SendWqe& wqe) const noexcept {
        const std::uint32_t age = wqe.read_seq - req.read_seq_head;
        return response_maps && age < response_map_slots
                   ? &response_maps[wqe.read_seq % response_map_slots]
                   : nullptr;
    }
    // The oldest READ or atomic in flight completed: its map is clean for the next.
    void retire_read() noexcept {
        if (response_maps) {
            response_maps[req.read_seq_head % response_map_slots].clear();
        }
        ++req.read_seq_head;
    }
    // Nothing is in flight any more (a flush, a RESET): every map clean, the order restarts.
    void forget_reads() noexcept {
        for (std::uint32_t i = 0; response_maps && i < response_map_slots; ++i) {
            response_maps[i].clear();
        }
        req.read_seq_head = req.read_seq_next;
    }
    [[nodiscard]] std::uint32_t mtu() const noexcept { return rdma::mtu_bytes(attr->path_mtu); }
};

} // namespace prdma::swroce
