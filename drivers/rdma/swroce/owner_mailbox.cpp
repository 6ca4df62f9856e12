// The owner mailbox (ENGINE.md "Ownership"): once another thread drives a queue group, the control
// path sends what it would change in that group as a request on the group's control ring; the
// owner runs it between two bursts (run_group_requests) and hands it back, and the control path
// finishes it (collect_group_requests).
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

// What a call that may not pend says when the group belongs to another thread.
Error owned_elsewhere(unsigned group, const char* what) {
    return {StatusCode::busy,
            strformat("queue group %u is polled by another thread, which must %s itself: use the "
                      "form with a request_id (it completes through poll_control)",
                      group, what)};
}

Error pending_on_owner(unsigned group) {
    return {StatusCode::pending,
            strformat("queue group %u is polled by another thread; it finishes the request between "
                      "two bursts",
                      group)};
}

namespace {

// Whether the request went on its group's ring (then it comes back through control_done).
bool try_send(SwroceDevice& dev, std::unique_ptr<GroupRequest>& request) {
    if (dev.control_in_flight >= rte_ring_get_capacity(dev.control_done) ||
        rte_ring_mp_enqueue(dev.groups[request->group]->control, request.get()) != 0) {
        return false;
    }
    (void)request.release();
    ++dev.control_in_flight;
    return true;
}

} // namespace

// Hands `request` to its group's owner; busy (nothing sent, the request freed) when too many are
// out already or the group's destroys still wait for room.
Status send_to_owner(SwroceDevice& dev, std::unique_ptr<GroupRequest> request) {
    const unsigned group = request->group;
    // Behind the group's destroys still waiting, nothing goes first.
    if (const std::size_t waiting = dev.unsent_destroys[group].size(); waiting != 0) {
        return Error(StatusCode::busy,
                     strformat("%zu destroys wait for room in queue group %u's mailbox (its "
                               "owner has not taken earlier requests); poll_control and try again",
                               waiting, group));
    }
    if (!try_send(dev, request)) {
        return Error(StatusCode::busy,
                     strformat("%u control requests are waiting for their queue groups' owners "
                               "(group %u's ring holds %u); poll_control and try again",
                               dev.control_in_flight, group, control_ring_size));
    }
    return {};
}

void send_destroy_to_owner(SwroceDevice& dev, std::unique_ptr<GroupRequest> request) {
    auto& waiting = dev.unsent_destroys[request->group];
    if (!waiting.empty() || !try_send(dev, request)) {
        waiting.push_back(std::move(request));
    }
}

std::unique_ptr<GroupRequest> make_request(GroupWork work, unsigned group,
                                           const ControlToken& token) {
    auto request = std::make_unique<GroupRequest>();
    request->work = work;
    request->group = group;
    request->token = token;
    return request;
}

// Requests the owners have run: free what they handed back and complete them.
void collect_group_requests(Device& device) {
    SwroceDevice& dev = swroce(device);
    std::array<void*, 32> done{};
    unsigned n = 0;
    while ((n = rte_ring_dequeue_burst(dev.control_done, done.data(), done.size(), nullptr)) > 0) {
        for (unsigned i = 0; i < n; ++i) {
            std::unique_ptr<GroupRequest> request(static_cast<GroupRequest*>(done[i]));
            --dev.control_in_flight;
            switch (request->work) {
            case GroupWork::destroy_cq:
                erase_cq(dev, request->cq);
                break;
            case GroupWork::destroy_qp:
                dev.release_qp_slot(dev.slot_of_qpn(request->qp->qpn));
                {
                    const std::lock_guard lock(dev.qp_free_mutex);
                    request->qp_storage.reset(); // the owner took it out of the table
                }
                break;
            case GroupWork::quiesce: {
                QuiesceWait* wait = request->wait;
                if (--wait->outstanding == 0 && wait->unsent.empty()) {
                    const ControlToken token = wait->token;
                    std::erase_if(dev.quiesces, [wait](const auto& w) { return w.get() == wait; });
                    rdma::driver::complete_control(device, token, StatusCode::ok);
                }
                continue;
            }
            case GroupWork::resolve_neighbour:
                resolution_started(dev, *request);
                continue; // its token is the RTR's, which completes once the MAC is known
            case GroupWork::create_cq:
            case GroupWork::create_qp:
            case GroupWork::modify_qp:
                break;
            }
            rdma::driver::complete_control(device, request->token, StatusCode::ok);
        }
    }
    // Destroys, then quiescence requests, a full mailbox turned away, sent again.
    for (auto& waiting : dev.unsent_destroys) {
        while (!waiting.empty() && try_send(dev, waiting.front())) {
            waiting.pop_front();
        }
    }
    for (const auto& wait : dev.quiesces) {
        if (!wait->unsent.empty()) {
            ask_for_quiescence(dev, *wait);
        }
    }
}

void run_left_requests(SwroceDevice& dev, unsigned group) noexcept {
    while (rte_ring_count(dev.groups[group]->control) != 0) {
        run_group_requests(dev, group);
    }
}

void run_group_requests(SwroceDevice& dev, unsigned group) noexcept {
    QueueGroupState& state = *dev.groups[group];
    std::array<void*, 16> requests; // filled by the dequeue
    const unsigned n =
        rte_ring_sc_dequeue_burst(state.control, requests.data(), requests.size(), nullptr);
    if (PRDMA_LIKELY(n == 0)) {
        return;
    }
    for (unsigned i = 0; i < n; ++i) {
        auto& request = *static_cast<GroupRequest*>(requests[i]);
        switch (request.work) {
        case GroupWork::create_qp:
            publish_qp(dev, request.qp_storage);
            break;
        case GroupWork::modify_qp:
            apply_modify(*request.qp, request.modify);
            break;
        case GroupWork::destroy_qp: {
            SwroceQp& qp = *request.qp;
            qp.destroying = true;
            qp.set_state(rdma::QpState::err);
            flush_queues(qp); // the flush completions are in the CQs before the destroy completes
            deactivate(*dev.groups[qp.queue_group], qp);
            request.qp_storage =
                std::move(dev.qps[dev.slot_of_qpn(qp.qpn)]); // freed by the control path
            break;
        }
        case GroupWork::resolve_neighbour:
            start_resolution(dev, request);
            break;
        case GroupWork::create_cq:
        case GroupWork::destroy_cq:
        case GroupWork::quiesce:
            break; // see GroupWork: coming back is the point
        }
    }
    // The ring has room for every request out (send_to_owner caps them), so this never fails.
    (void)rte_ring_mp_enqueue_burst(dev.control_done, requests.data(), n, nullptr);
}

} // namespace prdma::swroce
