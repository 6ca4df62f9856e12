// What the responder harness rewrites in a fuzzed frame before it reaches the device: the fields a
// fuzzer cannot guess (the live QP's number, its PSN window, the keys and addresses of the regions
// registered in this process, the peer's address, the ICRC). Without this, nearly every input
// would end at the ICRC check or the unknown-QP drop and the responder's stages would never run.
//
// Each rewrite can be switched off per frame by a flag bit, so the drops stay reachable too.
// Fields are rewritten relative to what the frame carries, so mutations keep their meaning: a PSN
// becomes an offset from the QP's window, a RETH VA's low 16 bits a signed offset from the start
// of the region its R_Key's low bits choose.
#pragma once

#include <array>
#include <cstdint>
#include <span>

namespace prdma::fuzz {

enum FixupFlags : std::uint8_t {
    keep_qpn = 1U << 0,    // BTH destination QP as written
    keep_psn = 1U << 1,    // BTH PSN as written (else: window base + PSN)
    keep_keys = 1U << 2,   // RETH / AtomicETH VA and R_Key, IETH key as written
    keep_source = 1U << 3, // IP source (and IPv4 checksum) as written
    keep_icrc = 1U << 4,   // ICRC as written
};

struct FixupRegion {
    std::uint64_t addr = 0;
    std::uint32_t rkey = 0;
};

inline constexpr std::size_t fixup_regions = 4;

struct FixupTarget {
    std::uint32_t qpn = 0;
    std::uint32_t request_psn_base = 0;  // the responder's expected PSN: SEND, WRITE, READ, atomics
    std::uint32_t response_psn_base = 0; // the requester's first PSN: ACKs and responses
    std::uint32_t peer_ipv4 = 0;         // host order; IPv6 frames get its IPv4-mapped form
    // R_Key & 3 picks one: the harness's regions (one of them with no remote access at all).
    std::array<FixupRegion, fixup_regions> regions{};
};

// Rewrites `frame` in place as `flags` allow. Never reads or writes outside `frame`; a frame too
// broken for a rewrite keeps those bytes.
void fix_up_frame(std::span<std::uint8_t> frame, std::uint8_t flags,
                  const FixupTarget& target) noexcept;

} // namespace prdma::fuzz
