// CRC-32 on both paths (known vectors, every length 0..4200 at every alignment, split updates),
// and the ICRC against a bit-at-a-time reference written from the Annex A17 definition.
#include <array>
#include <cstdint>
#include <random>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include <prdma/roce/icrc.hpp>
#include <prdma/roce/packet.hpp>

namespace prdma::roce {
namespace {

using Bytes = std::vector<std::uint8_t>;

constexpr CrcPath both_paths[] = {CrcPath::table, CrcPath::pclmul, CrcPath::automatic};

std::span<const std::uint8_t> bytes_of(std::string_view s) {
    return {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()};
}

// One bit at a time, straight from the definition: the slowest, least clever CRC there is.
std::uint32_t reference_update(std::uint32_t state, std::span<const std::uint8_t> data) {
    for (const std::uint8_t byte : data) {
        state ^= byte;
        for (int bit = 0; bit < 8; ++bit) {
            state = (state & 1U) != 0 ? (state >> 1) ^ 0xedb88320U : state >> 1;
        }
    }
    return state;
}

Bytes random_bytes(std::mt19937_64& rng, std::size_t n) {
    Bytes b(n);
    for (auto& x : b) {
        x = static_cast<std::uint8_t>(rng());
    }
    return b;
}

TEST(Crc32, KnownVectors) {
    const Bytes zeros(32, 0);
    const Bytes ones(32, 0xff);
    Bytes counting(32);
    for (std::size_t i = 0; i < counting.size(); ++i) {
        counting[i] = static_cast<std::uint8_t>(i);
    }
    for (const CrcPath path : both_paths) {
        EXPECT_EQ(crc32({}, path), 0U);
        EXPECT_EQ(crc32(bytes_of("123456789"), path), 0xcbf43926U);
        EXPECT_EQ(crc32(bytes_of("The quick brown fox jumps over the lazy dog"), path),
                  0x414fa339U);
        EXPECT_EQ(crc32(zeros, path), 0x190a55adU);
        EXPECT_EQ(crc32(ones, path), 0xff6cab0bU);
        EXPECT_EQ(crc32(counting, path), 0x91267e8aU);
    }
}

TEST(Crc32, PclmulIsAvailableHere) {
    // Not a requirement of the library (it falls back to tables), but without it the pclmul
    // comparisons below compare the table path with itself; say so.
    if (!pclmul_supported()) {
        GTEST_SKIP() << "this CPU has no PCLMULQDQ: only the table path is exercised";
    }
    SUCCEED();
}

TEST(Crc32, BothPathsAgreeOnEveryLengthAndAlignment) {
    std::mt19937_64 rng(0x1cc);
    const Bytes pool = random_bytes(rng, 4200 + 64);
    for (std::size_t length = 0; length <= 4200; ++length) {
        const std::size_t offset = length % 16; // every alignment, many times over
        const std::span<const std::uint8_t> data(pool.data() + offset, length);
        const auto state = static_cast<std::uint32_t>(rng());
        const std::uint32_t table = crc32_update(state, data, CrcPath::table);
        const std::uint32_t clmul = crc32_update(state, data, CrcPath::pclmul);
        ASSERT_EQ(table, clmul) << "length " << length << " offset " << offset;
        if (length < 600 || length % 97 == 0) {
            ASSERT_EQ(table, reference_update(state, data)) << "length " << length;
        }
    }
}

TEST(Crc32, FreshRandomBuffersOfEveryLength) {
    std::mt19937_64 rng(42);
    for (std::size_t length = 0; length <= 4200; ++length) {
        const Bytes data = random_bytes(rng, length);
        ASSERT_EQ(crc32(data, CrcPath::table), crc32(data, CrcPath::pclmul)) << length;
    }
}

TEST(Crc32, SplitUpdatesEqualOneUpdate) {
    std::mt19937_64 rng(7);
    const Bytes data = random_bytes(rng, 700);
    for (const CrcPath path : both_paths) {
        const std::uint32_t whole = crc32_update(0xffffffffU, data, path);
        for (std::size_t cut = 0; cut <= data.size(); ++cut) {
            const std::span<const std::uint8_t> all(data);
            std::uint32_t state = crc32_update(0xffffffffU, all.first(cut), path);
            state = crc32_update(state, all.subspan(cut), path);
            ASSERT_EQ(state, whole) << "cut at " << cut;
        }
    }
}

// ---- ICRC ---------------------------------------------------------------------------------------

// The ICRC spelled out: FF x 8, then the datagram with the variant fields set to ones.
std::uint32_t reference_icrc(std::span<const std::uint8_t> datagram) {
    Bytes masked(8, 0xff);
    masked.insert(masked.end(), datagram.begin(), datagram.end() - 4);
    std::uint8_t* ip = masked.data() + 8;
    std::size_t ip_length = 0;
    if ((ip[0] >> 4) == 4) {
        ip_length = std::size_t{ip[0] & 0x0fU} * 4;
        ip[1] = 0xff;
        ip[8] = 0xff;
        ip[10] = 0xff;
        ip[11] = 0xff;
    } else {
        ip_length = 40;
        ip[0] |= 0x0f;
        ip[1] = ip[2] = ip[3] = 0xff;
        ip[7] = 0xff;
    }
    ip[ip_length + 6] = 0xff;
    ip[ip_length + 7] = 0xff;
    ip[ip_length + 8 + 4] = 0xff;
    return ~reference_update(0xffffffffU, masked);
}

Bytes random_frame(std::mt19937_64& rng, IpVersion version, std::size_t payload_length,
                   Opcode opcode = Opcode::rc_send_only) {
    FrameHeaders h;
    h.ip_version = version;
    h.ipv4.tos = static_cast<std::uint8_t>(rng());
    h.ipv4.ttl = static_cast<std::uint8_t>(rng());
    h.ipv4.identification = static_cast<std::uint16_t>(rng());
    h.ipv4.src = static_cast<std::uint32_t>(rng());
    h.ipv4.dst = static_cast<std::uint32_t>(rng());
    h.ipv6.traffic_class = static_cast<std::uint8_t>(rng());
    h.ipv6.flow_label = static_cast<std::uint32_t>(rng());
    h.ipv6.hop_limit = static_cast<std::uint8_t>(rng());
    h.ipv6.src[0] = static_cast<std::uint8_t>(rng());
    h.udp_src_port = static_cast<std::uint16_t>(rng());
    h.bth.opcode = opcode;
    h.aeth.msn = static_cast<std::uint32_t>(rng()) & 0xffffffU;
    h.bth.dest_qp = static_cast<std::uint32_t>(rng());
    h.bth.psn = static_cast<std::uint32_t>(rng());
    h.bth.fecn = rng() % 2 == 0;
    const Bytes payload = random_bytes(rng, payload_length);
    Bytes out(payload_length + 128);
    const FrameLayout layout = build_frame(h, payload, out);
    EXPECT_TRUE(layout.ok());
    out.resize(layout.frame_length);
    return out;
}

TEST(Icrc, MatchesTheDefinitionForIpv4AndIpv6) {
    std::mt19937_64 rng(17);
    for (const IpVersion version : {IpVersion::ipv4, IpVersion::ipv6}) {
        for (std::size_t payload = 0; payload <= 300; ++payload) {
            const Bytes frame = random_frame(rng, version, payload);
            const std::span<const std::uint8_t> datagram =
                std::span(frame).subspan(ethernet_header_size);
            const std::uint32_t expected = reference_icrc(datagram);
            for (const CrcPath path : both_paths) {
                ASSERT_EQ(compute_icrc(datagram, path), expected) << payload;
            }
            ASSERT_TRUE(verify_icrc(datagram));
        }
    }
}

TEST(Icrc, Ipv4OptionsAreCovered) {
    std::mt19937_64 rng(5);
    Bytes datagram = random_frame(rng, IpVersion::ipv4, 40);
    datagram.erase(datagram.begin(), datagram.begin() + ethernet_header_size);
    // Grow the header to 28 bytes (IHL 7) with option bytes; the ICRC must cover them.
    datagram.insert(datagram.begin() + 20, {0x01, 0x01, 0x01, 0x01, 0x01, 0x01, 0x01, 0x00});
    datagram[0] = 0x47;
    const std::uint32_t icrc = compute_icrc(datagram);
    EXPECT_EQ(icrc, reference_icrc(datagram));
    datagram[22] ^= 0x10;
    EXPECT_NE(compute_icrc(datagram), icrc);
    EXPECT_EQ(compute_icrc(datagram), reference_icrc(datagram));
}

TEST(Icrc, Ipv6VariantFieldsAreMasked) {
    std::mt19937_64 rng(6);
    Bytes frame = random_frame(rng, IpVersion::ipv6, 100);
    const std::span<std::uint8_t> d = std::span(frame).subspan(ethernet_header_size);
    const std::uint32_t icrc = compute_icrc(d);
    d[0] ^= 0x0f; // traffic class, high nibble
    d[1] ^= 0xff; // traffic class low nibble, flow label
    d[2] ^= 0x5a;
    d[3] ^= 0xa5;
    d[7] ^= 0x33; // hop limit
    EXPECT_EQ(compute_icrc(d), icrc);
    for (const std::size_t covered : {std::size_t{4}, std::size_t{5}, std::size_t{6},
                                      std::size_t{8}, std::size_t{39}, std::size_t{48}}) {
        d[covered] ^= 0x01;
        EXPECT_NE(compute_icrc(d), icrc) << "byte " << covered;
        d[covered] ^= 0x01;
    }
    d[0] ^= 0x10; // the version is not masked
    EXPECT_NE(compute_icrc(d), icrc);
}

TEST(Icrc, ShortOrForeignDatagramsAreRefused) {
    std::mt19937_64 rng(8);
    const Bytes frame = random_frame(rng, IpVersion::ipv4, 0);
    const std::span<const std::uint8_t> d = std::span(frame).subspan(ethernet_header_size);
    ASSERT_EQ(d.size(), 20U + 8 + 12 + 4);
    EXPECT_TRUE(verify_icrc(d));
    for (std::size_t length = 0; length < d.size(); ++length) {
        EXPECT_EQ(compute_icrc(d.first(length)), 0U) << length;
        EXPECT_FALSE(verify_icrc(d.first(length))) << length;
    }
    Bytes copy = frame;
    ASSERT_FALSE(copy.empty());
    const std::span<std::uint8_t> odd = std::span(copy).subspan(ethernet_header_size);
    odd[0] = 0x55;
    EXPECT_EQ(compute_icrc(odd), 0U) << "IP version 5";
    EXPECT_FALSE(verify_icrc(odd));
    odd[0] = 0x44;
    EXPECT_FALSE(verify_icrc(odd)) << "IHL below 5";
    odd[0] = 0x4f;
    EXPECT_FALSE(verify_icrc(odd)) << "IHL 15 does not fit";
    EXPECT_FALSE(store_icrc(odd));
    EXPECT_EQ(stored_icrc({}), 0U);
}

// What the engine seals and verifies: its own frames, down to an ACK (44 covered bytes over IPv4,
// whose masked blocks run into the ICRC field) and a SEND without payload.
TEST(Icrc, BuiltDatagramsOfEveryShapeMatchTheDefinition) {
    std::mt19937_64 rng(23);
    for (const IpVersion version : {IpVersion::ipv4, IpVersion::ipv6}) {
        const bool ipv4 = version == IpVersion::ipv4;
        for (int round = 0; round < 50; ++round) {
            const Bytes ack = random_frame(rng, version, 0, Opcode::rc_acknowledge);
            const auto ack_datagram = std::span(ack).subspan(ethernet_header_size);
            ASSERT_EQ(compute_built_icrc(ack_datagram, ipv4), reference_icrc(ack_datagram));
            for (std::size_t payload = 0; payload <= 40; payload += 4) {
                const Bytes frame = random_frame(rng, version, payload);
                const auto datagram = std::span(frame).subspan(ethernet_header_size);
                ASSERT_EQ(compute_built_icrc(datagram, ipv4), reference_icrc(datagram)) << payload;
            }
        }
    }
}

// An ACK's prefix up to its PSN, kept once, gives every later ACK's ICRC from its last 8 bytes.
TEST(Icrc, APrefixKeptOnceGivesTheIcrcOfEveryFrameSharingIt) {
    std::mt19937_64 rng(29);
    for (const IpVersion version : {IpVersion::ipv4, IpVersion::ipv6}) {
        Bytes ack = random_frame(rng, version, 0, Opcode::rc_acknowledge);
        const auto datagram = std::span(ack).subspan(ethernet_header_size);
        const std::size_t bth = (version == IpVersion::ipv4 ? 20 : 40) + 8;
        const IcrcPrefix prefix = icrc_prefix(datagram, bth + 8);
        ASSERT_TRUE(prefix.ok());
        for (int round = 0; round < 200; ++round) {
            for (std::size_t i = bth + 8; i < bth + 16; ++i) {
                datagram[i] = static_cast<std::uint8_t>(rng()); // PSN, AckReq, AETH
            }
            ASSERT_EQ(icrc_after_prefix(prefix, datagram), reference_icrc(datagram));
        }
        // Every masked field must be inside the prefix, and the ICRC outside it.
        EXPECT_FALSE(icrc_prefix(datagram, bth + 4).ok());
        EXPECT_TRUE(icrc_prefix(datagram, bth + 5).ok());
        EXPECT_TRUE(icrc_prefix(datagram, datagram.size() - 4).ok());
        EXPECT_FALSE(icrc_prefix(datagram, datagram.size() - 3).ok());
        EXPECT_FALSE(icrc_prefix(datagram.first(bth + 12), bth + 8).ok());
    }
}

TEST(Icrc, StoreWritesLittleEndian) {
    std::mt19937_64 rng(9);
    Bytes frame = random_frame(rng, IpVersion::ipv4, 12);
    const std::span<std::uint8_t> d = std::span(frame).subspan(ethernet_header_size);
    const std::uint32_t icrc = compute_icrc(d);
    std::fill(d.end() - 4, d.end(), 0);
    ASSERT_TRUE(store_icrc(d));
    EXPECT_EQ(d[d.size() - 4], icrc & 0xffU);
    EXPECT_EQ(d[d.size() - 1], icrc >> 24);
    EXPECT_EQ(stored_icrc(d), icrc);
}

} // namespace
} // namespace prdma::roce
