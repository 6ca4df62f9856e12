// Vocabulary of the rdmadev device class: identifiers, GIDs, states and enumerations shared by
// the public API, the driver interface and the fast path.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

#include <prdma/build_config.hpp>
#include <prdma/mem/access.hpp>

namespace prdma::rdma {

using DeviceId = std::uint16_t;
inline constexpr DeviceId invalid_device = 0xffff;
inline constexpr unsigned max_devices = PRDMA_MAX_DEVICES;
inline constexpr unsigned max_queue_groups = PRDMA_MAX_QUEUE_GROUPS;

using mem::AccessFlags;

// 128-bit GID in network byte order; RoCEv2 IPv4 addresses are IPv4-mapped (::ffff:a.b.c.d).
struct Gid {
    std::array<std::uint8_t, 16> raw{};
    friend bool operator==(const Gid&, const Gid&) = default;
    static Gid from_ipv4(std::uint32_t address_host_order);
    [[nodiscard]] bool is_ipv4_mapped() const;
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

enum class QpType : std::uint8_t { rc = 2 };

enum class QpState : std::uint8_t { reset, init, rtr, rts, sqd, sqe, err };
std::string_view qp_state_name(QpState state);

// Attribute mask of modify_qp (ibv_qp_attr_mask's meaning).
enum QpAttrMask : std::uint32_t {
    qp_attr_state = 1U << 0,
    qp_attr_access_flags = 1U << 1,
    qp_attr_port = 1U << 2,
    qp_attr_path_mtu = 1U << 3,
    qp_attr_dest = 1U << 4, // destination GID (and MAC, when known)
    qp_attr_dest_qpn = 1U << 5,
    qp_attr_rq_psn = 1U << 6,
    qp_attr_sq_psn = 1U << 7,
    qp_attr_timeout = 1U << 8,
    qp_attr_retry_cnt = 1U << 9,
    qp_attr_rnr_retry = 1U << 10,
    qp_attr_min_rnr_timer = 1U << 11,
    qp_attr_max_rd_atomic = 1U << 12,      // reads/atomics we may have outstanding
    qp_attr_max_dest_rd_atomic = 1U << 13, // reads/atomics the peer may have outstanding here
    qp_attr_cur_state = 1U << 14,
};

// Device capability flags, one word (seed 003).
enum DeviceCapability : std::uint32_t {
    cap_rc = 1U << 0,
    cap_fast_reg = 1U << 1,      // FAST_REG / LOCAL_INV work requests
    cap_reserved_lkey = 1U << 2, // DMA MR / reserved L_Key (seed 004)
    cap_atomic = 1U << 3,        // compare-swap, fetch-add
    cap_send_with_inv = 1U << 4,
    cap_inline = 1U << 5,
    cap_pending_control = 1U << 6, // control verbs may complete later (seed 003)
    cap_port_active_event = 1U << 7,
    cap_software = 1U << 8, // informational; nothing above the driver may depend on it
};

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
};
std::string_view control_op_name(ControlOp op);

// Asynchronous events (ibv_async_event's meaning, plus seed 000's forced close).
enum class EventType : std::uint8_t {
    port_active,
    port_error,
    qp_fatal,
    qp_last_wqe_reached,
    cq_error,
    device_removed, // every later call fails with device_removed; release everything
};
std::string_view event_type_name(EventType type);

} // namespace prdma::rdma
