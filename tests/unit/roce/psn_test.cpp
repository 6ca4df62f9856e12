// 24-bit PSN arithmetic: wrap at 0xFFFFFF -> 0, signed distance at the +-2^23 edges, ordering
// across the wrap, and packet counts per message.
#include <cstdint>
#include <random>

#include <gtest/gtest.h>

#include <prdma/roce/psn.hpp>

namespace prdma::roce {
namespace {

TEST(Psn, Wrap) {
    EXPECT_EQ(psn_next(0xfffffe), 0xffffffU);
    EXPECT_EQ(psn_next(0xffffff), 0U);
    EXPECT_EQ(psn_add(0xffffff, 1), 0U);
    EXPECT_EQ(psn_add(0xfffff0, 0x20), 0x10U);
    EXPECT_EQ(psn_add(0, 0x1000000), 0U) << "a whole turn";
    EXPECT_EQ(psn_sub(0, 1), 0xffffffU);
    EXPECT_EQ(psn_sub(5, 10), 0xfffffbU);
    EXPECT_EQ(psn_add(0xabcdef12, 0), 0xcdef12U) << "bits above 23 are dropped";
}

TEST(Psn, SignedDifferenceEdges) {
    EXPECT_EQ(psn_diff(0, 0), 0);
    EXPECT_EQ(psn_diff(1, 0), 1);
    EXPECT_EQ(psn_diff(0, 1), -1);
    EXPECT_EQ(psn_diff(0, 0xffffff), 1) << "0 comes right after 0xFFFFFF";
    EXPECT_EQ(psn_diff(0xffffff, 0), -1);
    EXPECT_EQ(psn_diff(0x7fffff, 0), 0x7fffff) << "largest forward distance, 2^23 - 1";
    EXPECT_EQ(psn_diff(0x800000, 0), -0x800000) << "exactly 2^23 is taken as behind";
    EXPECT_EQ(psn_diff(0, 0x800000), -0x800000);
    EXPECT_EQ(psn_diff(0x800001, 0), -0x7fffff);
    EXPECT_EQ(psn_diff(0, 0x7fffff), -0x7fffff);
    EXPECT_EQ(psn_diff(0, 0x800001), 0x7fffff);
    EXPECT_EQ(psn_diff(0x100, 0xffff00), 0x200);
    EXPECT_EQ(psn_diff(0x1000005, 3), 2) << "bits above 23 are ignored";
    static_assert(psn_diff(5, 3) == 2);
}

TEST(Psn, DifferenceIsInRangeAndInvertsAdd) {
    std::mt19937 rng(23);
    for (int i = 0; i < 100000; ++i) {
        const Psn a = rng() & psn_mask;
        const Psn b = rng() & psn_mask;
        const std::int32_t d = psn_diff(a, b);
        ASSERT_GE(d, -psn_half);
        ASSERT_LT(d, psn_half);
        ASSERT_EQ(psn_add(b, static_cast<std::uint32_t>(d)), a);
        if (d != -psn_half) {
            ASSERT_EQ(psn_diff(b, a), -d);
        }
    }
}

TEST(Psn, Ordering) {
    EXPECT_TRUE(psn_before(0xfffffe, 0xffffff));
    EXPECT_TRUE(psn_before(0xffffff, 0));
    EXPECT_TRUE(psn_before(0xfffff0, 0x10));
    EXPECT_TRUE(psn_after(0x10, 0xfffff0));
    EXPECT_FALSE(psn_before(5, 5));
    EXPECT_FALSE(psn_after(5, 5));
    EXPECT_TRUE(psn_before_or_equal(5, 5));
    EXPECT_TRUE(psn_after_or_equal(5, 5));
    EXPECT_TRUE(psn_before_or_equal(0xffffff, 0));
    EXPECT_TRUE(psn_after_or_equal(0, 0xffffff));
    EXPECT_TRUE(psn_after(0x7fffff, 0)) << "2^23 - 1 ahead";
    EXPECT_TRUE(psn_before(0x800000, 0)) << "2^23 ahead reads as behind";
}

TEST(Psn, Window) {
    EXPECT_TRUE(psn_in_window(0xffffff, 0xfffffe, 4));
    EXPECT_TRUE(psn_in_window(1, 0xfffffe, 4));
    EXPECT_FALSE(psn_in_window(2, 0xfffffe, 4));
    EXPECT_FALSE(psn_in_window(0xfffffd, 0xfffffe, 4));
    EXPECT_FALSE(psn_in_window(7, 7, 0));
}

TEST(Psn, PacketsFor) {
    EXPECT_EQ(packets_for(0, 1024), 1U) << "an empty message is still one packet";
    EXPECT_EQ(packets_for(1, 1024), 1U);
    EXPECT_EQ(packets_for(1024, 1024), 1U);
    EXPECT_EQ(packets_for(1025, 1024), 2U);
    EXPECT_EQ(packets_for(2500, 1024), 3U);
    EXPECT_EQ(packets_for(4096, 1024), 4U);
    EXPECT_EQ(packets_for(0xffffffff, 4096), 0x100000U) << "no overflow at the top";
    EXPECT_EQ(packets_for(0x80000000, 256), 0x800000U);
    EXPECT_EQ(packets_for(100, 0), 0U);
    EXPECT_EQ(mtu_bytes(PathMtu::mtu256), 256U);
    EXPECT_EQ(mtu_bytes(PathMtu::mtu1024), 1024U);
    EXPECT_EQ(mtu_bytes(PathMtu::mtu4096), 4096U);
    EXPECT_EQ(mtu_bytes(static_cast<PathMtu>(0)), 0U);
    EXPECT_EQ(mtu_bytes(static_cast<PathMtu>(6)), 0U);
}

} // namespace
} // namespace prdma::roce
