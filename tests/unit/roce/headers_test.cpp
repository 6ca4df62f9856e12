// Header encoders and decoders against hand-laid-out bytes, round trips, every decoder error,
// and the AETH syndrome helpers.
#include <array>
#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

#include <prdma/roce/headers.hpp>
#include <prdma/roce/opcodes.hpp>

namespace prdma::roce {
namespace {

using Bytes = std::vector<std::uint8_t>;

constexpr MacAddress mac_a = {0x52, 0x54, 0x00, 0x77, 0x00, 0x11};
constexpr MacAddress mac_b = {0x52, 0x54, 0x00, 0x77, 0x00, 0x12};

TEST(Ethernet, UntaggedAndTagged) {
    EthernetHeader h;
    h.dst = mac_a;
    h.src = mac_b;
    h.ether_type = ethertype_ipv6;
    Bytes out(18, 0xee);
    ASSERT_EQ(encode_ethernet(h, out), 14U);
    EXPECT_EQ(out, (Bytes{0x52, 0x54, 0x00, 0x77, 0x00, 0x11, 0x52, 0x54, 0x00, 0x77, 0x00, 0x12,
                          0x86, 0xdd, 0xee, 0xee, 0xee, 0xee}));
    EthernetHeader back;
    ASSERT_EQ(decode_ethernet(out, back), HeaderError::ok);
    EXPECT_EQ(back, h);

    h.vlan = true;
    h.vlan_tci = 0xa00c; // PCP 5, VLAN 12
    ASSERT_EQ(encode_ethernet(h, out), 18U);
    EXPECT_EQ(Bytes(out.begin() + 12, out.end()), (Bytes{0x81, 0x00, 0xa0, 0x0c, 0x86, 0xdd}));
    ASSERT_EQ(decode_ethernet(out, back), HeaderError::ok);
    EXPECT_EQ(back, h);
    EXPECT_EQ(back.vlan_id(), 12);
    EXPECT_EQ(back.vlan_pcp(), 5);
    EXPECT_EQ(back.size(), 18U);

    EXPECT_EQ(decode_ethernet(std::span(out).first(13), back), HeaderError::too_short);
    EXPECT_EQ(decode_ethernet(std::span(out).first(17), back), HeaderError::too_short)
        << "a tag needs its four bytes";
    EXPECT_EQ(encode_ethernet(h, std::span(out).first(17)), 0U);
}

// The classic example header: 192.168.0.1 -> 192.168.0.199, UDP, 115 bytes, checksum 0xb861.
constexpr std::array<std::uint8_t, 20> example_ipv4 = {0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40,
                                                       0x00, 0x40, 0x11, 0xb8, 0x61, 0xc0, 0xa8,
                                                       0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7};

TEST(Ipv4, EncodeKnownHeader) {
    Ipv4Header h;
    h.total_length = 0x73;
    h.src = 0xc0a80001;
    h.dst = 0xc0a800c7;
    h.checksum = 0x1111; // ignored
    Bytes out(20);
    ASSERT_EQ(encode_ipv4(h, out), 20U);
    EXPECT_EQ(out, Bytes(example_ipv4.begin(), example_ipv4.end()));
    EXPECT_EQ(ipv4_header_checksum(out), 0xb861);
    EXPECT_EQ(encode_ipv4(h, std::span(out).first(19)), 0U);
}

TEST(Ipv4, EncodeAlwaysSetsDontFragment) {
    Ipv4Header h;
    h.dont_fragment = false;
    h.more_fragments = true;
    h.fragment_offset = 7;
    h.tos = make_tos(46, 1);
    h.ttl = 5;
    h.total_length = 20;
    Bytes out(20);
    encode_ipv4(h, out);
    EXPECT_EQ(out[6], 0x40);
    EXPECT_EQ(out[7], 0x00);
    EXPECT_EQ(out[1], 0xb9); // EF + ECT(1)
    EXPECT_EQ(out[8], 5);
    Ipv4Header back;
    ASSERT_EQ(decode_ipv4(out, back), HeaderError::ok);
    EXPECT_TRUE(back.dont_fragment);
    EXPECT_FALSE(back.more_fragments);
    EXPECT_EQ(back.dscp(), 46);
    EXPECT_EQ(back.ecn(), 1);
}

TEST(Ipv4, DecodeKnownHeaderAndEveryError) {
    Ipv4Header h;
    ASSERT_EQ(decode_ipv4(example_ipv4, h), HeaderError::ok);
    EXPECT_EQ(h.header_length, 20);
    EXPECT_EQ(h.total_length, 0x73);
    EXPECT_EQ(h.ttl, 64);
    EXPECT_EQ(h.protocol, ip_protocol_udp);
    EXPECT_EQ(h.checksum, 0xb861);
    EXPECT_EQ(h.src, 0xc0a80001U);
    EXPECT_EQ(h.dst, 0xc0a800c7U);
    EXPECT_TRUE(h.dont_fragment);

    Bytes b(example_ipv4.begin(), example_ipv4.end());
    EXPECT_EQ(decode_ipv4(std::span(b).first(19), h), HeaderError::too_short);
    b[0] = 0x65;
    EXPECT_EQ(decode_ipv4(b, h), HeaderError::bad_version);
    b[0] = 0x44;
    EXPECT_EQ(decode_ipv4(b, h), HeaderError::bad_header_length) << "IHL 4";
    b[0] = 0x46;
    EXPECT_EQ(decode_ipv4(b, h), HeaderError::bad_header_length) << "options past the span";
    b[0] = 0x45;
    b[8] = 63; // TTL changed, checksum not
    EXPECT_EQ(decode_ipv4(b, h), HeaderError::bad_checksum);
    EXPECT_EQ(decode_ipv4(b, h, false), HeaderError::ok) << "checksum check can be skipped";
    b[8] = 64;
    store_be16(&b[2], 19);
    store_be16(&b[10], ipv4_header_checksum(b));
    EXPECT_EQ(decode_ipv4(b, h), HeaderError::bad_length) << "total length below the header";
}

TEST(Ipv4, OptionsAreSkippedAndChecksummed) {
    Bytes b(example_ipv4.begin(), example_ipv4.end());
    b[0] = 0x46;
    b.insert(b.end(), {0x94, 0x04, 0x00, 0x00}); // Router Alert
    store_be16(&b[10], ipv4_header_checksum(b));
    Ipv4Header h;
    ASSERT_EQ(decode_ipv4(b, h), HeaderError::ok);
    EXPECT_EQ(h.header_length, 24);
    b[21] ^= 1;
    EXPECT_EQ(decode_ipv4(b, h), HeaderError::bad_checksum) << "options are covered";
}

TEST(Ipv6, RoundTripAndErrors) {
    Ipv6Header h;
    h.traffic_class = 0xab;
    h.flow_label = 0x12345;
    h.payload_length = 100;
    h.hop_limit = 7;
    for (std::size_t i = 0; i < 16; ++i) {
        h.src[i] = static_cast<std::uint8_t>(i);
        h.dst[i] = static_cast<std::uint8_t>(0xf0 + i);
    }
    Bytes out(40);
    ASSERT_EQ(encode_ipv6(h, out), 40U);
    EXPECT_EQ(Bytes(out.begin(), out.begin() + 8),
              (Bytes{0x6a, 0xb1, 0x23, 0x45, 0x00, 0x64, 0x11, 0x07}));
    EXPECT_EQ(out[8], 0);
    EXPECT_EQ(out[39], 0xff);
    Ipv6Header back;
    ASSERT_EQ(decode_ipv6(out, back), HeaderError::ok);
    EXPECT_EQ(back, h);
    EXPECT_EQ(decode_ipv6(std::span(out).first(39), back), HeaderError::too_short);
    out[0] = 0x4a;
    EXPECT_EQ(decode_ipv6(out, back), HeaderError::bad_version);
    h.flow_label = 0xfffffff; // only 20 bits go out
    encode_ipv6(h, out);
    EXPECT_EQ(out[0], 0x6a);
    EXPECT_EQ(load_be32(out.data()) & 0xfffffU, 0xfffffU);
}

TEST(Udp, ChecksumIsAlwaysZeroOnEncode) {
    const UdpHeader h{0xc123, roce_udp_port, 28, 0xbeef};
    Bytes out(8);
    ASSERT_EQ(encode_udp(h, out), 8U);
    EXPECT_EQ(out, (Bytes{0xc1, 0x23, 0x12, 0xb7, 0x00, 0x1c, 0x00, 0x00}));
    UdpHeader back;
    ASSERT_EQ(decode_udp(out, back), HeaderError::ok);
    EXPECT_EQ(back.src_port, 0xc123);
    EXPECT_EQ(back.dst_port, 4791);
    EXPECT_EQ(back.length, 28);
    EXPECT_EQ(back.checksum, 0);
    EXPECT_EQ(decode_udp(std::span(out).first(7), back), HeaderError::too_short);
    out[5] = 7;
    EXPECT_EQ(decode_udp(out, back), HeaderError::bad_length);
}

TEST(Bth, EveryFieldInItsBits) {
    Bth h;
    h.opcode = Opcode::rc_rdma_write_only;
    h.solicited = true;
    h.migreq = true;
    h.pad_count = 3;
    h.tver = 0;
    h.pkey = 0x8001;
    h.fecn = true;
    h.becn = true;
    h.dest_qp = 0xabcdef;
    h.ack_req = true;
    h.psn = 0xfedcba;
    Bytes out(12);
    ASSERT_EQ(encode_bth(h, out), 12U);
    EXPECT_EQ(out, (Bytes{0x0a, 0xf0, 0x80, 0x01, 0xc0, 0xab, 0xcd, 0xef, 0x80, 0xfe, 0xdc, 0xba}));
    Bth back;
    ASSERT_EQ(decode_bth(out, back), HeaderError::ok);
    EXPECT_EQ(back, h);

    h = Bth{};
    h.becn = true;
    h.tver = 0xf;
    h.dest_qp = 0x1000001; // bit 24 is not a QPN bit
    encode_bth(h, out);
    EXPECT_EQ(out[1], 0x0f);
    EXPECT_EQ(out[4], 0x40);
    EXPECT_EQ(load_be24(&out[5]), 1U);

    // Reserved bits are ignored on decode.
    out[4] |= 0x3f;
    out[8] |= 0x7f;
    ASSERT_EQ(decode_bth(out, back), HeaderError::ok);
    EXPECT_TRUE(back.becn);
    EXPECT_FALSE(back.fecn);
    EXPECT_FALSE(back.ack_req);
    EXPECT_EQ(decode_bth(std::span(out).first(11), back), HeaderError::too_short);
    EXPECT_EQ(encode_bth(h, std::span(out).first(11)), 0U);
}

template <typename H, typename Encode, typename Decode>
void expect_round_trip(const H& h, const Bytes& wire, Encode encode, Decode decode) {
    Bytes out(wire.size() + 4, 0xee);
    ASSERT_EQ(encode(h, std::span(out)), wire.size());
    EXPECT_EQ(Bytes(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(wire.size())), wire);
    EXPECT_EQ(out[wire.size()], 0xee) << "nothing written past the header";
    H back{};
    ASSERT_EQ(decode(std::span<const std::uint8_t>(wire), back), HeaderError::ok);
    EXPECT_EQ(back, h);
    EXPECT_EQ(decode(std::span<const std::uint8_t>(wire).first(wire.size() - 1), back),
              HeaderError::too_short);
    Bytes tiny(wire.size() - 1, 0xee);
    EXPECT_EQ(encode(h, std::span(tiny)), 0U);
    EXPECT_EQ(tiny, Bytes(wire.size() - 1, 0xee)) << "a short buffer is left alone";
}

TEST(ExtensionHeaders, RethLayout) {
    expect_round_trip(
        Reth{0x0001020304050607, 0x08090a0b, 0x0c0d0e0f},
        {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
        [](const Reth& h, std::span<std::uint8_t> o) { return encode_reth(h, o); },
        [](std::span<const std::uint8_t> i, Reth& h) { return decode_reth(i, h); });
}

TEST(ExtensionHeaders, AethLayout) {
    expect_round_trip(
        Aeth{nak_syndrome(NakCode::remote_access_error), 0x123456}, {0x62, 0x12, 0x34, 0x56},
        [](const Aeth& h, std::span<std::uint8_t> o) { return encode_aeth(h, o); },
        [](std::span<const std::uint8_t> i, Aeth& h) { return decode_aeth(i, h); });
}

TEST(ExtensionHeaders, AtomicEthLayout) {
    Bytes wire(28);
    for (std::size_t i = 0; i < wire.size(); ++i) {
        wire[i] = static_cast<std::uint8_t>(0x10 + i);
    }
    expect_round_trip(
        AtomicEth{0x1011121314151617, 0x18191a1b, 0x1c1d1e1f20212223, 0x2425262728292a2b}, wire,
        [](const AtomicEth& h, std::span<std::uint8_t> o) { return encode_atomic_eth(h, o); },
        [](std::span<const std::uint8_t> i, AtomicEth& h) { return decode_atomic_eth(i, h); });
}

TEST(ExtensionHeaders, AtomicAckEthLayout) {
    expect_round_trip(
        AtomicAckEth{0x3df67fe70f7c5aeb}, {0x3d, 0xf6, 0x7f, 0xe7, 0x0f, 0x7c, 0x5a, 0xeb},
        [](const AtomicAckEth& h, std::span<std::uint8_t> o) {
            return encode_atomic_ack_eth(h, o);
        },
        [](std::span<const std::uint8_t> i, AtomicAckEth& h) {
            return decode_atomic_ack_eth(i, h);
        });
}

TEST(ExtensionHeaders, DethLayout) {
    expect_round_trip(
        Deth{gsi_qkey, 1}, {0x80, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01},
        [](const Deth& h, std::span<std::uint8_t> o) { return encode_deth(h, o); },
        [](std::span<const std::uint8_t> i, Deth& h) { return decode_deth(i, h); });
}

TEST(ExtensionHeaders, ImmDtAndIeth) {
    expect_round_trip(
        std::uint32_t{0xdeadbeef}, {0xde, 0xad, 0xbe, 0xef},
        [](std::uint32_t v, std::span<std::uint8_t> o) { return encode_immdt(v, o); },
        [](std::span<const std::uint8_t> i, std::uint32_t& v) { return decode_immdt(i, v); });
    expect_round_trip(
        std::uint32_t{0x00000954}, {0x00, 0x00, 0x09, 0x54},
        [](std::uint32_t v, std::span<std::uint8_t> o) { return encode_ieth(v, o); },
        [](std::span<const std::uint8_t> i, std::uint32_t& v) { return decode_ieth(i, v); });
}

TEST(Aeth, Classification) {
    EXPECT_EQ(classify_aeth(ack_syndrome()), AethClass::ack);
    EXPECT_EQ(ack_syndrome(), 0x1f);
    EXPECT_EQ(aeth_value(ack_syndrome(5)), 5);
    EXPECT_EQ(aeth_type(0x1f), AckType::ack);
    for (std::uint8_t timer = 0; timer < 32; ++timer) {
        const std::uint8_t s = rnr_nak_syndrome(timer);
        EXPECT_EQ(aeth_type(s), AckType::rnr_nak);
        EXPECT_EQ(classify_aeth(s), AethClass::rnr_nak);
        EXPECT_EQ(aeth_value(s), timer);
    }
    EXPECT_EQ(nak_syndrome(NakCode::psn_sequence_error), 0x60);
    EXPECT_EQ(classify_aeth(0x60), AethClass::nak_psn_sequence_error);
    EXPECT_EQ(classify_aeth(0x61), AethClass::nak_invalid_request);
    EXPECT_EQ(classify_aeth(0x62), AethClass::nak_remote_access_error);
    EXPECT_EQ(classify_aeth(0x63), AethClass::nak_remote_operational_error);
    EXPECT_EQ(classify_aeth(0x64), AethClass::nak_invalid_rd_request);
    EXPECT_EQ(classify_aeth(0x65), AethClass::nak_reserved_code);
    EXPECT_EQ(classify_aeth(0x7f), AethClass::nak_reserved_code);
    EXPECT_EQ(classify_aeth(0x40), AethClass::reserved_type);
    EXPECT_EQ(classify_aeth(0x80 | 0x1f), AethClass::ack) << "bit 7 is reserved";
    for (const auto code :
         {NakCode::psn_sequence_error, NakCode::invalid_request, NakCode::remote_access_error,
          NakCode::remote_operational_error, NakCode::invalid_rd_request}) {
        EXPECT_EQ(aeth_type(nak_syndrome(code)), AckType::nak);
        EXPECT_EQ(aeth_value(nak_syndrome(code)), static_cast<std::uint8_t>(code));
    }
    EXPECT_EQ(aeth_class_name(AethClass::nak_remote_access_error), "nak_remote_access_error");
}

TEST(Aeth, RnrTimerTable) {
    EXPECT_EQ(rnr_timer_ns(0), 655'360'000U) << "0 is the longest";
    EXPECT_EQ(rnr_timer_ns(1), 10'000U);
    EXPECT_EQ(rnr_timer_ns(12), 640'000U);
    EXPECT_EQ(rnr_timer_ns(14), 1'280'000U);
    EXPECT_EQ(rnr_timer_ns(18), 5'120'000U);
    EXPECT_EQ(rnr_timer_ns(31), 491'520'000U);
    for (std::uint8_t code = 2; code < 32; ++code) {
        EXPECT_GT(rnr_timer_ns(code), rnr_timer_ns(code - 1)) << int{code};
    }
    // Codes 2 and up go by factors of 1.5 and 4/3 in turn, from 0.02 ms.
    for (std::uint8_t code = 4; code < 32; ++code) {
        EXPECT_EQ(rnr_timer_ns(code), 2 * rnr_timer_ns(code - 2)) << int{code};
    }
    EXPECT_EQ(rnr_timer_ns(32 + 1), rnr_timer_ns(1)) << "only 5 bits count";
}

TEST(HeaderError, Names) {
    EXPECT_EQ(header_error_name(HeaderError::ok), "ok");
    EXPECT_EQ(header_error_name(HeaderError::bad_checksum), "bad_checksum");
    EXPECT_EQ(header_error_name(static_cast<HeaderError>(200)), "unknown");
}

} // namespace
} // namespace prdma::roce
