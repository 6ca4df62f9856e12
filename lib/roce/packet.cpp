// RoCEv2 frame parser and builder (packet.hpp): one pass over the headers, every length checked
// before the bytes behind it are read.
#include <algorithm>
#include <cstring>

#include <prdma/compiler.hpp>
#include <prdma/roce/packet.hpp>

namespace prdma::roce {
namespace {

ParseError fail(ParsedFrame& out, ParseError error) noexcept {
    out.error = error;
    return error;
}

// The bytes from the IP header on, checked against the IP header's own length. Sets
// ip_header_length and the datagram span, or returns why not.
ParseError parse_ip(std::span<const std::uint8_t> rest, ParsedFrame& out,
                    const ParseOptions& options, std::size_t& ip_header_length) noexcept {
    std::size_t total = 0;
    if (out.eth.ether_type == ethertype_ipv4) {
        out.ip_version = IpVersion::ipv4;
        switch (decode_ipv4(rest, out.ipv4, options.verify_ipv4_checksum)) {
        case HeaderError::ok:
            break;
        case HeaderError::too_short:
            return ParseError::ip_too_short;
        case HeaderError::bad_version:
            return ParseError::bad_ip_version;
        case HeaderError::bad_header_length:
            return ParseError::bad_ipv4_header_length;
        case HeaderError::bad_checksum:
            return ParseError::bad_ipv4_checksum;
        case HeaderError::bad_length:
            return ParseError::bad_ip_length;
        }
        ip_header_length = out.ipv4.header_length;
        total = out.ipv4.total_length;
        if (PRDMA_UNLIKELY(total > rest.size())) {
            return ParseError::bad_ip_length;
        }
        if (PRDMA_UNLIKELY(out.ipv4.more_fragments || out.ipv4.fragment_offset != 0)) {
            return ParseError::ip_fragment;
        }
        if (PRDMA_UNLIKELY(out.ipv4.protocol != ip_protocol_udp)) {
            return ParseError::not_udp;
        }
    } else if (out.eth.ether_type == ethertype_ipv6) {
        out.ip_version = IpVersion::ipv6;
        const HeaderError error = decode_ipv6(rest, out.ipv6);
        if (PRDMA_UNLIKELY(error != HeaderError::ok)) {
            return error == HeaderError::too_short ? ParseError::ip_too_short
                                                   : ParseError::bad_ip_version;
        }
        ip_header_length = ipv6_header_size;
        total = ipv6_header_size + out.ipv6.payload_length;
        if (PRDMA_UNLIKELY(total > rest.size())) {
            return ParseError::bad_ip_length;
        }
        if (PRDMA_UNLIKELY(out.ipv6.next_header != ip_protocol_udp)) {
            return ParseError::not_udp;
        }
    } else {
        return ParseError::not_ip;
    }
    out.ip_datagram = rest.first(total);
    return ParseError::ok;
}

// Inlined into both parsers: as a call it cost ~20 instructions per data frame for a RETH's
// three loads.
[[gnu::always_inline]] inline void
decode_ext_header(ExtHeader kind, std::span<const std::uint8_t> in, ParsedFrame& out) noexcept {
    // Lengths were checked against the opcode's header_length: these cannot fail.
    switch (kind) {
    case ExtHeader::deth:
        decode_deth(in, out.deth);
        break;
    case ExtHeader::reth:
        decode_reth(in, out.reth);
        break;
    case ExtHeader::atomic_eth:
        decode_atomic_eth(in, out.atomic_eth);
        break;
    case ExtHeader::aeth:
        decode_aeth(in, out.aeth);
        break;
    case ExtHeader::atomic_ack_eth:
        decode_atomic_ack_eth(in, out.atomic_ack_eth);
        break;
    case ExtHeader::immdt:
        decode_immdt(in, out.immediate);
        break;
    case ExtHeader::ieth:
        decode_ieth(in, out.invalidate_rkey);
        break;
    }
}

void encode_ext_header(ExtHeader kind, const TransportHeaders& h,
                       std::span<std::uint8_t> out) noexcept {
    switch (kind) {
    case ExtHeader::deth:
        encode_deth(h.deth, out);
        break;
    case ExtHeader::reth:
        encode_reth(h.reth, out);
        break;
    case ExtHeader::atomic_eth:
        encode_atomic_eth(h.atomic_eth, out);
        break;
    case ExtHeader::aeth:
        encode_aeth(h.aeth, out);
        break;
    case ExtHeader::atomic_ack_eth:
        encode_atomic_ack_eth(h.atomic_ack_eth, out);
        break;
    case ExtHeader::immdt:
        encode_immdt(h.immediate, out);
        break;
    case ExtHeader::ieth:
        encode_ieth(h.invalidate_rkey, out);
        break;
    }
}

} // namespace

std::string_view parse_error_name(ParseError error) noexcept {
    switch (error) {
    case ParseError::ok:
        return "ok";
    case ParseError::eth_too_short:
        return "eth_too_short";
    case ParseError::not_ip:
        return "not_ip";
    case ParseError::ip_too_short:
        return "ip_too_short";
    case ParseError::bad_ip_version:
        return "bad_ip_version";
    case ParseError::bad_ipv4_header_length:
        return "bad_ipv4_header_length";
    case ParseError::bad_ipv4_checksum:
        return "bad_ipv4_checksum";
    case ParseError::bad_ip_length:
        return "bad_ip_length";
    case ParseError::ip_fragment:
        return "ip_fragment";
    case ParseError::not_udp:
        return "not_udp";
    case ParseError::udp_too_short:
        return "udp_too_short";
    case ParseError::bad_udp_length:
        return "bad_udp_length";
    case ParseError::wrong_udp_port:
        return "wrong_udp_port";
    case ParseError::bth_too_short:
        return "bth_too_short";
    case ParseError::unsupported_tver:
        return "unsupported_tver";
    case ParseError::unknown_opcode:
        return "unknown_opcode";
    case ParseError::headers_too_short:
        return "headers_too_short";
    case ParseError::pad_exceeds_payload:
        return "pad_exceeds_payload";
    case ParseError::unexpected_payload:
        return "unexpected_payload";
    case ParseError::bad_icrc:
        return "bad_icrc";
    }
    return "unknown";
}

std::string_view build_error_name(BuildError error) noexcept {
    switch (error) {
    case BuildError::ok:
        return "ok";
    case BuildError::unknown_opcode:
        return "unknown_opcode";
    case BuildError::payload_not_allowed:
        return "payload_not_allowed";
    case BuildError::too_long:
        return "too_long";
    case BuildError::buffer_too_small:
        return "buffer_too_small";
    }
    return "unknown";
}

ParseError parse_roce_frame_full(std::span<const std::uint8_t> frame, ParsedFrame& out,
                                 const ParseOptions& options) noexcept {
    out.info = nullptr;
    out.ip_datagram = {};
    out.payload = {};
    if (PRDMA_UNLIKELY(decode_ethernet(frame, out.eth) != HeaderError::ok)) {
        return fail(out, ParseError::eth_too_short);
    }
    const std::size_t ip_offset = out.eth.size();
    out.ip_offset = static_cast<std::uint16_t>(ip_offset);

    std::size_t ip_header_length = 0;
    const ParseError ip_error = parse_ip(frame.subspan(ip_offset), out, options, ip_header_length);
    if (PRDMA_UNLIKELY(ip_error != ParseError::ok)) {
        return fail(out, ip_error);
    }

    const std::size_t udp_offset = ip_offset + ip_header_length;
    out.udp_offset = static_cast<std::uint16_t>(udp_offset);
    const std::span<const std::uint8_t> udp = out.ip_datagram.subspan(ip_header_length);
    const HeaderError udp_error = decode_udp(udp, out.udp);
    if (PRDMA_UNLIKELY(udp_error == HeaderError::too_short)) {
        return fail(out, ParseError::udp_too_short);
    }
    if (PRDMA_UNLIKELY(udp_error != HeaderError::ok || out.udp.length != udp.size())) {
        return fail(out, ParseError::bad_udp_length);
    }
    if (PRDMA_UNLIKELY(out.udp.dst_port != roce_udp_port)) {
        return fail(out, ParseError::wrong_udp_port);
    }

    // BTH through ICRC.
    const std::span<const std::uint8_t> ib = udp.subspan(udp_header_size);
    const std::size_t bth_offset = udp_offset + udp_header_size;
    out.bth_offset = static_cast<std::uint16_t>(bth_offset);
    if (PRDMA_UNLIKELY(ib.size() < bth_size + icrc_size)) {
        return fail(out, ParseError::bth_too_short);
    }
    decode_bth(ib, out.bth);
    if (PRDMA_UNLIKELY(out.bth.tver != 0)) {
        return fail(out, ParseError::unsupported_tver);
    }
    const OpcodeInfo& info = opcode_info(out.bth.opcode);
    if (PRDMA_UNLIKELY(!info.valid())) {
        return fail(out, ParseError::unknown_opcode);
    }
    out.info = &info;
    const std::size_t header_length = info.header_length;
    if (PRDMA_UNLIKELY(ib.size() < header_length + icrc_size)) {
        return fail(out, ParseError::headers_too_short);
    }
    for (std::size_t i = 0; i < info.ext_count; ++i) {
        const ExtHeader kind = info.ext[i];
        decode_ext_header(kind, ib.subspan(info.offset_of(kind)), out);
    }

    const std::size_t after_headers = ib.size() - header_length - icrc_size; // payload + pad
    if (PRDMA_UNLIKELY(out.bth.pad_count > after_headers)) {
        return fail(out, ParseError::pad_exceeds_payload);
    }
    if (PRDMA_UNLIKELY(!info.has_payload && after_headers != 0)) {
        return fail(out, ParseError::unexpected_payload);
    }
    out.payload_offset = static_cast<std::uint16_t>(bth_offset + header_length);
    out.payload = ib.subspan(header_length, after_headers - out.bth.pad_count);
    out.icrc = load_le32(ib.data() + ib.size() - icrc_size);
    if (options.verify_icrc &&
        PRDMA_UNLIKELY(compute_icrc(out.ip_datagram, options.crc_path) != out.icrc)) {
        return fail(out, ParseError::bad_icrc);
    }
    out.error = ParseError::ok;
    return ParseError::ok;
}

namespace {

// The checksum of a 20-byte IPv4 header, as ipv4_header_checksum computes it (the checksum field
// taken as zero), from five 32-bit words.
std::uint16_t ipv4_checksum_fixed(const std::uint8_t* ip) noexcept {
    std::uint64_t sum = std::uint64_t{load_be32(ip)} + load_be32(ip + 4) +
                        (load_be32(ip + 8) & 0xffff0000U) + load_be32(ip + 12) + load_be32(ip + 16);
    sum = (sum & 0xffffffffU) + (sum >> 32);
    sum = (sum & 0xffffU) + (sum >> 16);
    sum = (sum & 0xffffU) + (sum >> 16);
    sum = (sum & 0xffffU) + (sum >> 16);
    return static_cast<std::uint16_t>(~sum);
}

// The ICRC of a datagram of the common shape (IPv4 without options or IPv6, as checked), its
// shape taken from the checks rather than read again.
std::uint32_t common_icrc(std::span<const std::uint8_t> datagram, std::size_t ip_header_length,
                          const ParseOptions& options) noexcept {
    if (options.crc_path != CrcPath::automatic) {
        return compute_icrc(datagram, options.crc_path);
    }
    return compute_built_icrc(datagram, ip_header_length == ipv4_header_size);
}

// The common shape at fixed offsets: Ethernet without a tag, IPv4 without options or IPv6, UDP to
// 4791, BTH version 0 with a known opcode, the ICRC right. It accepts only: a frame of any other
// shape, or one that fails any check, is left to the full parser (false), so both parsers give
// the same answer for every frame (packet_test.cpp compares them field by field).
bool parse_common(std::span<const std::uint8_t> frame, ParsedFrame& out,
                  const ParseOptions& options) noexcept {
    constexpr std::size_t smallest =
        ethernet_header_size + ipv4_header_size + udp_header_size + bth_size + icrc_size;
    const std::size_t n = frame.size();
    const std::uint8_t* p = frame.data();
    if (PRDMA_UNLIKELY(n < smallest)) {
        return false;
    }
    const std::uint16_t type = load_be16(p + 12);
    const std::uint8_t* ip = p + ethernet_header_size;
    std::size_t ip_header_length = ipv4_header_size;
    std::size_t total = 0;
    if (PRDMA_LIKELY(type == ethertype_ipv4)) {
        total = load_be16(ip + 2);
        if (ip[0] != 0x45 || ip[9] != ip_protocol_udp || (load_be16(ip + 6) & 0x3fffU) != 0 ||
            total > n - ethernet_header_size || total < smallest - ethernet_header_size ||
            (options.verify_ipv4_checksum && ipv4_checksum_fixed(ip) != load_be16(ip + 10))) {
            return false;
        }
    } else if (type == ethertype_ipv6) {
        ip_header_length = ipv6_header_size;
        total = ipv6_header_size + load_be16(ip + 4);
        if (n < ethernet_header_size + ipv6_header_size + udp_header_size + bth_size + icrc_size ||
            (ip[0] >> 4) != 6 || ip[6] != ip_protocol_udp || total > n - ethernet_header_size ||
            total < ipv6_header_size + udp_header_size + bth_size + icrc_size) {
            return false;
        }
    } else {
        return false;
    }
    const std::uint8_t* udp = ip + ip_header_length;
    const std::size_t ib_size = total - ip_header_length - udp_header_size;
    const std::uint8_t* ib = udp + udp_header_size;
    const OpcodeInfo& info = opcode_info(static_cast<Opcode>(ib[0]));
    const std::size_t pad = (ib[1] >> 4) & 0x3U;
    if (load_be16(udp + 2) != roce_udp_port || load_be16(udp + 4) != total - ip_header_length ||
        (ib[1] & 0x0fU) != 0 || !info.valid() || ib_size < info.header_length + icrc_size) {
        return false;
    }
    const std::size_t after_headers = ib_size - info.header_length - icrc_size;
    const std::uint32_t icrc = load_le32(ib + ib_size - icrc_size);
    if (pad > after_headers || (!info.has_payload && after_headers != 0) ||
        (options.verify_icrc && common_icrc({ip, total}, ip_header_length, options) != icrc)) {
        return false;
    }
    // Accepted: every field, as the full parser fills it, or what a transport reads.
    const bool ipv4 = ip_header_length == ipv4_header_size;
    out.ip_version = ipv4 ? IpVersion::ipv4 : IpVersion::ipv6;
    if (options.transport_fields_only) {
        if (ipv4) {
            out.ipv4.src = load_be32(ip + 12);
        } else {
            std::copy(ip + 8, ip + 24, out.ipv6.src.begin());
        }
    } else {
        decode_ethernet(frame, out.eth);
        if (ipv4) {
            (void)decode_ipv4({ip, ipv4_header_size}, out.ipv4, false);
        } else {
            (void)decode_ipv6({ip, ipv6_header_size}, out.ipv6);
        }
        (void)decode_udp({udp, udp_header_size}, out.udp);
    }
    (void)decode_bth({ib, bth_size}, out.bth);
    out.info = &info;
    for (std::size_t i = 0; i < info.ext_count; ++i) {
        const ExtHeader kind = info.ext[i];
        decode_ext_header(kind, {ib + info.offset_of(kind), ib_size - info.offset_of(kind)}, out);
    }
    out.ip_offset = ethernet_header_size;
    out.udp_offset = static_cast<std::uint16_t>(ethernet_header_size + ip_header_length);
    out.bth_offset = static_cast<std::uint16_t>(out.udp_offset + udp_header_size);
    out.payload_offset = static_cast<std::uint16_t>(out.bth_offset + info.header_length);
    out.ip_datagram = {ip, total};
    out.payload = {ib + info.header_length, after_headers - pad};
    out.icrc = icrc;
    out.error = ParseError::ok;
    return true;
}

} // namespace

ParseError parse_roce_frame(std::span<const std::uint8_t> frame, ParsedFrame& out,
                            const ParseOptions& options) noexcept {
    if (PRDMA_LIKELY(parse_common(frame, out, options))) {
        return ParseError::ok;
    }
    return parse_roce_frame_full(frame, out, options);
}

namespace {

// The lengths and offsets of a frame for `info` and `payload_length` behind `eth_length` bytes of
// Ethernet header, or why there is none. Writes nothing.
FrameLayout plan_frame(const OpcodeInfo& info, bool ipv4, std::size_t eth_length,
                       std::uint32_t payload_length, std::size_t room) noexcept {
    FrameLayout layout;
    if (PRDMA_UNLIKELY(!info.valid())) {
        layout.error = BuildError::unknown_opcode;
        return layout;
    }
    if (PRDMA_UNLIKELY(!info.has_payload && payload_length != 0)) {
        layout.error = BuildError::payload_not_allowed;
        return layout;
    }
    const auto pad = static_cast<std::uint8_t>((0U - payload_length) & 0x3U);
    const std::size_t ip_header_length = ipv4 ? ipv4_header_size : ipv6_header_size;
    const std::uint64_t udp_length =
        udp_header_size + info.header_length + std::uint64_t{payload_length} + pad + icrc_size;
    const std::uint64_t ip_length = ip_header_length + udp_length;
    if (PRDMA_UNLIKELY((ipv4 ? ip_length : udp_length) > 0xffff)) {
        layout.error = BuildError::too_long;
        return layout;
    }
    const auto frame_length = static_cast<std::uint32_t>(eth_length + ip_length);
    const auto wire_length =
        std::max(frame_length, static_cast<std::uint32_t>(ethernet_min_frame_size));
    if (PRDMA_UNLIKELY(room < wire_length)) {
        layout.error = BuildError::buffer_too_small;
        return layout;
    }
    layout.ip_offset = static_cast<std::uint16_t>(eth_length);
    layout.payload_offset = static_cast<std::uint16_t>(eth_length + ip_header_length +
                                                       udp_header_size + info.header_length);
    layout.payload_length = payload_length;
    layout.pad_count = pad;
    layout.frame_length = frame_length;
    layout.wire_length = wire_length;
    return layout;
}

// The BTH (with the layout's pad count) and the extension headers the opcode carries, at `ib`.
void encode_ib_headers(const TransportHeaders& h, const OpcodeInfo& info, const FrameLayout& layout,
                       std::span<std::uint8_t> ib) noexcept {
    Bth bth = h.bth;
    bth.pad_count = layout.pad_count;
    encode_bth(bth, ib);
    for (std::size_t i = 0; i < info.ext_count; ++i) {
        const ExtHeader kind = info.ext[i];
        encode_ext_header(kind, h, ib.subspan(info.offset_of(kind)));
    }
}

std::uint16_t ip_header_length_of(const FrameLayout& layout, const OpcodeInfo& info) noexcept {
    return static_cast<std::uint16_t>(layout.payload_offset - layout.ip_offset - udp_header_size -
                                      info.header_length);
}

} // namespace

FrameLayout build_frame_headers(const FrameHeaders& h, std::uint32_t payload_length,
                                std::span<std::uint8_t> out) noexcept {
    const OpcodeInfo& info = opcode_info(h.bth.opcode);
    const bool ipv4 = h.ip_version == IpVersion::ipv4;
    const FrameLayout layout = plan_frame(info, ipv4, h.eth.size(), payload_length, out.size());
    if (!layout.ok()) {
        return layout;
    }
    const std::uint16_t ip_header_length = ip_header_length_of(layout, info);
    const std::uint32_t ip_length = layout.frame_length - layout.ip_offset;
    const auto udp_length = static_cast<std::uint16_t>(ip_length - ip_header_length);
    EthernetHeader eth = h.eth;
    eth.ether_type = ipv4 ? ethertype_ipv4 : ethertype_ipv6;
    encode_ethernet(eth, out);
    const std::span<std::uint8_t> ip = out.subspan(layout.ip_offset);
    if (ipv4) {
        Ipv4Header ip4 = h.ipv4;
        ip4.total_length = static_cast<std::uint16_t>(ip_length);
        ip4.protocol = ip_protocol_udp;
        encode_ipv4(ip4, ip);
    } else {
        Ipv6Header ip6 = h.ipv6;
        ip6.payload_length = udp_length;
        ip6.next_header = ip_protocol_udp;
        encode_ipv6(ip6, ip);
    }
    encode_udp({h.udp_src_port, roce_udp_port, udp_length, 0}, ip.subspan(ip_header_length));
    encode_ib_headers(h, info, layout, ip.subspan(ip_header_length + udp_header_size));
    return layout;
}

HeaderTemplate HeaderTemplate::make(const FrameHeaders& h) noexcept {
    HeaderTemplate t;
    FrameHeaders base = h;
    base.bth.opcode = Opcode::rc_acknowledge; // any valid opcode: only eth/IP/UDP are kept
    std::array<std::uint8_t, 128> frame{};
    const FrameLayout layout = build_frame_headers(base, 0, frame);
    t.ipv4_ = h.ip_version == IpVersion::ipv4;
    t.eth_length_ = static_cast<std::uint8_t>(layout.ip_offset);
    t.ip_header_length_ = t.ipv4_ ? ipv4_header_size : ipv6_header_size;
    const std::size_t length = t.eth_length_ + t.ip_header_length_ + udp_header_size;
    std::copy(frame.begin(), frame.begin() + static_cast<std::ptrdiff_t>(length), t.bytes_.begin());
    if (t.ipv4_) {
        // The header's sum without its length and checksum: each frame adds its own length.
        std::uint8_t* ip = t.bytes_.data() + t.eth_length_;
        store_be16(ip + 2, 0);
        store_be16(ip + 10, 0);
        for (std::size_t i = 0; i < ipv4_header_size; i += 2) {
            t.ipv4_partial_sum_ += load_be16(ip + i);
        }
    }
    return t;
}

FrameLayout HeaderTemplate::build(const TransportHeaders& h, std::uint32_t payload_length,
                                  std::span<std::uint8_t> out) const noexcept {
    const OpcodeInfo& info = opcode_info(h.bth.opcode);
    const FrameLayout layout = plan_frame(info, ipv4_, eth_length_, payload_length, out.size());
    if (!layout.ok()) {
        return layout;
    }
    const std::size_t fixed = std::size_t{eth_length_} + ip_header_length_ + udp_header_size;
    // Untagged IPv4 and IPv6, as constant-length copies (a few moves, not a call).
    constexpr std::size_t ipv4_fixed = ethernet_header_size + ipv4_header_size + udp_header_size;
    constexpr std::size_t ipv6_fixed = ethernet_header_size + ipv6_header_size + udp_header_size;
    if (fixed == ipv4_fixed) {
        std::memcpy(out.data(), bytes_.data(), ipv4_fixed);
    } else if (fixed == ipv6_fixed) {
        std::memcpy(out.data(), bytes_.data(), ipv6_fixed);
    } else {
        std::memcpy(out.data(), bytes_.data(), fixed);
    }
    set_lengths(out, layout.frame_length - layout.ip_offset);
    encode_ib_headers(h, info, layout, out.subspan(fixed));
    return layout;
}

void HeaderTemplate::set_lengths(std::span<std::uint8_t> frame,
                                 std::uint32_t ip_length) const noexcept {
    std::uint8_t* ip = frame.data() + eth_length_;
    const auto udp_length = static_cast<std::uint16_t>(ip_length - ip_header_length_);
    if (ipv4_) {
        store_be16(ip + 2, static_cast<std::uint16_t>(ip_length));
        std::uint32_t sum = ipv4_partial_sum_ + ip_length;
        sum = (sum & 0xffffU) + (sum >> 16);
        sum = (sum & 0xffffU) + (sum >> 16);
        store_be16(ip + 10, static_cast<std::uint16_t>(~sum));
    } else {
        store_be16(ip + 4, udp_length);
    }
    store_be16(ip + ip_header_length_ + 4, udp_length);
}

bool finalize_frame(std::span<std::uint8_t> frame, const FrameLayout& layout,
                    CrcPath path) noexcept {
    // A layout that did not come from a successful build (or was edited) is refused rather than
    // trusted with the buffer.
    if (PRDMA_UNLIKELY(
            !layout.ok() || layout.frame_length == 0 || frame.size() < layout.wire_length ||
            layout.wire_length < layout.frame_length || layout.ip_offset >= layout.payload_offset ||
            std::uint64_t{layout.payload_offset} + layout.payload_length + layout.pad_count +
                    icrc_size !=
                layout.frame_length)) {
        return false;
    }
    std::uint8_t* p = frame.data();
    std::memset(p + layout.payload_offset + layout.payload_length, 0, layout.pad_count);
    if (!store_icrc(frame.subspan(layout.ip_offset, layout.frame_length - layout.ip_offset),
                    path)) {
        return false;
    }
    std::memset(p + layout.frame_length, 0, layout.wire_length - layout.frame_length);
    return true;
}

void seal_frame(std::span<std::uint8_t> frame, const FrameLayout& layout, bool ipv4) noexcept {
    std::uint8_t* p = frame.data();
    // Four zero bytes cover any pad; the ICRC, which they run into, is written next.
    store_le32(p + layout.payload_offset + layout.payload_length, 0);
    const std::span<std::uint8_t> datagram(p + layout.ip_offset,
                                           layout.frame_length - layout.ip_offset);
    store_le32(p + layout.frame_length - icrc_size, compute_built_icrc(datagram, ipv4));
    if (PRDMA_UNLIKELY(layout.wire_length > layout.frame_length)) {
        std::memset(p + layout.frame_length, 0, layout.wire_length - layout.frame_length);
    }
}

FrameLayout build_frame(const FrameHeaders& h, std::span<const std::uint8_t> payload,
                        std::span<std::uint8_t> out, CrcPath path) noexcept {
    if (PRDMA_UNLIKELY(payload.size() > 0xffff)) {
        FrameLayout layout;
        layout.error = BuildError::too_long;
        return layout;
    }
    FrameLayout layout = build_frame_headers(h, static_cast<std::uint32_t>(payload.size()), out);
    if (PRDMA_LIKELY(layout.ok())) {
        if (!payload.empty()) {
            std::memcpy(out.data() + layout.payload_offset, payload.data(), payload.size());
        }
        finalize_frame(out, layout, path);
    }
    return layout;
}

FrameHeaders frame_headers_of(const ParsedFrame& parsed) noexcept {
    FrameHeaders h;
    h.eth = parsed.eth;
    h.ip_version = parsed.ip_version;
    h.ipv4 = parsed.ipv4;
    h.ipv6 = parsed.ipv6;
    h.udp_src_port = parsed.udp.src_port;
    h.bth = parsed.bth;
    h.reth = parsed.reth;
    h.aeth = parsed.aeth;
    h.atomic_eth = parsed.atomic_eth;
    h.atomic_ack_eth = parsed.atomic_ack_eth;
    h.deth = parsed.deth;
    h.immediate = parsed.immediate;
    h.invalidate_rkey = parsed.invalidate_rkey;
    return h;
}

namespace {

std::uint64_t sum16(const std::uint8_t* data, std::size_t length, std::uint64_t sum) noexcept {
    for (; length >= 2; data += 2, length -= 2) {
        sum += static_cast<std::uint64_t>(data[0]) << 8 | data[1];
    }
    if (length == 1) {
        sum += static_cast<std::uint64_t>(data[0]) << 8;
    }
    return sum;
}

} // namespace

std::uint16_t ipv6_upper_layer_checksum(const std::uint8_t* ipv6_header,
                                        std::span<const std::uint8_t> message,
                                        std::uint8_t next_header) noexcept {
    // Pseudo-header: source, destination, upper-layer length, next header (RFC 8200 8.1).
    std::uint64_t sum = sum16(ipv6_header + 8, 32, 0);
    sum += (message.size() >> 16) + (message.size() & 0xffffU);
    sum += next_header;
    sum = sum16(message.data(), message.size(), sum);
    while ((sum >> 16) != 0) {
        sum = (sum & 0xffffU) + (sum >> 16);
    }
    return static_cast<std::uint16_t>(~sum & 0xffffU);
}

bool set_ipv6_udp_checksum(std::span<std::uint8_t> frame, const FrameLayout& layout) noexcept {
    const std::size_t ip = layout.ip_offset;
    if (!layout.ok() || frame.size() < ip + ipv6_header_size + udp_header_size ||
        (frame[ip] >> 4) != 6) {
        return false;
    }
    const std::uint8_t* ip6 = frame.data() + ip;
    const std::uint16_t udp_length = load_be16(ip6 + 4);
    std::uint8_t* udp = frame.data() + ip + ipv6_header_size;
    if (frame.size() < ip + ipv6_header_size + udp_length) {
        return false;
    }
    store_be16(udp + 6, 0);
    const std::uint16_t checksum =
        ipv6_upper_layer_checksum(ip6, {udp, udp_length}, ip_protocol_udp);
    store_be16(udp + 6, checksum == 0 ? 0xffff : checksum); // 0 means "none", sent as all ones
    return true;
}

} // namespace prdma::roce
