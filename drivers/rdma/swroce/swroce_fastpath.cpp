// swroce's fast-path entry points. The RoCEv2 engine (requester/responder/completer) plugs in
// here; until it does, receives are queued (and flushed on error or destroy) and sends report
// not_supported through post_error.
#include <prdma/compiler.hpp>

#include "swroce_device.hpp"

namespace prdma::swroce {

std::uint16_t swroce_post_recv(void* queue, const rdma::RecvWr* wrs, std::uint16_t count) {
    auto& qp = *static_cast<SwroceQp*>(queue);
    if (PRDMA_UNLIKELY(qp.state == rdma::QpState::reset || qp.destroying)) {
        qp.post_error = StatusCode::not_connected;
        return 0;
    }
    std::uint16_t taken = 0;
    for (; taken < count; ++taken) {
        const rdma::RecvWr& wr = wrs[taken];
        if (PRDMA_UNLIKELY(qp.receive_queue.full())) {
            qp.post_error = StatusCode::no_resources;
            break;
        }
        if (PRDMA_UNLIKELY(wr.num_sge > qp.caps.max_recv_sge)) {
            qp.post_error = StatusCode::invalid_parameter;
            break;
        }
        qp.receive_queue.push_slot() = wr;
    }
    if (qp.state == rdma::QpState::err) {
        flush_queues(qp); // IBTA: WRs posted to a QP in error complete with flush errors
    }
    return taken;
}

std::uint16_t swroce_post_send(void* queue, const rdma::SendWr* wrs, std::uint16_t count) {
    auto& qp = *static_cast<SwroceQp*>(queue);
    if (qp.state == rdma::QpState::err && !qp.destroying) {
        std::uint16_t taken = 0;
        for (; taken < count && !qp.send_queue.full(); ++taken) {
            qp.send_queue.push_slot() = wrs[taken];
        }
        flush_queues(qp);
        return taken;
    }
    if (qp.state != rdma::QpState::rts && qp.state != rdma::QpState::sqd) {
        qp.post_error = StatusCode::not_connected;
        return 0;
    }
    qp.post_error = StatusCode::not_supported;
    return 0;
}

std::uint16_t swroce_poll_cq(void* queue, rdma::WorkCompletion* wcs, std::uint16_t count) {
    auto& cq = *static_cast<SwroceCq*>(queue);
    std::uint16_t n = 0;
    for (; n < count && !cq.ring.empty(); ++n) {
        wcs[n] = cq.ring.front();
        cq.ring.pop();
    }
    return n;
}

} // namespace prdma::swroce
