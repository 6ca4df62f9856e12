// Typed flag sets (prdma/flags.hpp) as work requests and completions use them.
#include <type_traits>

#include <gtest/gtest.h>

#include <prdma/rdmadev/work_request.hpp>

namespace prdma::rdma {
namespace {

// A send flag is not a completion flag, nor an integer.
static_assert(!std::is_assignable_v<SendFlags&, WcFlag>);
static_assert(!std::is_assignable_v<SendFlags&, int>);
static_assert(!std::is_convertible_v<SendFlags, std::uint16_t>);
static_assert(sizeof(SendFlags) == sizeof(std::uint16_t));
static_assert(sizeof(WcFlags) == sizeof(std::uint8_t));

TEST(Flags, SetTestAndCombine) {
    SendFlags flags;
    EXPECT_TRUE(flags.empty());
    EXPECT_FALSE(flags);
    flags = send_signaled | send_defer;
    EXPECT_TRUE(flags.has(SendFlag::signaled));
    EXPECT_TRUE(flags.has(SendFlag::defer));
    EXPECT_FALSE(flags.has(SendFlag::inline_data));
    EXPECT_TRUE(flags.any_of(send_fence | send_defer));
    EXPECT_FALSE(flags.any_of(send_fence | send_read_fence));
    flags |= send_inline;
    EXPECT_EQ(flags.bits(), 0x19U) << "IBV_SEND_SIGNALED-like bit values are kept";
    EXPECT_EQ(flags & send_inline, SendFlags(send_inline));
    EXPECT_EQ(SendFlags::from_bits(0x19), flags);
    EXPECT_EQ(WcFlags(wc_with_imm).bits(), 1U);
}

} // namespace
} // namespace prdma::rdma
