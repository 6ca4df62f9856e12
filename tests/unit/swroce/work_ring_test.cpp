// The ring between a queue's producer and its consumers: a multi-consumer take (an SRQ shared by
// queue groups) gives each entry to exactly one consumer, whole, and in order for each.
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "work_ring.hpp"

namespace prdma::swroce {
namespace {

// Two words that must agree: a copy torn by a producer rewriting the slot shows.
struct Entry {
    std::uint64_t value = 0;
    std::uint64_t check = 0;
};

TEST(WorkRing, ASharedTakeGivesEachEntryToOneConsumerWholeAndInOrder) {
    constexpr std::uint64_t entries = 1000000;
    // Room for both consumers to take side by side while the producer is off the CPU (two cores
    // for three threads), and small enough that slots are rewritten under a consumer's read.
    WorkRing<Entry> ring(1024);
    std::atomic<bool> go{false};
    std::atomic<bool> stop{false};
    std::array<std::vector<std::uint64_t>, 2> taken;
    std::atomic<std::uint64_t> torn{0};
    const auto consume = [&](std::size_t c) {
        taken[c].reserve(entries);
        while (!go.load()) {
            std::this_thread::yield();
        }
        Entry copy;
        while (!stop.load(std::memory_order_relaxed)) {
            if (ring.take_shared([&copy](const Entry& head) { copy = head; })) {
                torn += copy.check != ~copy.value ? 1 : 0;
                taken[c].push_back(copy.value);
            }
        }
    };
    std::array<std::thread, 2> consumers{std::thread(consume, 0), std::thread(consume, 1)};
    go = true;
    // Bounded in time, so that a broken take (an entry lost or taken twice) fails, never hangs.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    std::uint64_t pushed = 0;
    while (pushed < entries && std::chrono::steady_clock::now() < deadline) {
        if (ring.full()) {
            std::this_thread::yield();
            continue;
        }
        Entry& slot = ring.next_slot();
        slot.value = pushed;
        slot.check = ~pushed;
        ring.push();
        ++pushed;
    }
    while (!ring.empty() && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::yield();
    }
    stop = true;
    for (std::thread& consumer : consumers) {
        consumer.join();
    }
    ASSERT_EQ(pushed, entries) << "the consumers stopped taking";
    EXPECT_EQ(torn.load(), 0U) << "a torn copy was taken";
    std::vector<bool> seen(entries, false);
    std::uint64_t twice = 0;
    std::uint64_t disorder = 0;
    for (const auto& mine : taken) {
        for (std::size_t i = 0; i < mine.size(); ++i) {
            ASSERT_LT(mine[i], entries);
            twice += seen[mine[i]] ? 1 : 0;
            seen[mine[i]] = true;
            disorder += i > 0 && mine[i - 1] >= mine[i] ? 1 : 0;
        }
    }
    EXPECT_EQ(twice, 0U) << "entries taken twice";
    EXPECT_EQ(disorder, 0U) << "a consumer's entries out of order";
    EXPECT_EQ(taken[0].size() + taken[1].size(), entries);
    EXPECT_FALSE(taken[0].empty() || taken[1].empty()) << "both consumers took";
}

TEST(WorkRing, ASharedTakeOfAnEmptyRingReadsNothing) {
    WorkRing<Entry> ring(4);
    bool read = false;
    EXPECT_FALSE(ring.take_shared([&read](const Entry&) { read = true; }));
    EXPECT_FALSE(read);
    ring.next_slot() = {7, ~7ULL};
    ring.push();
    Entry copy;
    EXPECT_TRUE(ring.take_shared([&copy](const Entry& head) { copy = head; }));
    EXPECT_EQ(copy.value, 7U);
    EXPECT_TRUE(ring.empty());
    EXPECT_FALSE(ring.take_shared([&read](const Entry&) { read = true; }));
    EXPECT_FALSE(read);
}

} // namespace
} // namespace prdma::swroce
