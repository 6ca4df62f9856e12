// --verify's pattern and checker, the buffer walk both sides compute, and the image a write_bw
// server checks its receive half against.
#include <algorithm>
#include <cstring>
#include <set>
#include <vector>

#include <gtest/gtest.h>

#include "buffer_walk.hpp"
#include "verify.hpp"
#include "write_bw_image.hpp"

namespace prdma::perf {
namespace {

const std::uint64_t seeds[] = {stream_seed(0, 0, 0), stream_seed(0x123456, 0, 0),
                               stream_seed(0xffffff, 3, 7)};

std::vector<std::uint8_t> message_bytes(std::uint64_t seed, std::uint64_t message, std::size_t size,
                                        std::uint64_t first_offset = 0) {
    std::vector<std::uint8_t> out(size);
    fill_pattern(out, seed, message, first_offset);
    return out;
}

TEST(VerifyPattern, ConsecutiveMessagesDifferAtEveryOffset) {
    for (const std::uint64_t seed : seeds) {
        // Across the blocks of 256 too (255 -> 256, 511 -> 512).
        for (std::uint64_t m = 0; m < 700; ++m) {
            for (std::uint64_t offset = 0; offset < 100; ++offset) {
                ASSERT_NE(pattern_byte(seed, m, offset), pattern_byte(seed, m + 1, offset))
                    << "message " << m << " offset " << offset;
            }
        }
    }
}

TEST(VerifyPattern, OddDistancesAndNearMessagesDifferAtEveryOffset) {
    const std::uint64_t seed = seeds[1];
    for (const std::uint64_t m : {0ULL, 200ULL, 255ULL, 1000ULL, 1ULL << 40}) {
        for (const std::uint64_t d : {3ULL, 63ULL, 255ULL, 257ULL, 1001ULL}) {
            for (std::uint64_t offset = 0; offset < 64; ++offset) {
                ASSERT_NE(pattern_byte(seed, m, offset), pattern_byte(seed, m + d, offset))
                    << m << "+" << d;
            }
        }
    }
    // Within one block of 256 every distance differs everywhere.
    for (std::uint64_t a = 512; a < 768; a += 17) {
        for (std::uint64_t b = a + 1; b < 768; b += 5) {
            for (std::uint64_t offset = 0; offset < 16; ++offset) {
                ASSERT_NE(pattern_byte(seed, a, offset), pattern_byte(seed, b, offset));
            }
        }
    }
}

TEST(VerifyPattern, StreamsAndOffsetsLookUnrelated) {
    EXPECT_NE(stream_seed(1, 0, 0), stream_seed(2, 0, 0));
    EXPECT_NE(stream_seed(1, 0, 0), stream_seed(1, 1, 0));
    EXPECT_NE(stream_seed(1, 0, 0), stream_seed(1, 0, 1));
    const auto a = message_bytes(stream_seed(1, 0, 0), 5, 4096);
    const auto b = message_bytes(stream_seed(1, 0, 1), 5, 4096);
    std::size_t same = 0;
    for (std::size_t i = 0; i < a.size(); ++i) {
        same += a[i] == b[i] ? 1 : 0;
    }
    EXPECT_LT(same, 100U); // about 4096/128 by chance
    // The low bit is the message's parity (what makes odd distances differ); the rest spreads.
    const std::set<std::uint8_t> values(a.begin(), a.end());
    EXPECT_GT(values.size(), 120U);
    EXPECT_TRUE(std::all_of(a.begin(), a.end(), [](std::uint8_t v) { return (v & 1) == 1; }));
}

TEST(VerifyPattern, FillIsTheByteFunctionFromAnyOffset) {
    const std::uint64_t seed = seeds[2];
    for (const std::uint64_t first : {0ULL, 3ULL, 8ULL, 61ULL}) {
        const auto bytes = message_bytes(seed, 77, 45, first);
        for (std::size_t i = 0; i < bytes.size(); ++i) {
            ASSERT_EQ(bytes[i], pattern_byte(seed, 77, first + i)) << first << " " << i;
        }
    }
    std::vector<std::uint8_t> poison(45);
    fill_complement(poison, seed, 77, 3);
    const auto bytes = message_bytes(seed, 77, 45, 3);
    for (std::size_t i = 0; i < poison.size(); ++i) {
        EXPECT_EQ(poison[i], static_cast<std::uint8_t>(~bytes[i]));
    }
}

TEST(VerifyCheck, FindsTheFirstWrongByteAndCountsAll) {
    const std::uint64_t seed = seeds[1];
    auto bytes = message_bytes(seed, 9, 4096);
    EXPECT_FALSE(check_pattern(bytes, seed, 9).has_value());
    const std::uint8_t right = bytes[1000];
    bytes[1000] ^= 0x40;
    bytes[3000] ^= 0x01;
    bytes[2000] ^= 0xff;
    const auto m = check_pattern(bytes, seed, 9);
    ASSERT_TRUE(m.has_value());
    EXPECT_EQ(m->offset, 1000U);
    EXPECT_EQ(m->expected, right);
    EXPECT_EQ(m->found, right ^ 0x40);
    EXPECT_EQ(m->bad_bytes, 3U);
}

TEST(VerifyCheck, AStaleMessageFailsEverywhere) {
    const std::uint64_t seed = seeds[0];
    for (const std::uint64_t m : {1ULL, 256ULL, 1000ULL}) {
        const auto previous = message_bytes(seed, m - 1, 333);
        const auto found = check_pattern(previous, seed, m);
        ASSERT_TRUE(found.has_value());
        EXPECT_EQ(found->offset, 0U);
        EXPECT_EQ(found->bad_bytes, 333U) << m;
    }
    // An older one, or one from another stream, fails too (by chance at a byte or two only).
    const auto older = check_pattern(message_bytes(seed, 998, 333), seed, 1000);
    ASSERT_TRUE(older.has_value());
    EXPECT_GT(older->bad_bytes, 300U);
    EXPECT_TRUE(check_pattern(message_bytes(seeds[1], 1000, 333), seed, 1000).has_value());
}

TEST(VerifyCheck, AnUntouchedBufferFails) {
    const std::uint64_t seed = seeds[2];
    const std::vector<std::uint8_t> zeros(256, 0);
    EXPECT_TRUE(check_pattern(zeros, seed, 4).has_value());
    std::vector<std::uint8_t> poisoned(256);
    fill_complement(poisoned, seed, 4);
    const auto m = check_pattern(poisoned, seed, 4);
    ASSERT_TRUE(m.has_value());
    EXPECT_EQ(m->bad_bytes, 256U);
    // Data a READ brought from the wrong place fails.
    EXPECT_TRUE(check_pattern(message_bytes(seed, 0, 64, 128), seed, 0, 192).has_value());
    EXPECT_FALSE(check_pattern(message_bytes(seed, 0, 64, 128), seed, 0, 128).has_value());
}

TEST(VerifyCheck, CompareBytes) {
    const std::vector<std::uint8_t> want{1, 2, 3, 4};
    EXPECT_FALSE(compare_bytes(want, want).has_value());
    const std::vector<std::uint8_t> got{1, 2, 9, 9};
    const auto m = compare_bytes(got, want);
    ASSERT_TRUE(m.has_value());
    EXPECT_EQ(m->offset, 2U);
    EXPECT_EQ(m->expected, 3);
    EXPECT_EQ(m->found, 9);
    EXPECT_EQ(m->bad_bytes, 2U);
}

TEST(VerifyAtomic, FetchAndAddCountsAndCompareAndSwapRepeats) {
    const std::uint64_t seed = seeds[1];
    const auto served = message_bytes(seed, 0, 8, 128);
    std::uint64_t base = 0;
    std::memcpy(&base, served.data(), sizeof(base));
    EXPECT_EQ(atomic_original(seed, 128, 0, true), base);
    EXPECT_EQ(atomic_original(seed, 128, 5, true), base + 5);
    EXPECT_EQ(atomic_original(seed, 128, 5, false), base);
    EXPECT_NE(atomic_original(seed, 192, 0, true), base);
}

// The runner's walk, written out as it was before BufferWalk: both must agree.
std::vector<std::uint64_t> reference_walk(std::uint64_t size, std::uint64_t length,
                                          std::uint64_t cycle_buffer, std::uint64_t line,
                                          std::uint64_t count) {
    const std::uint64_t step = size <= cycle_buffer / 2 ? (size + line - 1) / line * line : 0;
    std::vector<std::uint64_t> offsets;
    std::uint64_t offset = 0;
    for (std::uint64_t i = 0; i < count; ++i) {
        offsets.push_back(offset);
        if (step != 0) {
            offset += step;
            if (offset + length > cycle_buffer) {
                offset = 0;
            }
        }
    }
    return offsets;
}

TEST(VerifyWalk, AgreesWithPerftestsWalk) {
    struct Case {
        std::uint64_t size, length, cycle_buffer, line;
    };
    for (const Case c : {Case{64, 64, 4096, 64}, Case{100, 100, 4096, 64}, Case{8, 8, 4096, 64},
                         Case{2048, 2048, 4096, 64}, Case{2049, 2049, 4096, 64},
                         Case{65536, 65536, 4096, 64}, Case{1000, 1000, 65536, 128}}) {
        const BufferWalk walk(c.size, c.length, c.cycle_buffer, c.line);
        const auto want = reference_walk(c.size, c.length, c.cycle_buffer, c.line, 3000);
        std::uint64_t offset = 0;
        std::set<std::uint64_t> places;
        for (std::uint64_t i = 0; i < want.size(); ++i) {
            ASSERT_EQ(offset, want[i]) << c.size << " message " << i;
            ASSERT_EQ(walk.offset_of(i), want[i]) << c.size << " message " << i;
            places.insert(want[i]);
            offset = walk.next(offset);
        }
        EXPECT_EQ(walk.period(), places.size()) << c.size;
    }
    EXPECT_EQ(BufferWalk::in_place(100).offset_of(17), 0U);
}

TEST(VerifyWalk, LastMessageAtIsTheLastThatCoveredTheByte) {
    const BufferWalk walk(100, 100, 4096, 64);
    for (const std::uint64_t messages : {1ULL, 5ULL, 32ULL, 33ULL, 200ULL}) {
        std::vector<std::optional<std::uint64_t>> last(4096);
        for (std::uint64_t m = 0; m < messages; ++m) {
            for (std::uint64_t i = 0; i < 100; ++i) {
                last[walk.offset_of(m) + i] = m;
            }
        }
        for (std::uint64_t offset = 0; offset < 4096; ++offset) {
            ASSERT_EQ(walk.last_message_at(offset, messages), last[offset])
                << messages << " " << offset;
        }
    }
}

TEST(VerifyWriteImage, IsWhatEveryWriteInOrderLeaves) {
    const std::vector<std::uint64_t> sizes{64, 100, 3000, 8192};
    const WriteBwRun run{sizes, 70, 4096, 64};
    const std::uint64_t length = 16384;
    const std::uint32_t psn = 0xabcdef;
    const WriteBwImage image = write_bw_image(run, length, psn, 1);
    // Every WRITE of every size, in order, over what nothing wrote.
    const WriteBwImage untouched = write_bw_image(WriteBwRun{{}, 70, 4096, 64}, length, psn, 1);
    std::vector<std::uint8_t> bytes = untouched.bytes;
    std::vector<bool> written(length, false);
    for (unsigned index = 0; index < sizes.size(); ++index) {
        const BufferWalk walk(sizes[index], sizes[index], 4096, 64);
        for (std::uint64_t m = 0; m < run.iterations; ++m) {
            const std::uint64_t offset = walk.offset_of(m);
            fill_pattern(std::span(bytes).subspan(offset, sizes[index]), stream_seed(psn, 1, index),
                         m);
            std::fill_n(written.begin() + static_cast<std::ptrdiff_t>(offset), sizes[index], true);
        }
    }
    EXPECT_EQ(image.bytes, bytes);
    EXPECT_EQ(image.written, written);
    EXPECT_FALSE(std::all_of(written.begin(), written.end(), [](bool w) { return w; }));
    // Who wrote a byte last: the 8192-byte run's last message covers the start.
    const auto first = last_write_at(run, 0);
    ASSERT_TRUE(first.has_value());
    EXPECT_EQ(first->size_index, 3U);
    EXPECT_EQ(first->message, 69U);
    EXPECT_FALSE(last_write_at(run, 16000).has_value());
}

} // namespace
} // namespace prdma::perf
