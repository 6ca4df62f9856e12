// CompletionQueue: the handle of a CQ of one queue group.
#include <cstring>

#include <prdma/format.hpp>

#include "objects.hpp"
#include "rdmadev_log.hpp"

namespace prdma::rdma {

using detail::CqObject;

// ---- CompletionQueue --------------------------------------------------------------------------

CompletionQueue::CompletionQueue(CqObject* cq)
    : CqQueue(cq->context->device, cq->driver), cq_(cq) {}
CompletionQueue::CompletionQueue(CompletionQueue&& other) noexcept
    : CqQueue(other.device_, std::exchange(other.driver_, nullptr)),
      cq_(std::exchange(other.cq_, nullptr)) {}
CompletionQueue& CompletionQueue::operator=(CompletionQueue&& other) noexcept {
    detail::move_assign(*this, std::move(other));
    return *this;
}
CompletionQueue::~CompletionQueue() {
    release();
}

void CompletionQueue::release() noexcept {
    if (cq_ == nullptr) {
        return;
    }
    if (cq_->creating || cq_->qps > 0) {
        // Destroyed by the context once created, or with its last QP.
        driver_ = nullptr;
        std::exchange(cq_, nullptr)->handle_dropped = true;
        return;
    }
    (void)destroy();
}

std::uint32_t CompletionQueue::capacity() const {
    return cq_ != nullptr ? cq_->cqe : 0;
}
std::uint16_t CompletionQueue::queue_group() const {
    return cq_ != nullptr ? cq_->queue_group : 0;
}
bool CompletionQueue::ready() const noexcept {
    return cq_ != nullptr && !cq_->creating && cq_->driver != nullptr;
}

Status CompletionQueue::destroy(std::uint64_t request_id) {
    if (cq_ == nullptr) {
        return {};
    }
    if (cq_->creating) {
        return detail::not_ready("CQ", true);
    }
    if (cq_->qps > 0) {
        return Error(StatusCode::busy, strformat("the CQ is used by %u QPs", cq_->qps));
    }
    driver_ = nullptr;
    return detail::destroy_cq_object(std::exchange(cq_, nullptr), request_id);
}

} // namespace prdma::rdma
