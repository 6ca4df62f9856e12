#include "devargs.hpp"

#include <algorithm>
#include <arpa/inet.h>
#include <charconv>
#include <cmath>
#include <cstring>
#include <netinet/in.h>
#include <system_error>

#include <prdma/build_config.hpp>
#include <prdma/format.hpp>

namespace prdma::swroce {

namespace {

constexpr std::array<std::uint8_t, 12> ipv4_mapped_prefix = {0, 0, 0, 0, 0,    0,
                                                             0, 0, 0, 0, 0xff, 0xff};
constexpr std::array<unsigned, 5> allowed_mtus = {256, 512, 1024, 2048, 4096};

constexpr std::size_t key_index(std::string_view key) {
    return static_cast<std::size_t>(std::find(devarg_keys.begin(), devarg_keys.end(), key) -
                                    devarg_keys.begin());
}

bool has_ipv4_mapped_prefix(const std::array<std::uint8_t, 16>& bytes) {
    return std::equal(ipv4_mapped_prefix.begin(), ipv4_mapped_prefix.end(), bytes.begin());
}

std::string key_list() {
    std::string text;
    for (const std::string_view key : devarg_keys) {
        if (!text.empty()) {
            text += ", ";
        }
        text += key;
    }
    return text;
}

Error bad(std::string_view key, std::string_view value, std::string_view allowed) {
    return {StatusCode::invalid_parameter,
            strformat("swroce devarg %.*s='%.*s' is invalid: %.*s", static_cast<int>(key.size()),
                      key.data(), static_cast<int>(value.size()), value.data(),
                      static_cast<int>(allowed.size()), allowed.data())};
}

// Whole-string decimal; from_chars already refuses signs, spaces and hex prefixes.
template <typename T>
std::optional<T> parse_decimal(std::string_view text) {
    T value{};
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (text.empty() || ec != std::errc{} || end != text.data() + text.size()) {
        return std::nullopt;
    }
    return value;
}

// Addresses a device cannot own: it would never receive unicast RoCEv2 traffic on them.
const char* unusable_address_reason(const IpAddress& ip) {
    if (ip.is_v4) {
        const std::uint32_t v4 = ip.ipv4_host_order();
        if (v4 == 0) {
            return "0.0.0.0 is the unspecified address; give the device's own unicast address";
        }
        if (v4 == 0xffffffffU) {
            return "255.255.255.255 is the broadcast address; give a unicast address";
        }
        if ((v4 >> 28) == 0xe) {
            return "224.0.0.0/4 is multicast; give a unicast address";
        }
        if ((v4 >> 24) == 127) {
            return "127.0.0.0/8 is loopback and never reaches an Ethernet port";
        }
        return nullptr;
    }
    static constexpr std::array<std::uint8_t, 16> unspecified{};
    static constexpr std::array<std::uint8_t, 16> loopback = {0, 0, 0, 0, 0, 0, 0, 0,
                                                              0, 0, 0, 0, 0, 0, 0, 1};
    if (ip.bytes == unspecified) {
        return ":: is the unspecified address; give the device's own unicast address";
    }
    if (ip.bytes == loopback) {
        return "::1 is loopback and never reaches an Ethernet port";
    }
    if (ip.bytes[0] == 0xff) {
        return "ff00::/8 is multicast; give a unicast address";
    }
    return nullptr;
}

// The probability keys: which direction and which fault each one sets.
struct RateKey {
    std::string_view key;
    FaultRates SwroceDevargs::*direction;
    double FaultRates::*rate;
};
constexpr std::array<RateKey, 11> rate_keys = {{
    {"drop", &SwroceDevargs::rx_faults, &FaultRates::drop}, // rx_drop's older name
    {"rx_drop", &SwroceDevargs::rx_faults, &FaultRates::drop},
    {"rx_reorder", &SwroceDevargs::rx_faults, &FaultRates::reorder},
    {"rx_duplicate", &SwroceDevargs::rx_faults, &FaultRates::duplicate},
    {"rx_corrupt", &SwroceDevargs::rx_faults, &FaultRates::corrupt},
    {"rx_delay", &SwroceDevargs::rx_faults, &FaultRates::delay},
    {"tx_drop", &SwroceDevargs::tx_faults, &FaultRates::drop},
    {"tx_reorder", &SwroceDevargs::tx_faults, &FaultRates::reorder},
    {"tx_duplicate", &SwroceDevargs::tx_faults, &FaultRates::duplicate},
    {"tx_corrupt", &SwroceDevargs::tx_faults, &FaultRates::corrupt},
    {"tx_delay", &SwroceDevargs::tx_faults, &FaultRates::delay},
}};

// The fault-injection keys; nullopt for any other key.
std::optional<Status> apply_fault_key(SwroceDevargs& out, std::string_view key,
                                      std::string_view value) {
    const auto* rate_key = std::find_if(rate_keys.begin(), rate_keys.end(),
                                        [key](const RateKey& r) { return r.key == key; });
    if (rate_key != rate_keys.end()) {
        const auto rate = parse_decimal<double>(value);
        // Written so that NaN fails too.
        if (!rate || !(*rate >= 0.0 && *rate < 1.0)) {
            return bad(key, value,
                       strformat("a probability is a decimal number in [0, 1), e.g. %.*s=0.01",
                                 static_cast<int>(key.size()), key.data()));
        }
        (out.*rate_key->direction).*rate_key->rate = *rate;
        return Status{};
    }
    if (key == "reorder_depth") {
        const auto depth = parse_decimal<unsigned>(value);
        if (!depth || *depth < 1 || *depth > max_reorder_depth) {
            return bad(key, value,
                       strformat("the number of later frames that pass a reordered one is an "
                                 "integer 1..%u",
                                 max_reorder_depth));
        }
        out.reorder_depth = *depth;
        return Status{};
    }
    if (key == "delay_us") {
        const auto delay = parse_decimal<std::uint32_t>(value);
        if (!delay || *delay < 1 || *delay > max_delay_us) {
            return bad(key, value,
                       strformat("how long a delayed frame is held is an integer number of "
                                 "microseconds 1..%u",
                                 static_cast<unsigned>(max_delay_us)));
        }
        out.delay_us = *delay;
        return Status{};
    }
    return std::nullopt;
}

Status apply(SwroceDevargs& out, std::string_view key, std::string_view value) {
    if (std::optional<Status> fault = apply_fault_key(out, key, value)) {
        return *fault;
    }
    if (key == "port") {
        if (value.empty()) {
            return bad("port", value, "name the ethdev to run on, e.g. port=net_memif0");
        }
        out.port = value;
    } else if (key == "ip") {
        const auto ip = parse_ip_address(value);
        if (!ip) {
            return bad("ip", value, "expected an IPv4 (a.b.c.d) or IPv6 (e.g. fd00::1) address");
        }
        if (const char* reason = unusable_address_reason(*ip)) {
            return bad("ip", value, reason);
        }
        out.ip = *ip;
    } else if (key == "mtu") {
        const auto mtu = parse_decimal<unsigned>(value);
        if (!mtu ||
            std::find(allowed_mtus.begin(), allowed_mtus.end(), *mtu) == allowed_mtus.end()) {
            return bad("mtu", value, "an IB path MTU is one of 256, 512, 1024, 2048, 4096");
        }
        out.mtu = *mtu;
    } else if (key == "queues") {
        const auto queues = parse_decimal<unsigned>(value);
        if (!queues || *queues < 1 || *queues > PRDMA_MAX_QUEUE_GROUPS) {
            return Error{StatusCode::invalid_parameter,
                         strformat("swroce devarg queues='%.*s' is invalid: queue groups must be "
                                   "1..%u (PRDMA_MAX_QUEUE_GROUPS; meson option max_queue_groups)",
                                   static_cast<int>(value.size()), value.data(),
                                   static_cast<unsigned>(PRDMA_MAX_QUEUE_GROUPS))};
        }
        out.queues = *queues;
    } else if (key == "progress") {
        if (value != "poll" && value != "service") {
            return bad("progress", value,
                       "progress=poll (the thread polling a CQ drives its queue group) or "
                       "progress=service (a DPDK service on an EAL service lcore, -s/-S, drives "
                       "every queue group)");
        }
        out.service_progress = value == "service";
    } else if (key == "pcap") {
        if (value.empty()) {
            return bad("pcap", value,
                       "give the path of the pcapng file to write, or leave "
                       "pcap out to capture nothing");
        }
        out.pcap = value;
    } else if (key == "seed") {
        const auto seed = parse_decimal<std::uint64_t>(value);
        if (!seed) {
            return bad("seed", value, "a seed is a decimal integer in 0..18446744073709551615");
        }
        out.seed = *seed;
    }
    return {};
}

} // namespace

IpAddress IpAddress::from_ipv4(std::uint32_t address_host_order) {
    IpAddress ip;
    std::copy(ipv4_mapped_prefix.begin(), ipv4_mapped_prefix.end(), ip.bytes.begin());
    ip.bytes[12] = static_cast<std::uint8_t>(address_host_order >> 24);
    ip.bytes[13] = static_cast<std::uint8_t>(address_host_order >> 16);
    ip.bytes[14] = static_cast<std::uint8_t>(address_host_order >> 8);
    ip.bytes[15] = static_cast<std::uint8_t>(address_host_order);
    ip.is_v4 = true;
    return ip;
}

std::uint32_t IpAddress::ipv4_host_order() const {
    return (std::uint32_t{bytes[12]} << 24) | (std::uint32_t{bytes[13]} << 16) |
           (std::uint32_t{bytes[14]} << 8) | std::uint32_t{bytes[15]};
}

std::string IpAddress::to_string() const {
    char text[INET6_ADDRSTRLEN] = {};
    if (is_v4) {
        const std::uint32_t network = htonl(ipv4_host_order());
        inet_ntop(AF_INET, &network, text, sizeof(text));
    } else {
        inet_ntop(AF_INET6, bytes.data(), text, sizeof(text));
    }
    return text;
}

std::optional<IpAddress> parse_ip_address(std::string_view text) {
    // inet_pton needs a NUL-terminated string; longer text cannot be an address anyway.
    char buffer[INET6_ADDRSTRLEN] = {};
    if (text.empty() || text.size() >= sizeof(buffer)) {
        return std::nullopt;
    }
    std::memcpy(buffer, text.data(), text.size());
    in_addr v4{};
    if (inet_pton(AF_INET, buffer, &v4) == 1) {
        return IpAddress::from_ipv4(ntohl(v4.s_addr));
    }
    IpAddress ip;
    if (inet_pton(AF_INET6, buffer, ip.bytes.data()) != 1) {
        return std::nullopt;
    }
    ip.is_v4 = has_ipv4_mapped_prefix(ip.bytes);
    return ip;
}

Result<SwroceDevargs> parse_devargs(std::string_view args) {
    SwroceDevargs out;
    std::array<std::string_view, devarg_keys.size()> seen_values{};
    std::array<bool, devarg_keys.size()> seen{};

    std::size_t position = 0;
    std::string_view rest = args;
    bool more = !args.empty();
    while (more) {
        const std::size_t comma = rest.find(',');
        const std::string_view entry = rest.substr(0, comma);
        ++position;
        if (entry.empty()) {
            return Error{StatusCode::invalid_parameter,
                         strformat("swroce devargs '%.*s': entry %zu is empty; write "
                                   "key=value entries separated by single commas",
                                   static_cast<int>(args.size()), args.data(), position)};
        }
        const std::size_t equals = entry.find('=');
        if (equals == std::string_view::npos) {
            return Error{StatusCode::invalid_parameter,
                         strformat("swroce devargs: '%.*s' is not key=value; valid keys: %s",
                                   static_cast<int>(entry.size()), entry.data(),
                                   key_list().c_str())};
        }
        const std::string_view key = entry.substr(0, equals);
        const std::string_view value = entry.substr(equals + 1);
        if (key_index(key) == devarg_keys.size()) {
            return Error{StatusCode::invalid_parameter,
                         strformat("swroce devargs: unknown key '%.*s' (in '%.*s'); valid keys: %s",
                                   static_cast<int>(key.size()), key.data(),
                                   static_cast<int>(entry.size()), entry.data(),
                                   key_list().c_str())};
        }
        const std::size_t index = key_index(key);
        if (seen[index]) {
            return Error{StatusCode::invalid_parameter,
                         strformat("swroce devargs: key '%.*s' is given twice ('%.*s' and "
                                   "'%.*s'); give each key once",
                                   static_cast<int>(key.size()), key.data(),
                                   static_cast<int>(seen_values[index].size()),
                                   seen_values[index].data(), static_cast<int>(value.size()),
                                   value.data())};
        }
        seen[index] = true;
        seen_values[index] = value;
        if (Status status = apply(out, key, value); !status) {
            return status.error();
        }
        more = comma != std::string_view::npos;
        if (more) {
            rest.remove_prefix(comma + 1);
        }
    }

    if (out.port.empty()) {
        return Error{StatusCode::invalid_parameter,
                     "swroce devargs: 'port' is required: name the ethdev the device runs on, "
                     "e.g. --vdev=rdma_swroce0,port=net_memif0,ip=10.0.0.1"};
    }
    if (!seen[key_index("ip")]) {
        return Error{StatusCode::invalid_parameter,
                     "swroce devargs: 'ip' is required: the device's IPv4 or IPv6 address "
                     "(its GID), e.g. ip=10.0.0.1"};
    }
    if (seen[key_index("drop")] && seen[key_index("rx_drop")]) {
        const std::string_view drop = seen_values[key_index("drop")];
        const std::string_view rx_drop = seen_values[key_index("rx_drop")];
        return Error{StatusCode::invalid_parameter,
                     strformat("swroce devargs: drop='%.*s' and rx_drop='%.*s' are both given, "
                               "but drop is the older name of rx_drop; give only rx_drop",
                               static_cast<int>(drop.size()), drop.data(),
                               static_cast<int>(rx_drop.size()), rx_drop.data())};
    }
    return out;
}

rdma::Gid gid_from_ip(const IpAddress& ip) {
    // Gid is an aggregate; its member functions live in lib/rdmadev, which this file must not
    // need, so the bytes are copied here.
    rdma::Gid gid;
    gid.raw = ip.bytes;
    return gid;
}

} // namespace prdma::swroce
