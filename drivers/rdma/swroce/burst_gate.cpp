#include "burst_gate.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstring>
#include <linux/membarrier.h>
#include <memory>
#include <mutex>
#include <sys/syscall.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include <rte_alarm.h>
#include <rte_errno.h>

#include <prdma/format.hpp>

#include "swroce_log.hpp"

namespace prdma::swroce::burst_gate {

std::atomic<std::uint8_t> open{1};

namespace {

struct Gate {
    // Serialises attach and detach, including detach's wait for a park under way; never taken
    // on the interrupt thread's park, which takes `list_mutex` only.
    std::mutex control_mutex;
    std::mutex list_mutex;
    std::vector<GatedBursts*> attached; // under list_mutex
    bool parking = false;               // under control_mutex: park() is set or running
    bool membarrier_ready = false;      // under control_mutex
    // A park sleeps on `wake` until its time is up or detach() sets `stop`: one wakeup per park.
    // Sleeping in short slices instead woke the interrupt thread every millisecond, and each
    // wakeup took the CPU from the lcore polling beside it (a third of a 64 B write_bw's rate on
    // a 2-core machine).
    std::mutex park_mutex;
    std::condition_variable wake;
    bool stop = false; // under park_mutex
    std::atomic<std::uint64_t> windows{0};
};

// Never destroyed: a program that exits without closing its ports (std::exit, a return from main
// with EAL still up) runs static destructors while the interrupt thread may be parked on `wake`;
// glibc's pthread_cond_destroy then waits for that waiter, which afterwards would use a destroyed
// Gate.
Gate& gate() {
    alignas(Gate) static std::byte storage[sizeof(Gate)];
    static Gate* const g = std::construct_at(reinterpret_cast<Gate*>(storage));
    return *g;
}

long membarrier(int cmd) {
    return syscall(__NR_membarrier, cmd, 0U, 0);
}

Status register_membarrier() {
    const long supported = membarrier(MEMBARRIER_CMD_QUERY);
    if (supported < 0 || (supported & MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0) {
        return Error(StatusCode::not_supported,
                     "the kernel has no private expedited membarrier(2) (Linux 4.14 or later)");
    }
    if (membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) != 0) {
        return Error(
            StatusCode::internal,
            strformat("membarrier(REGISTER_PRIVATE_EXPEDITED) failed: %s", std::strerror(errno)));
    }
    return {};
}

// After the store, membarrier makes every running thread execute a full barrier: an lcore whose
// enter() store of `inside` came before it is seen below, and one whose store came after loads
// the closed gate. Either way no burst is under way once the loop ends.
void close_gate(Gate& g) {
    open.store(0, std::memory_order_relaxed);
    (void)membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED); // registered at attach: cannot fail
    const std::lock_guard lock(g.list_mutex);
    for (GatedBursts* bursts : g.attached) {
        for (BurstSlot& slot : bursts->slots) {
            while (slot.inside.load(std::memory_order_acquire) != 0) {
                std::this_thread::yield(); // a preempted lcore needs this CPU to finish its burst
            }
        }
    }
    g.windows.fetch_add(1, std::memory_order_relaxed);
}

void park(void* /*unused*/) {
    Gate& g = gate();
    // Entered from the EAL loop: whatever else the thread had pending has run in the window.
    open.store(1, std::memory_order_release);
    {
        std::unique_lock lock(g.park_mutex);
        if (g.wake.wait_for(lock, std::chrono::microseconds(park_us), [&g] { return g.stop; })) {
            return; // detach() ends the parking with the gate open
        }
    }
    close_gate(g);
    if (int ret = rte_eal_alarm_set(window_us, park, nullptr); ret != 0) {
        // Without the next park the gate would stay closed for good: ungated beats stalled.
        open.store(1, std::memory_order_release);
        SWROCE_LOG(ERR, "burst gate: cannot set the EAL alarm (%s); memif ports run ungated",
                   rte_strerror(-ret));
    }
}

} // namespace

Status attach(GatedBursts& bursts) {
    Gate& g = gate();
    const std::lock_guard control(g.control_mutex);
    if (!g.membarrier_ready) {
        if (Status st = register_membarrier(); !st.ok()) {
            return st;
        }
        g.membarrier_ready = true;
    }
    {
        const std::lock_guard lock(g.list_mutex);
        g.attached.push_back(&bursts);
    }
    if (!g.parking) {
        // Closed until the first park opens it: callbacks that run before it find no burst.
        close_gate(g);
        {
            const std::lock_guard lock(g.park_mutex);
            g.stop = false;
        }
        if (int ret = rte_eal_alarm_set(window_us, park, nullptr); ret != 0) {
            const std::lock_guard lock(g.list_mutex);
            std::erase(g.attached, &bursts);
            open.store(1, std::memory_order_release);
            return Error(
                StatusCode::internal,
                strformat("rte_eal_alarm_set (burst gate) failed: %s", rte_strerror(-ret)));
        }
        g.parking = true;
    }
    return {};
}

void detach(GatedBursts& bursts) noexcept {
    Gate& g = gate();
    const std::lock_guard control(g.control_mutex);
    bool last = false;
    {
        const std::lock_guard lock(g.list_mutex);
        std::erase(g.attached, &bursts);
        last = g.attached.empty();
    }
    if (!last || !g.parking) {
        return;
    }
    {
        const std::lock_guard lock(g.park_mutex);
        g.stop = true;
    }
    g.wake.notify_all();
    // Removes a park that is set, or waits for the one running to see `stop` (on the interrupt
    // thread itself nothing of ours runs, so nothing is waited for).
    (void)rte_eal_alarm_cancel(park, nullptr);
    g.parking = false;
    open.store(1, std::memory_order_release);
}

std::uint64_t windows() noexcept {
    return gate().windows.load(std::memory_order_relaxed);
}

} // namespace prdma::swroce::burst_gate
