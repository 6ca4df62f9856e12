#include "verify.hpp"

#include <cstring>

namespace prdma::perf {

namespace {

// splitmix64's finalizer: every input bit reaches every output bit.
constexpr std::uint64_t mix(std::uint64_t x) {
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return x;
}

constexpr std::uint64_t low_lanes = 0x00ff00ff00ff00ffULL;
constexpr std::uint64_t seven_bits = 0x7f7f7f7f7f7f7f7fULL;

// Eight byte lanes added mod 256 each, no carry between lanes.
constexpr std::uint64_t add_lanes(std::uint64_t a, std::uint64_t b) {
    return ((a & seven_bits) + (b & seven_bits)) ^ ((a ^ b) & ~seven_bits);
}

// Eight byte lanes each multiplied by r mod 256: every product fits its 16-bit lane.
constexpr std::uint64_t multiply_lanes(std::uint64_t lanes, std::uint64_t r) {
    const std::uint64_t even = ((lanes & low_lanes) * r) & low_lanes;
    const std::uint64_t odd = (((lanes >> 8) & low_lanes) * r) & low_lanes;
    return even | (odd << 8);
}

// Bytes 8w..8w+7 of a message, byte 8w+i in lane i.
constexpr std::uint64_t pattern_word(std::uint64_t seed, std::uint64_t message, std::uint64_t w) {
    const std::uint64_t h = mix(seed ^ mix(w * 0x9e3779b97f4a7c15ULL + (message >> 8)));
    const std::uint64_t b = mix(seed + mix(~w)) | 0x0101010101010101ULL; // odd lanes
    return add_lanes((h << 1) & ~0x0101010101010101ULL, multiply_lanes(b, message & 0xff));
}

constexpr std::uint8_t lane(std::uint64_t word, std::uint64_t offset) {
    return static_cast<std::uint8_t>(word >> (8 * (offset & 7)));
}

template <typename Visit>
void walk_pattern(std::size_t length, std::uint64_t seed, std::uint64_t message,
                  std::uint64_t first_offset, Visit visit) {
    std::uint64_t offset = first_offset;
    std::size_t i = 0;
    while (i < length) {
        const std::uint64_t word = pattern_word(seed, message, offset >> 3);
        do {
            visit(i, lane(word, offset));
            ++i;
            ++offset;
        } while (i < length && (offset & 7) != 0);
    }
}

} // namespace

std::uint64_t stream_seed(std::uint32_t psn, unsigned qp, unsigned size_index) {
    return mix((std::uint64_t{psn} << 32) ^ (std::uint64_t{qp} << 16) ^ size_index ^
               0x7072646d61766572ULL);
}

std::uint8_t pattern_byte(std::uint64_t seed, std::uint64_t message, std::uint64_t offset) {
    return lane(pattern_word(seed, message, offset >> 3), offset);
}

void fill_pattern(std::span<std::uint8_t> out, std::uint64_t seed, std::uint64_t message,
                  std::uint64_t first_offset) {
    walk_pattern(out.size(), seed, message, first_offset,
                 [out](std::size_t i, std::uint8_t byte) { out[i] = byte; });
}

void fill_complement(std::span<std::uint8_t> out, std::uint64_t seed, std::uint64_t message,
                     std::uint64_t first_offset) {
    walk_pattern(out.size(), seed, message, first_offset, [out](std::size_t i, std::uint8_t byte) {
        out[i] = static_cast<std::uint8_t>(~byte);
    });
}

std::optional<Mismatch> check_pattern(std::span<const std::uint8_t> got, std::uint64_t seed,
                                      std::uint64_t message, std::uint64_t first_offset) {
    Mismatch m;
    walk_pattern(got.size(), seed, message, first_offset, [&](std::size_t i, std::uint8_t byte) {
        if (got[i] != byte && m.bad_bytes++ == 0) {
            m = {i, byte, got[i], 1};
        }
    });
    return m.bad_bytes == 0 ? std::nullopt : std::optional<Mismatch>(m);
}

std::optional<Mismatch> compare_bytes(std::span<const std::uint8_t> got,
                                      std::span<const std::uint8_t> expected) {
    Mismatch m;
    for (std::size_t i = 0; i < got.size() && i < expected.size(); ++i) {
        if (got[i] != expected[i] && m.bad_bytes++ == 0) {
            m = {i, expected[i], got[i], 1};
        }
    }
    return m.bad_bytes == 0 ? std::nullopt : std::optional<Mismatch>(m);
}

std::uint64_t atomic_original(std::uint64_t seed, std::uint64_t offset, std::uint64_t earlier,
                              bool fetch_and_add) {
    std::uint8_t served[8];
    fill_pattern(served, seed, 0, offset);
    std::uint64_t value = 0;
    std::memcpy(&value, served, sizeof(value));
    return fetch_and_add ? value + earlier : value;
}

} // namespace prdma::perf
