#include "interrupt_thread.hpp"

#include <atomic>
#include <thread>

#include <rte_alarm.h>
#include <rte_errno.h>
#include <rte_interrupts.h>

#include <prdma/format.hpp>

namespace prdma {

namespace {

// One call handed to the interrupt thread. `done` is that thread's last touch of it: the caller
// may free it as soon as it reads true.
struct InterruptThreadCall {
    const std::function<void()>* action = nullptr;
    std::atomic<bool> done{false};
};

void run_call(void* arg) {
    auto* call = static_cast<InterruptThreadCall*>(arg);
    (*call->action)();
    call->done.store(true, std::memory_order_release);
}

} // namespace

Status run_on_interrupt_thread(const std::function<void()>& action,
                               std::chrono::milliseconds wait) {
    if (rte_thread_is_intr() != 0) {
        action();
        return {};
    }
    InterruptThreadCall call;
    call.action = &action;
    if (int ret = rte_eal_alarm_set(1, run_call, &call); ret != 0) {
        action();
        return Error(StatusCode::internal,
                     strformat("cannot reach the EAL interrupt thread (%s); ran on this thread",
                               rte_strerror(-ret)));
    }
    const auto deadline = std::chrono::steady_clock::now() + wait;
    while (!call.done.load(std::memory_order_acquire)) {
        // rte_eal_alarm_cancel removes an alarm not yet started and waits for one under way.
        if (std::chrono::steady_clock::now() > deadline &&
            rte_eal_alarm_cancel(run_call, &call) > 0) {
            action();
            return Error(StatusCode::busy, "the EAL interrupt thread is busy; ran on this thread");
        }
        std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    return {};
}

} // namespace prdma
