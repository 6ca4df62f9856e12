// perftest's out-of-band messages, checked against strings written out by hand from perftest's
// formats (perftest_communication.h: KEY_PRINT_FMT, KEY_PRINT_FMT_GID, KEY_MSG_SIZE 59,
// KEY_MSG_SIZE_GID 108; check_mtu's "%d" of the ibv_mtu value; xchg_bw_reports' byte order).
#include <cstring>
#include <string>

#include <gtest/gtest.h>

#include "perftest_wire.hpp"

namespace prdma::perf {
namespace {

KeyMessage sample_keys() {
    KeyMessage k;
    k.lid = 0;
    k.out_reads = 0x10;
    k.qpn = 0x11;
    k.psn = 0xabcdef;
    k.rkey = 0x1234;
    k.vaddr = 0x7f12345678a0;
    k.gid = rdma::Gid::from_ipv4(0x0a000001); // ::ffff:10.0.0.1
    k.srqn = 0;
    return k;
}

TEST(PerftestWire, KeyMessageWithGidIsPerftestsFormat) {
    const std::string expected = "0000:0010:000011:abcdef:00001234:00007f12345678a0:"
                                 "00:00:00:00:00:00:00:00:00:00:ff:ff:0a:00:00:01:00000000:";
    const std::string message = format_keys(sample_keys(), true);
    ASSERT_EQ(message.size(), key_message_size_gid);
    EXPECT_EQ(message.substr(0, expected.size()), expected);
    EXPECT_EQ(expected.size(), key_message_size_gid - 1); // then perftest's NUL
    EXPECT_EQ(message.back(), '\0');
}

TEST(PerftestWire, KeyMessageWithoutGidIsPerftestsFormat) {
    const std::string expected = "0000:0010:000011:abcdef:00001234:00007f12345678a0:00000000";
    const std::string message = format_keys(sample_keys(), false);
    ASSERT_EQ(message.size(), key_message_size);
    EXPECT_EQ(std::string(message.c_str()), expected);
}

TEST(PerftestWire, KeysRoundTrip) {
    for (const bool with_gid : {true, false}) {
        KeyMessage keys = sample_keys();
        if (!with_gid) {
            keys.gid = {};
        }
        auto parsed = parse_keys(format_keys(keys, with_gid), with_gid);
        ASSERT_TRUE(parsed.ok()) << parsed.error().to_string();
        EXPECT_EQ(parsed.value(), keys);
    }
}

TEST(PerftestWire, ParsesWhatAPerftestPeerSends) {
    // As a hardware NIC's perftest would send it: upper-case is not what sprintf makes, but
    // sscanf/strtol accept it, and so do we.
    std::string message = "0000:0010:0001A2:0B0C0D:00C0FFEE:000055d4c8e01000:"
                          "00:00:00:00:00:00:00:00:00:00:ff:ff:c0:a8:01:02:00000000:";
    message.push_back('\0');
    auto parsed = parse_keys(message, true);
    ASSERT_TRUE(parsed.ok()) << parsed.error().to_string();
    EXPECT_EQ(parsed->qpn, 0x1a2U);
    EXPECT_EQ(parsed->psn, 0x0b0c0dU);
    EXPECT_EQ(parsed->rkey, 0xc0ffeeU);
    EXPECT_EQ(parsed->vaddr, 0x55d4c8e01000ULL);
    EXPECT_EQ(parsed->gid, rdma::Gid::from_ipv4(0xc0a80102));
}

TEST(PerftestWire, RejectsMalformedKeys) {
    std::string good = format_keys(sample_keys(), true);
    ASSERT_TRUE(parse_keys(good, true).ok());
    // Wrong size, missing NUL, a non-hex digit, a missing separator, the other form's size.
    EXPECT_FALSE(parse_keys(good.substr(0, 107), true).ok());
    std::string no_nul = good;
    no_nul.back() = 'x';
    EXPECT_FALSE(parse_keys(no_nul, true).ok());
    std::string bad_digit = good;
    bad_digit[10] = 'g';
    EXPECT_FALSE(parse_keys(bad_digit, true).ok());
    std::string bad_separator = good;
    bad_separator[4] = '-';
    EXPECT_FALSE(parse_keys(bad_separator, true).ok());
    EXPECT_FALSE(parse_keys(format_keys(sample_keys(), false), true).ok());
    const auto error = parse_keys(bad_digit, true);
    EXPECT_EQ(error.code(), StatusCode::invalid_parameter);
    EXPECT_NE(error.error().message().find("malformed perftest key message"), std::string::npos);
}

TEST(PerftestWire, VersionIsSixteenNulPaddedBytes) {
    const VersionMessage message = format_version(perftest_version);
    EXPECT_EQ(std::string(message.data()), "6.06");
    for (std::size_t i = 4; i < message.size(); ++i) {
        EXPECT_EQ(message[i], '\0');
    }
    auto parsed = parse_version(message);
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(parsed.value(), "6.06");
    // Compatible with a newer perftest (>= 5.70 required), and older than 6.28 so a newer
    // perftest skips negotiate_params.
    EXPECT_GE(version_number(perftest_version), minimum_peer_version);
    EXPECT_LT(version_number(perftest_version), 6.28);
    VersionMessage unterminated;
    unterminated.fill('7');
    EXPECT_FALSE(parse_version(unterminated).ok());
}

TEST(PerftestWire, SysDataIsTwoBigEndianInts) {
    const auto message = format_sys_data(4096, 64);
    const std::uint8_t expected[8] = {0, 0, 0x10, 0, 0, 0, 0, 0x40};
    EXPECT_EQ(std::memcmp(message.data(), expected, 8), 0);
    const SysData parsed = parse_sys_data(message);
    EXPECT_EQ(parsed.cycle_buffer, 4096U);
    EXPECT_EQ(parsed.cache_line_size, 64U);
}

TEST(PerftestWire, MtuIsTheEnumValueAsText) {
    const auto message = format_mtu(rdma::Mtu::mtu_1024);
    EXPECT_EQ(message[0], '3'); // IBV_MTU_1024
    EXPECT_EQ(message[1], '\0');
    auto parsed = parse_mtu(format_mtu(rdma::Mtu::mtu_4096));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(parsed.value(), rdma::Mtu::mtu_4096);
    const char zero[2] = {'0', '\0'};
    EXPECT_FALSE(parse_mtu(std::span<const char, 2>(zero)).ok());
    const char two_digits[2] = {'1', '0'};
    EXPECT_FALSE(parse_mtu(std::span<const char, 2>(two_digits)).ok());
}

TEST(PerftestWire, BwReportIsBigEndian) {
    BwReport report;
    report.size = 65536;
    report.iterations = 5000;
    report.bw_peak = 1.5;
    report.bw_average = 1234.5;
    report.msg_rate = 0.25;
    const auto fields = format_bw_report(report);
    const std::uint8_t size[8] = {0, 0, 0, 0, 0, 1, 0, 0};
    EXPECT_EQ(std::memcmp(fields[0].data(), size, 8), 0);
    const std::uint8_t iterations[8] = {0, 0, 0, 0, 0, 0, 0x13, 0x88};
    EXPECT_EQ(std::memcmp(fields[1].data(), iterations, 8), 0);
    const std::uint8_t one_and_a_half[8] = {0x3f, 0xf8, 0, 0, 0, 0, 0, 0}; // IEEE 754, swapped
    EXPECT_EQ(std::memcmp(fields[2].data(), one_and_a_half, 8), 0);
    const BwReport parsed = parse_bw_report(fields);
    EXPECT_EQ(parsed.size, report.size);
    EXPECT_EQ(parsed.iterations, report.iterations);
    EXPECT_EQ(parsed.bw_average, report.bw_average);
    EXPECT_EQ(parsed.msg_rate, report.msg_rate);
}

} // namespace
} // namespace prdma::perf
