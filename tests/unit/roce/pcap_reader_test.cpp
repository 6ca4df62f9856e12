// The test pcap reader: all four classic variants (either byte order, micro- or nanosecond
// timestamps) read back to the same records, and corrupt files are refused, not crashed on.
#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include <gtest/gtest.h>

#include "captures.hpp"
#include "pcap_reader.hpp"

namespace prdma::roce {
namespace {

pcap::File sample() {
    pcap::File file;
    file.snaplen = 2048;
    file.records.push_back({1795257569, 607248000, 4, {1, 2, 3, 4}});
    file.records.push_back({1795257570, 1000, 100, {0xaa, 0xbb}}); // cut by snaplen
    file.records.push_back({1795257571, 999999000, 0, {}});
    return file;
}

TEST(PcapReader, AllFourVariantsRoundTrip) {
    for (const bool big_endian : {false, true}) {
        for (const bool nanosecond : {false, true}) {
            pcap::File file = sample();
            file.big_endian = big_endian;
            file.nanosecond = nanosecond;
            if (nanosecond) {
                file.records[1].nanoseconds = 1234; // not a whole microsecond
            }
            const std::vector<std::uint8_t> bytes = pcap::write(file);
            const pcap::ReadResult read = pcap::parse(bytes);
            ASSERT_TRUE(read.ok()) << read.error;
            EXPECT_EQ(read.file.big_endian, big_endian);
            EXPECT_EQ(read.file.nanosecond, nanosecond);
            EXPECT_EQ(read.file.snaplen, 2048U);
            EXPECT_EQ(read.file.linktype, pcap::linktype_ethernet);
            EXPECT_EQ(read.file.records, file.records);
        }
    }
}

TEST(PcapReader, MagicBytesOnDisk) {
    pcap::File file = sample();
    const std::vector<std::vector<std::uint8_t>> expected = {
        {0xd4, 0xc3, 0xb2, 0xa1}, // little-endian, microseconds (what tcpdump writes on x86)
        {0x4d, 0x3c, 0xb2, 0xa1}, // little-endian, nanoseconds
        {0xa1, 0xb2, 0xc3, 0xd4}, // big-endian, microseconds
        {0xa1, 0xb2, 0x3c, 0x4d}, // big-endian, nanoseconds
    };
    std::size_t i = 0;
    for (const bool big_endian : {false, true}) {
        for (const bool nanosecond : {false, true}) {
            file.big_endian = big_endian;
            file.nanosecond = nanosecond;
            const auto bytes = pcap::write(file);
            EXPECT_EQ(std::vector<std::uint8_t>(bytes.begin(), bytes.begin() + 4), expected[i++]);
        }
    }
}

TEST(PcapReader, ReferenceCapturesSurviveConversion) {
    ASSERT_TRUE(captures::all().error.empty()) << captures::all().error;
    for (const auto& capture : captures::all().captures) {
        EXPECT_FALSE(capture.file.big_endian) << capture.name;
        EXPECT_FALSE(capture.file.nanosecond) << capture.name;
        for (const bool big_endian : {false, true}) {
            for (const bool nanosecond : {false, true}) {
                pcap::File converted = capture.file;
                converted.big_endian = big_endian;
                converted.nanosecond = nanosecond;
                const pcap::ReadResult read = pcap::parse(pcap::write(converted));
                ASSERT_TRUE(read.ok()) << read.error;
                EXPECT_EQ(read.file.records, capture.file.records) << capture.name;
            }
        }
    }
}

TEST(PcapReader, CorruptFilesAreRefused) {
    const std::vector<std::uint8_t> good = pcap::write(sample());
    EXPECT_FALSE(pcap::parse({}).ok());
    EXPECT_FALSE(pcap::parse(std::span(good).first(23)).ok()) << "short file header";
    std::vector<std::uint8_t> bad_magic = good;
    bad_magic[0] = 0;
    EXPECT_FALSE(pcap::parse(bad_magic).ok());
    std::vector<std::uint8_t> bad_version = good;
    bad_version[4] = 1;
    EXPECT_FALSE(pcap::parse(bad_version).ok());
    // Every cut inside a record is an error; cuts on a record boundary are shorter files.
    const std::vector<std::size_t> boundaries = {24, 24 + 16 + 4, 24 + 16 + 4 + 16 + 2,
                                                 good.size()};
    for (std::size_t length = 24; length <= good.size(); ++length) {
        const bool boundary =
            std::find(boundaries.begin(), boundaries.end(), length) != boundaries.end();
        EXPECT_EQ(pcap::parse(std::span(good).first(length)).ok(), boundary) << length;
    }
    std::vector<std::uint8_t> huge = good;
    huge[24 + 8] = 0xff; // captured length 0x...ff
    huge[24 + 11] = 0x7f;
    EXPECT_FALSE(pcap::parse(huge).ok());
    std::vector<std::uint8_t> bad_fraction = good;
    bad_fraction[24 + 7] = 0xff; // microseconds >= 10^6
    EXPECT_FALSE(pcap::parse(bad_fraction).ok());
    EXPECT_FALSE(pcap::read("/nonexistent/file.pcap").ok());
}

} // namespace
} // namespace prdma::roce
