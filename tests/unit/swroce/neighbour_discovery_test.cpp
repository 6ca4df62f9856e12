// swroce's IPv6 neighbour discovery: the wire format against frames made independently (by
// tests/fuzz/make-seeds.py, and checked by tshark: good ICMPv6 checksums), each receive check of
// RFC 4861 7.1 as its own error, and the resolver's request, retry, give-up, answer and learning
// rules. Time is TSC cycles at a made-up 1 MHz (1 cycle = 1 us).
#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <prdma/roce/byte_order.hpp>
#include <prdma/roce/packet.hpp>

#include "neighbour_discovery.hpp"

namespace prdma::swroce {
namespace {

constexpr std::uint64_t tsc_hz = 1'000'000;
constexpr std::uint64_t ms = tsc_hz / 1000;

constexpr MacAddress mac_a = {0x02, 0, 0, 0, 0, 0x01};
constexpr MacAddress mac_b = {0x02, 0, 0, 0, 0, 0x02};
constexpr MacAddress mac_c = {0x02, 0, 0, 0, 0, 0x03};
constexpr Ipv6Address ip_a = {0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01};
constexpr Ipv6Address ip_b = {0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x02};
constexpr Ipv6Address ip_c = {0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x03};

std::vector<std::uint8_t> from_hex(const std::string& hex) {
    std::vector<std::uint8_t> out;
    for (std::size_t i = 0; i + 1 < hex.size(); i += 2) {
        out.push_back(static_cast<std::uint8_t>(std::stoul(hex.substr(i, 2), nullptr, 16)));
    }
    return out;
}

// fd00::1 at 02:00:00:00:00:01 asks for fd00::2, to ff02::1:ff00:2 (33:33:ff:00:00:02).
const std::vector<std::uint8_t> solicitation_a_for_b = from_hex(
    "3333ff00000202000000000186dd6000000000203afffd000000000000000000000000000001ff0200000000"
    "000000000001ff00000287007d9700000000fd0000000000000000000000000000020101020000000001");
// fd00::2 at 02:00:00:00:00:02 answers, solicited and overriding, unicast to fd00::1.
const std::vector<std::uint8_t> advertisement_b_to_a = from_hex(
    "02000000000102000000000286dd6000000000203afffd000000000000000000000000000002fd0000000000"
    "0000000000000000000188001c9a60000000fd0000000000000000000000000000020201020000000002");

std::vector<std::uint8_t> bytes_of(const NdFrame& frame) {
    return {frame.bytes.begin(), frame.bytes.begin() + static_cast<std::ptrdiff_t>(frame.length)};
}

// After editing a frame's ICMPv6 message, its checksum made right again, so only the edit is
// what the parser sees.
void fix_checksum(std::vector<std::uint8_t>& frame) {
    const std::size_t length = roce::load_be16(frame.data() + 14 + 4);
    std::uint8_t* icmp = frame.data() + 54;
    roce::store_be16(icmp + 2, 0);
    roce::store_be16(icmp + 2, roce::ipv6_upper_layer_checksum(frame.data() + 14, {icmp, length},
                                                               ip_protocol_icmpv6));
}

// ---- wire format ----

TEST(NdWire, SolicitationMatchesAnIndependentlyMadeFrame) {
    std::array<std::uint8_t, nd_frame_buffer_size> out{};
    out.fill(0xee);
    const std::size_t length = build_neighbor_solicitation(out, mac_a, ip_a, ip_b);
    ASSERT_EQ(length, nd_frame_size);
    EXPECT_EQ(std::vector<std::uint8_t>(out.begin(), out.begin() + 86), solicitation_a_for_b);
}

TEST(NdWire, AdvertisementMatchesAnIndependentlyMadeFrame) {
    std::array<std::uint8_t, nd_frame_buffer_size> out{};
    const std::size_t length = build_neighbor_advertisement(out, mac_b, ip_b, mac_a, ip_a);
    ASSERT_EQ(length, nd_frame_size);
    EXPECT_EQ(std::vector<std::uint8_t>(out.begin(), out.begin() + 86), advertisement_b_to_a);
}

TEST(NdWire, BuildersRefuseAShortBuffer) {
    std::array<std::uint8_t, nd_frame_size - 1> out{};
    EXPECT_EQ(build_neighbor_solicitation(out, mac_a, ip_a, ip_b), 0U);
    EXPECT_EQ(build_neighbor_advertisement(out, mac_b, ip_b, mac_a, ip_a), 0U);
}

TEST(NdWire, ParsesBothMessages) {
    const NdParseResult ns = parse_nd(solicitation_a_for_b);
    ASSERT_TRUE(ns.ok()) << nd_error_name(ns.error);
    EXPECT_EQ(ns.message.type, NdType::solicitation);
    EXPECT_EQ(ns.message.source, ip_a);
    EXPECT_EQ(ns.message.destination, solicited_node_address(ip_b));
    EXPECT_EQ(ns.message.target, ip_b);
    EXPECT_EQ(ns.message.link_address, mac_a);
    EXPECT_EQ(ns.message.eth_source, mac_a);

    const NdParseResult na = parse_nd(advertisement_b_to_a);
    ASSERT_TRUE(na.ok()) << nd_error_name(na.error);
    EXPECT_EQ(na.message.type, NdType::advertisement);
    EXPECT_EQ(na.message.target, ip_b);
    EXPECT_EQ(na.message.link_address, mac_b);
    EXPECT_TRUE(na.message.solicited);
    EXPECT_TRUE(na.message.override);
}

TEST(NdWire, SolicitedNodeGroupAndItsMac) {
    const Ipv6Address address = {0x20, 0x01, 0x0d, 0xb8, 0,    0,    0,    0,
                                 0,    0,    0,    0,    0x12, 0x34, 0x56, 0x78};
    const Ipv6Address group = solicited_node_address(address);
    const Ipv6Address expected = {0xff, 0x02, 0, 0,    0,    0,    0,    0,
                                  0,    0,    0, 0x01, 0xff, 0x34, 0x56, 0x78};
    EXPECT_EQ(group, expected);
    EXPECT_EQ(ipv6_multicast_mac(group), (MacAddress{0x33, 0x33, 0xff, 0x34, 0x56, 0x78}));
}

TEST(NdWire, OtherFramesAreNotNd) {
    std::vector<std::uint8_t> echo = solicitation_a_for_b;
    echo[54] = 128; // echo request
    fix_checksum(echo);
    EXPECT_EQ(parse_nd(echo).error, NdError::not_nd);
    std::vector<std::uint8_t> udp = solicitation_a_for_b;
    ASSERT_EQ(udp.size(), nd_frame_size);
    udp.at(20) = 17;
    EXPECT_EQ(parse_nd(udp).error, NdError::not_nd);
    std::vector<std::uint8_t> ipv4 = solicitation_a_for_b;
    ASSERT_EQ(ipv4.size(), nd_frame_size);
    ipv4.at(12) = 0x08;
    ipv4.at(13) = 0x00;
    EXPECT_EQ(parse_nd(ipv4).error, NdError::not_nd);
    EXPECT_FALSE(is_icmpv6_frame(udp));
    EXPECT_TRUE(is_icmpv6_frame(solicitation_a_for_b));
}

TEST(NdWire, EveryTruncationIsTooShortNeverARead) {
    for (std::size_t length = 14; length < solicitation_a_for_b.size(); ++length) {
        const std::span<const std::uint8_t> cut(solicitation_a_for_b.data(), length);
        EXPECT_EQ(parse_nd(cut).error, NdError::too_short) << length << " bytes";
    }
}

// Each of RFC 4861 7.1.1's and 7.1.2's checks, on an otherwise valid frame.
TEST(NdWire, EachReceiveCheckHasItsError) {
    std::vector<std::uint8_t> frame = solicitation_a_for_b;
    frame[21] = 254; // hop limit: from beyond a router
    EXPECT_EQ(parse_nd(frame).error, NdError::bad_hop_limit);

    frame = solicitation_a_for_b;
    frame[70] ^= 0x01; // a target byte, checksum left as it was
    EXPECT_EQ(parse_nd(frame).error, NdError::bad_checksum);

    frame = solicitation_a_for_b;
    frame[55] = 1; // code
    fix_checksum(frame);
    EXPECT_EQ(parse_nd(frame).error, NdError::bad_code);

    frame = solicitation_a_for_b;
    frame[62] = 0xff; // target ff..: multicast
    fix_checksum(frame);
    EXPECT_EQ(parse_nd(frame).error, NdError::bad_target);

    frame = solicitation_a_for_b;
    frame[79] = 0; // the option's length
    fix_checksum(frame);
    EXPECT_EQ(parse_nd(frame).error, NdError::bad_option);

    frame = solicitation_a_for_b;
    frame[79] = 2; // 16 bytes, past the message
    fix_checksum(frame);
    EXPECT_EQ(parse_nd(frame).error, NdError::bad_option);

    frame = solicitation_a_for_b;
    frame[80] = 0x01; // the option's MAC: multicast
    fix_checksum(frame);
    EXPECT_EQ(parse_nd(frame).error, NdError::bad_link_address);

    frame = solicitation_a_for_b;
    std::fill(frame.begin() + 22, frame.begin() + 38, std::uint8_t{0}); // DAD: from ::
    fix_checksum(frame);
    EXPECT_EQ(parse_nd(frame).error, NdError::bad_source) << "DAD never carries a source MAC";

    frame = solicitation_a_for_b;
    frame[22] = 0xff; // a multicast source
    fix_checksum(frame);
    EXPECT_EQ(parse_nd(frame).error, NdError::bad_source);

    frame = advertisement_b_to_a;
    const Ipv6Address group = solicited_node_address(ip_a);
    std::copy(group.begin(), group.end(), frame.begin() + 38); // solicited, yet to a group
    fix_checksum(frame);
    EXPECT_EQ(parse_nd(frame).error, NdError::solicited_to_multicast);

    frame = solicitation_a_for_b;
    frame[19] = 16; // payload length 16: shorter than a solicitation
    frame.resize(14 + 40 + 16);
    fix_checksum(frame);
    EXPECT_EQ(parse_nd(frame).error, NdError::bad_length);
}

TEST(NdWire, TrailingPaddingAndUnknownOptionsAreAccepted) {
    std::vector<std::uint8_t> frame = solicitation_a_for_b;
    frame.resize(frame.size() + 10, 0); // Ethernet padding past the IPv6 payload
    EXPECT_TRUE(parse_nd(frame).ok());

    frame = solicitation_a_for_b;
    frame[19] = 32 + 8; // a nonce option (14) of 8 bytes before the source link-layer address
    frame.insert(frame.begin() + 78, {14, 1, 1, 2, 3, 4, 5, 6});
    fix_checksum(frame);
    const NdParseResult parsed = parse_nd(frame);
    ASSERT_TRUE(parsed.ok()) << nd_error_name(parsed.error);
    EXPECT_EQ(parsed.message.link_address, mac_a);
}

TEST(NdWire, ErrorNames) {
    EXPECT_EQ(nd_error_name(NdError::solicited_to_multicast), "solicited_to_multicast");
    EXPECT_EQ(nd_error_name(NdError::bad_checksum), "bad_checksum");
    EXPECT_EQ(nd_error_name(static_cast<NdError>(200)), "unknown");
}

// ---- the resolver ----

NdResolver make_resolver(const MacAddress& mac = mac_a, const Ipv6Address& ip = ip_a) {
    NdResolverConfig config;
    config.mac = mac;
    config.ip = ip;
    config.tsc_hz = tsc_hz;
    auto resolver = NdResolver::create(config);
    EXPECT_TRUE(resolver.ok());
    return std::move(resolver.value());
}

TEST(NdResolver, CreateRefusesWhatCannotWork) {
    NdResolverConfig config;
    config.mac = mac_a;
    config.ip = ip_a;
    EXPECT_FALSE(NdResolver::create(config).ok()) << "tsc_hz 0";
    config.tsc_hz = tsc_hz;
    config.mac = {0x33, 0x33, 0, 0, 0, 1};
    EXPECT_FALSE(NdResolver::create(config).ok()) << "a multicast MAC";
    config.mac = mac_a;
    config.ip = solicited_node_address(ip_a);
    EXPECT_FALSE(NdResolver::create(config).ok()) << "a multicast address";
    config.ip = ip_a;
    EXPECT_TRUE(NdResolver::create(config).ok());
}

TEST(NdResolver, RequestSendsASolicitationAndTheAdvertisementResolvesIt) {
    NdResolver resolver = make_resolver();
    NdFrame frame;
    ASSERT_EQ(resolver.request(ip_b, 0, frame), NeighbourRequestResult::send);
    EXPECT_EQ(bytes_of(frame), solicitation_a_for_b);
    EXPECT_TRUE(resolver.is_pending(ip_b));
    NdFrame again;
    EXPECT_EQ(resolver.request(ip_b, 1, again), NeighbourRequestResult::pending);
    EXPECT_EQ(again.length, 0U);

    NdFrame reply;
    const NdRxResult result = resolver.on_frame(advertisement_b_to_a, 10 * ms, reply);
    EXPECT_EQ(result.error, NdError::ok);
    ASSERT_TRUE(result.resolved);
    EXPECT_EQ(result.resolved_ip, ip_b);
    EXPECT_EQ(result.resolved_mac, mac_b);
    EXPECT_FALSE(result.reply_ready);
    EXPECT_FALSE(resolver.is_pending(ip_b));
    EXPECT_EQ(resolver.lookup(ip_b, 11 * ms), mac_b);
    EXPECT_EQ(resolver.request(ip_b, 12 * ms, frame), NeighbourRequestResult::already_known);
}

TEST(NdResolver, UnansweredSolicitationsAreRetriedThenGivenUp) {
    NdResolver resolver = make_resolver();
    NdFrame frame;
    ASSERT_EQ(resolver.request(ip_b, 0, frame), NeighbourRequestResult::send);
    std::array<NdFrame, 4> frames{};
    std::array<Ipv6Address, 4> failed{};
    EXPECT_EQ(resolver.poll(199 * ms, frames, failed).frames, 0U) << "not due yet";
    for (unsigned retry = 1; retry < 5; ++retry) {
        const ProbePollResult polled = resolver.poll(retry * 200 * ms, frames, failed);
        ASSERT_EQ(polled.frames, 1U) << "retry " << retry;
        EXPECT_EQ(bytes_of(frames[0]), solicitation_a_for_b);
        EXPECT_EQ(polled.failed, 0U);
    }
    const ProbePollResult last = resolver.poll(1000 * ms, frames, failed);
    EXPECT_EQ(last.frames, 0U);
    ASSERT_EQ(last.failed, 1U);
    EXPECT_EQ(failed[0], ip_b);
    EXPECT_EQ(resolver.pending_count(), 0U);
}

TEST(NdResolver, RefusesTargetsNoNeighbourOwns) {
    NdResolver resolver = make_resolver();
    NdFrame frame;
    const Ipv6Address v4_mapped = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 1};
    for (const Ipv6Address& bad : {Ipv6Address{}, solicited_node_address(ip_b), v4_mapped, ip_a}) {
        EXPECT_EQ(resolver.request(bad, 0, frame), NeighbourRequestResult::invalid_target);
    }
}

TEST(NdResolver, NoMoreThanMaxPendingAtOnce) {
    NdResolverConfig config;
    config.mac = mac_a;
    config.ip = ip_a;
    config.tsc_hz = tsc_hz;
    config.max_pending = 1;
    NdResolver resolver = std::move(NdResolver::create(config).value());
    NdFrame frame;
    EXPECT_EQ(resolver.request(ip_b, 0, frame), NeighbourRequestResult::send);
    EXPECT_EQ(resolver.request(ip_c, 0, frame), NeighbourRequestResult::no_resources);
}

// b is asked for its own address: it answers a (solicited, to a's MAC) and learns a, so its own
// traffic to a needs no solicitation.
TEST(NdResolver, ASolicitationForOurAddressIsAnsweredAndTeachesTheAsker) {
    NdResolver b = make_resolver(mac_b, ip_b);
    NdFrame reply;
    const NdRxResult result = b.on_frame(solicitation_a_for_b, 5 * ms, reply);
    EXPECT_EQ(result.error, NdError::ok);
    ASSERT_TRUE(result.reply_ready);
    EXPECT_EQ(bytes_of(reply), advertisement_b_to_a);
    EXPECT_FALSE(result.resolved) << "nothing was pending";
    EXPECT_EQ(b.lookup(ip_a, 6 * ms), mac_a);

    // The same question unicast to b's own address from a's link-local one, as Linux probes a
    // stale entry: answered there, unicast.
    const Ipv6Address link_local_a = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x0a};
    std::vector<std::uint8_t> unicast = solicitation_a_for_b;
    std::copy(link_local_a.begin(), link_local_a.end(), unicast.begin() + 22);
    std::copy(ip_b.begin(), ip_b.end(), unicast.begin() + 38);
    std::copy(mac_b.begin(), mac_b.end(), unicast.begin());
    fix_checksum(unicast);
    NdFrame second;
    ASSERT_TRUE(b.on_frame(unicast, 7 * ms, second).reply_ready);
    const NdParseResult answer = parse_nd(bytes_of(second));
    ASSERT_TRUE(answer.ok()) << nd_error_name(answer.error);
    EXPECT_EQ(answer.message.type, NdType::advertisement);
    EXPECT_EQ(answer.message.destination, link_local_a);
    EXPECT_EQ(answer.message.target, ip_b);
    EXPECT_EQ(answer.message.link_address, mac_b);
    EXPECT_TRUE(answer.message.solicited);
    EXPECT_EQ(std::vector<std::uint8_t>(second.bytes.begin(), second.bytes.begin() + 6),
              std::vector<std::uint8_t>(mac_a.begin(), mac_a.end()));
}

// An advertisement without the override flag does not move a known neighbour to another MAC
// (a proxy's answer), not even while the stale entry is asked for again; one with it does.
TEST(NdResolver, OnlyAnOverridingAdvertisementChangesAKnownMac) {
    NdResolver a = make_resolver();
    NdFrame frame;
    ASSERT_EQ(a.request(ip_b, 0, frame), NeighbourRequestResult::send);
    ASSERT_TRUE(a.on_frame(advertisement_b_to_a, 1 * ms, frame).resolved);
    std::vector<std::uint8_t> proxy = advertisement_b_to_a;
    std::copy(mac_c.begin(), mac_c.end(), proxy.begin() + 6);
    std::copy(mac_c.begin(), mac_c.end(), proxy.begin() + 80);
    proxy[58] = 0x40; // solicited, not overriding
    fix_checksum(proxy);
    EXPECT_EQ(a.on_frame(proxy, 2 * ms, frame).error, NdError::ok);
    EXPECT_EQ(a.lookup(ip_b, 3 * ms), mac_b);

    // b's entry goes stale (60 s unheard) and is asked for again: the proxy answers first.
    const std::uint64_t later = 2 * 60'000 * ms;
    ASSERT_EQ(a.request(ip_b, later, frame), NeighbourRequestResult::send);
    const NdRxResult proxied = a.on_frame(proxy, later + 1, frame);
    EXPECT_FALSE(proxied.resolved) << "a known neighbour keeps its MAC against a proxy";
    EXPECT_TRUE(a.is_pending(ip_b));
    EXPECT_TRUE(a.on_frame(advertisement_b_to_a, later + 2, frame).resolved);
    EXPECT_EQ(a.lookup(ip_b, later + 3), mac_b);

    proxy[58] = 0x60; // overriding
    fix_checksum(proxy);
    EXPECT_EQ(a.on_frame(proxy, later + 4, frame).error, NdError::ok);
    EXPECT_EQ(a.lookup(ip_b, later + 5), mac_c);
}

// c overhears a asking for b: it answers nothing and learns nothing (other hosts' chatter
// cannot fill its table).
TEST(NdResolver, OtherHostsSolicitationsTeachNothing) {
    NdResolver c = make_resolver(mac_c, ip_c);
    NdFrame reply;
    const NdRxResult result = c.on_frame(solicitation_a_for_b, 5 * ms, reply);
    EXPECT_EQ(result.error, NdError::ok);
    EXPECT_FALSE(result.reply_ready);
    EXPECT_EQ(c.table().size(), 0U);
    // Nor does an advertisement nobody here asked for.
    EXPECT_FALSE(c.on_frame(advertisement_b_to_a, 6 * ms, reply).resolved);
    EXPECT_EQ(c.table().size(), 0U);
}

// While c resolves a, a's solicitation for someone else already tells c where a is.
TEST(NdResolver, AnyMessageFromAHostBeingResolvedFinishesIt) {
    NdResolver c = make_resolver(mac_c, ip_c);
    NdFrame frame;
    ASSERT_EQ(c.request(ip_a, 0, frame), NeighbourRequestResult::send);
    const NdRxResult result = c.on_frame(solicitation_a_for_b, 5 * ms, frame);
    ASSERT_TRUE(result.resolved);
    EXPECT_EQ(result.resolved_ip, ip_a);
    EXPECT_EQ(result.resolved_mac, mac_a);
    EXPECT_FALSE(result.reply_ready);
}

TEST(NdResolver, OwnFramesAreIgnored) {
    NdResolver a = make_resolver();
    NdFrame reply;
    const NdRxResult result = a.on_frame(solicitation_a_for_b, 0, reply);
    EXPECT_TRUE(result.own_frame);
    EXPECT_FALSE(result.reply_ready);
}

// Another host's DAD probe for b's address (from ::, no MAC option): b defends it with an
// unsolicited, overriding advertisement to all nodes (RFC 4861 7.2.4), so the prober gives up the
// address, and learns nothing from it.
TEST(NdResolver, ADuplicateAddressProbeForOurAddressIsDefended) {
    NdResolver b = make_resolver(mac_b, ip_b);
    std::vector<std::uint8_t> dad = solicitation_a_for_b;
    std::fill(dad.begin() + 22, dad.begin() + 38, std::uint8_t{0});
    dad[19] = 24;
    dad.resize(14 + 40 + 24);
    fix_checksum(dad);
    NdFrame reply;
    const NdRxResult result = b.on_frame(dad, 0, reply);
    EXPECT_EQ(result.error, NdError::ok);
    EXPECT_TRUE(result.address_conflict);
    ASSERT_TRUE(result.reply_ready);
    EXPECT_EQ(b.table().size(), 0U);
    const NdParseResult defence = parse_nd(bytes_of(reply));
    ASSERT_TRUE(defence.ok()) << nd_error_name(defence.error);
    EXPECT_EQ(defence.message.type, NdType::advertisement);
    EXPECT_EQ(defence.message.destination, all_nodes_address);
    EXPECT_EQ(defence.message.target, ip_b);
    EXPECT_EQ(defence.message.link_address, mac_b);
    EXPECT_FALSE(defence.message.solicited);
    EXPECT_TRUE(defence.message.override);
    EXPECT_EQ(std::vector<std::uint8_t>(reply.bytes.begin(), reply.bytes.begin() + 6),
              (std::vector<std::uint8_t>{0x33, 0x33, 0, 0, 0, 1}));
}

} // namespace
} // namespace prdma::swroce
