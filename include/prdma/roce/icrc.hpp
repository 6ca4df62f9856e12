// The RoCEv2 Invariant CRC (IBTA Annex A17.3.3) and the CRC-32 under it.
//
// The CRC is the Ethernet / zlib CRC-32: polynomial 0x04C11DB7, bit-reflected, initial value and
// final XOR 0xFFFFFFFF (not CRC32C: SSE4.2's crc32 instruction does not apply). The ICRC is that
// CRC over the IP datagram of a RoCEv2 packet, minus the ICRC itself, with the fields a router
// may change replaced by ones, after eight bytes of 0xFF:
//
//   0xFF x 8
//   IPv4 header  with  TOS (byte 1), TTL (byte 8), header checksum (bytes 10-11)   set to 0xFF
//   IPv6 header  with  traffic class + flow label (low nibble of byte 0, bytes 1-3),
//                      hop limit (byte 7)                                          set to 1s
//   UDP header   with  checksum (bytes 6-7)                                        set to 0xFF
//   BTH          with  byte 4 (FECN, BECN, 6 reserved bits)                        set to 0xFF
//   the rest of the IB transport headers, payload and pad, unchanged
//
// The 32-bit result goes on the wire least significant byte first (the 4 trailing bytes are
// the CRC in little-endian order, as an Ethernet FCS is). Every frame in tests/data/roce-pcaps
// (Linux rxe) checks against exactly this masking, and fails if any one mask is left out.
//
// Two implementations: slice-by-16 tables (built at compile time), and a carry-less multiply
// (PCLMULQDQ) folding path compiled for that instruction alone and chosen at run time when the
// CPU has it. Both give identical results; CrcPath picks one for tests and benchmarks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include <prdma/roce/headers.hpp>

namespace prdma::roce {

enum class CrcPath : std::uint8_t {
    automatic, // pclmul when the CPU has it, else table
    table,     // slice-by-16 lookup tables
    pclmul,    // carry-less multiply folding; falls back to table without PCLMULQDQ
};

// Whether this CPU has PCLMULQDQ (and so CrcPath::pclmul really runs it).
bool pclmul_supported() noexcept;

// Advances a raw CRC-32 state over `data`: no initial or final inversion, so a long buffer can
// be fed in pieces. crc32() below is the usual one-shot form.
std::uint32_t crc32_update(std::uint32_t state, std::span<const std::uint8_t> data,
                           CrcPath path = CrcPath::automatic) noexcept;

// zlib's crc32(0, data, len): "123456789" gives 0xCBF43926.
inline std::uint32_t crc32(std::span<const std::uint8_t> data,
                           CrcPath path = CrcPath::automatic) noexcept {
    return ~crc32_update(0xffffffffU, data, path);
}

// ICRC of a RoCEv2 IP datagram. `ip_datagram` runs from the first byte of the IPv4 or IPv6
// header to the last byte of the ICRC field (the IP total length; no Ethernet padding or FCS);
// the last 4 bytes are not covered and may hold anything. The IP version and IPv4 header
// length come from the datagram. Returns 0 when the span cannot hold IP + UDP + BTH + ICRC or
// the version is neither 4 nor 6 (verify_icrc is the checked form).
std::uint32_t compute_icrc(std::span<const std::uint8_t> ip_datagram,
                           CrcPath path = CrcPath::automatic) noexcept;

// The ICRC carried in the last 4 bytes of `ip_datagram`, or 0 if it is shorter than that.
std::uint32_t stored_icrc(std::span<const std::uint8_t> ip_datagram) noexcept;

// True when `ip_datagram` is long enough for IP + UDP + BTH + ICRC and its last 4 bytes are
// its ICRC.
bool verify_icrc(std::span<const std::uint8_t> ip_datagram,
                 CrcPath path = CrcPath::automatic) noexcept;

// Computes the ICRC and writes it into the last 4 bytes of `ip_datagram`. Returns false (and
// writes nothing) when compute_icrc could not run.
bool store_icrc(std::span<std::uint8_t> ip_datagram, CrcPath path = CrcPath::automatic) noexcept;

// compute_icrc of a datagram this library's builder made (IPv4 without options when `ipv4`, else
// IPv6) and at least IP + UDP + BTH + ICRC long: its shape is taken as said, not read back.
std::uint32_t compute_built_icrc(std::span<const std::uint8_t> ip_datagram, bool ipv4) noexcept;

// A CRC can be stopped and resumed: the ICRC of frames that agree byte for byte up to some
// point (a QP's ACKs, up to their PSN) is the CRC state there, kept once, then only the bytes
// after it. `length` datagram bytes from the start, covering every masked field (IP, UDP and the
// BTH up to its byte 4).
struct IcrcPrefix {
    std::uint32_t state = 0;
    std::uint16_t length = 0; // 0: no prefix (icrc_prefix refused it)
    [[nodiscard]] bool ok() const noexcept { return length != 0; }
};

// The state after the first `length` bytes of `ip_datagram`; not ok() when the datagram is not
// usable (as compute_icrc) or `length` ends before the masked fields do or after the ICRC starts.
IcrcPrefix icrc_prefix(std::span<const std::uint8_t> ip_datagram, std::size_t length) noexcept;

// compute_icrc of a datagram whose first prefix.length bytes are those `prefix` was taken over
// (an ok() prefix, and a datagram at least that long plus the ICRC: not checked).
std::uint32_t icrc_after_prefix(const IcrcPrefix& prefix,
                                std::span<const std::uint8_t> ip_datagram) noexcept;

} // namespace prdma::roce
