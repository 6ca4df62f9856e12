// The map of READ responses placed past the first one missing: what it holds, how far the
// in-order prefix moves when the missing one comes, and where the next hole ends.
#include <gtest/gtest.h>

#include "response_map.hpp"

namespace prdma::swroce {
namespace {

TEST(ResponseMap, AnEmptyMapHasNoHoleEndAndFillingMovesByOne) {
    ResponseMap map;
    EXPECT_EQ(map.first_hole(), 0U) << "nothing after the missing one arrived";
    EXPECT_EQ(map.fill_first(), 1U);
    EXPECT_EQ(map.first_hole(), 0U);
}

TEST(ResponseMap, FillingTheMissingOneTakesTheRunBehindIt) {
    ResponseMap map;
    map.mark(1);
    map.mark(2);
    map.mark(5);
    EXPECT_TRUE(map.holds(2));
    EXPECT_FALSE(map.holds(3));
    EXPECT_EQ(map.first_hole(), 1U) << "only the first is missing before response 1";
    EXPECT_EQ(map.fill_first(), 3U) << "it, and 1 and 2";
    // Response 5 is now 2 past the new first missing one (old 3).
    EXPECT_TRUE(map.holds(2));
    EXPECT_FALSE(map.holds(1));
    EXPECT_EQ(map.first_hole(), 2U);
    EXPECT_EQ(map.fill_first(), 1U);
    EXPECT_EQ(map.fill_first(), 2U);
    EXPECT_EQ(map.first_hole(), 0U);
}

TEST(ResponseMap, RunsAcrossWordsAndTheWholeMapMoveIntact) {
    ResponseMap map;
    for (std::uint32_t i = 1; i < 130; ++i) {
        map.mark(i);
    }
    map.mark(200);
    map.mark(ResponseMap::capacity - 1);
    EXPECT_EQ(map.fill_first(), 130U);
    EXPECT_TRUE(map.holds(70));
    EXPECT_TRUE(map.holds(ResponseMap::capacity - 131));
    EXPECT_FALSE(map.holds(ResponseMap::capacity - 130)) << "nothing came in from past the end";
    EXPECT_EQ(map.first_hole(), 70U);

    ResponseMap full;
    for (std::uint32_t i = 1; i < ResponseMap::capacity; ++i) {
        full.mark(i);
    }
    EXPECT_EQ(full.fill_first(), ResponseMap::capacity);
    EXPECT_EQ(full.first_hole(), 0U);
    full.clear();
    EXPECT_EQ(full.first_hole(), 0U);
}

} // namespace
} // namespace prdma::swroce
