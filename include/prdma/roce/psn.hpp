// 24-bit packet sequence numbers (IBTA 9.7.1): arithmetic modulo 2^24 and the comparison RC
// uses, where a PSN is "before" another when the forward distance from it is less than half the
// space (2^23).
//
// Every function takes PSNs that may carry garbage above bit 23 and ignores those bits; every
// result is a valid 24-bit PSN.
#pragma once

#include <cstdint>

namespace prdma::roce {

using Psn = std::uint32_t;

inline constexpr std::uint32_t psn_bits = 24;
inline constexpr Psn psn_mask = (Psn{1} << psn_bits) - 1;     // 0xffffff
inline constexpr std::int32_t psn_half = 1 << (psn_bits - 1); // 2^23

constexpr Psn psn_add(Psn psn, std::uint32_t n) noexcept {
    return (psn + n) & psn_mask;
}
constexpr Psn psn_next(Psn psn) noexcept {
    return psn_add(psn, 1);
}
constexpr Psn psn_sub(Psn psn, std::uint32_t n) noexcept {
    return (psn - n) & psn_mask;
}

// a - b as a signed distance in [-2^23, 2^23): positive when a is after b. A distance of
// exactly 2^23 is ambiguous and comes out as -2^23 (a before b).
constexpr std::int32_t psn_diff(Psn a, Psn b) noexcept {
    const std::uint32_t d = (a - b) & psn_mask;
    // Sign-extend bit 23: well defined for unsigned, and exact for d < 2^24.
    return static_cast<std::int32_t>(d ^ (1U << (psn_bits - 1))) - psn_half;
}

constexpr bool psn_before(Psn a, Psn b) noexcept {
    return psn_diff(a, b) < 0;
}
constexpr bool psn_after(Psn a, Psn b) noexcept {
    return psn_diff(a, b) > 0;
}
constexpr bool psn_before_or_equal(Psn a, Psn b) noexcept {
    return psn_diff(a, b) <= 0;
}
constexpr bool psn_after_or_equal(Psn a, Psn b) noexcept {
    return psn_diff(a, b) >= 0;
}
// first <= psn < first + count (count <= 2^23), across the wrap.
constexpr bool psn_in_window(Psn psn, Psn first, std::uint32_t count) noexcept {
    return ((psn - first) & psn_mask) < count;
}

// Packets a message of `length` bytes takes at path MTU `mtu`: a zero-length message still
// takes one packet. Returns 0 when mtu is 0.
constexpr std::uint32_t packets_for(std::uint32_t length, std::uint32_t mtu) noexcept {
    if (mtu == 0) {
        return 0;
    }
    if (length == 0) {
        return 1;
    }
    return length / mtu + (length % mtu != 0 ? 1U : 0U);
}

// IBTA path MTU encoding (PortInfo, QP attributes): 1 = 256 ... 5 = 4096.
enum class PathMtu : std::uint8_t { mtu256 = 1, mtu512, mtu1024, mtu2048, mtu4096 };

constexpr std::uint32_t mtu_bytes(PathMtu mtu) noexcept {
    const auto code = static_cast<std::uint32_t>(mtu);
    return code >= 1 && code <= 5 ? 128U << code : 0U;
}

} // namespace prdma::roce
