// The parser's two paths give one answer: parse_roce_frame reads the common shape at fixed
// offsets and hands everything else to parse_roce_frame_full. For built frames of every opcode,
// IP version, tag and pad, for each of them with every single byte changed, for random frames
// steered past the first checks and for Linux rxe's captured frames, both parsers must return the
// same error and, on success, the same value in every field the frame defines (with
// transport_fields_only, in every field a transport reads).
#include <cstdint>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include <prdma/roce/packet.hpp>

#include "captures.hpp"

namespace prdma::roce {
namespace {

using Bytes = std::vector<std::uint8_t>;

FrameHeaders headers(Opcode opcode, IpVersion version, bool vlan) {
    FrameHeaders h;
    h.eth.dst = {0x02, 0, 0, 0, 0, 0x21};
    h.eth.src = {0x02, 0, 0, 0, 0, 0x22};
    h.eth.vlan = vlan;
    h.eth.vlan_tci = 0x2005;
    h.ip_version = version;
    h.ipv4.tos = 0x68;
    h.ipv4.identification = 0x4321;
    h.ipv4.src = 0x0a000001;
    h.ipv4.dst = 0x0a000002;
    h.ipv6.traffic_class = 0x20;
    h.ipv6.flow_label = 0x12345;
    h.ipv6.src = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
    h.ipv6.dst = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2};
    h.udp_src_port = 0xc011;
    h.bth.opcode = opcode;
    h.bth.pkey = 0xffff;
    h.bth.dest_qp = 0x000011;
    h.bth.ack_req = true;
    h.bth.psn = 0x00abcd;
    h.reth = {0x7f0000001000, 0x01020304, 4096};
    h.aeth = {0x1f, 0x000102};
    h.atomic_eth = {0x7f0000002000, 0x05060708, 1, 2};
    h.atomic_ack_eth = {0x0102030405060708};
    h.deth = {0x11111111, 0x000abc};
    h.immediate = 0xcafef00d;
    h.invalidate_rkey = 0x00000954;
    return h;
}

Bytes build(const FrameHeaders& h, std::size_t payload_length) {
    Bytes payload(payload_length);
    for (std::size_t i = 0; i < payload_length; ++i) {
        payload[i] = static_cast<std::uint8_t>(0x30 + i);
    }
    Bytes out(payload_length + 200, 0);
    const FrameLayout layout = build_frame(h, payload, out);
    out.resize(layout.ok() ? layout.wire_length : 0);
    return out;
}

// Same error, and on success the same fields; ext headers only where the opcode has them.
void expect_same(const Bytes& frame, const ParseOptions& options = {}) {
    ParsedFrame fast;
    ParsedFrame full;
    const ParseError a = parse_roce_frame(frame, fast, options);
    const ParseError b = parse_roce_frame_full(frame, full, options);
    ASSERT_EQ(parse_error_name(a), parse_error_name(b));
    if (a != ParseError::ok) {
        return;
    }
    EXPECT_EQ(fast.eth, full.eth);
    ASSERT_EQ(fast.ip_version, full.ip_version);
    if (fast.ip_version == IpVersion::ipv4) {
        EXPECT_EQ(fast.ipv4, full.ipv4);
    } else {
        EXPECT_EQ(fast.ipv6, full.ipv6);
    }
    EXPECT_EQ(fast.udp, full.udp);
    EXPECT_EQ(fast.bth, full.bth);
    ASSERT_EQ(fast.info, full.info);
    EXPECT_TRUE(!fast.has(ExtHeader::reth) || fast.reth == full.reth);
    EXPECT_TRUE(!fast.has(ExtHeader::aeth) || fast.aeth == full.aeth);
    EXPECT_TRUE(!fast.has(ExtHeader::atomic_eth) || fast.atomic_eth == full.atomic_eth);
    EXPECT_TRUE(!fast.has(ExtHeader::atomic_ack_eth) || fast.atomic_ack_eth == full.atomic_ack_eth);
    EXPECT_TRUE(!fast.has(ExtHeader::deth) || fast.deth == full.deth);
    EXPECT_TRUE(!fast.has(ExtHeader::immdt) || fast.immediate == full.immediate);
    EXPECT_TRUE(!fast.has(ExtHeader::ieth) || fast.invalidate_rkey == full.invalidate_rkey);
    EXPECT_EQ(fast.ip_offset, full.ip_offset);
    EXPECT_EQ(fast.udp_offset, full.udp_offset);
    EXPECT_EQ(fast.bth_offset, full.bth_offset);
    EXPECT_EQ(fast.payload_offset, full.payload_offset);
    EXPECT_EQ(fast.ip_datagram.data(), full.ip_datagram.data());
    EXPECT_EQ(fast.ip_datagram.size(), full.ip_datagram.size());
    EXPECT_EQ(fast.payload.data(), full.payload.data());
    EXPECT_EQ(fast.payload.size(), full.payload.size());
    EXPECT_EQ(fast.icrc, full.icrc);
}

// transport_fields_only: the same verdict, and the same value in every field a transport reads.
void expect_same_transport_fields(const Bytes& frame, bool verify = true) {
    ParsedFrame lean;
    ParsedFrame full;
    const ParseOptions checks{.verify_ipv4_checksum = verify, .verify_icrc = verify};
    ParseOptions transport = checks;
    transport.transport_fields_only = true;
    const ParseError a = parse_roce_frame(frame, lean, transport);
    const ParseError b = parse_roce_frame_full(frame, full, checks);
    ASSERT_EQ(parse_error_name(a), parse_error_name(b));
    if (a != ParseError::ok) {
        return;
    }
    ASSERT_EQ(lean.ip_version, full.ip_version);
    if (lean.ip_version == IpVersion::ipv4) {
        EXPECT_EQ(lean.ipv4.src, full.ipv4.src);
    } else {
        EXPECT_EQ(lean.ipv6.src, full.ipv6.src);
    }
    EXPECT_EQ(lean.bth, full.bth);
    ASSERT_EQ(lean.info, full.info);
    EXPECT_TRUE(!lean.has(ExtHeader::reth) || lean.reth == full.reth);
    EXPECT_TRUE(!lean.has(ExtHeader::aeth) || lean.aeth == full.aeth);
    EXPECT_TRUE(!lean.has(ExtHeader::atomic_eth) || lean.atomic_eth == full.atomic_eth);
    EXPECT_TRUE(!lean.has(ExtHeader::atomic_ack_eth) || lean.atomic_ack_eth == full.atomic_ack_eth);
    EXPECT_TRUE(!lean.has(ExtHeader::immdt) || lean.immediate == full.immediate);
    EXPECT_TRUE(!lean.has(ExtHeader::ieth) || lean.invalidate_rkey == full.invalidate_rkey);
    EXPECT_EQ(lean.bth_offset, full.bth_offset);
    EXPECT_EQ(lean.payload_offset, full.payload_offset);
    EXPECT_EQ(lean.ip_datagram.data(), full.ip_datagram.data());
    EXPECT_EQ(lean.ip_datagram.size(), full.ip_datagram.size());
    EXPECT_EQ(lean.payload.data(), full.payload.data());
    EXPECT_EQ(lean.payload.size(), full.payload.size());
    EXPECT_EQ(lean.icrc, full.icrc);
}

std::vector<Bytes> built_frames() {
    std::vector<Bytes> frames;
    for (unsigned op = 0; op < 256; ++op) {
        const auto opcode = static_cast<Opcode>(op);
        if (!opcode_info(opcode).valid()) {
            continue;
        }
        for (const IpVersion version : {IpVersion::ipv4, IpVersion::ipv6}) {
            for (const bool vlan : {false, true}) {
                const bool payload = opcode_info(opcode).has_payload;
                for (std::size_t length : {0, 1, 2, 3, 64}) {
                    if (payload || length == 0) {
                        frames.push_back(build(headers(opcode, version, vlan), length));
                    }
                }
            }
        }
    }
    return frames;
}

TEST(ParsePaths, BuiltFramesOfEveryShape) {
    const std::vector<Bytes> frames = built_frames();
    ASSERT_GT(frames.size(), 100U);
    for (const Bytes& f : frames) {
        ASSERT_FALSE(f.empty());
        ParsedFrame p;
        ASSERT_EQ(parse_roce_frame(f, p), ParseError::ok);
        expect_same(f);
        expect_same(f, {.verify_ipv4_checksum = false, .verify_icrc = false});
        expect_same_transport_fields(f);
        expect_same_transport_fields(f, false);
    }
}

// Every byte of every built frame changed on its own: each check either path makes is crossed.
TEST(ParsePaths, EverySingleByteChanged) {
    for (const Bytes& original : built_frames()) {
        for (std::size_t i = 0; i < original.size(); ++i) {
            for (const std::uint8_t flip : {0x01, 0x10, 0x80, 0xff}) {
                Bytes f = original;
                f[i] = static_cast<std::uint8_t>(f[i] ^ flip);
                expect_same(f);
                expect_same(f, {.verify_ipv4_checksum = false, .verify_icrc = false});
                expect_same_transport_fields(f);
                if (::testing::Test::HasFailure()) {
                    FAIL() << "byte " << i << " ^ " << int{flip} << " of a " << original.size()
                           << "-byte frame";
                }
            }
        }
        // Cut short, and with bytes after the datagram.
        for (std::size_t cut = 0; cut < original.size(); cut += 7) {
            expect_same(Bytes(original.begin(), original.begin() + static_cast<long>(cut)));
        }
        Bytes longer = original;
        longer.insert(longer.end(), 9, 0xab);
        expect_same(longer);
    }
}

TEST(ParsePaths, RandomFramesSteeredPastTheFirstChecks) {
    std::mt19937_64 rng(0x5eed);
    for (int i = 0; i < 100000; ++i) {
        Bytes f(34 + rng() % 120);
        for (auto& b : f) {
            b = static_cast<std::uint8_t>(rng());
        }
        store_be16(&f[12], ethertype_ipv4);
        f[14] = 0x45;
        store_be16(&f[16], static_cast<std::uint16_t>(f.size() - 14 - rng() % 3));
        f[20] = 0x40;
        f[21] = 0;
        f[23] = ip_protocol_udp;
        store_be16(&f[24], 0);
        store_be16(&f[24], ipv4_header_checksum(std::span(f).subspan(14, 20)));
        if (f.size() >= 42) {
            store_be16(&f[36], roce_udp_port);
            store_be16(&f[38], static_cast<std::uint16_t>(load_be16(&f[16]) - 20));
        }
        if (f.size() >= 44 && rng() % 2 == 0) {
            f[43] = static_cast<std::uint8_t>(f[43] & 0xf0U); // tver 0
        }
        const bool verify = rng() % 2 == 0;
        expect_same(f, {.verify_ipv4_checksum = true, .verify_icrc = verify});
        expect_same_transport_fields(f, verify);
        if (::testing::Test::HasFailure()) {
            FAIL() << "random frame " << i;
        }
    }
}

TEST(ParsePaths, LinuxRxeCaptures) {
    const captures::Loaded& loaded = captures::all();
    ASSERT_FALSE(loaded.captures.empty()) << loaded.error;
    std::size_t frames = 0;
    for (const captures::Capture& c : loaded.captures) {
        for (const auto& record : c.file.records) {
            expect_same(record.data);
            expect_same_transport_fields(record.data);
            ++frames;
        }
    }
    EXPECT_GT(frames, 100U);
}

} // namespace
} // namespace prdma::roce
