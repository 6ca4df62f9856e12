// Big- and little-endian loads and stores on byte pointers, for the RoCEv2 wire format.
//
// Every header is read and written through std::uint8_t pointers: no packed structs, no
// reinterpret_cast of a frame to a header type, no alignment assumption. Loads are composed from
// bytes, which GCC and Clang turn into one load and a byte swap. Stores are one memcpy of the
// swapped value at run time (GCC does not merge the byte stores of a value built from bit
// fields) and bytes in constant evaluation.
//
// The pointer forms do no bounds checks; callers check the span length once per header.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

namespace prdma::roce {

constexpr std::uint16_t load_be16(const std::uint8_t* p) noexcept {
    return static_cast<std::uint16_t>((p[0] << 8) | p[1]);
}
constexpr std::uint32_t load_be24(const std::uint8_t* p) noexcept {
    return (std::uint32_t{p[0]} << 16) | (std::uint32_t{p[1]} << 8) | p[2];
}
constexpr std::uint32_t load_be32(const std::uint8_t* p) noexcept {
    return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) |
           p[3];
}
constexpr std::uint64_t load_be64(const std::uint8_t* p) noexcept {
    return (std::uint64_t{load_be32(p)} << 32) | load_be32(p + 4);
}
constexpr std::uint32_t load_le32(const std::uint8_t* p) noexcept {
    return (std::uint32_t{p[3]} << 24) | (std::uint32_t{p[2]} << 16) | (std::uint32_t{p[1]} << 8) |
           p[0];
}

constexpr void store_be16(std::uint8_t* p, std::uint16_t v) noexcept {
    if (!std::is_constant_evaluated()) {
        const auto be = static_cast<std::uint16_t>(__builtin_bswap16(v));
        std::memcpy(p, &be, sizeof(be));
        return;
    }
    p[0] = static_cast<std::uint8_t>(v >> 8);
    p[1] = static_cast<std::uint8_t>(v);
}
constexpr void store_be24(std::uint8_t* p, std::uint32_t v) noexcept {
    p[0] = static_cast<std::uint8_t>(v >> 16);
    p[1] = static_cast<std::uint8_t>(v >> 8);
    p[2] = static_cast<std::uint8_t>(v);
}
constexpr void store_be32(std::uint8_t* p, std::uint32_t v) noexcept {
    if (!std::is_constant_evaluated()) {
        const std::uint32_t be = __builtin_bswap32(v);
        std::memcpy(p, &be, sizeof(be));
        return;
    }
    p[0] = static_cast<std::uint8_t>(v >> 24);
    p[1] = static_cast<std::uint8_t>(v >> 16);
    p[2] = static_cast<std::uint8_t>(v >> 8);
    p[3] = static_cast<std::uint8_t>(v);
}
constexpr void store_be64(std::uint8_t* p, std::uint64_t v) noexcept {
    if (!std::is_constant_evaluated()) {
        const std::uint64_t be = __builtin_bswap64(v);
        std::memcpy(p, &be, sizeof(be));
        return;
    }
    store_be32(p, static_cast<std::uint32_t>(v >> 32));
    store_be32(p + 4, static_cast<std::uint32_t>(v));
}
constexpr void store_le32(std::uint8_t* p, std::uint32_t v) noexcept {
    p[0] = static_cast<std::uint8_t>(v);
    p[1] = static_cast<std::uint8_t>(v >> 8);
    p[2] = static_cast<std::uint8_t>(v >> 16);
    p[3] = static_cast<std::uint8_t>(v >> 24);
}

} // namespace prdma::roce
