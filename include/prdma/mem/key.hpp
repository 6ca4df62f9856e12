// Memory keys as an application sees them (struct ibv_mr's lkey and rkey): a 24-bit table index
// and an 8-bit variant, plain values. The table that checks them is the driver SDK's
// memory_key.hpp.
#pragma once

#include <cstdint>
#include <string_view>

namespace prdma::mem {

using MemoryKey = std::uint32_t;

inline constexpr std::uint32_t key_index_bits = 24;
inline constexpr std::uint32_t max_key_index = (1U << key_index_bits) - 1;

constexpr std::uint32_t key_index(MemoryKey key) {
    return key >> 8;
}
constexpr std::uint8_t key_variant(MemoryKey key) {
    return static_cast<std::uint8_t>(key & 0xff);
}
constexpr MemoryKey make_key(std::uint32_t index, std::uint8_t variant) {
    return (index << 8) | variant;
}
// The key a consumer passes to its next fast-register of the same MR (ib_inc_rkey).
constexpr MemoryKey next_key(MemoryKey key) {
    return make_key(key_index(key), static_cast<std::uint8_t>(key_variant(key) + 1));
}

// Result of a key check; every failure is its own value so counters and errors can say which.
// A local protection error's WorkCompletion::vendor_error carries one.
enum class KeyCheck : std::uint8_t {
    ok = 0,
    bad_index,        // index beyond the table
    free_entry,       // nothing registered at this index
    stale_variant,    // the index was registered again since this key was handed out
    invalidated,      // the current key of an entry that is not valid: a fast-register MR before
                      // its first FAST_REG or after LOCAL_INV (the invalidated key is stale)
    wrong_pd,         // the region belongs to another protection domain
    lkey_only,        // a DMA MR: its key is never valid as an rkey
    access_denied,    // the region does not allow this access
    out_of_bounds,    // [addr, addr + len) is not inside the region
    wrong_connection, // bound to another connection, or one that has ended (seed 002)
};

std::string_view key_check_name(KeyCheck check);

// A connection: what a queue pair gets from the device each time it is connected (INIT to RTR),
// never reused by the device, and loses when it leaves the connection (ERR, RESET, destroyed).
// Seed 002's regions are bound to one: a QPN is reused, a connection is not.
using ConnectionId = std::uint64_t;
inline constexpr ConnectionId no_connection = 0;  // a QP that is not connected
inline constexpr ConnectionId any_connection = 0; // a region usable from every connection

} // namespace prdma::mem
