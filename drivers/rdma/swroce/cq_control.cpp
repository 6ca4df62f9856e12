// CQ control: create and destroy, directly or through the group's owner.
#include <algorithm>
#include <cstring>

#include <rte_cycles.h>
#include <rte_ether.h>
#include <rte_mbuf.h>
#include <rte_ring.h>

#include <prdma/format.hpp>
#include <prdma/roce/psn.hpp>

#include "group_hold.hpp"
#include "swroce_control.hpp"
#include "swroce_log.hpp"

namespace prdma::swroce {

Status create_cq(Device& device, const rdma::driver::CqInit& init, const ControlToken& token,
                 void** out) {
    SwroceDevice& dev = swroce(device);
    auto cq = std::make_unique<SwroceCq>();
    cq->device = &dev;
    cq->queue_group = init.queue_group;
    cq->ring = WorkRing<rdma::WorkCompletion>(init.cqe);
    cq->event_fd = init.event_fd;
    const GroupHold hold(dev, init.queue_group);
    if (!hold) {
        // The CQ is written and polled by the group's owner only. Nothing of the group points at
        // it yet, so this hop publishes nothing: it is the rule (no control thread creates or
        // frees an object of a group another thread polls) kept without exceptions, so the
        // owner has seen the request before the application can name the CQ in a create_qp.
        if (!token.may_pend) {
            return owned_elsewhere(init.queue_group, "create the CQ");
        }
        auto request = make_request(GroupWork::create_cq, init.queue_group, token);
        request->cq = cq.get();
        if (Status sent = send_to_owner(dev, std::move(request)); !sent.ok()) {
            return sent;
        }
        *out = cq.get();
        dev.cqs.push_back(std::move(cq));
        return pending_on_owner(init.queue_group);
    }
    *out = cq.get();
    dev.cqs.push_back(std::move(cq));
    return {};
}

void erase_cq(SwroceDevice& dev, const SwroceCq* cq) {
    std::erase_if(dev.cqs, [cq](const auto& owned) { return owned.get() == cq; });
}

Status destroy_cq(Device& device, void* queue, const ControlToken& token) {
    SwroceDevice& dev = swroce(device);
    auto* cq = static_cast<SwroceCq*>(queue);
    if (std::none_of(dev.cqs.begin(), dev.cqs.end(),
                     [cq](const auto& owned) { return owned.get() == cq; })) {
        return Error(StatusCode::invalid_parameter, "not a CQ of this device");
    }
    const GroupHold hold(dev, cq->queue_group);
    if (!hold) {
        // No QP uses it (the class checked), but the owner may have pushed to it last (a QP
        // destroyed on the owner flushes into it): it is freed only after coming back.
        if (!token.may_pend) {
            return owned_elsewhere(cq->queue_group, "let go of the CQ");
        }
        auto request = make_request(GroupWork::destroy_cq, cq->queue_group, token);
        request->cq = cq;
        send_destroy_to_owner(dev, std::move(request));
        return pending_on_owner(cq->queue_group);
    }
    erase_cq(dev, cq);
    return {};
}

} // namespace prdma::swroce
