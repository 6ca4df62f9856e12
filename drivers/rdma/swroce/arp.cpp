#include "arp.hpp"

#include <algorithm>
#include <cstring>
#include <utility>

#include <prdma/format.hpp>

namespace prdma::swroce {

namespace {

constexpr std::uint16_t arp_hardware_ethernet = 1;
constexpr std::uint8_t mac_length = 6;
constexpr std::uint8_t ipv4_length = 4;

// Offsets in the frame (Ethernet header first), RFC 826 field order.
constexpr std::size_t off_eth_destination = 0;
constexpr std::size_t off_eth_source = 6;
constexpr std::size_t off_ethertype = 12;
constexpr std::size_t off_hardware_type = 14;
constexpr std::size_t off_protocol_type = 16;
constexpr std::size_t off_hardware_length = 18;
constexpr std::size_t off_protocol_length = 19;
constexpr std::size_t off_op = 20;
constexpr std::size_t off_sender_mac = 22;
constexpr std::size_t off_sender_ip = 28;
constexpr std::size_t off_target_mac = 32;
constexpr std::size_t off_target_ip = 38;
static_assert(off_target_ip + ipv4_length == arp_unpadded_frame_size);

std::uint16_t read16(std::span<const std::uint8_t> frame, std::size_t offset) {
    return static_cast<std::uint16_t>((frame[offset] << 8) | frame[offset + 1]);
}

std::uint32_t read32(std::span<const std::uint8_t> frame, std::size_t offset) {
    return (std::uint32_t{frame[offset]} << 24) | (std::uint32_t{frame[offset + 1]} << 16) |
           (std::uint32_t{frame[offset + 2]} << 8) | std::uint32_t{frame[offset + 3]};
}

MacAddress read_mac(std::span<const std::uint8_t> frame, std::size_t offset) {
    MacAddress mac;
    std::copy_n(frame.begin() + static_cast<std::ptrdiff_t>(offset), mac.size(), mac.begin());
    return mac;
}

void write16(std::span<std::uint8_t> out, std::size_t offset, std::uint16_t value) {
    out[offset] = static_cast<std::uint8_t>(value >> 8);
    out[offset + 1] = static_cast<std::uint8_t>(value);
}

void write32(std::span<std::uint8_t> out, std::size_t offset, std::uint32_t value) {
    out[offset] = static_cast<std::uint8_t>(value >> 24);
    out[offset + 1] = static_cast<std::uint8_t>(value >> 16);
    out[offset + 2] = static_cast<std::uint8_t>(value >> 8);
    out[offset + 3] = static_cast<std::uint8_t>(value);
}

void write_mac(std::span<std::uint8_t> out, std::size_t offset, const MacAddress& mac) {
    std::copy(mac.begin(), mac.end(), out.begin() + static_cast<std::ptrdiff_t>(offset));
}

// Addresses no neighbour can own: never requested, never learned.
bool is_unusable_ip(std::uint32_t ip) {
    return ip == 0 || ip == 0xffffffffU || (ip >> 28) == 0xe || (ip >> 24) == 127;
}

} // namespace

std::string_view arp_error_name(ArpError error) {
    switch (error) {
    case ArpError::ok:
        return "ok";
    case ArpError::too_short:
        return "too_short";
    case ArpError::not_arp:
        return "not_arp";
    case ArpError::bad_hardware_type:
        return "bad_hardware_type";
    case ArpError::bad_protocol_type:
        return "bad_protocol_type";
    case ArpError::bad_address_length:
        return "bad_address_length";
    case ArpError::unknown_op:
        return "unknown_op";
    case ArpError::bad_sender_mac:
        return "bad_sender_mac";
    }
    return "unknown";
}

std::string_view neighbour_request_result_name(NeighbourRequestResult result) {
    switch (result) {
    case ArpRequestResult::send:
        return "send";
    case ArpRequestResult::already_known:
        return "already_known";
    case ArpRequestResult::pending:
        return "pending";
    case ArpRequestResult::no_resources:
        return "no_resources";
    case ArpRequestResult::invalid_target:
        return "invalid_target";
    }
    return "unknown";
}

ArpParseResult parse_arp(std::span<const std::uint8_t> frame) noexcept {
    ArpParseResult result;
    // The EtherType decides "not ARP" before the length decides "too short", so a short IPv4
    // frame is counted as what it is.
    if (frame.size() < ethernet_header_size) {
        result.error = ArpError::too_short;
        return result;
    }
    if (read16(frame, off_ethertype) != ethertype_arp) {
        result.error = ArpError::not_arp;
        return result;
    }
    if (frame.size() < arp_unpadded_frame_size) {
        result.error = ArpError::too_short;
        return result;
    }
    if (read16(frame, off_hardware_type) != arp_hardware_ethernet) {
        result.error = ArpError::bad_hardware_type;
        return result;
    }
    if (read16(frame, off_protocol_type) != ethertype_ipv4) {
        result.error = ArpError::bad_protocol_type;
        return result;
    }
    if (frame[off_hardware_length] != mac_length || frame[off_protocol_length] != ipv4_length) {
        result.error = ArpError::bad_address_length;
        return result;
    }
    const std::uint16_t op = read16(frame, off_op);
    if (op != static_cast<std::uint16_t>(ArpOp::request) &&
        op != static_cast<std::uint16_t>(ArpOp::reply)) {
        result.error = ArpError::unknown_op;
        return result;
    }
    ArpMessage& message = result.message;
    message.op = static_cast<ArpOp>(op);
    message.sender_mac = read_mac(frame, off_sender_mac);
    message.sender_ip = read32(frame, off_sender_ip);
    message.target_mac = read_mac(frame, off_target_mac);
    message.target_ip = read32(frame, off_target_ip);
    // Learning a group address as a neighbour would make every later frame to it a broadcast.
    if (is_multicast_mac(message.sender_mac) || is_zero_mac(message.sender_mac)) {
        result.error = ArpError::bad_sender_mac;
        result.message = {};
    }
    return result;
}

std::size_t encode_arp(std::span<std::uint8_t> out, const MacAddress& eth_destination,
                       const ArpMessage& message) noexcept {
    if (out.size() < ethernet_min_frame_size) {
        return 0;
    }
    std::fill_n(out.begin(), ethernet_min_frame_size, std::uint8_t{0});
    write_mac(out, off_eth_destination, eth_destination);
    write_mac(out, off_eth_source, message.sender_mac);
    write16(out, off_ethertype, ethertype_arp);
    write16(out, off_hardware_type, arp_hardware_ethernet);
    write16(out, off_protocol_type, ethertype_ipv4);
    out[off_hardware_length] = mac_length;
    out[off_protocol_length] = ipv4_length;
    write16(out, off_op, static_cast<std::uint16_t>(message.op));
    write_mac(out, off_sender_mac, message.sender_mac);
    write32(out, off_sender_ip, message.sender_ip);
    write_mac(out, off_target_mac, message.target_mac);
    write32(out, off_target_ip, message.target_ip);
    return ethernet_min_frame_size;
}

std::size_t build_arp_request(std::span<std::uint8_t> out, const MacAddress& our_mac,
                              std::uint32_t our_ip, std::uint32_t target_ip) noexcept {
    const ArpMessage message{ArpOp::request, our_mac, our_ip, MacAddress{}, target_ip};
    return encode_arp(out, broadcast_mac, message);
}

std::size_t build_arp_reply(std::span<std::uint8_t> out, const MacAddress& our_mac,
                            std::uint32_t our_ip, const MacAddress& peer_mac,
                            std::uint32_t peer_ip) noexcept {
    const ArpMessage message{ArpOp::reply, our_mac, our_ip, peer_mac, peer_ip};
    return encode_arp(out, peer_mac, message);
}

// ---- ArpResolver ----

ArpResolver::ArpResolver(const ArpResolverConfig& config)
    : config_(config), retry_cycles_(ms_to_cycles(config.tsc_hz, config.retry_interval_ms)),
      reachable_cycles_(ms_to_cycles(config.tsc_hz, config.reachable_ms)),
      table_(config.table_capacity), pending_(config.max_pending) {}

Result<ArpResolver> ArpResolver::create(const ArpResolverConfig& config) {
    if (config.tsc_hz == 0) {
        return Error{StatusCode::invalid_parameter,
                     "ARP resolver: tsc_hz is 0; pass rte_get_tsc_hz() so timeouts are in cycles"};
    }
    if (config.retry_interval_ms == 0 || config.max_tries == 0) {
        return Error{StatusCode::invalid_parameter,
                     strformat("ARP resolver: retry_interval_ms=%u and max_tries=%u must both "
                               "be at least 1",
                               config.retry_interval_ms, config.max_tries)};
    }
    if (config.table_capacity == 0 || config.max_pending == 0) {
        return Error{StatusCode::invalid_parameter,
                     strformat("ARP resolver: table_capacity=%zu and max_pending=%zu must both "
                               "be at least 1",
                               config.table_capacity, config.max_pending)};
    }
    if (is_multicast_mac(config.mac) || is_zero_mac(config.mac)) {
        const auto& m = config.mac;
        return Error{StatusCode::invalid_parameter,
                     strformat("ARP resolver: our MAC %02x:%02x:%02x:%02x:%02x:%02x is zero or "
                               "multicast; the port needs a unicast address",
                               m[0], m[1], m[2], m[3], m[4], m[5])};
    }
    if (is_unusable_ip(config.ip)) {
        return Error{StatusCode::invalid_parameter,
                     strformat("ARP resolver: our IPv4 address %u.%u.%u.%u is not a unicast "
                               "host address",
                               config.ip >> 24, (config.ip >> 16) & 0xffU, (config.ip >> 8) & 0xffU,
                               config.ip & 0xffU)};
    }
    return ArpResolver(config);
}

ArpRequestResult ArpResolver::request(std::uint32_t ip, std::uint64_t now,
                                      ArpFrame& frame) noexcept {
    if (is_unusable_ip(ip) || ip == config_.ip) {
        return ArpRequestResult::invalid_target;
    }
    const ArpRequestResult result =
        pending_.start(ip, lookup(ip, now).has_value(), now + retry_cycles_);
    if (result == ArpRequestResult::send) {
        frame.length = build_arp_request(frame.bytes, config_.mac, config_.ip, ip);
    }
    return result;
}

ArpRxResult ArpResolver::on_frame(std::span<const std::uint8_t> frame, std::uint64_t now,
                                  ArpFrame& reply) noexcept {
    ArpRxResult result;
    const ArpParseResult parsed = parse_arp(frame);
    if (!parsed.ok()) {
        result.error = parsed.error;
        return result;
    }
    const ArpMessage& message = parsed.message;
    if (message.sender_mac == config_.mac) {
        result.own_frame = true;
        return result;
    }
    if (message.sender_ip == config_.ip) {
        result.address_conflict = true;
        return result;
    }

    // A probe (RFC 5227) has sender IP 0: it asks, but teaches nothing.
    const bool learnable = !is_unusable_ip(message.sender_ip);
    bool merged = false;
    if (learnable) {
        merged = table_.refresh(message.sender_ip, message.sender_mac, now);
        // A resolution in flight is an entry without a MAC yet: any ARP from that host
        // completes it (as Linux's INCOMPLETE neighbour), whoever the frame was for.
        if (pending_.remove(message.sender_ip)) {
            if (!merged) {
                result.evicted = table_.insert(message.sender_ip, message.sender_mac, now) ==
                                 NeighbourUpdate::inserted_evicting;
                merged = true;
            }
            result.resolved = true;
            result.resolved_ip = message.sender_ip;
            result.resolved_mac = message.sender_mac;
        }
    }
    if (message.target_ip != config_.ip) {
        return result;
    }
    if (learnable && !merged) {
        result.evicted = table_.insert(message.sender_ip, message.sender_mac, now) ==
                         NeighbourUpdate::inserted_evicting;
    }
    if (message.op == ArpOp::request) {
        reply.length = build_arp_reply(reply.bytes, config_.mac, config_.ip, message.sender_mac,
                                       message.sender_ip);
        result.reply_ready = true;
    }
    return result;
}

ArpPollResult ArpResolver::poll(std::uint64_t now, std::span<ArpFrame> frames,
                                std::span<std::uint32_t> failed) noexcept {
    const auto ask = [&](std::uint32_t ip, std::size_t index) {
        frames[index].length = build_arp_request(frames[index].bytes, config_.mac, config_.ip, ip);
    };
    return pending_.poll(now, config_.max_tries, retry_cycles_, frames.size(), ask, failed);
}

} // namespace prdma::swroce
