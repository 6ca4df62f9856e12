// QueuePair::connect and import_connection: the INIT -> RTR -> RTS sequence every verbs program
// copies, done once, from a descriptor a peer exported.
#include <algorithm>
#include <cstring>

#include <prdma/format.hpp>
#include <prdma/rdmadev/rdmadev.hpp>
#include <prdma/roce/psn.hpp>

#include "objects.hpp"

namespace prdma::rdma {

Result<ConnectionDescriptor> import_connection(const void* buffer, std::uint32_t length) {
    constexpr std::uint32_t expected = sizeof(ConnectionDescriptor);
    if (buffer == nullptr || length < expected) {
        return Error(StatusCode::invalid_parameter,
                     strformat("a connection descriptor is %u bytes, got %u", expected,
                               buffer == nullptr ? 0U : length));
    }
    ConnectionDescriptor peer;
    std::memcpy(&peer, buffer, sizeof(peer));
    if (peer.version != 1 || peer.size != expected) {
        return Error(StatusCode::invalid_parameter,
                     strformat("connection descriptor version %u size %u; this is version 1, "
                               "size %u",
                               peer.version, peer.size, expected));
    }
    if (peer.qpn == 0 || peer.qpn > 0xffffffU || peer.psn > roce::psn_mask) {
        return Error(StatusCode::invalid_parameter,
                     strformat("connection descriptor QPN 0x%x PSN 0x%x: both are 24-bit and the "
                               "QPN is not 0",
                               peer.qpn, peer.psn));
    }
    return peer;
}

namespace {

QpAttr rtr_attributes(const ConnectionDescriptor& peer, const ConnectOptions& options) {
    QpAttr rtr;
    rtr.state = QpState::rtr;
    rtr.path_mtu = options.path_mtu;
    rtr.dest_gid = peer.gid;
    if (std::any_of(std::begin(peer.mac), std::end(peer.mac), [](std::uint8_t b) { return b; })) {
        std::array<std::uint8_t, 6> mac{};
        std::memcpy(mac.data(), peer.mac, mac.size());
        rtr.dest_mac = mac;
    }
    rtr.dest_qpn = peer.qpn;
    rtr.rq_psn = peer.psn;
    rtr.max_dest_rd_atomic = options.max_dest_rd_atomic;
    rtr.min_rnr_timer = options.min_rnr_timer;
    rtr.selective_repeat = options.selective_repeat;
    return rtr;
}

} // namespace

Status QueuePair::connect(const ConnectionDescriptor& peer, const ConnectOptions& options,
                          std::uint64_t request_id) {
    if (qp_ == nullptr) {
        return Error(StatusCode::invalid_parameter, "the QP is not created");
    }
    if (options.until != QpState::rtr && options.until != QpState::rts) {
        return Error(StatusCode::invalid_parameter, "connect() goes to RTR or RTS");
    }
    if (options.sq_psn && *options.sq_psn > roce::psn_mask) {
        return Error(StatusCode::invalid_parameter,
                     strformat("send PSN 0x%x does not fit IBTA's 24 bits", *options.sq_psn));
    }
    const QpState from = state();
    if (from == QpState::reset) {
        QpAttr init;
        init.state = QpState::init;
        init.port = options.port;
        init.access = options.access;
        // Every step carries the caller's id: any of them may pend (a queue group that another
        // thread polls), and the caller waits for its own id before calling again.
        if (Status status =
                modify(init, qp_attr_state | qp_attr_port | qp_attr_access_flags, request_id);
            !status.ok()) {
            return status; // pending: connect() again once it completes
        }
    } else if (from != QpState::init && from != QpState::rtr && from != QpState::rts) {
        return Error(StatusCode::invalid_parameter,
                     strformat("QP %u is %s: connect() starts from RESET, INIT or RTR", qp_->qpn,
                               std::string(qp_state_name(from)).c_str()));
    }
    if (state() == QpState::init) {
        constexpr QpAttrMask mask = qp_attr_state | qp_attr_path_mtu | qp_attr_dest |
                                    qp_attr_dest_qpn | qp_attr_rq_psn | qp_attr_max_dest_rd_atomic |
                                    qp_attr_min_rnr_timer | qp_attr_selective_repeat;
        if (Status status = modify(rtr_attributes(peer, options), mask, request_id); !status.ok()) {
            return status; // pending: ARP or the owner; connect() again once it completes
        }
    }
    if (options.until == QpState::rtr || state() == QpState::rts) {
        return {};
    }
    driver::Device* dev = detail::live_device(*qp_->context);
    if (dev == nullptr) {
        return detail::device_removed_error(qp_->context->device);
    }
    QpAttr rts;
    rts.state = QpState::rts;
    rts.sq_psn = options.sq_psn.value_or(dev->config.ops->qp_send_psn(*dev, qp_->driver));
    rts.timeout = options.timeout;
    rts.retry_cnt = options.retry_cnt;
    rts.rnr_retry = options.rnr_retry;
    rts.max_rd_atomic = options.max_rd_atomic;
    return modify(rts,
                  qp_attr_state | qp_attr_sq_psn | qp_attr_timeout | qp_attr_retry_cnt |
                      qp_attr_rnr_retry | qp_attr_max_rd_atomic,
                  request_id);
}

} // namespace prdma::rdma
