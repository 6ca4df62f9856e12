// Shared receive queues: their control ops, the application's post, and the engine's take.
#include "shared_receive_queue.hpp"

#include <algorithm>

#include <prdma/format.hpp>

#include "swroce_control.hpp"
#include "swroce_device.hpp"

namespace prdma::swroce {

using rdma::driver::Device;

Status create_srq(Device& device, const rdma::driver::SrqInit& init,
                  rdma::driver::SrqCreated& out) {
    SwroceDevice& dev = swroce(device);
    if (dev.srqs.size() >= max_srqs) {
        return Error(StatusCode::no_resources,
                     strformat("all %u SRQs of %s are in use", max_srqs, dev.name.c_str()));
    }
    if (init.queue_group >= dev.port.queue_groups()) {
        return Error(StatusCode::invalid_parameter,
                     strformat("queue group %u: %s has %u", init.queue_group, dev.name.c_str(),
                               dev.port.queue_groups()));
    }
    auto srq = std::make_unique<SwroceSrq>();
    srq->device = &dev;
    // The next number not in use, in 24 bits (what events carry), never shared: a destroyed
    // SRQ's number comes back only after the others have gone round, so an event of the old SRQ
    // still on its way is never taken for the new one's.
    const auto in_use = [&](std::uint32_t srqn) {
        return std::any_of(dev.srqs.begin(), dev.srqs.end(),
                           [&](const auto& other) { return other->srqn == srqn; });
    };
    do {
        srq->srqn = dev.next_srqn;
        dev.next_srqn = dev.next_srqn == srqn_mask ? 1 : dev.next_srqn + 1;
    } while (in_use(srq->srqn));
    srq->pd = init.pd;
    srq->queue_group = init.queue_group;
    srq->max_sge = std::min(init.caps.max_sge, max_recv_sge);
    srq->ring = WorkRing<RecvWqe>(init.caps.max_wr);
    if (srq->max_sge > 1) {
        const std::uint32_t slots = srq->ring.capacity();
        srq->sges = std::make_unique<rdma::Sge[]>(std::size_t{slots} * srq->max_sge);
        for (std::uint32_t i = 0; i < slots; ++i) {
            srq->ring.slot(i).sge_store = &srq->sges[std::size_t{i} * srq->max_sge];
        }
    }
    out.queue = srq.get();
    out.srqn = srq->srqn;
    out.caps = {srq->ring.capacity(), srq->max_sge};
    dev.srqs.push_back(std::move(srq));
    return {};
}

// The class calls it once no QP uses the SRQ: no engine can reach it any more.
void destroy_srq(Device& device, void* srq) {
    SwroceDevice& dev = swroce(device);
    std::erase_if(dev.srqs, [srq](const auto& owned) { return owned.get() == srq; });
}

Status arm_srq_limit(Device& /*device*/, void* srq, std::uint32_t limit) {
    static_cast<SwroceSrq*>(srq)->limit.store(limit, std::memory_order_relaxed);
    return {};
}

void query_srq(Device& /*device*/, void* srq, std::uint32_t& limit, std::uint32_t& outstanding) {
    const auto& s = *static_cast<const SwroceSrq*>(srq);
    limit = s.limit.load(std::memory_order_relaxed);
    // Read beside both sides: a post and a take between size()'s two loads can make it wrap.
    outstanding = std::min(s.ring.size(), s.ring.capacity());
}

std::uint16_t swroce_post_srq_recv(void* queue, const rdma::RecvWr* wrs, std::uint16_t count,
                                   StatusCode* reason) {
    auto& srq = *static_cast<SwroceSrq*>(queue);
    std::uint16_t taken = 0;
    for (; taken < count; ++taken) {
        const rdma::RecvWr& wr = wrs[taken];
        if (PRDMA_UNLIKELY(srq.ring.full())) {
            *reason = StatusCode::no_resources;
            break;
        }
        if (PRDMA_UNLIKELY(wr.num_sge > srq.max_sge || (wr.num_sge > 1 && wr.sg_list == nullptr))) {
            *reason = StatusCode::invalid_parameter;
            break;
        }
        RecvWqe& wqe = srq.ring.next_slot();
        wqe.wr_id = wr.wr_id;
        wqe.num_sge = wr.num_sge;
        if (wr.num_sge > 1) {
            std::copy_n(wr.sg_list, wr.num_sge, wqe.sge_store);
        } else if (wr.num_sge == 1) {
            wqe.sge = *wr.sges();
        }
        srq.ring.push();
    }
    return taken;
}

namespace {

// Moves the SRQ's head WQE into the QP, which keeps it until its message is done.
void take_from_srq(SwroceQp& qp) noexcept {
    SwroceSrq& srq = *qp.srq;
    const RecvWqe& head = srq.ring.front();
    RecvWqe& held = qp.held_receive;
    held.wr_id = head.wr_id;
    held.num_sge = head.num_sge;
    held.sge = head.sge;
    held.sge_store = qp.held_sges.get();
    if (head.num_sge > 1) {
        std::copy_n(head.sge_store, head.num_sge, held.sge_store);
    }
    srq.ring.pop();
    qp.resp.holds_receive = true;
    std::uint32_t limit = srq.limit.load(std::memory_order_relaxed);
    if (PRDMA_UNLIKELY(limit != 0 && srq.ring.size() < limit) &&
        srq.limit.compare_exchange_strong(limit, 0, std::memory_order_relaxed)) {
        record_event(*srq.device->groups[srq.queue_group], rdma::EventType::srq_limit_reached,
                     srq.srqn);
    }
}

} // namespace

RecvWqe& current_receive(SwroceQp& qp) noexcept {
    if (qp.srq == nullptr) {
        return qp.receive_queue.front();
    }
    if (!qp.resp.holds_receive) {
        take_from_srq(qp);
    }
    return qp.held_receive;
}

} // namespace prdma::swroce
