// Shared receive queues: ibv_create_srq, ibv_modify_srq (the limit and the size), ibv_query_srq and
// ibv_destroy_srq on prdma's SharedReceiveQueue; ibv_post_srq_recv is on the data path
// (verbs_datapath.cpp) and the limit event comes through the context's async events.
#include <cerrno>
#include <optional>

#include <prdma/format.hpp>

#include "verbs_shim.hpp"

namespace prdma::verbs {
namespace {

// What the SRQ is asked for, as rxe takes it: at least one SGE, and a size the device has.
Result<rdma::SrqCaps> caps_of(const ibv_srq_attr& attr) {
    if (attr.max_wr == 0) {
        return Error(StatusCode::invalid_parameter, "an SRQ of 0 receive WRs");
    }
    return rdma::SrqCaps{.max_wr = attr.max_wr, .max_sge = attr.max_sge > 0 ? attr.max_sge : 1U};
}

Result<std::unique_ptr<ShimSrq>> make_srq(ShimContext& context, ibv_pd* pd,
                                          const ibv_srq_init_attr& init) {
    Result<rdma::SrqCaps> caps = caps_of(init.attr);
    if (!caps.ok()) {
        return caps.error();
    }
    // Queue group 0, where the shim makes every CQ (an SRQ's QPs must share its group).
    Result<rdma::SharedReceiveQueue> srq =
        context.context.create_srq(shim_of<ShimPd>(pd).handle, caps.value(), 0);
    if (!srq.ok()) {
        return srq.error();
    }
    auto made = std::make_unique<ShimSrq>();
    made->handle = keep(std::make_unique<rdma::SharedReceiveQueue>(std::move(srq.value())));
    return made;
}

ibv_srq* create_srq(ibv_pd* pd, ibv_srq_init_attr* init) {
    constexpr const char* verb = "ibv_create_srq";
    if (pd == nullptr || init == nullptr) {
        refuse(verb, EINVAL, "no PD or no attributes");
        return nullptr;
    }
    ShimContext& context = shim_context(pd->context);
    ContextHold hold(context, verb);
    if (!hold) {
        return nullptr;
    }
    const std::lock_guard lock(context.control_mutex());
    Result<std::unique_ptr<ShimSrq>> made = make_srq(context, pd, *init);
    if (!made.ok()) {
        refuse(verb, errno_of(made.error().code()), made.error().message());
        return nullptr;
    }
    ibv_srq& srq = made.value()->srq;
    srq.context = pd->context;
    srq.srq_context = init->srq_context;
    srq.pd = pd;
    srq.handle = made.value()->handle->srqn();
    pthread_mutex_init(&srq.mutex, nullptr);
    pthread_cond_init(&srq.cond, nullptr);
    watch_srq_events(context, &srq);
    // What the SRQ got, as verbs reports it (max_wr rounded up to what its ring holds).
    const rdma::SrqCaps got = made.value()->handle->caps();
    init->attr.max_wr = got.max_wr;
    init->attr.max_sge = got.max_sge;
    hold.keep();
    return &made.value().release()->srq; // the caller's until ibv_destroy_srq
}

int modify_srq(ibv_srq* srq, const ibv_srq_attr& attr, int mask) {
    constexpr const char* verb = "ibv_modify_srq";
    if ((mask & ~(IBV_SRQ_MAX_WR | IBV_SRQ_LIMIT)) != 0) {
        refuse(verb, EINVAL,
               strformat("attribute mask bits 0x%x are not SRQ attributes",
                         mask & ~(IBV_SRQ_MAX_WR | IBV_SRQ_LIMIT)));
        return errno;
    }
    auto& shim = shim_of<ShimSrq>(srq);
    ShimContext& context = shim_context(srq->context);
    // The resize takes the producer's place: no post runs beside it.
    const std::scoped_lock lock(shim.post_mutex, context.control_mutex());
    rdma::SharedReceiveQueue& handle = *shim.handle;
    const bool resize = (mask & IBV_SRQ_MAX_WR) != 0;
    const bool arm = (mask & IBV_SRQ_LIMIT) != 0;
    // Both at once are one resize, the new limit checked against the new size before either is
    // applied, as rxe does.
    const Status status =
        resize ? handle.resize(attr.max_wr, arm ? std::optional(attr.srq_limit) : std::nullopt)
        : arm  ? handle.arm_limit(attr.srq_limit)
               : Status{};
    if (!status.ok()) {
        refuse(verb, errno_of(status.error().code()), status.error().message());
        return errno;
    }
    return 0;
}

} // namespace
} // namespace prdma::verbs

using prdma::verbs::refuse;
using prdma::verbs::shim_of;
using prdma::verbs::ShimContext;
using prdma::verbs::ShimSrq;

extern "C" {

ibv_srq* ibv_create_srq(ibv_pd* pd, ibv_srq_init_attr* srq_init_attr) {
    return prdma::verbs::create_srq(pd, srq_init_attr);
}

int ibv_modify_srq(ibv_srq* srq, ibv_srq_attr* srq_attr, int srq_attr_mask) {
    if (srq == nullptr || srq_attr == nullptr) {
        return EINVAL;
    }
    return prdma::verbs::modify_srq(srq, *srq_attr, srq_attr_mask);
}

int ibv_query_srq(ibv_srq* srq, ibv_srq_attr* srq_attr) {
    if (srq == nullptr || srq_attr == nullptr) {
        return EINVAL;
    }
    const prdma::rdma::SharedReceiveQueue& handle = *shim_of<ShimSrq>(srq).handle;
    ShimContext& context = prdma::verbs::shim_context(srq->context);
    const std::lock_guard lock(context.control_mutex());
    prdma::Result<std::uint32_t> limit = handle.limit();
    if (!limit.ok()) {
        refuse("ibv_query_srq", prdma::verbs::errno_of(limit.error().code()),
               limit.error().message());
        return errno;
    }
    *srq_attr = {};
    srq_attr->max_wr = handle.caps().max_wr;
    srq_attr->max_sge = handle.caps().max_sge;
    srq_attr->srq_limit = limit.value();
    return 0;
}

int ibv_destroy_srq(ibv_srq* srq) {
    if (srq == nullptr) {
        return EINVAL;
    }
    auto& shim = shim_of<ShimSrq>(srq);
    ShimContext& context = prdma::verbs::shim_context(srq->context);
    std::uint32_t reported = 0;
    {
        const std::lock_guard lock(context.control_mutex());
        if (prdma::Status destroyed = shim.handle->destroy(); !destroyed.ok()) {
            refuse("ibv_destroy_srq", prdma::verbs::errno_of(destroyed.error().code()),
                   destroyed.error().message());
            return errno; // still the caller's: its QPs are alive
        }
        reported = prdma::verbs::forget_srq_events(context, srq);
    }
    prdma::verbs::release_kept(shim.handle);
    prdma::verbs::wait_srq_acks(srq, reported);
    pthread_cond_destroy(&srq->cond);
    pthread_mutex_destroy(&srq->mutex);
    const std::unique_ptr<ShimSrq> gone(&shim);
    prdma::verbs::release_context(context);
    return 0;
}

} // extern "C"
