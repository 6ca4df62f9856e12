// The swroce device: its port, ARP resolver, queues and the control work in flight. Internal to
// the driver.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

struct rte_mbuf;
struct rte_mempool;
struct rte_ring;
struct rte_pcapng;

#include <prdma/rdmadev/driver.hpp>

#include "address_handle.hpp"
#include "arp.hpp"
#include "counters.hpp"
#include "devargs.hpp"
#include "fault_injection.hpp"
#include "neighbour_discovery.hpp"
#include "port.hpp"
#include "qp.hpp"
#include "shared_receive_queue.hpp"

namespace prdma::swroce {

// A modify on its way to the QP: the class's request, which stays valid until the modify
// completes (DeviceOps::modify_qp), and the peer's MAC when swroce resolved it with ARP.
struct QpModify {
    const rdma::QpAttr* attr = nullptr;
    rdma::QpAttrMask mask;
    std::optional<MacAddress> resolved_mac;
};

struct SwroceAh;

// What waits for the peer's MAC (ARP or neighbour discovery answering for `peer`): a QP's RTR (`qp`
// and its modify) or an address handle's creation (`ah`).
struct PendingResolution {
    SwroceQp* qp = nullptr;
    rdma::driver::ControlToken token;
    rdma::Gid peer{};
    QpModify modify;
    SwroceAh* ah = nullptr;
};

struct NeighbourOutcome {
    rdma::Gid peer{};
    std::optional<MacAddress> mac; // none: the resolution failed
};

struct PendingDestroy {
    SwroceQp* qp = nullptr;
    rdma::driver::ControlToken token;
};

// Control requests for a queue group's owner (ENGINE.md "Ownership"). Once a thread other than the
// caller polls a group, the control path no longer writes or frees anything of that group: it
// allocates what the request needs, enqueues the request on the group's `control` ring and returns
// pending; the owner executes it between bursts in progress_group (no allocation, no lock, no
// system call) and hands it back through the device's `control_done` ring; control_progress frees
// what is left and calls complete_control. A request is made and freed on the control path only.
enum class GroupWork : std::uint8_t {
    create_cq,  // nothing to publish: the hop orders the CQ's first use with its creation
    destroy_cq, // nothing to unpublish: the hop orders its freeing after the owner's last touch
    create_qp,  // the owner moves `qp_storage` into its QP table slot
    modify_qp,  // the owner applies `modify` to `qp`
    destroy_qp, // the owner flushes `qp` and moves it out of its slot into `qp_storage`
    quiesce,    // nothing: coming back proves the owner finished the burst it was in (MR free)
    // Group 0's owner (the resolver is group 0's) looks `neighbour` up, or starts its resolution,
    // for an RTR or address handle without the peer's MAC; that completes when the MAC is known
    // (neighbour_mac, or an outcome).
    resolve_neighbour,
};

struct QuiesceWait;

struct GroupRequest {
    GroupWork work = GroupWork::quiesce;
    unsigned group = 0;
    rdma::driver::ControlToken token;
    SwroceCq* cq = nullptr;
    SwroceQp* qp = nullptr;
    std::unique_ptr<SwroceQp> qp_storage;
    QpModify modify;
    QuiesceWait* wait = nullptr;
    rdma::Gid neighbour{};
    std::optional<MacAddress> neighbour_mac;
    NeighbourRequestResult neighbour_result = NeighbourRequestResult::pending;
};

// A deregistration waiting until every group another thread owns has passed a quiescent point.
struct QuiesceWait {
    rdma::driver::ControlToken token;
    std::vector<unsigned> unsent; // groups whose control ring was full: asked again later
    unsigned outstanding = 0;     // requests sent and not back yet
};

inline constexpr unsigned control_ring_size = 256; // per group
inline constexpr unsigned event_ring_size = 512;   // per group
inline constexpr std::uint64_t no_neighbour_due =
    ~std::uint64_t{0}; // QueueGroupState::neighbour_due

// One queue group: one rx/tx queue pair of the port, polled by one thread (DESIGN "Fast path
// rules"). Everything here is written by that thread only, except `owner`, claimed once.
struct QueueGroupState {
    SwroceCounters counters;
    // The fault devargs (rx_*, tx_*): one injector per direction, each with its own seed.
    FaultInjector rx_faults;
    FaultInjector tx_faults;
    ::rte_ring* handover = nullptr; // frames that arrived elsewhere for this group's QPs
    // Frames the port's queue refused (full ring): sent first at the next progress, and until
    // they are out no new frame is made, so a slow peer slows us down instead of costing
    // retransmissions.
    std::array<rte_mbuf*, 128> tx_backlog{};
    std::uint16_t tx_backlog_count = 0;
    // mbufs for the frames this group makes, taken from its pool in bulk (tx.cpp frame_mbuf).
    std::array<rte_mbuf*, 32> mbuf_stash{};
    std::uint16_t mbuf_stash_count = 0;
    // The burst's parsed-frame scratch, made once: a ParsedFrame zeroes ~270 bytes when built.
    roce::ParsedFrame rx_frame;
    // GroupRequests for the owner: any control thread enqueues, only the owner dequeues.
    ::rte_ring* control = nullptr;
    // QP events the data path recorded ((type << 24) | qpn), raised by control_progress.
    ::rte_ring* events = nullptr;
    // One past the highest slot of this group's QP range ever published: what progress scans.
    // Written by whoever drives the group, like the slots themselves.
    std::uint32_t qp_slot_end = 0;
    // The last progress left frames to make (its batch filled, or the port refused some): the
    // next one is not empty, whatever it receives.
    bool work_left = false;
    std::uint32_t idle_polls = 0; // empty polls in a row, for the timers' turn (queue_group.cpp)
    // When the resolver's timers (its retries and its giving up) are looked at next: group 0 only,
    // while a resolution is in flight (whoever starts one sets it), never otherwise.
    std::uint64_t neighbour_due = no_neighbour_due;
    // Where the next full scan starts serving QPs: the one the port stopped the last at.
    std::uint32_t serve_from = 0;
    // The QPs that may have frames to make (received a frame, were posted to, or had work left at
    // the last progress); reserved for every QP of the group, so adding one never allocates. A
    // progress serves these; every `full_scan_interval`th serves every QP and runs the timers.
    std::vector<SwroceQp*> active;
    std::uint32_t progresses = 0;
    std::uint32_t scans_deferred = 0; // full scans put off while bursts came full (queue_group.cpp)
    // The last burst emptied the port's queue (it came back short): a packet a gap waits for is
    // not sitting there (reorder.cpp).
    bool rx_drained = true;
    // Received mbufs the group's QPs keep past gaps: bounded, so the port's pool keeps room.
    std::uint32_t kept_frames = 0;
    // The thread that polls this group (0 until one does), or a control thread acting on it with
    // control_hold_bit set (GroupHold); the control path drives only groups nobody claimed, or
    // that its own thread claimed. Under progress=service the service holds it for one progress
    // at a time and leaves it 0 between two.
    std::atomic<std::uintptr_t> owner{0};
    // progress=service only: the QPs application threads posted to since the engine last looked
    // (multi-producer, the engine consumes; a QP is in it at most once, SwroceQp::rung), and how
    // many control threads wait to hold the group (the service leaves it alone meanwhile).
    ::rte_ring* doorbell = nullptr;
    std::atomic<unsigned> holds_wanted{0};
};

// A per-thread token, so ownership needs no system call to identify the caller. Aligned, so its
// low bit is free to mark a control-path hold.
inline std::uintptr_t this_thread_token() noexcept {
    alignas(8) static thread_local const char token = 0;
    return reinterpret_cast<std::uintptr_t>(&token);
}
inline constexpr std::uintptr_t control_hold_bit = 1;

inline constexpr std::uint32_t first_qpn = 0x11; // QPN 0 and 1 are IB's special QPs

struct SwroceDevice;

// A thread's attachment to queue groups [first_group, end_group) (poller.cpp).
struct SwrocePoller {
    SwroceDevice* device = nullptr;
    std::uintptr_t token = 0; // the attaching thread's
    unsigned first_group = 0;
    unsigned end_group = 0;
};

struct SwroceDevice {
    rdma::DeviceId id = rdma::invalid_device;
    // The device's key table and translation tables, owned by rdmadev's Device and kept from probe
    // on: every SGE, RETH and AtomicETH checks a key through it without a device-table lookup.
    mem::MemoryRegistry* registry = nullptr;
    std::string name;
    SwroceDevargs args;
    SwrocePort port;
    // The peers' MACs: ARP on an IPv4 device, neighbour discovery on an IPv6 one (one of them).
    std::unique_ptr<ArpResolver> arp;
    std::unique_ptr<NdResolver> nd;
    // Resolutions the resolver finished (a MAC, or none after the last try), from whoever drives
    // queue group 0 (ARP and ND frames are group 0's, and so are retries and giving up) to the
    // control path, which finishes the RTRs waiting on them (finish_neighbour_outcomes):
    // a pending RTR is the control path's, and only it may act for it. One producer at a time
    // (group 0's holder), one consumer; never full: it holds at most the outcomes of the
    // resolutions in flight when the control path last took them (max_pending; modify_qp takes
    // them under group 0's hold before it starts one) and of those resolve_neighbour requests
    // started since on group 0's owner (no more than can be out: control_done's capacity).
    WorkRing<NeighbourOutcome> neighbour_outcomes;
    rdma::Gid gid{};
    rdma::Mtu path_mtu = rdma::Mtu::mtu_1024;
    std::uint64_t tsc_hz = 0;
    std::uint64_t timer_unit_cycles = 0; // TSC cycles in 4.096 us, the IBTA transport timer's unit
    std::uint32_t max_qp = 0;
    // Index = slot_of_qpn(qpn). Sized to max_qp at probe and never resized. Queue group g owns the
    // slots [g * qps_per_group, (g + 1) * qps_per_group): the QPN says which group a QP is on, so a
    // group steers a frame to another without reading that group's slots, and each slot is
    // written only by whoever drives its group (the owner, or the control path when it may).
    std::vector<std::unique_ptr<SwroceQp>> qps;
    // Held where the control path frees a QP and while telemetry reads the table from its own
    // thread, so a QP telemetry found stays alive while it is read. Never on the fast path: an
    // owner taking a QP out of its slot leaves it alive until the control path frees it.
    std::mutex qp_free_mutex;
    std::uint32_t qps_per_group = 0;
    std::vector<bool> qp_slot_taken; // control path: slots given to QPs (published or pending)
    // A QPN is first_qpn + (use << slot_bits) + slot. A slot's use count goes up each time its QP
    // is freed, so a number comes back only after `qpn_uses` QPs have held the slot: an event or
    // a frame meant for a destroyed QP names no QP rather than its successor (as rxe, whose
    // numbers come from a moving index).
    unsigned qpn_slot_bits = 0;
    std::uint32_t qpn_slot_mask = 0; // (1 << qpn_slot_bits) - 1
    std::uint32_t qpn_uses = 1;
    std::vector<std::uint32_t> qp_slot_uses; // control path
    std::vector<std::unique_ptr<QueueGroupState>> groups;
    std::vector<std::unique_ptr<SwroceCq>> cqs;
    std::vector<std::unique_ptr<SwroceSrq>> srqs; // control path only
    std::uint32_t next_srqn = 1;                  // shared_receive_queue.cpp
    std::vector<PendingResolution> pending_resolutions;
    // Address handles, by their own address (what the class holds), made and freed on the
    // control path only.
    std::unordered_map<const SwroceAh*, std::unique_ptr<SwroceAh>> ahs;
    std::vector<PendingDestroy> pending_destroy;
    // Finished GroupRequests on their way back from the owners (multi-producer), and how many
    // requests are out (capped at the ring's size so an owner never finds it full).
    ::rte_ring* control_done = nullptr;
    unsigned control_in_flight = 0;
    // Per group, the destroys its full mailbox could not take yet, oldest first: a destroy is
    // never refused (the class frees its object whatever the driver says), it waits here and goes
    // out as requests come back (send_destroy_to_owner). Only that group's requests wait behind.
    std::vector<std::deque<std::unique_ptr<GroupRequest>>> unsent_destroys;
    std::vector<std::unique_ptr<QuiesceWait>> quiesces;
    bool link_was_up = false; // last link state reported, for port_active / port_error events
    // progress=service (service.cpp): the rte_service that runs every group's progress, while
    // registered. Its owner-word token is this device's own, never a thread's.
    std::optional<std::uint32_t> service_id;
    alignas(8) char service_anchor = 0;
    // Explicit pollers attached (poller.cpp), freed with the device if never detached.
    std::mutex poller_mutex;
    std::vector<std::unique_ptr<SwrocePoller>> pollers;
    [[nodiscard]] std::uintptr_t service_token() const noexcept {
        return reinterpret_cast<std::uintptr_t>(&service_anchor);
    }
    // pcap=: every RoCE frame received and transmitted, in pcapng (a debugging aid: the copy and
    // the file write cost time on the data path).
    ::rte_pcapng* capture = nullptr;
    ::rte_mempool* capture_pool = nullptr;
    ~SwroceDevice();
    SwroceCounters control_counters; // written by the control path only
    // The last connection handed out (qp.connection). Atomic: owners apply modifies of their own
    // QPs between bursts, on their lcores; 64 bits never wrap, so an id is never given twice.
    std::atomic<mem::ConnectionId> last_connection{mem::no_connection};

    [[nodiscard]] SwroceCounters& counters_of(const SwroceQp& qp) noexcept {
        return groups[qp.queue_group]->counters;
    }
    // Whether no other thread polls group `group` or holds it. A decision only: acting on the
    // group takes a GroupHold, so a thread's first poll cannot claim it midway.
    [[nodiscard]] bool may_drive(unsigned group) const noexcept {
        const std::uintptr_t owner = groups[group]->owner.load(std::memory_order_relaxed);
        const std::uintptr_t me = this_thread_token();
        return owner == 0 || owner == me || owner == (me | control_hold_bit);
    }

    // The table slot `qpn` would be in (>= qps.size() for none).
    [[nodiscard]] std::uint32_t slot_of_qpn(std::uint32_t qpn) const noexcept {
        return qpn >= first_qpn ? (qpn - first_qpn) & qpn_slot_mask : ~0U;
    }
    [[nodiscard]] std::uint32_t qpn_of_slot(std::uint32_t slot) const noexcept {
        return first_qpn + (qp_slot_uses[slot] << qpn_slot_bits) + slot;
    }
    [[nodiscard]] SwroceQp* qp_by_number(std::uint32_t qpn) noexcept {
        const std::uint32_t slot = slot_of_qpn(qpn);
        SwroceQp* qp = slot < qps.size() ? qps[slot].get() : nullptr;
        return qp != nullptr && qp->qpn == qpn ? qp : nullptr;
    }
    // The queue group whose QP range holds `qpn` (>= groups.size() for no group).
    [[nodiscard]] unsigned group_of_qpn(std::uint32_t qpn) const noexcept {
        const std::uint32_t slot = slot_of_qpn(qpn);
        return slot < qps.size() ? slot / qps_per_group : ~0U;
    }
    // Frees `slot` for the next QP, which gets the slot's next number (control path).
    void release_qp_slot(std::uint32_t slot) noexcept {
        qp_slot_taken[slot] = false;
        qp_slot_uses[slot] = qp_slot_uses[slot] + 1 == qpn_uses ? 0 : qp_slot_uses[slot] + 1;
    }
    [[nodiscard]] std::uint32_t first_slot(unsigned group) const noexcept {
        return group * qps_per_group;
    }
};

constexpr rdma::WcOpcode wc_opcode_of(rdma::WrOpcode op) noexcept {
    switch (op) {
    case rdma::WrOpcode::rdma_write:
    case rdma::WrOpcode::rdma_write_with_imm:
        return rdma::WcOpcode::rdma_write;
    case rdma::WrOpcode::rdma_read:
        return rdma::WcOpcode::rdma_read;
    case rdma::WrOpcode::atomic_cmp_swap:
        return rdma::WcOpcode::atomic_cmp_swap;
    case rdma::WrOpcode::atomic_fetch_add:
        return rdma::WcOpcode::atomic_fetch_add;
    case rdma::WrOpcode::fast_reg:
        return rdma::WcOpcode::fast_reg;
    case rdma::WrOpcode::local_inv:
        return rdma::WcOpcode::local_inv;
    default:
        return rdma::WcOpcode::send;
    }
}

// Control ops (swroce_control.cpp) and fast path (swroce_fastpath.cpp); the engine is engine.hpp.
extern const rdma::driver::DeviceOps swroce_ops;
std::uint16_t swroce_post_send(void* queue, const rdma::SendWr* wrs, std::uint16_t count);
std::uint16_t swroce_post_recv(void* queue, const rdma::RecvWr* wrs, std::uint16_t count);
std::uint16_t swroce_poll_cq(void* queue, rdma::WorkCompletion* wcs, std::uint16_t count);
StatusCode swroce_post_error(const void* queue);
StatusCode swroce_arm_cq(void* queue);

// Moves every queued WR of `qp` to its CQs as a flush error (QP in ERR, or being destroyed).
void flush_queues(SwroceQp& qp) noexcept;
// The QP has just entered ERR and its receive queue is flushed: records qp_fatal (when the device
// found the error itself) and qp_last_wqe_reached on its group's event ring, once per entry into
// ERR, for control_progress to raise. Data-path safe: no lock, no allocation.
void report_error_state(SwroceQp& qp, bool fatal) noexcept;
// Puts an event about QP or SRQ `number` on the group's event ring for control_progress to raise;
// counted in events_dropped when the ring is full. Data-path safe.
void record_event(QueueGroupState& group, rdma::EventType type, std::uint32_t number) noexcept;
// Runs the control requests waiting for queue group `group`'s owner (swroce_control.cpp); called
// by progress_group on whichever thread drives the group.
void run_group_requests(SwroceDevice& dev, unsigned group) noexcept;
// Everything the group's mailbox holds, run by a thread that has just taken the group: requests
// its last owner let go of before running them were made before whatever the taker does next.
void run_left_requests(SwroceDevice& dev, unsigned group) noexcept;

// pcap= capture (swroce_capture.cpp): opens the file at probe; `capture_frames` copies and writes
// a burst (no-op when capture is off: inline, so the data path pays a load, not a call).
Status open_capture(SwroceDevice& dev);
void write_capture(SwroceDevice& dev, unsigned group, rte_mbuf* const* mbufs, std::uint16_t count,
                   bool transmitted) noexcept;
inline void capture_frames(SwroceDevice& dev, unsigned group, rte_mbuf* const* mbufs,
                           std::uint16_t count, bool transmitted) noexcept {
    if (PRDMA_UNLIKELY(dev.capture != nullptr) && count != 0) {
        write_capture(dev, group, mbufs, count, transmitted);
    }
}

// ARP and neighbour discovery on the data path (neighbour.cpp): answers requests for our address
// and records resolutions; false for a frame that is neither (it is then looked at as RoCE).
// `received`, the mbuf holding `frame`, goes to a pcap= capture ahead of any answer.
bool handle_neighbour_frame(SwroceDevice& dev, std::span<const std::uint8_t> frame,
                            std::uint64_t now, SwroceCounters& counters,
                            rte_mbuf* received = nullptr) noexcept;
// A few byte compares: RoCE frames skip the resolvers.
inline bool is_neighbour_frame(std::span<const std::uint8_t> frame) noexcept {
    if (PRDMA_UNLIKELY(frame.size() < ethernet_header_size)) {
        return false;
    }
    // One EtherType load decides for the RoCE frames over IPv4 that make up the traffic.
    const std::uint16_t type = roce::load_be16(frame.data() + 12);
    return type == ethertype_arp || (type == roce::ethertype_ipv6 && is_icmpv6_frame(frame));
}

} // namespace prdma::swroce
