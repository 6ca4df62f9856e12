// Internal objects behind the public handles. A handle owns its object; every object keeps its
// context state alive (shared_ptr), so a Context may be dropped before its children and nothing
// dangles. Parents count their children, which is how destroy/close know to say busy.
//
// Pending requests (seed 003): the context keeps every request a driver returned pending in
// `pending`, by the serial number in its ControlToken, with the object it is about; the driver's
// complete_control() finds it there and finish_request() applies the outcome to the object (a
// create becomes ready, a destroy frees, a modify merges its attributes). An object whose handle
// was dropped while a request on it was pending is finished by the context the same way.
#pragma once

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>

#include <prdma/rdmadev/driver.hpp>
#include <prdma/rdmadev/rdmadev.hpp>

namespace prdma::rdma::detail {

struct QpObject;
struct SrqObject;

struct PendingRequest {
    driver::ControlToken token;
    void* object = nullptr; // CqObject, QpObject, MrObject or AhObject, by token.op
};

struct ContextState : std::enable_shared_from_this<ContextState> {
    std::uint32_t id = 0;
    DeviceId device = invalid_device;
    bool closed = false;
    Context::Resources resources;
    std::deque<ControlCompletion> completions;
    std::deque<Event> events;
    std::map<std::uint32_t, QpObject*> qps;          // by QPN, for events that name a QP
    std::map<std::uint32_t, SrqObject*> srqs;        // by SRQN, for events that name an SRQ
    std::map<std::uint64_t, PendingRequest> pending; // by token serial
    std::uint64_t next_serial = 1;

    // A token for a new request on this context.
    driver::ControlToken token(std::uint64_t request_id, ControlOp op, std::uint32_t qpn = 0,
                               bool may_pend = true) {
        return {id, request_id, op, qpn, next_serial++, may_pend};
    }
    ContextState() = default;
    ContextState(const ContextState&) = delete;
    ContextState& operator=(const ContextState&) = delete;
    ContextState(ContextState&&) = delete;
    ContextState& operator=(ContextState&&) = delete;
    ~ContextState();
};

std::uint32_t attach_context(DeviceId device, ContextState* context);
// The device's attributes as query_device answers them (the driver's, with the class's limits).
DeviceAttr device_attr(const driver::Device& dev);
// The arguments `dev` was created with (device_args()).
std::string device_args_of(const driver::Device& dev);
// Runs `use` on a device that is not removed, under the class's lock, so the device is neither
// removed nor closed meanwhile (telemetry, from its own thread); false when there is none.
bool with_live_device(DeviceId device, const std::function<void(driver::Device&)>& use);
void detach_context(DeviceId device, std::uint32_t id);
ContextState* find_context(DeviceId device, std::uint32_t id);
// Applies a finished request to its object (see the top of this file). The caller keeps the
// context alive: finishing may free the last object that holds it.
void finish_request(ContextState& context, const driver::ControlToken& token, StatusCode status);
// The device was removed: every request still pending completes with device_removed.
void fail_pending_requests(ContextState& context);

// What every object needs to find its device and to fail with device_removed once it is gone.
driver::Device* live_device(const ContextState& context);
Error device_removed_error(DeviceId device);
// Every call on a Context after close() (or on a moved-from one) fails with this.
Error context_closed_error();

struct PdObject {
    std::shared_ptr<ContextState> context;
    std::uint32_t id = 0;
    std::uint32_t qps = 0;
    std::uint32_t mrs = 0;
    std::uint32_t caches = 0; // registration caches over this PD (create_registration_cache)
    std::uint32_t srqs = 0;
    std::uint32_t ahs = 0;
    bool handle_dropped = false; // destroyed by its handle while children lived: free with the last

    [[nodiscard]] bool has_children() const noexcept {
        return qps > 0 || mrs > 0 || caches > 0 || srqs > 0 || ahs > 0;
    }
};

struct CqObject {
    std::shared_ptr<ContextState> context;
    void* driver = nullptr; // null after a failed creation
    std::uint32_t cqe = 0;
    std::uint16_t queue_group = 0;
    std::uint32_t qps = 0;
    bool creating = false; // create returned pending
    // Dropped by its handle while QPs used it or its creation pended: destroyed when it may be.
    bool handle_dropped = false;
};

struct SrqObject {
    std::shared_ptr<ContextState> context;
    PdObject* pd = nullptr;
    void* driver = nullptr;
    std::uint32_t srqn = 0;
    std::uint16_t queue_group = 0;
    SrqCaps caps{};
    std::uint32_t qps = 0;
    bool handle_dropped = false; // dropped while QPs used it: destroyed with the last
};

struct QpObject {
    std::shared_ptr<ContextState> context;
    PdObject* pd = nullptr;
    CqObject* send_cq = nullptr;
    CqObject* recv_cq = nullptr;
    SrqObject* srq = nullptr;
    void* driver = nullptr; // null after a failed creation
    std::uint32_t qpn = 0;
    QpType type = QpType::rc;
    QpCaps caps{};
    // Its configuration, the one copy (driver::QpInit::attr): written by the driver only.
    QpAttr attr{};
    // The modify in flight, which the driver reads until it completes (DeviceOps::modify_qp).
    std::optional<std::pair<QpAttr, QpAttrMask>> pending_modify;
    bool creating = false;       // create returned pending
    bool handle_dropped = false; // dropped while creating: destroyed once created
    bool destroying = false;     // destroy returned pending; the context frees it on completion
};

struct AhObject {
    std::shared_ptr<ContextState> context;
    PdObject* pd = nullptr;
    void* driver = nullptr; // null after a failed creation
    AhAttr attr{};
    bool creating = false;       // create returned pending
    bool handle_dropped = false; // dropped while creating: destroyed once created
};

struct MrObject {
    std::shared_ptr<ContextState> context;
    PdObject* pd = nullptr;
    mem::MemoryRegion* region = nullptr; // null after a failed registration
    bool creating = false;               // the device's register_mr returned pending
    bool handle_dropped = false;         // dropped while creating: deregistered once registered
};

// Frees a PD/CQ whose handle is gone once its last child is gone.
void release_pd_child(PdObject* pd);
void release_cq_child(CqObject* cq);
void release_srq_child(SrqObject* srq);
// Unlinks an SRQ from its PD and context and tells the driver: the last QP on it is gone.
void free_srq(SrqObject* srq);
// Unlinks a QP from its PD and CQs and frees it.
void free_qp(QpObject* qp);
// The destroy/deregister every path shares (handle, dropped handle, finished create): ok when the
// object is gone, pending when the driver finishes it later (the context frees it then).
Status destroy_cq_object(CqObject* cq, std::uint64_t request_id);
Status destroy_qp_object(QpObject* qp, std::uint64_t request_id);
Status release_mr_object(MrObject* mr, std::uint64_t request_id);
// Unlinks an address handle from its PD and context and tells the driver (never pending).
void free_ah(AhObject* ah);
void finish_create_ah(AhObject* ah, StatusCode status);

// Records a request the driver is about to see, so a completion (even one made before the driver
// returns) finds its object; forgotten again unless the driver says pending.
void track(ContextState& context, const driver::ControlToken& token, void* object);
void untrack(ContextState& context, const driver::ControlToken& token);

// Why a control call on a handle whose creation pends (busy) or failed (invalid) cannot go on.
Error not_ready(const char* what, bool creating);

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

// Every handle's move assignment: what it held goes as its destructor lets it go (destroyed, or
// left to the context while the device still works on it), then it is moved from `other`, which
// is left empty.
template <typename Handle>
void move_assign(Handle& self, std::type_identity_t<Handle>&& other) noexcept {
    if (&self != &other) {
        std::destroy_at(&self);
        std::construct_at(&self, std::move(other));
    }
}

} // namespace prdma::rdma::detail
