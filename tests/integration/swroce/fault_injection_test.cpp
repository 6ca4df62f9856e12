// swroce's FaultInjector on a real EAL, with real RoCEv2 frames (built by lib/roce) in real
// mbufs from a real pktmbuf pool: the same seed makes the same decisions, each fault happens at
// its rate, nothing leaks or is lost (dropped frames are freed, held ones come back or are freed
// by release_all), reordered frames come out exactly reorder_depth places later, duplicates are
// byte-identical, every corrupted RoCE frame fails lib/roce's ICRC check while ARP and other
// traffic is never touched, delayed frames wait for their deadline, and a full output array
// keeps what does not fit.
#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <set>
#include <span>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <rte_errno.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

#include <prdma/roce/icrc.hpp>
#include <prdma/roce/packet.hpp>

#include "arp.hpp"
#include "eal_environment.hpp"
#include "fault_injection.hpp"

namespace prdma::swroce {
namespace {

const auto* const g_environment =
    prdma::test_support::add_eal_environment("swroce_fault_injection_test");

constexpr std::uint64_t never = std::numeric_limits<std::uint64_t>::max();

// A pktmbuf pool for one test, freed with it. Per-lcore caches off, so the in-use count is
// exact at every moment.
class Pool {
public:
    explicit Pool(unsigned size = 4095) {
        static unsigned serial = 0;
        const std::string name = "fi_pool" + std::to_string(serial++);
        pool_ = rte_pktmbuf_pool_create(name.c_str(), size, 0, 0, RTE_MBUF_DEFAULT_BUF_SIZE,
                                        SOCKET_ID_ANY);
        EXPECT_NE(pool_, nullptr) << name << ": " << rte_strerror(rte_errno);
    }
    Pool(const Pool&) = delete;
    Pool& operator=(const Pool&) = delete;
    ~Pool() {
        if (pool_ != nullptr) {
            EXPECT_EQ(in_use(), 0U) << "mbufs leaked from " << pool_->name;
            rte_mempool_free(pool_);
        }
    }
    [[nodiscard]] rte_mempool* get() const { return pool_; }
    [[nodiscard]] unsigned in_use() const { return rte_mempool_in_use_count(pool_); }

private:
    rte_mempool* pool_ = nullptr;
};

enum class Kind : std::uint8_t {
    ipv4,
    ipv6,
    vlan_ipv4,
    ipv4_padded, // no payload: 58 bytes, padded to 60 after the ICRC
    arp,
    other_udp, // a RoCE-looking datagram to UDP port 4792: not RoCEv2
};
constexpr std::array<Kind, 6> every_kind = {Kind::ipv4,        Kind::ipv6, Kind::vlan_ipv4,
                                            Kind::ipv4_padded, Kind::arp,  Kind::other_udp};

bool is_roce(Kind kind) {
    return kind != Kind::arp && kind != Kind::other_udp;
}

// The bytes of frame `id` of a kind: a pure function, so a test can rebuild what went in.
std::vector<std::uint8_t> frame_bytes(Kind kind, std::uint32_t id) {
    std::vector<std::uint8_t> out(2048);
    if (kind == Kind::arp) {
        out.resize(build_arp_request(out, {0x02, 0, 0, 0, 0, 1}, 0x0a000001, 0x0a000002));
        return out;
    }
    roce::FrameHeaders h;
    h.eth.dst = {0x02, 0, 0, 0, 0, 2};
    h.eth.src = {0x02, 0, 0, 0, 0, 1};
    h.eth.vlan = kind == Kind::vlan_ipv4;
    h.eth.vlan_tci = 100;
    h.ip_version = kind == Kind::ipv6 ? roce::IpVersion::ipv6 : roce::IpVersion::ipv4;
    h.ipv4.src = 0x0a000001;
    h.ipv4.dst = 0x0a000002;
    h.ipv6.src = {0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
    h.ipv6.dst = {0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2};
    h.bth.opcode = roce::Opcode::rc_send_only;
    h.bth.dest_qp = 0x12;
    h.bth.psn = id & roce::qpn_mask;
    std::vector<std::uint8_t> payload(kind == Kind::ipv4_padded ? 0 : 1 + id % 300);
    for (std::size_t i = 0; i < payload.size(); ++i) {
        payload[i] = static_cast<std::uint8_t>(id * 31 + i);
    }
    const roce::FrameLayout layout = roce::build_frame(h, payload, out);
    EXPECT_TRUE(layout.ok());
    if (h.ip_version == roce::IpVersion::ipv6) {
        EXPECT_TRUE(roce::set_ipv6_udp_checksum(out, layout));
    }
    if (kind == Kind::other_udp) {
        const std::size_t udp = layout.ip_offset + roce::ipv4_header_size;
        out[udp + 2] = 0x12; // destination port 4792
        out[udp + 3] = 0xb8;
    }
    out.resize(layout.wire_length);
    return out;
}

// The test's name for a frame travels in the mbuf's hash field, which rte_pktmbuf_copy keeps:
// a duplicate carries its original's id, whatever its bytes became.
rte_mbuf* make_frame(rte_mempool* pool, const std::vector<std::uint8_t>& bytes, std::uint32_t id) {
    rte_mbuf* m = rte_pktmbuf_alloc(pool);
    if (m == nullptr) {
        ADD_FAILURE() << "pool empty";
        return nullptr;
    }
    auto* data = reinterpret_cast<std::uint8_t*>(
        rte_pktmbuf_append(m, static_cast<std::uint16_t>(bytes.size())));
    if (data == nullptr) {
        ADD_FAILURE() << "no room for " << bytes.size() << " bytes";
        rte_pktmbuf_free(m);
        return nullptr;
    }
    std::memcpy(data, bytes.data(), bytes.size());
    m->hash.usr = id;
    return m;
}

std::uint32_t id_of(const rte_mbuf* m) {
    return m->hash.usr;
}

std::span<const std::uint8_t> bytes_of(const rte_mbuf* m) {
    return {rte_pktmbuf_mtod(m, const std::uint8_t*), rte_pktmbuf_data_len(m)};
}

// Feeds frames through an injector in bursts, as a queue group's progress does, and hands every
// frame that comes out, in order, to `sink` (which then owns it).
struct Pump {
    using Sink = std::function<void(rte_mbuf*, std::uint64_t now)>;
    using Maker = std::function<std::vector<std::uint8_t>(std::uint32_t id)>;

    Pump(FaultInjector& injector_to_feed, rte_mempool* frame_pool)
        : injector(injector_to_feed), pool(frame_pool) {}

    FaultInjector& injector;
    rte_mempool* pool;
    std::uint16_t burst = 32;
    std::uint16_t capacity = 64;
    std::uint64_t now = 0;
    std::uint64_t now_step = 0; // per burst
    Sink sink = [](rte_mbuf* m, std::uint64_t) { rte_pktmbuf_free(m); };
    FaultCounters counters;
    std::uint32_t next_id = 0;
    std::uint64_t calls = 0;

    // Sends frames next_id .. next_id + n - 1.
    void send(std::uint32_t n, const Maker& make) {
        std::vector<rte_mbuf*> frames(capacity);
        while (n > 0) {
            const auto count = static_cast<std::uint16_t>(std::min<std::uint32_t>(n, burst));
            for (std::uint16_t i = 0; i < count; ++i) {
                frames[i] = make_frame(pool, make(next_id), next_id);
                ASSERT_NE(frames[i], nullptr);
                ++next_id;
            }
            deliver(frames, count);
            n -= count;
            now += now_step;
        }
    }
    // One apply() with `count` new frames in frames[0, count).
    std::uint16_t deliver(std::vector<rte_mbuf*>& frames, std::uint16_t count) {
        ++calls;
        const std::uint16_t out =
            injector.apply(frames.data(), count, capacity, now, pool, counters);
        EXPECT_LE(out, capacity);
        for (std::uint16_t i = 0; i < out; ++i) {
            sink(frames[i], now);
        }
        return out;
    }
    // Empty calls at the end of time until nothing is held.
    void flush() {
        std::vector<rte_mbuf*> frames(capacity);
        now = never;
        for (unsigned round = 0; injector.held() > 0 && round < 1000; ++round) {
            deliver(frames, 0);
        }
        EXPECT_EQ(injector.held(), 0U);
    }
};

Pump::Maker of_kind(Kind kind) {
    return [kind](std::uint32_t id) { return frame_bytes(kind, id); };
}
Pump::Maker mixed() {
    return [](std::uint32_t id) { return frame_bytes(every_kind[id % every_kind.size()], id); };
}

// Binomial bounds, five standard deviations: deterministic for a seed, and still tight.
void expect_rate(std::uint64_t hits, std::uint64_t trials, double p, const std::string& what) {
    const double mean = static_cast<double>(trials) * p;
    const double sigma = std::sqrt(static_cast<double>(trials) * p * (1 - p));
    EXPECT_NEAR(static_cast<double>(hits), mean, 5 * sigma)
        << what << ": " << hits << " of " << trials << " at p=" << p;
}

FaultRates all_rates(double p) {
    FaultRates rates;
    rates.drop = rates.reorder = rates.duplicate = rates.corrupt = rates.delay = p;
    return rates;
}

// ---- Configuration --------------------------------------------------------------------------

TEST(FaultInjection, InactiveWithoutRatesAndThenAPassThrough) {
    FaultInjector injector;
    EXPECT_FALSE(injector.active()) << "a new injector injects nothing";
    FaultRates none;
    EXPECT_FALSE(none.any());
    injector.configure(none, 3, 100, 1);
    EXPECT_FALSE(injector.active());
    FaultRates junk;
    junk.drop = -0.5;
    junk.delay = std::nan("");
    EXPECT_FALSE(junk.any());
    injector.configure(junk, 3, 100, 1);
    EXPECT_FALSE(injector.active()) << "negative and NaN rates are off";

    for (double FaultRates::*rate :
         {&FaultRates::drop, &FaultRates::reorder, &FaultRates::duplicate, &FaultRates::corrupt,
          &FaultRates::delay}) {
        FaultRates one;
        one.*rate = 0.001;
        EXPECT_TRUE(one.any());
        injector.configure(one, 3, 100, 1);
        EXPECT_TRUE(injector.active());
    }

    // Off: every frame comes out untouched, in order, and nothing is counted.
    Pool pool;
    injector.configure(none, 3, 100, 1);
    Pump pump{injector, pool.get()};
    std::uint32_t expected = 0;
    pump.sink = [&](rte_mbuf* m, std::uint64_t) {
        EXPECT_EQ(id_of(m), expected++);
        const auto want = frame_bytes(every_kind[id_of(m) % every_kind.size()], id_of(m));
        EXPECT_TRUE(std::equal(want.begin(), want.end(), bytes_of(m).begin(), bytes_of(m).end()));
        rte_pktmbuf_free(m);
    };
    pump.send(500, mixed());
    EXPECT_EQ(expected, 500U);
    EXPECT_EQ(injector.held(), 0U);
    EXPECT_EQ(pump.counters.dropped + pump.counters.corrupted + pump.counters.duplicated +
                  pump.counters.reordered + pump.counters.delayed,
              0U);
}

TEST(FaultInjection, InjectorSeedsDifferPerGroupAndDirection) {
    std::set<std::uint64_t> seeds;
    for (unsigned group = 0; group < 64; ++group) {
        for (const FaultDirection direction : {FaultDirection::rx, FaultDirection::tx}) {
            seeds.insert(injector_seed(1, group, direction));
            EXPECT_EQ(injector_seed(1, group, direction), injector_seed(1, group, direction));
        }
    }
    EXPECT_EQ(seeds.size(), 128U);
    EXPECT_NE(injector_seed(1, 0, FaultDirection::rx), injector_seed(2, 0, FaultDirection::rx));
}

// ---- Determinism ----------------------------------------------------------------------------

struct Trace {
    std::vector<std::uint64_t> frames; // id and a CRC of the bytes, in output order
    std::array<std::uint64_t, 7> counters{};
    friend bool operator==(const Trace&, const Trace&) = default;
};

Trace trace_of(std::uint64_t seed, rte_mempool* pool) {
    FaultInjector injector;
    injector.configure(all_rates(0.1), 3, 40, seed);
    Trace trace;
    Pump pump{injector, pool};
    pump.now_step = 10;
    pump.sink = [&](rte_mbuf* m, std::uint64_t) {
        trace.frames.push_back((std::uint64_t{id_of(m)} << 32) | roce::crc32(bytes_of(m)));
        rte_pktmbuf_free(m);
    };
    pump.send(3000, mixed());
    pump.flush();
    const FaultCounters& c = pump.counters;
    trace.counters = {c.dropped, c.reordered,         c.duplicated,     c.corrupted,
                      c.delayed, c.duplicate_no_mbuf, c.corrupt_no_mbuf};
    return trace;
}

TEST(FaultInjection, SameSeedSameDecisionsOtherSeedOthers) {
    Pool pool;
    const Trace first = trace_of(7, pool.get());
    ASSERT_GT(first.frames.size(), 2000U);
    EXPECT_EQ(trace_of(7, pool.get()), first);
    const Trace other = trace_of(8, pool.get());
    EXPECT_NE(other.frames, first.frames);
    EXPECT_NE(other.counters, first.counters);
    // Seed 0 stands for one fixed constant, not for "no randomness".
    EXPECT_EQ(trace_of(0, pool.get()), trace_of(0, pool.get()));
    EXPECT_NE(trace_of(0, pool.get()).frames, first.frames);
    EXPECT_GT(trace_of(0, pool.get()).counters[0], 0U);
}

// ---- Rates ------------------------------------------------------------------------------------

constexpr std::uint32_t rate_frames = 100000;

TEST(FaultInjection, DropRateAndDroppedFramesFreed) {
    Pool pool;
    FaultInjector injector;
    FaultRates rates;
    rates.drop = 0.1;
    injector.configure(rates, 3, 100, 11);
    Pump pump{injector, pool.get()};
    std::uint64_t out = 0;
    std::uint32_t last = 0;
    pump.sink = [&](rte_mbuf* m, std::uint64_t) {
        EXPECT_TRUE(out == 0 || id_of(m) > last) << "order kept";
        last = id_of(m);
        ++out;
        rte_pktmbuf_free(m);
        EXPECT_LE(pool.in_use(), pump.burst) << "a dropped frame was not freed";
    };
    pump.send(rate_frames, mixed());
    expect_rate(pump.counters.dropped, rate_frames, 0.1, "dropped");
    EXPECT_EQ(out + pump.counters.dropped, rate_frames);
    EXPECT_EQ(pool.in_use(), 0U);
    EXPECT_EQ(rte_mempool_avail_count(pool.get()), 4095U);
}

TEST(FaultInjection, DuplicateRateAndCopiesByteIdentical) {
    Pool pool;
    FaultInjector injector;
    FaultRates rates;
    rates.duplicate = 0.1;
    injector.configure(rates, 3, 100, 12);
    Pump pump{injector, pool.get()};
    rte_mbuf* previous = nullptr;
    std::uint64_t pairs = 0;
    std::uint64_t out = 0;
    pump.sink = [&](rte_mbuf* m, std::uint64_t) {
        ++out;
        if (previous != nullptr && id_of(previous) == id_of(m)) {
            // The copy follows its original at once, its own mbuf with the same bytes.
            ++pairs;
            EXPECT_NE(m, previous);
            EXPECT_EQ(m->pool, pool.get());
            EXPECT_EQ(rte_pktmbuf_pkt_len(m), rte_pktmbuf_pkt_len(previous));
            const auto a = bytes_of(previous);
            const auto b = bytes_of(m);
            EXPECT_TRUE(std::equal(a.begin(), a.end(), b.begin(), b.end())) << id_of(m);
            EXPECT_NE(a.data(), b.data()) << "a deep copy, not a second reference";
        } else if (previous != nullptr) {
            EXPECT_EQ(id_of(m), id_of(previous) + 1) << "nothing lost or moved";
        }
        if (previous != nullptr) {
            rte_pktmbuf_free(previous);
        }
        previous = m;
    };
    pump.send(rate_frames, mixed());
    rte_pktmbuf_free(previous);
    expect_rate(pump.counters.duplicated, rate_frames, 0.1, "duplicated");
    EXPECT_EQ(pairs, pump.counters.duplicated);
    EXPECT_EQ(out, rate_frames + pump.counters.duplicated);
    EXPECT_EQ(pump.counters.duplicate_no_mbuf, 0U);
}

TEST(FaultInjection, DuplicateWithoutMbufsIsCountedAndTheOriginalPasses) {
    Pool pool;
    Pool empty(63);
    std::vector<rte_mbuf*> taken(63);
    ASSERT_EQ(rte_pktmbuf_alloc_bulk(empty.get(), taken.data(), 63), 0);
    FaultInjector injector;
    FaultRates rates;
    rates.duplicate = 1;
    injector.configure(rates, 3, 100, 13);
    std::vector<rte_mbuf*> frames(64);
    for (std::uint32_t i = 0; i < 32; ++i) {
        frames[i] = make_frame(pool.get(), frame_bytes(Kind::ipv4, i), i);
        ASSERT_NE(frames[i], nullptr);
    }
    FaultCounters counters;
    const std::uint16_t out = injector.apply(frames.data(), 32, 64, 0, empty.get(), counters);
    ASSERT_EQ(out, 32U);
    for (std::uint32_t i = 0; i < out; ++i) {
        EXPECT_EQ(id_of(frames[i]), i);
        rte_pktmbuf_free(frames[i]);
    }
    EXPECT_EQ(counters.duplicate_no_mbuf, 32U);
    EXPECT_EQ(counters.duplicated, 0U);
    EXPECT_EQ(injector.held(), 0U);
    rte_pktmbuf_free_bulk(taken.data(), 63);
}

TEST(FaultInjection, EveryFaultAtOnceAtItsRate) {
    Pool pool;
    FaultInjector injector;
    FaultRates rates;
    rates.drop = 0.05;
    rates.corrupt = 0.2;
    rates.duplicate = 0.1;
    rates.reorder = 0.08;
    rates.delay = 0.06;
    injector.configure(rates, 3, 5, 14);
    Pump pump{injector, pool.get()};
    pump.now_step = 1;
    std::uint64_t out = 0;
    pump.sink = [&](rte_mbuf* m, std::uint64_t) {
        ++out;
        rte_pktmbuf_free(m);
    };
    pump.send(rate_frames, of_kind(Kind::ipv4));
    pump.flush();
    const FaultCounters& c = pump.counters;
    // Each decision is taken among the frames that reach it (fault_injection.hpp's order).
    expect_rate(c.dropped, rate_frames, rates.drop, "dropped");
    const std::uint64_t kept = rate_frames - c.dropped;
    expect_rate(c.corrupted, kept, rates.corrupt, "corrupted");
    expect_rate(c.duplicated, kept, rates.duplicate, "duplicated");
    expect_rate(c.reordered, kept, rates.reorder, "reordered");
    expect_rate(c.delayed, kept - c.reordered, rates.delay, "delayed");
    EXPECT_EQ(out, kept + c.duplicated) << "every frame that was not dropped came out";
    EXPECT_EQ(pool.in_use(), 0U);
}

// ---- Leaks --------------------------------------------------------------------------------------

TEST(FaultInjection, ReleaseAllConfigureAndDestructionFreeHeldFrames) {
    Pool pool;
    FaultRates rates;
    rates.reorder = 0.3;
    rates.delay = 0.3;
    rates.duplicate = 0.3;
    {
        FaultInjector injector;
        injector.configure(rates, 8, 1000, 15);
        Pump pump{injector, pool.get()};
        pump.capacity = pump.burst; // duplicates find no room and wait in the store too
        pump.send(600, mixed());
        ASSERT_GT(injector.held(), 50U);
        EXPECT_EQ(pool.in_use(), injector.held()) << "what came out was freed; the rest is held";
        injector.release_all();
        EXPECT_EQ(injector.held(), 0U);
        EXPECT_EQ(pool.in_use(), 0U);

        pump.send(600, mixed());
        ASSERT_GT(injector.held(), 50U);
        injector.configure(rates, 8, 1000, 15);
        EXPECT_EQ(injector.held(), 0U) << "configure starts from nothing held";
        EXPECT_EQ(pool.in_use(), 0U);

        pump.send(600, mixed());
        ASSERT_GT(injector.held(), 50U);
    }
    EXPECT_EQ(pool.in_use(), 0U) << "the destructor frees what was held";
}

// ---- Reorder ------------------------------------------------------------------------------------

class Reorder : public ::testing::TestWithParam<unsigned> {};

TEST_P(Reorder, EveryFrameKeptAndHeldOnesExactlyDepthLater) {
    const unsigned depth = GetParam();
    Pool pool;
    FaultInjector injector;
    FaultRates rates;
    rates.reorder = 0.1;
    injector.configure(rates, depth, 1000000, 16);
    Pump pump{injector, pool.get()};
    std::vector<std::uint32_t> order;
    std::set<std::uint32_t> timed_out; // released by the flush, not by later frames
    pump.sink = [&](rte_mbuf* m, std::uint64_t now) {
        order.push_back(id_of(m));
        if (now == never) {
            timed_out.insert(id_of(m));
        }
        rte_pktmbuf_free(m);
    };
    constexpr std::uint32_t frames = 5000;
    pump.send(frames, of_kind(Kind::ipv4));
    pump.flush();

    ASSERT_EQ(order.size(), frames);
    EXPECT_EQ(std::set<std::uint32_t>(order.begin(), order.end()).size(), frames)
        << "a frame lost or doubled";
    std::uint64_t moved = 0;
    for (std::size_t position = 0; position < order.size(); ++position) {
        const std::uint32_t id = order[position];
        const auto later_before = static_cast<std::size_t>(
            std::count_if(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(position),
                          [id](std::uint32_t other) { return other > id; }));
        if (timed_out.count(id) != 0) {
            EXPECT_LT(later_before, depth) << id;
            continue;
        }
        if (later_before == 0) {
            continue;
        }
        ++moved;
        EXPECT_EQ(later_before, depth) << "frame " << id;
        EXPECT_EQ(position, id + depth) << "frame " << id << " moved " << depth << " places";
    }
    expect_rate(pump.counters.reordered, frames, rates.reorder, "reordered");
    EXPECT_EQ(moved + timed_out.size(), pump.counters.reordered);
    EXPECT_GT(moved, pump.counters.reordered / 2);
}

INSTANTIATE_TEST_SUITE_P(Depths, Reorder, ::testing::Values(1U, 3U, 64U));

TEST(FaultInjection, ReorderedFrameOnAQuietLinkLeavesAfterDelayCycles) {
    Pool pool;
    FaultInjector injector;
    FaultRates rates;
    rates.reorder = 1; // every frame: none ever goes straight through to pass another
    injector.configure(rates, 3, 500, 17);
    Pump pump{injector, pool.get()};
    std::vector<std::pair<std::uint32_t, std::uint64_t>> out;
    pump.sink = [&](rte_mbuf* m, std::uint64_t now) {
        out.emplace_back(id_of(m), now);
        rte_pktmbuf_free(m);
    };
    pump.now = 1000;
    pump.send(4, of_kind(Kind::ipv4));
    EXPECT_EQ(injector.held(), 4U);
    std::vector<rte_mbuf*> frames(pump.capacity);
    pump.now = 1499;
    EXPECT_EQ(pump.deliver(frames, 0), 0U);
    pump.now = 1500;
    EXPECT_EQ(pump.deliver(frames, 0), 4U);
    const std::vector<std::pair<std::uint32_t, std::uint64_t>> expected = {
        {0, 1500}, {1, 1500}, {2, 1500}, {3, 1500}};
    EXPECT_EQ(out, expected);
}

// ---- Corrupt ------------------------------------------------------------------------------------

TEST(FaultInjection, EveryCorruptedRoceFrameFailsItsIcrcAndNothingElseIsTouched) {
    Pool pool;
    FaultInjector injector;
    FaultRates rates;
    rates.corrupt = 0.5;
    injector.configure(rates, 3, 100, 18);
    Pump pump{injector, pool.get()};
    std::uint64_t flipped = 0;
    std::uint64_t roce_frames = 0;
    std::array<std::uint64_t, every_kind.size()> flipped_by_kind{};
    std::uint64_t in_bth = 0;
    std::uint64_t in_payload = 0;
    std::uint64_t in_icrc = 0;
    pump.sink = [&](rte_mbuf* m, std::uint64_t) {
        const std::size_t kind_index = id_of(m) % every_kind.size();
        const Kind kind = every_kind[kind_index];
        const std::vector<std::uint8_t> sent = frame_bytes(kind, id_of(m));
        const std::span<const std::uint8_t> got = bytes_of(m);
        ASSERT_EQ(got.size(), sent.size());
        std::vector<std::size_t> diffs;
        for (std::size_t i = 0; i < sent.size(); ++i) {
            if (sent[i] != got[i]) {
                diffs.push_back(i);
            }
        }
        const roce::ParsedFrame original = roce::parse_roce_frame(sent);
        roce_frames += is_roce(kind) ? 1 : 0;
        if (diffs.empty()) {
            EXPECT_EQ(original.ok(), is_roce(kind)) << roce::parse_error_name(original.error);
        } else {
            ++flipped;
            ++flipped_by_kind[kind_index];
            ASSERT_TRUE(is_roce(kind)) << "a non-RoCE frame was changed, id " << id_of(m);
            ASSERT_EQ(diffs.size(), 1U);
            EXPECT_EQ(std::popcount(static_cast<unsigned>(sent[diffs[0]] ^ got[diffs[0]])), 1);
            const std::size_t bth = original.bth_offset;
            const std::size_t end = original.ip_offset + original.ip_datagram.size();
            EXPECT_GE(diffs[0], bth);
            EXPECT_LT(diffs[0], end) << "Ethernet padding is not covered by the ICRC";
            EXPECT_NE(diffs[0], bth + 4) << "BTH byte 4 is masked out of the ICRC";
            in_bth += diffs[0] < bth + roce::bth_size ? 1 : 0;
            in_payload += diffs[0] >= original.payload_offset && diffs[0] < end - 4 ? 1 : 0;
            in_icrc += diffs[0] >= end - roce::icrc_size ? 1 : 0;
            EXPECT_FALSE(
                roce::verify_icrc(got.subspan(original.ip_offset, end - original.ip_offset)))
                << "a flip the ICRC does not catch, at byte " << diffs[0];
            EXPECT_FALSE(roce::parse_roce_frame(got).ok());
        }
        rte_pktmbuf_free(m);
    };
    pump.send(30000, mixed());
    EXPECT_EQ(flipped, pump.counters.corrupted);
    expect_rate(flipped, roce_frames, rates.corrupt, "corrupted");
    for (const Kind kind : every_kind) {
        const auto index = static_cast<std::size_t>(
            std::find(every_kind.begin(), every_kind.end(), kind) - every_kind.begin());
        if (is_roce(kind)) {
            EXPECT_GT(flipped_by_kind[index], 1000U) << "kind " << index;
        }
    }
    // The flip lands anywhere in the covered bytes, the ICRC itself included.
    EXPECT_GT(in_bth, 100U);
    EXPECT_GT(in_payload, 1000U);
    EXPECT_GT(in_icrc, 50U);
    EXPECT_EQ(pump.counters.corrupt_no_mbuf, 0U);
}

TEST(FaultInjection, SharedFrameIsCorruptedInAPrivateCopy) {
    Pool pool;
    Pool empty(63);
    FaultInjector injector;
    FaultRates rates;
    rates.corrupt = 1;
    injector.configure(rates, 3, 100, 19);
    const std::vector<std::uint8_t> sent = frame_bytes(Kind::ipv4, 5);
    const roce::ParsedFrame parsed = roce::parse_roce_frame(sent);
    ASSERT_TRUE(parsed.ok());
    const auto datagram = [&](const rte_mbuf* m) {
        return bytes_of(m).subspan(parsed.ip_offset, parsed.ip_datagram.size());
    };

    // A clone (indirect mbuf) and a frame with a second reference (kept for retransmission).
    rte_mbuf* original = make_frame(pool.get(), sent, 5);
    ASSERT_NE(original, nullptr);
    std::array<rte_mbuf*, 2> frames = {rte_pktmbuf_clone(original, pool.get()), original};
    ASSERT_NE(frames[0], nullptr);
    rte_pktmbuf_refcnt_update(original, 1);
    FaultCounters counters;
    ASSERT_EQ(injector.apply(frames.data(), 2, 2, 0, pool.get(), counters), 2U);
    EXPECT_EQ(counters.corrupted, 2U);
    for (rte_mbuf* out : frames) {
        EXPECT_NE(out, original);
        EXPECT_TRUE(RTE_MBUF_DIRECT(out));
        EXPECT_FALSE(roce::verify_icrc(datagram(out)));
        rte_pktmbuf_free(out);
    }
    EXPECT_TRUE(std::equal(sent.begin(), sent.end(), bytes_of(original).begin()))
        << "the shared bytes were written";
    EXPECT_TRUE(roce::verify_icrc(datagram(original)));
    EXPECT_EQ(rte_mbuf_refcnt_read(original), 1U) << "the injector released its references";

    // No mbuf for the private copy: the frame passes unchanged.
    std::vector<rte_mbuf*> taken(63);
    ASSERT_EQ(rte_pktmbuf_alloc_bulk(empty.get(), taken.data(), 63), 0);
    rte_pktmbuf_refcnt_update(original, 1);
    rte_mbuf* one = original;
    ASSERT_EQ(injector.apply(&one, 1, 1, 0, empty.get(), counters), 1U);
    EXPECT_EQ(one, original);
    EXPECT_EQ(counters.corrupt_no_mbuf, 1U);
    EXPECT_EQ(counters.corrupted, 2U);
    EXPECT_TRUE(roce::verify_icrc(datagram(original)));
    rte_pktmbuf_free(one);
    rte_pktmbuf_free(original);
    rte_pktmbuf_free_bulk(taken.data(), 63);
}

// ---- Delay --------------------------------------------------------------------------------------

TEST(FaultInjection, DelayedFramesWaitForTheirDeadline) {
    Pool pool;
    FaultInjector injector;
    FaultRates rates;
    rates.delay = 1;
    injector.configure(rates, 3, 1000, 20);
    Pump pump{injector, pool.get()};
    std::vector<std::pair<std::uint32_t, std::uint64_t>> out;
    pump.sink = [&](rte_mbuf* m, std::uint64_t now) {
        out.emplace_back(id_of(m), now);
        rte_pktmbuf_free(m);
    };
    std::vector<rte_mbuf*> frames(pump.capacity);
    pump.now = 100;
    pump.send(4, of_kind(Kind::ipv4));
    EXPECT_TRUE(out.empty());
    EXPECT_EQ(injector.held(), 4U);
    EXPECT_EQ(pump.counters.delayed, 4U);
    pump.now = 1099;
    EXPECT_EQ(pump.deliver(frames, 0), 0U) << "one cycle early";
    pump.now = 1100;
    EXPECT_EQ(pump.deliver(frames, 0), 4U);
    pump.now = 2000;
    pump.send(2, of_kind(Kind::ipv6));
    pump.now = 2999;
    EXPECT_EQ(pump.deliver(frames, 0), 0U);
    pump.now = 5000; // long past: released by the next call whatever its time
    EXPECT_EQ(pump.deliver(frames, 0), 2U);
    const std::vector<std::pair<std::uint32_t, std::uint64_t>> expected = {
        {0, 1100}, {1, 1100}, {2, 1100}, {3, 1100}, {4, 5000}, {5, 5000}};
    EXPECT_EQ(out, expected);
    EXPECT_EQ(injector.held(), 0U);

    // A call with new frames releases what is due as well.
    pump.now = 6000;
    pump.send(1, of_kind(Kind::ipv4)); // id 6, due at 7000
    pump.now = 7000;
    pump.send(1, of_kind(Kind::ipv4)); // id 7, held in turn
    ASSERT_EQ(out.size(), 7U);
    EXPECT_EQ(out.back(), std::make_pair(6U, std::uint64_t{7000}));
    EXPECT_EQ(injector.held(), 1U);
}

TEST(FaultInjection, DelayRateAndEachDelayedFrameLeavesAtItsDeadline) {
    Pool pool;
    FaultInjector injector;
    FaultRates rates;
    rates.delay = 0.1;
    constexpr std::uint64_t delay = 5;
    injector.configure(rates, 3, delay, 21);
    Pump pump{injector, pool.get()};
    pump.now_step = 1; // one burst per cycle: a delayed frame leaves with burst + 5
    std::uint64_t late = 0;
    std::uint64_t out = 0;
    pump.sink = [&](rte_mbuf* m, std::uint64_t now) {
        const std::uint64_t sent_at = id_of(m) / pump.burst;
        if (now != sent_at) {
            EXPECT_EQ(now, sent_at + delay) << "frame " << id_of(m);
            ++late;
        }
        ++out;
        rte_pktmbuf_free(m);
    };
    pump.send(rate_frames, mixed());
    // The last bursts' delayed frames leave with empty calls, as a quiet progress loop does.
    std::vector<rte_mbuf*> frames(pump.capacity);
    for (std::uint64_t i = 0; i < delay; ++i) {
        pump.deliver(frames, 0);
        pump.now += 1;
    }
    EXPECT_EQ(injector.held(), 0U);
    EXPECT_EQ(out, rate_frames);
    EXPECT_EQ(late, pump.counters.delayed);
    expect_rate(pump.counters.delayed, rate_frames, rates.delay, "delayed");
}

// ---- Capacity -----------------------------------------------------------------------------------

TEST(FaultInjection, DuplicatesThatDoNotFitWaitForTheNextCall) {
    Pool pool;
    FaultInjector injector;
    FaultRates rates;
    rates.duplicate = 1;
    injector.configure(rates, 3, 100, 22);
    std::vector<rte_mbuf*> frames(8);
    for (std::uint32_t i = 0; i < 8; ++i) {
        frames[i] = make_frame(pool.get(), frame_bytes(Kind::ipv4, i), i);
        ASSERT_NE(frames[i], nullptr);
    }
    FaultCounters counters;
    // capacity below count counts as count: the array is full with the originals.
    ASSERT_EQ(injector.apply(frames.data(), 8, 4, 0, pool.get(), counters), 8U);
    for (std::uint32_t i = 0; i < 8; ++i) {
        EXPECT_EQ(id_of(frames[i]), i);
        rte_pktmbuf_free(frames[i]);
    }
    EXPECT_EQ(counters.duplicated, 8U);
    EXPECT_EQ(injector.held(), 8U);
    ASSERT_EQ(injector.apply(frames.data(), 0, 5, 0, pool.get(), counters), 5U);
    ASSERT_EQ(injector.apply(frames.data() + 5, 0, 3, 0, pool.get(), counters), 3U);
    for (std::uint32_t i = 0; i < 8; ++i) {
        EXPECT_EQ(id_of(frames[i]), i) << "the copies, in order";
        rte_pktmbuf_free(frames[i]);
    }
    EXPECT_EQ(injector.held(), 0U);
    EXPECT_EQ(pool.in_use(), 0U);
}

TEST(FaultInjection, DueFramesBeyondTheArrayStayHeldAndAFullStoreLetsFramesPass) {
    Pool pool;
    FaultInjector injector;
    FaultRates rates;
    rates.delay = 1;
    injector.configure(rates, 3, 10, 23);
    Pump pump{injector, pool.get()};
    pump.burst = 30;
    pump.capacity = 30;
    std::vector<std::uint32_t> order;
    pump.sink = [&](rte_mbuf* m, std::uint64_t) {
        order.push_back(id_of(m));
        rte_pktmbuf_free(m);
    };
    pump.send(300, of_kind(Kind::ipv4));
    // The store holds 256; the other 44 were not delayed but went straight through.
    EXPECT_EQ(injector.held(), FaultInjector::max_held);
    EXPECT_EQ(pump.counters.delayed, FaultInjector::max_held);
    ASSERT_EQ(order.size(), 300U - FaultInjector::max_held);
    for (std::size_t i = 0; i < order.size(); ++i) {
        EXPECT_EQ(order[i], FaultInjector::max_held + i);
    }
    // Ten at a time: what does not fit waits, in order.
    pump.capacity = 10;
    pump.now = 100;
    std::vector<rte_mbuf*> frames(pump.capacity);
    for (unsigned call = 0; call < 26; ++call) {
        EXPECT_EQ(pump.deliver(frames, 0), std::min(10U, FaultInjector::max_held - call * 10));
    }
    EXPECT_EQ(injector.held(), 0U);
    ASSERT_EQ(order.size(), 300U);
    for (std::uint32_t i = 0; i < FaultInjector::max_held; ++i) {
        EXPECT_EQ(order[300 - FaultInjector::max_held + i], i);
    }
}

} // namespace
} // namespace prdma::swroce
