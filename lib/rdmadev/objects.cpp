// PDs, CQs, QPs and MRs: the generic rules (limits, busy, states, device removed, pending requests)
// live here; the driver does what is device-specific through its ops.
#include "objects.hpp"

#include <cstring>

#include <prdma/format.hpp>
#include <prdma/mem/dma_memory.hpp>

#include "qp_state_machine.hpp"
#include "rdmadev_log.hpp"

namespace prdma::rdma {

using detail::ContextState;
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

// Records a request the driver is about to see, so a completion (even one made before the driver
// returns) finds its object; forgotten again unless the driver says pending.
void track(ContextState& context, const driver::ControlToken& token, void* object) {
    context.pending.insert_or_assign(token.serial, PendingRequest{token, object});
}
void untrack(ContextState& context, const driver::ControlToken& token) {
    context.pending.erase(token.serial);
}

} // namespace

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
    case ControlOp::modify_qp: {
        auto* qp = static_cast<QpObject*>(object);
        if (status == StatusCode::ok && qp->pending_modify) {
            driver::merge_qp_attr(qp->attr, qp->pending_modify->first, qp->pending_modify->second);
        }
        qp->pending_modify.reset();
        break;
    }
    case ControlOp::destroy_qp:
        free_qp(static_cast<QpObject*>(object));
        break;
    case ControlOp::register_mr:
        finish_register(static_cast<MrObject*>(object), status);
        break;
    case ControlOp::deregister_mr:
        finish_deregister(static_cast<MrObject*>(object));
        break;
    case ControlOp::open_context:
    case ControlOp::close_context:
        break;
    }
}

} // namespace detail

namespace driver {

void merge_qp_attr(QpAttr& current, const QpAttr& attr, std::uint32_t mask) {
    if ((mask & qp_attr_access_flags) != 0) {
        current.access = attr.access;
    }
    if ((mask & qp_attr_port) != 0) {
        current.port = attr.port;
    }
    if ((mask & qp_attr_path_mtu) != 0) {
        current.path_mtu = attr.path_mtu;
    }
    if ((mask & qp_attr_dest) != 0) {
        current.dest_gid = attr.dest_gid;
        current.dest_mac = attr.dest_mac;
    }
    if ((mask & qp_attr_dest_qpn) != 0) {
        current.dest_qpn = attr.dest_qpn;
    }
    if ((mask & qp_attr_rq_psn) != 0) {
        current.rq_psn = attr.rq_psn;
    }
    if ((mask & qp_attr_sq_psn) != 0) {
        current.sq_psn = attr.sq_psn;
    }
    if ((mask & qp_attr_timeout) != 0) {
        current.timeout = attr.timeout;
    }
    if ((mask & qp_attr_retry_cnt) != 0) {
        current.retry_cnt = attr.retry_cnt;
    }
    if ((mask & qp_attr_rnr_retry) != 0) {
        current.rnr_retry = attr.rnr_retry;
    }
    if ((mask & qp_attr_min_rnr_timer) != 0) {
        current.min_rnr_timer = attr.min_rnr_timer;
    }
    if ((mask & qp_attr_max_rd_atomic) != 0) {
        current.max_rd_atomic = attr.max_rd_atomic;
    }
    if ((mask & qp_attr_max_dest_rd_atomic) != 0) {
        current.max_dest_rd_atomic = attr.max_dest_rd_atomic;
    }
    if ((mask & qp_attr_state) != 0) {
        current.state = attr.state;
        current.cur_state = attr.state;
    }
}

} // namespace driver

namespace {

Error removed(const ContextState& context) {
    return detail::device_removed_error(context.device);
}

// The device a registration on `pd` goes to, or why there is none.
Result<driver::Device*> registering_device(const PdObject* pd) {
    if (pd == nullptr) {
        return Error(StatusCode::invalid_parameter, "the PD is not allocated");
    }
    driver::Device* dev = detail::live_device(*pd->context);
    if (dev == nullptr) {
        return removed(*pd->context);
    }
    return dev;
}

// A handle from what fills it (`make`): the object, ready or pending, or the error. Only a call
// with a request id may pend.
template <typename Handle, typename Make>
Result<Handle> handle_or_error(Make make) {
    Handle handle;
    if (Status status = make(handle); !status.ok() && status.code() != StatusCode::pending) {
        return status.error();
    }
    return handle;
}

// Seed 002: exactly one of MEM_READ, MEM_WRITE, MEM_READWRITE; anything else is invalid flags.
Status check_wsp_access(mem::WspAccess access) {
    const auto raw = static_cast<unsigned>(access);
    const auto known = static_cast<unsigned>(mem::WspAccess::read_write);
    if ((raw & ~known) != 0) {
        return Error(StatusCode::invalid_parameter,
                     strformat("WSP access 0x%x has unknown bits 0x%x; use read (0x1), write (0x2) "
                               "or read_write (0x3)",
                               raw, raw & ~known));
    }
    if (raw == 0) {
        return Error(StatusCode::invalid_parameter,
                     "WSP access 0x0 grants nothing; use read (0x1), write (0x2) or read_write "
                     "(0x3)");
    }
    return {};
}

Error not_ready(const char* what, bool creating) {
    return creating ? Error(StatusCode::busy,
                            strformat("the %s's creation is still pending; poll_control until it "
                                      "completes",
                                      what))
                    : Error(StatusCode::invalid_parameter,
                            strformat("the %s's creation failed; destroy the handle", what));
}

} // namespace

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
        return removed(*state_);
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
                                           std::uint64_t request_id) {
    return handle_or_error<CompletionQueue>(
        [&](CompletionQueue& cq) { return make_cq(cq, cqe, queue_group, request_id); });
}

Status Context::make_cq(CompletionQueue& out, std::uint32_t cqe, std::uint16_t queue_group,
                        std::uint64_t request_id) {
    if (!state_) {
        return detail::context_closed_error();
    }
    driver::Device* dev = detail::live_device(*state_);
    if (dev == nullptr) {
        return removed(*state_);
    }
    const DeviceAttr& attr = dev->config.attr;
    if (cqe == 0 || cqe > attr.max_cqe) {
        return Error(StatusCode::invalid_parameter,
                     strformat("CQ size %u outside 1..%u", cqe, attr.max_cqe));
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
    Status status =
        dev->config.ops->create_cq(*dev, driver::CqInit{cqe, queue_group}, token, &driver_cq);
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
    return handle_or_error<QueuePair>([&](QueuePair& qp) { return make_qp(qp, init, request_id); });
}

Status Context::make_qp(QueuePair& out, const QpInitAttr& init, std::uint64_t request_id) {
    if (!state_) {
        return detail::context_closed_error();
    }
    driver::Device* dev = detail::live_device(*state_);
    if (dev == nullptr) {
        return removed(*state_);
    }
    if (Status parts = check_qp_parts(init, *state_); !parts.ok()) {
        return parts;
    }
    PdObject* pd = init.pd->pd_;
    CqObject* send_cq = init.send_cq->cq_;
    CqObject* recv_cq = init.recv_cq->cq_;
    for (const CqObject* cq : {send_cq, recv_cq}) {
        if (cq->creating || cq->driver == nullptr) {
            return not_ready("CQ", cq->creating);
        }
    }
    if (send_cq->queue_group != recv_cq->queue_group) {
        return Error(StatusCode::invalid_parameter,
                     strformat("send CQ (group %u) and receive CQ (group %u) must share a queue "
                               "group: a QP is polled by one lcore",
                               send_cq->queue_group, recv_cq->queue_group));
    }
    const QpCaps& caps = init.caps;
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
    auto qp = std::make_unique<QpObject>();
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

// ---- ProtectionDomain -------------------------------------------------------------------------

ProtectionDomain::ProtectionDomain(ProtectionDomain&& other) noexcept
    : pd_(std::exchange(other.pd_, nullptr)) {}
ProtectionDomain& ProtectionDomain::operator=(ProtectionDomain&& other) noexcept {
    if (this != &other) {
        release();
        pd_ = std::exchange(other.pd_, nullptr);
    }
    return *this;
}
ProtectionDomain::~ProtectionDomain() {
    release();
}

void ProtectionDomain::release() noexcept {
    if (pd_ != nullptr && !destroy().ok()) {
        // Children still live: the PD goes with the last of them.
        std::exchange(pd_, nullptr)->handle_dropped = true;
    }
}

std::uint32_t ProtectionDomain::id() const {
    return pd_ != nullptr ? pd_->id : 0;
}

Status ProtectionDomain::destroy() {
    if (pd_ == nullptr) {
        return {};
    }
    if (pd_->has_children()) {
        return Error(StatusCode::busy,
                     strformat("PD %u still has %u QPs, %u MRs and %u registration caches", pd_->id,
                               pd_->qps, pd_->mrs, pd_->caches));
    }
    std::unique_ptr<PdObject> owned(std::exchange(pd_, nullptr));
    --owned->context->resources.pds;
    return {};
}

Status ProtectionDomain::adopt(Result<mem::MemoryRegion*> region, std::uint64_t request_id,
                               MemoryRegionHandle& out) {
    return adopt(*pd_, std::move(region), request_id, out);
}

Status ProtectionDomain::adopt(PdObject& pd, Result<mem::MemoryRegion*> region,
                               std::uint64_t request_id, MemoryRegionHandle& out) {
    if (!region) {
        return region.error();
    }
    ContextState& context = *pd.context;
    auto mr = std::make_unique<MrObject>();
    mr->context = pd.context;
    mr->pd = &pd;
    mr->region = region.value();
    ++pd.mrs;
    ++context.resources.mrs;
    driver::Device* dev = detail::live_device(context);
    // Only a new region is news to the device; another reference to a known one is not.
    if (dev != nullptr && dev->config.ops->register_mr != nullptr &&
        region.value()->references() == 1) {
        const driver::ControlToken token =
            context.token(request_id, ControlOp::register_mr, 0, request_id != 0);
        detail::track(context, token, mr.get());
        Status status = dev->config.ops->register_mr(*dev, *region.value(), token);
        if (status.code() == StatusCode::pending) {
            mr->creating = true;
            out = MemoryRegionHandle(mr.release());
            return status;
        }
        detail::untrack(context, token);
        if (!status.ok()) {
            (void)dev->registry->deregister(region.value());
            mr->region = nullptr;
            (void)detail::release_mr_object(mr.release(), 0);
            return status;
        }
    }
    out = MemoryRegionHandle(mr.release());
    return {};
}

Status ProtectionDomain::register_pages(MemoryRegionHandle& out, const void* addr,
                                        std::size_t length, AccessFlags access,
                                        std::uint64_t request_id) {
    auto device = registering_device(pd_);
    if (!device) {
        return device.error();
    }
    driver::Device* dev = device.value();
    mem::PageList pages;
    const mem::PageListError error = mem::build_dma_page_list(addr, length, pages);
    if (error != mem::PageListError::ok) {
        return mem::page_list_error(error, "register_memory");
    }
    return adopt(dev->registry->register_pages(pd_->id, pages, access), request_id, out);
}

Result<MemoryRegionHandle> ProtectionDomain::register_memory(const void* addr, std::size_t length,
                                                             AccessFlags access,
                                                             std::uint64_t request_id) {
    return handle_or_error<MemoryRegionHandle>([&](MemoryRegionHandle& handle) {
        return register_pages(handle, addr, length, access, request_id);
    });
}

Status ProtectionDomain::connection_region(MemoryRegionHandle& out, const QueuePair& qp,
                                           const void* addr, std::size_t length,
                                           mem::WspAccess access, std::uint64_t request_id) {
    if (pd_ == nullptr || !qp) {
        return Error(StatusCode::invalid_parameter, "the PD or the QP is not allocated");
    }
    if (Status flags = check_wsp_access(access); !flags.ok()) {
        return flags;
    }
    driver::Device* dev = detail::live_device(*pd_->context);
    if (dev == nullptr) {
        return removed(*pd_->context);
    }
    if (qp.qp_->pd != pd_) {
        return Error(StatusCode::invalid_parameter, "the QP belongs to another PD");
    }
    if (dev->config.ops->qp_connection == nullptr) {
        return Error(StatusCode::not_supported, "the device has no connection-bound regions");
    }
    // The driver's connection, not the class's copy of the state: the engine may have moved the
    // QP to ERR on its own since the last modify.
    const mem::ConnectionId connection = dev->config.ops->qp_connection(*dev, qp.qp_->driver);
    const QpState state = qp.qp_->attr.state;
    if (connection == mem::no_connection || (state != QpState::rtr && state != QpState::rts)) {
        return Error(StatusCode::not_connected,
                     strformat("QP %u is not connected (%s): seed 002 registers memory for a "
                               "connected socket only",
                               qp.qp_->qpn, std::string(qp_state_name(state)).c_str()));
    }
    mem::PageList pages;
    const mem::PageListError error = mem::build_dma_page_list(addr, length, pages);
    if (error != mem::PageListError::ok) {
        return mem::page_list_error(error, "register_for_connection");
    }
    return adopt(dev->registry->register_pages(pd_->id, pages, mem::access_from_wsp(access),
                                               mem::RegionKind::virtual_range, connection),
                 request_id, out);
}

Result<MemoryRegionHandle>
ProtectionDomain::register_for_connection(const QueuePair& qp, const void* addr, std::size_t length,
                                          mem::WspAccess access, std::uint64_t request_id) {
    return handle_or_error<MemoryRegionHandle>([&](MemoryRegionHandle& handle) {
        return connection_region(handle, qp, addr, length, access, request_id);
    });
}

Status ProtectionDomain::sgl_region(MemoryRegionHandle& out, std::span<const mem::SglElement> sgl,
                                    unsigned page_shift, AccessFlags access,
                                    std::uint64_t request_id) {
    auto device = registering_device(pd_);
    if (!device) {
        return device.error();
    }
    driver::Device* dev = device.value();
    return adopt(dev->registry->register_sgl(pd_->id, sgl, page_shift, access), request_id, out);
}

Result<MemoryRegionHandle> ProtectionDomain::register_sgl(std::span<const mem::SglElement> sgl,
                                                          unsigned page_shift, AccessFlags access,
                                                          std::uint64_t request_id) {
    return handle_or_error<MemoryRegionHandle>([&](MemoryRegionHandle& handle) {
        return sgl_region(handle, sgl, page_shift, access, request_id);
    });
}

Status ProtectionDomain::virtual_region(MemoryRegionHandle& out,
                                        std::span<const mem::VirtualPiece> pieces,
                                        unsigned page_shift, AccessFlags access,
                                        std::uint64_t request_id) {
    auto device = registering_device(pd_);
    if (!device) {
        return device.error();
    }
    driver::Device* dev = device.value();
    return adopt(dev->registry->register_virtual(pd_->id, pieces, page_shift, access), request_id,
                 out);
}

Result<MemoryRegionHandle>
ProtectionDomain::register_virtual(std::span<const mem::VirtualPiece> pieces, unsigned page_shift,
                                   AccessFlags access, std::uint64_t request_id) {
    return handle_or_error<MemoryRegionHandle>([&](MemoryRegionHandle& handle) {
        return virtual_region(handle, pieces, page_shift, access, request_id);
    });
}

Status ProtectionDomain::dma_region(MemoryRegionHandle& out, std::uint64_t request_id) {
    auto device = registering_device(pd_);
    if (!device) {
        return device.error();
    }
    driver::Device* dev = device.value();
    return adopt(dev->registry->get_dma_region(pd_->id), request_id, out);
}

Result<MemoryRegionHandle> ProtectionDomain::get_dma_region(std::uint64_t request_id) {
    return handle_or_error<MemoryRegionHandle>(
        [&](MemoryRegionHandle& handle) { return dma_region(handle, request_id); });
}

Status ProtectionDomain::alloc_fast_reg(MemoryRegionHandle& out, std::uint32_t max_pages,
                                        AccessFlags allowed_access, std::uint64_t request_id) {
    auto device = registering_device(pd_);
    if (!device) {
        return device.error();
    }
    driver::Device* dev = device.value();
    return adopt(dev->registry->allocate_fast_reg(pd_->id, max_pages, allowed_access), request_id,
                 out);
}

Result<MemoryRegionHandle> ProtectionDomain::alloc_fast_reg_region(std::uint32_t max_pages,
                                                                   AccessFlags allowed_access,
                                                                   std::uint64_t request_id) {
    return handle_or_error<MemoryRegionHandle>([&](MemoryRegionHandle& handle) {
        return alloc_fast_reg(handle, max_pages, allowed_access, request_id);
    });
}

// ---- MemoryRegionHandle -----------------------------------------------------------------------

MemoryRegionHandle::MemoryRegionHandle(MrObject* mr) : mr_(mr), region_(mr->region) {}
MemoryRegionHandle::MemoryRegionHandle(MemoryRegionHandle&& other) noexcept
    : mr_(std::exchange(other.mr_, nullptr)), region_(std::exchange(other.region_, nullptr)) {}
MemoryRegionHandle& MemoryRegionHandle::operator=(MemoryRegionHandle&& other) noexcept {
    if (this != &other) {
        release();
        mr_ = std::exchange(other.mr_, nullptr);
        region_ = std::exchange(other.region_, nullptr);
    }
    return *this;
}
MemoryRegionHandle::~MemoryRegionHandle() {
    release();
}

void MemoryRegionHandle::release() noexcept {
    if (mr_ != nullptr && mr_->creating) {
        // The context deregisters it once the device has finished registering it.
        std::exchange(mr_, nullptr)->handle_dropped = true;
        region_ = nullptr;
        return;
    }
    (void)deregister();
}

bool MemoryRegionHandle::ready() const noexcept {
    return mr_ != nullptr && !mr_->creating && mr_->region != nullptr;
}

Status MemoryRegionHandle::deregister(std::uint64_t request_id) {
    if (mr_ == nullptr) {
        return {};
    }
    if (mr_->creating) {
        return not_ready("memory region", true);
    }
    region_ = nullptr;
    return detail::release_mr_object(std::exchange(mr_, nullptr), request_id);
}

// ---- CompletionQueue --------------------------------------------------------------------------

CompletionQueue::CompletionQueue(CqObject* cq)
    : CqQueue(cq->context->device, cq->driver), cq_(cq) {}
CompletionQueue::CompletionQueue(CompletionQueue&& other) noexcept
    : CqQueue(other.device_, std::exchange(other.driver_, nullptr)),
      cq_(std::exchange(other.cq_, nullptr)) {}
CompletionQueue& CompletionQueue::operator=(CompletionQueue&& other) noexcept {
    if (this != &other) {
        release();
        cq_ = std::exchange(other.cq_, nullptr);
        device_ = other.device_;
        driver_ = std::exchange(other.driver_, nullptr);
    }
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
        return not_ready("CQ", true);
    }
    if (cq_->qps > 0) {
        return Error(StatusCode::busy, strformat("the CQ is used by %u QPs", cq_->qps));
    }
    driver_ = nullptr;
    return detail::destroy_cq_object(std::exchange(cq_, nullptr), request_id);
}

// ---- QueuePair ----------------------------------------------------------------------------------

QueuePair::QueuePair(QpObject* qp) : QpQueue(qp->context->device, qp->driver), qp_(qp) {}
QueuePair::QueuePair(QueuePair&& other) noexcept
    : QpQueue(other.device_, std::exchange(other.driver_, nullptr)),
      qp_(std::exchange(other.qp_, nullptr)) {}
QueuePair& QueuePair::operator=(QueuePair&& other) noexcept {
    if (this != &other) {
        release();
        qp_ = std::exchange(other.qp_, nullptr);
        device_ = other.device_;
        driver_ = std::exchange(other.driver_, nullptr);
    }
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
    // The driver's word, not the last modify's: a device moves a QP to error by itself.
    return attributes().state;
}
bool QueuePair::ready() const noexcept {
    return qp_ != nullptr && !qp_->creating && qp_->driver != nullptr;
}
QpAttr QueuePair::attributes() const {
    if (qp_ == nullptr) {
        return {};
    }
    QpAttr attr = qp_->attr;
    if (driver::Device* dev = detail::live_device(*qp_->context);
        dev != nullptr && qp_->driver != nullptr) {
        dev->config.ops->query_qp(*dev, qp_->driver, attr);
    }
    return attr;
}
const QpCaps& QueuePair::caps() const {
    static const QpCaps none{};
    return qp_ != nullptr ? qp_->caps : none;
}

Status QueuePair::modify(const QpAttr& attr, std::uint32_t mask, std::uint64_t request_id) {
    if (qp_ == nullptr) {
        return Error(StatusCode::invalid_parameter, "the QP is not created");
    }
    driver::Device* dev = detail::live_device(*qp_->context);
    if (dev == nullptr) {
        return removed(*qp_->context);
    }
    if (qp_->creating || qp_->driver == nullptr) {
        return not_ready("QP", qp_->creating);
    }
    if (qp_->pending_modify || qp_->destroying) {
        return Error(
            StatusCode::busy,
            strformat("QP %u has a control request pending; poll_control first", qp_->qpn));
    }
    const QpState from = state();
    if ((mask & qp_attr_cur_state) != 0 && attr.cur_state != from) {
        return Error(StatusCode::invalid_parameter,
                     strformat("cur_state says %s but QP %u is %s",
                               std::string(qp_state_name(attr.cur_state)).c_str(), qp_->qpn,
                               std::string(qp_state_name(from)).c_str()));
    }
    const QpState to = (mask & qp_attr_state) != 0 ? attr.state : from;
    if ((mask & qp_attr_state) == 0) {
        // Changing attributes without a state change is the to == from transition.
        if (std::string problem = check_transition(from, from, mask | qp_attr_state);
            !problem.empty()) {
            return Error(StatusCode::invalid_parameter, problem);
        }
    } else if (std::string problem = check_transition(from, to, mask); !problem.empty()) {
        return Error(StatusCode::invalid_parameter, problem);
    }
    if ((mask & qp_attr_port) != 0 && (attr.port == 0 || attr.port > dev->config.port_count)) {
        return Error(StatusCode::invalid_parameter, strformat("port %u does not exist (1..%u)",
                                                              attr.port, dev->config.port_count));
    }
    if ((mask & qp_attr_max_rd_atomic) != 0 &&
        attr.max_rd_atomic > dev->config.attr.max_qp_rd_atomic) {
        return Error(StatusCode::invalid_parameter,
                     strformat("max_rd_atomic %u exceeds the device's %u", attr.max_rd_atomic,
                               dev->config.attr.max_qp_rd_atomic));
    }
    if ((mask & qp_attr_max_dest_rd_atomic) != 0 &&
        attr.max_dest_rd_atomic > dev->config.attr.max_qp_init_rd_atomic) {
        return Error(StatusCode::invalid_parameter,
                     strformat("max_dest_rd_atomic %u exceeds the device's %u",
                               attr.max_dest_rd_atomic, dev->config.attr.max_qp_init_rd_atomic));
    }
    if ((mask & (qp_attr_rq_psn | qp_attr_sq_psn)) != 0 &&
        ((attr.rq_psn | attr.sq_psn) & ~0xffffffU) != 0) {
        return Error(StatusCode::invalid_parameter, "PSNs are 24-bit");
    }
    if ((mask & qp_attr_dest_qpn) != 0 && (attr.dest_qpn & ~0xffffffU) != 0) {
        return Error(StatusCode::invalid_parameter, "QPNs are 24-bit");
    }
    detail::ContextState& context = *qp_->context;
    const driver::ControlToken token = context.token(request_id, ControlOp::modify_qp, qp_->qpn);
    qp_->pending_modify.emplace(attr, mask);
    detail::track(context, token, qp_);
    Status status = dev->config.ops->modify_qp(*dev, qp_->driver, attr, mask, token);
    if (status.code() == StatusCode::pending) {
        return status; // applied to the class's attributes when it completes
    }
    detail::untrack(context, token);
    if (status.ok()) {
        driver::merge_qp_attr(qp_->attr, attr, mask);
    }
    qp_->pending_modify.reset();
    return status;
}

Status QueuePair::destroy(std::uint64_t request_id) {
    if (qp_ == nullptr) {
        return {};
    }
    if (qp_->creating) {
        return not_ready("QP", true);
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
        return removed(*qp_->context);
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
