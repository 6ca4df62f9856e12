// SharedReceiveQueue: the handle of an SRQ, and Context::create_srq. An SRQ never pends: the
// driver's queue group sees it only through the QPs created on it, and the class destroys it only
// once the last of them is gone.
#include <prdma/format.hpp>

#include "objects.hpp"

namespace prdma::rdma {

using detail::PdObject;
using detail::SrqObject;

namespace detail {

void free_srq(SrqObject* srq) {
    std::unique_ptr<SrqObject> owned(srq);
    ContextState& context = *owned->context;
    if (driver::Device* dev = live_device(context); dev != nullptr && owned->driver != nullptr) {
        dev->config.ops->destroy_srq(*dev, owned->driver);
    }
    context.srqs.erase(owned->srqn);
    --context.resources.srqs;
    --owned->pd->srqs;
    release_pd_child(owned->pd);
}

void release_srq_child(SrqObject* srq) {
    if (srq->handle_dropped && srq->qps == 0) {
        free_srq(srq);
    }
}

} // namespace detail

SharedReceiveQueue::SharedReceiveQueue(SrqObject* srq)
    : SrqQueue(srq->context->device, srq->driver), srq_(srq) {}
SharedReceiveQueue::SharedReceiveQueue(SharedReceiveQueue&& other) noexcept
    : SrqQueue(other.device_, std::exchange(other.driver_, nullptr)),
      srq_(std::exchange(other.srq_, nullptr)) {}
SharedReceiveQueue& SharedReceiveQueue::operator=(SharedReceiveQueue&& other) noexcept {
    detail::move_assign(*this, std::move(other));
    return *this;
}
SharedReceiveQueue::~SharedReceiveQueue() {
    release();
}

void SharedReceiveQueue::release() noexcept {
    if (srq_ == nullptr) {
        return;
    }
    driver_ = nullptr;
    SrqObject* srq = std::exchange(srq_, nullptr);
    srq->handle_dropped = true; // destroyed with its last QP when QPs still use it
    detail::release_srq_child(srq);
}

std::uint32_t SharedReceiveQueue::srqn() const {
    return srq_ != nullptr ? srq_->srqn : 0;
}
std::uint16_t SharedReceiveQueue::queue_group() const {
    return srq_ != nullptr ? srq_->queue_group : 0;
}
SrqCaps SharedReceiveQueue::caps() const {
    return srq_ != nullptr ? srq_->caps : SrqCaps{0, 0};
}

namespace {

// The SRQ's live device, or why there is none.
Result<driver::Device*> srq_device(const SrqObject* srq) {
    if (srq == nullptr) {
        return Error(StatusCode::invalid_parameter, "no SRQ (moved from or destroyed)");
    }
    driver::Device* dev = detail::live_device(*srq->context);
    if (dev == nullptr) {
        return detail::device_removed_error(srq->context->device);
    }
    return dev;
}

} // namespace

namespace {

struct SrqState {
    std::uint32_t limit = 0;
    std::uint32_t outstanding = 0;
};

Result<SrqState> query(const SrqObject* srq) {
    auto dev = srq_device(srq);
    if (!dev.ok()) {
        return dev.error();
    }
    SrqState state;
    dev.value()->config.ops->query_srq(*dev.value(), srq->driver, state.limit, state.outstanding);
    return state;
}

} // namespace

Result<std::uint32_t> SharedReceiveQueue::outstanding() const {
    auto state = query(srq_);
    return state.ok() ? Result<std::uint32_t>(state.value().outstanding)
                      : Result<std::uint32_t>(state.error());
}

Result<std::uint32_t> SharedReceiveQueue::limit() const {
    auto state = query(srq_);
    return state.ok() ? Result<std::uint32_t>(state.value().limit)
                      : Result<std::uint32_t>(state.error());
}

Status SharedReceiveQueue::arm_limit(std::uint32_t limit) {
    auto dev = srq_device(srq_);
    if (!dev.ok()) {
        return dev.error();
    }
    if (limit > srq_->caps.max_wr) {
        return Error(StatusCode::invalid_parameter,
                     strformat("SRQ limit %u above its %u receive WRs", limit, srq_->caps.max_wr));
    }
    return dev.value()->config.ops->arm_srq_limit(*dev.value(), srq_->driver, limit);
}

Status SharedReceiveQueue::resize(std::uint32_t max_wr, std::optional<std::uint32_t> limit) {
    auto dev = srq_device(srq_);
    if (!dev.ok()) {
        return dev.error();
    }
    const DeviceAttr attr = detail::device_attr(*dev.value());
    const driver::DeviceOps& ops = *dev.value()->config.ops;
    if (ops.resize_srq == nullptr || !attr.capability_flags.has(cap_srq_resize)) {
        return Error(StatusCode::not_supported,
                     strformat("%s cannot resize an SRQ", dev.value()->config.name.c_str()));
    }
    if (max_wr == 0 || max_wr > attr.max_qp_wr) {
        return Error(
            StatusCode::invalid_parameter,
            strformat("an SRQ of %u receive WRs: the device takes 1..%u", max_wr, attr.max_qp_wr));
    }
    SrqCaps got;
    if (Status status = ops.resize_srq(*dev.value(), srq_->driver, max_wr, limit, got);
        !status.ok()) {
        return status;
    }
    srq_->caps = got;
    return {};
}

Status SharedReceiveQueue::destroy() {
    if (srq_ == nullptr) {
        return {};
    }
    if (srq_->qps > 0) {
        return Error(StatusCode::busy, strformat("the SRQ is used by %u QPs", srq_->qps));
    }
    driver_ = nullptr;
    detail::free_srq(std::exchange(srq_, nullptr));
    return {};
}

Result<SharedReceiveQueue> Context::create_srq(ProtectionDomain& pd, const SrqCaps& caps,
                                               std::uint16_t queue_group) {
    if (!state_) {
        return detail::context_closed_error();
    }
    driver::Device* dev = detail::live_device(*state_);
    if (dev == nullptr) {
        return detail::device_removed_error(state_->device);
    }
    PdObject* pdo = pd.pd_;
    if (pdo == nullptr || pdo->context != state_) {
        return Error(StatusCode::invalid_parameter,
                     "an SRQ needs a PD of the context that creates it");
    }
    const DeviceAttr attr = detail::device_attr(*dev);
    if (dev->config.ops->create_srq == nullptr || attr.max_srq == 0) {
        return Error(StatusCode::not_supported,
                     strformat("%s has no shared receive queues", dev->config.name.c_str()));
    }
    if (caps.max_wr == 0 || caps.max_wr > attr.max_qp_wr || caps.max_sge == 0 ||
        caps.max_sge > attr.max_sge) {
        return Error(StatusCode::invalid_parameter,
                     strformat("SRQ of %u WRs of %u SGEs: the device takes 1..%u WRs of 1..%u SGEs",
                               caps.max_wr, caps.max_sge, attr.max_qp_wr, attr.max_sge));
    }
    if (queue_group != any_queue_group && queue_group >= attr.max_queue_groups) {
        return Error(StatusCode::invalid_parameter, strformat("queue group %u: the device has %u",
                                                              queue_group, attr.max_queue_groups));
    }
    driver::SrqCreated created;
    if (Status status = dev->config.ops->create_srq(*dev, {pdo->id, queue_group, caps}, created);
        !status.ok()) {
        return status.error();
    }
    auto srq = std::make_unique<SrqObject>();
    srq->context = state_;
    srq->pd = pdo;
    srq->driver = created.queue;
    srq->srqn = created.srqn;
    srq->queue_group = queue_group;
    srq->caps = created.caps;
    ++pdo->srqs;
    ++state_->resources.srqs;
    state_->srqs.emplace(srq->srqn, srq.get());
    return SharedReceiveQueue(srq.release());
}

} // namespace prdma::rdma
