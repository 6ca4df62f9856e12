// perftest's out-of-band messages, byte for byte (perftest_communication.c of perftest 6.x), so a
// real ib_write_lat can be prdma-perf's peer. Pure formatting and parsing; the socket is
// oob_channel.hpp's.
//
// The exchange, in order, each step "client writes then reads, server reads then writes":
//   version     16 bytes, a NUL-padded string ("6.06")
//   sys data    page size, then cache-line size: two 4-byte big-endian ints (remote >= 5.32)
//   MTU         2 bytes: "%d" of the ibv_mtu enum value (1..5) and its NUL (remote >= 5.31)
//   keys        59 bytes, or 108 with the GID (RoCE): one per QP, then more as each tool says
//   bw reports  size, iterations (8 bytes each, big-endian), BW peak, BW average, message rate
//               (doubles, byte-swapped to big-endian)
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include <prdma/rdmadev/types.hpp>
#include <prdma/status.hpp>

namespace prdma::perf {

// What we advertise: perftest 4.5-0.17's (Debian 12) version. At least 5.70, so a newer perftest
// accepts us; below 6.28, so a newer perftest skips negotiate_params, whose message is its
// platform's raw struct ibv_device_attr and nothing a non-verbs device can produce faithfully.
inline constexpr std::string_view perftest_version = "6.06";
inline constexpr std::size_t version_message_size = 16;
inline constexpr std::size_t key_message_size = 59;
inline constexpr std::size_t key_message_size_gid = 108;
inline constexpr std::size_t mtu_message_size = 2;
inline constexpr std::uint16_t default_tcp_port = 18515;

// perftest's struct pingpong_dest as it travels.
struct KeyMessage {
    std::uint32_t lid = 0;       // 0 on RoCE
    std::uint32_t out_reads = 0; // reads/atomics the sender will have outstanding
    std::uint32_t qpn = 0;
    std::uint32_t psn = 0;
    std::uint32_t rkey = 0;
    std::uint64_t vaddr = 0; // where the peer WRITEs/READs in the sender's buffer
    rdma::Gid gid{};
    std::uint32_t srqn = 0;
    friend bool operator==(const KeyMessage&, const KeyMessage&) = default;
};

using VersionMessage = std::array<char, version_message_size>;
VersionMessage format_version(std::string_view version);
// The peer's version string; invalid_parameter when it is not NUL-terminated.
Result<std::string> parse_version(std::span<const char, version_message_size> message);
// perftest compares versions with atof(); so do we.
double version_number(std::string_view version);
// check_version_compatibility: perftest 6.x refuses peers older than 5.70.
inline constexpr double minimum_peer_version = 5.70;

// Two big-endian 32-bit ints: page size ("cycle buffer") and cache-line size.
std::array<std::uint8_t, 8> format_sys_data(std::uint32_t cycle_buffer,
                                            std::uint32_t cache_line_size);
struct SysData {
    std::uint32_t cycle_buffer = 0;
    std::uint32_t cache_line_size = 0;
};
SysData parse_sys_data(std::span<const std::uint8_t, 8> message);

std::array<char, mtu_message_size> format_mtu(rdma::Mtu mtu);
// The peer's MTU, or invalid_parameter for anything outside 1..5 (perftest then keeps its own).
Result<rdma::Mtu> parse_mtu(std::span<const char, mtu_message_size> message);

// The 108-byte (with_gid) or 59-byte key message, including its NUL.
std::string format_keys(const KeyMessage& keys, bool with_gid);
// Strict: every field present, hex, in range, and the NUL where perftest puts it.
Result<KeyMessage> parse_keys(std::string_view message, bool with_gid);

// xchg_bw_reports for a peer at version >= 5.33 (8-byte iterations).
struct BwReport {
    std::uint64_t size = 0;
    std::uint64_t iterations = 0;
    double bw_peak = 0;
    double bw_average = 0;
    double msg_rate = 0;
};
// The fields in exchange order, each as it goes on the wire.
std::array<std::array<std::uint8_t, 8>, 5> format_bw_report(const BwReport& report);
BwReport parse_bw_report(const std::array<std::array<std::uint8_t, 8>, 5>& fields);

} // namespace prdma::perf
