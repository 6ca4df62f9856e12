#include "neighbour_discovery.hpp"

#include <algorithm>

#include <prdma/format.hpp>
#include <prdma/roce/byte_order.hpp>
#include <prdma/roce/packet.hpp>

namespace prdma::swroce {

namespace {

constexpr std::size_t off_ip = 14;                  // after an untagged Ethernet header
constexpr std::size_t off_icmp = off_ip + 40;       // ND never carries extension headers
constexpr std::size_t icmp_nd_size = 24;            // type, code, checksum, 4, target
constexpr std::size_t option_link_address_size = 8; // type, length (in 8s), MAC
constexpr std::uint8_t option_source_link_address = 1;
constexpr std::uint8_t option_target_link_address = 2;
constexpr std::uint8_t flag_solicited = 0x40; // first byte of an advertisement's flags
constexpr std::uint8_t flag_override = 0x20;
static_assert(off_icmp + icmp_nd_size + option_link_address_size == nd_frame_size);

bool is_multicast(const Ipv6Address& address) {
    return address[0] == 0xff;
}
bool is_unspecified(const Ipv6Address& address) {
    return address == Ipv6Address{};
}

MacAddress read_mac(const std::uint8_t* p) {
    MacAddress mac;
    std::copy_n(p, mac.size(), mac.begin());
    return mac;
}
Ipv6Address read_address(const std::uint8_t* p) {
    Ipv6Address address;
    std::copy_n(p, address.size(), address.begin());
    return address;
}

// The link-layer address option `wanted` among the options [begin, end), checked as RFC 4861
// 7.1.1 has it: every option has a length, and none runs past the message.
NdError read_options(std::span<const std::uint8_t> options, std::uint8_t wanted,
                     std::optional<MacAddress>& mac) {
    std::size_t at = 0;
    while (at < options.size()) {
        if (options.size() - at < 2 || options[at + 1] == 0) {
            return NdError::bad_option;
        }
        const std::size_t length = std::size_t{options[at + 1]} * 8;
        if (length > options.size() - at) {
            return NdError::bad_option;
        }
        if (options[at] == wanted && length == option_link_address_size) {
            mac = read_mac(options.data() + at + 2);
            if (is_multicast_mac(*mac) || is_zero_mac(*mac)) {
                return NdError::bad_link_address;
            }
        }
        at += length;
    }
    return NdError::ok;
}

// The fields of an ND message RFC 4861 7.1 has a receiver check, after its type is known.
NdError validate(std::span<const std::uint8_t> frame, std::size_t icmp_length, NdMessage& m) {
    const std::uint8_t* ip = frame.data() + off_ip;
    const std::uint8_t* icmp = frame.data() + off_icmp;
    if (ip[7] != nd_hop_limit) {
        return NdError::bad_hop_limit;
    }
    if (icmp[1] != 0) {
        return NdError::bad_code;
    }
    if (icmp_length < icmp_nd_size) {
        return NdError::bad_length;
    }
    if (roce::ipv6_upper_layer_checksum(ip, {icmp, icmp_length}, ip_protocol_icmpv6) != 0) {
        return NdError::bad_checksum;
    }
    m.source = read_address(ip + 8);
    m.destination = read_address(ip + 24);
    m.target = read_address(icmp + 8);
    if (is_multicast(m.target)) {
        return NdError::bad_target;
    }
    if (is_multicast(m.source)) {
        return NdError::bad_source;
    }
    const bool solicitation = m.type == NdType::solicitation;
    if (const NdError options = read_options(
            {icmp + icmp_nd_size, icmp_length - icmp_nd_size},
            solicitation ? option_source_link_address : option_target_link_address, m.link_address);
        options != NdError::ok) {
        return options;
    }
    if (solicitation) {
        // Duplicate address detection asks from :: to a solicited-node group, and says no MAC.
        if (is_unspecified(m.source) &&
            (m.link_address || m.destination != solicited_node_address(m.target))) {
            return NdError::bad_source;
        }
        return NdError::ok;
    }
    m.solicited = (icmp[4] & flag_solicited) != 0;
    m.override = (icmp[4] & flag_override) != 0;
    if (m.solicited && is_multicast(m.destination)) {
        return NdError::solicited_to_multicast;
    }
    return NdError::ok;
}

// Ethernet, IPv6 (hop limit 255, ICMPv6) and the message's first 8 bytes; the caller writes the
// target and the option, and then the checksum.
std::size_t build_nd(std::span<std::uint8_t> out, const MacAddress& eth_destination,
                     const MacAddress& our_mac, const Ipv6Address& source,
                     const Ipv6Address& destination, std::uint8_t type, std::uint8_t flags,
                     const Ipv6Address& target, std::uint8_t option) {
    if (out.size() < nd_frame_size) {
        return 0;
    }
    std::fill_n(out.begin(), nd_frame_size, std::uint8_t{0});
    roce::EthernetHeader eth;
    eth.dst = eth_destination;
    eth.src = our_mac;
    eth.ether_type = roce::ethertype_ipv6;
    roce::encode_ethernet(eth, out);
    roce::Ipv6Header ip;
    ip.payload_length = static_cast<std::uint16_t>(icmp_nd_size + option_link_address_size);
    ip.next_header = ip_protocol_icmpv6;
    ip.hop_limit = nd_hop_limit;
    ip.src = source;
    ip.dst = destination;
    roce::encode_ipv6(ip, out.subspan(off_ip));
    std::uint8_t* icmp = out.data() + off_icmp;
    icmp[0] = type;
    icmp[4] = flags;
    std::copy(target.begin(), target.end(), icmp + 8);
    icmp[icmp_nd_size] = option;
    icmp[icmp_nd_size + 1] = 1; // in units of 8 bytes
    std::copy(our_mac.begin(), our_mac.end(), icmp + icmp_nd_size + 2);
    roce::store_be16(icmp + 2,
                     roce::ipv6_upper_layer_checksum(out.data() + off_ip, {icmp, ip.payload_length},
                                                     ip_protocol_icmpv6));
    return nd_frame_size;
}

} // namespace

Ipv6Address solicited_node_address(const Ipv6Address& address) noexcept {
    Ipv6Address group{0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, 0xff};
    std::copy(address.begin() + 13, address.end(), group.begin() + 13);
    return group;
}

MacAddress ipv6_multicast_mac(const Ipv6Address& group) noexcept {
    return {0x33, 0x33, group[12], group[13], group[14], group[15]};
}

bool is_unusable_ipv6(const Ipv6Address& address) noexcept {
    static constexpr Ipv6Address loopback{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
    const bool v4_mapped =
        std::all_of(address.begin(), address.begin() + 10, [](std::uint8_t b) { return b == 0; }) &&
        address[10] == 0xff && address[11] == 0xff;
    return is_unspecified(address) || address == loopback || is_multicast(address) || v4_mapped;
}

std::string_view nd_error_name(NdError error) {
    static constexpr std::array<std::string_view, nd_error_count> names = {
        "ok",         "too_short",  "not_nd",           "bad_hop_limit",
        "bad_code",   "bad_length", "bad_checksum",     "bad_target",
        "bad_option", "bad_source", "bad_link_address", "solicited_to_multicast"};
    const auto index = static_cast<std::size_t>(error);
    return index < names.size() ? names[index] : "unknown";
}

NdParseResult parse_nd(std::span<const std::uint8_t> frame) noexcept {
    NdParseResult result;
    if (!is_icmpv6_frame(frame)) {
        const bool short_ipv6 =
            frame.size() >= 14 && frame[12] == 0x86 && frame[13] == 0xdd && frame.size() < off_icmp;
        result.error = short_ipv6 ? NdError::too_short : NdError::not_nd;
        return result;
    }
    if ((frame[off_ip] >> 4) != 6 || frame.size() < off_icmp + 4) {
        result.error = (frame[off_ip] >> 4) != 6 ? NdError::not_nd : NdError::too_short;
        return result;
    }
    const std::uint8_t type = frame[off_icmp];
    if (type != icmpv6_neighbor_solicitation && type != icmpv6_neighbor_advertisement) {
        result.error = NdError::not_nd;
        return result;
    }
    const std::size_t icmp_length = roce::load_be16(frame.data() + off_ip + 4);
    if (frame.size() - off_icmp < icmp_length) {
        result.error = NdError::too_short;
        return result;
    }
    result.message.type =
        type == icmpv6_neighbor_solicitation ? NdType::solicitation : NdType::advertisement;
    result.message.eth_source = read_mac(frame.data() + 6);
    result.error = validate(frame, icmp_length, result.message);
    if (result.error != NdError::ok) {
        result.message = {};
    }
    return result;
}

std::size_t build_neighbor_solicitation(std::span<std::uint8_t> out, const MacAddress& our_mac,
                                        const Ipv6Address& our_ip,
                                        const Ipv6Address& target) noexcept {
    const Ipv6Address group = solicited_node_address(target);
    return build_nd(out, ipv6_multicast_mac(group), our_mac, our_ip, group,
                    icmpv6_neighbor_solicitation, 0, target, option_source_link_address);
}

std::size_t build_neighbor_advertisement(std::span<std::uint8_t> out, const MacAddress& our_mac,
                                         const Ipv6Address& our_ip, const MacAddress& peer_mac,
                                         const Ipv6Address& peer_ip) noexcept {
    return build_nd(out, peer_mac, our_mac, our_ip, peer_ip, icmpv6_neighbor_advertisement,
                    flag_solicited | flag_override, our_ip, option_target_link_address);
}

std::size_t build_address_defence(std::span<std::uint8_t> out, const MacAddress& our_mac,
                                  const Ipv6Address& our_ip) noexcept {
    return build_nd(out, ipv6_multicast_mac(all_nodes_address), our_mac, our_ip, all_nodes_address,
                    icmpv6_neighbor_advertisement, flag_override, our_ip,
                    option_target_link_address);
}

// ---- NdResolver ----

NdResolver::NdResolver(const NdResolverConfig& config)
    : config_(config), retry_cycles_(ms_to_cycles(config.tsc_hz, config.retry_interval_ms)),
      reachable_cycles_(ms_to_cycles(config.tsc_hz, config.reachable_ms)),
      table_(config.table_capacity), pending_(config.max_pending) {}

Result<NdResolver> NdResolver::create(const NdResolverConfig& config) {
    if (config.tsc_hz == 0 || config.retry_interval_ms == 0 || config.max_tries == 0 ||
        config.table_capacity == 0 || config.max_pending == 0) {
        return Error{StatusCode::invalid_parameter,
                     strformat("neighbour discovery: tsc_hz=%llu, retry_interval_ms=%u, "
                               "max_tries=%u, table_capacity=%zu and max_pending=%zu must all be "
                               "at least 1",
                               static_cast<unsigned long long>(config.tsc_hz),
                               config.retry_interval_ms, config.max_tries, config.table_capacity,
                               config.max_pending)};
    }
    if (is_multicast_mac(config.mac) || is_zero_mac(config.mac)) {
        return Error{StatusCode::invalid_parameter,
                     "neighbour discovery: our MAC is zero or multicast; the port needs a "
                     "unicast address"};
    }
    if (is_unusable_ipv6(config.ip)) {
        return Error{StatusCode::invalid_parameter,
                     "neighbour discovery: our IPv6 address is not a unicast host address"};
    }
    return NdResolver(config);
}

NeighbourRequestResult NdResolver::request(const Ipv6Address& ip, std::uint64_t now,
                                           NdFrame& frame) noexcept {
    if (is_unusable_ipv6(ip) || ip == config_.ip) {
        return NeighbourRequestResult::invalid_target;
    }
    const NeighbourRequestResult result =
        pending_.start(ip, lookup(ip, now).has_value(), now + retry_cycles_);
    if (result == NeighbourRequestResult::send) {
        frame.length = build_neighbor_solicitation(frame.bytes, config_.mac, config_.ip, ip);
    }
    return result;
}

void NdResolver::learn(const NdMessage& message, const MacAddress& mac, bool may_add,
                       std::uint64_t now, NdRxResult& result) noexcept {
    const Ipv6Address& ip = message.type == NdType::solicitation ? message.source : message.target;
    if (ip == config_.ip || is_unusable_ipv6(ip)) {
        return; // a conflict, or an address no neighbour owns: nothing to learn
    }
    // RFC 4861 7.2.5: only an entry without a MAC yet (ours: not in the table) takes a
    // non-overriding answer's; a known one, even stale and being asked for again, keeps its own.
    if (message.type == NdType::advertisement && !message.override) {
        if (const Table::Entry* known = table_.find(ip); known != nullptr && known->mac != mac) {
            return;
        }
    }
    const bool was_pending = pending_.remove(ip);
    const bool merged = table_.refresh(ip, mac, now);
    if ((was_pending || may_add) && !merged) {
        result.evicted = table_.insert(ip, mac, now) == NeighbourUpdate::inserted_evicting;
    }
    if (was_pending) {
        result.resolved = true;
        result.resolved_ip = ip;
        result.resolved_mac = mac;
    }
}

NdRxResult NdResolver::on_frame(std::span<const std::uint8_t> frame, std::uint64_t now,
                                NdFrame& reply) noexcept {
    NdRxResult result;
    const NdParseResult parsed = parse_nd(frame);
    if (!parsed.ok()) {
        result.error = parsed.error;
        return result;
    }
    const NdMessage& message = parsed.message;
    if (message.eth_source == config_.mac) {
        result.own_frame = true;
        return result;
    }
    const bool for_us = message.type == NdType::solicitation && message.target == config_.ip &&
                        (message.destination == config_.ip ||
                         message.destination == solicited_node_address(config_.ip));
    // A solicitation without a source link-layer address is answered to the Ethernet source
    // (RFC 4861 7.2.4 allows it for unicast ones); only an explicit address is learned.
    if (message.link_address) {
        learn(message, *message.link_address, for_us, now, result);
    }
    if (for_us && is_unspecified(message.source)) {
        result.address_conflict = true;
        reply.length = build_address_defence(reply.bytes, config_.mac, config_.ip);
        result.reply_ready = true;
    } else if (for_us) {
        const MacAddress to = message.link_address.value_or(message.eth_source);
        reply.length =
            build_neighbor_advertisement(reply.bytes, config_.mac, config_.ip, to, message.source);
        result.reply_ready = true;
    }
    return result;
}

ProbePollResult NdResolver::poll(std::uint64_t now, std::span<NdFrame> frames,
                                 std::span<Ipv6Address> failed) noexcept {
    const auto ask = [&](const Ipv6Address& ip, std::size_t index) {
        frames[index].length =
            build_neighbor_solicitation(frames[index].bytes, config_.mac, config_.ip, ip);
    };
    return pending_.poll(now, config_.max_tries, retry_cycles_, frames.size(), ask, failed);
}

} // namespace prdma::swroce
