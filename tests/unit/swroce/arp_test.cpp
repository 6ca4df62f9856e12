// swroce ARP: wire format against hand-written RFC 826 frames, every malformed frame as its own
// error, the neighbour table's merge/ageing/capacity rules, and the resolver's request, retry,
// give-up, reply and resolve paths. Time is TSC cycles at a made-up 1 MHz (1 cycle = 1 us).
#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "arp.hpp"

namespace prdma::swroce {
namespace {

constexpr std::uint64_t tsc_hz = 1'000'000;
constexpr std::uint64_t ms = tsc_hz / 1000;

constexpr MacAddress mac_a = {0x52, 0x54, 0x00, 0x12, 0x34, 0x56};
constexpr MacAddress mac_b = {0x52, 0x54, 0x00, 0xab, 0xcd, 0xef};
constexpr MacAddress mac_c = {0x02, 0x00, 0x00, 0x00, 0x00, 0x0c};
constexpr std::uint32_t ip_a = 0x0a000001; // 10.0.0.1
constexpr std::uint32_t ip_b = 0x0a000002; // 10.0.0.2
constexpr std::uint32_t ip_c = 0x0a000003; // 10.0.0.3

// Host 10.0.0.1 at 52:54:00:12:34:56 asks who has 10.0.0.2, laid out as a Linux capture shows
// it (RFC 826 field order, target MAC zero), padded to 60 bytes as the kernel sends it.
constexpr std::array<std::uint8_t, 60> linux_request = {
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff,             // destination: broadcast
    0x52, 0x54, 0x00, 0x12, 0x34, 0x56,             // source
    0x08, 0x06,                                     // EtherType ARP
    0x00, 0x01,                                     // ar$hrd Ethernet
    0x08, 0x00,                                     // ar$pro IPv4
    0x06, 0x04,                                     // ar$hln, ar$pln
    0x00, 0x01,                                     // ar$op request
    0x52, 0x54, 0x00, 0x12, 0x34, 0x56,             // ar$sha
    0x0a, 0x00, 0x00, 0x01,                         // ar$spa 10.0.0.1
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00,             // ar$tha
    0x0a, 0x00, 0x00, 0x02,                         // ar$tpa 10.0.0.2
    0,    0,    0,    0,    0,    0,    0, 0, 0, 0, // padding to 60
    0,    0,    0,    0,    0,    0,    0, 0};

// 10.0.0.2 at 52:54:00:ab:cd:ef answers, unicast.
constexpr std::array<std::uint8_t, 60> linux_reply = {
    0x52, 0x54, 0x00, 0x12, 0x34, 0x56, 0x52, 0x54, 0x00, 0xab, 0xcd, 0xef, 0x08, 0x06, 0x00,
    0x01, 0x08, 0x00, 0x06, 0x04, 0x00, 0x02, 0x52, 0x54, 0x00, 0xab, 0xcd, 0xef, 0x0a, 0x00,
    0x00, 0x02, 0x52, 0x54, 0x00, 0x12, 0x34, 0x56, 0x0a, 0x00, 0x00, 0x01, 0,    0,    0,
    0,    0,    0,    0,    0,    0,    0,    0,    0,    0,    0,    0,    0,    0,    0};

std::vector<std::uint8_t> bytes_of(const ArpFrame& frame) {
    return {frame.bytes.begin(), frame.bytes.begin() + static_cast<std::ptrdiff_t>(frame.length)};
}

// ---- wire format ----

TEST(ArpWire, RequestMatchesHandWrittenFrame) {
    ASSERT_EQ(linux_request.size(), ethernet_min_frame_size);
    std::array<std::uint8_t, arp_frame_buffer_size> out{};
    out.fill(0xee); // padding must be written, not left over
    const std::size_t length = build_arp_request(out, mac_a, ip_a, ip_b);
    ASSERT_EQ(length, ethernet_min_frame_size);
    EXPECT_TRUE(std::equal(linux_request.begin(), linux_request.end(), out.begin()));
}

TEST(ArpWire, ReplyMatchesHandWrittenFrame) {
    std::array<std::uint8_t, arp_frame_buffer_size> out{};
    ASSERT_EQ(build_arp_reply(out, mac_b, ip_b, mac_a, ip_a), 60U);
    EXPECT_TRUE(std::equal(linux_reply.begin(), linux_reply.end(), out.begin()));
}

TEST(ArpWire, ParsesHandWrittenFrames) {
    const ArpParseResult request = parse_arp(linux_request);
    ASSERT_TRUE(request.ok()) << arp_error_name(request.error);
    EXPECT_EQ(request.message, (ArpMessage{ArpOp::request, mac_a, ip_a, MacAddress{}, ip_b}));

    const ArpParseResult reply = parse_arp(linux_reply);
    ASSERT_TRUE(reply.ok()) << arp_error_name(reply.error);
    EXPECT_EQ(reply.message, (ArpMessage{ArpOp::reply, mac_b, ip_b, mac_a, ip_a}));
}

TEST(ArpWire, UnpaddedAndOverlongFramesParse) {
    // An af_packet capture of a locally sent ARP shows 42 bytes; a NIC may deliver 60 + FCS.
    const std::span<const std::uint8_t> unpadded(linux_request.data(), arp_unpadded_frame_size);
    EXPECT_TRUE(parse_arp(unpadded).ok());
    std::vector<std::uint8_t> longer(linux_request.begin(), linux_request.end());
    longer.resize(1514, 0x5a);
    EXPECT_TRUE(parse_arp(longer).ok());
}

TEST(ArpWire, EncodeParseRoundTrip) {
    const ArpMessage messages[] = {
        {ArpOp::request, mac_a, ip_a, MacAddress{}, ip_b},
        {ArpOp::reply, mac_b, 0xc0a80114, mac_c, 0xffffffff},
        {ArpOp::request, mac_c, 0, MacAddress{}, ip_c}, // RFC 5227 probe
    };
    for (const ArpMessage& message : messages) {
        std::array<std::uint8_t, arp_frame_buffer_size> out{};
        const MacAddress destination = message.op == ArpOp::request ? broadcast_mac : mac_a;
        ASSERT_EQ(encode_arp(out, destination, message), 60U);
        EXPECT_TRUE(std::equal(destination.begin(), destination.end(), out.begin()));
        EXPECT_TRUE(
            std::equal(message.sender_mac.begin(), message.sender_mac.end(), out.begin() + 6));
        const ArpParseResult parsed = parse_arp(std::span(out).first(60));
        ASSERT_TRUE(parsed.ok()) << arp_error_name(parsed.error);
        EXPECT_EQ(parsed.message, message);
    }
}

TEST(ArpWire, EncodeRefusesShortBuffer) {
    std::array<std::uint8_t, 59> small{};
    small.fill(0x11);
    EXPECT_EQ(build_arp_request(small, mac_a, ip_a, ip_b), 0U);
    EXPECT_TRUE(std::all_of(small.begin(), small.end(), [](auto b) { return b == 0x11; }))
        << "a refused buffer is not written";
    EXPECT_EQ(build_arp_request({}, mac_a, ip_a, ip_b), 0U);
}

struct Malformed {
    const char* what;
    std::size_t offset; // byte to change in linux_request (or the length to cut to)
    std::vector<std::uint8_t> value;
    bool truncate;
    ArpError expected;
};

class ArpMalformed : public ::testing::TestWithParam<Malformed> {};

TEST_P(ArpMalformed, ReportedAsItsOwnError) {
    const Malformed& m = GetParam();
    std::vector<std::uint8_t> frame(linux_request.begin(), linux_request.end());
    if (m.truncate) {
        frame.resize(m.offset);
    } else {
        std::copy(m.value.begin(), m.value.end(), frame.begin() + static_cast<long>(m.offset));
    }
    const ArpParseResult parsed = parse_arp(frame);
    EXPECT_EQ(parsed.error, m.expected) << m.what << ": got " << arp_error_name(parsed.error)
                                        << ", want " << arp_error_name(m.expected);
    EXPECT_FALSE(parsed.ok());
}

const Malformed malformed_frames[] = {
    {"empty", 0, {}, true, ArpError::too_short},
    {"one byte", 1, {}, true, ArpError::too_short},
    {"no EtherType", 13, {}, true, ArpError::too_short},
    {"Ethernet header only", 14, {}, true, ArpError::too_short},
    {"ARP header without addresses", 22, {}, true, ArpError::too_short},
    {"last target IP byte missing", 41, {}, true, ArpError::too_short},
    {"IPv4 EtherType", 12, {0x08, 0x00}, false, ArpError::not_arp},
    {"IPv6 EtherType", 12, {0x86, 0xdd}, false, ArpError::not_arp},
    {"VLAN-tagged", 12, {0x81, 0x00}, false, ArpError::not_arp},
    {"RARP EtherType", 12, {0x80, 0x35}, false, ArpError::not_arp},
    {"IEEE 802 hardware", 14, {0x00, 0x06}, false, ArpError::bad_hardware_type},
    {"InfiniBand hardware", 14, {0x00, 0x20}, false, ArpError::bad_hardware_type},
    {"IPv6 protocol", 16, {0x86, 0xdd}, false, ArpError::bad_protocol_type},
    {"hardware length 8", 18, {0x08}, false, ArpError::bad_address_length},
    {"hardware length 20 (IPoIB)", 18, {20}, false, ArpError::bad_address_length},
    {"protocol length 16", 19, {16}, false, ArpError::bad_address_length},
    {"protocol length 0", 19, {0}, false, ArpError::bad_address_length},
    {"op 0", 20, {0x00, 0x00}, false, ArpError::unknown_op},
    {"RARP request op 3", 20, {0x00, 0x03}, false, ArpError::unknown_op},
    {"InARP op 8", 20, {0x00, 0x08}, false, ArpError::unknown_op},
    {"op 0x0100 (byte-swapped request)", 20, {0x01, 0x00}, false, ArpError::unknown_op},
    {"broadcast sender", 22, {0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, false, ArpError::bad_sender_mac},
    {"multicast sender", 22, {0x01, 0x00, 0x5e, 0x00, 0x00, 0x01}, false, ArpError::bad_sender_mac},
    {"zero sender", 22, {0, 0, 0, 0, 0, 0}, false, ArpError::bad_sender_mac},
};

INSTANTIATE_TEST_SUITE_P(Every, ArpMalformed, ::testing::ValuesIn(malformed_frames));

TEST(ArpWire, EveryPrefixOfAValidFrameIsTooShort) {
    for (std::size_t length = 0; length < arp_unpadded_frame_size; ++length) {
        const ArpParseResult parsed = parse_arp(std::span(linux_request).first(length));
        EXPECT_EQ(parsed.error, ArpError::too_short) << length;
    }
}

TEST(ArpWire, RandomBytesNeverCrash) {
    // Run under ASan/UBSan to prove no out-of-bounds read; here it also checks that garbage
    // with an ARP EtherType always lands on some error or a well-formed message.
    std::mt19937_64 random(4791);
    std::vector<std::uint8_t> frame;
    std::size_t parsed_ok = 0;
    for (int i = 0; i < 20000; ++i) {
        frame.resize(random() % 80);
        for (auto& byte : frame) {
            byte = static_cast<std::uint8_t>(random());
        }
        if (frame.size() >= 22 && (i % 2) == 0) {
            // Half of them get a plausible header so the deeper checks are reached.
            const std::uint8_t header[] = {0x08, 0x06, 0x00, 0x01, 0x08, 0x00, 0x06, 0x04};
            std::copy(std::begin(header), std::end(header), frame.begin() + 12);
            frame[20] = 0;
            frame[21] = static_cast<std::uint8_t>(random() % 4);
        }
        const ArpParseResult parsed = parse_arp(frame);
        if (parsed.ok()) {
            ++parsed_ok;
            EXPECT_GE(frame.size(), arp_unpadded_frame_size);
            EXPECT_FALSE(is_multicast_mac(parsed.message.sender_mac));
        }
    }
    EXPECT_GT(parsed_ok, 0U) << "the generator never produced a valid frame";
}

// ---- neighbour table ----

TEST(NeighbourTable, InsertFindLookup) {
    NeighbourTable table(4);
    EXPECT_EQ(table.capacity(), 4U);
    EXPECT_EQ(table.find(ip_a), nullptr);
    EXPECT_EQ(table.insert(ip_a, mac_a, 100), NeighbourUpdate::inserted);
    const NeighbourEntry* entry = table.find(ip_a);
    ASSERT_NE(entry, nullptr);
    EXPECT_EQ(entry->mac, mac_a);
    EXPECT_EQ(entry->updated_at, 100U);
    EXPECT_EQ(table.lookup(ip_a, 150, 1000), mac_a);
    EXPECT_EQ(table.lookup(ip_b, 150, 1000), std::nullopt);

    // The same IP moving to another MAC (a replaced NIC, a failover) is an update.
    EXPECT_EQ(table.insert(ip_a, mac_b, 200), NeighbourUpdate::updated);
    EXPECT_EQ(table.size(), 1U);
    EXPECT_EQ(table.lookup(ip_a, 200, 1000), mac_b);
}

TEST(NeighbourTable, RefreshOnlyTouchesKnownEntries) {
    NeighbourTable table;
    EXPECT_FALSE(table.refresh(ip_a, mac_a, 10)) << "merge adds nothing";
    EXPECT_EQ(table.size(), 0U);
    table.insert(ip_a, mac_a, 10);
    EXPECT_TRUE(table.refresh(ip_a, mac_c, 20));
    EXPECT_EQ(table.find(ip_a)->mac, mac_c);
    EXPECT_EQ(table.find(ip_a)->updated_at, 20U);
}

TEST(NeighbourTable, Ageing) {
    NeighbourTable table;
    table.insert(ip_a, mac_a, 1000);
    EXPECT_EQ(table.lookup(ip_a, 1500, 500), mac_a) << "exactly max_age old is still fresh";
    EXPECT_EQ(table.lookup(ip_a, 1501, 500), std::nullopt);
    EXPECT_NE(table.find(ip_a), nullptr) << "stale entries stay until expired or replaced";
    EXPECT_EQ(table.lookup(ip_a, 10, 500), mac_a) << "a clock behind the entry is not ageing";

    table.insert(ip_b, mac_b, 1400);
    EXPECT_EQ(table.expire(1600, 500), 1U);
    EXPECT_EQ(table.find(ip_a), nullptr);
    EXPECT_NE(table.find(ip_b), nullptr);
    table.refresh(ip_b, mac_b, 2000);
    EXPECT_EQ(table.expire(2400, 500), 0U);
}

TEST(NeighbourTable, FullTableEvictsLeastRecentlyConfirmed) {
    NeighbourTable table; // 256
    ASSERT_EQ(table.capacity(), NeighbourTable::default_capacity);
    for (std::uint32_t i = 0; i < 256; ++i) {
        // Entry i confirmed at time 1000 - i: the last one inserted is the oldest.
        ASSERT_EQ(table.insert(0x0a000100 + i, mac_a, 1000 - i), NeighbourUpdate::inserted);
    }
    EXPECT_EQ(table.size(), 256U);
    table.refresh(0x0a000100 + 255, mac_a, 5000); // no longer the oldest; 254 is
    EXPECT_EQ(table.insert(ip_c, mac_c, 6000), NeighbourUpdate::inserted_evicting);
    EXPECT_EQ(table.size(), 256U);
    EXPECT_EQ(table.find(0x0a000100 + 254), nullptr);
    EXPECT_NE(table.find(0x0a000100 + 255), nullptr);
    EXPECT_EQ(table.lookup(ip_c, 6000, 10), mac_c);
    // An update never evicts.
    EXPECT_EQ(table.insert(ip_c, mac_b, 6001), NeighbourUpdate::updated);
}

TEST(NeighbourTable, EraseKeepsTheRest) {
    NeighbourTable table(3);
    table.insert(ip_a, mac_a, 1);
    table.insert(ip_b, mac_b, 2);
    table.insert(ip_c, mac_c, 3);
    EXPECT_TRUE(table.erase(ip_a));
    EXPECT_FALSE(table.erase(ip_a));
    EXPECT_EQ(table.size(), 2U);
    EXPECT_EQ(table.find(ip_b)->mac, mac_b);
    EXPECT_EQ(table.find(ip_c)->mac, mac_c);
    EXPECT_EQ(table.insert(ip_a, mac_a, 4), NeighbourUpdate::inserted);
}

TEST(NeighbourTable, ZeroCapacityStillHoldsOne) {
    NeighbourTable table(0);
    EXPECT_EQ(table.capacity(), 1U);
    EXPECT_EQ(table.insert(ip_a, mac_a, 1), NeighbourUpdate::inserted);
    EXPECT_EQ(table.insert(ip_b, mac_b, 2), NeighbourUpdate::inserted_evicting);
}

// ---- resolver ----

ArpResolverConfig config_a() {
    ArpResolverConfig config;
    config.mac = mac_a;
    config.ip = ip_a;
    config.tsc_hz = tsc_hz;
    return config;
}

ArpResolver make_resolver(const ArpResolverConfig& config = config_a()) {
    auto resolver = ArpResolver::create(config);
    EXPECT_TRUE(resolver.ok()) << resolver.error().to_string();
    return std::move(resolver).value();
}

std::vector<std::uint8_t> frame_from(const MacAddress& destination, const ArpMessage& message) {
    std::vector<std::uint8_t> frame(60);
    encode_arp(frame, destination, message);
    return frame;
}

TEST(ArpResolver, CreateRejectsBadConfig) {
    const auto expect_invalid = [](ArpResolverConfig config, const char* fragment) {
        auto resolver = ArpResolver::create(config);
        ASSERT_FALSE(resolver.ok()) << fragment;
        EXPECT_EQ(resolver.code(), StatusCode::invalid_parameter);
        EXPECT_NE(resolver.error().message().find(fragment), std::string::npos)
            << resolver.error().message();
    };
    ArpResolverConfig config = config_a();
    config.tsc_hz = 0;
    expect_invalid(config, "rte_get_tsc_hz");
    config = config_a();
    config.max_tries = 0;
    expect_invalid(config, "max_tries=0");
    config = config_a();
    config.retry_interval_ms = 0;
    expect_invalid(config, "retry_interval_ms=0");
    config = config_a();
    config.max_pending = 0;
    expect_invalid(config, "max_pending=0");
    config = config_a();
    config.mac = {};
    expect_invalid(config, "00:00:00:00:00:00");
    config = config_a();
    config.mac = broadcast_mac;
    expect_invalid(config, "ff:ff:ff:ff:ff:ff");
    config = config_a();
    config.ip = 0;
    expect_invalid(config, "0.0.0.0");
    config = config_a();
    config.ip = 0xe0000001;
    expect_invalid(config, "224.0.0.1");
}

TEST(ArpResolver, DefaultsAre200msAndFiveTries) {
    ArpResolver resolver = make_resolver();
    EXPECT_EQ(resolver.retry_interval_cycles(), 200 * ms);
    EXPECT_EQ(resolver.config().max_tries, 5U);
    EXPECT_EQ(resolver.table().capacity(), 256U);
}

TEST(ArpResolver, LargeTscAndIntervalDoNotOverflow) {
    ArpResolverConfig config = config_a();
    config.tsc_hz = 5'000'000'001ULL;       // 5 GHz and a bit
    config.retry_interval_ms = 0xffffffffU; // ~49.7 days
    ArpResolver resolver = make_resolver(config);
    EXPECT_EQ(resolver.retry_interval_cycles(),
              5'000'000ULL * 0xffffffffULL + 0xffffffffULL / 1000);
}

TEST(ArpResolver, RequestRetriesThenGivesUp) {
    ArpResolver resolver = make_resolver();
    ArpFrame frame;
    std::uint64_t now = 1'000'000;
    ASSERT_EQ(resolver.request(ip_b, now, frame), ArpRequestResult::send);
    ASSERT_EQ(frame.length, 60U);
    EXPECT_EQ(bytes_of(frame),
              std::vector<std::uint8_t>(linux_request.begin(), linux_request.end()));
    EXPECT_TRUE(resolver.is_pending(ip_b));

    ArpFrame again;
    EXPECT_EQ(resolver.request(ip_b, now + 10, again), ArpRequestResult::pending);
    EXPECT_EQ(again.length, 0U) << "no second frame while one is in flight";

    std::array<ArpFrame, 4> frames{};
    std::array<std::uint32_t, 4> failed{};
    // Nothing is due before the interval has passed.
    ArpPollResult polled = resolver.poll(now + 200 * ms - 1, frames, failed);
    EXPECT_EQ(polled.frames, 0U);
    EXPECT_EQ(polled.failed, 0U);

    // Requests 2..5 go out one interval apart.
    for (int retry = 1; retry <= 4; ++retry) {
        now += 200 * ms;
        polled = resolver.poll(now, frames, failed);
        ASSERT_EQ(polled.frames, 1U) << "retry " << retry;
        EXPECT_EQ(polled.failed, 0U);
        EXPECT_EQ(frames[0].view().size(), 60U);
        EXPECT_TRUE(
            std::equal(frames[0].view().begin(), frames[0].view().end(), linux_request.begin()));
        EXPECT_EQ(resolver.poll(now + 1, frames, failed).frames, 0U) << "timer restarted";
    }
    // The fifth request's interval runs out: the resolution fails.
    now += 200 * ms;
    polled = resolver.poll(now, frames, failed);
    EXPECT_EQ(polled.frames, 0U);
    ASSERT_EQ(polled.failed, 1U);
    EXPECT_EQ(failed[0], ip_b);
    EXPECT_FALSE(resolver.is_pending(ip_b));
    EXPECT_EQ(resolver.pending_count(), 0U);
    EXPECT_EQ(resolver.poll(now + 10'000 * ms, frames, failed).failed, 0U) << "reported once";

    // A new request starts over.
    EXPECT_EQ(resolver.request(ip_b, now, frame), ArpRequestResult::send);
}

TEST(ArpResolver, PollWithoutRoomDefersInsteadOfDropping) {
    ArpResolverConfig config = config_a();
    config.max_tries = 2;
    ArpResolver resolver = make_resolver(config);
    ArpFrame frame;
    ASSERT_EQ(resolver.request(ip_b, 0, frame), ArpRequestResult::send);
    ASSERT_EQ(resolver.request(ip_c, 0, frame), ArpRequestResult::send);

    std::array<ArpFrame, 1> one_frame{};
    std::array<std::uint32_t, 1> one_failed{};
    ArpPollResult polled = resolver.poll(200 * ms, std::span<ArpFrame>{}, one_failed);
    EXPECT_EQ(polled.frames, 0U);
    polled = resolver.poll(200 * ms, one_frame, one_failed);
    EXPECT_EQ(polled.frames, 1U);
    polled = resolver.poll(200 * ms, one_frame, one_failed);
    EXPECT_EQ(polled.frames, 1U) << "the second retransmission went out on the next poll";

    // Both have now sent max_tries=2; both fail, but only one fits per poll.
    polled = resolver.poll(400 * ms, one_frame, std::span<std::uint32_t>{});
    EXPECT_EQ(polled.failed, 0U);
    EXPECT_EQ(resolver.pending_count(), 2U);
    polled = resolver.poll(400 * ms, one_frame, one_failed);
    ASSERT_EQ(polled.failed, 1U);
    const std::uint32_t first = one_failed[0];
    polled = resolver.poll(400 * ms, one_frame, one_failed);
    ASSERT_EQ(polled.failed, 1U);
    EXPECT_NE(one_failed[0], first);
    EXPECT_TRUE((first == ip_b && one_failed[0] == ip_c) ||
                (first == ip_c && one_failed[0] == ip_b));
    EXPECT_EQ(resolver.pending_count(), 0U);
}

TEST(ArpResolver, RejectsTargetsNoHostOwns) {
    ArpResolver resolver = make_resolver();
    ArpFrame frame;
    for (const std::uint32_t ip : {0U, ip_a, 0xffffffffU, 0xe0000001U, 0x7f000001U}) {
        EXPECT_EQ(resolver.request(ip, 0, frame), ArpRequestResult::invalid_target) << ip;
    }
    EXPECT_EQ(frame.length, 0U);
    EXPECT_EQ(resolver.pending_count(), 0U);
}

TEST(ArpResolver, PendingLimit) {
    ArpResolverConfig config = config_a();
    config.max_pending = 2;
    ArpResolver resolver = make_resolver(config);
    ArpFrame frame;
    EXPECT_EQ(resolver.request(ip_b, 0, frame), ArpRequestResult::send);
    EXPECT_EQ(resolver.request(ip_c, 0, frame), ArpRequestResult::send);
    EXPECT_EQ(resolver.request(0x0a000004, 0, frame), ArpRequestResult::no_resources);
    EXPECT_EQ(neighbour_request_result_name(ArpRequestResult::no_resources), "no_resources");
}

TEST(ArpResolver, ReplyResolvesPending) {
    ArpResolver resolver = make_resolver();
    ArpFrame frame;
    ASSERT_EQ(resolver.request(ip_b, 100, frame), ArpRequestResult::send);
    ArpFrame reply;
    const ArpRxResult rx = resolver.on_frame(linux_reply, 5000, reply);
    EXPECT_EQ(rx.error, ArpError::ok);
    EXPECT_TRUE(rx.resolved);
    EXPECT_EQ(rx.resolved_ip, ip_b);
    EXPECT_EQ(rx.resolved_mac, mac_b);
    EXPECT_FALSE(rx.reply_ready) << "a reply is not answered";
    EXPECT_EQ(reply.length, 0U);
    EXPECT_FALSE(resolver.is_pending(ip_b));
    EXPECT_EQ(resolver.lookup(ip_b, 5000), mac_b);
    EXPECT_EQ(resolver.table().find(ip_b)->updated_at, 5000U);

    std::array<ArpFrame, 2> frames{};
    std::array<std::uint32_t, 2> failed{};
    const ArpPollResult polled = resolver.poll(10'000 * ms, frames, failed);
    EXPECT_EQ(polled.frames + polled.failed, 0U) << "resolved: no retransmission, no failure";
    EXPECT_EQ(resolver.request(ip_b, 6000, frame), ArpRequestResult::already_known);

    // A duplicate reply only refreshes.
    const ArpRxResult duplicate = resolver.on_frame(linux_reply, 7000, reply);
    EXPECT_FALSE(duplicate.resolved);
    EXPECT_EQ(resolver.table().find(ip_b)->updated_at, 7000U);
}

TEST(ArpResolver, AnyArpFromThePendingHostResolvesIt) {
    ArpResolver resolver = make_resolver();
    ArpFrame frame;
    ASSERT_EQ(resolver.request(ip_b, 0, frame), ArpRequestResult::send);
    // 10.0.0.2 announces itself (gratuitous ARP) before answering us.
    const auto gratuitous =
        frame_from(broadcast_mac, {ArpOp::request, mac_b, ip_b, MacAddress{}, ip_b});
    ArpFrame reply;
    const ArpRxResult rx = resolver.on_frame(gratuitous, 10, reply);
    EXPECT_TRUE(rx.resolved);
    EXPECT_EQ(rx.resolved_mac, mac_b);
    EXPECT_FALSE(rx.reply_ready);
    EXPECT_EQ(resolver.lookup(ip_b, 10), mac_b);
}

TEST(ArpResolver, RequestForOurIpGetsAReplyAndTeachesUs) {
    ArpResolver resolver = make_resolver();
    // 10.0.0.2 asks for 10.0.0.1 (us).
    const auto request = frame_from(broadcast_mac, {ArpOp::request, mac_b, ip_b, {}, ip_a});
    ArpFrame reply;
    const ArpRxResult rx = resolver.on_frame(request, 42, reply);
    EXPECT_EQ(rx.error, ArpError::ok);
    ASSERT_TRUE(rx.reply_ready);
    EXPECT_FALSE(rx.resolved) << "nothing was pending";
    ASSERT_EQ(reply.length, 60U);
    // Exactly the reply a Linux host would send, mirrored: us (a) answering b.
    std::array<std::uint8_t, 60> expected{};
    build_arp_reply(expected, mac_a, ip_a, mac_b, ip_b);
    EXPECT_TRUE(std::equal(expected.begin(), expected.end(), reply.view().begin()));
    const ArpParseResult parsed = parse_arp(reply.view());
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(parsed.message, (ArpMessage{ArpOp::reply, mac_a, ip_a, mac_b, ip_b}));
    EXPECT_TRUE(std::equal(mac_b.begin(), mac_b.end(), reply.view().begin())) << "unicast back";
    // RFC 826: the asker is added, since it is about to talk to us.
    EXPECT_EQ(resolver.lookup(ip_b, 42), mac_b);
}

TEST(ArpResolver, OthersChatterOnlyRefreshesKnownHosts) {
    ArpResolver resolver = make_resolver();
    ArpFrame reply;
    // b asks for c: not for us, and b is unknown, so nothing is learned.
    const auto b_asks_c = frame_from(broadcast_mac, {ArpOp::request, mac_b, ip_b, {}, ip_c});
    ArpRxResult rx = resolver.on_frame(b_asks_c, 10, reply);
    EXPECT_EQ(rx.error, ArpError::ok);
    EXPECT_FALSE(rx.reply_ready);
    EXPECT_EQ(resolver.table().size(), 0U);

    // Once b is known, the same chatter refreshes it (merge), including a new MAC.
    const auto b_asks_a = frame_from(broadcast_mac, {ArpOp::request, mac_b, ip_b, {}, ip_a});
    resolver.on_frame(b_asks_a, 20, reply);
    ASSERT_NE(resolver.table().find(ip_b), nullptr);
    const auto b_moved = frame_from(broadcast_mac, {ArpOp::request, mac_c, ip_b, {}, ip_c});
    rx = resolver.on_frame(b_moved, 30, reply);
    EXPECT_FALSE(rx.reply_ready);
    EXPECT_EQ(resolver.table().find(ip_b)->mac, mac_c);
    EXPECT_EQ(resolver.table().find(ip_b)->updated_at, 30U);
    EXPECT_EQ(resolver.table().size(), 1U);
}

TEST(ArpResolver, ProbeForOurIpIsAnsweredButNotLearned) {
    ArpResolver resolver = make_resolver();
    // RFC 5227: sender IP 0 while the prober checks whether 10.0.0.1 is taken.
    const auto probe = frame_from(broadcast_mac, {ArpOp::request, mac_c, 0, {}, ip_a});
    ArpFrame reply;
    const ArpRxResult rx = resolver.on_frame(probe, 5, reply);
    ASSERT_TRUE(rx.reply_ready);
    const ArpParseResult parsed = parse_arp(reply.view());
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(parsed.message.target_mac, mac_c);
    EXPECT_EQ(parsed.message.target_ip, 0U);
    EXPECT_EQ(resolver.table().size(), 0U);
}

TEST(ArpResolver, OwnFramesAndConflictsTeachNothing) {
    ArpResolver resolver = make_resolver();
    ArpFrame frame;
    ASSERT_EQ(resolver.request(ip_b, 0, frame), ArpRequestResult::send);
    ArpFrame reply;
    // Our own broadcast looping back through the port.
    ArpRxResult rx = resolver.on_frame(frame.view(), 1, reply);
    EXPECT_TRUE(rx.own_frame);
    EXPECT_FALSE(rx.reply_ready);

    // Someone else claims 10.0.0.1.
    const auto claim = frame_from(broadcast_mac, {ArpOp::reply, mac_c, ip_a, {}, ip_a});
    rx = resolver.on_frame(claim, 2, reply);
    EXPECT_TRUE(rx.address_conflict);
    EXPECT_FALSE(rx.reply_ready);
    EXPECT_EQ(resolver.table().size(), 0U);
    EXPECT_TRUE(resolver.is_pending(ip_b));
}

TEST(ArpResolver, MalformedFramesAreReportedNotLearned) {
    ArpResolver resolver = make_resolver();
    ArpFrame reply;
    std::array<std::uint8_t, 60> bad = linux_reply;
    bad[21] = 9; // op
    ArpRxResult rx = resolver.on_frame(bad, 1, reply);
    EXPECT_EQ(rx.error, ArpError::unknown_op);
    EXPECT_FALSE(rx.reply_ready || rx.resolved);
    rx = resolver.on_frame(std::span(linux_reply).first(30), 1, reply);
    EXPECT_EQ(rx.error, ArpError::too_short);
    EXPECT_EQ(resolver.table().size(), 0U);
    EXPECT_EQ(reply.length, 0U);
}

TEST(ArpResolver, StaleEntriesAreResolvedAgain) {
    ArpResolverConfig config = config_a();
    config.reachable_ms = 1000;
    ArpResolver resolver = make_resolver(config);
    ArpFrame frame;
    ASSERT_EQ(resolver.request(ip_b, 0, frame), ArpRequestResult::send);
    ArpFrame reply;
    ASSERT_TRUE(resolver.on_frame(linux_reply, 0, reply).resolved);
    EXPECT_EQ(resolver.request(ip_b, 1000 * ms, frame), ArpRequestResult::already_known);
    EXPECT_EQ(resolver.lookup(ip_b, 1000 * ms + 1), std::nullopt);
    EXPECT_EQ(resolver.request(ip_b, 1000 * ms + 1, frame), ArpRequestResult::send);
    const ArpRxResult rx = resolver.on_frame(linux_reply, 1100 * ms, reply);
    EXPECT_TRUE(rx.resolved) << "the stale entry was refreshed and the resolution reported";
    EXPECT_EQ(resolver.table().size(), 1U);
    EXPECT_EQ(resolver.lookup(ip_b, 1100 * ms), mac_b);
}

TEST(ArpResolver, LearningIntoAFullTableReportsEviction) {
    ArpResolverConfig config = config_a();
    config.table_capacity = 1;
    ArpResolver resolver = make_resolver(config);
    ArpFrame reply;
    const auto b_asks = frame_from(broadcast_mac, {ArpOp::request, mac_b, ip_b, {}, ip_a});
    EXPECT_FALSE(resolver.on_frame(b_asks, 1, reply).evicted);
    const auto c_asks = frame_from(broadcast_mac, {ArpOp::request, mac_c, ip_c, {}, ip_a});
    const ArpRxResult rx = resolver.on_frame(c_asks, 2, reply);
    EXPECT_TRUE(rx.evicted);
    EXPECT_TRUE(rx.reply_ready);
    EXPECT_EQ(resolver.lookup(ip_c, 2), mac_c);
    EXPECT_EQ(resolver.lookup(ip_b, 2), std::nullopt);
}

TEST(ArpResolver, TwoResolversTalk) {
    ArpResolverConfig config_b = config_a();
    config_b.mac = mac_b;
    config_b.ip = ip_b;
    ArpResolver a = make_resolver();
    ArpResolver b = make_resolver(config_b);

    ArpFrame request;
    ASSERT_EQ(a.request(ip_b, 0, request), ArpRequestResult::send);
    ArpFrame reply;
    const ArpRxResult at_b = b.on_frame(request.view(), 1, reply);
    ASSERT_TRUE(at_b.reply_ready);
    EXPECT_EQ(b.lookup(ip_a, 1), mac_a);
    ArpFrame unused;
    const ArpRxResult at_a = a.on_frame(reply.view(), 2, unused);
    EXPECT_TRUE(at_a.resolved);
    EXPECT_EQ(at_a.resolved_mac, mac_b);
    EXPECT_FALSE(at_a.reply_ready);
}

TEST(ArpNames, EveryError) {
    EXPECT_EQ(arp_error_name(ArpError::ok), "ok");
    EXPECT_EQ(arp_error_name(ArpError::too_short), "too_short");
    EXPECT_EQ(arp_error_name(ArpError::not_arp), "not_arp");
    EXPECT_EQ(arp_error_name(ArpError::bad_hardware_type), "bad_hardware_type");
    EXPECT_EQ(arp_error_name(ArpError::bad_protocol_type), "bad_protocol_type");
    EXPECT_EQ(arp_error_name(ArpError::bad_address_length), "bad_address_length");
    EXPECT_EQ(arp_error_name(ArpError::unknown_op), "unknown_op");
    EXPECT_EQ(arp_error_name(ArpError::bad_sender_mac), "bad_sender_mac");
}

} // namespace
} // namespace prdma::swroce
