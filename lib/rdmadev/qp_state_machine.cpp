#include "qp_state_machine.hpp"

#include <prdma/format.hpp>

namespace prdma::rdma {

namespace {

constexpr std::uint32_t rtr_required = qp_attr_dest | qp_attr_path_mtu | qp_attr_dest_qpn |
                                       qp_attr_rq_psn | qp_attr_max_dest_rd_atomic |
                                       qp_attr_min_rnr_timer;
constexpr std::uint32_t rts_required = qp_attr_sq_psn | qp_attr_timeout | qp_attr_retry_cnt |
                                       qp_attr_rnr_retry | qp_attr_max_rd_atomic;
constexpr std::uint32_t rts_optional =
    qp_attr_cur_state | qp_attr_access_flags | qp_attr_min_rnr_timer;

} // namespace

TransitionRule transition_rule(QpState from, QpState to) {
    // Any state may go to RESET or ERR with nothing else (IBTA 11.2.5).
    if (to == QpState::reset || to == QpState::err) {
        return {true, 0, 0};
    }
    switch (from) {
    case QpState::reset:
        if (to == QpState::init) {
            return {true, qp_attr_port | qp_attr_access_flags, 0};
        }
        break;
    case QpState::init:
        if (to == QpState::init) {
            return {true, 0, qp_attr_port | qp_attr_access_flags};
        }
        if (to == QpState::rtr) {
            return {true, rtr_required, qp_attr_access_flags};
        }
        break;
    case QpState::rtr:
        if (to == QpState::rts) {
            return {true, rts_required, rts_optional};
        }
        break;
    case QpState::rts:
        if (to == QpState::rts) {
            return {true, 0, rts_optional};
        }
        if (to == QpState::sqd) {
            return {true, 0, 0};
        }
        break;
    case QpState::sqd:
        if (to == QpState::rts) {
            return {true, 0, rts_optional};
        }
        if (to == QpState::sqd) {
            return {true, 0,
                    rts_optional | qp_attr_timeout | qp_attr_retry_cnt | qp_attr_rnr_retry |
                        qp_attr_max_rd_atomic | qp_attr_max_dest_rd_atomic | qp_attr_path_mtu};
        }
        break;
    case QpState::sqe:
        if (to == QpState::rts) {
            return {true, 0, qp_attr_cur_state | qp_attr_access_flags};
        }
        break;
    case QpState::err:
        break;
    }
    return {};
}

std::string check_transition(QpState from, QpState to, std::uint32_t mask) {
    const TransitionRule rule = transition_rule(from, to);
    if (!rule.legal) {
        return strformat("%s -> %s is not a legal queue-pair transition",
                         std::string(qp_state_name(from)).c_str(),
                         std::string(qp_state_name(to)).c_str());
    }
    const std::uint32_t given = mask & ~qp_attr_state;
    const std::uint32_t missing = rule.required & ~given;
    if (missing != 0) {
        return strformat("%s -> %s needs %s", std::string(qp_state_name(from)).c_str(),
                         std::string(qp_state_name(to)).c_str(),
                         qp_attr_mask_names(missing).c_str());
    }
    const std::uint32_t extra = given & ~(rule.required | rule.optional);
    if (extra != 0) {
        return strformat("%s -> %s does not take %s", std::string(qp_state_name(from)).c_str(),
                         std::string(qp_state_name(to)).c_str(), qp_attr_mask_names(extra).c_str());
    }
    return {};
}

std::string qp_attr_mask_names(std::uint32_t mask) {
    static constexpr std::pair<std::uint32_t, const char*> names[] = {
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
    };
    std::string text;
    for (const auto& [bit, name] : names) {
        if ((mask & bit) != 0) {
            text += text.empty() ? "" : "|";
            text += name;
        }
    }
    if ((mask & ~0x7fffU) != 0) {
        text += text.empty() ? "unknown bits" : "|unknown bits";
    }
    return text;
}

} // namespace prdma::rdma
