// QueuePair: modify (IBTA transitions, pending RTR), destroy, export_connection.
#include <cstring>

#include <prdma/format.hpp>

#include "objects.hpp"
#include "qp_state_machine.hpp"
#include "rdmadev_log.hpp"

namespace prdma::rdma {

using detail::QpObject;

// ---- QueuePair ----------------------------------------------------------------------------------

namespace {

// The device of a QP that exists, is created and whose device is still there.
Result<driver::Device*> device_of(const QpObject* qp) {
    if (qp == nullptr) {
        return Error(StatusCode::invalid_parameter, "the QP is not created");
    }
    driver::Device* dev = detail::live_device(*qp->context);
    if (dev == nullptr) {
        return detail::device_removed_error(qp->context->device);
    }
    if (qp->creating || qp->driver == nullptr) {
        return detail::not_ready("QP", qp->creating);
    }
    return dev;
}

} // namespace

QueuePair::QueuePair(QpObject* qp) : QpQueue(qp->context->device, qp->driver), qp_(qp) {}
QueuePair::QueuePair(QueuePair&& other) noexcept
    : QpQueue(other.device_, std::exchange(other.driver_, nullptr)),
      qp_(std::exchange(other.qp_, nullptr)) {}
QueuePair& QueuePair::operator=(QueuePair&& other) noexcept {
    detail::move_assign(*this, std::move(other));
    return *this;
}
QueuePair::~QueuePair() {
    release();
}

void QueuePair::release() noexcept {
    if (qp_ != nullptr && qp_->creating) {
        driver_ = nullptr;
        std::exchange(qp_, nullptr)->handle_dropped = true; // destroyed once created
        return;
    }
    (void)destroy();
}

std::uint32_t QueuePair::qpn() const {
    return qp_ != nullptr ? qp_->qpn : 0;
}
QpState QueuePair::state() const {
    if (qp_ == nullptr || qp_->creating || qp_->driver == nullptr) {
        return QpState::reset;
    }
    driver::Device* dev = detail::live_device(*qp_->context);
    if (dev == nullptr) {
        return QpState::err; // its device is gone, and every QP on it with it
    }
    return dev->config.ops->qp_state(*dev, qp_->driver);
}
bool QueuePair::ready() const noexcept {
    return qp_ != nullptr && !qp_->creating && qp_->driver != nullptr;
}
Result<QpAttr> QueuePair::attributes() const {
    if (qp_ == nullptr) {
        return Error(StatusCode::invalid_parameter, "the QP is not created");
    }
    if (qp_->pending_modify) {
        // The device may be writing them this moment, on the lcore that drives the QP.
        return Error(
            StatusCode::busy,
            strformat("QP %u has a modify pending; poll_control until it completes", qp_->qpn));
    }
    QpAttr attr = qp_->attr;
    attr.state = state();
    attr.cur_state = attr.state;
    return attr;
}
const QpCaps& QueuePair::caps() const {
    static const QpCaps none{};
    return qp_ != nullptr ? qp_->caps : none;
}

Result<QpStatus> QueuePair::query_status() const {
    Result<driver::Device*> usable = device_of(qp_);
    if (!usable) {
        return usable.error();
    }
    driver::Device* dev = usable.value();
    if (dev->config.ops->qp_telemetry == nullptr) {
        return Error(StatusCode::not_supported,
                     strformat("%s does not report QP status", dev->config.name.c_str()));
    }
    std::vector<QpStatus> one;
    dev->config.ops->qp_telemetry(*dev, qp_->qpn, one);
    if (!one.empty()) {
        return one.front();
    }
    return Error(StatusCode::invalid_parameter,
                 strformat("QP 0x%06x is not in %s's table", qp_->qpn, dev->config.name.c_str()));
}

Status QueuePair::modify(const QpAttr& attr, QpAttrMask mask, std::uint64_t request_id) {
    Result<driver::Device*> usable = device_of(qp_);
    if (!usable) {
        return usable.error();
    }
    driver::Device* dev = usable.value();
    if (qp_->pending_modify || qp_->destroying) {
        return Error(
            StatusCode::busy,
            strformat("QP %u has a control request pending; poll_control first", qp_->qpn));
    }
    const QpState from = state();
    if (mask.has(qp_attr_cur_state) && attr.cur_state != from) {
        return Error(StatusCode::invalid_parameter,
                     strformat("cur_state says %s but QP %u is %s",
                               std::string(qp_state_name(attr.cur_state)).c_str(), qp_->qpn,
                               std::string(qp_state_name(from)).c_str()));
    }
    const QpState to = mask.has(qp_attr_state) ? attr.state : from;
    if (!mask.has(qp_attr_state)) {
        // Changing attributes without a state change is the to == from transition.
        if (std::string problem = check_transition(from, from, mask | qp_attr_state, qp_->type);
            !problem.empty()) {
            return Error(StatusCode::invalid_parameter, problem);
        }
    } else if (std::string problem = check_transition(from, to, mask, qp_->type);
               !problem.empty()) {
        return Error(StatusCode::invalid_parameter, problem);
    }
    if (mask.has(qp_attr_port) && (attr.port == 0 || attr.port > dev->config.port_count)) {
        return Error(StatusCode::invalid_parameter, strformat("port %u does not exist (1..%u)",
                                                              attr.port, dev->config.port_count));
    }
    if (mask.has(qp_attr_max_rd_atomic) && attr.max_rd_atomic > dev->config.attr.max_qp_rd_atomic) {
        return Error(StatusCode::invalid_parameter,
                     strformat("max_rd_atomic %u exceeds the device's %u", attr.max_rd_atomic,
                               dev->config.attr.max_qp_rd_atomic));
    }
    if (mask.has(qp_attr_max_dest_rd_atomic) &&
        attr.max_dest_rd_atomic > dev->config.attr.max_qp_init_rd_atomic) {
        return Error(StatusCode::invalid_parameter,
                     strformat("max_dest_rd_atomic %u exceeds the device's %u",
                               attr.max_dest_rd_atomic, dev->config.attr.max_qp_init_rd_atomic));
    }
    if (mask.has(qp_attr_selective_repeat) && attr.selective_repeat &&
        !dev->config.attr.capability_flags.has(cap_selective_repeat)) {
        return Error(StatusCode::not_supported,
                     strformat("device %s has no selective repeat", dev->config.name.c_str()));
    }
    if (mask.any_of(qp_attr_rq_psn | qp_attr_sq_psn) &&
        ((attr.rq_psn | attr.sq_psn) & ~0xffffffU) != 0) {
        return Error(StatusCode::invalid_parameter, "PSNs are 24-bit");
    }
    if (mask.has(qp_attr_dest_qpn) && (attr.dest_qpn & ~0xffffffU) != 0) {
        return Error(StatusCode::invalid_parameter, "QPNs are 24-bit");
    }
    detail::ContextState& context = *qp_->context;
    const driver::ControlToken token = context.token(request_id, ControlOp::modify_qp, qp_->qpn);
    // The driver reads the request until it completes: it lives here, not in the caller's frame.
    const auto& [request, _] = qp_->pending_modify.emplace(attr, mask);
    detail::track(context, token, qp_);
    Status status = dev->config.ops->modify_qp(*dev, qp_->driver, request, mask, token);
    if (status.code() == StatusCode::pending) {
        return status;
    }
    detail::untrack(context, token);
    qp_->pending_modify.reset();
    return status;
}

Status QueuePair::destroy(std::uint64_t request_id) {
    if (qp_ == nullptr) {
        return {};
    }
    if (qp_->creating) {
        return detail::not_ready("QP", true);
    }
    driver_ = nullptr;
    return detail::destroy_qp_object(std::exchange(qp_, nullptr), request_id);
}

Status QueuePair::export_connection(const MemoryRegionHandle* region, void* buffer,
                                    std::uint32_t* length) const {
    if (qp_ == nullptr || length == nullptr) {
        return Error(StatusCode::invalid_parameter, "no QP or no length");
    }
    constexpr std::uint32_t required = sizeof(ConnectionDescriptor);
    if (*length < required) {
        *length = required;
        return Error(StatusCode::buffer_too_small,
                     strformat("the connection descriptor needs %u bytes", required));
    }
    if (buffer == nullptr) {
        return Error(StatusCode::invalid_parameter, "descriptor buffer is null but its length "
                                                    "claims room");
    }
    driver::Device* dev = detail::live_device(*qp_->context);
    if (dev == nullptr) {
        return detail::device_removed_error(qp_->context->device);
    }
    driver::PortInfo port;
    if (Status status = dev->config.ops->query_port(*dev, qp_->attr.port, port); !status.ok()) {
        return status;
    }
    ConnectionDescriptor descriptor;
    descriptor.size = required;
    descriptor.qpn = qp_->qpn;
    descriptor.psn = dev->config.ops->qp_send_psn(*dev, qp_->driver);
    if (!port.gids.empty()) {
        descriptor.gid = port.gids.front();
    }
    std::memcpy(descriptor.mac, port.mac, sizeof(descriptor.mac));
    if (region != nullptr && region->get() != nullptr) {
        const mem::MemoryRegion& mr = *region->get();
        descriptor.rkey = mr.rkey();
        descriptor.address = mr.remote_start();
        descriptor.length = mr.remote_end() - mr.remote_start();
    }
    std::memcpy(buffer, &descriptor, sizeof(descriptor));
    *length = required;
    return {};
}

} // namespace prdma::rdma
