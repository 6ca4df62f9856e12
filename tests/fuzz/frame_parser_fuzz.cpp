// libFuzzer harness (a): one Ethernet frame through what swroce's rx classification runs on every
// received frame (rx.cpp: ARP first, then the RoCEv2 parser with the IPv4 checksum and the ICRC
// verified), plus properties that must hold for any input:
//
//   - a frame that parses points only inside itself, and its pieces add up to the IP datagram;
//   - skipping the checks (what a handed-over frame gets) changes the verdict only by the checks
//     skipped, and the lax parse agrees with the strict one on every field;
//   - the parser's fixed-offset path and the full parser give the same verdict and fields;
//   - the table and PCLMULQDQ CRC paths give the same ICRC;
//   - a parsed frame rebuilt from its fields (frame_headers_of + build_frame) parses to the same
//     fields and payload; a parsed ARP message encodes and parses back to itself.
//
// A broken property aborts with what differed, which libFuzzer reports as a crash.
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string>
#include <vector>

#include <prdma/roce/icrc.hpp>
#include <prdma/roce/packet.hpp>

#include "arp.hpp"
#include "neighbour_discovery.hpp"

namespace prdma::fuzz {
namespace {

[[noreturn]] void fail(const char* what, const roce::ParsedFrame& frame) {
    std::fprintf(stderr, "frame parser fuzz: %s (parse: %s)\n", what,
                 std::string(roce::parse_error_name(frame.error)).c_str());
    std::abort();
}

bool within(std::span<const std::uint8_t> outer, std::span<const std::uint8_t> inner) {
    return inner.empty() || (inner.data() >= outer.data() &&
                             inner.data() + inner.size() <= outer.data() + outer.size());
}

void check_layout(std::span<const std::uint8_t> frame, const roce::ParsedFrame& p) {
    if (!within(frame, p.ip_datagram) || !within(frame, p.payload)) {
        fail("a span of the parsed frame points outside it", p);
    }
    if (p.ip_datagram.data() != frame.data() + p.ip_offset ||
        (!p.payload.empty() && p.payload.data() != frame.data() + p.payload_offset)) {
        fail("offsets and spans disagree", p);
    }
    const std::size_t end =
        std::size_t{p.payload_offset} + p.payload.size() + p.bth.pad_count + roce::icrc_size;
    if (end != p.ip_offset + p.ip_datagram.size()) {
        fail("headers, payload, pad and ICRC do not add up to the IP datagram", p);
    }
    if (p.payload_offset != p.bth_offset + p.info->header_length) {
        fail("payload does not start after the opcode's headers", p);
    }
}

bool same_fields(const roce::ParsedFrame& a, const roce::ParsedFrame& b) {
    roce::Bth bth = a.bth;
    bth.pad_count = b.bth.pad_count; // the builder derives it from the payload length
    const bool ip = a.ip_version == b.ip_version &&
                    (a.ip_version == roce::IpVersion::ipv4
                         ? a.ipv4.src == b.ipv4.src && a.ipv4.dst == b.ipv4.dst &&
                               a.ipv4.tos == b.ipv4.tos && a.ipv4.ttl == b.ipv4.ttl
                         : a.ipv6.src == b.ipv6.src && a.ipv6.dst == b.ipv6.dst &&
                               a.ipv6.traffic_class == b.ipv6.traffic_class &&
                               a.ipv6.flow_label == b.ipv6.flow_label);
    const auto ext = [&](roce::ExtHeader h, bool equal) { return !a.has(h) || equal; };
    return ip && bth == b.bth && a.eth.src == b.eth.src && a.eth.dst == b.eth.dst &&
           a.eth.vlan == b.eth.vlan && a.udp.src_port == b.udp.src_port &&
           ext(roce::ExtHeader::reth, a.reth == b.reth) &&
           ext(roce::ExtHeader::aeth, a.aeth == b.aeth) &&
           ext(roce::ExtHeader::atomic_eth, a.atomic_eth == b.atomic_eth) &&
           ext(roce::ExtHeader::atomic_ack_eth, a.atomic_ack_eth == b.atomic_ack_eth) &&
           ext(roce::ExtHeader::deth, a.deth == b.deth) &&
           ext(roce::ExtHeader::immdt, a.immediate == b.immediate) &&
           ext(roce::ExtHeader::ieth, a.invalidate_rkey == b.invalidate_rkey) &&
           std::equal(a.payload.begin(), a.payload.end(), b.payload.begin(), b.payload.end());
}

void check_rebuild(const roce::ParsedFrame& parsed) {
    std::vector<std::uint8_t> out(parsed.ip_datagram.size() + 64 + roce::ethernet_min_frame_size);
    const roce::FrameLayout layout =
        roce::build_frame(roce::frame_headers_of(parsed), parsed.payload, out);
    if (!layout.ok()) {
        fail("a parsed frame cannot be rebuilt", parsed);
    }
    const roce::ParsedFrame again =
        roce::parse_roce_frame(std::span<const std::uint8_t>(out).first(layout.wire_length));
    if (!again.ok()) {
        fail("a rebuilt frame does not parse", again);
    }
    if (!same_fields(parsed, again)) {
        fail("a rebuilt frame parses to other fields", again);
    }
}

void check_crc_paths(std::span<const std::uint8_t> bytes) {
    if (roce::crc32(bytes, roce::CrcPath::table) != roce::crc32(bytes, roce::CrcPath::pclmul) ||
        roce::compute_icrc(bytes, roce::CrcPath::table) !=
            roce::compute_icrc(bytes, roce::CrcPath::pclmul)) {
        std::fprintf(stderr, "frame parser fuzz: CRC paths disagree on %zu bytes\n", bytes.size());
        std::abort();
    }
}

void check_arp(std::span<const std::uint8_t> frame) {
    const swroce::ArpParseResult arp = swroce::parse_arp(frame);
    if (!arp.ok()) {
        return;
    }
    std::array<std::uint8_t, swroce::arp_frame_buffer_size> out{};
    const swroce::MacAddress destination = {frame[0], frame[1], frame[2],
                                            frame[3], frame[4], frame[5]};
    const std::size_t length = swroce::encode_arp(out, destination, arp.message);
    const swroce::ArpParseResult again =
        swroce::parse_arp(std::span<const std::uint8_t>(out).first(length));
    if (!again.ok() || !(again.message == arp.message)) {
        std::fprintf(stderr, "frame parser fuzz: an ARP message does not survive encoding\n");
        std::abort();
    }
}

// What a solicitation or advertisement says survives being written again by swroce's builders.
void check_nd(std::span<const std::uint8_t> frame) {
    const swroce::NdParseResult nd = swroce::parse_nd(frame);
    if (!nd.ok() || !nd.message.link_address) {
        return;
    }
    const swroce::NdMessage& m = nd.message;
    std::array<std::uint8_t, swroce::nd_frame_buffer_size> out{};
    const bool solicitation = m.type == swroce::NdType::solicitation;
    const swroce::Ipv6Address& sender = solicitation ? m.source : m.target;
    if (swroce::is_unusable_ipv6(sender) || swroce::is_unusable_ipv6(m.source)) {
        return;
    }
    const std::size_t length =
        solicitation ? swroce::build_neighbor_solicitation(out, *m.link_address, m.source, m.target)
                     : swroce::build_neighbor_advertisement(out, *m.link_address, m.target,
                                                            m.eth_source, m.source);
    const swroce::NdParseResult again =
        swroce::parse_nd(std::span<const std::uint8_t>(out).first(length));
    if (!again.ok() || again.message.type != m.type || again.message.target != m.target ||
        again.message.link_address != m.link_address) {
        std::fprintf(stderr, "frame parser fuzz: an ND message does not survive encoding (%s)\n",
                     std::string(swroce::nd_error_name(again.error)).c_str());
        std::abort();
    }
}

void check_frame(std::span<const std::uint8_t> frame) {
    check_arp(frame);
    check_nd(frame);
    const roce::ParsedFrame strict = roce::parse_roce_frame(frame);
    roce::ParseOptions lax_options;
    lax_options.verify_icrc = false;
    lax_options.verify_ipv4_checksum = false;
    const roce::ParsedFrame lax = roce::parse_roce_frame(frame, lax_options);
    if (roce::parse_roce_frame(frame).error != strict.error) {
        fail("the same frame parses differently twice", strict);
    }
    // The fixed-offset path and the full parser: one answer, the same fields.
    for (const roce::ParseOptions& options : {roce::ParseOptions{}, lax_options}) {
        roce::ParsedFrame fast;
        roce::ParsedFrame full;
        if (roce::parse_roce_frame(frame, fast, options) !=
            roce::parse_roce_frame_full(frame, full, options)) {
            fail("the fixed-offset path and the full parser disagree", fast);
        }
        roce::ParseOptions transport = options;
        transport.transport_fields_only = true;
        roce::ParsedFrame lean;
        if (roce::parse_roce_frame(frame, lean, transport) != full.error ||
            (lean.ok() && (!(lean.bth == full.bth) || lean.info != full.info ||
                           lean.payload.data() != full.payload.data() ||
                           lean.payload.size() != full.payload.size() || lean.icrc != full.icrc))) {
            fail("the transport fields differ from the full parser's", lean);
        }
        if (fast.ok() && (!same_fields(fast, full) || fast.icrc != full.icrc ||
                          fast.ip_datagram.data() != full.ip_datagram.data() ||
                          fast.ip_datagram.size() != full.ip_datagram.size())) {
            fail("the fixed-offset path and the full parser fill other fields", fast);
        }
    }
    if (strict.ok() && !lax.ok()) {
        fail("skipping checks refused a frame the checks accept", lax);
    }
    if (lax.ok() && !strict.ok() && strict.error != roce::ParseError::bad_icrc &&
        strict.error != roce::ParseError::bad_ipv4_checksum) {
        fail("the checks refused a frame for a reason they do not check", strict);
    }
    if (lax.ok()) {
        check_layout(frame, lax);
        const bool icrc_ok = roce::compute_icrc(lax.ip_datagram) == lax.icrc;
        if (strict.ok() && !icrc_ok) {
            fail("a frame with a wrong ICRC was accepted", strict);
        }
        if (strict.ok() && !same_fields(strict, lax)) {
            fail("strict and lax parses disagree", strict);
        }
        check_crc_paths(lax.ip_datagram);
    }
    if (strict.ok()) {
        check_layout(frame, strict);
        check_rebuild(strict);
    }
    check_crc_paths(frame);
}

} // namespace
} // namespace prdma::fuzz

// NOLINTNEXTLINE(readability-identifier-naming): the name libFuzzer calls
extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    prdma::fuzz::check_frame({data, size});
    return 0;
}
