// The runs of READ responses a responder was asked for again by themselves: disjoint runs stay
// apart, one that touches others takes them in, and with every slot taken the nearest grows.
#include <gtest/gtest.h>

#include "qp.hpp"

namespace prdma::swroce {
namespace {

std::vector<std::pair<std::uint32_t, std::uint32_t>> drain(RepairRuns& runs) {
    std::vector<std::pair<std::uint32_t, std::uint32_t>> out;
    for (; !runs.empty(); runs.pop_front()) {
        out.emplace_back(runs.front().next, runs.front().end);
    }
    return out;
}

using Runs = std::vector<std::pair<std::uint32_t, std::uint32_t>>;

TEST(RepairRuns, DisjointRunsGoOutApartInTheOrderAsked) {
    RepairRuns runs;
    runs.add({3, 4});
    runs.add({40, 41});
    runs.add({20, 22});
    EXPECT_EQ(drain(runs), (Runs{{3, 4}, {40, 41}, {20, 22}}));
}

TEST(RepairRuns, ARunTouchingSeveralTakesThemAllIn) {
    RepairRuns runs;
    runs.add({3, 4});
    runs.add({10, 12});
    runs.add({14, 16});
    runs.add({11, 15}); // overlaps 10-12 and 14-16
    EXPECT_EQ(drain(runs), (Runs{{3, 4}, {10, 16}}));
    runs.add({5, 6});
    runs.add({6, 7}); // adjacent: one run
    EXPECT_EQ(drain(runs), (Runs{{5, 7}}));
}

TEST(RepairRuns, WithEverySlotTakenTheNearestRunGrows) {
    RepairRuns runs;
    for (const std::uint32_t at : {0U, 100U, 200U, 300U}) {
        runs.add({at, at + 1});
    }
    runs.add({110, 111}); // nearest to 100, not to the last (300)
    EXPECT_EQ(drain(runs), (Runs{{0, 1}, {100, 111}, {200, 201}, {300, 301}}));
}

TEST(RepairRuns, APartlySentFrontKeepsWhereItWas) {
    RepairRuns runs;
    runs.add({10, 20});
    runs.front().next = 15; // five sent
    runs.add({30, 31});
    EXPECT_EQ(drain(runs), (Runs{{15, 20}, {30, 31}}));
}

} // namespace
} // namespace prdma::swroce
