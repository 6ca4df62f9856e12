// ARP for swroce (RFC 826, IPv4 over Ethernet): how a device learns the MAC of the peer a QP
// is connected to before it can put a RoCEv2 frame on the wire.
//
// Everything here works on byte spans and TSC cycles passed in by the caller: no mbufs, no clock
// reads, no sends. The driver moves frames between these buffers and its port, which keeps the
// protocol testable without DPDK. IPv4 addresses are host byte order throughout (as
// Gid::from_ipv4 takes them); the wire conversion happens only in encode/parse.
//
// IPv6 peers are found by neighbour discovery (neighbour_discovery.hpp); the table and the retry
// bookkeeping both use are in neighbour_cache.hpp.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include <prdma/status.hpp>

#include "neighbour_cache.hpp"

namespace prdma::swroce {

inline constexpr std::uint16_t ethertype_arp = 0x0806;
inline constexpr std::uint16_t ethertype_ipv4 = 0x0800;
inline constexpr std::size_t ethernet_header_size = 14;
inline constexpr std::size_t arp_packet_size = 28;
inline constexpr std::size_t arp_unpadded_frame_size = ethernet_header_size + arp_packet_size;

// The receive path's first question about every frame: its EtherType is ARP's (a VLAN tag counts
// as not ARP, as parse_arp has it). Two byte compares, so RoCE frames skip the resolver.
inline bool is_arp_frame(std::span<const std::uint8_t> frame) noexcept {
    return frame.size() >= ethernet_header_size && frame[12] == (ethertype_arp >> 8) &&
           frame[13] == (ethertype_arp & 0xffU);
}
// 64 bytes on the wire minus the FCS the port appends: frames shorter than this are padded, as
// Linux pads its ARP, so a port that does not pad still sends a legal frame.
inline constexpr std::size_t ethernet_min_frame_size = 60;
// Room the resolver expects in a caller's frame buffer.
inline constexpr std::size_t arp_frame_buffer_size = 64;

enum class ArpOp : std::uint16_t { request = 1, reply = 2 };

struct ArpMessage {
    ArpOp op = ArpOp::request;
    MacAddress sender_mac{};
    std::uint32_t sender_ip = 0;
    MacAddress target_mac{};
    std::uint32_t target_ip = 0;

    friend bool operator==(const ArpMessage&, const ArpMessage&) = default;
};

// Why a frame was not a usable ARP message; distinct so the driver can count each one.
enum class ArpError : std::uint8_t {
    ok = 0,
    too_short,          // shorter than Ethernet + ARP for IPv4 (42 bytes)
    not_arp,            // EtherType is not 0x0806 (a VLAN tag counts as not ARP)
    bad_hardware_type,  // ar$hrd is not Ethernet (1)
    bad_protocol_type,  // ar$pro is not IPv4 (0x0800)
    bad_address_length, // ar$hln is not 6 or ar$pln is not 4
    unknown_op,         // ar$op is not request (1) or reply (2); RARP's 3 and 4 land here
    bad_sender_mac,     // sender hardware address is zero, multicast or broadcast
};
std::string_view arp_error_name(ArpError error);

struct ArpParseResult {
    ArpError error = ArpError::ok;
    ArpMessage message{}; // valid only when error == ok
    [[nodiscard]] bool ok() const noexcept { return error == ArpError::ok; }
};

// Reads an Ethernet frame (no FCS; trailing padding allowed). Never reads outside `frame`.
ArpParseResult parse_arp(std::span<const std::uint8_t> frame) noexcept;

// Writes Ethernet (destination `eth_destination`, source message.sender_mac, type ARP) + ARP,
// zero-padded to 60 bytes. Returns the frame length, or 0 when `out` is shorter than 60 bytes.
std::size_t encode_arp(std::span<std::uint8_t> out, const MacAddress& eth_destination,
                       const ArpMessage& message) noexcept;

// Broadcast "who has target_ip? tell our_ip"; the target MAC field is zero, as Linux sends it.
std::size_t build_arp_request(std::span<std::uint8_t> out, const MacAddress& our_mac,
                              std::uint32_t our_ip, std::uint32_t target_ip) noexcept;
// Unicast "our_ip is at our_mac" to the host that asked.
std::size_t build_arp_reply(std::span<std::uint8_t> out, const MacAddress& our_mac,
                            std::uint32_t our_ip, const MacAddress& peer_mac,
                            std::uint32_t peer_ip) noexcept;

using ArpFrame = ControlFrame<arp_frame_buffer_size>;

// IPv4 -> MAC; IPv4 addresses in host byte order.
using NeighbourTable = BasicNeighbourTable<std::uint32_t>;
using NeighbourEntry = NeighbourTable::Entry;

struct ArpResolverConfig {
    MacAddress mac{};         // this device's port
    std::uint32_t ip = 0;     // this device's IPv4 address
    std::uint64_t tsc_hz = 0; // rte_get_tsc_hz(); converts the times below into cycles
    // Linux retransmits unanswered ARP each second (retrans_time_ms); a RoCE connect waits on
    // this, so it is shorter, and still far above a LAN round trip.
    std::uint32_t retry_interval_ms = 200;
    unsigned max_tries = 5; // requests sent before a resolution fails (the first included)
    // How long a learned MAC is trusted without hearing from the peer again (Linux's
    // gc_stale_time is 60 s).
    std::uint32_t reachable_ms = 60'000;
    std::size_t table_capacity = NeighbourTable::default_capacity;
    std::size_t max_pending = 64; // resolutions in flight at once
};

using ArpRequestResult = NeighbourRequestResult;

// What on_frame() made of one received frame; several of these can happen at once.
struct ArpRxResult {
    ArpError error = ArpError::ok; // not ok: the frame was dropped; count it by this value
    bool own_frame = false;        // our own broadcast came back (a looped or promiscuous port)
    bool address_conflict = false; // another MAC claims our IP; nothing was learned from it
    bool reply_ready = false;      // `reply` holds an answer to a request for our IP: send it
    bool resolved = false;         // a pending resolution finished: resolved_ip -> resolved_mac
    bool evicted = false;          // learning replaced the least recently confirmed entry
    std::uint32_t resolved_ip = 0;
    MacAddress resolved_mac{};
};

using ArpPollResult = ProbePollResult;

// ARP resolution state machine of one device. The caller sends what it returns, feeds it every
// received ARP frame, and calls poll() while resolutions are in flight (swroce: group 0's progress,
// whoever drives it); nothing here allocates after create().
class ArpResolver {
public:
    static Result<ArpResolver> create(const ArpResolverConfig& config);

    // Starts resolving `ip`: a fresh table entry or a resolution in flight answers without a frame.
    ArpRequestResult request(std::uint32_t ip, std::uint64_t now, ArpFrame& frame) noexcept;

    // Handles one received Ethernet frame. Learning follows RFC 826's merge rule: a sender we
    // know (or are resolving) is refreshed by any ARP; a new sender is added only when the frame
    // targets our IP, so other hosts' chatter cannot fill the table.
    ArpRxResult on_frame(std::span<const std::uint8_t> frame, std::uint64_t now,
                         ArpFrame& reply) noexcept;

    // Retransmits requests whose timer ran out and gives up on those sent max_tries times. When
    // `frames` or `failed` is full the rest wait for the next poll, so nothing is lost.
    ArpPollResult poll(std::uint64_t now, std::span<ArpFrame> frames,
                       std::span<std::uint32_t> failed) noexcept;

    [[nodiscard]] std::optional<MacAddress> lookup(std::uint32_t ip,
                                                   std::uint64_t now) const noexcept {
        return table_.lookup(ip, now, reachable_cycles_);
    }
    [[nodiscard]] bool is_pending(std::uint32_t ip) const noexcept { return pending_.contains(ip); }
    [[nodiscard]] std::size_t pending_count() const noexcept { return pending_.size(); }
    [[nodiscard]] const NeighbourTable& table() const noexcept { return table_; }
    [[nodiscard]] const ArpResolverConfig& config() const noexcept { return config_; }
    [[nodiscard]] std::uint64_t retry_interval_cycles() const noexcept { return retry_cycles_; }

private:
    explicit ArpResolver(const ArpResolverConfig& config);

    ArpResolverConfig config_;
    std::uint64_t retry_cycles_ = 0;
    std::uint64_t reachable_cycles_ = 0;
    NeighbourTable table_;
    PendingProbes<std::uint32_t> pending_;
};

} // namespace prdma::swroce
