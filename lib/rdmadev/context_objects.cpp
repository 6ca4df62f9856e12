// Context: PDs, CQs and QPs are created here, against the device's limits and the context's
// state (closed, device removed), and may pend as the top of rdmadev.hpp says.
#include <cstring>

#include <prdma/format.hpp>

#include "objects.hpp"
#include "qp_state_machine.hpp"
#include "rdmadev_log.hpp"

namespace prdma::rdma {

using detail::ContextState;
using detail::CqObject;
using detail::PdObject;
using detail::QpObject;
using detail::SrqObject;

// ---- Context: object creation -----------------------------------------------------------------

namespace {

void append(std::string& list, std::string_view item, std::string_view separator) {
    if (!list.empty()) {
        list += separator;
    }
    list += item;
}

// Names every cap that is zero or above its device limit, so the caller can fix them all at once.
Status check_qp_caps(const QpCaps& caps, const DeviceAttr& attr) {
    struct Limit {
        const char* name;
        std::uint32_t value;
        const char* device_name;
        std::uint32_t device_max;
        bool may_be_zero;
    };
    const Limit limits[] = {
        {"max_send_wr", caps.max_send_wr, "max_qp_wr", attr.max_qp_wr, false},
        {"max_recv_wr", caps.max_recv_wr, "max_qp_wr", attr.max_qp_wr, false},
        {"max_send_sge", caps.max_send_sge, "max_sge", attr.max_sge, false},
        {"max_recv_sge", caps.max_recv_sge, "max_sge", attr.max_sge, false},
        {"max_inline_data", caps.max_inline_data, "max_inline_data", attr.max_inline_data, true},
    };
    std::string zero;
    unsigned zeros = 0;
    std::string over;
    for (const Limit& limit : limits) {
        if (limit.value == 0 && !limit.may_be_zero) {
            append(zero, limit.name, ", ");
            ++zeros;
        } else if (limit.value > limit.device_max) {
            append(over,
                   strformat("%s %u exceeds the device's %s %u", limit.name, limit.value,
                             limit.device_name, limit.device_max),
                   "; ");
        }
    }
    std::string message;
    if (zeros == 1) {
        message = "QP cap " + zero + " is 0; it must be at least 1";
    } else if (zeros > 1) {
        message = "QP caps " + zero + " are 0; each must be at least 1";
    }
    if (!over.empty()) {
        append(message, "QP caps: " + over, "; ");
    }
    if (message.empty()) {
        return {};
    }
    return Error(StatusCode::invalid_parameter, message);
}

} // namespace

Status Context::check_qp_parts(const QpInitAttr& init, const ContextState& context) {
    const PdObject* pd = init.pd != nullptr ? init.pd->pd_ : nullptr;
    const CqObject* send_cq = init.send_cq != nullptr ? init.send_cq->cq_ : nullptr;
    const CqObject* recv_cq = init.recv_cq != nullptr ? init.recv_cq->cq_ : nullptr;
    if (pd == nullptr || send_cq == nullptr || recv_cq == nullptr) {
        std::string missing;
        if (pd == nullptr) {
            append(missing, "PD", ", ");
        }
        if (send_cq == nullptr) {
            append(missing, "send CQ", ", ");
        }
        if (recv_cq == nullptr) {
            append(missing, "receive CQ", ", ");
        }
        return Error(StatusCode::invalid_parameter,
                     "a QP needs a PD, a send CQ and a receive CQ; missing: " + missing);
    }
    std::string foreign;
    if (pd->context.get() != &context) {
        append(foreign, "PD", ", ");
    }
    if (send_cq->context.get() != &context) {
        append(foreign, "send CQ", ", ");
    }
    if (recv_cq->context.get() != &context) {
        append(foreign, "receive CQ", ", ");
    }
    if (init.srq != nullptr && init.srq->srq_ != nullptr &&
        init.srq->srq_->context.get() != &context) {
        append(foreign, "SRQ", ", ");
    }
    if (!foreign.empty()) {
        return Error(StatusCode::invalid_parameter,
                     "the " + foreign + " of a QP must belong to the context that creates it");
    }
    return {};
}

Result<ProtectionDomain> Context::alloc_pd() {
    if (!state_) {
        return detail::context_closed_error();
    }
    if (detail::live_device(*state_) == nullptr) {
        return detail::device_removed_error(state_->device);
    }
    auto pd = std::make_unique<PdObject>();
    // Unique across contexts and devices: a key check compares PD ids of different clients.
    static std::uint32_t next_pd_id = 1;
    pd->id = next_pd_id++;
    pd->context = state_;
    ++state_->resources.pds;
    return ProtectionDomain(pd.release());
}

Result<CompletionQueue> Context::create_cq(std::uint32_t cqe, std::uint16_t queue_group,
                                           std::uint64_t request_id, int event_fd) {
    return detail::handle_or_error<CompletionQueue>(
        [&](CompletionQueue& cq) { return make_cq(cq, cqe, queue_group, request_id, event_fd); });
}

Status Context::make_cq(CompletionQueue& out, std::uint32_t cqe, std::uint16_t queue_group,
                        std::uint64_t request_id, int event_fd) {
    if (!state_) {
        return detail::context_closed_error();
    }
    driver::Device* dev = detail::live_device(*state_);
    if (dev == nullptr) {
        return detail::device_removed_error(state_->device);
    }
    const DeviceAttr& attr = dev->config.attr;
    if (cqe == 0 || cqe > attr.max_cqe) {
        return Error(StatusCode::invalid_parameter,
                     strformat("CQ size %u outside 1..%u", cqe, attr.max_cqe));
    }
    if (event_fd >= 0 && dev->config.fast_path.arm_cq == nullptr) {
        return Error(StatusCode::not_supported,
                     strformat("%s raises no completion events", dev->config.name.c_str()));
    }
    if (queue_group >= attr.max_queue_groups) {
        return Error(StatusCode::invalid_parameter,
                     strformat("queue group %u does not exist; the device has %u (devarg queues=)",
                               queue_group, attr.max_queue_groups));
    }
    auto cq = std::make_unique<CqObject>();
    cq->context = state_;
    cq->cqe = cqe;
    cq->queue_group = queue_group;
    const driver::ControlToken token =
        state_->token(request_id, ControlOp::create_cq, 0, request_id != 0);
    detail::track(*state_, token, cq.get());
    void* driver_cq = nullptr;
    Status status = dev->config.ops->create_cq(*dev, driver::CqInit{cqe, queue_group, event_fd},
                                               token, &driver_cq);
    const bool pending = status.code() == StatusCode::pending;
    if (!pending) {
        detail::untrack(*state_, token);
        if (!status.ok()) {
            return status;
        }
    }
    cq->driver = driver_cq;
    cq->creating = pending;
    ++state_->resources.cqs;
    out = CompletionQueue(cq.release());
    return status;
}

Result<QueuePair> Context::create_qp(const QpInitAttr& init, std::uint64_t request_id) {
    return detail::handle_or_error<QueuePair>(
        [&](QueuePair& qp) { return make_qp(qp, init, request_id); });
}

Status Context::make_qp(QueuePair& out, const QpInitAttr& init, std::uint64_t request_id) {
    if (!state_) {
        return detail::context_closed_error();
    }
    driver::Device* dev = detail::live_device(*state_);
    if (dev == nullptr) {
        return detail::device_removed_error(state_->device);
    }
    if (Status parts = check_qp_parts(init, *state_); !parts.ok()) {
        return parts;
    }
    if (init.type != QpType::rc && init.type != QpType::ud) {
        return Error(StatusCode::invalid_parameter, strformat("QP type %u: RC (2) and UD (4) exist",
                                                              static_cast<unsigned>(init.type)));
    }
    if (init.type == QpType::ud && !detail::device_attr(*dev).capability_flags.has(cap_ud)) {
        return Error(StatusCode::not_supported,
                     strformat("%s has no unreliable datagrams", dev->config.name.c_str()));
    }
    PdObject* pd = init.pd->pd_;
    CqObject* send_cq = init.send_cq->cq_;
    CqObject* recv_cq = init.recv_cq->cq_;
    for (const CqObject* cq : {send_cq, recv_cq}) {
        if (cq->creating || cq->driver == nullptr) {
            return detail::not_ready("CQ", cq->creating);
        }
    }
    if (send_cq->queue_group != recv_cq->queue_group) {
        return Error(StatusCode::invalid_parameter,
                     strformat("send CQ (group %u) and receive CQ (group %u) must share a queue "
                               "group: a QP is polled by one lcore",
                               send_cq->queue_group, recv_cq->queue_group));
    }
    SrqObject* srq = init.srq != nullptr ? init.srq->srq_ : nullptr;
    if (init.srq != nullptr && srq == nullptr) {
        return Error(StatusCode::invalid_parameter, "the QP's SRQ handle is empty");
    }
    if (srq != nullptr && srq->queue_group != any_queue_group &&
        srq->queue_group != send_cq->queue_group) {
        return Error(StatusCode::invalid_parameter,
                     strformat("an SRQ of queue group %u serves QPs of that group; this QP's CQs "
                               "are in group %u (create the SRQ for any_queue_group to share it)",
                               srq->queue_group, send_cq->queue_group));
    }
    QpCaps caps = init.caps;
    if (srq != nullptr) {
        caps.max_recv_wr = 1; // its own receive queue is never used: room for nothing more
        caps.max_recv_sge = 1;
    }
    if (Status checked = check_qp_caps(caps, dev->config.attr); !checked.ok()) {
        return checked;
    }
    driver::QpInit qp_init;
    qp_init.type = init.type;
    qp_init.pd = pd->id;
    qp_init.send_cq = send_cq->driver;
    qp_init.recv_cq = recv_cq->driver;
    qp_init.queue_group = send_cq->queue_group;
    qp_init.caps = caps;
    qp_init.signal_all = init.signal_all;
    qp_init.srq = srq != nullptr ? srq->driver : nullptr;
    auto qp = std::make_unique<QpObject>();
    qp_init.attr = &qp->attr;
    const driver::ControlToken token =
        state_->token(request_id, ControlOp::create_qp, 0, request_id != 0);
    detail::track(*state_, token, qp.get());
    driver::QpCreated created;
    Status status = dev->config.ops->create_qp(*dev, qp_init, token, created);
    const bool pending = status.code() == StatusCode::pending;
    if (!pending) {
        detail::untrack(*state_, token);
        if (!status.ok()) {
            return status;
        }
    }
    qp->context = state_;
    qp->pd = pd;
    qp->send_cq = send_cq;
    qp->recv_cq = recv_cq;
    qp->driver = created.queue;
    qp->qpn = created.qpn; // a driver may assign it only when a pending create completes
    qp->type = init.type;
    qp->caps = caps;
    qp->creating = pending;
    qp->srq = srq;
    if (srq != nullptr) {
        ++srq->qps;
    }
    ++pd->qps;
    ++send_cq->qps;
    if (recv_cq != send_cq) {
        ++recv_cq->qps;
    }
    ++state_->resources.qps;
    if (qp->qpn != 0) {
        state_->qps.emplace(qp->qpn, qp.get());
    }
    out = QueuePair(qp.release());
    return status;
}

} // namespace prdma::rdma
