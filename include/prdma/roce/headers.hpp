// RoCEv2 headers, one value struct each, with an encoder and a decoder over byte spans:
// Ethernet (optional 802.1Q tag), IPv4, IPv6, UDP, and the InfiniBand transport headers BTH,
// RETH, AETH, AtomicETH, AtomicAckETH, ImmDt, IETH and DETH (IBTA Vol. 1 ch. 9.2-9.5, Annex A17).
//
// The structs hold host-order values; the wire is network byte order, read and written byte by
// byte (byte_order.hpp), so a frame buffer of any alignment works and nothing is aliased.
//
// Encoders write exactly the header into the start of `out` and return its size, or 0 (nothing
// written) when `out` is too small. Decoders read the header from the start of `in`, fill `out`
// and return HeaderError::ok, or a distinct error with `out` unspecified; neither ever touches a
// byte outside its span. All are inline, noexcept and allocation-free: the engine calls them per
// packet.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include <prdma/roce/byte_order.hpp>

namespace prdma::roce {

enum class Opcode : std::uint8_t; // opcodes.hpp

// ---- Sizes and well-known values ----------------------------------------------------------------

inline constexpr std::size_t ethernet_header_size = 14;
inline constexpr std::size_t vlan_tag_size = 4;
inline constexpr std::size_t ipv4_header_size = 20; // without options
inline constexpr std::size_t ipv4_max_header_size = 60;
inline constexpr std::size_t ipv6_header_size = 40;
inline constexpr std::size_t udp_header_size = 8;
inline constexpr std::size_t bth_size = 12;
inline constexpr std::size_t reth_size = 16;
inline constexpr std::size_t aeth_size = 4;
inline constexpr std::size_t atomic_eth_size = 28;
inline constexpr std::size_t atomic_ack_eth_size = 8;
inline constexpr std::size_t immdt_size = 4;
inline constexpr std::size_t ieth_size = 4;
inline constexpr std::size_t deth_size = 8;
inline constexpr std::size_t icrc_size = 4;
// 64 bytes on the wire minus the FCS the port appends: shorter frames are padded with zeros.
inline constexpr std::size_t ethernet_min_frame_size = 60;

inline constexpr std::uint16_t ethertype_ipv4 = 0x0800;
inline constexpr std::uint16_t ethertype_ipv6 = 0x86dd;
inline constexpr std::uint16_t ethertype_vlan = 0x8100; // IEEE 802.1Q C-tag
inline constexpr std::uint8_t ip_protocol_udp = 17;
inline constexpr std::uint16_t roce_udp_port = 4791; // IANA, RoCEv2 destination port
inline constexpr std::uint8_t default_ttl = 64;
inline constexpr std::uint16_t default_pkey = 0xffff; // full-member default partition
inline constexpr std::uint32_t qpn_mask = 0xffffff;   // QPNs and PSNs are 24 bits

// Why a decoder refused its input; each failure is its own value so callers can count it.
enum class HeaderError : std::uint8_t {
    ok = 0,
    too_short,         // the span is shorter than the header
    bad_version,       // IP version nibble is not 4 (decode_ipv4) or 6 (decode_ipv6)
    bad_header_length, // IPv4 IHL below 5, or the options run past the span
    bad_checksum,      // IPv4 header checksum does not verify
    bad_length,        // IPv4 total length below the header length; UDP length below 8
};
std::string_view header_error_name(HeaderError error) noexcept;

// ---- Ethernet -----------------------------------------------------------------------------------

using MacAddress = std::array<std::uint8_t, 6>;

struct EthernetHeader {
    MacAddress dst{};
    MacAddress src{};
    std::uint16_t ether_type = ethertype_ipv4; // of the payload: after the tag when there is one
    bool vlan = false;                         // an 802.1Q tag sits between src and ether_type
    std::uint16_t vlan_tci = 0;                // PCP (3 bits) | DEI (1) | VLAN ID (12)

    [[nodiscard]] constexpr std::size_t size() const noexcept {
        return vlan ? ethernet_header_size + vlan_tag_size : ethernet_header_size;
    }
    [[nodiscard]] constexpr std::uint16_t vlan_id() const noexcept { return vlan_tci & 0x0fffU; }
    [[nodiscard]] constexpr std::uint8_t vlan_pcp() const noexcept {
        return static_cast<std::uint8_t>(vlan_tci >> 13);
    }
    friend constexpr bool operator==(const EthernetHeader&, const EthernetHeader&) = default;
};

inline std::size_t encode_ethernet(const EthernetHeader& h, std::span<std::uint8_t> out) noexcept {
    const std::size_t size = h.size();
    if (out.size() < size) {
        return 0;
    }
    std::uint8_t* p = out.data();
    for (std::size_t i = 0; i < h.dst.size(); ++i) {
        p[i] = h.dst[i];
        p[6 + i] = h.src[i];
    }
    if (h.vlan) {
        store_be16(p + 12, ethertype_vlan);
        store_be16(p + 14, h.vlan_tci);
        store_be16(p + 16, h.ether_type);
    } else {
        store_be16(p + 12, h.ether_type);
    }
    return size;
}

// One 802.1Q tag is understood; the EtherType after it becomes ether_type.
inline HeaderError decode_ethernet(std::span<const std::uint8_t> in, EthernetHeader& out) noexcept {
    if (in.size() < ethernet_header_size) {
        return HeaderError::too_short;
    }
    const std::uint8_t* p = in.data();
    for (std::size_t i = 0; i < out.dst.size(); ++i) {
        out.dst[i] = p[i];
        out.src[i] = p[6 + i];
    }
    const std::uint16_t type = load_be16(p + 12);
    if (type == ethertype_vlan) {
        if (in.size() < ethernet_header_size + vlan_tag_size) {
            return HeaderError::too_short;
        }
        out.vlan = true;
        out.vlan_tci = load_be16(p + 14);
        out.ether_type = load_be16(p + 16);
    } else {
        out.vlan = false;
        out.vlan_tci = 0;
        out.ether_type = type;
    }
    return HeaderError::ok;
}

// ---- IPv4 (RFC 791) -----------------------------------------------------------------------------

struct Ipv4Header {
    std::uint8_t tos = 0; // DSCP (upper 6 bits) | ECN (lower 2)
    std::uint16_t total_length = 0;
    std::uint16_t identification = 0;
    bool dont_fragment = true;   // decode only: encode always sets DF (RoCEv2 is never fragmented)
    bool more_fragments = false; // decode only: encode writes 0
    std::uint16_t fragment_offset = 0; // decode only, 8-byte units: encode writes 0
    std::uint8_t ttl = default_ttl;
    std::uint8_t protocol = ip_protocol_udp;
    std::uint16_t checksum = 0; // decode: as carried; encode: computed, this value is ignored
    std::uint32_t src = 0;      // host byte order: 192.168.0.1 is 0xc0a80001
    std::uint32_t dst = 0;
    std::uint8_t header_length = ipv4_header_size; // bytes (IHL x 4); encode writes 20

    [[nodiscard]] constexpr std::uint8_t dscp() const noexcept { return tos >> 2; }
    [[nodiscard]] constexpr std::uint8_t ecn() const noexcept { return tos & 0x3U; }
    friend constexpr bool operator==(const Ipv4Header&, const Ipv4Header&) = default;
};

constexpr std::uint8_t make_tos(std::uint8_t dscp, std::uint8_t ecn) noexcept {
    return static_cast<std::uint8_t>((dscp << 2) | (ecn & 0x3U));
}

// RFC 1071 one's-complement checksum of an IPv4 header, its checksum field taken as zero.
// `header` is the whole header (IHL x 4 bytes, even).
inline std::uint16_t ipv4_header_checksum(std::span<const std::uint8_t> header) noexcept {
    std::uint32_t sum = 0;
    const std::uint8_t* p = header.data();
    for (std::size_t i = 0; i + 1 < header.size(); i += 2) {
        if (i != 10) {
            sum += load_be16(p + i);
        }
    }
    sum = (sum & 0xffffU) + (sum >> 16);
    sum = (sum & 0xffffU) + (sum >> 16);
    return static_cast<std::uint16_t>(~sum);
}

// Writes a 20-byte header: version 4, IHL 5, DF set, MF and fragment offset 0, the checksum
// computed over the result.
inline std::size_t encode_ipv4(const Ipv4Header& h, std::span<std::uint8_t> out) noexcept {
    if (out.size() < ipv4_header_size) {
        return 0;
    }
    std::uint8_t* p = out.data();
    p[0] = 0x45;
    p[1] = h.tos;
    store_be16(p + 2, h.total_length);
    store_be16(p + 4, h.identification);
    store_be16(p + 6, 0x4000); // DF
    p[8] = h.ttl;
    p[9] = h.protocol;
    store_be32(p + 12, h.src);
    store_be32(p + 16, h.dst);
    store_be16(p + 10, ipv4_header_checksum(out.first(ipv4_header_size)));
    return ipv4_header_size;
}

// Reads the header only (options are skipped, not interpreted); the caller checks total_length
// against what it holds. The checksum is verified unless verify_checksum is false (a port that
// already checked it in hardware).
inline HeaderError decode_ipv4(std::span<const std::uint8_t> in, Ipv4Header& out,
                               bool verify_checksum = true) noexcept {
    if (in.size() < ipv4_header_size) {
        return HeaderError::too_short;
    }
    const std::uint8_t* p = in.data();
    if ((p[0] >> 4) != 4) {
        return HeaderError::bad_version;
    }
    const std::size_t header_length = std::size_t{p[0] & 0x0fU} * 4;
    if (header_length < ipv4_header_size || header_length > in.size()) {
        return HeaderError::bad_header_length;
    }
    out.header_length = static_cast<std::uint8_t>(header_length);
    out.tos = p[1];
    out.total_length = load_be16(p + 2);
    out.identification = load_be16(p + 4);
    const std::uint16_t flags_offset = load_be16(p + 6);
    out.dont_fragment = (flags_offset & 0x4000U) != 0;
    out.more_fragments = (flags_offset & 0x2000U) != 0;
    out.fragment_offset = flags_offset & 0x1fffU;
    out.ttl = p[8];
    out.protocol = p[9];
    out.checksum = load_be16(p + 10);
    out.src = load_be32(p + 12);
    out.dst = load_be32(p + 16);
    if (verify_checksum && ipv4_header_checksum(in.first(header_length)) != out.checksum) {
        return HeaderError::bad_checksum;
    }
    if (out.total_length < header_length) {
        return HeaderError::bad_length;
    }
    return HeaderError::ok;
}

// ---- IPv6 (RFC 8200) ----------------------------------------------------------------------------

using Ipv6Address = std::array<std::uint8_t, 16>;

struct Ipv6Header {
    std::uint8_t traffic_class = 0; // DSCP | ECN, as IPv4's TOS
    std::uint32_t flow_label = 0;   // 20 bits
    std::uint16_t payload_length = 0;
    std::uint8_t next_header = ip_protocol_udp;
    std::uint8_t hop_limit = default_ttl;
    Ipv6Address src{};
    Ipv6Address dst{};

    friend constexpr bool operator==(const Ipv6Header&, const Ipv6Header&) = default;
};

inline std::size_t encode_ipv6(const Ipv6Header& h, std::span<std::uint8_t> out) noexcept {
    if (out.size() < ipv6_header_size) {
        return 0;
    }
    std::uint8_t* p = out.data();
    store_be32(p, (std::uint32_t{6} << 28) | (std::uint32_t{h.traffic_class} << 20) |
                      (h.flow_label & 0xfffffU));
    store_be16(p + 4, h.payload_length);
    p[6] = h.next_header;
    p[7] = h.hop_limit;
    for (std::size_t i = 0; i < h.src.size(); ++i) {
        p[8 + i] = h.src[i];
        p[24 + i] = h.dst[i];
    }
    return ipv6_header_size;
}

// Reads the fixed header; extension headers are not followed (next_header tells the caller).
inline HeaderError decode_ipv6(std::span<const std::uint8_t> in, Ipv6Header& out) noexcept {
    if (in.size() < ipv6_header_size) {
        return HeaderError::too_short;
    }
    const std::uint8_t* p = in.data();
    const std::uint32_t word = load_be32(p);
    if ((word >> 28) != 6) {
        return HeaderError::bad_version;
    }
    out.traffic_class = static_cast<std::uint8_t>(word >> 20);
    out.flow_label = word & 0xfffffU;
    out.payload_length = load_be16(p + 4);
    out.next_header = p[6];
    out.hop_limit = p[7];
    for (std::size_t i = 0; i < out.src.size(); ++i) {
        out.src[i] = p[8 + i];
        out.dst[i] = p[24 + i];
    }
    return HeaderError::ok;
}

// ---- UDP (RFC 768) ------------------------------------------------------------------------------

struct UdpHeader {
    std::uint16_t src_port = 0; // per-QP entropy for ECMP
    std::uint16_t dst_port = roce_udp_port;
    std::uint16_t length = 0;   // header + payload
    std::uint16_t checksum = 0; // decode: as carried; encode writes 0 (see encode_udp)

    friend constexpr bool operator==(const UdpHeader&, const UdpHeader&) = default;
};

// Always writes checksum 0. Over IPv4 that means "no checksum" (RFC 768). Over IPv6, RFC 8200
// requires a UDP checksum, but IBTA Annex A17 (RoCEv2) lets the sender put 0 there and has the
// receiver ignore the field: the ICRC covers the datagram end to end, and the field is one of
// the ones the ICRC masks. Linux rxe and RoCE NICs send 0 over both, and so does prdma.
inline std::size_t encode_udp(const UdpHeader& h, std::span<std::uint8_t> out) noexcept {
    if (out.size() < udp_header_size) {
        return 0;
    }
    std::uint8_t* p = out.data();
    store_be16(p, h.src_port);
    store_be16(p + 2, h.dst_port);
    store_be16(p + 4, h.length);
    store_be16(p + 6, 0);
    return udp_header_size;
}

inline HeaderError decode_udp(std::span<const std::uint8_t> in, UdpHeader& out) noexcept {
    if (in.size() < udp_header_size) {
        return HeaderError::too_short;
    }
    const std::uint8_t* p = in.data();
    out.src_port = load_be16(p);
    out.dst_port = load_be16(p + 2);
    out.length = load_be16(p + 4);
    out.checksum = load_be16(p + 6);
    if (out.length < udp_header_size) {
        return HeaderError::bad_length;
    }
    return HeaderError::ok;
}

// ---- BTH: Base Transport Header (IBTA 9.2), 12 bytes --------------------------------------------
//
//   byte 0      OpCode
//   byte 1      SE (bit 7) | M (bit 6) | PadCnt (bits 5-4) | TVer (bits 3-0)
//   bytes 2-3   P_Key
//   byte 4      FECN (bit 7) | BECN (bit 6) | reserved (bits 5-0)   <- masked by the ICRC
//   bytes 5-7   DestQP
//   byte 8      AckReq (bit 7) | reserved (bits 6-0)
//   bytes 9-11  PSN
//
// Reserved bits are written as zero and ignored on decode.

struct Bth {
    Opcode opcode{};
    bool solicited = false;     // SE
    bool migreq = false;        // M
    std::uint8_t pad_count = 0; // 0-3 bytes of pad before the ICRC
    std::uint8_t tver = 0;      // transport header version: 0
    std::uint16_t pkey = default_pkey;
    bool fecn = false;
    bool becn = false;
    std::uint32_t dest_qp = 0; // 24 bits
    bool ack_req = false;
    std::uint32_t psn = 0; // 24 bits

    friend constexpr bool operator==(const Bth&, const Bth&) = default;
};

inline std::size_t encode_bth(const Bth& h, std::span<std::uint8_t> out) noexcept {
    if (out.size() < bth_size) {
        return 0;
    }
    // Three whole words: byte stores of bit fields are not merged into one store by the
    // compiler, and this runs for every frame sent.
    std::uint8_t* p = out.data();
    const std::uint32_t flags = (h.solicited ? 0x80U : 0U) | (h.migreq ? 0x40U : 0U) |
                                ((h.pad_count & 0x3U) << 4) | (h.tver & 0x0fU);
    store_be32(p, (static_cast<std::uint32_t>(h.opcode) << 24) | (flags << 16) | h.pkey);
    store_be32(p + 4,
               (h.fecn ? 0x80000000U : 0U) | (h.becn ? 0x40000000U : 0U) | (h.dest_qp & qpn_mask));
    store_be32(p + 8, (h.ack_req ? 0x80000000U : 0U) | (h.psn & qpn_mask));
    return bth_size;
}

inline HeaderError decode_bth(std::span<const std::uint8_t> in, Bth& out) noexcept {
    if (in.size() < bth_size) {
        return HeaderError::too_short;
    }
    const std::uint8_t* p = in.data();
    out.opcode = static_cast<Opcode>(p[0]);
    out.solicited = (p[1] & 0x80U) != 0;
    out.migreq = (p[1] & 0x40U) != 0;
    out.pad_count = static_cast<std::uint8_t>((p[1] >> 4) & 0x3U);
    out.tver = p[1] & 0x0fU;
    out.pkey = load_be16(p + 2);
    out.fecn = (p[4] & 0x80U) != 0;
    out.becn = (p[4] & 0x40U) != 0;
    // The 24-bit fields as the low bits of their whole words: one load each, not three.
    out.dest_qp = load_be32(p + 4) & 0xffffffU;
    const std::uint32_t psn_word = load_be32(p + 8);
    out.ack_req = (psn_word & 0x80000000U) != 0;
    out.psn = psn_word & 0xffffffU;
    return HeaderError::ok;
}

// ---- RETH: RDMA Extended Transport Header (IBTA 9.3.3), 16 bytes --------------------------------

struct Reth {
    std::uint64_t va = 0;
    std::uint32_t rkey = 0;
    std::uint32_t dma_length = 0; // of the whole message, not of this packet

    friend constexpr bool operator==(const Reth&, const Reth&) = default;
};

inline std::size_t encode_reth(const Reth& h, std::span<std::uint8_t> out) noexcept {
    if (out.size() < reth_size) {
        return 0;
    }
    store_be64(out.data(), h.va);
    store_be32(out.data() + 8, h.rkey);
    store_be32(out.data() + 12, h.dma_length);
    return reth_size;
}

inline HeaderError decode_reth(std::span<const std::uint8_t> in, Reth& out) noexcept {
    if (in.size() < reth_size) {
        return HeaderError::too_short;
    }
    out.va = load_be64(in.data());
    out.rkey = load_be32(in.data() + 8);
    out.dma_length = load_be32(in.data() + 12);
    return HeaderError::ok;
}

// ---- AETH: ACK Extended Transport Header (IBTA 9.3.5), 4 bytes ----------------------------------
//
// Syndrome byte: reserved (bit 7) | type (bits 6-5) | value (bits 4-0), then a 24-bit MSN.
//   type 00 ACK:      value = credit count (31: credits not given, what rxe sends)
//   type 01 RNR NAK:  value = RNR timer code (rnr_timer_ns)
//   type 10           reserved
//   type 11 NAK:      value = NAK code (NakCode)

struct Aeth {
    std::uint8_t syndrome = 0;
    std::uint32_t msn = 0; // 24 bits

    friend constexpr bool operator==(const Aeth&, const Aeth&) = default;
};

enum class AckType : std::uint8_t { ack = 0, rnr_nak = 1, reserved = 2, nak = 3 };

enum class NakCode : std::uint8_t {
    psn_sequence_error = 0,
    invalid_request = 1,
    remote_access_error = 2,
    remote_operational_error = 3,
    invalid_rd_request = 4,
};

// What a syndrome says, with every NAK code its own value.
enum class AethClass : std::uint8_t {
    ack,
    rnr_nak,
    nak_psn_sequence_error,
    nak_invalid_request,
    nak_remote_access_error,
    nak_remote_operational_error,
    nak_invalid_rd_request,
    nak_reserved_code, // a NAK with a code 5-31
    reserved_type,     // syndrome type 10
};
std::string_view aeth_class_name(AethClass c) noexcept;

inline constexpr std::uint8_t aeth_credits_invalid = 31;

constexpr AckType aeth_type(std::uint8_t syndrome) noexcept {
    return static_cast<AckType>((syndrome >> 5) & 0x3U);
}
// Credit count, RNR timer code or NAK code, by type.
constexpr std::uint8_t aeth_value(std::uint8_t syndrome) noexcept {
    return syndrome & 0x1fU;
}
constexpr std::uint8_t ack_syndrome(std::uint8_t credit_count = aeth_credits_invalid) noexcept {
    return credit_count & 0x1fU;
}
constexpr std::uint8_t rnr_nak_syndrome(std::uint8_t timer_code) noexcept {
    return static_cast<std::uint8_t>(0x20U | (timer_code & 0x1fU));
}
constexpr std::uint8_t nak_syndrome(NakCode code) noexcept {
    return static_cast<std::uint8_t>(0x60U | (static_cast<std::uint8_t>(code) & 0x1fU));
}

constexpr AethClass classify_aeth(std::uint8_t syndrome) noexcept {
    switch (aeth_type(syndrome)) {
    case AckType::ack:
        return AethClass::ack;
    case AckType::rnr_nak:
        return AethClass::rnr_nak;
    case AckType::reserved:
        return AethClass::reserved_type;
    case AckType::nak:
        break;
    }
    switch (aeth_value(syndrome)) {
    case 0:
        return AethClass::nak_psn_sequence_error;
    case 1:
        return AethClass::nak_invalid_request;
    case 2:
        return AethClass::nak_remote_access_error;
    case 3:
        return AethClass::nak_remote_operational_error;
    case 4:
        return AethClass::nak_invalid_rd_request;
    default:
        return AethClass::nak_reserved_code;
    }
}

// The minimum RNR NAK timer (IBTA table "Encoding for RNR NAK Timer Field"), in nanoseconds:
// code 0 is the longest, 655.36 ms; codes 1-31 run from 0.01 ms to 491.52 ms.
constexpr std::uint64_t rnr_timer_ns(std::uint8_t timer_code) noexcept {
    constexpr std::array<std::uint32_t, 32> microseconds = {
        655360, 10,    20,    30,    40,    60,     80,     120,    160,    240,    320,
        480,    640,   960,   1280,  1920,  2560,   3840,   5120,   7680,   10240,  15360,
        20480,  30720, 40960, 61440, 81920, 122880, 163840, 245760, 327680, 491520,
    };
    return std::uint64_t{microseconds[timer_code & 0x1fU]} * 1000;
}

inline std::size_t encode_aeth(const Aeth& h, std::span<std::uint8_t> out) noexcept {
    if (out.size() < aeth_size) {
        return 0;
    }
    out[0] = h.syndrome;
    store_be24(out.data() + 1, h.msn);
    return aeth_size;
}

inline HeaderError decode_aeth(std::span<const std::uint8_t> in, Aeth& out) noexcept {
    if (in.size() < aeth_size) {
        return HeaderError::too_short;
    }
    out.syndrome = in[0];
    out.msn = load_be24(in.data() + 1);
    return HeaderError::ok;
}

// ---- AtomicETH (IBTA 9.3.4), 28 bytes -----------------------------------------------------------

struct AtomicEth {
    std::uint64_t va = 0;
    std::uint32_t rkey = 0;
    std::uint64_t swap_add = 0; // swap value (COMPARE_SWAP) or addend (FETCH_ADD)
    std::uint64_t compare = 0;  // COMPARE_SWAP only

    friend constexpr bool operator==(const AtomicEth&, const AtomicEth&) = default;
};

inline std::size_t encode_atomic_eth(const AtomicEth& h, std::span<std::uint8_t> out) noexcept {
    if (out.size() < atomic_eth_size) {
        return 0;
    }
    store_be64(out.data(), h.va);
    store_be32(out.data() + 8, h.rkey);
    store_be64(out.data() + 12, h.swap_add);
    store_be64(out.data() + 20, h.compare);
    return atomic_eth_size;
}

inline HeaderError decode_atomic_eth(std::span<const std::uint8_t> in, AtomicEth& out) noexcept {
    if (in.size() < atomic_eth_size) {
        return HeaderError::too_short;
    }
    out.va = load_be64(in.data());
    out.rkey = load_be32(in.data() + 8);
    out.swap_add = load_be64(in.data() + 12);
    out.compare = load_be64(in.data() + 20);
    return HeaderError::ok;
}

// ---- AtomicAckETH (IBTA 9.3.6), 8 bytes ---------------------------------------------------------

struct AtomicAckEth {
    std::uint64_t original_data = 0; // the remote value before the atomic

    friend constexpr bool operator==(const AtomicAckEth&, const AtomicAckEth&) = default;
};

inline std::size_t encode_atomic_ack_eth(const AtomicAckEth& h,
                                         std::span<std::uint8_t> out) noexcept {
    if (out.size() < atomic_ack_eth_size) {
        return 0;
    }
    store_be64(out.data(), h.original_data);
    return atomic_ack_eth_size;
}

inline HeaderError decode_atomic_ack_eth(std::span<const std::uint8_t> in,
                                         AtomicAckEth& out) noexcept {
    if (in.size() < atomic_ack_eth_size) {
        return HeaderError::too_short;
    }
    out.original_data = load_be64(in.data());
    return HeaderError::ok;
}

// ---- ImmDt (IBTA 9.3.7) and IETH (9.3.8), 4 bytes each ------------------------------------------
//
// The immediate value is opaque to the transport: it is carried big-endian as the consumer gave
// it (ibv_wc.imm_data is in network order), so it is read and written as a big-endian number.

inline std::size_t encode_immdt(std::uint32_t immediate, std::span<std::uint8_t> out) noexcept {
    if (out.size() < immdt_size) {
        return 0;
    }
    store_be32(out.data(), immediate);
    return immdt_size;
}

inline HeaderError decode_immdt(std::span<const std::uint8_t> in, std::uint32_t& out) noexcept {
    if (in.size() < immdt_size) {
        return HeaderError::too_short;
    }
    out = load_be32(in.data());
    return HeaderError::ok;
}

// IETH carries the R_Key a SEND_WITH_INVALIDATE invalidates at the responder.
inline std::size_t encode_ieth(std::uint32_t rkey, std::span<std::uint8_t> out) noexcept {
    if (out.size() < ieth_size) {
        return 0;
    }
    store_be32(out.data(), rkey);
    return ieth_size;
}

inline HeaderError decode_ieth(std::span<const std::uint8_t> in, std::uint32_t& rkey) noexcept {
    if (in.size() < ieth_size) {
        return HeaderError::too_short;
    }
    rkey = load_be32(in.data());
    return HeaderError::ok;
}

// ---- DETH: Datagram Extended Transport Header (IBTA 9.3.2), 8 bytes -----------------------------
//
//   bytes 0-3 Q_Key | byte 4 reserved | bytes 5-7 source QP

struct Deth {
    std::uint32_t qkey = 0; // QP1 (GSI) uses the well-known 0x80010000
    std::uint32_t src_qp = 0;

    friend constexpr bool operator==(const Deth&, const Deth&) = default;
};

inline constexpr std::uint32_t gsi_qkey = 0x80010000;

inline std::size_t encode_deth(const Deth& h, std::span<std::uint8_t> out) noexcept {
    if (out.size() < deth_size) {
        return 0;
    }
    store_be32(out.data(), h.qkey);
    out[4] = 0;
    store_be24(out.data() + 5, h.src_qp);
    return deth_size;
}

inline HeaderError decode_deth(std::span<const std::uint8_t> in, Deth& out) noexcept {
    if (in.size() < deth_size) {
        return HeaderError::too_short;
    }
    out.qkey = load_be32(in.data());
    out.src_qp = load_be24(in.data() + 5);
    return HeaderError::ok;
}

} // namespace prdma::roce
