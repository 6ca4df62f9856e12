// --verify's record: what it counts, what it says about the first wrong message or buffer, and
// the one byte --verify-corrupt-at damages.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "verifier.hpp"

namespace prdma::perf {
namespace {

constexpr TestId write_lat{Verb::write, Kind::latency};
constexpr TestId write_bw{Verb::write, Kind::bandwidth};

Verifier make(TestId test, std::optional<std::uint64_t> corrupt_at = std::nullopt) {
    Verifier v(test, corrupt_at);
    v.set_psns({0x111111, 0x222222}, {0x333333, 0x444444});
    return v;
}

std::vector<std::uint8_t> sent(const Verifier& v, std::uint64_t seed, std::uint64_t message,
                               std::size_t size) {
    std::vector<std::uint8_t> out(size);
    v.fill(out, seed, message);
    return out;
}

bool contains(const std::string& text, const std::string& part) {
    return text.find(part) != std::string::npos;
}

TEST(Verifier, StreamsComeFromThePsnsOfTheSendingSide) {
    const Verifier v = make(write_lat);
    EXPECT_EQ(v.outgoing(1, 2), stream_seed(0x222222, 1, 2));
    EXPECT_EQ(v.incoming(0, 0), stream_seed(0x333333, 0, 0));
    EXPECT_NE(v.outgoing(0, 0), v.incoming(0, 0));
}

TEST(Verifier, CountsWhatItCheckedPerResultLine) {
    Verifier v = make(write_lat);
    // The peer's fill is our incoming stream: the same function on both sides.
    const Verifier peer = make(write_lat);
    for (std::uint64_t m = 0; m < 3; ++m) {
        const auto bytes = sent(peer, v.incoming(0, 0), m, 100);
        EXPECT_TRUE(v.check(bytes, v.incoming(0, 0), m, 0, Place{0, 100, m}));
    }
    EXPECT_FALSE(v.failed());
    const VerifySummary first = v.take_summary();
    EXPECT_EQ(first.bytes, 300U);
    EXPECT_EQ(first.messages, 3U);
    EXPECT_EQ(first.failures, 0U);
    EXPECT_EQ(v.take_summary().messages, 0U); // since the last line
    EXPECT_EQ(v.failure(), "");
}

TEST(Verifier, ReportsTheFirstMismatchInFull) {
    Verifier v = make(write_lat);
    const std::uint64_t seed = v.incoming(0, 0);
    auto bytes = sent(v, seed, 17, 64);
    const std::uint8_t right = bytes[31];
    bytes[31] ^= 0x5a;
    EXPECT_FALSE(v.check(bytes, seed, 17, 0, Place{0, 64, 17}));
    // A later, worse one is counted but the first stays the one described.
    std::vector<std::uint8_t> zeros(64, 0);
    EXPECT_FALSE(v.check(zeros, seed, 18, 0, Place{0, 64, 18}));
    EXPECT_TRUE(v.failed());
    const std::string text = v.failure();
    EXPECT_TRUE(contains(text, "write_lat: 2 of 2 checked messages wrong")) << text;
    EXPECT_TRUE(contains(text, "message #17 of the 64-byte run")) << text;
    EXPECT_TRUE(contains(text, "1 wrong byte(s) of 64, the first at offset 31")) << text;
    char expected[32];
    std::snprintf(expected, sizeof(expected), "expected 0x%02x, found 0x%02x", right, right ^ 0x5a);
    EXPECT_TRUE(contains(text, expected)) << text;
    EXPECT_EQ(v.take_summary().failures, 2U);
    // All wrong: most likely the two sides ran differently.
    EXPECT_TRUE(contains(text, "do both sides have --verify")) << text;
    const auto good = sent(v, seed, 19, 64);
    EXPECT_TRUE(v.check(good, seed, 19, 0, Place{0, 64, 19}));
    EXPECT_FALSE(contains(v.failure(), "do both sides have --verify")) << v.failure();
}

TEST(Verifier, AReceiveOfTheWrongLengthFails) {
    Verifier v = make(TestId{Verb::send, Kind::bandwidth});
    v.wrong_length(10, Place{1, 64, 5});
    EXPECT_TRUE(v.failed());
    EXPECT_TRUE(contains(v.failure(), "QP 1, message #5 of the 64-byte run arrived with 10 bytes"))
        << v.failure();
}

TEST(Verifier, CorruptAtDamagesOneByteOfThatMessageOnly) {
    const Verifier v = make(write_lat, 3);
    const std::uint64_t seed = v.outgoing(0, 0);
    EXPECT_FALSE(check_pattern(sent(v, seed, 2, 100), seed, 2).has_value());
    const auto m = check_pattern(sent(v, seed, 3, 100), seed, 3);
    ASSERT_TRUE(m.has_value());
    EXPECT_EQ(m->bad_bytes, 1U);
    EXPECT_EQ(m->offset, 50U);
    EXPECT_TRUE(sent(v, seed, 3, 0).empty()); // nothing to damage
}

// A write_bw server's receive half as the client's WRITEs leave it.
std::vector<std::uint8_t> after_writes(const WriteBwRun& run, std::uint64_t length,
                                       std::uint32_t client_psn, unsigned qp) {
    return write_bw_image(run, length, client_psn, qp).bytes;
}

TEST(Verifier, WriteBwEndStateNamesTheLastWriter) {
    const std::vector<std::uint64_t> sizes{64};
    const WriteBwRun run{sizes, 100, 4096, 64};
    Verifier v = make(write_bw);
    auto half = after_writes(run, 4096, 0x444444, 1); // QP 1's client PSN
    EXPECT_TRUE(v.check_end_state(half, run, 1));
    EXPECT_FALSE(v.check_end_state(half, run, 0)); // QP 0's stream is another
    Verifier w = make(write_bw);
    // 100 WRITEs over 64 places: place 5 (offset 320) was last written by message 69.
    half[320 + 7] ^= 1;
    EXPECT_FALSE(w.check_end_state(half, run, 1));
    const std::string text = w.failure();
    EXPECT_TRUE(contains(text, "write_bw: 1 of 1 checked buffers wrong")) << text;
    EXPECT_TRUE(contains(text, "1 wrong byte(s) of 4096, the first at offset 327")) << text;
    EXPECT_TRUE(contains(text, "message #69 of the 64-byte run wrote last")) << text;
    const VerifySummary summary = w.take_summary();
    EXPECT_EQ(summary.buffers, 1U);
    EXPECT_EQ(summary.bytes, 4096U);
    EXPECT_EQ(summary.messages, 0U);
}

TEST(Verifier, WriteBwEndStateCatchesStrayAndMissingWrites) {
    const std::vector<std::uint64_t> sizes{100};
    const WriteBwRun run{sizes, 10, 4096, 64};
    // A byte past the tenth place: no WRITE should have reached it.
    Verifier stray = make(write_bw);
    auto half = after_writes(run, 4096, 0x333333, 0);
    half[4000] ^= 0x80;
    EXPECT_FALSE(stray.check_end_state(half, run, 0));
    EXPECT_TRUE(contains(stray.failure(), "a byte no WRITE should have reached"))
        << stray.failure();
    // The server's fill before the run: written places hold the complement, so WRITEs that never
    // landed fail at every one of their bytes.
    Verifier missing = make(write_bw);
    const WriteBwImage image = write_bw_image(run, 4096, 0x333333, 0);
    std::vector<std::uint8_t> before(4096);
    for (std::size_t i = 0; i < before.size(); ++i) {
        before[i] = static_cast<std::uint8_t>(image.written[i] ? ~image.bytes[i] : image.bytes[i]);
    }
    EXPECT_FALSE(missing.check_end_state(before, run, 0));
    EXPECT_TRUE(contains(missing.failure(), "1000 wrong byte(s) of 4096, the first at offset 0"))
        << missing.failure();
}

} // namespace
} // namespace prdma::perf
