// The lives of the objects behind the handles: freeing them with their parents' counts, destroys
// and deregistrations every path shares, and finishing the requests a driver left pending. The
// handles' own calls are one file each: context_objects.cpp (creation), protection_domain.cpp,
// memory_region_handle.cpp, completion_queue.cpp, queue_pair.cpp.
#include "objects.hpp"

#include <cstring>

#include <prdma/format.hpp>
#include <prdma/mem/dma_memory.hpp>

#include "qp_state_machine.hpp"
#include "rdmadev_log.hpp"

namespace prdma::rdma {

using detail::CqObject;
using detail::MrObject;
using detail::PdObject;
using detail::QpObject;

namespace detail {

void release_pd_child(PdObject* pd) {
    if (pd->handle_dropped && !pd->has_children()) {
        std::unique_ptr<PdObject> owned(pd);
        --owned->context->resources.pds;
    }
}

void release_cq_child(CqObject* cq) {
    if (cq->handle_dropped && cq->qps == 0 && !cq->creating) {
        (void)destroy_cq_object(cq, 0);
    }
}

void free_qp(QpObject* qp) {
    std::unique_ptr<QpObject> owned(qp);
    ContextState& context = *owned->context;
    if (auto it = context.qps.find(owned->qpn); it != context.qps.end() && it->second == qp) {
        context.qps.erase(it);
    }
    // A request still pending on it (an RTR a destroy overtook) has nothing left to finish.
    std::erase_if(context.pending, [qp](const auto& entry) { return entry.second.object == qp; });
    --context.resources.qps;
    --owned->pd->qps;
    --owned->send_cq->qps;
    if (owned->recv_cq != owned->send_cq) {
        --owned->recv_cq->qps;
    }
    release_pd_child(owned->pd);
    release_cq_child(owned->send_cq);
    if (owned->recv_cq != owned->send_cq) {
        release_cq_child(owned->recv_cq);
    }
    // Last: freeing the SRQ may free its PD, which the QP's may be.
    if (owned->srq != nullptr) {
        --owned->srq->qps;
        release_srq_child(owned->srq);
    }
}

namespace {

void free_cq(CqObject* cq) {
    std::unique_ptr<CqObject> owned(cq);
    --owned->context->resources.cqs;
}

void free_mr(MrObject* mr) {
    std::unique_ptr<MrObject> owned(mr);
    --owned->pd->mrs;
    --owned->context->resources.mrs;
    release_pd_child(owned->pd);
}

} // namespace

void track(ContextState& context, const driver::ControlToken& token, void* object) {
    context.pending.insert_or_assign(token.serial, PendingRequest{token, object});
}
void untrack(ContextState& context, const driver::ControlToken& token) {
    context.pending.erase(token.serial);
}

Status destroy_cq_object(CqObject* cq, std::uint64_t request_id) {
    driver::Device* dev = live_device(*cq->context);
    if (dev == nullptr || cq->driver == nullptr) {
        free_cq(cq);
        return {};
    }
    ContextState& context = *cq->context;
    const driver::ControlToken token = context.token(request_id, ControlOp::destroy_cq);
    track(context, token, cq);
    Status status = dev->config.ops->destroy_cq(*dev, cq->driver, token);
    if (status.code() == StatusCode::pending) {
        return status;
    }
    untrack(context, token);
    if (!status.ok()) {
        // The class has checked the CQ is idle; the driver's object is gone either way.
        RDMADEV_LOG(WARNING, "destroy_cq: %s", status.error().to_string().c_str());
    }
    free_cq(cq);
    return {};
}

Status destroy_qp_object(QpObject* qp, std::uint64_t request_id) {
    driver::Device* dev = live_device(*qp->context);
    if (dev == nullptr || qp->driver == nullptr) {
        free_qp(qp);
        return {};
    }
    ContextState& context = *qp->context;
    const driver::ControlToken token = context.token(request_id, ControlOp::destroy_qp, qp->qpn);
    qp->destroying = true;
    track(context, token, qp);
    Status status = dev->config.ops->destroy_qp(*dev, qp->driver, token);
    if (status.code() == StatusCode::pending) {
        return status; // the context frees it when the driver completes
    }
    untrack(context, token);
    // Freed whatever the driver said: the driver's object is gone either way.
    free_qp(qp);
    return status;
}

Status release_mr_object(MrObject* mr, std::uint64_t request_id) {
    ContextState& context = *mr->context;
    // The device may be removed; its class-owned registry lives until the last context closes.
    driver::Device* dev = driver::device(context.device);
    if (dev == nullptr || mr->region == nullptr) {
        free_mr(mr);
        return {};
    }
    mem::MemoryRegistry& registry = *dev->registry;
    if (dev->removed || dev->config.ops->deregister_mr == nullptr) {
        Status status = registry.deregister(mr->region);
        free_mr(mr);
        return status;
    }
    bool last = false;
    Status retired = registry.retire(mr->region, last);
    if (!retired.ok() || !last) {
        // Failed, or other handles still hold the region: its key stays, nothing to wait for.
        free_mr(mr);
        return retired;
    }
    const driver::ControlToken token = context.token(request_id, ControlOp::deregister_mr);
    track(context, token, mr);
    Status status = dev->config.ops->deregister_mr(*dev, *mr->region, token);
    if (status.code() == StatusCode::pending) {
        return status; // the key is dead; the table goes when the driver completes
    }
    untrack(context, token);
    registry.reclaim(mr->region);
    free_mr(mr);
    return status;
}

namespace {

void finish_create_cq(CqObject* cq, StatusCode status) {
    cq->creating = false;
    if (status != StatusCode::ok) {
        cq->driver = nullptr; // the driver has dropped its object
    }
    if (cq->handle_dropped) {
        (void)destroy_cq_object(cq, 0);
    }
}

void finish_create_qp(QpObject* qp, const driver::ControlToken& token, StatusCode status) {
    qp->creating = false;
    if (qp->qpn == 0 && token.qpn != 0) {
        qp->qpn = token.qpn;
        qp->context->qps.emplace(qp->qpn, qp);
    }
    if (status != StatusCode::ok) {
        qp->driver = nullptr;
    }
    if (qp->handle_dropped) {
        (void)destroy_qp_object(qp, 0);
    }
}

void finish_register(MrObject* mr, StatusCode status) {
    mr->creating = false;
    if (status != StatusCode::ok) {
        if (driver::Device* dev = driver::device(mr->context->device); dev != nullptr) {
            (void)dev->registry->deregister(mr->region);
        }
        mr->region = nullptr;
    }
    if (mr->handle_dropped) {
        (void)release_mr_object(mr, 0);
    }
}

void finish_deregister(MrObject* mr) {
    if (driver::Device* dev = driver::device(mr->context->device); dev != nullptr) {
        dev->registry->reclaim(mr->region);
    }
    free_mr(mr);
}

} // namespace

void finish_request(ContextState& context, const driver::ControlToken& token, StatusCode status) {
    auto it = context.pending.find(token.serial);
    if (it == context.pending.end()) {
        return;
    }
    void* object = it->second.object;
    const ControlOp op = it->second.token.op;
    context.pending.erase(it);
    switch (op) {
    case ControlOp::create_cq:
        finish_create_cq(static_cast<CqObject*>(object), status);
        break;
    case ControlOp::destroy_cq:
        free_cq(static_cast<CqObject*>(object));
        break;
    case ControlOp::create_qp:
        finish_create_qp(static_cast<QpObject*>(object), token, status);
        break;
    case ControlOp::modify_qp:
        // The driver applied it to the QP's attributes; the request it read is no longer needed.
        static_cast<QpObject*>(object)->pending_modify.reset();
        break;
    case ControlOp::destroy_qp:
        free_qp(static_cast<QpObject*>(object));
        break;
    case ControlOp::register_mr:
        finish_register(static_cast<MrObject*>(object), status);
        break;
    case ControlOp::deregister_mr:
        finish_deregister(static_cast<MrObject*>(object));
        break;
    case ControlOp::create_ah:
        finish_create_ah(static_cast<AhObject*>(object), status);
        break;
    case ControlOp::open_context:
    case ControlOp::close_context:
        break;
    }
}

} // namespace detail

namespace driver {

void merge_qp_attr(QpAttr& current, const QpAttr& attr, QpAttrMask mask) {
    if (mask.has(qp_attr_access_flags)) {
        current.access = attr.access;
    }
    if (mask.has(qp_attr_port)) {
        current.port = attr.port;
    }
    if (mask.has(qp_attr_path_mtu)) {
        current.path_mtu = attr.path_mtu;
    }
    if (mask.has(qp_attr_dest)) {
        current.dest_gid = attr.dest_gid;
        current.dest_mac = attr.dest_mac;
    }
    if (mask.has(qp_attr_dest_qpn)) {
        current.dest_qpn = attr.dest_qpn;
    }
    if (mask.has(qp_attr_rq_psn)) {
        current.rq_psn = attr.rq_psn;
    }
    if (mask.has(qp_attr_sq_psn)) {
        current.sq_psn = attr.sq_psn;
    }
    if (mask.has(qp_attr_timeout)) {
        current.timeout = attr.timeout;
    }
    if (mask.has(qp_attr_retry_cnt)) {
        current.retry_cnt = attr.retry_cnt;
    }
    if (mask.has(qp_attr_rnr_retry)) {
        current.rnr_retry = attr.rnr_retry;
    }
    if (mask.has(qp_attr_min_rnr_timer)) {
        current.min_rnr_timer = attr.min_rnr_timer;
    }
    if (mask.has(qp_attr_max_rd_atomic)) {
        current.max_rd_atomic = attr.max_rd_atomic;
    }
    if (mask.has(qp_attr_qkey)) {
        current.qkey = attr.qkey;
    }
    if (mask.has(qp_attr_selective_repeat)) {
        current.selective_repeat = attr.selective_repeat;
    }
    if (mask.has(qp_attr_max_dest_rd_atomic)) {
        current.max_dest_rd_atomic = attr.max_dest_rd_atomic;
    }
    // The state is not configuration: the driver keeps it (DeviceOps::qp_state).
}

} // namespace driver

Error detail::not_ready(const char* what, bool creating) {
    return creating ? Error(StatusCode::busy,
                            strformat("the %s's creation is still pending; poll_control until it "
                                      "completes",
                                      what))
                    : Error(StatusCode::invalid_parameter,
                            strformat("the %s's creation failed; destroy the handle", what));
}

} // namespace prdma::rdma
