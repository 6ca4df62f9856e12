// Frame builder and parser on synthetic frames: every opcode over IPv4 and IPv6, tagged and
// untagged, every pad count, short frames padded to 60 bytes; each parse and build error made to
// happen on purpose; random input never crashes.
#include <algorithm>
#include <cstdint>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <prdma/roce/packet.hpp>

#include "sample_headers.hpp"

namespace prdma::roce {
namespace {

using Bytes = std::vector<std::uint8_t>;

constexpr Opcode all_opcodes[] = {
    Opcode::rc_send_first,
    Opcode::rc_send_middle,
    Opcode::rc_send_last,
    Opcode::rc_send_last_with_immediate,
    Opcode::rc_send_only,
    Opcode::rc_send_only_with_immediate,
    Opcode::rc_rdma_write_first,
    Opcode::rc_rdma_write_middle,
    Opcode::rc_rdma_write_last,
    Opcode::rc_rdma_write_last_with_immediate,
    Opcode::rc_rdma_write_only,
    Opcode::rc_rdma_write_only_with_immediate,
    Opcode::rc_rdma_read_request,
    Opcode::rc_rdma_read_response_first,
    Opcode::rc_rdma_read_response_middle,
    Opcode::rc_rdma_read_response_last,
    Opcode::rc_rdma_read_response_only,
    Opcode::rc_acknowledge,
    Opcode::rc_atomic_acknowledge,
    Opcode::rc_compare_swap,
    Opcode::rc_fetch_add,
    Opcode::rc_send_last_with_invalidate,
    Opcode::rc_send_only_with_invalidate,
    Opcode::ud_send_only,
    Opcode::ud_send_only_with_immediate,
};

Bytes payload_of(std::size_t n) {
    Bytes p(n);
    for (std::size_t i = 0; i < n; ++i) {
        p[i] = static_cast<std::uint8_t>(0xa0 + i);
    }
    return p;
}

Bytes build(const FrameHeaders& h, const Bytes& payload) {
    Bytes out(payload.size() + 200, 0xee);
    const FrameLayout layout = build_frame(h, payload, out);
    EXPECT_TRUE(layout.ok()) << build_error_name(layout.error);
    out.resize(layout.wire_length);
    return out;
}

void fix_ipv4_checksum(Bytes& frame, std::size_t ip = ethernet_header_size) {
    const std::size_t length = std::size_t{frame[ip] & 0x0fU} * 4;
    store_be16(&frame[ip + 10], ipv4_header_checksum(std::span(frame).subspan(ip, length)));
}

void fix_icrc(Bytes& frame, std::size_t ip = ethernet_header_size) {
    const std::size_t total = load_be16(&frame[ip + 2]);
    ASSERT_TRUE(store_icrc(std::span(frame).subspan(ip, total)));
}

TEST(Packet, EveryOpcodeEveryPadOverIpv4AndIpv6) {
    for (const Opcode opcode : all_opcodes) {
        const OpcodeInfo& info = opcode_info(opcode);
        for (const IpVersion version : {IpVersion::ipv4, IpVersion::ipv6}) {
            for (const bool vlan : {false, true}) {
                for (std::size_t length = 0; length <= (info.has_payload ? 9U : 0U); ++length) {
                    SCOPED_TRACE(std::string(info.name) +
                                 (version == IpVersion::ipv4 ? " v4" : " v6") +
                                 (vlan ? " vlan" : "") + " payload " + std::to_string(length));
                    const FrameHeaders h = sample_headers(opcode, version, vlan);
                    const Bytes payload = payload_of(length);
                    const Bytes frame = build(h, payload);
                    const ParsedFrame p = parse_roce_frame(frame);
                    ASSERT_TRUE(p.ok()) << parse_error_name(p.error);
                    EXPECT_EQ(p.info, &info);
                    EXPECT_EQ(p.eth.vlan, vlan);
                    EXPECT_EQ(p.ip_version, version);
                    EXPECT_EQ(p.udp.src_port, 0xc0de);
                    EXPECT_EQ(p.bth.pad_count, (4 - length % 4) % 4);
                    EXPECT_EQ(p.bth.dest_qp, 0x123456U);
                    EXPECT_EQ(p.bth.psn, 0xfffffeU);
                    EXPECT_EQ(p.bth.pkey, 0x8001);
                    EXPECT_TRUE(p.bth.solicited);
                    EXPECT_EQ(Bytes(p.payload.begin(), p.payload.end()), payload);
                    // Pad bytes are zero.
                    for (std::size_t i = 0; i < p.bth.pad_count; ++i) {
                        EXPECT_EQ(p.payload.data()[p.payload.size() + i], 0);
                    }
                    EXPECT_EQ(p.has(ExtHeader::reth), p.reth == h.reth);
                    if (p.has(ExtHeader::aeth)) {
                        EXPECT_EQ(p.aeth, h.aeth);
                    }
                    if (p.has(ExtHeader::atomic_eth)) {
                        EXPECT_EQ(p.atomic_eth, h.atomic_eth);
                    }
                    if (p.has(ExtHeader::atomic_ack_eth)) {
                        EXPECT_EQ(p.atomic_ack_eth, h.atomic_ack_eth);
                    }
                    if (p.has(ExtHeader::deth)) {
                        EXPECT_EQ(p.deth, h.deth);
                    }
                    if (p.has(ExtHeader::immdt)) {
                        EXPECT_EQ(p.immediate, h.immediate);
                    }
                    if (p.has(ExtHeader::ieth)) {
                        EXPECT_EQ(p.invalidate_rkey, h.invalidate_rkey);
                    }
                    if (version == IpVersion::ipv4) {
                        EXPECT_EQ(p.ipv4.tos, h.ipv4.tos);
                        EXPECT_EQ(p.ipv4.identification, 0x1234);
                        EXPECT_EQ(p.ipv4.ttl, 64);
                        EXPECT_TRUE(p.ipv4.dont_fragment);
                    } else {
                        EXPECT_EQ(p.ipv6.traffic_class, 0x68);
                        EXPECT_EQ(p.ipv6.flow_label, 0xbeef5U);
                        EXPECT_EQ(p.ipv6.hop_limit, 17);
                        EXPECT_EQ(p.udp.checksum, 0) << "IBTA A17: UDP checksum 0 over IPv6";
                    }
                    // And back again, byte for byte.
                    EXPECT_EQ(build(frame_headers_of(p), payload), frame);
                }
            }
        }
    }
}

// A QP's header template writes what the builder writes, for every opcode, IP version, VLAN
// and length (so the IPv4 checksum patched from the template's sum is the one computed afresh),
// seal_frame what finalize_frame writes, and a frame from it parses with its ICRC.
TEST(Packet, AHeaderTemplateBuildsWhatTheBuilderBuilds) {
    for (const Opcode opcode : all_opcodes) {
        const OpcodeInfo& info = opcode_info(opcode);
        for (const IpVersion version : {IpVersion::ipv4, IpVersion::ipv6}) {
            for (const bool vlan : {false, true}) {
                FrameHeaders h = sample_headers(opcode, version, vlan);
                const HeaderTemplate tpl = HeaderTemplate::make(sample_headers(
                    Opcode::rc_send_only, version, vlan)); // made from another opcode
                for (const std::uint32_t length : {0U, 1U, 3U, 64U, 1021U, 4096U}) {
                    if (!info.has_payload && length != 0) {
                        continue;
                    }
                    SCOPED_TRACE(std::string(info.name) + (vlan ? " vlan " : " ") +
                                 std::to_string(length));
                    h.bth.psn = (h.bth.psn + 7) & 0xffffffU;
                    Bytes expected(length + 200, 0xee);
                    Bytes got(length + 200, 0xee);
                    const FrameLayout a = build_frame_headers(h, length, expected);
                    const FrameLayout b = tpl.build(h, length, got);
                    ASSERT_TRUE(a.ok());
                    ASSERT_TRUE(b.ok());
                    EXPECT_EQ(b.payload_offset, a.payload_offset);
                    EXPECT_EQ(b.frame_length, a.frame_length);
                    EXPECT_EQ(b.wire_length, a.wire_length);
                    EXPECT_EQ(got, expected);
                    Bytes sealed = got; // seal_frame writes what finalize_frame writes
                    ASSERT_TRUE(finalize_frame(got, b));
                    seal_frame(sealed, b, version == IpVersion::ipv4);
                    EXPECT_EQ(sealed, got);
                    got.resize(b.wire_length);
                    if (version == IpVersion::ipv6) {
                        ASSERT_TRUE(set_ipv6_udp_checksum(got, b));
                    }
                    EXPECT_TRUE(parse_roce_frame(got).ok());
                }
            }
        }
    }
    Bytes small(40);
    EXPECT_EQ(HeaderTemplate::make(sample_headers(Opcode::rc_send_only, IpVersion::ipv4, false))
                  .build(sample_headers(Opcode::rc_send_only, IpVersion::ipv4, false), 0, small)
                  .error,
              BuildError::buffer_too_small);
}

TEST(Packet, ShortFramesArePaddedTo60Bytes) {
    const FrameHeaders h = sample_headers(Opcode::rc_send_only);
    Bytes out(64, 0xee);
    const FrameLayout layout = build_frame(h, {}, out);
    ASSERT_TRUE(layout.ok());
    EXPECT_EQ(layout.frame_length, 14U + 20 + 8 + 12 + 4);
    EXPECT_EQ(layout.wire_length, 60U);
    EXPECT_EQ(out[58], 0);
    EXPECT_EQ(out[59], 0);
    EXPECT_EQ(out[60], 0xee) << "nothing past wire_length";
    out.resize(60);
    const ParsedFrame p = parse_roce_frame(out);
    ASSERT_TRUE(p.ok()) << parse_error_name(p.error);
    EXPECT_TRUE(p.payload.empty());
    EXPECT_EQ(p.ip_datagram.size(), 44U) << "the IP length, not the padded frame, bounds it";
    Bytes small(59);
    EXPECT_EQ(build_frame(h, {}, small).error, BuildError::buffer_too_small);
}

TEST(Packet, LayoutForTheEngine) {
    const FrameHeaders h = sample_headers(Opcode::rc_rdma_write_only, IpVersion::ipv4, true);
    Bytes out(2048, 0xee);
    const FrameLayout layout = build_frame_headers(h, 1021, out);
    ASSERT_TRUE(layout.ok());
    EXPECT_EQ(layout.ip_offset, 18);
    EXPECT_EQ(layout.payload_offset, 18 + 20 + 8 + 28);
    EXPECT_EQ(layout.pad_count, 3);
    EXPECT_EQ(layout.frame_length, layout.payload_offset + 1021U + 3 + 4);
    EXPECT_EQ(out[layout.payload_offset], 0xee) << "the payload is the caller's to write";
    const Bytes payload = payload_of(1021);
    std::copy(payload.begin(), payload.end(), out.begin() + layout.payload_offset);
    ASSERT_TRUE(finalize_frame(out, layout));
    out.resize(layout.wire_length);
    const ParsedFrame p = parse_roce_frame(out);
    ASSERT_TRUE(p.ok()) << parse_error_name(p.error);
    EXPECT_EQ(p.payload.size(), 1021U);

    // finalize_frame refuses layouts it cannot trust.
    Bytes copy = out;
    FrameLayout bad = layout;
    bad.payload_length += 1;
    EXPECT_FALSE(finalize_frame(copy, bad));
    bad = layout;
    bad.error = BuildError::too_long;
    EXPECT_FALSE(finalize_frame(copy, bad));
    EXPECT_FALSE(finalize_frame(copy, FrameLayout{}));
    EXPECT_FALSE(finalize_frame(std::span(copy).first(layout.wire_length - 1), layout));
    EXPECT_EQ(copy, out) << "refused means untouched";
}

TEST(Packet, BuildErrors) {
    Bytes out(256, 0xee);
    FrameHeaders h = sample_headers(static_cast<Opcode>(0x15));
    EXPECT_EQ(build_frame_headers(h, 0, out).error, BuildError::unknown_opcode);
    h = sample_headers(Opcode::rc_acknowledge);
    EXPECT_EQ(build_frame_headers(h, 1, out).error, BuildError::payload_not_allowed);
    // The datagram is always a multiple of 4 (pad), so an IPv4 SEND ONLY tops out at 65488
    // payload bytes (65532-byte datagram); one more needs 4 more on the wire.
    h = sample_headers(Opcode::rc_send_only);
    EXPECT_EQ(build_frame_headers(h, 65488, out).error, BuildError::buffer_too_small);
    EXPECT_EQ(build_frame_headers(h, 65489, out).error, BuildError::too_long);
    h.ip_version = IpVersion::ipv6; // the 16-bit lengths are UDP's and IPv6's payload length
    EXPECT_EQ(build_frame_headers(h, 65508, out).error, BuildError::buffer_too_small);
    EXPECT_EQ(build_frame_headers(h, 65509, out).error, BuildError::too_long);
    EXPECT_EQ(build_frame_headers(h, 0xffffffff, out).error, BuildError::too_long);
    EXPECT_EQ(out, Bytes(256, 0xee)) << "errors write nothing";
    EXPECT_EQ(build_error_name(BuildError::too_long), "too_long");
    EXPECT_EQ(build_error_name(static_cast<BuildError>(99)), "unknown");
}

TEST(Packet, LargestFrames) {
    for (const IpVersion version : {IpVersion::ipv4, IpVersion::ipv6}) {
        const FrameHeaders h = sample_headers(Opcode::rc_send_only, version);
        const std::size_t max_payload = version == IpVersion::ipv4 ? 65488 : 65508;
        Bytes out(14 + 40 + 65535);
        const Bytes payload(max_payload, 0x5a);
        const FrameLayout layout = build_frame(h, payload, out);
        ASSERT_TRUE(layout.ok()) << build_error_name(layout.error);
        out.resize(layout.frame_length);
        const ParsedFrame p = parse_roce_frame(out);
        ASSERT_TRUE(p.ok()) << parse_error_name(p.error);
        EXPECT_EQ(p.payload.size(), max_payload);
        EXPECT_EQ(p.ip_datagram.size(), version == IpVersion::ipv4 ? 65532U : 40U + 65532U);
    }
}

class ParseErrors : public ::testing::Test {
protected:
    // A valid IPv4 SEND_ONLY with 8 bytes of payload: 14 + 20 + 8 + 12 + 8 + 4 = 66 bytes.
    Bytes frame = build(sample_headers(Opcode::rc_send_only), payload_of(8));
    static constexpr std::size_t ip = 14;
    static constexpr std::size_t udp = ip + 20;
    static constexpr std::size_t bth = udp + 8;

    ParseError parse(const Bytes& f, const ParseOptions& options = {}) {
        ParsedFrame p;
        const ParseError e = parse_roce_frame(f, p, options);
        EXPECT_EQ(e, p.error);
        seen_.insert(e);
        return e;
    }
    // Shrinks the IP datagram to `total` bytes, keeping the lengths and checksum consistent.
    void set_ip_total(Bytes& f, std::size_t total) {
        store_be16(&f[ip + 2], static_cast<std::uint16_t>(total));
        store_be16(&f[udp + 4], static_cast<std::uint16_t>(total - 20));
        fix_ipv4_checksum(f);
        f.resize(ip + total);
    }
    std::set<ParseError> seen_;
};

TEST_F(ParseErrors, EachLayerFailsWithItsOwnError) {
    ASSERT_EQ(frame.size(), 66U);
    EXPECT_EQ(parse(frame), ParseError::ok);

    EXPECT_EQ(parse(Bytes(frame.begin(), frame.begin() + 13)), ParseError::eth_too_short);
    Bytes f = frame;
    store_be16(&f[12], 0x8100);
    f.resize(17);
    EXPECT_EQ(parse(f), ParseError::eth_too_short) << "tag cut short";

    f = frame;
    store_be16(&f[12], 0x0806);
    EXPECT_EQ(parse(f), ParseError::not_ip);

    EXPECT_EQ(parse(Bytes(frame.begin(), frame.begin() + ip + 19)), ParseError::ip_too_short);

    f = frame;
    f[ip] = 0x65;
    EXPECT_EQ(parse(f), ParseError::bad_ip_version);

    f = frame;
    f[ip] = 0x44;
    EXPECT_EQ(parse(f), ParseError::bad_ipv4_header_length);

    f = frame;
    f[ip + 4] ^= 1; // identification, checksum not fixed
    EXPECT_EQ(parse(f), ParseError::bad_ipv4_checksum);
    EXPECT_EQ(parse(f, {.verify_ipv4_checksum = false}), ParseError::bad_icrc)
        << "the ICRC still covers the identification";
    EXPECT_EQ(parse(f, {.verify_ipv4_checksum = false, .verify_icrc = false}), ParseError::ok);

    f = frame;
    store_be16(&f[ip + 2], 53);
    fix_ipv4_checksum(f);
    EXPECT_EQ(parse(f), ParseError::bad_ip_length) << "longer than the frame";
    store_be16(&f[ip + 2], 19);
    fix_ipv4_checksum(f);
    EXPECT_EQ(parse(f), ParseError::bad_ip_length) << "shorter than its header";

    f = frame;
    f[ip + 6] |= 0x20; // MF
    fix_ipv4_checksum(f);
    EXPECT_EQ(parse(f), ParseError::ip_fragment);
    f = frame;
    f[ip + 7] = 1; // fragment offset 8
    fix_ipv4_checksum(f);
    EXPECT_EQ(parse(f), ParseError::ip_fragment);

    f = frame;
    f[ip + 9] = 6; // TCP
    fix_ipv4_checksum(f);
    EXPECT_EQ(parse(f), ParseError::not_udp);

    f = frame;
    set_ip_total(f, 27);
    EXPECT_EQ(parse(f), ParseError::udp_too_short);

    f = frame;
    store_be16(&f[udp + 4], 31);
    EXPECT_EQ(parse(f), ParseError::bad_udp_length) << "UDP length below the IP payload";
    store_be16(&f[udp + 4], 7);
    EXPECT_EQ(parse(f), ParseError::bad_udp_length) << "below the UDP header";

    f = frame;
    store_be16(&f[udp + 2], 4790);
    EXPECT_EQ(parse(f), ParseError::wrong_udp_port);

    f = frame;
    set_ip_total(f, 20 + 8 + 15);
    EXPECT_EQ(parse(f), ParseError::bth_too_short);

    f = frame;
    f[bth + 1] |= 0x01;
    EXPECT_EQ(parse(f), ParseError::unsupported_tver);

    f = frame;
    f[bth] = 0x15;
    EXPECT_EQ(parse(f), ParseError::unknown_opcode);

    f = frame;
    f[bth] = static_cast<std::uint8_t>(Opcode::rc_rdma_write_only); // 28-byte headers
    EXPECT_EQ(parse(f), ParseError::headers_too_short);

    Bytes empty = build(sample_headers(Opcode::rc_send_only), {});
    empty[bth + 1] |= 0x10; // pad 1, but nothing between headers and ICRC
    EXPECT_EQ(parse(empty), ParseError::pad_exceeds_payload);

    f = frame;
    f[bth] = static_cast<std::uint8_t>(Opcode::rc_acknowledge); // 16 bytes, then 4 extra
    fix_icrc(f);
    EXPECT_EQ(parse(f), ParseError::unexpected_payload);

    f = frame;
    f[bth + 12] ^= 0x80;
    EXPECT_EQ(parse(f), ParseError::bad_icrc);
    EXPECT_EQ(parse(f, {.verify_icrc = false}), ParseError::ok);

    // Every error was produced, and each has its own name.
    std::set<std::string_view> names;
    for (unsigned e = 0; e <= static_cast<unsigned>(ParseError::bad_icrc); ++e) {
        const auto error = static_cast<ParseError>(e);
        EXPECT_EQ(seen_.count(error), 1U) << parse_error_name(error) << " never produced";
        names.insert(parse_error_name(error));
    }
    EXPECT_EQ(names.size(), static_cast<std::size_t>(ParseError::bad_icrc) + 1);
    EXPECT_EQ(parse_error_name(static_cast<ParseError>(250)), "unknown");
}

TEST_F(ParseErrors, Ipv6Errors) {
    Bytes f6 = build(sample_headers(Opcode::rc_send_only, IpVersion::ipv6), payload_of(8));
    EXPECT_EQ(parse(f6), ParseError::ok);
    EXPECT_EQ(parse(Bytes(f6.begin(), f6.begin() + ip + 39)), ParseError::ip_too_short);
    Bytes f = f6;
    f[ip] = 0x45;
    EXPECT_EQ(parse(f), ParseError::bad_ip_version);
    f = f6;
    store_be16(&f[ip + 4], 0x100);
    EXPECT_EQ(parse(f), ParseError::bad_ip_length);
    f = f6;
    f[ip + 6] = 0; // hop-by-hop options header: extension headers are not followed
    EXPECT_EQ(parse(f), ParseError::not_udp);
    f = f6;
    f[ip + 7] = 1; // hop limit: masked by the ICRC, no checksum in IPv6
    EXPECT_EQ(parse(f), ParseError::ok);
}

TEST(PacketFuzz, RandomBytesNeverCrash) {
    std::mt19937_64 rng(0xf022);
    std::map<ParseError, std::size_t> seen;
    for (int i = 0; i < 200000; ++i) {
        Bytes f(rng() % 160);
        for (auto& b : f) {
            b = static_cast<std::uint8_t>(rng());
        }
        // Steer some of them past the first checks so the deeper ones get random input too.
        const auto steer = static_cast<unsigned>(rng() % 4);
        if (steer >= 1 && f.size() >= 14) {
            store_be16(&f[12], rng() % 2 == 0 ? ethertype_ipv4 : ethertype_ipv6);
        }
        if (steer >= 2 && f.size() >= 34 && load_be16(&f[12]) == ethertype_ipv4) {
            f[14] = 0x45;
            store_be16(&f[16], static_cast<std::uint16_t>(f.size() - 14 - rng() % 3));
            f[20] = 0x40;
            f[21] = 0;
            f[23] = ip_protocol_udp;
            fix_ipv4_checksum(f);
            if (steer == 3 && f.size() >= 42) {
                store_be16(&f[36], roce_udp_port);
                store_be16(&f[38], static_cast<std::uint16_t>(load_be16(&f[16]) - 20));
            }
        }
        ParsedFrame p;
        const bool verify = rng() % 2 == 0;
        parse_roce_frame(f, p, {.verify_ipv4_checksum = true, .verify_icrc = verify});
        ++seen[p.error];
        if (p.ok()) {
            ASSERT_LE(p.payload.data() + p.payload.size() + p.bth.pad_count + icrc_size,
                      f.data() + f.size());
        }
    }
    EXPECT_GE(seen.size(), 12U);
    EXPECT_GT(seen[ParseError::ok], 0U) << "some random frames are valid when the ICRC is off";
}

} // namespace
} // namespace prdma::roce
