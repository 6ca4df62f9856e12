// The fast-path table (as rte_ethdev_core.h is DPDK's): one cache line per device, written at
// probe and replaced by no-op functions when the device is removed, so a burst on a removed device
// returns 0 instead of touching freed driver memory. Not for direct inclusion: applications get it
// through <prdma/rdmadev/fastpath.hpp>, drivers through <prdma/rdmadev/driver.hpp>.
#pragma once

#if !defined(PRDMA_RDMADEV_FASTPATH_HPP) && !defined(PRDMA_RDMADEV_DRIVER_HPP)
#error "include <prdma/rdmadev/fastpath.hpp>, not fastpath_core.hpp"
#endif

#include <cstdint>

#include <prdma/compiler.hpp>
#include <prdma/rdmadev/types.hpp>
#include <prdma/rdmadev/work_request.hpp>
#include <prdma/status.hpp>

namespace prdma::rdma {

// Takes up to `count` WRs in order; returns how many were taken. Fewer than `count`: the queue is
// full, the QP cannot take work in its state, or the first WR not taken is invalid; post_error()
// says which.
using PostSendFn = std::uint16_t (*)(void* qp, const SendWr* wrs, std::uint16_t count);
using PostRecvFn = std::uint16_t (*)(void* qp, const RecvWr* wrs, std::uint16_t count);
// Drives the queue group the CQ belongs to (rx burst, protocol, tx burst, timers), then returns up
// to `count` completions.
using PollCqFn = std::uint16_t (*)(void* cq, WorkCompletion* wcs, std::uint16_t count);
// The QP's last-refusal reason (post_error() in fastpath.hpp): a plain read of a per-QP field.
using PostErrorFn = StatusCode (*)(const void* qp);
// Drives the queue groups a Poller attached to (rx burst, protocol, tx burst, timers); returns
// the frames it received, 0 for an empty pass.
using ProgressFn = std::uint32_t (*)(void* poller);
// Takes up to `count` receive WRs into a shared receive queue, in order; when it takes fewer, it
// says why in `*reason` (no_resources: full; invalid_parameter: the first WR not taken is bad).
using PostSrqRecvFn = std::uint16_t (*)(void* srq, const RecvWr* wrs, std::uint16_t count,
                                        StatusCode* reason);
// Asks for one write to the CQ's event fd when its next completion arrives (arm_cq()).
using ArmCqFn = StatusCode (*)(void* cq);

struct PRDMA_CACHE_ALIGNED FastPathOps {
    PostSendFn post_send;
    PostRecvFn post_recv;
    PollCqFn poll_cq;
    void* device_private;
    // Defaulted, so a table written before it existed ({send, recv, poll, private, {}}) still
    // compiles; register_device's no-op table leaves it null (see post_error()).
    PostErrorFn post_error = nullptr;
    // Defaulted as post_error; null for a device without explicit pollers (and a removed one).
    ProgressFn progress = nullptr;
    // Defaulted as post_error; null for a device without completion events.
    ArmCqFn arm_cq = nullptr;
    // Defaulted as post_error; null for a device without shared receive queues.
    PostSrqRecvFn post_srq_recv = nullptr;
};
static_assert(sizeof(FastPathOps) == PRDMA_CACHE_LINE_SIZE);

extern FastPathOps fast_path_ops[max_devices];

} // namespace prdma::rdma
