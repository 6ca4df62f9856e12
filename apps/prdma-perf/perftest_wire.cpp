#include "perftest_wire.hpp"

#include <algorithm>
#include <bit>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace prdma::perf {

namespace {

Error malformed(std::string_view what, std::string_view message) {
    std::string shown;
    for (const char c : message) {
        shown += (c >= 0x20 && c < 0x7f) ? c : '.';
    }
    return {StatusCode::invalid_parameter,
            "malformed perftest " + std::string(what) + " message <" + shown + ">"};
}

bool parse_hex(std::string_view field, std::size_t width, std::uint64_t& out) {
    if (field.size() != width) {
        return false;
    }
    std::uint64_t value = 0;
    for (const char c : field) {
        unsigned digit = 0;
        if (c >= '0' && c <= '9') {
            digit = static_cast<unsigned>(c - '0');
        } else if (c >= 'a' && c <= 'f') {
            digit = static_cast<unsigned>(c - 'a' + 10);
        } else if (c >= 'A' && c <= 'F') {
            digit = static_cast<unsigned>(c - 'A' + 10);
        } else {
            return false;
        }
        value = (value << 4) | digit;
    }
    out = value;
    return true;
}

std::vector<std::string_view> split(std::string_view text, char separator) {
    std::vector<std::string_view> parts;
    std::size_t start = 0;
    for (std::size_t i = 0; i <= text.size(); ++i) {
        if (i == text.size() || text[i] == separator) {
            parts.push_back(text.substr(start, i - start));
            start = i + 1;
        }
    }
    return parts;
}

std::array<std::uint8_t, 8> big_endian(std::uint64_t value) {
    std::array<std::uint8_t, 8> out{};
    for (int i = 7; i >= 0; --i) {
        out[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(value & 0xff);
        value >>= 8;
    }
    return out;
}

std::uint64_t from_big_endian(const std::array<std::uint8_t, 8>& bytes) {
    std::uint64_t value = 0;
    for (const std::uint8_t b : bytes) {
        value = (value << 8) | b;
    }
    return value;
}

} // namespace

VersionMessage format_version(std::string_view version) {
    VersionMessage message{};
    std::memcpy(message.data(), version.data(),
                std::min(version.size(), message.size() - 1)); // always NUL-terminated
    return message;
}

Result<std::string> parse_version(std::span<const char, version_message_size> message) {
    const auto end = std::find(message.begin(), message.end(), '\0');
    if (end == message.end()) {
        return malformed("version", std::string_view(message.data(), message.size()));
    }
    return std::string(message.begin(), end);
}

double version_number(std::string_view version) {
    const std::string text(version); // atof needs the NUL
    return std::atof(text.c_str());  // NOLINT(cert-err34-c): perftest's own comparison
}

std::array<std::uint8_t, 8> format_sys_data(std::uint32_t cycle_buffer,
                                            std::uint32_t cache_line_size) {
    const auto a = big_endian(cycle_buffer);
    const auto b = big_endian(cache_line_size);
    return {a[4], a[5], a[6], a[7], b[4], b[5], b[6], b[7]};
}

SysData parse_sys_data(std::span<const std::uint8_t, 8> message) {
    auto word = [&](std::size_t at) {
        return (std::uint32_t{message[at]} << 24) | (std::uint32_t{message[at + 1]} << 16) |
               (std::uint32_t{message[at + 2]} << 8) | std::uint32_t{message[at + 3]};
    };
    return {word(0), word(4)};
}

std::array<char, mtu_message_size> format_mtu(rdma::Mtu mtu) {
    return {static_cast<char>('0' + static_cast<int>(mtu)), '\0'};
}

Result<rdma::Mtu> parse_mtu(std::span<const char, mtu_message_size> message) {
    // perftest reads it with strtol: one digit, then the NUL (or anything that is not a digit).
    if (message[0] < '1' || message[0] > '5' || (message[1] >= '0' && message[1] <= '9')) {
        return malformed("MTU", std::string_view(message.data(), message.size()));
    }
    return static_cast<rdma::Mtu>(message[0] - '0');
}

std::string format_keys(const KeyMessage& keys, bool with_gid) {
    char text[key_message_size_gid] = {};
    if (with_gid) {
        const auto& g = keys.gid.raw;
        std::snprintf(text, sizeof(text),
                      "%04x:%04x:%06x:%06x:%08x:%016" PRIx64
                      ":%02x:%02x:%02x:%02x:%02x:%02x:%02x:%02x:%02x:%02x:%02x:%02x:%02x:%02x:%02x:"
                      "%02x:%08x:",
                      keys.lid, keys.out_reads, keys.qpn, keys.psn, keys.rkey, keys.vaddr, g[0],
                      g[1], g[2], g[3], g[4], g[5], g[6], g[7], g[8], g[9], g[10], g[11], g[12],
                      g[13], g[14], g[15], keys.srqn);
        return {text, key_message_size_gid};
    }
    std::snprintf(text, sizeof(text), "%04x:%04x:%06x:%06x:%08x:%016" PRIx64 ":%08x", keys.lid,
                  keys.out_reads, keys.qpn, keys.psn, keys.rkey, keys.vaddr, keys.srqn);
    return {text, key_message_size};
}

Result<KeyMessage> parse_keys(std::string_view message, bool with_gid) {
    const std::size_t size = with_gid ? key_message_size_gid : key_message_size;
    if (message.size() != size || message.back() != '\0') {
        return malformed("key", message);
    }
    const auto fields = split(message.substr(0, size - 1), ':');
    // lid, out_reads, qpn, psn, rkey, vaddr, [16 GID bytes], srqn, and with the GID an empty
    // field after the trailing ':'.
    const std::size_t expected = with_gid ? 24 : 7;
    if (fields.size() != expected || (with_gid && !fields.back().empty())) {
        return malformed("key", message);
    }
    static constexpr std::size_t widths[] = {4, 4, 6, 6, 8, 16};
    std::uint64_t values[6] = {};
    for (std::size_t i = 0; i < 6; ++i) {
        if (!parse_hex(fields[i], widths[i], values[i])) {
            return malformed("key", message);
        }
    }
    KeyMessage keys;
    keys.lid = static_cast<std::uint32_t>(values[0]);
    keys.out_reads = static_cast<std::uint32_t>(values[1]);
    keys.qpn = static_cast<std::uint32_t>(values[2]);
    keys.psn = static_cast<std::uint32_t>(values[3]);
    keys.rkey = static_cast<std::uint32_t>(values[4]);
    keys.vaddr = values[5];
    std::size_t next = 6;
    if (with_gid) {
        for (std::size_t i = 0; i < 16; ++i) {
            std::uint64_t byte = 0;
            if (!parse_hex(fields[next++], 2, byte)) {
                return malformed("key", message);
            }
            keys.gid.raw[i] = static_cast<std::uint8_t>(byte);
        }
    }
    std::uint64_t srqn = 0;
    if (!parse_hex(fields[next], 8, srqn)) {
        return malformed("key", message);
    }
    keys.srqn = static_cast<std::uint32_t>(srqn);
    return keys;
}

std::array<std::array<std::uint8_t, 8>, 5> format_bw_report(const BwReport& report) {
    return {big_endian(report.size), big_endian(report.iterations),
            big_endian(std::bit_cast<std::uint64_t>(report.bw_peak)),
            big_endian(std::bit_cast<std::uint64_t>(report.bw_average)),
            big_endian(std::bit_cast<std::uint64_t>(report.msg_rate))};
}

BwReport parse_bw_report(const std::array<std::array<std::uint8_t, 8>, 5>& fields) {
    BwReport report;
    report.size = from_big_endian(fields[0]);
    report.iterations = from_big_endian(fields[1]);
    report.bw_peak = std::bit_cast<double>(from_big_endian(fields[2]));
    report.bw_average = std::bit_cast<double>(from_big_endian(fields[3]));
    report.msg_rate = std::bit_cast<double>(from_big_endian(fields[4]));
    return report;
}

} // namespace prdma::perf
