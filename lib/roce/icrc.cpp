// CRC-32 (reflected 0x04C11DB7) two ways, and the RoCEv2 ICRC on top.
//
// Table path: slice-by-16. Table k maps a byte to the CRC of that byte followed by k zero
// bytes, so 16 message bytes are 16 independent lookups XORed together.
//
// PCLMULQDQ path: the message is folded 128 bits at a time. With V(X) the polynomial of a
// 16-byte block as it appears in the message (first bit = highest power) and lo/hi its two
// little-endian halves, V(X) * x^D == lo * x^(D+64) + hi * x^D (mod P). A carry-less multiply of
// a reflected 64-bit half by the reflected 33-bit constant (x^(D+32) mod P for lo,
// x^(D-32) mod P for hi) lands that product, times x^32, in a 128-bit register; XORing in the
// block D bits further on keeps one 128-bit value congruent to everything read so far. Four
// accumulators 512 bits apart hide the multiply latency; they are merged at D = 128, reduced
// 128 -> 96 -> 64 bits by two more folds and to 32 by Barrett reduction (mu = x^64 div P). All
// constants are derived from the polynomial at compile time below.
#include <algorithm>
#include <array>
#include <cstring>
#include <immintrin.h>
#include <limits>

#include <prdma/roce/byte_order.hpp>
#include <prdma/roce/icrc.hpp>

namespace prdma::roce {
namespace {

constexpr std::uint32_t normal_poly = 0x04c11db7U;    // x^32 implied
constexpr std::uint32_t reflected_poly = 0xedb88320U; // the same, bit-reversed

// ---- Tables -------------------------------------------------------------------------------------

constexpr std::size_t slices = 16;
using CrcTables = std::array<std::array<std::uint32_t, 256>, slices>;

constexpr CrcTables make_tables() {
    CrcTables t{};
    for (std::uint32_t i = 0; i < 256; ++i) {
        std::uint32_t c = i;
        for (int bit = 0; bit < 8; ++bit) {
            c = (c & 1U) != 0 ? (c >> 1) ^ reflected_poly : c >> 1;
        }
        t[0][i] = c;
    }
    for (std::size_t k = 1; k < slices; ++k) {
        for (std::size_t i = 0; i < 256; ++i) {
            t[k][i] = (t[k - 1][i] >> 8) ^ t[0][t[k - 1][i] & 0xffU];
        }
    }
    return t;
}

alignas(64) constexpr CrcTables crc_tables = make_tables();
static_assert(crc_tables[0][1] == 0x77073096U && crc_tables[0][255] == 0x2d02ef8dU,
              "the byte table is zlib's");

constexpr std::uint32_t update_bytes(std::uint32_t state, const std::uint8_t* p,
                                     std::size_t n) noexcept {
    for (std::size_t i = 0; i < n; ++i) {
        state = crc_tables[0][(state ^ p[i]) & 0xffU] ^ (state >> 8);
    }
    return state;
}

std::uint32_t update_table(std::uint32_t state, const std::uint8_t* p, std::size_t n) noexcept {
    const CrcTables& t = crc_tables;
    while (n >= slices) {
        const std::uint32_t a = load_le32(p) ^ state;
        const std::uint32_t b = load_le32(p + 4);
        const std::uint32_t c = load_le32(p + 8);
        const std::uint32_t d = load_le32(p + 12);
        state = t[15][a & 0xffU] ^ t[14][(a >> 8) & 0xffU] ^ t[13][(a >> 16) & 0xffU] ^
                t[12][a >> 24] ^ t[11][b & 0xffU] ^ t[10][(b >> 8) & 0xffU] ^
                t[9][(b >> 16) & 0xffU] ^ t[8][b >> 24] ^ t[7][c & 0xffU] ^ t[6][(c >> 8) & 0xffU] ^
                t[5][(c >> 16) & 0xffU] ^ t[4][c >> 24] ^ t[3][d & 0xffU] ^ t[2][(d >> 8) & 0xffU] ^
                t[1][(d >> 16) & 0xffU] ^ t[0][d >> 24];
        p += slices;
        n -= slices;
    }
    // RoCE datagrams are whole 4-byte words: the tail is mostly 4-byte steps, not single bytes.
    while (n >= 4) {
        const std::uint32_t a = load_le32(p) ^ state;
        state = t[3][a & 0xffU] ^ t[2][(a >> 8) & 0xffU] ^ t[1][(a >> 16) & 0xffU] ^ t[0][a >> 24];
        p += 4;
        n -= 4;
    }
    return update_bytes(state, p, n);
}

// ---- Folding constants --------------------------------------------------------------------------

// x^n mod P, bit i = coefficient of x^i.
constexpr std::uint32_t xpow_mod(unsigned n) {
    std::uint32_t r = 1;
    for (unsigned i = 0; i < n; ++i) {
        r = (r & 0x80000000U) != 0 ? (r << 1) ^ normal_poly : r << 1;
    }
    return r;
}

constexpr std::uint32_t reflect32(std::uint32_t v) {
    std::uint32_t r = 0;
    for (int i = 0; i < 32; ++i) {
        r = (r << 1) | (v & 1U);
        v >>= 1;
    }
    return r;
}

// x^n mod P as a reflected 33-bit operand: bit j holds the coefficient of x^(32 - j).
constexpr std::uint64_t fold_constant(unsigned n) {
    return std::uint64_t{reflect32(xpow_mod(n))} << 1;
}

// P itself, reflected over 33 bits (x^32 in bit 0).
constexpr std::uint64_t reflected_p33 = (std::uint64_t{reflected_poly} << 1) | 1U;

// floor(x^64 / P), reflected over 33 bits.
constexpr std::uint64_t barrett_mu() {
    // The first quotient bit (x^32) leaves x^64 - x^32 * P = normal_poly * x^32.
    std::uint64_t rem = std::uint64_t{normal_poly} << 32;
    std::uint64_t quotient = std::uint64_t{1} << 32;
    for (int i = 63; i >= 32; --i) {
        if (((rem >> i) & 1U) != 0) {
            rem ^= (std::uint64_t{1} << i) ^ (std::uint64_t{normal_poly} << (i - 32));
            quotient |= std::uint64_t{1} << (i - 32);
        }
    }
    std::uint64_t reflected = 0;
    for (int degree = 0; degree <= 32; ++degree) {
        if (((quotient >> degree) & 1U) != 0) {
            reflected |= std::uint64_t{1} << (32 - degree);
        }
    }
    return reflected;
}

constexpr std::uint64_t k_fold4_lo = fold_constant(512 + 32);
constexpr std::uint64_t k_fold4_hi = fold_constant(512 - 32);
constexpr std::uint64_t k_fold1_lo = fold_constant(128 + 32);
constexpr std::uint64_t k_fold1_hi = fold_constant(128 - 32);
constexpr std::uint64_t k_fold64 = fold_constant(64);
constexpr std::uint64_t k_mu = barrett_mu();
// The values in Intel's "Fast CRC Computation for Generic Polynomials Using PCLMULQDQ" for
// this polynomial: a check on the derivation, not an input to it.
static_assert(k_fold4_lo == 0x154442bd4U && k_fold4_hi == 0x1c6e41596U);
static_assert(k_fold1_lo == 0x1751997d0U && k_fold1_hi == 0x0ccaa009eU);
static_assert(k_fold64 == 0x163cd6124U && k_mu == 0x1f7011641U && reflected_p33 == 0x1db710641U);

// ---- PCLMULQDQ path -----------------------------------------------------------------------------

#define PRDMA_ROCE_TARGET_CLMUL __attribute__((target("pclmul,sse4.1")))

PRDMA_ROCE_TARGET_CLMUL inline __m128i load128(const std::uint8_t* p) noexcept {
    return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
}

PRDMA_ROCE_TARGET_CLMUL inline __m128i constant_pair(std::uint64_t lo, std::uint64_t hi) noexcept {
    return _mm_set_epi64x(static_cast<long long>(hi), static_cast<long long>(lo));
}

// acc * x^D + next, with k = {x^(D+32), x^(D-32)} mod P.
PRDMA_ROCE_TARGET_CLMUL inline __m128i fold(__m128i acc, __m128i k, __m128i next) noexcept {
    return _mm_xor_si128(
        _mm_xor_si128(_mm_clmulepi64_si128(acc, k, 0x00), _mm_clmulepi64_si128(acc, k, 0x11)),
        next);
}

// The CRC state of a message whose remainder-so-far is the 128-bit block x (as if x were the
// whole message, processed from state 0).
PRDMA_ROCE_TARGET_CLMUL inline std::uint32_t reduce128(__m128i x) noexcept {
    const __m128i mask32 = _mm_set_epi32(0, 0, 0, -1);
    const __m128i k96 = constant_pair(0, k_fold1_hi);
    const __m128i k64 = constant_pair(k_fold64, 0);
    const __m128i barrett = constant_pair(reflected_p33, k_mu);
    // 128 -> 96 bits: lo * x^128 + hi * x^64, i.e. the block times x^64.
    const __m128i y = _mm_xor_si128(_mm_clmulepi64_si128(x, k96, 0x10), _mm_srli_si128(x, 8));
    // 96 -> 64 bits: the low 32 bits (highest powers) folded 64 bits down.
    const __m128i z = _mm_xor_si128(_mm_clmulepi64_si128(_mm_and_si128(y, mask32), k64, 0x00),
                                    _mm_srli_si128(y, 4));
    // Barrett: q = floor(z_high * mu / x^32); remainder = z xor q * P, in bits 32-63.
    __m128i t = _mm_clmulepi64_si128(_mm_and_si128(z, mask32), barrett, 0x10);
    t = _mm_clmulepi64_si128(_mm_and_si128(t, mask32), barrett, 0x00);
    return static_cast<std::uint32_t>(_mm_extract_epi32(_mm_xor_si128(z, t), 1));
}

// Folds every whole block of [p, p + n) into x0, where x0 holds everything before p as the
// 128-bit block right in front of it. Advances p and n past the blocks consumed.
PRDMA_ROCE_TARGET_CLMUL inline __m128i fold_blocks(__m128i x0, const std::uint8_t*& p,
                                                   std::size_t& n) noexcept {
    const __m128i k_fold1 = constant_pair(k_fold1_lo, k_fold1_hi);
    if (n >= 64) {
        // Four accumulators 64 bytes apart: x0 moves onto the first block, the next three
        // start as they are.
        const __m128i k_fold4 = constant_pair(k_fold4_lo, k_fold4_hi);
        x0 = fold(x0, k_fold1, load128(p));
        __m128i x1 = load128(p + 16);
        __m128i x2 = load128(p + 32);
        __m128i x3 = load128(p + 48);
        p += 64;
        n -= 64;
        while (n >= 64) {
            x0 = fold(x0, k_fold4, load128(p));
            x1 = fold(x1, k_fold4, load128(p + 16));
            x2 = fold(x2, k_fold4, load128(p + 32));
            x3 = fold(x3, k_fold4, load128(p + 48));
            p += 64;
            n -= 64;
        }
        x0 = fold(x0, k_fold1, x1);
        x0 = fold(x0, k_fold1, x2);
        x0 = fold(x0, k_fold1, x3);
    }
    while (n >= 16) {
        x0 = fold(x0, k_fold1, load128(p));
        p += 16;
        n -= 16;
    }
    return x0;
}

// The r bytes at p (0 < r < 16) after the block x0, which was read from the 16 bytes before p:
// the 16 + r bytes are taken as r leading bytes, zero-extended to a block (leading zeros add
// nothing to a remainder from state 0), and the last 16, folded once. Overlapping stores and
// loads on a scratch do the byte shifts: the block ending at p + r goes in first, x0 over its
// head, so the scratch holds zeros, x0, then p's r bytes.
PRDMA_ROCE_TARGET_CLMUL inline __m128i fold_partial(__m128i x0, const std::uint8_t* p,
                                                    std::size_t r) noexcept {
    alignas(16) std::array<std::uint8_t, 48> buffer;
    _mm_store_si128(reinterpret_cast<__m128i*>(buffer.data()), _mm_setzero_si128());
    _mm_storeu_si128(reinterpret_cast<__m128i*>(buffer.data() + 16 + r), load128(p + r - 16));
    _mm_store_si128(reinterpret_cast<__m128i*>(buffer.data() + 16), x0);
    const __m128i head = load128(buffer.data() + r);      // 16 - r zeros, x0's first r bytes
    const __m128i last = load128(buffer.data() + 16 + r); // x0's other bytes, then p's
    return fold(head, constant_pair(k_fold1_lo, k_fold1_hi), last);
}

// The CRC over [p, p + n) from `state` (n >= 16) with `mask` ORed into its first mask_length
// bytes (whole blocks, at most n) as they are read: the ICRC's masked fields never need a copy.
PRDMA_ROCE_TARGET_CLMUL std::uint32_t update_clmul_masked(std::uint32_t state,
                                                          const std::uint8_t* p, std::size_t n,
                                                          const std::uint8_t* mask,
                                                          std::size_t mask_length) noexcept {
    const __m128i k_fold1 = constant_pair(k_fold1_lo, k_fold1_hi);
    // Feeding a state into a reflected CRC is XORing it into the first four message bytes.
    __m128i x0 = _mm_xor_si128(_mm_or_si128(load128(p), load128(mask)),
                               _mm_cvtsi32_si128(static_cast<int>(state)));
    std::size_t i = 16;
    for (; i < mask_length; i += 16) {
        x0 = fold(x0, k_fold1, _mm_or_si128(load128(p + i), load128(mask + i)));
    }
    p += i;
    n -= i;
    x0 = fold_blocks(x0, p, n);
    if (n != 0) {
        x0 = fold_partial(x0, p, n);
    }
    return reduce128(x0);
}

alignas(16) constexpr std::array<std::uint8_t, 16> no_mask{};

PRDMA_ROCE_TARGET_CLMUL std::uint32_t update_clmul(std::uint32_t state, const std::uint8_t* p,
                                                   std::size_t n) noexcept {
    if (n < 16) {
        return update_table(state, p, n);
    }
    return update_clmul_masked(state, p, n, no_mask.data(), 16);
}

#undef PRDMA_ROCE_TARGET_CLMUL

// ---- Dispatch -----------------------------------------------------------------------------------

bool detect_clmul() noexcept {
    __builtin_cpu_init(); // may run before libgcc's own constructor has filled the CPU model
    return __builtin_cpu_supports("pclmul") != 0;
}

// Here rather than through pclmul_supported(): an exported function is called through the PLT
// even from inside the library, twice per WRITE.
bool clmul_available() noexcept {
    static const bool supported = detect_clmul();
    return supported;
}

bool use_clmul(CrcPath path) noexcept {
    return path != CrcPath::table && clmul_available();
}

std::uint32_t update(std::uint32_t state, const std::uint8_t* p, std::size_t n,
                     CrcPath path) noexcept {
    return use_clmul(path) ? update_clmul(state, p, n) : update_table(state, p, n);
}

// ---- ICRC ---------------------------------------------------------------------------------------

constexpr std::array<std::uint8_t, 8> icrc_prefix = {0xff, 0xff, 0xff, 0xff,
                                                     0xff, 0xff, 0xff, 0xff};
// The CRC state after the eight 0xFF bytes, from the usual initial state.
constexpr std::uint32_t icrc_seed = update_bytes(0xffffffffU, icrc_prefix.data(), 8);

// The masked prefix (IP + UDP + BTH) is at most 60 + 8 + 12 bytes: five 16-byte blocks.
constexpr std::size_t mask_length = 80;
static_assert(mask_length >= ipv4_max_header_size + udp_header_size + bth_size);
static_assert(mask_length % 16 == 0);

using IcrcMask = std::array<std::uint8_t, mask_length>;

// The bits the ICRC replaces with ones, as an OR mask over the start of the datagram. Index 0-10:
// IPv4 with IHL 5-15; index 11: IPv6.
constexpr std::size_t ipv6_mask_index = 11;

constexpr std::array<IcrcMask, 12> make_masks() {
    std::array<IcrcMask, 12> masks{};
    for (std::size_t v = 0; v < masks.size(); ++v) {
        IcrcMask& m = masks[v];
        std::size_t ip_length = 0;
        if (v == ipv6_mask_index) {
            ip_length = ipv6_header_size;
            m[0] = 0x0f; // traffic class, high nibble (the version stays)
            m[1] = 0xff; // traffic class, low nibble; flow label
            m[2] = 0xff;
            m[3] = 0xff;
            m[7] = 0xff; // hop limit
        } else {
            ip_length = (v + 5) * 4;
            m[1] = 0xff;  // TOS
            m[8] = 0xff;  // TTL
            m[10] = 0xff; // header checksum
            m[11] = 0xff;
        }
        m[ip_length + 6] = 0xff;                   // UDP checksum
        m[ip_length + 7] = 0xff;                   //
        m[ip_length + udp_header_size + 4] = 0xff; // BTH: FECN, BECN, resv6a
    }
    return masks;
}

alignas(64) constexpr std::array<IcrcMask, 12> icrc_masks = make_masks();

struct IcrcLayout {
    std::size_t masked = 0; // IP + UDP + BTH; 0 when the datagram is unusable
    std::size_t mask_index = 0;
};

// Where the masked fields are; masked = 0 when the datagram cannot hold IP + UDP + BTH + ICRC.
IcrcLayout icrc_layout(std::span<const std::uint8_t> d) noexcept {
    IcrcLayout layout;
    if (d.empty()) {
        return layout;
    }
    std::size_t ip_length = 0;
    switch (d[0] >> 4) {
    case 4:
        ip_length = std::size_t{d[0] & 0x0fU} * 4;
        if (ip_length < ipv4_header_size) {
            return layout;
        }
        layout.mask_index = ip_length / 4 - 5;
        break;
    case 6:
        ip_length = ipv6_header_size;
        layout.mask_index = ipv6_mask_index;
        break;
    default:
        return layout;
    }
    const std::size_t masked = ip_length + udp_header_size + bth_size;
    if (d.size() >= masked + icrc_size) {
        layout.masked = masked;
    }
    return layout;
}

} // namespace

bool pclmul_supported() noexcept {
    return clmul_available();
}

std::uint32_t crc32_update(std::uint32_t state, std::span<const std::uint8_t> data,
                           CrcPath path) noexcept {
    return update(state, data.data(), data.size(), path);
}

namespace {

// The ICRC of a datagram whose layout is known to be usable.
std::uint32_t icrc_of(std::span<const std::uint8_t> ip_datagram, const IcrcLayout& layout,
                      CrcPath path) noexcept {
    const std::size_t covered = ip_datagram.size() - icrc_size;
    // The masked headers, rounded up to whole 16-byte blocks: read in place with the mask ORed
    // in when the datagram holds them (every packet with a payload or an extension header past
    // the BTH), else copied with the mask into a scratch (an ACK: 40 bytes).
    const std::size_t masked_blocks = (layout.masked + 15) & ~std::size_t{15};
    const std::uint8_t* data = ip_datagram.data();
    const IcrcMask& mask = icrc_masks[layout.mask_index];
    if (use_clmul(path) && masked_blocks <= covered) {
        return ~update_clmul_masked(icrc_seed, data, covered, mask.data(), masked_blocks);
    }
    const std::size_t head = std::min(covered, masked_blocks);
    alignas(16) std::array<std::uint8_t, mask_length> scratch;
    if (masked_blocks <= ip_datagram.size()) {
        // The blocks run into the ICRC field but not past the datagram (an IPv4 ACK): read them
        // a word at a time, and fold only what is covered.
        for (std::size_t i = 0; i < masked_blocks; i += 8) {
            std::uint64_t word = 0;
            std::uint64_t bits = 0;
            std::memcpy(&word, data + i, sizeof word);
            std::memcpy(&bits, mask.data() + i, sizeof bits);
            word |= bits;
            std::memcpy(scratch.data() + i, &word, sizeof word);
        }
    } else {
        for (std::size_t i = 0; i < head; ++i) {
            scratch[i] = static_cast<std::uint8_t>(data[i] | mask[i]);
        }
    }
    if (!use_clmul(path)) {
        return ~update_table(update_table(icrc_seed, scratch.data(), head), data + head,
                             covered - head);
    }
    return ~update_clmul(icrc_seed, scratch.data(), head);
}

} // namespace

std::uint32_t compute_icrc(std::span<const std::uint8_t> ip_datagram, CrcPath path) noexcept {
    const IcrcLayout layout = icrc_layout(ip_datagram);
    return layout.masked == 0 ? 0 : icrc_of(ip_datagram, layout, path);
}

std::uint32_t stored_icrc(std::span<const std::uint8_t> ip_datagram) noexcept {
    if (ip_datagram.size() < icrc_size) {
        return 0;
    }
    return load_le32(ip_datagram.data() + ip_datagram.size() - icrc_size);
}

std::uint32_t compute_built_icrc(std::span<const std::uint8_t> ip_datagram, bool ipv4) noexcept {
    const IcrcLayout layout{.masked = (ipv4 ? ipv4_header_size : ipv6_header_size) +
                                      udp_header_size + bth_size,
                            .mask_index = ipv4 ? 0 : ipv6_mask_index};
    return icrc_of(ip_datagram, layout, CrcPath::automatic);
}

bool verify_icrc(std::span<const std::uint8_t> ip_datagram, CrcPath path) noexcept {
    const IcrcLayout layout = icrc_layout(ip_datagram);
    return layout.masked != 0 && icrc_of(ip_datagram, layout, path) == stored_icrc(ip_datagram);
}

IcrcPrefix icrc_prefix(std::span<const std::uint8_t> ip_datagram, std::size_t length) noexcept {
    const IcrcLayout layout = icrc_layout(ip_datagram);
    // The last masked byte is the BTH's byte 4: the prefix must hold it, and stop before the ICRC.
    const std::size_t last_masked = layout.masked - bth_size + 4;
    if (layout.masked == 0 || length <= last_masked || length > ip_datagram.size() - icrc_size ||
        length > std::numeric_limits<std::uint16_t>::max()) {
        return {};
    }
    const IcrcMask& mask = icrc_masks[layout.mask_index];
    std::array<std::uint8_t, mask_length> scratch{};
    const std::size_t head = std::min(length, mask_length);
    for (std::size_t i = 0; i < head; ++i) {
        scratch[i] = static_cast<std::uint8_t>(ip_datagram[i] | mask[i]);
    }
    const std::uint32_t state = update_table(icrc_seed, scratch.data(), head);
    return {.state = update_table(state, ip_datagram.data() + head, length - head),
            .length = static_cast<std::uint16_t>(length)};
}

std::uint32_t icrc_after_prefix(const IcrcPrefix& prefix,
                                std::span<const std::uint8_t> ip_datagram) noexcept {
    const std::size_t rest = ip_datagram.size() - icrc_size - prefix.length;
    const std::uint8_t* p = ip_datagram.data() + prefix.length;
    // An ACK's 8 bytes are two table steps: below a block, folding buys nothing.
    return ~(rest < 16 ? update_table(prefix.state, p, rest)
                       : update(prefix.state, p, rest, CrcPath::automatic));
}

bool store_icrc(std::span<std::uint8_t> ip_datagram, CrcPath path) noexcept {
    const IcrcLayout layout = icrc_layout(ip_datagram);
    if (layout.masked == 0) {
        return false;
    }
    const std::uint32_t icrc = icrc_of(ip_datagram, layout, path);
    store_le32(ip_datagram.data() + ip_datagram.size() - icrc_size, icrc);
    return true;
}

} // namespace prdma::roce
