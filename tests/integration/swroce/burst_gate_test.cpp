// The burst gate on a real EAL: callbacks of the EAL interrupt thread (where memif unmaps its
// rings when the peer goes away) never run while an lcore is inside a gated burst, and the gate
// stands open again once the last gated port is gone.
#include <atomic>
#include <chrono>
#include <thread>

#include <gtest/gtest.h>
#include <rte_alarm.h>

#include "burst_gate.hpp"
#include "eal_environment.hpp"

namespace prdma::swroce {
namespace {

using namespace std::chrono_literals;

const auto* const g_environment =
    prdma::test_support::add_eal_environment("swroce_burst_gate_test", {}, [] {});

// Enters `slot` as an lcore does before a burst, retrying while a window holds the gate closed.
bool enter_within(BurstSlot& slot, std::chrono::milliseconds limit) {
    const auto until = std::chrono::steady_clock::now() + limit;
    while (!burst_gate::enter(slot)) {
        if (std::chrono::steady_clock::now() > until) {
            return false;
        }
        std::this_thread::sleep_for(100us);
    }
    return true;
}

template <typename Predicate>
bool becomes_true(Predicate done, std::chrono::milliseconds limit) {
    const auto until = std::chrono::steady_clock::now() + limit;
    while (!done()) {
        if (std::chrono::steady_clock::now() > until) {
            return false;
        }
        std::this_thread::sleep_for(1ms);
    }
    return true;
}

// What an interrupt-thread callback saw of the gate.
struct Probe {
    GatedBursts* bursts = nullptr;
    std::atomic<bool> ran{false};
    std::atomic<bool> could_enter{false};
};

void probe_gate(void* arg) {
    auto* probe = static_cast<Probe*>(arg);
    // Slot 1 is nobody's: entering it is what an lcore's next burst would do right now.
    BurstSlot& slot = probe->bursts->slots.at(1);
    if (burst_gate::enter(slot)) {
        probe->could_enter.store(true);
        burst_gate::leave(slot);
    }
    probe->ran.store(true);
}

TEST(BurstGate, InterruptThreadCallbacksWaitForTheBurstUnderWay) {
    GatedBursts bursts;
    ASSERT_TRUE(burst_gate::attach(bursts).ok());
    BurstSlot& slot = bursts.slots.at(0);
    ASSERT_TRUE(enter_within(slot, 1000ms)) << "the gate never opened";
    Probe probe{&bursts};
    ASSERT_EQ(rte_eal_alarm_set(1, probe_gate, &probe), 0);
    // Several park periods: the window that would run the callback waits for this burst.
    std::this_thread::sleep_for(std::chrono::microseconds(5 * burst_gate::park_us));
    EXPECT_FALSE(probe.ran.load()) << "an interrupt-thread callback ran inside a burst";
    burst_gate::leave(slot);
    EXPECT_TRUE(becomes_true([&] { return probe.ran.load(); }, 2000ms));
    EXPECT_FALSE(probe.could_enter.load()) << "the gate was open while the callback ran";
    burst_gate::detach(bursts);
}

TEST(BurstGate, OpensWindowsWhileAttachedAndStandsOpenAfter) {
    GatedBursts bursts;
    ASSERT_TRUE(burst_gate::attach(bursts).ok());
    const std::uint64_t before = burst_gate::windows();
    EXPECT_TRUE(becomes_true([&] { return burst_gate::windows() >= before + 3; }, 2000ms))
        << "the interrupt thread opened no windows";
    burst_gate::detach(bursts);
    const std::uint64_t after = burst_gate::windows();
    std::this_thread::sleep_for(std::chrono::microseconds(3 * burst_gate::park_us));
    EXPECT_EQ(burst_gate::windows(), after) << "still parking with nothing attached";
    BurstSlot& slot = bursts.slots.at(0);
    ASSERT_TRUE(burst_gate::enter(slot)) << "the gate stayed closed after the last detach";
    burst_gate::leave(slot);
    // Nothing attached: an interrupt-thread callback runs at once, with the gate open.
    Probe probe{&bursts};
    ASSERT_EQ(rte_eal_alarm_set(1, probe_gate, &probe), 0);
    EXPECT_TRUE(becomes_true([&] { return probe.ran.load(); }, 1000ms));
    EXPECT_TRUE(probe.could_enter.load());
}

TEST(BurstGate, TwoPortsShareOneParkingAndTheLastDetachEndsIt) {
    GatedBursts first;
    GatedBursts second;
    ASSERT_TRUE(burst_gate::attach(first).ok());
    ASSERT_TRUE(burst_gate::attach(second).ok());
    burst_gate::detach(first);
    // Still parking for `second`: a burst on it still holds callbacks back.
    BurstSlot& slot = second.slots.at(0);
    ASSERT_TRUE(enter_within(slot, 1000ms));
    Probe probe{&second};
    ASSERT_EQ(rte_eal_alarm_set(1, probe_gate, &probe), 0);
    std::this_thread::sleep_for(std::chrono::microseconds(3 * burst_gate::park_us));
    EXPECT_FALSE(probe.ran.load());
    burst_gate::leave(slot);
    EXPECT_TRUE(becomes_true([&] { return probe.ran.load(); }, 2000ms));
    burst_gate::detach(second);
    EXPECT_TRUE(burst_gate::enter(slot));
    burst_gate::leave(slot);
}

} // namespace
} // namespace prdma::swroce
