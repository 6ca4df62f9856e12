// Device and port attributes as seed 003 (IRP-based verbs) specifies them: versioned blocks that
// are self-relative (offsets from the block's start, never pointers), so one buffer holds the
// device block, then each port block, then each port's GID and P_Key tables. A caller may ask
// for a prefix only; every block starts with {version, size}.
#pragma once

#include <cstdint>
#include <type_traits>

#include <prdma/rdmadev/types.hpp>

namespace prdma::rdma {

inline constexpr std::uint32_t attr_version_1 = 1;
inline constexpr std::uint32_t attr_version_current = attr_version_1;

// The minimal output: enough to learn the required size (seed 003's IB_QUERY_CA_OUT).
struct AttrHeader {
    std::uint32_t version = attr_version_current;
    std::uint32_t size = 0; // bytes required for the whole answer
};

struct alignas(8) DeviceAttr {
    std::uint32_t version = attr_version_current;
    std::uint32_t size = 0; // the whole answer: device + ports + tables
    std::uint64_t node_guid = 0;
    std::uint64_t system_image_guid = 0;
    std::uint32_t vendor_id = 0;
    std::uint16_t device_id = 0;
    std::uint16_t device_rev = 0;
    std::uint32_t fw_version = 0;
    std::uint32_t port_attr_offset = 0; // from the start of this block to the first PortAttr
    std::uint8_t port_count = 0;
    std::uint8_t max_qp_rd_atomic = 0;      // reads/atomics a QP may have outstanding
    std::uint8_t max_qp_init_rd_atomic = 0; // reads/atomics a QP accepts from its peer
    std::uint8_t reserved0 = 0;
    std::uint32_t max_ah = 0; // address handles the device holds (0 without cap_ud)
    // Bit n set: pages of 2^n bytes (IB page_size_cap; seed 003 counts bits 1-based, we do not).
    std::uint64_t page_size_support = 0;
    DeviceCapabilities capability_flags;
    std::uint32_t max_qp = 0;
    std::uint32_t max_qp_wr = 0;
    std::uint32_t max_sge = 0;
    std::uint32_t max_cq = 0;
    std::uint32_t max_cqe = 0;
    std::uint32_t max_pd = 0;
    std::uint32_t max_mr = 0; // regions an application may register (the reserved L_Key's not)
    std::uint64_t max_mr_size = 0;
    std::uint32_t max_inline_data = 0;
    std::uint32_t max_fast_reg_pages = 0;
    std::uint32_t max_queue_groups = 0;
    std::uint32_t max_srq = 0; // 0: no shared receive queues (its WRs and SGEs: max_qp_wr, max_sge)
    // cap_reserved_lkey (seed 004): the DMA MR's lkey (low 32 bits), the same for every PD and
    // context of the device for its whole life. An SGE may carry it for any DMA memory without a
    // registration; get_dma_region() returns a region with this lkey. 0 without the capability.
    std::uint64_t reserved_lkey = 0;
};

struct alignas(8) PortAttr {
    std::uint32_t version = attr_version_current;
    std::uint32_t size = 0; // this port's block with its tables
    std::uint64_t port_guid = 0;
    PortState state = PortState::down;
    Mtu max_mtu = Mtu::mtu_1024;
    Mtu active_mtu = Mtu::mtu_1024;
    std::uint8_t port_num = 0; // 1-based
    std::uint32_t link_speed_mbps = 0;
    std::uint8_t link_width = 1; // IB width code (1 = 1x)
    std::uint8_t reserved0[3] = {};
    std::uint32_t reserved2 = 0; // every byte is a field: no padding leaks into an answer
    std::uint64_t max_msg_size = 0;
    DeviceCapabilities capability_flags;
    std::uint16_t gid_count = 0;
    std::uint16_t pkey_count = 0;
    std::uint32_t next_port_offset = 0; // from the start of this block; 0 for the last port
    std::uint32_t gid_table_offset = 0; // from the start of this block
    std::uint32_t pkey_table_offset = 0;
    std::uint8_t mac[6] = {}; // the port's Ethernet address (RoCE)
    std::uint16_t reserved1 = 0;
    std::uint32_t reserved3 = 0;
};
// The blocks are copied byte for byte into the caller's buffer: a padding byte would carry
// whatever the stack held (a query answered differently each time), so there is none.
static_assert(std::has_unique_object_representations_v<DeviceAttr>);
static_assert(std::has_unique_object_representations_v<PortAttr>);
static_assert(sizeof(DeviceAttr) == 120 && sizeof(PortAttr) == 72, "the seed 003 layout");

// Offset-based access, so a caller never follows a pointer into the buffer.
template <typename T>
const T* attr_at(const void* block, std::uint32_t offset) {
    return reinterpret_cast<const T*>(static_cast<const std::uint8_t*>(block) + offset);
}

} // namespace prdma::rdma
