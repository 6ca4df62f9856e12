// Internal objects behind the public handles. A handle owns its object; every object keeps its
// context state alive (shared_ptr), so a Context may be dropped before its children and nothing
// dangles. Parents count their children, which is how destroy/close know to say busy.
#pragma once

#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include <prdma/rdmadev/driver.hpp>
#include <prdma/rdmadev/rdmadev.hpp>

namespace prdma::rdma::detail {

struct QpObject;

struct ContextState {
    std::uint32_t id = 0;
    DeviceId device = invalid_device;
    bool closed = false;
    Context::Resources resources;
    std::deque<ControlCompletion> completions;
    std::deque<Event> events;
    std::map<std::uint32_t, QpObject*> qps; // by QPN, for completions that name a QP
    ~ContextState();
};

std::uint32_t attach_context(DeviceId device, ContextState* context);
void detach_context(DeviceId device, std::uint32_t id);
ContextState* find_context(DeviceId device, std::uint32_t id);
// Applies a finished pending request to its QP (state, or freeing a destroyed QP).
void finish_qp_request(ContextState& context, const driver::ControlToken& token, StatusCode status);

// What every object needs to find its device and to fail with device_removed once it is gone.
driver::Device* live_device(const ContextState& context);
Error device_removed_error(DeviceId device);

struct PdObject {
    std::shared_ptr<ContextState> context;
    std::uint32_t id = 0;
    std::uint32_t qps = 0;
    std::uint32_t mrs = 0;
    bool handle_dropped = false; // destroyed by its handle while children lived: free with the last
};

struct CqObject {
    std::shared_ptr<ContextState> context;
    void* driver = nullptr;
    std::uint32_t cqe = 0;
    std::uint16_t queue_group = 0;
    std::uint32_t qps = 0;
    bool handle_dropped = false;
};

struct QpObject {
    std::shared_ptr<ContextState> context;
    PdObject* pd = nullptr;
    CqObject* send_cq = nullptr;
    CqObject* recv_cq = nullptr;
    void* driver = nullptr;
    std::uint32_t qpn = 0;
    QpType type = QpType::rc;
    QpCaps caps{};
    QpAttr attr{};
    // A modify that returned pending: applied when its completion arrives.
    std::optional<std::pair<QpAttr, std::uint32_t>> pending_modify;
    bool destroying = false; // destroy returned pending; the context frees it on completion
};

// Frees a PD/CQ whose handle is gone once its last child is gone.
void release_pd_child(PdObject* pd);
void release_cq_child(CqObject* cq);
// Unlinks a QP from its PD and CQs and frees it.
void free_qp(QpObject* qp);

} // namespace prdma::rdma::detail
