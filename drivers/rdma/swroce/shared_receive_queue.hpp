// A shared receive queue (rdmadev's SharedReceiveQueue): a ring of receive WQEs that the RC and UD
// QPs created on it take from, in the order posted. The application posts (one producer). An SRQ of
// one queue group has one consumer, that group's engine, and the WorkRing between them is
// lock-free with plain loads and stores. An SRQ shared by every group (any_queue_group) has one
// consumer per group, each on its own lcore: they claim a WQE with a compare-and-swap
// (WorkRing::take_shared), a locked instruction per message that a one-group SRQ does without. A
// SEND takes its WQE at its first packet and keeps it in the QP (held_receive) until its last, so
// packets of SENDs on other QPs of the SRQ may come in between; a datagram takes and gives it back
// within its one packet.
//
// A resize (ibv_modify_srq's max_wr) cannot move WQEs under the engine, which takes them without a
// lock while another thread may drive it. So it links a new ring behind the one being posted to:
// the producer posts to the newest ring from then on, the engine drains the older ones first and
// moves on, and the control path frees a ring once the engine has moved past it (for an SRQ of one
// group; one shared by groups keeps its drained rings until it is destroyed, as a consumer on
// another lcore may still be looking at one it has not yet seen drained). Order is kept and
// nothing posted is lost or copied.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "qp.hpp"
#include "work_ring.hpp"

namespace prdma::swroce {

struct SwroceDevice;

// One ring of receive WQEs with its slots' rooms for SGEs beyond the first; `next` is the ring a
// resize linked behind it (set by the resize, on the producer's side: no post here follows it).
struct SrqRing {
    WorkRing<RecvWqe> wqes;
    std::unique_ptr<rdma::Sge[]> sges;
    std::atomic<SrqRing*> next{nullptr};
};

struct SwroceSrq {
    SwroceDevice* device = nullptr;
    std::uint32_t srqn = 0;
    std::uint32_t pd = 0;          // the receive WQEs' lkeys are checked against it
    bool shared_by_groups = false; // QPs of every queue group take from it (any_queue_group)
    std::uint32_t max_sge = 1;
    // The rings, oldest first (the control path's): the last is the one posted to.
    std::vector<std::unique_ptr<SrqRing>> rings;
    SrqRing* post_ring = nullptr; // the producer's
    // The engine's: the oldest ring it may still take from. The control path reads it to know
    // which rings no one will touch again.
    std::atomic<SrqRing*> take_ring{nullptr};
    // The armed limit (0: not armed): set by the control path, cleared by the engine when it
    // fires, which is the only time the engine writes it.
    std::atomic<std::uint32_t> limit{0};
};

inline constexpr std::uint32_t max_srqs = 1024;
inline constexpr std::uint32_t srqn_mask = 0xffffff; // SRQ numbers are 24 bits, 0 is none

// The engine's ring to take the next WQE from, moving past rings a resize left behind once they
// are drained; null when the SRQ is empty. One load beyond the emptiness check while no resize is
// in progress.
inline SrqRing* srq_take_ring(SwroceSrq& srq) noexcept {
    SrqRing* ring = srq.take_ring.load(std::memory_order_acquire);
    while (ring->wqes.empty()) {
        SrqRing* next = ring->next.load(std::memory_order_acquire);
        // The link is stored after the last post to this ring: look again now that it is seen.
        if (next == nullptr || !ring->wqes.empty()) {
            return next == nullptr ? nullptr : ring;
        }
        // The last touch of the old ring by this consumer; another may have moved on already.
        SrqRing* seen = ring;
        srq.take_ring.compare_exchange_strong(seen, next, std::memory_order_acq_rel,
                                              std::memory_order_relaxed);
        ring = next;
    }
    return ring;
}

// Moves the SRQ's next WQE into the QP (held_receive), which keeps it until its message is done;
// false when the SRQ has none.
bool take_from_srq(SwroceQp& qp) noexcept;
// Whether a request that needs a receive WQE has one: the head of the QP's own receive queue, or
// the one it holds from its SRQ, taken now if it holds none (a SEND's first packet, a
// WRITE_WITH_IMM's last, a datagram). Taken here, before anything is placed: with an SRQ shared by
// groups, a WQE seen is not one held until it is claimed.
[[nodiscard]] inline bool acquire_receive(SwroceQp& qp) noexcept {
    if (qp.srq == nullptr) {
        return !qp.receive_queue.empty();
    }
    return qp.resp.holds_receive || take_from_srq(qp);
}
// The QP's receive WQE for the message in progress; the caller saw acquire_receive() succeed.
inline RecvWqe& current_receive(SwroceQp& qp) noexcept {
    return qp.srq == nullptr ? qp.receive_queue.front() : qp.held_receive;
}
// The message is done with its receive WQE (completed, successfully or not).
inline void receive_done(SwroceQp& qp) noexcept {
    if (qp.srq == nullptr) {
        qp.receive_queue.pop();
    } else {
        qp.resp.holds_receive = false;
    }
}

// DeviceOps and the fast path's post_srq_recv.
Status create_srq(rdma::driver::Device& device, const rdma::driver::SrqInit& init,
                  rdma::driver::SrqCreated& out);
void destroy_srq(rdma::driver::Device& device, void* srq);
Status arm_srq_limit(rdma::driver::Device& device, void* srq, std::uint32_t limit);
Status resize_srq(rdma::driver::Device& device, void* srq, std::uint32_t max_wr,
                  std::optional<std::uint32_t> limit, rdma::SrqCaps& out);
void query_srq(rdma::driver::Device& device, void* srq, std::uint32_t& limit,
               std::uint32_t& outstanding);
std::uint16_t swroce_post_srq_recv(void* queue, const rdma::RecvWr* wrs, std::uint16_t count,
                                   StatusCode* reason);

} // namespace prdma::swroce
