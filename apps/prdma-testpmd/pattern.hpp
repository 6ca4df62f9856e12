// The bytes every SEND carries, so a receiver verifies a message without knowing who sent it: byte
// i is a function of i alone, with a prime period so a shifted or truncated copy shows.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>

#include "stream.hpp"

namespace prdma::testpmd {

constexpr std::uint8_t pattern_byte(std::size_t i) noexcept {
    return static_cast<std::uint8_t>(i % 251 + 3);
}

inline const std::array<std::uint8_t, max_message>& message_pattern() noexcept {
    static const std::array<std::uint8_t, max_message> bytes = [] {
        std::array<std::uint8_t, max_message> b{};
        for (std::size_t i = 0; i < b.size(); ++i) {
            b[i] = pattern_byte(i);
        }
        return b;
    }();
    return bytes;
}

inline bool matches_pattern(const std::uint8_t* data, std::uint32_t length) noexcept {
    return length <= max_message && std::memcmp(data, message_pattern().data(), length) == 0;
}

} // namespace prdma::testpmd
