// rdmadev driver interface (as DPDK's ethdev_driver.h): what a driver fills at probe and the
// calls it makes into the class. Never included by applications.
//
// The class owns the generic objects (contexts, PDs, CQ/QP bookkeeping, the MemoryRegistry with
// its keys and tables) and enforces the rules (states, busy, device removed); the driver owns its
// queues and the wire. Nothing here assumes the device is software: a hardware driver (mlx5 over
// VFIO) programs its MTT/MKEY tables from the same registry callbacks.
#pragma once
#define PRDMA_RDMADEV_DRIVER_HPP

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <prdma/mem/memory_registry.hpp>
#include <prdma/rdmadev/attributes.hpp>
#include <prdma/rdmadev/fastpath_core.hpp>
#include <prdma/rdmadev/rdmadev.hpp>
#include <prdma/status.hpp>

struct rte_device;

namespace prdma::rdma::driver {

struct Device;

struct PortInfo {
    PortState state = PortState::down;
    Mtu max_mtu = Mtu::mtu_1024;
    Mtu active_mtu = Mtu::mtu_1024;
    std::uint32_t link_speed_mbps = 0;
    std::uint8_t link_width = 1;
    std::uint8_t mac[6] = {};
    std::vector<Gid> gids;
    std::vector<std::uint16_t> pkeys{0xffff};
    std::uint64_t max_msg_size = 1ULL << 31;
};

struct CqInit {
    std::uint32_t cqe = 0;
    std::uint16_t queue_group = 0;
    int event_fd = -1; // written (an eventfd increment) when a completion arrives while armed
};

struct QpInit {
    QpType type = QpType::rc;
    std::uint32_t pd = 0;
    void* send_cq = nullptr; // the driver's CQ objects
    void* recv_cq = nullptr;
    std::uint16_t queue_group = 0;
    QpCaps caps{};
    bool signal_all = false;
    // The QP's configuration, one copy shared by the class and the driver as ethdev and its PMDs
    // share rte_eth_dev_data: the class allocates it with the QP and keeps it until the driver
    // has destroyed the QP. Only the driver writes it, when it applies a modify on whoever drives
    // the QP's group; the class reads it when no modify of the QP is in flight. Its state fields
    // are not kept: the state is a runtime fact (DeviceOps::qp_state).
    QpAttr* attr = nullptr;
    void* srq = nullptr; // the driver's SRQ the QP takes its receive WRs from; null: its own
};

struct SrqInit {
    std::uint32_t pd = 0;
    std::uint16_t queue_group = 0; // any_queue_group: QPs of every group take from it
    SrqCaps caps{};
};

struct SrqCreated {
    void* queue = nullptr; // the driver's SRQ, passed to post_srq_recv
    std::uint32_t srqn = 0;
    SrqCaps caps{}; // what it holds (max_wr rounded up)
};

struct AhInit {
    std::uint32_t pd = 0;
    AhAttr attr{}; // the class checked the port and the GID index
};

struct QpCreated {
    void* queue = nullptr; // the driver's QP, passed to post_send/post_recv
    std::uint32_t qpn = 0;
};

// Identifies a control request; a driver that returns pending keeps a copy and reports the end
// with complete_control(token) exactly once. Opaque to drivers except `qpn`, which a driver sets
// when it assigns the QPN of a QP whose creation completes later.
struct ControlToken {
    std::uint32_t context = 0;
    std::uint64_t request_id = 0; // the caller's, echoed in its ControlCompletion
    ControlOp op = ControlOp::modify_qp;
    std::uint32_t qpn = 0;
    std::uint64_t serial = 0; // the class's own number for the request: what completion finds
    // False for the calls that cannot return pending (the Result<T> forms, whose callers expect a
    // usable object): a driver that would have to pend fails with busy and says why instead.
    bool may_pend = true;
};

// Control operations (DESIGN: transports plug in through ops tables, as SPDK's nvme_transport).
// Every operation that takes a ControlToken may return pending (seed 003) and finish later with
// complete_control(token); it must not block. A create that pends still hands its object back at
// once (`*cq`, `out.queue`): the class keeps it in the caller's handle, which is not ready() until
// the completion, and no fast-path call is made on it before then.

struct DeviceOps {
    // Current state of port `port` (1-based).
    Status (*query_port)(Device& device, std::uint8_t port, PortInfo& out);
    Status (*create_cq)(Device& device, const CqInit& init, const ControlToken& token, void** cq);
    // The class calls it only for a CQ no QP uses any more.
    Status (*destroy_cq)(Device& device, void* cq, const ControlToken& token);
    Status (*create_qp)(Device& device, const QpInit& init, const ControlToken& token,
                        QpCreated& out);
    // The class has checked the transition and the mask; the driver applies it to the QP's
    // QpInit::attr. `attr` stays valid until the modify completes: a driver that pends keeps a
    // pointer, not a copy.
    Status (*modify_qp)(Device& device, void* qp, const QpAttr& attr, QpAttrMask mask,
                        const ControlToken& token);
    // Pending while the QP still has work in flight; the driver flushes and completes.
    Status (*destroy_qp)(Device& device, void* qp, const ControlToken& token);
    // Memory registration lives in the class's MemoryRegistry (keys and translation tables). The
    // class has published `region`'s key; a device that keeps its own copy (a NIC's MKEY/MTT)
    // loads it here. Null: the device reads the registry directly.
    Status (*register_mr)(Device& device, const mem::MemoryRegion& region,
                          const ControlToken& token);
    // The class has retired `region` (MemoryRegistry::retire: its key no longer validates) and
    // frees its translation table when this returns ok or, after pending, when the driver
    // completes: the driver says when no data path of the device can still be using the table.
    // Null: the table is freed at once.
    Status (*deregister_mr)(Device& device, const mem::MemoryRegion& region,
                            const ControlToken& token);
    // Progress of pending control work when the caller polls (ARP, flushes, owners' answers) and
    // the moment to raise events the data path recorded.
    void (*control_progress)(Device& device);
    // Exported connection details of a QP: the driver's current send PSN.
    std::uint32_t (*qp_send_psn)(Device& device, void* qp);
    // The QP's current connection (mem::ConnectionId: a new one each time it goes from INIT to
    // RTR, no_connection after ERR or RESET), which register_for_connection binds a region to and
    // the device checks on every use of its keys. Null: the device has no connection-bound
    // regions and register_for_connection fails with not_supported.
    mem::ConnectionId (*qp_connection)(Device& device, void* qp);
    // The QP's state now: the driver's alone, since a device moves a QP to ERR by itself (an
    // error NAK, retries exhausted, a bad WR). Read from any control thread while the data path
    // runs.
    QpState (*qp_state)(Device& device, void* qp);
    // The device is going away (vdev remove): stop the port, free every driver object. Requests
    // still pending are not completed by the driver; the class fails them with device_removed.
    void (*close)(Device& device);
    // Appends the device's counters (control path; values read from the owning lcores' data).
    void (*stats)(Device& device, std::vector<Counter>& out);
    // Optional (telemetry's qp_list and qp_info, QueuePair::query_status): appends the status of
    // every QP of the device, or with `only` of that QP alone (nothing when there is none). Called
    // from DPDK's telemetry thread and from control threads while the data path runs: the driver
    // must keep every QP it reports alive for the call, and the values are a racy snapshot, as
    // ethdev's stats are.
    void (*qp_telemetry)(Device& device, std::optional<std::uint32_t> only,
                         std::vector<QpStatus>& out);
    // Optional (Context::attach_poller): the calling thread takes queue group `group` (every
    // group when none is named; the class checked it exists) to drive it with
    // FastPathOps::progress until it detaches; busy, naming who drives a group, when another
    // thread (or a progress service) does. `*poller` is the driver's object that progress()
    // takes. Null: not_supported.
    Status (*attach_poller)(Device& device, std::optional<std::uint16_t> group, void** poller);
    // Gives the groups back (any thread; the attaching one must have stopped calling progress).
    void (*detach_poller)(Device& device, void* poller);
    // Optional (Context::create_srq): never pending. The class calls destroy_srq only for an SRQ
    // no QP uses any more. Null: not_supported.
    Status (*create_srq)(Device& device, const SrqInit& init, SrqCreated& out);
    void (*destroy_srq)(Device& device, void* srq);
    // Arms the limit event (0 disarms); the driver raises srq_limit_reached once when it fires.
    Status (*arm_srq_limit)(Device& device, void* srq, std::uint32_t limit);
    // Optional (SharedReceiveQueue::resize, only with cap_srq_resize): the SRQ holds `max_wr`
    // receive WRs from now on (`out`: what it got, rounded up), keeping those it holds, in order,
    // and `limit` armed when given; invalid_parameter, with nothing changed, below what it holds
    // or below the limit (the new one, or the one armed). Called where a post could be (the SRQ's
    // one producer), never beside one.
    Status (*resize_srq)(Device& device, void* srq, std::uint32_t max_wr,
                         std::optional<std::uint32_t> limit, SrqCaps& out);
    // The limit armed now (0 once fired) and the receive WRs the SRQ holds.
    void (*query_srq)(Device& device, void* srq, std::uint32_t& limit, std::uint32_t& outstanding);
    // Optional (ProtectionDomain::create_ah, with cap_ud): `*ah` is the driver's object, handed
    // back at once even when the creation pends (resolving the peer's MAC); UdFields::ah names
    // it once created. destroy_ah is called only for a created AH and never pends: a UD WR takes
    // what it needs from its AH when it is posted.
    Status (*create_ah)(Device& device, const AhInit& init, const ControlToken& token, void** ah);
    void (*destroy_ah)(Device& device, void* ah);
};

struct DeviceConfig {
    std::string name;
    rte_device* dpdk_device = nullptr; // for rte_dev_remove()
    const DeviceOps* ops = nullptr;
    // post_error too: it reads the reason the driver recorded when it last refused a post.
    FastPathOps fast_path{};
    // Static attributes; version/size/offsets are filled by the class. A device with
    // cap_reserved_lkey (seed 004) takes the registry's DMA region once registered, holds it for
    // its whole life and sets attr.reserved_lkey to its lkey: get_dma_region() then returns that
    // same region, hence that same lkey, to every consumer of the device (every PD and context).
    DeviceAttr attr{};
    std::uint8_t port_count = 1;
    mem::RegistryConfig registry{};
    void* driver_private = nullptr;
};

// Class-owned device state; drivers read it and keep their own data in driver_private.
struct Device {
    DeviceId id = invalid_device;
    DeviceConfig config;
    std::unique_ptr<mem::MemoryRegistry> registry;
    bool removed = false;
    [[nodiscard]] void* driver_private() const { return config.driver_private; }
};

// A driver on DPDK's vdev bus: --vdev=<name><n>,<args> and rte_vdev_init() reach `probe` with the
// device's full name and its argument string; rte_dev_remove() reaches `remove`. Call from a
// constructor (as RTE_PMD_REGISTER_VDEV does), before rte_eal_init parses --vdev.
using VdevProbe = int (*)(rte_device* device, const char* name, const char* args);
using VdevRemove = int (*)(rte_device* device, const char* name);
void register_vdev_driver(const char* name, VdevProbe probe, VdevRemove remove);

// Applies the fields `mask` names from `attr` to `current` (what modify_qp means): a driver to the
// QP's QpInit::attr. The state fields are left alone (DeviceOps::qp_state).
void merge_qp_attr(QpAttr& current, const QpAttr& attr, QpAttrMask mask);

// Why a probe failed, for create_device() to return (EAL only sees an errno).
void report_probe_error(const char* device_name, const Error& error);

// Called by a driver's probe: the class takes a device slot and publishes the fast-path entry.
Result<DeviceId> register_device(DeviceConfig config);
// Called by a driver's remove: contexts get device_removed, the fast-path entry goes dummy,
// DeviceOps::close runs; the slot is freed once the last context has closed.
Status unregister_device(DeviceId id);
Device* device(DeviceId id);
Device* device_by_dpdk(const rte_device* dpdk_device);

// A pending request has finished. Control path only (it takes the class's lock and allocates): a
// driver whose data path finishes a request hands it back to its control_progress first.
void complete_control(Device& device, const ControlToken& token, StatusCode status,
                      std::string message = {});
// An asynchronous event: about a QP (qpn != 0) or an SRQ (srqn != 0) it goes to the context that
// holds it, else to every context of the device. Control path only, as complete_control.
void raise_event(Device& device, EventType type, std::uint8_t port = 0, std::uint32_t qpn = 0,
                 std::uint32_t srqn = 0);

} // namespace prdma::rdma::driver
