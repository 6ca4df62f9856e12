// The queue-group claim's handshake (group_hold.hpp, ENGINE.md "Ownership"): while the control
// path acts on a group nobody polls, a thread's first poll finds the hold, returns nothing and
// leaves the group unclaimed; once the hold is gone the next poll claims it, and from then on
// the control path is not granted the group. Before the handshake the first poll claimed the
// group at once, even in the middle of a control action (a QP being published, a modify being
// applied), and the two ran the group's state at the same time.
#include <optional>
#include <thread>

#include <gtest/gtest.h>

#include "group_hold.hpp"
#include "role_fixture.hpp"

namespace prdma::swroce::test {
namespace {

using GroupHoldTest = RoleTest;

// Polls `cq` once from a thread of its own: what it returned, and that thread's token.
std::pair<std::uint16_t, std::uintptr_t> poll_from_another_thread(SwroceCq& cq) {
    std::uint16_t got = 0;
    std::uintptr_t token = 0;
    std::thread poller([&] {
        rdma::WorkCompletion wc[4];
        got = swroce_poll_cq(&cq, wc, 4);
        token = this_thread_token();
    });
    poller.join();
    return {got, token};
}

TEST_F(GroupHoldTest, APollDuringAControlHoldReturnsNothingAndClaimsTheGroupAfterIt) {
    const unsigned group = qp().queue_group;
    std::atomic<std::uintptr_t>& owner = dev().groups[group]->owner;
    ASSERT_EQ(owner.load(), 0U) << "the fixture polls nothing";
    SwroceCq& cq = *qp().recv_cq;
    rdma::WorkCompletion waiting;
    waiting.wr_id = 7;
    ASSERT_TRUE(cq.push(waiting));

    std::optional<GroupHold> hold;
    hold.emplace(dev(), group);
    ASSERT_TRUE(*hold);
    EXPECT_EQ(owner.load(), this_thread_token() | control_hold_bit);
    {
        const GroupHold nested(dev(), group);
        EXPECT_TRUE(nested) << "this thread already holds it";
    }
    EXPECT_EQ(owner.load(), this_thread_token() | control_hold_bit) << "the outer hold keeps it";

    const std::uint16_t during = poll_from_another_thread(cq).first;
    EXPECT_EQ(during, 0U) << "a poll in the middle of a control action must not run the group";
    EXPECT_EQ(owner.load(), this_thread_token() | control_hold_bit) << "nor claim it";

    hold.reset();
    EXPECT_EQ(owner.load(), 0U);
    const auto [after, poller] = poll_from_another_thread(cq);
    EXPECT_EQ(after, 1U) << "the completion waited for the first poll after the hold";
    EXPECT_EQ(owner.load(), poller);
    EXPECT_FALSE(GroupHold(dev(), group)) << "another thread polls the group now";
    EXPECT_FALSE(dev().may_drive(group));

    // The poller has exited; give the group back so TearDown's destroys run here.
    owner.store(0);
}

} // namespace
} // namespace prdma::swroce::test
