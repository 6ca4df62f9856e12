// Device arguments of an swroce device: the text after the device name in
// --vdev=rdma_swroce0,port=net_memif0,ip=10.0.0.1,... (DPDK's kvargs syntax, parsed strictly).
//
// Pure: no EAL, no DPDK calls, so every accepted and rejected form is unit-tested.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <prdma/rdmadev/types.hpp>
#include <prdma/status.hpp>

#include "fault_injection.hpp"

namespace prdma::swroce {

// An IPv4 or IPv6 address in the 16-byte form a GID uses: IPv4 is stored IPv4-mapped
// (::ffff:a.b.c.d), so code that only needs the GID never branches on the family.
struct IpAddress {
    std::array<std::uint8_t, 16> bytes{}; // network byte order
    bool is_v4 = false;                   // the wire carries IPv4 headers for this address

    friend bool operator==(const IpAddress&, const IpAddress&) = default;

    static IpAddress from_ipv4(std::uint32_t address_host_order);
    // The IPv4 address in host byte order; meaningful only when is_v4.
    [[nodiscard]] std::uint32_t ipv4_host_order() const;
    // "10.0.0.1" or "fe80::1".
    [[nodiscard]] std::string to_string() const;
};

// Strict text form: dotted-quad IPv4 or RFC 4291 IPv6 (inet_pton's grammar). IPv4-mapped IPv6
// text (::ffff:10.0.0.1) is IPv4, because that is how RoCEv2 treats such a GID on the wire.
std::optional<IpAddress> parse_ip_address(std::string_view text);

struct SwroceDevargs {
    std::string port;            // the ethdev carrying the frames (required)
    IpAddress ip;                // this device's address, GID index 0 (required)
    std::optional<unsigned> mtu; // IB path MTU to offer; default: what the port carries
    unsigned queues = 1;         // queue groups = rx/tx queue pairs of the port
    std::string pcap;            // capture every frame to this pcapng file; empty = off
    // Fault injection (fault_injection.hpp), per direction; rx_<fault>= and tx_<fault>=.
    FaultRates rx_faults;
    FaultRates tx_faults;
    unsigned reorder_depth = 3;   // later frames that pass a reordered one
    std::uint32_t delay_us = 100; // how long a delayed frame is held
    std::uint64_t seed = 1;       // seed of every fault decision (injector_seed), so a run repeats
    // progress=service: the engine runs as a DPDK service (rte_service) on an EAL service lcore
    // (-s/-S), so the application's threads only post and reap; progress=poll (the default): the
    // thread that polls a CQ drives its queue group.
    bool service_progress = false;
};

inline constexpr unsigned max_reorder_depth = FaultInjector::max_reorder_depth;
inline constexpr std::uint32_t max_delay_us = 1000000;

// Keys, in the order the usage message lists them.
inline constexpr std::array<std::string_view, 20> devarg_keys = {
    "port",       "ip",       "mtu",           "queues",     "progress",
    "pcap",       "drop",     "rx_drop",       "rx_reorder", "rx_duplicate",
    "rx_corrupt", "rx_delay", "tx_drop",       "tx_reorder", "tx_duplicate",
    "tx_corrupt", "tx_delay", "reorder_depth", "delay_us",   "seed"};

// Parses "key=value[,key=value...]". Every rule broken is invalid_parameter with a message that
// names the key, the value given and what is allowed.
Result<SwroceDevargs> parse_devargs(std::string_view args);

// GID of an address, as Linux rxe fills its GID table: IPv4-mapped for IPv4, the address
// itself for IPv6.
rdma::Gid gid_from_ip(const IpAddress& ip);

} // namespace prdma::swroce
