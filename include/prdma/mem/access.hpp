// Access rights of a memory region, and the rules that tie them together (IBTA, seeds 001/002/004).
#pragma once

#include <cstdint>
#include <string_view>

#include <prdma/flags.hpp>

namespace prdma::mem {

// The bits are verbs' IBV_ACCESS_* where verbs has them (local write, remote write, remote read,
// remote atomic), so a mask converts with bits() / from_bits().
enum class Access : std::uint32_t {
    none = 0,
    local_write = 1U << 0,
    remote_write = 1U << 1,
    remote_read = 1U << 2,
    remote_atomic = 1U << 3,
    // Local read is always allowed; listed so a check can name it.
    local_read = 1U << 4,
};
constexpr bool prdma_flag_enum(Access) {
    return true;
}
using AccessFlags = Flags<Access>;

inline constexpr Access access_none = Access::none;
inline constexpr Access access_local_write = Access::local_write;
inline constexpr Access access_remote_write = Access::remote_write;
inline constexpr Access access_remote_read = Access::remote_read;
inline constexpr Access access_remote_atomic = Access::remote_atomic;
inline constexpr Access access_local_read = Access::local_read;

inline constexpr AccessFlags access_remote_any =
    access_remote_write | access_remote_read | access_remote_atomic;
inline constexpr AccessFlags access_all = access_local_write | access_remote_write |
                                          access_remote_read | access_remote_atomic |
                                          access_local_read;

enum class AccessRuleError : std::uint8_t {
    ok = 0,
    unknown_flags,                  // bits outside access_all
    remote_write_needs_local_write, // IBTA: remote write/atomic require local write
};

// Checks a requested access mask against the IBTA rules. One rule for every entry point
// (register_memory, register_sgl, register_virtual, the registration cache, alloc_fast_reg_region,
// a FAST_REG work request, masks made by access_from_ndk_flags): remote write or remote atomic
// without local write is refused, as verbs refuses it; no entry point adds local write on the
// caller's behalf. NDK callers comply without trying: NDK spells ALLOW_REMOTE_WRITE as 0x30, which
// contains ALLOW_LOCAL_WRITE. Two registrations always allow local write because they have no
// flag for it: seed 002's WSP regions (the registering process owns the buffer) and the DMA MR
// (seed 004).
constexpr AccessRuleError check_access_rules(AccessFlags access) {
    if ((access.bits() & ~access_all.bits()) != 0) {
        return AccessRuleError::unknown_flags;
    }
    if (access.any_of(access_remote_write | access_remote_atomic) &&
        !access.has(access_local_write)) {
        return AccessRuleError::remote_write_needs_local_write;
    }
    return AccessRuleError::ok;
}

std::string_view access_rule_error_name(AccessRuleError error);

// NDK (seed 001) flags as NDK_OP_FLAG_* values. ALLOW_REMOTE_WRITE (0x30) contains
// ALLOW_LOCAL_WRITE (0x10): NDK's own spelling of the rule above.
namespace ndk {
inline constexpr std::uint32_t silent_success = 0x00000001;
inline constexpr std::uint32_t read_fence = 0x00000002;
inline constexpr std::uint32_t allow_remote_read = 0x00000008;
inline constexpr std::uint32_t allow_local_write = 0x00000010;
inline constexpr std::uint32_t allow_remote_write = 0x00000030;
inline constexpr std::uint32_t defer = 0x00000200;
} // namespace ndk

// Bit for bit: 0x10 is local write and 0x20 (ALLOW_REMOTE_WRITE's own bit) remote write, so
// 0x20 without 0x10 is a mask check_access_rules refuses, not one silently without write.
constexpr AccessFlags access_from_ndk_flags(std::uint32_t flags) {
    AccessFlags access = access_local_read;
    if ((flags & ndk::allow_local_write) != 0) {
        access |= access_local_write;
    }
    if ((flags & ndk::allow_remote_write & ~ndk::allow_local_write) != 0) {
        access |= access_remote_write;
    }
    if ((flags & ndk::allow_remote_read) != 0) {
        access |= access_remote_read;
    }
    return access;
}

// WSP (seed 002) MEM_READ / MEM_WRITE / MEM_READWRITE: what the connected peer may do. Read-only
// is never remotely writable and write-only never remotely readable.
enum class WspAccess : std::uint8_t { read = 1, write = 2, read_write = 3 };

constexpr AccessFlags access_from_wsp(WspAccess wsp) {
    AccessFlags access = access_local_read | access_local_write;
    if ((static_cast<unsigned>(wsp) & 1U) != 0) {
        access |= access_remote_read;
    }
    if ((static_cast<unsigned>(wsp) & 2U) != 0) {
        access |= access_remote_write;
    }
    return access;
}

} // namespace prdma::mem
