// IBTA RC queue-pair state transitions: which ones are legal, and which attributes each one
// requires and allows (the table ibv_modify_qp enforces). Pure, unit-tested without a device.
#pragma once

#include <cstdint>
#include <string>

#include <prdma/rdmadev/types.hpp>

namespace prdma::rdma {

struct TransitionRule {
    bool legal = false;
    std::uint32_t required = 0; // besides qp_attr_state
    std::uint32_t optional = 0;
};

TransitionRule transition_rule(QpState from, QpState to);

// Empty when `mask` is acceptable for from -> to; else a message naming the problem.
std::string check_transition(QpState from, QpState to, std::uint32_t mask);

// Names of the bits in a QpAttrMask ("path_mtu|dest_qpn").
std::string qp_attr_mask_names(std::uint32_t mask);

} // namespace prdma::rdma
