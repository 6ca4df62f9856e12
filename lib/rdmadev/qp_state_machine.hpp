// IBTA queue-pair state transitions (RC and UD): which ones are legal, and which attributes each
// one requires and allows (the table ibv_modify_qp enforces). Pure, unit-tested without a device.
#pragma once

#include <cstdint>
#include <string>

#include <prdma/rdmadev/types.hpp>

namespace prdma::rdma {

struct TransitionRule {
    bool legal = false;
    QpAttrMask required; // besides qp_attr_state
    QpAttrMask optional;
};

TransitionRule transition_rule(QpState from, QpState to, QpType type = QpType::rc);

// Empty when `mask` is acceptable for from -> to; else a message naming the problem.
std::string check_transition(QpState from, QpState to, QpAttrMask mask, QpType type = QpType::rc);

// Names of the bits in a QpAttrMask ("path_mtu|dest_qpn").
std::string qp_attr_mask_names(QpAttrMask mask);

} // namespace prdma::rdma
