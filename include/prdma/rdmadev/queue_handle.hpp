// What the data path needs of a QP, CQ or poller handle: the device's slot in the fast-path table
// and the driver's object. QueuePair, CompletionQueue and Poller (rdmadev.hpp) are one each;
// fastpath.hpp takes them as these, so a data-path translation unit needs none of the control
// API.
#pragma once

#include <prdma/rdmadev/types.hpp>

namespace prdma::rdma {

template <typename Kind>
class FastPathQueue {
public:
    [[nodiscard]] DeviceId device() const noexcept { return device_; }
    [[nodiscard]] void* driver_queue() const noexcept { return driver_; }

protected:
    FastPathQueue() = default;
    FastPathQueue(DeviceId device, void* driver) noexcept : device_(device), driver_(driver) {}

    DeviceId device_ = invalid_device;
    void* driver_ = nullptr;
};

struct QpKind;
struct CqKind;
struct PollerKind;
struct SrqKind;
// A queue pair as the data path sees it (post_send, post_recv, post_error).
using QpQueue = FastPathQueue<QpKind>;
// A completion queue as the data path sees it (poll_cq).
using CqQueue = FastPathQueue<CqKind>;
// A thread's attachment to queue groups as the data path sees it (progress).
using PollerQueue = FastPathQueue<PollerKind>;
using SrqQueue = FastPathQueue<SrqKind>;

} // namespace prdma::rdma
