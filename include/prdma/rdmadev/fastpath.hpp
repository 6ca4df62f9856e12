// The data path: the inline burst calls, each exactly one indirect call through the flat table of
// fastpath_core.hpp (as rte_ethdev.h's rte_eth_rx_burst goes through rte_ethdev_core.h's
// rte_eth_fp_ops). It needs QPs and CQs only as the handles of queue_handle.hpp, never the control
// API: include <prdma/rdmadev/rdmadev.hpp> beside it to create them.
#pragma once
#define PRDMA_RDMADEV_FASTPATH_HPP

#include <cstddef>
#include <cstdint>
#include <span>

#include <prdma/compiler.hpp>
#include <prdma/rdmadev/fastpath_core.hpp>
#include <prdma/rdmadev/queue_handle.hpp>
#include <prdma/rdmadev/types.hpp>
#include <prdma/rdmadev/work_request.hpp>
#include <prdma/status.hpp>

namespace prdma::rdma {

#if PRDMA_DEBUG_FASTPATH
// Out-of-line argument checks; only in debug_fastpath builds.
bool fastpath_args_valid(DeviceId device, const void* queue, const void* items,
                         std::uint16_t count);
#endif

namespace detail {
// A burst is at most 65535 entries; the rest of a longer span is left for the next call.
inline std::uint16_t burst_count(std::size_t size) noexcept {
    return size > UINT16_MAX ? std::uint16_t{UINT16_MAX} : static_cast<std::uint16_t>(size);
}
} // namespace detail

// Posts the WRs in order; returns how many were taken (post_error() says why not all).
inline std::uint16_t post_send(const QpQueue& qp, std::span<const SendWr> wrs) {
    const std::uint16_t count = detail::burst_count(wrs.size());
#if PRDMA_DEBUG_FASTPATH
    if (!fastpath_args_valid(qp.device(), qp.driver_queue(), wrs.data(), count)) {
        return 0;
    }
#endif
    return fast_path_ops[qp.device()].post_send(qp.driver_queue(), wrs.data(), count);
}

inline std::uint16_t post_recv(const QpQueue& qp, std::span<const RecvWr> wrs) {
    const std::uint16_t count = detail::burst_count(wrs.size());
#if PRDMA_DEBUG_FASTPATH
    if (!fastpath_args_valid(qp.device(), qp.driver_queue(), wrs.data(), count)) {
        return 0;
    }
#endif
    return fast_path_ops[qp.device()].post_recv(qp.driver_queue(), wrs.data(), count);
}

// Drives the CQ's queue group, then fills `wcs` with up to wcs.size() completions; returns how
// many.
inline std::uint16_t poll_cq(const CqQueue& cq, std::span<WorkCompletion> wcs) {
    const std::uint16_t count = detail::burst_count(wcs.size());
#if PRDMA_DEBUG_FASTPATH
    if (!fastpath_args_valid(cq.device(), cq.driver_queue(), wcs.data(), count)) {
        return 0;
    }
#endif
    return fast_path_ops[cq.device()].poll_cq(cq.driver_queue(), wcs.data(), count);
}

// Drives the queue groups `poller` is attached to (Context::attach_poller): receives, answers,
// retransmits and sends what is posted, with no CQ polled. Returns the frames received (0: an
// empty pass, which reads no clock). Call it only on the thread that attached.
inline std::uint32_t progress(const PollerQueue& poller) {
    const ProgressFn fn = fast_path_ops[poller.device()].progress;
    return fn != nullptr ? fn(poller.driver_queue()) : 0;
}
// Why the last post_send() or post_recv() on `qp` took fewer WRs than it was offered (ok when it
// took them all): the reason seed 001's NdkFastRegister and every NDK post return as NTSTATUS.
//   not_connected      post_send on a QP not in RTS/SQD (RESET, INIT, RTR:
//   STATUS_CONNECTION_INVALID),
//                      post_recv on a QP in RESET, or a QP being destroyed
//   no_resources       the send or receive queue is full; the same WR may be posted again once
//                      completions are polled
//   invalid_parameter  the first WR not taken is invalid: not an opcode, more SGEs than the QP's
//                      max_send_sge / max_recv_sge, inline data longer than max_inline_data, an
//                      atomic without one 8-byte local buffer; nothing was queued for it
//   device_removed     the device is gone (its posts take nothing)
// The WRs before the one refused were taken and run as usual. Fast path: one read of the QP's own
// field, no allocation, no lock; call it on the thread that posted, before its next post.
inline StatusCode post_error(const QpQueue& qp) {
    const PostErrorFn fn = fast_path_ops[qp.device()].post_error;
    return fn != nullptr ? fn(qp.driver_queue()) : StatusCode::device_removed;
}

} // namespace prdma::rdma
