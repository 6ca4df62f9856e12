#include "qp_state_machine.hpp"

#include <prdma/format.hpp>

namespace prdma::rdma {

namespace {

constexpr QpAttrMask rtr_required = qp_attr_dest | qp_attr_path_mtu | qp_attr_dest_qpn |
                                    qp_attr_rq_psn | qp_attr_max_dest_rd_atomic |
                                    qp_attr_min_rnr_timer;
constexpr QpAttrMask rts_required = qp_attr_sq_psn | qp_attr_timeout | qp_attr_retry_cnt |
                                    qp_attr_rnr_retry | qp_attr_max_rd_atomic;
constexpr QpAttrMask rts_optional =
    qp_attr_cur_state | qp_attr_access_flags | qp_attr_min_rnr_timer;

// A UD QP has no peer, no PSN to expect and nothing to retry: RESET -> INIT takes its Q_Key,
// RTR -> RTS its send PSN, and the Q_Key may change in every later transition (IBTA 11.2.5 table
// for UD; what rxe and ibv_ud_pingpong do).
TransitionRule ud_transition_rule(QpState from, QpState to) {
    constexpr QpAttrMask later = qp_attr_qkey;
    switch (from) {
    case QpState::reset:
        return to == QpState::init ? TransitionRule{true, qp_attr_port | qp_attr_qkey, {}}
                                   : TransitionRule{};
    case QpState::init:
        if (to == QpState::init) {
            return {true, {}, qp_attr_port | qp_attr_qkey};
        }
        return to == QpState::rtr ? TransitionRule{true, {}, later} : TransitionRule{};
    case QpState::rtr:
        return to == QpState::rts ? TransitionRule{true, qp_attr_sq_psn, later | qp_attr_cur_state}
                                  : TransitionRule{};
    case QpState::rts:
    case QpState::sqd:
        if (to == QpState::rts || to == QpState::sqd) {
            return {true, {}, later | qp_attr_cur_state};
        }
        return {};
    case QpState::sqe:
        return to == QpState::rts ? TransitionRule{true, {}, later | qp_attr_cur_state}
                                  : TransitionRule{};
    case QpState::err:
        break;
    }
    return {};
}

} // namespace

TransitionRule transition_rule(QpState from, QpState to, QpType type) {
    // Any state may go to RESET or ERR with nothing else (IBTA 11.2.5).
    if (to == QpState::reset || to == QpState::err) {
        return {true, {}, {}};
    }
    if (type == QpType::ud) {
        return ud_transition_rule(from, to);
    }
    switch (from) {
    case QpState::reset:
        if (to == QpState::init) {
            return {true, qp_attr_port | qp_attr_access_flags, {}};
        }
        break;
    case QpState::init:
        if (to == QpState::init) {
            return {true, {}, qp_attr_port | qp_attr_access_flags};
        }
        if (to == QpState::rtr) {
            return {true, rtr_required, qp_attr_access_flags | qp_attr_selective_repeat};
        }
        break;
    case QpState::rtr:
        if (to == QpState::rts) {
            return {true, rts_required, rts_optional};
        }
        break;
    case QpState::rts:
        if (to == QpState::rts) {
            return {true, {}, rts_optional};
        }
        if (to == QpState::sqd) {
            return {true, {}, {}};
        }
        break;
    case QpState::sqd:
        if (to == QpState::rts) {
            return {true, {}, rts_optional};
        }
        if (to == QpState::sqd) {
            return {true,
                    {},
                    rts_optional | qp_attr_timeout | qp_attr_retry_cnt | qp_attr_rnr_retry |
                        qp_attr_max_rd_atomic | qp_attr_max_dest_rd_atomic | qp_attr_path_mtu};
        }
        break;
    case QpState::sqe:
        if (to == QpState::rts) {
            return {true, {}, qp_attr_cur_state | qp_attr_access_flags};
        }
        break;
    case QpState::err:
        break;
    }
    return {};
}

std::string check_transition(QpState from, QpState to, QpAttrMask mask, QpType type) {
    const TransitionRule rule = transition_rule(from, to, type);
    if (!rule.legal) {
        return strformat("%s -> %s is not a legal queue-pair transition",
                         std::string(qp_state_name(from)).c_str(),
                         std::string(qp_state_name(to)).c_str());
    }
    const QpAttrMask given = mask.without(qp_attr_state);
    const QpAttrMask missing = rule.required.without(given);
    if (!missing.empty()) {
        return strformat("%s -> %s needs %s", std::string(qp_state_name(from)).c_str(),
                         std::string(qp_state_name(to)).c_str(),
                         qp_attr_mask_names(missing).c_str());
    }
    const QpAttrMask extra = given.without(rule.required | rule.optional);
    if (!extra.empty()) {
        return strformat("%s -> %s does not take %s", std::string(qp_state_name(from)).c_str(),
                         std::string(qp_state_name(to)).c_str(), qp_attr_mask_names(extra).c_str());
    }
    return {};
}

std::string qp_attr_mask_names(QpAttrMask mask) {
    static constexpr std::pair<QpAttrField, const char*> names[] = {
        {qp_attr_state, "state"},
        {qp_attr_access_flags, "access_flags"},
        {qp_attr_port, "port"},
        {qp_attr_path_mtu, "path_mtu"},
        {qp_attr_dest, "dest"},
        {qp_attr_dest_qpn, "dest_qpn"},
        {qp_attr_rq_psn, "rq_psn"},
        {qp_attr_sq_psn, "sq_psn"},
        {qp_attr_timeout, "timeout"},
        {qp_attr_retry_cnt, "retry_cnt"},
        {qp_attr_rnr_retry, "rnr_retry"},
        {qp_attr_min_rnr_timer, "min_rnr_timer"},
        {qp_attr_max_rd_atomic, "max_rd_atomic"},
        {qp_attr_max_dest_rd_atomic, "max_dest_rd_atomic"},
        {qp_attr_cur_state, "cur_state"},
        {qp_attr_qkey, "qkey"},
        {qp_attr_selective_repeat, "selective_repeat"},
    };
    std::string text;
    std::uint32_t known = 0;
    for (const auto& [bit, name] : names) {
        known |= static_cast<std::uint32_t>(bit);
        if (mask.has(bit)) {
            text += text.empty() ? "" : "|";
            text += name;
        }
    }
    if ((mask.bits() & ~known) != 0) {
        text += text.empty() ? "unknown bits" : "|unknown bits";
    }
    return text;
}

} // namespace prdma::rdma
