// IBTA RC transitions: every legal one with its required attributes, and every illegal pair.
#include <gtest/gtest.h>

#include <prdma/rdmadev/types.hpp>

#include "qp_state_machine.hpp"

namespace prdma::rdma {
namespace {

constexpr QpState kStates[] = {QpState::reset, QpState::init, QpState::rtr, QpState::rts,
                               QpState::sqd,   QpState::sqe,  QpState::err};

constexpr QpAttrMask kRtr = qp_attr_dest | qp_attr_path_mtu | qp_attr_dest_qpn | qp_attr_rq_psn |
                            qp_attr_max_dest_rd_atomic | qp_attr_min_rnr_timer;
constexpr QpAttrMask kRts = qp_attr_sq_psn | qp_attr_timeout | qp_attr_retry_cnt |
                            qp_attr_rnr_retry | qp_attr_max_rd_atomic;

TEST(QpStateMachine, TheConnectPathWithExactlyTheRequiredAttributes) {
    EXPECT_EQ(check_transition(QpState::reset, QpState::init,
                               qp_attr_state | qp_attr_port | qp_attr_access_flags),
              "");
    EXPECT_EQ(check_transition(QpState::init, QpState::rtr, qp_attr_state | kRtr), "");
    EXPECT_EQ(check_transition(QpState::rtr, QpState::rts, qp_attr_state | kRts), "");
}

TEST(QpStateMachine, MissingAttributesAreNamed) {
    const std::string problem = check_transition(QpState::init, QpState::rtr,
                                                 qp_attr_state | kRtr.without(qp_attr_dest_qpn));
    EXPECT_NE(problem.find("needs dest_qpn"), std::string::npos) << problem;
    const std::string two = check_transition(QpState::reset, QpState::init, qp_attr_state);
    EXPECT_NE(two.find("access_flags"), std::string::npos) << two;
    EXPECT_NE(two.find("port"), std::string::npos) << two;
}

TEST(QpStateMachine, AttributesATransitionDoesNotTakeAreRejected) {
    const std::string problem =
        check_transition(QpState::reset, QpState::init,
                         qp_attr_state | qp_attr_port | qp_attr_access_flags | qp_attr_sq_psn);
    EXPECT_NE(problem.find("does not take sq_psn"), std::string::npos) << problem;
    EXPECT_NE(check_transition(QpState::rtr, QpState::rts, qp_attr_state | kRts | qp_attr_dest_qpn),
              "");
}

TEST(QpStateMachine, OptionalAttributesAreAccepted) {
    EXPECT_EQ(
        check_transition(QpState::init, QpState::rtr, qp_attr_state | kRtr | qp_attr_access_flags),
        "");
    EXPECT_EQ(check_transition(QpState::rtr, QpState::rts,
                               qp_attr_state | kRts | qp_attr_min_rnr_timer | qp_attr_cur_state),
              "");
    EXPECT_EQ(check_transition(QpState::rts, QpState::rts, qp_attr_state | qp_attr_min_rnr_timer),
              "");
}

TEST(QpStateMachine, ResetAndErrorAreReachableFromEverywhere) {
    for (QpState from : kStates) {
        EXPECT_EQ(check_transition(from, QpState::reset, qp_attr_state), "") << qp_state_name(from);
        EXPECT_EQ(check_transition(from, QpState::err, qp_attr_state), "") << qp_state_name(from);
        EXPECT_NE(check_transition(from, QpState::err, qp_attr_state | qp_attr_port), "")
            << "ERR takes no attributes";
    }
}

TEST(QpStateMachine, ExactlyTheIbtaTransitionsAreLegal) {
    int legal = 0;
    for (QpState from : kStates) {
        for (QpState to : kStates) {
            if (transition_rule(from, to).legal) {
                ++legal;
            }
        }
    }
    // 7 x {RESET, ERR} + RESET->INIT, INIT->INIT, INIT->RTR, RTR->RTS, RTS->RTS, RTS->SQD,
    // SQD->RTS, SQD->SQD, SQE->RTS.
    EXPECT_EQ(legal, 14 + 9);
    EXPECT_FALSE(transition_rule(QpState::reset, QpState::rtr).legal);
    EXPECT_FALSE(transition_rule(QpState::init, QpState::rts).legal);
    EXPECT_FALSE(transition_rule(QpState::rts, QpState::rtr).legal);
    EXPECT_FALSE(transition_rule(QpState::err, QpState::rts).legal);
    EXPECT_TRUE(transition_rule(QpState::reset, QpState::reset).legal);
}

// IBTA's UD column: the same transitions, a Q_Key where RC takes its peer, its PSNs and retries.
TEST(QpStateMachine, UdTakesAQkeyAndNoPeer) {
    int legal = 0;
    for (QpState from : kStates) {
        for (QpState to : kStates) {
            legal += transition_rule(from, to, QpType::ud).legal ? 1 : 0;
        }
    }
    EXPECT_EQ(legal, 14 + 9);
    const QpAttrMask init = qp_attr_state | qp_attr_port | qp_attr_qkey;
    EXPECT_EQ(check_transition(QpState::reset, QpState::init, init, QpType::ud), "");
    EXPECT_NE(
        check_transition(QpState::reset, QpState::init, qp_attr_state | qp_attr_port, QpType::ud),
        "")
        << "the Q_Key is required";
    EXPECT_NE(check_transition(QpState::reset, QpState::init, init, QpType::rc), "")
        << "an RC QP takes no Q_Key";
    EXPECT_EQ(check_transition(QpState::init, QpState::rtr, qp_attr_state, QpType::ud), "");
    EXPECT_NE(check_transition(QpState::init, QpState::rtr,
                               qp_attr_state | qp_attr_dest | qp_attr_dest_qpn, QpType::ud),
              "")
        << "no peer";
    EXPECT_EQ(
        check_transition(QpState::rtr, QpState::rts, qp_attr_state | qp_attr_sq_psn, QpType::ud),
        "");
    EXPECT_NE(check_transition(QpState::rtr, QpState::rts,
                               qp_attr_state | qp_attr_sq_psn | qp_attr_timeout, QpType::ud),
              "")
        << "nothing is retried";
    EXPECT_EQ(
        check_transition(QpState::rts, QpState::rts, qp_attr_state | qp_attr_qkey, QpType::ud), "");
}

// Selective repeat is agreed with the peer before anything is received: INIT -> RTR only, RC only.
TEST(QpStateMachine, SelectiveRepeatIsSetOnTheWayToRtr) {
    EXPECT_EQ(check_transition(QpState::init, QpState::rtr,
                               qp_attr_state | kRtr | qp_attr_selective_repeat),
              "");
    const std::string later = check_transition(QpState::rtr, QpState::rts,
                                               qp_attr_state | kRts | qp_attr_selective_repeat);
    EXPECT_NE(later.find("does not take selective_repeat"), std::string::npos) << later;
    EXPECT_NE(
        check_transition(QpState::rts, QpState::rts, qp_attr_state | qp_attr_selective_repeat), "");
    EXPECT_NE(check_transition(QpState::init, QpState::rtr,
                               qp_attr_state | qp_attr_selective_repeat, QpType::ud),
              "")
        << "a datagram is never resent";
}

TEST(QpAttrMaskNames, ListsEveryBit) {
    EXPECT_EQ(qp_attr_mask_names(qp_attr_path_mtu | qp_attr_dest_qpn), "path_mtu|dest_qpn");
    EXPECT_EQ(qp_attr_mask_names(qp_attr_cur_state | qp_attr_qkey), "cur_state|qkey");
    EXPECT_EQ(qp_attr_mask_names(qp_attr_selective_repeat), "selective_repeat");
    EXPECT_EQ(qp_attr_mask_names(QpAttrMask::from_bits(1U << 30)), "unknown bits");
}

TEST(RdmaTypes, GidFromIpv4IsIpv4Mapped) {
    const Gid gid = Gid::from_ipv4(0x0a000001); // 10.0.0.1
    EXPECT_TRUE(gid.is_ipv4_mapped());
    EXPECT_EQ(gid.raw[10], 0xff);
    EXPECT_EQ(gid.raw[12], 10);
    EXPECT_EQ(gid.raw[15], 1);
    Gid v6{};
    v6.raw[0] = 0xfe;
    v6.raw[1] = 0x80;
    EXPECT_FALSE(v6.is_ipv4_mapped());
}

TEST(RdmaTypes, PathMtuForAnEthernetMtu) {
    EXPECT_EQ(mtu_for_ethernet(1500), Mtu::mtu_1024) << "rxe's choice on a 1500-byte link";
    EXPECT_EQ(mtu_for_ethernet(9000), Mtu::mtu_4096);
    EXPECT_EQ(mtu_for_ethernet(4096 + 84), Mtu::mtu_4096);
    EXPECT_EQ(mtu_for_ethernet(4096 + 83), Mtu::mtu_2048);
    EXPECT_EQ(mtu_bytes(Mtu::mtu_256), 256U);
    EXPECT_EQ(mtu_bytes(Mtu::mtu_4096), 4096U);
}

} // namespace
} // namespace prdma::rdma
