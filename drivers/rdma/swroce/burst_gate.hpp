// The burst gate: keeps every lcore out of a port's rx/tx bursts while the EAL interrupt thread
// runs driver callbacks, for drivers that unmap queue memory from that thread.
//
// Why: DPDK 22.11's memif runs its peer's disconnect on the interrupt thread; it clears
// "connected", then unmaps the shared rings and regions at once. An lcore that checked
// "connected" on entering a burst and is still inside it (or was preempted there) then reads or
// writes unmapped memory and the process dies with SIGSEGV. Nothing of memif's can be locked
// from outside, and its callback cannot be made to run after one of ours; but every callback on
// that thread runs one after another. So the gate parks the interrupt thread in an alarm
// callback of its own with the gate open, and lets the other callbacks run only in short windows
// with the gate closed and no lcore inside a gated burst:
//
//   parked (gate open, `park_us`) -> close gate, wait for lcores to leave -> window (`window_us`:
//   memif's disconnect, link polls, stops run here) -> next park opens the gate again.
//
// The lcore side costs one plain store and one load per burst: the interrupt thread pays for the
// ordering with membarrier(2), which runs a full barrier on every thread of the process (the
// asymmetric fence of userspace RCU), so neither side needs a locked instruction per burst.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>

#include <rte_config.h>

#include <prdma/build_config.hpp>
#include <prdma/status.hpp>

namespace prdma::swroce {

// One per queue group of a gated port: written by the group's lcore, read by the interrupt thread.
struct alignas(RTE_CACHE_LINE_SIZE) BurstSlot {
    std::atomic<std::uint8_t> inside{0};
};

struct GatedBursts {
    std::array<BurstSlot, PRDMA_MAX_QUEUE_GROUPS> slots{};
};

namespace burst_gate {

// How long the interrupt thread stays parked with the gate open, and how long each window for
// other callbacks lasts. Memif's connection handshake advances once per window at each end
// (a connect takes a few tens of milliseconds longer); a window stalls the gated ports' lcores
// for about `window_us` every `park_us`.
inline constexpr std::uint64_t park_us = 10'000;
inline constexpr std::uint64_t window_us = 50;

// Open while no gated port exists, and while the interrupt thread is parked.
extern std::atomic<std::uint8_t> open;

// Fast path. True when the caller may burst; then leave() must follow the burst.
inline bool enter(BurstSlot& slot) noexcept {
    slot.inside.store(1, std::memory_order_relaxed);
    // Only the compiler is kept from reordering here: the interrupt thread's membarrier orders
    // this store before the load below on the CPU (see close()).
    std::atomic_signal_fence(std::memory_order_seq_cst);
    if (open.load(std::memory_order_acquire) != 0) {
        return true;
    }
    slot.inside.store(0, std::memory_order_relaxed);
    return false;
}

inline void leave(BurstSlot& slot) noexcept {
    slot.inside.store(0, std::memory_order_release);
}

// Control path. Puts `bursts` under the gate, starting the parking on the first one. Fails when
// the kernel has no private expedited membarrier (the port then runs ungated; the caller says so).
Status attach(GatedBursts& bursts);
// Takes `bursts` out from under the gate; stops parking with the last one. Waits for a park
// under way to end (it is woken at once). The port must not be burst on any more.
void detach(GatedBursts& bursts) noexcept;
// Windows the interrupt thread has opened since the process started: tests see the gate work.
std::uint64_t windows() noexcept;

} // namespace burst_gate
} // namespace prdma::swroce
