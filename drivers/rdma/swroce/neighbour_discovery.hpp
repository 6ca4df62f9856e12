// IPv6 neighbour discovery for swroce (RFC 4861, address resolution only): how an IPv6 device
// learns the MAC of a RoCEv2 peer, as ARP (arp.hpp) does for IPv4. A Neighbor Solicitation goes
// to the target's solicited-node multicast group; the Neighbor Advertisement that answers carries
// the target's MAC. The device answers solicitations for its own address the same way, so a Linux
// host (rxe) or a NIC finds it.
//
// No router discovery, redirects or duplicate address detection of its own: RoCE peers are
// on-link, and the device's address is given to it (the ip= devarg); another host's DAD probe for
// it is answered, as RFC 4861 7.2.4 has a node defend its address. Like arp.hpp, everything works
// on byte spans and TSC cycles passed in: no mbufs, clock reads or sends.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include <prdma/roce/headers.hpp>
#include <prdma/status.hpp>

#include "neighbour_cache.hpp"

namespace prdma::swroce {

using Ipv6Address = roce::Ipv6Address;

inline constexpr std::uint8_t ip_protocol_icmpv6 = 58;
inline constexpr std::uint8_t icmpv6_neighbor_solicitation = 135;
inline constexpr std::uint8_t icmpv6_neighbor_advertisement = 136;
// RFC 4861 7.1: a neighbour discovery message that crossed a router (hop limit below 255) is not
// from the link, and is dropped.
inline constexpr std::uint8_t nd_hop_limit = 255;
// Ethernet + IPv6 + a solicitation or advertisement (24 bytes) + one link-layer address option.
inline constexpr std::size_t nd_frame_size = 14 + 40 + 24 + 8;
inline constexpr std::size_t nd_frame_buffer_size = 96;
using NdFrame = ControlFrame<nd_frame_buffer_size>;

// The receive path's first question: IPv6 carrying ICMPv6 straight after its header (ND never
// has extension headers). RoCEv2 over IPv6 carries UDP there, so RoCE frames skip this.
inline bool is_icmpv6_frame(std::span<const std::uint8_t> frame) noexcept {
    return frame.size() >= 14 + 40 && frame[12] == (roce::ethertype_ipv6 >> 8) &&
           frame[13] == (roce::ethertype_ipv6 & 0xffU) && frame[14 + 6] == ip_protocol_icmpv6;
}

// ff02::1: every node on the link (where a defended address is advertised).
inline constexpr Ipv6Address all_nodes_address = {0xff, 0x02, 0, 0, 0, 0, 0, 0,
                                                  0,    0,    0, 0, 0, 0, 0, 0x01};

// The solicited-node multicast group of `address` (ff02::1:ffXX:XXXX, RFC 4291 2.7.1), where a
// solicitation for it is sent, and the Ethernet group that carries it (33:33 + its last 32 bits).
Ipv6Address solicited_node_address(const Ipv6Address& address) noexcept;
MacAddress ipv6_multicast_mac(const Ipv6Address& group) noexcept;
// An address no neighbour owns: unspecified (::), loopback (::1), multicast or IPv4-mapped.
bool is_unusable_ipv6(const Ipv6Address& address) noexcept;

enum class NdType : std::uint8_t { solicitation, advertisement };

struct NdMessage {
    NdType type = NdType::solicitation;
    MacAddress eth_source{};
    Ipv6Address source{};
    Ipv6Address destination{};
    Ipv6Address target{};
    bool solicited = false; // advertisement: it answers a solicitation
    bool override = false;  // advertisement: it replaces a cached MAC
    // The source (solicitation) or target (advertisement) link-layer address option.
    std::optional<MacAddress> link_address;
};

// Why a frame was not a usable neighbour discovery message (RFC 4861 7.1.1 and 7.1.2); distinct
// so the driver can count each one.
enum class NdError : std::uint8_t {
    ok = 0,
    too_short,              // shorter than its headers, or than its IPv6 payload length says
    not_nd,                 // not IPv6 + ICMPv6 solicitation or advertisement
    bad_hop_limit,          // not 255: it crossed a router
    bad_code,               // ICMP code is not 0
    bad_length,             // ICMP message shorter than 24 bytes
    bad_checksum,           // ICMPv6 checksum does not verify
    bad_target,             // target address is multicast
    bad_option,             // an option of length 0, or one running past the message
    bad_source,             // multicast source; or :: with a link-layer option or to a unicast
    bad_link_address,       // the link-layer address option is zero or multicast
    solicited_to_multicast, // an advertisement to a multicast group with the solicited flag
};
inline constexpr std::size_t nd_error_count = 12;
std::string_view nd_error_name(NdError error);

struct NdParseResult {
    NdError error = NdError::ok;
    NdMessage message{}; // valid only when error == ok
    [[nodiscard]] bool ok() const noexcept { return error == NdError::ok; }
};

// Reads an Ethernet frame (no FCS; trailing padding allowed). Never reads outside `frame`.
NdParseResult parse_nd(std::span<const std::uint8_t> frame) noexcept;

// "Who has `target`? tell our_ip at our_mac", to the target's solicited-node group. Returns the
// frame length, or 0 when `out` is too short.
std::size_t build_neighbor_solicitation(std::span<std::uint8_t> out, const MacAddress& our_mac,
                                        const Ipv6Address& our_ip,
                                        const Ipv6Address& target) noexcept;
// "our_ip is at our_mac", solicited and overriding, unicast to the host that asked.
std::size_t build_neighbor_advertisement(std::span<std::uint8_t> out, const MacAddress& our_mac,
                                         const Ipv6Address& our_ip, const MacAddress& peer_mac,
                                         const Ipv6Address& peer_ip) noexcept;
// The same, unsolicited, to all nodes: the answer to another host's DAD probe for our address.
std::size_t build_address_defence(std::span<std::uint8_t> out, const MacAddress& our_mac,
                                  const Ipv6Address& our_ip) noexcept;

struct NdResolverConfig {
    MacAddress mac{};         // this device's port
    Ipv6Address ip{};         // this device's IPv6 address
    std::uint64_t tsc_hz = 0; // rte_get_tsc_hz()
    // RFC 4861's RetransTimer is 1 s and MAX_MULTICAST_SOLICIT 3; a RoCE connect waits on this,
    // so swroce asks as ARP does (arp.hpp): faster, and a few more times.
    std::uint32_t retry_interval_ms = 200;
    unsigned max_tries = 5;
    std::uint32_t reachable_ms = 60'000;
    std::size_t table_capacity = 256;
    std::size_t max_pending = 64;
};

struct NdRxResult {
    NdError error = NdError::ok;   // not ok: the frame was dropped; count it by this value
    bool own_frame = false;        // our own solicitation came back
    bool address_conflict = false; // another host probes for our address (DAD): we defend it
    bool reply_ready = false;      // `reply` holds an advertisement answering a solicitation
    bool resolved = false;         // a pending resolution finished: resolved_ip -> resolved_mac
    bool evicted = false;          // learning replaced the least recently confirmed entry
    Ipv6Address resolved_ip{};
    MacAddress resolved_mac{};
};

// Address resolution of one IPv6 device: the same contract as ArpResolver.
class NdResolver {
public:
    using Table = BasicNeighbourTable<Ipv6Address>;

    static Result<NdResolver> create(const NdResolverConfig& config);

    NeighbourRequestResult request(const Ipv6Address& ip, std::uint64_t now,
                                   NdFrame& frame) noexcept;
    // Learning as ArpResolver's merge rule: any message from a host known or being resolved
    // refreshes it; a new host is learned only from a solicitation for our address. An
    // advertisement without the override flag never changes a MAC already known (RFC 4861
    // 7.2.5: a proxy or anycast answer).
    NdRxResult on_frame(std::span<const std::uint8_t> frame, std::uint64_t now,
                        NdFrame& reply) noexcept;
    ProbePollResult poll(std::uint64_t now, std::span<NdFrame> frames,
                         std::span<Ipv6Address> failed) noexcept;

    [[nodiscard]] std::optional<MacAddress> lookup(const Ipv6Address& ip,
                                                   std::uint64_t now) const noexcept {
        return table_.lookup(ip, now, reachable_cycles_);
    }
    [[nodiscard]] bool is_pending(const Ipv6Address& ip) const noexcept {
        return pending_.contains(ip);
    }
    [[nodiscard]] std::size_t pending_count() const noexcept { return pending_.size(); }
    [[nodiscard]] const Table& table() const noexcept { return table_; }
    [[nodiscard]] const NdResolverConfig& config() const noexcept { return config_; }

private:
    explicit NdResolver(const NdResolverConfig& config);
    // The advertisement or solicitation `message` teaches: resolves, refreshes or adds its sender.
    void learn(const NdMessage& message, const MacAddress& mac, bool may_add, std::uint64_t now,
               NdRxResult& result) noexcept;

    NdResolverConfig config_;
    std::uint64_t retry_cycles_ = 0;
    std::uint64_t reachable_cycles_ = 0;
    Table table_;
    PendingProbes<Ipv6Address> pending_;
};

} // namespace prdma::swroce
