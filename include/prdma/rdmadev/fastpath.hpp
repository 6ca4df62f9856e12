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

// Why the last post_send() or post_recv() on `qp` took fewer WRs than it was offered (ok when it
// took them all): the reason seed 001's NdkFastRegister and every NDK post return as NTSTATUS.
//   not_connected      post_send on a QP not in RTS/SQD (RESET, INIT, RTR: NDK's
//                      STATUS_CONNECTION_INVALID), post_recv on a QP in RESET, or a QP being
//                      destroyed
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

// What a post took, and why not more (verbs' bad_wr and errno in one value): `posted` WRs from the
// front of the span were taken; when that is fewer than offered, `reason` is why the first one
// not taken was refused (the values post_error() lists above), ok otherwise. It converts to the
// count, so `if (post_send(qp, wrs) != wrs.size())` reads as a count does.
struct PostResult {
    std::uint16_t posted = 0;
    StatusCode reason = StatusCode::ok;
    // NOLINTNEXTLINE(google-explicit-constructor): the count is what most callers compare
    constexpr operator std::uint16_t() const noexcept { return posted; }
};

// Posts the WRs in order. The reason costs a second call only when a WR was refused.
inline PostResult post_send(const QpQueue& qp, std::span<const SendWr> wrs) {
    const std::uint16_t count = detail::burst_count(wrs.size());
#if PRDMA_DEBUG_FASTPATH
    if (!fastpath_args_valid(qp.device(), qp.driver_queue(), wrs.data(), count)) {
        return {0, StatusCode::invalid_parameter};
    }
#endif
    const std::uint16_t posted =
        fast_path_ops[qp.device()].post_send(qp.driver_queue(), wrs.data(), count);
    if (PRDMA_LIKELY(posted == count)) {
        return {posted, StatusCode::ok};
    }
    return {posted, post_error(qp)};
}

inline PostResult post_recv(const QpQueue& qp, std::span<const RecvWr> wrs) {
    const std::uint16_t count = detail::burst_count(wrs.size());
#if PRDMA_DEBUG_FASTPATH
    if (!fastpath_args_valid(qp.device(), qp.driver_queue(), wrs.data(), count)) {
        return {0, StatusCode::invalid_parameter};
    }
#endif
    const std::uint16_t posted =
        fast_path_ops[qp.device()].post_recv(qp.driver_queue(), wrs.data(), count);
    if (PRDMA_LIKELY(posted == count)) {
        return {posted, StatusCode::ok};
    }
    return {posted, post_error(qp)};
}

// Posts receive WRs to a shared receive queue (ibv_post_srq_recv): every QP created on it takes
// its receives from there. One thread posts to an SRQ at a time; its QPs' engine consumes it.
// not_supported on a device without SRQs; otherwise the reasons of post_recv.
inline PostResult post_srq_recv(const SrqQueue& srq, std::span<const RecvWr> wrs) {
    const std::uint16_t count = detail::burst_count(wrs.size());
#if PRDMA_DEBUG_FASTPATH
    if (!fastpath_args_valid(srq.device(), srq.driver_queue(), wrs.data(), count)) {
        return {0, StatusCode::invalid_parameter};
    }
#endif
    const PostSrqRecvFn fn = fast_path_ops[srq.device()].post_srq_recv;
    if (PRDMA_UNLIKELY(fn == nullptr)) {
        return {0, StatusCode::not_supported};
    }
    StatusCode reason = StatusCode::ok;
    const std::uint16_t posted = fn(srq.driver_queue(), wrs.data(), count, &reason);
    return {posted, posted == count ? StatusCode::ok : reason};
}

// Fills `wcs` with up to wcs.size() completions; returns how many. When no poller
// (Context::attach_poller) and no progress service drives the CQ's queue group, the call drives
// it first: the caller's poll is the engine's turn. When one does, poll_cq only reaps.
inline std::uint16_t poll_cq(const CqQueue& cq, std::span<WorkCompletion> wcs) {
    const std::uint16_t count = detail::burst_count(wcs.size());
#if PRDMA_DEBUG_FASTPATH
    if (!fastpath_args_valid(cq.device(), cq.driver_queue(), wcs.data(), count)) {
        return 0;
    }
#endif
    return fast_path_ops[cq.device()].poll_cq(cq.driver_queue(), wcs.data(), count);
}

// Asks for one completion event, as ibv_req_notify_cq: the device writes the CQ's event fd
// (Context::create_cq) once, when the next completion arrives. Completions already in the CQ
// raise none, so poll once more after arming. not_supported for a CQ created without an event fd
// or a device without events.
inline StatusCode arm_cq(const CqQueue& cq) {
    const ArmCqFn fn = fast_path_ops[cq.device()].arm_cq;
    return fn != nullptr ? fn(cq.driver_queue()) : StatusCode::not_supported;
}

// Drives the queue groups `poller` is attached to (Context::attach_poller): receives, answers,
// retransmits and sends what is posted, with no CQ polled. Returns the frames received (0: an
// empty pass, which reads no clock). Call it only on the thread that attached.
inline std::uint32_t progress(const PollerQueue& poller) {
    const ProgressFn fn = fast_path_ops[poller.device()].progress;
    return fn != nullptr ? fn(poller.driver_queue()) : 0;
}
} // namespace prdma::rdma
