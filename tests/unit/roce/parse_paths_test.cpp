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
#include "sample_headers.hpp"

namespace prdma::roce {
namespace {

using Bytes = std::vector<std::uint8_t>;

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

// The fields a transport reads (transport_fields_only fills no more): the same in both.
void expect_same_transport(const ParsedFrame& a, const ParsedFrame& b) {
    ASSERT_EQ(a.ip_version, b.ip_version);
    if (a.ip_version == IpVersion::ipv4) {
        EXPECT_EQ(a.ipv4.src, b.ipv4.src);
    } else {
        EXPECT_EQ(a.ipv6.src, b.ipv6.src);
    }
    EXPECT_EQ(a.bth, b.bth);
    ASSERT_EQ(a.info, b.info);
    EXPECT_TRUE(!a.has(ExtHeader::reth) || a.reth == b.reth);
    EXPECT_TRUE(!a.has(ExtHeader::aeth) || a.aeth == b.aeth);
    EXPECT_TRUE(!a.has(ExtHeader::atomic_eth) || a.atomic_eth == b.atomic_eth);
    EXPECT_TRUE(!a.has(ExtHeader::atomic_ack_eth) || a.atomic_ack_eth == b.atomic_ack_eth);
    EXPECT_TRUE(!a.has(ExtHeader::deth) || a.deth == b.deth);
    EXPECT_TRUE(!a.has(ExtHeader::immdt) || a.immediate == b.immediate);
    EXPECT_TRUE(!a.has(ExtHeader::ieth) || a.invalidate_rkey == b.invalidate_rkey);
    EXPECT_EQ(a.bth_offset, b.bth_offset);
    EXPECT_EQ(a.payload_offset, b.payload_offset);
    EXPECT_EQ(a.ip_datagram.data(), b.ip_datagram.data());
    EXPECT_EQ(a.ip_datagram.size(), b.ip_datagram.size());
    EXPECT_EQ(a.payload.data(), b.payload.data());
    EXPECT_EQ(a.payload.size(), b.payload.size());
    EXPECT_EQ(a.icrc, b.icrc);
}

// Same error, and on success the same fields: all of them, or (transport_fields_only) those a
// transport reads.
void expect_same(const Bytes& frame, ParseOptions options = {}) {
    ParsedFrame fast;
    ParsedFrame full;
    const ParseError a = parse_roce_frame(frame, fast, options);
    const bool all_fields = !options.transport_fields_only;
    options.transport_fields_only = false;
    const ParseError b = parse_roce_frame_full(frame, full, options);
    ASSERT_EQ(parse_error_name(a), parse_error_name(b));
    if (a != ParseError::ok) {
        return;
    }
    expect_same_transport(fast, full);
    if (all_fields) {
        EXPECT_EQ(fast.eth, full.eth);
        EXPECT_TRUE(fast.ip_version == IpVersion::ipv4 ? fast.ipv4 == full.ipv4
                                                       : fast.ipv6 == full.ipv6);
        EXPECT_EQ(fast.udp, full.udp);
        EXPECT_EQ(fast.ip_offset, full.ip_offset);
        EXPECT_EQ(fast.udp_offset, full.udp_offset);
    }
}

void expect_same_transport_fields(const Bytes& frame, bool verify = true) {
    expect_same(
        frame,
        {.verify_ipv4_checksum = verify, .verify_icrc = verify, .transport_fields_only = true});
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
                        frames.push_back(build(sample_headers(opcode, version, vlan), length));
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
