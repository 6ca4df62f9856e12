// Whole RoCEv2 frames: a parser from an Ethernet frame to every header field, the payload and
// the ICRC, and a builder that writes Ethernet / IP / UDP / BTH / extension headers for an
// opcode into a caller's buffer and, once the payload is in place, the pad and the ICRC.
//
//   Ethernet [802.1Q] | IPv4 or IPv6 | UDP (dst 4791) | BTH | ext headers | payload | pad | ICRC
//
// Pure functions on byte spans (an mbuf's data, a capture, a test buffer): no I/O, no
// allocation, no exceptions. The frame may carry bytes after the IP datagram (Ethernet padding
// of short frames, an FCS): the IP length says where the RoCE packet ends, not the frame length.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include <prdma/roce/headers.hpp>
#include <prdma/roce/icrc.hpp>
#include <prdma/roce/opcodes.hpp>

namespace prdma::roce {

enum class IpVersion : std::uint8_t { ipv4 = 4, ipv6 = 6 };

// Why a frame is not a usable RoCEv2 packet, in the order the parser checks; each one is its own
// value so the engine can count drops by cause.
enum class ParseError : std::uint8_t {
    ok = 0,
    eth_too_short,          // shorter than an Ethernet header, or than its 802.1Q tag
    not_ip,                 // EtherType is neither IPv4 nor IPv6
    ip_too_short,           // shorter than the fixed IPv4 (20) or IPv6 (40) header
    bad_ip_version,         // the version nibble disagrees with the EtherType
    bad_ipv4_header_length, // IHL below 5, or options running past the frame
    bad_ipv4_checksum,      // IPv4 header checksum does not verify
    bad_ip_length,          // IP total / payload length below the header or past the frame
    ip_fragment,            // MF set or a fragment offset: RoCEv2 is never fragmented
    not_udp,                // IP protocol / next header is not UDP (IPv6 extension headers too)
    udp_too_short,          // IP payload shorter than a UDP header
    bad_udp_length,         // UDP length below 8 or different from the IP payload length
    wrong_udp_port,         // UDP destination port is not 4791
    bth_too_short,          // UDP payload shorter than BTH + ICRC
    unsupported_tver,       // BTH transport header version is not 0
    unknown_opcode,         // not in opcodes.hpp's table
    headers_too_short,      // UDP payload shorter than BTH + the opcode's extension headers + ICRC
    pad_exceeds_payload,    // BTH pad count larger than the bytes between headers and ICRC
    unexpected_payload,     // bytes after the headers of an opcode that carries no payload
    bad_icrc,               // the ICRC does not verify
};
std::string_view parse_error_name(ParseError error) noexcept;

struct ParseOptions {
    bool verify_ipv4_checksum = true; // off when the port already checked it (RX offload flag)
    bool verify_icrc = true;
    CrcPath crc_path = CrcPath::automatic;
    // What a transport engine reads, no more: on a frame of the common shape (parse_roce_frame)
    // only ip_version, the IP source, the BTH, the opcode's extension headers, the offsets, the
    // datagram and payload spans and the ICRC are filled; eth, udp and the other IP fields are
    // left as they were. Every check is made all the same.
    bool transport_fields_only = false;
};

// Everything a frame says. On an error, the layers before the failing one are filled in and the
// rest are unspecified. The spans point into the parsed frame.
struct ParsedFrame {
    ParseError error = ParseError::ok;
    EthernetHeader eth{};
    IpVersion ip_version = IpVersion::ipv4;
    Ipv4Header ipv4{}; // when ip_version is ipv4
    Ipv6Header ipv6{}; // when ip_version is ipv6
    UdpHeader udp{};
    Bth bth{};
    const OpcodeInfo* info = nullptr; // the opcode's table entry, once known
    // Extension headers: each is valid when info->has(its ExtHeader).
    Reth reth{};
    Aeth aeth{};
    AtomicEth atomic_eth{};
    AtomicAckEth atomic_ack_eth{};
    Deth deth{};
    std::uint32_t immediate = 0;       // ImmDt
    std::uint32_t invalidate_rkey = 0; // IETH
    // Offsets into the frame.
    std::uint16_t ip_offset = 0;
    std::uint16_t udp_offset = 0;
    std::uint16_t bth_offset = 0;
    std::uint16_t payload_offset = 0;
    std::span<const std::uint8_t> ip_datagram{}; // IP header through ICRC (what the ICRC covers)
    std::span<const std::uint8_t> payload{};     // without pad and ICRC
    std::uint32_t icrc = 0;                      // as carried

    [[nodiscard]] bool ok() const noexcept { return error == ParseError::ok; }
    [[nodiscard]] Opcode opcode() const noexcept { return bth.opcode; }
    [[nodiscard]] bool has(ExtHeader h) const noexcept { return info != nullptr && info->has(h); }
};

// Parses an Ethernet frame (no FCS expected, trailing bytes ignored). Returns out.error. The
// common shape (no VLAN tag, IPv4 without options or IPv6, a known opcode, a good ICRC) is read at
// fixed offsets; every other frame, and every one that fails a check, goes to
// parse_roce_frame_full, so the answer is the same for every frame.
ParseError parse_roce_frame(std::span<const std::uint8_t> frame, ParsedFrame& out,
                            const ParseOptions& options = {}) noexcept;
// The full parser alone: every shape, each check in order, the first failure named.
ParseError parse_roce_frame_full(std::span<const std::uint8_t> frame, ParsedFrame& out,
                                 const ParseOptions& options = {}) noexcept;

inline ParsedFrame parse_roce_frame(std::span<const std::uint8_t> frame,
                                    const ParseOptions& options = {}) noexcept {
    ParsedFrame parsed;
    parse_roce_frame(frame, parsed, options);
    return parsed;
}

// ---- Builder ------------------------------------------------------------------------------------

// The headers from the BTH on: all that differs between the frames of one QP (a HeaderTemplate
// holds the rest). The extension headers the opcode needs are taken from here; the others are
// ignored.
struct TransportHeaders {
    Bth bth{}; // everything but pad_count used
    Reth reth{};
    Aeth aeth{};
    AtomicEth atomic_eth{};
    AtomicAckEth atomic_ack_eth{};
    Deth deth{};
    std::uint32_t immediate = 0;
    std::uint32_t invalidate_rkey = 0;
};

// What the builder writes. Lengths, checksums, the EtherType and the pad count are derived;
// only the fields marked "used" matter.
struct FrameHeaders : TransportHeaders {
    EthernetHeader eth{};                   // dst, src, vlan, vlan_tci used
    IpVersion ip_version = IpVersion::ipv4; // picks ipv4 or ipv6 below
    Ipv4Header ipv4{};                      // tos, identification, ttl, src, dst used
    Ipv6Header ipv6{};                      // traffic_class, flow_label, hop_limit, src, dst used
    std::uint16_t udp_src_port = 0xc000;    // per-QP entropy; destination 4791, checksum 0
};

enum class BuildError : std::uint8_t {
    ok = 0,
    unknown_opcode,      // bth.opcode is not in the table
    payload_not_allowed, // a payload for an opcode that carries none
    too_long,            // the IP datagram would exceed 65535 bytes
    buffer_too_small,    // `out` is shorter than wire_length
};
std::string_view build_error_name(BuildError error) noexcept;

// Where build_frame_headers put things, for the caller and for finalize_frame.
struct FrameLayout {
    BuildError error = BuildError::ok;
    std::uint16_t ip_offset = 0;
    std::uint16_t payload_offset = 0; // the caller writes payload_length bytes here
    std::uint32_t payload_length = 0;
    std::uint8_t pad_count = 0;
    std::uint32_t frame_length = 0; // Ethernet header through ICRC
    std::uint32_t wire_length = 0;  // frame_length padded with zeros to 60 bytes if shorter

    [[nodiscard]] bool ok() const noexcept { return error == BuildError::ok; }
};

// Writes every header for h.bth.opcode and a payload of payload_length bytes into `out`
// (at least wire_length bytes), with the BTH pad count, IP/UDP lengths and the IPv4 checksum
// filled in. Leaves the payload, pad, ICRC and Ethernet padding to the caller and
// finalize_frame. On an error nothing is written.
FrameLayout build_frame_headers(const FrameHeaders& h, std::uint32_t payload_length,
                                std::span<std::uint8_t> out) noexcept;

// A QP's frames differ from one another only from the BTH on (and in the IP and UDP lengths and
// the IPv4 checksum that follow from the length): the Ethernet, IP and UDP headers are encoded
// once here and copied per frame, the checksum patched from a sum kept without the length.
class HeaderTemplate {
public:
    // The Ethernet, IP and UDP headers of the frames `h` describes (its BTH and extension headers
    // are not kept).
    [[nodiscard]] static HeaderTemplate make(const FrameHeaders& h) noexcept;
    // Byte for byte what build_frame_headers(h, payload_length, out) writes when `h` has the
    // Ethernet, IP and UDP fields this template was made from; the BTH and extension headers
    // come from `h`, everything before them from the template.
    FrameLayout build(const TransportHeaders& h, std::uint32_t payload_length,
                      std::span<std::uint8_t> out) const noexcept;
    [[nodiscard]] bool ipv4() const noexcept { return ipv4_; }
    // The IP length (and an IPv4 header's checksum) and the UDP length of a frame whose headers
    // came from this template, for an IP datagram of `ip_length` bytes: what build() derives.
    void set_lengths(std::span<std::uint8_t> frame, std::uint32_t ip_length) const noexcept;

private:
    std::array<std::uint8_t, 18 + 40 + 8> bytes_{}; // Ethernet (a VLAN tag at most), IP, UDP
    std::uint32_t ipv4_partial_sum_ = 0;
    std::uint8_t eth_length_ = 0;
    std::uint8_t ip_header_length_ = 0;
    bool ipv4_ = true;
};

// Zero pad bytes after the payload, the ICRC, and zero Ethernet padding up to wire_length: the
// last step once the payload is in place. `frame` is the buffer build_frame_headers wrote.
// Returns false (writing nothing) when the layout is not ok or `frame` is too short.
bool finalize_frame(std::span<std::uint8_t> frame, const FrameLayout& layout,
                    CrcPath path = CrcPath::automatic) noexcept;

// What finalize_frame writes, for a frame whose layout the caller made from a successful build
// of its own (the layout is trusted, not checked) with IPv4 without options (`ipv4`) or IPv6.
void seal_frame(std::span<std::uint8_t> frame, const FrameLayout& layout, bool ipv4) noexcept;

// Headers, a copy of `payload`, and finalize_frame in one call.
FrameLayout build_frame(const FrameHeaders& h, std::span<const std::uint8_t> payload,
                        std::span<std::uint8_t> out, CrcPath path = CrcPath::automatic) noexcept;

// The headers that rebuild a parsed frame byte for byte (given its payload), as far as the
// builder can express it: IPv4 options, reserved bits and a non-zero UDP checksum are not kept.
FrameHeaders frame_headers_of(const ParsedFrame& parsed) noexcept;

// IPv6 requires a UDP checksum (RFC 8200 8.1; tshark flags 0 as illegal) and the ICRC masks it,
// so it is written last, over the finished datagram: call after finalize_frame on an IPv6 frame.
bool set_ipv6_udp_checksum(std::span<std::uint8_t> frame, const FrameLayout& layout) noexcept;

// RFC 8200 8.1: the one's-complement checksum of an upper-layer message (UDP, ICMPv6) carried
// behind `ipv6_header`, with its pseudo-header (the header's addresses, the message's length,
// `next_header`). Over a message whose checksum field is zero it is the value to store; over a
// received message it is 0 when the message verifies.
std::uint16_t ipv6_upper_layer_checksum(const std::uint8_t* ipv6_header,
                                        std::span<const std::uint8_t> message,
                                        std::uint8_t next_header) noexcept;

} // namespace prdma::roce
