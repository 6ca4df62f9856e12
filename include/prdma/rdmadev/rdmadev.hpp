// prdma rdmadev — the device class applications program against (DESIGN "The three-header
// split": this is the public face, as rte_ethdev.h is DPDK's).
//
// Devices come from their drivers at EAL probe (--vdev=rdma_swroce0,port=...,ip=...) or from
// create_device() with the same devargs. A client opens a Context per device (seed 003 OpenCa),
// allocates PDs, CQs, QPs and MRs from it, and drives the data path with the inline burst calls
// of fastpath.hpp. Control calls return a Status; `pending` means the request completes later,
// reported by Context::poll_control() from the caller's own loop — nothing ever blocks.
//
// Pending control requests (seed 003: any request may return pending and complete later). Every
// control call has one form; its last parameter is an optional `request_id`:
// - Creates and registrations return Result<handle>. With request_id 0 (the default) they never
//   pend: they do the work now, or fail busy with a message when the device would have to finish
//   it later (swroce: a queue group that another thread polls), telling the caller to pass a
//   request id. With a request id they may pend: the handle comes back at once and owns the
//   object from the start (RAII as usual) but is not ready() until a ControlCompletion with that
//   request_id, the op and its final status has come out of poll_control. Before that, control
//   calls on it (destroy, modify, using a CQ for a QP, ...) fail busy and say so, and the fast
//   path must not be used on it. If the creation fails, the completion carries the error and the
//   handle stays not ready; destroying it then just frees it.
// - Destroy, deregister and modify return a Status: ok (done), pending (accepted; the completion
//   comes out of poll_control later), or an error. A destroy or deregistration that pends lets go
//   of the handle at once (it becomes empty); the object keeps counting against its parents and
//   its context (close() says busy) until the completion arrives. Dropping a handle destroys it
//   the same way, with request_id 0.
// When a device pends is its own business (a hardware device: a firmware command; swroce: an
// object of a queue group another thread owns, see drivers/rdma/swroce/ENGINE.md "Ownership").
//
// Threads: the control path is DPDK's control path, not thread-safe. The contexts of one device
// share its control path (a poll_control on one finishes requests of the others), so control
// calls on any context of a device, and on anything made from one, must not overlap: make them
// from one thread, or under one lock per device (libprdma-verbs holds one, as verbs promise
// thread safety). The data path (fastpath.hpp) has its own rules (DESIGN "Fast path rules").
#pragma once
#define PRDMA_RDMADEV_RDMADEV_HPP

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <prdma/mem/access.hpp>
#include <prdma/mem/memory_region.hpp>
#include <prdma/mem/page_list.hpp>
#include <prdma/mem/registration_cache.hpp>
#include <prdma/rdmadev/attributes.hpp>
#include <prdma/rdmadev/queue_handle.hpp>
#include <prdma/rdmadev/types.hpp>
#include <prdma/rdmadev/work_request.hpp>
#include <prdma/status.hpp>

namespace prdma::rdma {

namespace detail {
struct ContextState;
struct PdObject;
struct CqObject;
struct QpObject;
struct SrqObject;
struct MrObject;
struct AhObject;
} // namespace detail

// ---- devices ------------------------------------------------------------------------------------

[[nodiscard]] unsigned device_count();
[[nodiscard]] std::vector<DeviceId> device_list();
Result<DeviceId> find_device(std::string_view name);
[[nodiscard]] std::string device_name(DeviceId device);
// The arguments the device was created with ("port=net_memif0,ip=10.0.0.1"); empty for a device
// that is not on a bus or has none. Tools read the ethdev under a device from it.
[[nodiscard]] std::string device_args(DeviceId device);
// Creates a device from devargs, as --vdev would: "rdma_swroce1,port=net_memif0,ip=10.0.0.1".
Result<DeviceId> create_device(std::string_view devargs);
// Removes a device: every open context gets a device_removed event and every later call on it
// fails with device_removed until the client has released everything and closed.
Status remove_device(DeviceId device);

// ---- control completions and events -----------------------------------------------------------

struct ControlCompletion {
    std::uint64_t request_id = 0; // what the caller passed with the pending request (0: a handle
                                  // dropped while the library still had to finish it)
    ControlOp op = ControlOp::modify_qp;
    StatusCode status = StatusCode::ok;
    std::uint32_t qpn = 0; // QP requests: the QP (a created QP's number)
    std::string message;   // for a failed request: what went wrong
};

// One device counter (what ethtool -S / rte_eth_xstats show for a NIC).
struct Counter {
    std::string name;
    std::uint64_t value = 0;
};

// Asynchronous events (ibv_get_async_event). Port and device events go to every context of the
// device; QP events (qp_fatal, qp_last_wqe_reached) to the context that holds the QP.
// - qp_fatal: the device moved the QP to the error state itself (retry or RNR retry exceeded, a
//   NAK for a remote access / operation / invalid request error, a local protection or length
//   error); the failing WR's completion carries the detail. Not raised for modify() to ERR.
// - qp_last_wqe_reached: the QP is in the error state and its receive queue has been flushed, so
//   no more receive WQEs will complete except with flush errors. Once per entry into ERR, for
//   an error the device found (after qp_fatal) and for modify() to ERR alike. (IBTA raises it
//   for QPs on a shared receive queue; prdma raises it for every QP, on an SRQ or not.)
// - srq_limit_reached: an SRQ armed with a limit (SharedReceiveQueue::arm_limit) holds fewer
//   receive WRs than the limit; once per arming, to the context that holds the SRQ.
struct Event {
    EventType type = EventType::port_active;
    std::uint8_t port = 0;  // port events
    std::uint32_t qpn = 0;  // QP events
    std::uint32_t srqn = 0; // SRQ events
};

// ---- objects ------------------------------------------------------------------------------------

class Context;
class ProtectionDomain;
class CompletionQueue;
class QueuePair;

// A registered memory region (lib/mem's MemoryRegion) owned by one handle; dropping the handle
// deregisters one reference.
class MemoryRegionHandle {
public:
    MemoryRegionHandle() = default;
    MemoryRegionHandle(MemoryRegionHandle&& other) noexcept;
    MemoryRegionHandle& operator=(MemoryRegionHandle&& other) noexcept;
    MemoryRegionHandle(const MemoryRegionHandle&) = delete;
    MemoryRegionHandle& operator=(const MemoryRegionHandle&) = delete;
    ~MemoryRegionHandle();

    // The region, or nullptr for an empty handle (moved from, deregistered, never filled).
    [[nodiscard]] mem::MemoryRegion* get() const noexcept { return region_; }
    [[nodiscard]] mem::MemoryKey lkey() const { return region_ != nullptr ? region_->lkey() : 0; }
    [[nodiscard]] mem::MemoryKey rkey() const { return region_ != nullptr ? region_->rkey() : 0; }
    explicit operator bool() const noexcept { return mr_ != nullptr; }
    // Registered and known to the device: its keys may be used.
    [[nodiscard]] bool ready() const noexcept;
    // Drops this handle's reference. The last one may pend (the device may still be using the
    // region's translation table: a data path in the middle of a burst); the key is dead at once
    // either way, and the handle is empty afterwards. Busy while the registration is pending.
    Status deregister(std::uint64_t request_id = 0);

private:
    friend class ProtectionDomain;
    explicit MemoryRegionHandle(detail::MrObject* mr);
    // Destroys what the handle holds, or leaves it to the context when it cannot go yet.
    void release() noexcept;
    detail::MrObject* mr_ = nullptr;
    mem::MemoryRegion* region_ = nullptr; // mr_->region, for the inline accessors
};

// Where an address handle sends (ibv_ah_attr with its GRH, RoCE v2): the peer's GID (an IPv4
// peer as its IPv4-mapped GID) and the IP header fields of the datagrams sent through it.
struct AhAttr {
    Gid dest_gid{};
    std::optional<std::array<std::uint8_t, 6>> dest_mac; // resolved with ARP or ND when absent
    std::uint8_t port = 1;
    std::uint8_t sgid_index = 0;    // the device's own GID: index 0 is the only one
    std::uint8_t traffic_class = 0; // IPv4 TOS / IPv6 traffic class
    std::uint8_t hop_limit = 64;    // IPv4 TTL / IPv6 hop limit
    std::uint32_t flow_label = 0;   // IPv6 only, 20 bits
};

// An address handle (ibv_ah) on a PD: a UD QP of the PD sends datagrams through it to any QP of
// the peer it names (ud_send_wr). A SEND posted with it carries the destination with it, so the
// handle may be destroyed once the post returns. Its creation pends while the device resolves the
// peer's MAC (ARP or IPv6 neighbour discovery), as a QP's RTR does: ready() once the completion has
// been polled.
class AddressHandle {
public:
    AddressHandle() = default;
    AddressHandle(AddressHandle&& other) noexcept;
    AddressHandle& operator=(AddressHandle&& other) noexcept;
    AddressHandle(const AddressHandle&) = delete;
    AddressHandle& operator=(const AddressHandle&) = delete;
    ~AddressHandle();

    explicit operator bool() const noexcept { return ah_ != nullptr; }
    // Created and usable: false while its creation is pending, and after it failed.
    [[nodiscard]] bool ready() const noexcept;
    // What a UD WR names it by (UdFields::ah); null while not ready().
    [[nodiscard]] void* wr_handle() const noexcept;
    [[nodiscard]] AhAttr attr() const;
    // Busy while its creation is pending; the handle is empty afterwards.
    Status destroy();

private:
    friend class ProtectionDomain;
    explicit AddressHandle(detail::AhObject* ah) : ah_(ah) {}
    void release() noexcept;
    detail::AhObject* ah_ = nullptr;
};

// A UD SEND of `local` to QP `remote_qpn` of the peer `ah` reaches, carrying `remote_qkey` (one
// with the high bit set: the sending QP's own Q_Key). One packet: at most the port's MTU.
[[nodiscard]] inline SendWr ud_send_wr(std::uint64_t wr_id, const Sge& local,
                                       const AddressHandle& ah, std::uint32_t remote_qpn,
                                       std::uint32_t remote_qkey, SendFlags flags = send_signaled) {
    SendWr wr = send_wr(wr_id, local, flags);
    wr.ud = {ah.wr_handle(), remote_qpn, remote_qkey};
    return wr;
}

class ProtectionDomain {
public:
    ProtectionDomain() = default;
    ProtectionDomain(ProtectionDomain&& other) noexcept;
    ProtectionDomain& operator=(ProtectionDomain&& other) noexcept;
    ProtectionDomain(const ProtectionDomain&) = delete;
    ProtectionDomain& operator=(const ProtectionDomain&) = delete;
    ~ProtectionDomain();

    [[nodiscard]] std::uint32_t id() const;
    explicit operator bool() const noexcept { return pd_ != nullptr; }

    // ibv_reg_mr / IbRegVirtMr on DPDK memory (hugepage or registered external memory).
    // Access, here and on every registration below: remote write or remote atomic without local
    // write is invalid_parameter, as in verbs (the one rule of mem::check_access_rules).
    // With a request id it may pend (see the top of this file): the handle is ready() once the
    // completion has been polled; so it is for every registration below.
    Result<MemoryRegionHandle> register_memory(const void* addr, std::size_t length,
                                               AccessFlags access, std::uint64_t request_id = 0);
    // Seed 002: a region bound to `qp`'s current connection (the one it entered at INIT to RTR).
    // Its keys work only on that QP and only while that connection lasts, remotely (the peer's
    // WRITE, READ, atomic) and locally (an SGE); once the QP goes to ERR or RESET, or is
    // destroyed, they fail for good (remote_access_error at the peer, local_protection_error
    // here), even after the QP or a new QP with its number is connected again. `qp` must be RTR
    // or RTS (not_connected). The same buffer, access and connection again is the same region
    // with one more reference. `access` takes MEM_READ / MEM_WRITE only (invalid_parameter).
    Result<MemoryRegionHandle> register_for_connection(const QueuePair& qp, const void* addr,
                                                       std::size_t length, mem::WspAccess access,
                                                       std::uint64_t request_id = 0);
    // IbRegVirtMr with an MDL chain (seed 000): the region is `pieces` one after another from
    // the first piece's address; only the first piece may start and only the last may end
    // inside a page of 2^page_shift bytes. Every piece must be DPDK memory (or registered
    // external memory) the device can translate.
    Result<MemoryRegionHandle> register_virtual(std::span<const mem::VirtualPiece> pieces,
                                                unsigned page_shift, AccessFlags access,
                                                std::uint64_t request_id = 0);
    // IbRegScatterGatherMr: an IOVA scatter/gather list.
    Result<MemoryRegionHandle> register_sgl(std::span<const mem::SglElement> sgl,
                                            unsigned page_shift, AccessFlags access,
                                            std::uint64_t request_id = 0);
    // IbGetDmaMr / reserved L_Key (seed 004).
    Result<MemoryRegionHandle> get_dma_region(std::uint64_t request_id = 0);
    // A region initialised for FAST_REG work requests (seed 001).
    Result<MemoryRegionHandle> alloc_fast_reg_region(std::uint32_t max_pages,
                                                     AccessFlags allowed_access,
                                                     std::uint64_t request_id = 0);

    // A find-or-register cache (mem::RegistrationCache) whose regions are this PD's, registered
    // and deregistered through the device exactly as register_memory's are, and counted against
    // the PD and its context. The PD stays (destroy() is busy) until the cache is gone. Like
    // every control call on a context, the cache is used from one thread at a time, DPDK memory
    // events included (watch_dpdk_memory_events: the thread that frees the memory).
    Result<std::unique_ptr<mem::RegistrationCache>>
    create_registration_cache(const mem::CacheLimits& limits = {});

    // ibv_create_ah. With a request id it may pend while the peer's MAC is resolved: the handle
    // is ready() once the completion (ControlOp::create_ah) has been polled. Without one it fails
    // busy instead, the resolution started, and a later call finds the MAC. Needs a device with
    // cap_ud; the GID index must be 0 and the port the device's.
    Result<AddressHandle> create_ah(const AhAttr& attr, std::uint64_t request_id = 0);

    // Fails busy while QPs, MRs, address handles or registration caches of this PD exist.
    Status destroy();

private:
    friend class Context;
    friend class QueuePair;
    friend class SharedReceiveQueue;
    explicit ProtectionDomain(detail::PdObject* pd) : pd_(pd) {}
    // Wraps a new registration in `out`, counts it against `pd` and its context, and tells the
    // device (which may pend when `request_id` allows it).
    static Status adopt(detail::PdObject& pd, Result<mem::MemoryRegion*> region,
                        std::uint64_t request_id, MemoryRegionHandle& out);
    // Every registration above: the PD and its device checked, the device's registry asked
    // through `registry_call` (given the device), what it made adopted. Defined and used in
    // protection_domain.cpp only.
    template <typename RegistryCall>
    Result<MemoryRegionHandle> register_through(std::uint64_t request_id,
                                                RegistryCall&& registry_call);
    void release() noexcept; // destroy, or hand the PD to its last child
    detail::PdObject* pd_ = nullptr;
};

class CompletionQueue : public CqQueue {
public:
    CompletionQueue() = default;
    CompletionQueue(CompletionQueue&& other) noexcept;
    CompletionQueue& operator=(CompletionQueue&& other) noexcept;
    CompletionQueue(const CompletionQueue&) = delete;
    CompletionQueue& operator=(const CompletionQueue&) = delete;
    ~CompletionQueue();

    [[nodiscard]] std::uint32_t capacity() const;
    [[nodiscard]] std::uint16_t queue_group() const;
    explicit operator bool() const noexcept { return cq_ != nullptr; }
    // Created and usable (false while its creation is pending, and after it failed).
    [[nodiscard]] bool ready() const noexcept;
    // Fails busy while QPs use it or its creation is pending; may pend (the handle is empty then).
    Status destroy(std::uint64_t request_id = 0);

private:
    friend class Context;
    friend class QueuePair;
    explicit CompletionQueue(detail::CqObject* cq);
    void release() noexcept;
    detail::CqObject* cq_ = nullptr;
};

// A shared receive queue's size (ibv_srq_attr): the receive WRs it holds and the SGEs each may
// have. Created on a PD: the lkeys of its receive WRs are checked against that PD.
struct SrqCaps {
    std::uint32_t max_wr = 256;
    std::uint32_t max_sge = 4;
};

// A shared receive queue (ibv_srq): RC and UD QPs created with it (QpInitAttr::srq) take their
// receive WRs from it, in the order posted, whichever QP a SEND or datagram arrives on (a datagram
// that finds it empty is dropped, as one that finds a QP's own receive queue empty). It belongs
// to one queue group, as a CQ does, and its QPs must too: the lcore that drives the group is the
// one consumer, the thread that posts (post_srq_recv, fastpath.hpp) the one producer, so neither
// takes a lock or a locked instruction. One created for any_queue_group serves QPs of every group:
// each group's lcore is a consumer, and they claim a receive WR with one compare-and-swap per
// message (what sharing costs; bench/prdma-bench's BM_SrqSend measures it). A QP on an SRQ has no
// receive queue of its own (post_recv: invalid_parameter). A SEND takes its receive WR from the SRQ
// at its first packet and the QP holds it until the last: moving the QP to ERR completes a held WR
// as a flush error; moving it straight to RESET drops it without a completion, as RESET drops a
// QP's own receives (go through ERR and wait for qp_last_wqe_reached to get it back, as verbs says
// for SRQs). arm_limit below what the SRQ holds now fires at the next receive the SRQ gives out.
class SharedReceiveQueue : public SrqQueue {
public:
    SharedReceiveQueue() = default;
    SharedReceiveQueue(SharedReceiveQueue&& other) noexcept;
    SharedReceiveQueue& operator=(SharedReceiveQueue&& other) noexcept;
    SharedReceiveQueue(const SharedReceiveQueue&) = delete;
    SharedReceiveQueue& operator=(const SharedReceiveQueue&) = delete;
    ~SharedReceiveQueue();

    explicit operator bool() const noexcept { return srq_ != nullptr; }
    [[nodiscard]] std::uint32_t srqn() const;
    // The group it serves, or any_queue_group.
    [[nodiscard]] std::uint16_t queue_group() const;
    // What it holds: max_wr rounded up to its ring's size, at creation or the last resize.
    [[nodiscard]] SrqCaps caps() const;
    // Receive WRs posted and not yet taken by a SEND (a snapshot while the data path runs).
    [[nodiscard]] Result<std::uint32_t> outstanding() const;
    // The limit event (ibv_modify_srq with IBV_SRQ_LIMIT): once fewer than `limit` receive WRs
    // are left, one srq_limit_reached event is raised and the SRQ is disarmed; arm again for the
    // next. 0 disarms. invalid_parameter above max_wr.
    Status arm_limit(std::uint32_t limit);
    // The limit armed now; 0 once it fired (ibv_query_srq's srq_limit).
    [[nodiscard]] Result<std::uint32_t> limit() const;
    // ibv_modify_srq with IBV_SRQ_MAX_WR: the SRQ holds `max_wr` receive WRs from now on (caps()
    // says what it got, rounded up as at creation), keeping the ones it holds, in order, while
    // the engine goes on taking them; with `limit` (IBV_SRQ_LIMIT in the same call), that limit is
    // armed too, checked against the new size. invalid_parameter, nothing changed, for 0, beyond
    // the device's max_qp_wr, below what it holds now or below the limit (the new one or the one
    // armed); not_supported without cap_srq_resize. Call it where post_srq_recv is called (the
    // SRQ's one producer), never beside a post. Rings a resize leaves behind are freed at the
    // next resize once drained (one group's SRQ) or with the SRQ (one for any_queue_group).
    Status resize(std::uint32_t max_wr, std::optional<std::uint32_t> limit = std::nullopt);
    // Busy while QPs use it. Receive WRs still in it are dropped without completions, as verbs'
    // ibv_destroy_srq drops them.
    Status destroy();

private:
    friend class Context;
    explicit SharedReceiveQueue(detail::SrqObject* srq);
    void release() noexcept;
    detail::SrqObject* srq_ = nullptr;
};

struct QpCaps {
    std::uint32_t max_send_wr = 256;
    std::uint32_t max_recv_wr = 256;
    std::uint32_t max_send_sge = 4;
    std::uint32_t max_recv_sge = 4;
    std::uint32_t max_inline_data = 64;
};

// Everything modify_qp can set; which fields count is said by the QpAttrMask.
struct QpAttr {
    QpState state = QpState::reset;
    QpState cur_state = QpState::reset;
    AccessFlags access; // remote access the QP grants (IBV_ACCESS_REMOTE_*)
    std::uint8_t port = 1;
    Mtu path_mtu = Mtu::mtu_1024;
    Gid dest_gid{};
    std::optional<std::array<std::uint8_t, 6>> dest_mac; // resolved with ARP or ND when absent
    std::uint32_t dest_qpn = 0;
    std::uint32_t rq_psn = 0;
    std::uint32_t sq_psn = 0;
    std::uint8_t timeout = 14; // 4.096 us x 2^timeout
    std::uint8_t retry_cnt = 7;
    std::uint8_t rnr_retry = 7; // 7 = infinite (IBTA)
    std::uint8_t min_rnr_timer = 12;
    std::uint8_t max_rd_atomic = 1;
    std::uint8_t max_dest_rd_atomic = 1;
    // UD: what a datagram must carry to be received here, and what a send carries instead of its
    // WR's Q_Key when that one has the high bit set (IBTA 10.2.5, controlled Q_Keys).
    std::uint32_t qkey = 0;
    // RC, set INIT -> RTR on both sides of a connection whose peer is known (out of band) to be
    // prdma: each side keeps what arrives past a loss and resends only the packet the other NAKs,
    // not everything after it. The wire stays IBTA's (a sequence-error NAK names the missing
    // PSN); against any other peer (rxe, a NIC) leave it false: go-back-N, as IBTA says.
    bool selective_repeat = false;
};

// What a peer needs to connect to a QP and to reach one region (exchanged out of band).
struct ConnectionDescriptor {
    std::uint16_t version = 1;
    std::uint16_t size = 0;
    std::uint32_t qpn = 0;
    std::uint32_t psn = 0;
    std::uint32_t rkey = 0;
    Gid gid{};
    std::uint8_t mac[6] = {};
    std::uint16_t reserved = 0;
    std::uint64_t address = 0;
    std::uint64_t length = 0;
};

// Reads a descriptor a peer exported (export_connection), received out of band: fails with
// invalid_parameter, saying why, for a wrong version or size, a short buffer, or a QPN or PSN that
// does not fit IBTA's 24 bits.
Result<ConnectionDescriptor> import_connection(const void* buffer, std::uint32_t length);

// What connect() sets besides the peer's descriptor: rdma-core's ibv_rc_pingpong defaults, with
// every remote access granted and atomics allowed.
struct ConnectOptions {
    std::uint8_t port = 1;
    Mtu path_mtu = Mtu::mtu_1024;
    AccessFlags access = mem::access_remote_write | mem::access_remote_read |
                         mem::access_remote_atomic; // what the QP lets the peer do
    std::uint8_t timeout = 14;                      // 4.096 us x 2^timeout: ~67 ms
    std::uint8_t retry_cnt = 7;
    std::uint8_t rnr_retry = 7; // 7 = infinite (IBTA)
    std::uint8_t min_rnr_timer = 12;
    std::uint8_t max_rd_atomic = 1;      // READs / atomics this QP has outstanding
    std::uint8_t max_dest_rd_atomic = 1; // and the peer may have outstanding here
    // RTS for a QP that sends; RTR is enough for one that only receives.
    QpState until = QpState::rts;
    // The first PSN this QP sends (24 bits). Absent: the one export_connection gave the peer; an
    // exchange of its own (perftest's) says what it told the peer here.
    std::optional<std::uint32_t> sq_psn;
    // QpAttr::selective_repeat: only when the peer sets it too.
    bool selective_repeat = false;
};

// Where one QP's sequence numbers and retries stand (QueuePair::query_status, and telemetry's
// /rdmadev/qp_info): a snapshot taken while the data path runs, as ethdev's stats are.
struct QpStatus {
    std::uint32_t qpn = 0;
    QpState state = QpState::reset;
    std::uint16_t queue_group = 0;
    std::uint32_t dest_qpn = 0;
    std::uint32_t send_psn = 0;     // the next PSN a new message takes
    std::uint32_t acked_psn = 0;    // the last PSN the responder acknowledged
    std::uint32_t expected_psn = 0; // the next PSN the responder accepts
    std::uint32_t outstanding = 0;  // send WRs posted and not yet completed
    std::int32_t retries_left = 0;
    std::int32_t rnr_retries_left = 0;
    std::uint64_t retransmissions = 0; // packets sent again since the QP was created
    std::uint64_t timeouts = 0;        // retransmission timer expiries
    // What the device holds for the QP, sized to the caps it was created with: the whole (its
    // state and both queues) and one slot of each queue (0 where a driver does not say).
    std::uint64_t memory_bytes = 0;
    std::uint32_t send_wqe_bytes = 0;
    std::uint32_t recv_wqe_bytes = 0;
};

class QueuePair : public QpQueue {
public:
    QueuePair() = default;
    QueuePair(QueuePair&& other) noexcept;
    QueuePair& operator=(QueuePair&& other) noexcept;
    QueuePair(const QueuePair&) = delete;
    QueuePair& operator=(const QueuePair&) = delete;
    ~QueuePair();

    [[nodiscard]] std::uint32_t qpn() const;
    // The state now, as the device sees it: ERR as soon as the engine moves the QP there by itself
    // (as ibv_query_qp answers), RESET before it is created, ERR once its device is gone.
    [[nodiscard]] QpState state() const;
    // What modify() configured (the PSNs it was given: query_status has the current ones) and the
    // state now; busy while a modify of the QP is pending.
    [[nodiscard]] Result<QpAttr> attributes() const;
    [[nodiscard]] const QpCaps& caps() const;
    // Its sequence numbers, retries and retransmissions as the device sees them now.
    // not_supported when the driver does not report them; device_removed once it is gone.
    Result<QpStatus> query_status() const;
    explicit operator bool() const noexcept { return qp_ != nullptr; }
    // Created and usable (false while its creation is pending, and after it failed).
    [[nodiscard]] bool ready() const noexcept;

    // Legal IBTA transitions only; `pending` (RTR while the peer's MAC is resolved) completes
    // through Context::poll_control with `request_id`.
    Status modify(const QpAttr& attr, QpAttrMask mask, std::uint64_t request_id = 0);
    // `pending` while work is in flight (the QP is flushed and destroyed later) or when the device
    // must finish it elsewhere; the handle is empty either way. Busy while the creation pends.
    Status destroy(std::uint64_t request_id = 0);
    // Connects to the QP `peer` describes: INIT, RTR, RTS (or options.until) from wherever the QP
    // is on that path, in place of the three modify() calls every verbs program writes. Any step
    // may return pending (RTR while a peer without a MAC is resolved with ARP or ND; every step
    // when another thread polls the QP's queue group): poll_control until `request_id` completes,
    // and call connect() again to go on from where the QP is. A QP in ERR or SQD / SQE is refused
    // (invalid_parameter): RESET it first.
    Status connect(const ConnectionDescriptor& peer, const ConnectOptions& options = {},
                   std::uint64_t request_id = 0);
    // Export this QP's connection descriptor (and optionally one region's rkey/range) into
    // `buffer`, with seed 002's size negotiation.
    Status export_connection(const MemoryRegionHandle* region, void* buffer,
                             std::uint32_t* length) const;

private:
    friend class Context;
    friend class ProtectionDomain;
    explicit QueuePair(detail::QpObject* qp);
    void release() noexcept;
    detail::QpObject* qp_ = nullptr;
};

struct QpInitAttr {
    ProtectionDomain* pd = nullptr;
    CompletionQueue* send_cq = nullptr;
    CompletionQueue* recv_cq = nullptr;
    QpType type = QpType::rc;
    QpCaps caps{};
    bool signal_all = false; // every send WR completes, as if flagged send_signaled
    // Receive WRs come from this SRQ (same context, and the CQs' queue group unless the SRQ is for
    // any_queue_group); caps.max_recv_wr
    // and max_recv_sge are then ignored.
    SharedReceiveQueue* srq = nullptr;
};

// The typed form of the device and port attributes (Context::device_info), beside the seed's
// self-relative blob (query_device / query_port).
struct PortInfo {
    PortAttr attr;
    std::vector<Gid> gids;
    std::vector<std::uint16_t> pkeys;
};
struct DeviceInfo {
    DeviceAttr attr;
    std::vector<PortInfo> ports; // ports[0] is port 1
};

// A thread's claim on queue groups of a device (Context::attach_poller): while attached, that
// thread alone drives them, with progress() (fastpath.hpp) — no CQ need be polled, so a target of
// one-sided WRITEs and READs can answer its peers from a loop of its own. Detaching (or dropping
// the handle) gives them back; the control path then acts on them directly again.
//
// Who drives a group, in full: an attached poller; else, on a device with progress=poll (the
// default), the first thread that polls one of the group's CQs (poll_cq progresses, then reaps);
// else, while nobody does, the control path (poll_control). On a device with progress=service, a
// DPDK service lcore drives every group, poll_cq only reaps, and attach_poller says busy.
class Poller : public PollerQueue {
public:
    Poller() = default;
    Poller(Poller&& other) noexcept;
    Poller& operator=(Poller&& other) noexcept;
    Poller(const Poller&) = delete;
    Poller& operator=(const Poller&) = delete;
    ~Poller();

    // The queue group attached, or none for every group of the device.
    [[nodiscard]] std::optional<std::uint16_t> group() const noexcept { return group_; }
    explicit operator bool() const noexcept { return driver_ != nullptr; }
    // Gives the groups back; the attaching thread must have stopped calling progress().
    void detach() noexcept;

private:
    friend class Context;
    Poller(std::shared_ptr<detail::ContextState> context, DeviceId device, void* driver,
           std::optional<std::uint16_t> group) noexcept;
    std::shared_ptr<detail::ContextState> context_;
    std::optional<std::uint16_t> group_;
};

class Context;
// Waits (sleeping a millisecond between looks) until port `port` (1-based) of the context's
// device is active, and returns its attributes and GIDs. Traffic posted on a port whose link is
// down is sent into nothing until its retries run out, and a memif link comes up only once the
// peer's process has started its port. not_connected after `limit`; invalid_parameter for a port
// the device does not have. The one call of the API that blocks: for set-up, not the data path.
Result<PortInfo> wait_port_active(const Context& context, std::uint8_t port,
                                  std::chrono::milliseconds limit);

class Context {
public:
    // Seed 003 OpenCa: a client's own view of the device.
    static Result<Context> open(DeviceId device);
    Context(Context&& other) noexcept;
    Context& operator=(Context&& other) noexcept;
    Context(const Context&) = delete;
    Context& operator=(const Context&) = delete;
    // Drops this handle; objects still alive keep the client's state until they are released.
    ~Context();

    // Seed 003 CloseCa: busy while PDs, CQs, QPs or MRs remain. Once closed (as when moved
    // from), every call that returns a Status fails invalid_parameter saying the context is
    // closed; poll_control/poll_events return 0, resources() is empty, device() invalid_device.
    Status close();

    [[nodiscard]] DeviceId device() const;

    // Seed 003 QueryCa / QueryPort. `*size` is the buffer's size in, the bytes written out.
    // buffer_too_small: not even an AttrHeader fits (nothing written, *size = required).
    // buffer_overflow: the buffer was filled with a prefix of the answer; *size stays the bytes
    //   written (the buffer's size), and the size required is in the prefix's header size field
    //   (seed 003: IB_CA_ATTR::Size), not in *size.
    // invalid_parameter: unknown version, no buffer, port number outside 1..port_count.
    Status query_device(void* buffer, std::uint32_t* size,
                        std::uint32_t version = attr_version_current) const;
    Status query_port(std::uint8_t port, void* buffer, std::uint32_t* size,
                      std::uint32_t version = attr_version_current) const;
    // The same answer as query_device, read out of it into plain structs and vectors.
    Result<DeviceInfo> device_info() const;

    Result<ProtectionDomain> alloc_pd();
    // A CQ belongs to one queue group (one lcore's rx/tx queue pair of the port).
    // With a request id it may pend: the CQ is ready() once the completion
    // (ControlOp::create_cq) has been polled.
    // `event_fd`: an eventfd(2) the device writes when a completion arrives on the armed CQ
    // (arm_cq, fastpath.hpp), from the thread that drives its queue group; the caller owns it and
    // keeps it open while the CQ lives. -1: no events.
    Result<CompletionQueue> create_cq(std::uint32_t cqe, std::uint16_t queue_group = 0,
                                      std::uint64_t request_id = 0, int event_fd = -1);
    // With a request id it may pend; the completion (ControlOp::create_qp) carries the QPN.
    Result<QueuePair> create_qp(const QpInitAttr& init, std::uint64_t request_id = 0);
    // ibv_create_srq on `pd`, in queue group `queue_group` (where its QPs' CQs must be), or for
    // QPs of every group with any_queue_group (SharedReceiveQueue above). Never
    // pends: nothing of the group sees the SRQ before a QP is created with it. not_supported on a
    // device without SRQs; invalid_parameter for caps beyond the device's (max_srq_wr, max_sge).
    Result<SharedReceiveQueue> create_srq(ProtectionDomain& pd, const SrqCaps& caps,
                                          std::uint16_t queue_group = 0);

    // Attaches the calling thread to queue group `group`, or to every group of the device when
    // none is named (Poller above). busy, with who drives it, when another thread or a progress
    // service does; invalid_parameter for a group the device does not have; not_supported for a
    // device without explicit pollers.
    Result<Poller> attach_poller(std::optional<std::uint16_t> group = std::nullopt);

    // Drives pending control requests and returns the finished ones; never blocks.
    std::size_t poll_control(std::span<ControlCompletion> out);
    // Drives the device's control progress too (events the data path recorded are raised there).
    std::size_t poll_events(std::span<Event> out);
    // The device's counters: packets, retransmissions, NAKs, drops by reason, ...
    Result<std::vector<Counter>> query_stats() const;

    // Resources this client still holds (what close() would call busy).
    struct Resources {
        std::uint32_t pds = 0, cqs = 0, qps = 0, mrs = 0, srqs = 0, ahs = 0;
        [[nodiscard]] std::uint32_t total() const { return pds + cqs + qps + mrs + srqs + ahs; }
    };
    [[nodiscard]] Resources resources() const;

private:
    explicit Context(std::shared_ptr<detail::ContextState> state);
    Status make_cq(CompletionQueue& out, std::uint32_t cqe, std::uint16_t queue_group,
                   std::uint64_t request_id, int event_fd);
    Status make_qp(QueuePair& out, const QpInitAttr& init, std::uint64_t request_id);
    // Names what is missing from `init`, or which of its objects belong to another context.
    static Status check_qp_parts(const QpInitAttr& init, const detail::ContextState& context);
    // Shared with every object of the context, so dropping the Context first leaves no object
    // pointing at freed state.
    std::shared_ptr<detail::ContextState> state_;
};

} // namespace prdma::rdma
