// The requester's window: full on a clean link, halved by each loss down to its floor, back to
// full while packets are acknowledged, and AckReqs often enough that a window never stalls.
#include <gtest/gtest.h>

#include "send_window.hpp"

namespace prdma::swroce {
namespace {

TEST(SendWindow, StartsFullAndAsksForAnAckEveryThirtyTwoPackets) {
    const SendWindow window;
    EXPECT_EQ(window.packets(), SendWindow::max_packets);
    EXPECT_EQ(window.ack_req_interval(), 32U);
}

TEST(SendWindow, EachLossHalvesItDownToTheFloor) {
    SendWindow window;
    window.lost();
    EXPECT_EQ(window.packets(), SendWindow::max_packets / 2);
    for (int i = 0; i < 10; ++i) {
        window.lost();
    }
    EXPECT_EQ(window.packets(), SendWindow::min_packets);
    // Half a window between AckReqs: the ACK of the first half comes back while the rest flies.
    EXPECT_EQ(window.ack_req_interval(), SendWindow::min_packets / 2);
}

TEST(SendWindow, ATimeoutDropsItToTheFloorAtOnce) {
    SendWindow window;
    window.timed_out();
    EXPECT_EQ(window.packets(), SendWindow::min_packets);
}

TEST(SendWindow, GrowsBackWhilePacketsAreAcknowledged) {
    SendWindow window;
    window.timed_out();
    // Below a quarter of the maximum: one more per eight acknowledged.
    window.acknowledged(SendWindow::min_packets * 3);
    EXPECT_EQ(window.packets(), SendWindow::min_packets + 3);
    std::uint64_t acknowledged = 0;
    while (window.packets() < SendWindow::max_packets) {
        window.acknowledged(16);
        acknowledged += 16;
        ASSERT_LT(acknowledged, 100'000U) << "never grew back to the maximum";
    }
    // Never beyond the maximum, however much is acknowledged.
    window.acknowledged(1'000'000);
    EXPECT_EQ(window.packets(), SendWindow::max_packets);
}

TEST(SendWindow, AboveAQuarterItGrowsByOnePerWindowAcknowledged) {
    SendWindow window;
    window.lost(); // 128
    window.acknowledged(127);
    EXPECT_EQ(window.packets(), 128U);
    window.acknowledged(1);
    EXPECT_EQ(window.packets(), 129U);
}

} // namespace
} // namespace prdma::swroce
