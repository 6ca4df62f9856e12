// Work requests and completions: fixed-size, cache-line-aligned structs, as a NIC's WQEs/CQEs are,
// so a burst is an array the driver walks without allocating.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include <prdma/compiler.hpp>
#include <prdma/flags.hpp>
#include <prdma/mem/key.hpp>
#include <prdma/rdmadev/types.hpp>

namespace prdma::mem {
class MemoryRegion;
} // namespace prdma::mem

namespace prdma::rdma {

struct Sge {
    std::uint64_t addr = 0;
    std::uint32_t length = 0;
    std::uint32_t lkey = 0;
};
static_assert(sizeof(Sge) == 16);

enum class WrOpcode : std::uint8_t {
    send,
    send_with_imm,
    send_with_inv,
    rdma_write,
    rdma_write_with_imm,
    rdma_read,
    atomic_cmp_swap,
    atomic_fetch_add,
    fast_reg,  // seed 001 NdkFastRegister, executed in send-queue order
    local_inv, // LOCAL_INV
};
std::string_view wr_opcode_name(WrOpcode opcode);

enum class SendFlag : std::uint16_t {
    signaled = 1U << 0,    // without it: silent success (a completion only on error)
    fence = 1U << 1,       // wait for earlier reads/atomics before this WR
    read_fence = 1U << 2,  // NDK read fence: wait for earlier reads (seed 001)
    inline_data = 1U << 3, // payload copied at post time; lkey ignored
    defer = 1U << 4,       // queue without ringing the doorbell (NDK DEFER)
    solicited = 1U << 5,
};
constexpr bool prdma_flag_enum(SendFlag) {
    return true;
}
using SendFlags = Flags<SendFlag>;
// The verbs spellings (IBV_SEND_*).
inline constexpr SendFlag send_signaled = SendFlag::signaled;
inline constexpr SendFlag send_fence = SendFlag::fence;
inline constexpr SendFlag send_read_fence = SendFlag::read_fence;
inline constexpr SendFlag send_inline = SendFlag::inline_data;
inline constexpr SendFlag send_defer = SendFlag::defer;
inline constexpr SendFlag send_solicited = SendFlag::solicited;

struct FastRegFields {
    mem::MemoryRegion* region = nullptr; // allocated for fast-register (rdmadev fast_reg MR)
    // Page-aligned IOVAs; the array must stay valid until the WR completes (it is read when the
    // send queue reaches the WR, which a `defer` may postpone).
    const std::uint64_t* pages = nullptr;
    std::uint64_t length = 0;
    std::uint64_t base_va = 0;
    std::uint32_t page_count = 0;
    std::uint32_t first_byte_offset = 0;
    mem::MemoryKey key = 0; // the region's key with its new variant (mem::next_key)
    AccessFlags access;
    std::uint8_t page_shift = 12;
};

// The per-opcode parts of a SendWr. Named, not anonymous: ISO C++ has no anonymous structs, and
// clang says so under -Wpedantic.
struct RdmaFields {
    std::uint64_t remote_addr;
    std::uint32_t rkey;
};
struct AtomicFields {
    std::uint64_t remote_addr;
    std::uint64_t compare_add; // compare (CMP_SWAP) or add (FETCH_ADD)
    std::uint64_t swap;
    std::uint32_t rkey;
};
struct LocalInvFields {
    std::uint32_t key;
};
// A UD SEND's destination: the driver's address handle (AddressHandle::wr_handle()), the QP it
// names there and the Q_Key to carry (high bit set: the sending QP's own).
struct UdFields {
    void* ah;
    std::uint32_t remote_qpn;
    std::uint32_t remote_qkey;
};

// One send-queue work request; 128 bytes. Its num_sge SGEs are sg_list[0..num_sge) when sg_list is
// set, else the one `sge` (num_sge 0 or 1; more without an sg_list is refused at post). The
// builders below set an opcode with its fields and its SGE count together.
struct PRDMA_CACHE_ALIGNED SendWr {
    std::uint64_t wr_id = 0;
    WrOpcode opcode = WrOpcode::send;
    std::uint8_t num_sge = 0;
    SendFlags flags;
    std::uint32_t imm_or_invalidate = 0; // immediate data (host order) or rkey to invalidate
    Sge sge{};
    const Sge* sg_list = nullptr;
    union {
        RdmaFields rdma;
        AtomicFields atomic;
        FastRegFields fast_reg{}; // the largest: zeroes the union
        LocalInvFields local_inv;
        UdFields ud; // a SEND or SEND with immediate on a UD QP
    };

    [[nodiscard]] const Sge* sges() const noexcept { return sg_list != nullptr ? sg_list : &sge; }
};
static_assert(sizeof(SendWr) == 128);

// Work-request builders, in the spirit of verbs' ibv_wr_rdma_write / ibv_wr_set_sge and mlx5's
// set_raddr_seg: the opcode, its remote fields and the SGE count come together, so none of them
// is forgotten. Signalled unless `flags` says otherwise:
//   const rdma::SendWr wr = rdma::write_wr(1, {buf, 64, mr.lkey()}, peer.address, peer.rkey);
//   rdma::post_send(qp, {&wr, 1});
[[nodiscard]] inline SendWr send_wr(std::uint64_t wr_id, const Sge& local,
                                    SendFlags flags = send_signaled) {
    SendWr wr;
    wr.wr_id = wr_id;
    wr.opcode = WrOpcode::send;
    wr.num_sge = 1;
    wr.flags = flags;
    wr.sge = local;
    return wr;
}
[[nodiscard]] inline SendWr write_wr(std::uint64_t wr_id, const Sge& local,
                                     std::uint64_t remote_addr, std::uint32_t rkey,
                                     SendFlags flags = send_signaled) {
    SendWr wr = send_wr(wr_id, local, flags);
    wr.opcode = WrOpcode::rdma_write;
    wr.rdma = {remote_addr, rkey};
    return wr;
}
// Reads [remote_addr, + local.length) of the peer into `local`.
[[nodiscard]] inline SendWr read_wr(std::uint64_t wr_id, const Sge& local,
                                    std::uint64_t remote_addr, std::uint32_t rkey,
                                    SendFlags flags = send_signaled) {
    SendWr wr = write_wr(wr_id, local, remote_addr, rkey, flags);
    wr.opcode = WrOpcode::rdma_read;
    return wr;
}
// `original` (8 bytes) receives the value the peer held before the add.
[[nodiscard]] inline SendWr fetch_add_wr(std::uint64_t wr_id, const Sge& original,
                                         std::uint64_t remote_addr, std::uint32_t rkey,
                                         std::uint64_t add, SendFlags flags = send_signaled) {
    SendWr wr = send_wr(wr_id, original, flags);
    wr.opcode = WrOpcode::atomic_fetch_add;
    wr.atomic = {remote_addr, add, 0, rkey};
    return wr;
}
[[nodiscard]] inline SendWr compare_swap_wr(std::uint64_t wr_id, const Sge& original,
                                            std::uint64_t remote_addr, std::uint32_t rkey,
                                            std::uint64_t compare, std::uint64_t swap,
                                            SendFlags flags = send_signaled) {
    SendWr wr = fetch_add_wr(wr_id, original, remote_addr, rkey, compare, flags);
    wr.opcode = WrOpcode::atomic_cmp_swap;
    wr.atomic.swap = swap;
    return wr;
}
// Seed 001's NdkFastRegister: maps `fields.region` onto the listed pages under fields.key.
[[nodiscard]] inline SendWr fast_reg_wr(std::uint64_t wr_id, const FastRegFields& fields,
                                        SendFlags flags = send_signaled) {
    SendWr wr;
    wr.wr_id = wr_id;
    wr.opcode = WrOpcode::fast_reg;
    wr.flags = flags;
    wr.fast_reg = fields;
    return wr;
}
// Invalidates `key` locally (LOCAL_INV): the region's key is dead until the next fast-register.
[[nodiscard]] inline SendWr local_inv_wr(std::uint64_t wr_id, std::uint32_t key,
                                         SendFlags flags = send_signaled) {
    SendWr wr;
    wr.wr_id = wr_id;
    wr.opcode = WrOpcode::local_inv;
    wr.flags = flags;
    wr.local_inv = {key};
    return wr;
}
// Gathers from (or scatters into) `sges` instead of one SGE: the list, which must stay valid for
// the post, and its count, together.
template <typename Wr>
Wr& with_sges(Wr& wr, std::span<const Sge> sges) {
    wr.sg_list = sges.data();
    wr.num_sge = static_cast<std::uint8_t>(sges.size());
    return wr;
}

// One receive-queue work request; 64 bytes; its SGEs as a SendWr's.
struct PRDMA_CACHE_ALIGNED RecvWr {
    std::uint64_t wr_id = 0;
    std::uint8_t num_sge = 0;
    Sge sge{};
    const Sge* sg_list = nullptr;
    [[nodiscard]] const Sge* sges() const noexcept { return sg_list != nullptr ? sg_list : &sge; }
};
static_assert(sizeof(RecvWr) == 64);

[[nodiscard]] inline RecvWr recv_wr(std::uint64_t wr_id, const Sge& local) {
    RecvWr wr;
    wr.wr_id = wr_id;
    wr.num_sge = 1;
    wr.sge = local;
    return wr;
}

// Completion status (IBTA / ibv_wc_status).
enum class WcStatus : std::uint8_t {
    success = 0,
    local_length_error,
    local_qp_operation_error,
    local_protection_error,
    wr_flush_error,
    bad_response_error,
    local_access_error,
    remote_invalid_request_error,
    remote_access_error,
    remote_operation_error,
    retry_exceeded,
    rnr_retry_exceeded,
    fatal_error,
    general_error,
};
std::string_view wc_status_name(WcStatus status);

enum class WcOpcode : std::uint8_t {
    send,
    rdma_write,
    rdma_read,
    atomic_cmp_swap,
    atomic_fetch_add,
    fast_reg,
    local_inv,
    recv,
    recv_rdma_with_imm,
};

enum class WcFlag : std::uint8_t {
    with_imm = 1U << 0,
    with_inv = 1U << 1,
    grh = 1U << 2, // UD: the receive buffer starts with the 40-byte GRH (IBV_WC_GRH)
};
constexpr bool prdma_flag_enum(WcFlag) {
    return true;
}
using WcFlags = Flags<WcFlag>;
inline constexpr WcFlag wc_with_imm = WcFlag::with_imm;
inline constexpr WcFlag wc_with_inv = WcFlag::with_inv;
inline constexpr WcFlag wc_grh = WcFlag::grh;

// One completion; 64 bytes.
struct PRDMA_CACHE_ALIGNED WorkCompletion {
    std::uint64_t wr_id = 0;
    WcStatus status = WcStatus::success;
    WcOpcode opcode = WcOpcode::send;
    WcFlags flags;
    std::uint32_t byte_len = 0;
    std::uint32_t imm_or_invalidated = 0;
    std::uint32_t qpn = 0;
    std::uint32_t src_qpn = 0;
    std::uint32_t vendor_error = 0; // driver detail, e.g. a mem::KeyCheck value
    Gid src_gid{};                  // UD receives: the sender's (IPv4 as IPv4-mapped)
};
static_assert(sizeof(WorkCompletion) == 64);

// The vendor_error of a FAST_REG that completes in error: which rule of seed 001 (NdkFastRegister)
// or of the key discipline it broke, one value per rule. They start at 0x100 so they never read as
// a mem::KeyCheck, which local protection errors of other WRs carry. The status is
// local_protection_error for wrong_pd and access_violation, local_qp_operation_error otherwise;
// the QP goes to error, as for every failed WR.
enum class FastRegVendorError : std::uint32_t {
    none = 0,
    no_region = 0x100,   // fast_reg.region is null
    not_fast_reg_region, // the MR was not initialised for fast-register (alloc_fast_reg_region)
    key_index_changed,   // fast_reg.key names another MR: only the variant may change (next_key)
    variant_not_changed, // fast_reg.key is the last registration's key: stale keys would live on
    still_valid,         // the MR is registered: LOCAL_INV (or remote invalidate) it first
    wrong_pd,            // the MR belongs to another protection domain than the QP
    access_violation,    // remote access asked of an MR not initialised for it (seed 001's
                         // STATUS_ACCESS_VIOLATION)
    bad_access,          // the access mask breaks the rules (remote write without local write)
    retired,             // the MR is being deregistered
    bad_page_size,       // page_shift outside [12, 40]
    no_pages,            // page_count is 0 or pages is null
    too_many_pages,      // more pages than the MR was allocated for
    zero_length,         // length is 0
    fbo_beyond_page,     // first_byte_offset is not inside the first page
    length_beyond_pages, // length > page_count * page size - first_byte_offset (seed 001)
    base_va_not_fbo_aligned, // base_va is not n * page size + first_byte_offset (seed 001)
    address_overflow,        // base_va + length wraps the address space
    page_not_aligned,        // a page address is not a multiple of the page size (seed 001)
    page_not_mapped,         // a page is not memory the device can reach
};

} // namespace prdma::rdma
