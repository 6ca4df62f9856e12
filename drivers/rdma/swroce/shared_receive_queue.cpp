// Shared receive queues: their control ops, the application's post, and the engine's take.
#include "shared_receive_queue.hpp"

#include <algorithm>
#include <bit>

#include <prdma/format.hpp>

#include "swroce_control.hpp"
#include "swroce_device.hpp"

namespace prdma::swroce {

using rdma::driver::Device;

namespace {

std::unique_ptr<SrqRing> make_ring(std::uint32_t max_wr, std::uint32_t max_sge) {
    auto ring = std::make_unique<SrqRing>();
    ring->wqes = WorkRing<RecvWqe>(max_wr);
    if (max_sge > 1) {
        const std::uint32_t slots = ring->wqes.capacity();
        ring->sges = std::make_unique<rdma::Sge[]>(std::size_t{slots} * max_sge);
        for (std::uint32_t i = 0; i < slots; ++i) {
            ring->wqes.slot(i).sge_store = &ring->sges[std::size_t{i} * max_sge];
        }
    }
    return ring;
}

// The WQEs in `from` and the rings linked behind it. A snapshot when the engine takes beside it.
std::uint32_t outstanding_from(const SrqRing* from) noexcept {
    std::uint32_t total = 0;
    for (const SrqRing* ring = from; ring != nullptr;
         ring = ring->next.load(std::memory_order_acquire)) {
        total += std::min(ring->wqes.snapshot_size(), ring->wqes.capacity());
    }
    return total;
}

// The producer's: whether the SRQ holds its max_wr. While older rings still hold WQEs, they count
// against the newest ring's size, which is the SRQ's.
bool srq_full(const SwroceSrq& srq) noexcept {
    const SrqRing* post = srq.post_ring;
    if (post->wqes.full()) {
        return true;
    }
    const SrqRing* take = srq.take_ring.load(std::memory_order_acquire);
    return PRDMA_UNLIKELY(take != post) && outstanding_from(take) >= post->wqes.capacity();
}

} // namespace

Status create_srq(Device& device, const rdma::driver::SrqInit& init,
                  rdma::driver::SrqCreated& out) {
    SwroceDevice& dev = swroce(device);
    if (dev.srqs.size() >= max_srqs) {
        return Error(StatusCode::no_resources,
                     strformat("all %u SRQs of %s are in use", max_srqs, dev.name.c_str()));
    }
    if (init.queue_group != rdma::any_queue_group && init.queue_group >= dev.port.queue_groups()) {
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
    srq->shared_by_groups = init.queue_group == rdma::any_queue_group;
    srq->max_sge = std::min(init.caps.max_sge, max_recv_sge);
    srq->rings.push_back(make_ring(init.caps.max_wr, srq->max_sge));
    srq->post_ring = srq->rings.back().get();
    srq->take_ring.store(srq->post_ring, std::memory_order_relaxed);
    out.queue = srq.get();
    out.srqn = srq->srqn;
    out.caps = {srq->post_ring->wqes.capacity(), srq->max_sge};
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

// Called by the producer's side (the class's rule): no post runs beside it. A size its ring already
// has needs no new ring.
Status resize_srq(Device& /*device*/, void* srq, std::uint32_t max_wr,
                  std::optional<std::uint32_t> limit, rdma::SrqCaps& out) {
    auto& s = *static_cast<SwroceSrq*>(srq);
    const SrqRing* take = s.take_ring.load(std::memory_order_acquire);
    // Only a take can lower what it holds meanwhile. The limit is checked against the size the
    // SRQ will have, as arm_limit checks it against the size it has.
    if (const std::uint32_t held = outstanding_from(take); max_wr < held) {
        return Error(
            StatusCode::invalid_parameter,
            strformat("SRQ %u holds %u receive WRs: it cannot shrink to %u", s.srqn, held, max_wr));
    }
    const std::uint32_t size = std::bit_ceil(max_wr);
    if (const std::uint32_t armed = limit.value_or(s.limit.load(std::memory_order_relaxed));
        armed > size) {
        return Error(StatusCode::invalid_parameter,
                     strformat("SRQ %u of %u receive WRs below its limit %u", s.srqn, size, armed));
    }
    // Rings the engine has moved past are no one's any more (see the top of the header for an
    // SRQ shared by groups).
    if (!s.shared_by_groups) {
        const auto taken = std::find_if(s.rings.begin(), s.rings.end(),
                                        [take](const auto& ring) { return ring.get() == take; });
        s.rings.erase(s.rings.begin(), taken);
    }
    if (size != s.post_ring->wqes.capacity()) {
        s.rings.push_back(make_ring(max_wr, s.max_sge));
        SrqRing* fresh = s.rings.back().get();
        s.post_ring->next.store(fresh, std::memory_order_release);
        s.post_ring = fresh;
    }
    if (limit) {
        s.limit.store(*limit, std::memory_order_relaxed);
    }
    out = {s.post_ring->wqes.capacity(), s.max_sge};
    return {};
}

void query_srq(Device& /*device*/, void* srq, std::uint32_t& limit, std::uint32_t& outstanding) {
    const auto& s = *static_cast<const SwroceSrq*>(srq);
    limit = s.limit.load(std::memory_order_relaxed);
    outstanding = outstanding_from(s.take_ring.load(std::memory_order_acquire));
}

std::uint16_t swroce_post_srq_recv(void* queue, const rdma::RecvWr* wrs, std::uint16_t count,
                                   StatusCode* reason) {
    auto& srq = *static_cast<SwroceSrq*>(queue);
    std::uint16_t taken = 0;
    for (; taken < count; ++taken) {
        const rdma::RecvWr& wr = wrs[taken];
        if (PRDMA_UNLIKELY(srq_full(srq))) {
            *reason = StatusCode::no_resources;
            break;
        }
        if (PRDMA_UNLIKELY(wr.num_sge > srq.max_sge || (wr.num_sge > 1 && wr.sg_list == nullptr))) {
            *reason = StatusCode::invalid_parameter;
            break;
        }
        WorkRing<RecvWqe>& ring = srq.post_ring->wqes;
        RecvWqe& wqe = ring.next_slot();
        wqe.wr_id = wr.wr_id;
        wqe.num_sge = wr.num_sge;
        if (wr.num_sge > 1) {
            std::copy_n(wr.sg_list, wr.num_sge, wqe.sge_store);
        } else if (wr.num_sge == 1) {
            wqe.sge = *wr.sges();
        }
        ring.push();
    }
    return taken;
}

namespace {

// Copies a WQE of the SRQ into the QP's held one. The count is bounded by the SRQ's SGEs: a shared
// take may read a slot the producer is rewriting, and discards that copy, but must not overrun.
void hold(SwroceQp& qp, const RecvWqe& wqe) noexcept {
    RecvWqe& held = qp.held_receive;
    held.wr_id = wqe.wr_id;
    held.num_sge = std::min(wqe.num_sge, qp.srq->max_sge);
    held.sge = wqe.sge;
    held.sge_store = qp.held_sges.get();
    if (held.num_sge > 1) {
        std::copy_n(wqe.sge_store, held.num_sge, held.sge_store);
    }
}

// Takes the head of `ring`: false when another group's engine emptied it first.
bool take_head(SwroceQp& qp, SrqRing& ring) noexcept {
    if (qp.srq->shared_by_groups) {
        return ring.wqes.take_shared([&qp](const RecvWqe& head) { hold(qp, head); });
    }
    hold(qp, ring.wqes.front());
    ring.wqes.pop();
    return true;
}

} // namespace

bool take_from_srq(SwroceQp& qp) noexcept {
    SwroceSrq& srq = *qp.srq;
    SrqRing* ring = nullptr;
    do {
        ring = srq_take_ring(srq);
        if (ring == nullptr) {
            return false;
        }
    } while (PRDMA_UNLIKELY(!take_head(qp, *ring)));
    qp.resp.holds_receive = true;
    std::uint32_t limit = srq.limit.load(std::memory_order_relaxed);
    if (PRDMA_UNLIKELY(limit != 0 && outstanding_from(ring) < limit) &&
        srq.limit.compare_exchange_strong(limit, 0, std::memory_order_relaxed)) {
        // To the taking QP's group, whose lcore this is: an SRQ shared by groups has no one group.
        record_event(*srq.device->groups[qp.queue_group], rdma::EventType::srq_limit_reached,
                     srq.srqn);
    }
    return true;
}

} // namespace prdma::swroce
