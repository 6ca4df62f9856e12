// The data path: a flat table indexed by device id (as rte_ethdev_core.h's rte_eth_fp_ops), and
// the inline burst calls that make exactly one indirect call per burst.
//
// A device's entry is written at probe and replaced by no-op functions when it is removed, so a
// burst on a removed device returns 0 instead of touching freed driver memory.
#pragma once

#include <cstdint>

#include <prdma/compiler.hpp>
#include <prdma/rdmadev/rdmadev.hpp>
#include <prdma/rdmadev/types.hpp>
#include <prdma/rdmadev/work_request.hpp>

namespace prdma::rdma {

// Takes up to `count` WRs in order; returns how many were taken. Fewer than `count`: the queue is
// full or the QP cannot take work in its state (post_error() says which).
using PostSendFn = std::uint16_t (*)(void* qp, const SendWr* wrs, std::uint16_t count);
using PostRecvFn = std::uint16_t (*)(void* qp, const RecvWr* wrs, std::uint16_t count);
// Drives the queue group the CQ belongs to (rx burst, protocol, tx burst, timers), then returns up
// to `count` completions.
using PollCqFn = std::uint16_t (*)(void* cq, WorkCompletion* wcs, std::uint16_t count);

struct PRDMA_CACHE_ALIGNED FastPathOps {
    PostSendFn post_send;
    PostRecvFn post_recv;
    PollCqFn poll_cq;
    void* device_private;
    std::uint64_t reserved[4];
};
static_assert(sizeof(FastPathOps) == PRDMA_CACHE_LINE_SIZE);

extern FastPathOps fast_path_ops[max_devices];

#if PRDMA_DEBUG_FASTPATH
// Out-of-line argument checks; only in debug_fastpath builds.
bool fastpath_args_valid(DeviceId device, const void* queue, const void* items,
                         std::uint16_t count);
#endif

inline std::uint16_t post_send(const QueuePair& qp, const SendWr* wrs, std::uint16_t count) {
#if PRDMA_DEBUG_FASTPATH
    if (!fastpath_args_valid(qp.device(), qp.driver_queue(), wrs, count)) {
        return 0;
    }
#endif
    return fast_path_ops[qp.device()].post_send(qp.driver_queue(), wrs, count);
}

inline std::uint16_t post_recv(const QueuePair& qp, const RecvWr* wrs, std::uint16_t count) {
#if PRDMA_DEBUG_FASTPATH
    if (!fastpath_args_valid(qp.device(), qp.driver_queue(), wrs, count)) {
        return 0;
    }
#endif
    return fast_path_ops[qp.device()].post_recv(qp.driver_queue(), wrs, count);
}

inline std::uint16_t poll_cq(const CompletionQueue& cq, WorkCompletion* wcs, std::uint16_t count) {
#if PRDMA_DEBUG_FASTPATH
    if (!fastpath_args_valid(cq.device(), cq.driver_queue(), wcs, count)) {
        return 0;
    }
#endif
    return fast_path_ops[cq.device()].poll_cq(cq.driver_queue(), wcs, count);
}

} // namespace prdma::rdma
