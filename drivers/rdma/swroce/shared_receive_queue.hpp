// A shared receive queue (rdmadev's SharedReceiveQueue): one ring of receive WQEs that the RC QPs
// created on it take from, in the order posted. It belongs to one queue group: the application
// posts (one producer), the group's engine takes (one consumer), the WorkRing between them is
// lock-free. A SEND takes its WQE at its first packet and keeps it in the QP (held_receive) until
// its last, so packets of SENDs on other QPs of the SRQ may come in between.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "qp.hpp"
#include "work_ring.hpp"

namespace prdma::swroce {

struct SwroceDevice;

struct SwroceSrq {
    SwroceDevice* device = nullptr;
    std::uint32_t srqn = 0;
    std::uint32_t pd = 0; // the receive WQEs' lkeys are checked against it
    std::uint16_t queue_group = 0;
    std::uint32_t max_sge = 1;
    WorkRing<RecvWqe> ring;
    std::unique_ptr<rdma::Sge[]> sges; // the slots' rooms for SGEs beyond the first
    // The armed limit (0: not armed): set by the control path, cleared by the engine when it
    // fires, which is the only time the engine writes it.
    std::atomic<std::uint32_t> limit{0};
};

inline constexpr std::uint32_t max_srqs = 1024;
inline constexpr std::uint32_t srqn_mask = 0xffffff; // SRQ numbers are 24 bits, 0 is none

// The QP's receive WQE for the message in progress, taken from its SRQ when it has none (a SEND's
// first packet, a WRITE_WITH_IMM's last) or the head of its own receive queue; the caller checked
// receive_available().
RecvWqe& current_receive(SwroceQp& qp) noexcept;
// Whether a request that needs a receive WQE finds one.
[[nodiscard]] inline bool receive_available(const SwroceQp& qp) noexcept {
    if (qp.srq == nullptr) {
        return !qp.receive_queue.empty();
    }
    return qp.resp.holds_receive || !qp.srq->ring.empty();
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
void query_srq(rdma::driver::Device& device, void* srq, std::uint32_t& limit,
               std::uint32_t& outstanding);
std::uint16_t swroce_post_srq_recv(void* queue, const rdma::RecvWr* wrs, std::uint16_t count,
                                   StatusCode* reason);

} // namespace prdma::swroce
