// Vocabulary of the rdmadev device class: identifiers, GIDs, states and enumerations shared by
// the public API, the driver interface and the fast path.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include <prdma/build_config.hpp>
#include <prdma/flags.hpp>
#include <prdma/mem/access.hpp>

namespace prdma::rdma {

using DeviceId = std::uint16_t;
inline constexpr DeviceId invalid_device = 0xffff;
inline constexpr unsigned max_devices = PRDMA_MAX_DEVICES;
inline constexpr unsigned max_queue_groups = PRDMA_MAX_QUEUE_GROUPS;
// An object every queue group uses (Context::create_srq): not a group of its own.
inline constexpr std::uint16_t any_queue_group = 0xffff;

using mem::AccessFlags;

// 128-bit GID in network byte order; RoCEv2 IPv4 addresses are IPv4-mapped (::ffff:a.b.c.d).
struct Gid {
    std::array<std::uint8_t, 16> raw{};
    friend bool operator==(const Gid&, const Gid&) = default;
    static Gid from_ipv4(std::uint32_t address_host_order);
    [[nodiscard]] bool is_ipv4_mapped() const;
    // The IPv4 address of an IPv4-mapped GID (::ffff:a.b.c.d), host order; meaningful only when
    // is_ipv4_mapped().
    [[nodiscard]] std::uint32_t ipv4_host_order() const;
};

enum class PortState : std::uint8_t { nop = 0, down = 1, init = 2, armed = 3, active = 4 };

// IBTA path MTU codes.
enum class Mtu : std::uint8_t {
    mtu_256 = 1,
    mtu_512 = 2,
    mtu_1024 = 3,
    mtu_2048 = 4,
    mtu_4096 = 5
};
constexpr unsigned mtu_bytes(Mtu mtu) {
    return 128U << static_cast<unsigned>(mtu);
}
// Largest IB MTU not above an Ethernet payload (RoCEv2 headers + ICRC must fit beside it).
Mtu mtu_for_ethernet(unsigned ethernet_mtu);

// ibv_qp_type's values: RC connects two QPs; UD sends datagrams to any QP an address handle
// reaches, one packet each, unacknowledged.
enum class QpType : std::uint8_t { rc = 2, ud = 4 };
std::string_view qp_type_name(QpType type);

enum class QpState : std::uint8_t { reset, init, rtr, rts, sqd, sqe, err };
std::string_view qp_state_name(QpState state);
// A node or port GUID as ibv_devinfo prints it: 0x801ee0fffe333e37 as 801e:e0ff:fe33:3e37.
std::string guid_string(std::uint64_t guid);

// Attribute mask of modify_qp (ibv_qp_attr_mask's meaning): which fields of a QpAttr count.
enum class QpAttrField : std::uint32_t {
    state = 1U << 0,
    access_flags = 1U << 1,
    port = 1U << 2,
    path_mtu = 1U << 3,
    dest = 1U << 4, // destination GID (and MAC, when known)
    dest_qpn = 1U << 5,
    rq_psn = 1U << 6,
    sq_psn = 1U << 7,
    timeout = 1U << 8,
    retry_cnt = 1U << 9,
    rnr_retry = 1U << 10,
    min_rnr_timer = 1U << 11,
    max_rd_atomic = 1U << 12,      // reads/atomics we may have outstanding
    max_dest_rd_atomic = 1U << 13, // reads/atomics the peer may have outstanding here
    cur_state = 1U << 14,
    qkey = 1U << 15, // UD: the Q_Key a datagram must carry to be received
    // RC: the peer is prdma and keeps packets past a loss, so only what it reports missing is
    // resent (QpAttr::selective_repeat). INIT -> RTR only.
    selective_repeat = 1U << 16,
};
constexpr bool prdma_flag_enum(QpAttrField) {
    return true;
}
using QpAttrMask = Flags<QpAttrField>;
inline constexpr QpAttrField qp_attr_state = QpAttrField::state;
inline constexpr QpAttrField qp_attr_access_flags = QpAttrField::access_flags;
inline constexpr QpAttrField qp_attr_port = QpAttrField::port;
inline constexpr QpAttrField qp_attr_path_mtu = QpAttrField::path_mtu;
inline constexpr QpAttrField qp_attr_dest = QpAttrField::dest;
inline constexpr QpAttrField qp_attr_dest_qpn = QpAttrField::dest_qpn;
inline constexpr QpAttrField qp_attr_rq_psn = QpAttrField::rq_psn;
inline constexpr QpAttrField qp_attr_sq_psn = QpAttrField::sq_psn;
inline constexpr QpAttrField qp_attr_timeout = QpAttrField::timeout;
inline constexpr QpAttrField qp_attr_retry_cnt = QpAttrField::retry_cnt;
inline constexpr QpAttrField qp_attr_rnr_retry = QpAttrField::rnr_retry;
inline constexpr QpAttrField qp_attr_min_rnr_timer = QpAttrField::min_rnr_timer;
inline constexpr QpAttrField qp_attr_max_rd_atomic = QpAttrField::max_rd_atomic;
inline constexpr QpAttrField qp_attr_max_dest_rd_atomic = QpAttrField::max_dest_rd_atomic;
inline constexpr QpAttrField qp_attr_cur_state = QpAttrField::cur_state;
inline constexpr QpAttrField qp_attr_qkey = QpAttrField::qkey;
inline constexpr QpAttrField qp_attr_selective_repeat = QpAttrField::selective_repeat;

// Device capability flags, one word (seed 003).
enum class DeviceCapability : std::uint32_t {
    rc = 1U << 0,
    fast_reg = 1U << 1,      // FAST_REG / LOCAL_INV work requests
    reserved_lkey = 1U << 2, // DMA MR / reserved L_Key (seed 004)
    atomic = 1U << 3,        // compare-swap, fetch-add
    send_with_inv = 1U << 4,
    inline_data = 1U << 5,
    pending_control = 1U << 6, // control verbs may complete later (seed 003)
    port_active_event = 1U << 7,
    software = 1U << 8,          // informational; nothing above the driver may depend on it
    srq_resize = 1U << 9,        // SharedReceiveQueue::resize (IBV_DEVICE_SRQ_RESIZE)
    ud = 1U << 10,               // unreliable datagram QPs and address handles
    selective_repeat = 1U << 11, // QpAttr::selective_repeat between two peers of this kind
};
constexpr bool prdma_flag_enum(DeviceCapability) {
    return true;
}
using DeviceCapabilities = Flags<DeviceCapability>;
inline constexpr DeviceCapability cap_rc = DeviceCapability::rc;
inline constexpr DeviceCapability cap_fast_reg = DeviceCapability::fast_reg;
inline constexpr DeviceCapability cap_reserved_lkey = DeviceCapability::reserved_lkey;
inline constexpr DeviceCapability cap_atomic = DeviceCapability::atomic;
inline constexpr DeviceCapability cap_send_with_inv = DeviceCapability::send_with_inv;
inline constexpr DeviceCapability cap_inline = DeviceCapability::inline_data;
inline constexpr DeviceCapability cap_pending_control = DeviceCapability::pending_control;
inline constexpr DeviceCapability cap_port_active_event = DeviceCapability::port_active_event;
inline constexpr DeviceCapability cap_software = DeviceCapability::software;
inline constexpr DeviceCapability cap_srq_resize = DeviceCapability::srq_resize;
inline constexpr DeviceCapability cap_ud = DeviceCapability::ud;
inline constexpr DeviceCapability cap_selective_repeat = DeviceCapability::selective_repeat;

// Control-path operations that can complete later (seed 003: any request may pend).
enum class ControlOp : std::uint8_t {
    open_context,
    close_context,
    create_qp,
    modify_qp,
    destroy_qp,
    destroy_cq,
    register_mr,
    create_cq,
    deregister_mr,
    create_ah, // pends while the peer's MAC is resolved
};
std::string_view control_op_name(ControlOp op);

// Asynchronous events (ibv_async_event's meaning, plus seed 000's forced close).
enum class EventType : std::uint8_t {
    port_active,
    port_error,
    qp_fatal,
    qp_last_wqe_reached,
    cq_error,
    device_removed,    // every later call fails with device_removed; release everything
    srq_limit_reached, // an armed SRQ fell below its limit (once per arming)
};
std::string_view event_type_name(EventType type);

} // namespace prdma::rdma
