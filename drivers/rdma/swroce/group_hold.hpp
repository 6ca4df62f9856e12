// GroupHold: the control path's right to act on a queue group directly (ENGINE.md "Ownership").
// A group's `owner` word is 0 (no thread polls it), a thread's token (that thread polls it), or a
// token with control_hold_bit set (that thread's control path is acting on it right now), or a
// device's progress service's token for the length of one progress (service.cpp). The
// control path takes an unpolled group with a compare-and-swap for the length of its action, so a
// thread's first poll cannot claim the group in the middle of it: that poll finds the hold,
// returns nothing, and claims the group on a later poll. Release/acquire on the word orders what
// the control path wrote before the owner's first burst.
#pragma once

#include <atomic>
#include <cstdint>

#include <rte_cycles.h>
#include <rte_pause.h>

#include "swroce_device.hpp"

namespace prdma::swroce {

class GroupHold {
public:
    // Granted when no thread polls the group (taken now, given back by the destructor), when the
    // calling thread polls it, or when this thread already holds it (nested: the outer hold
    // gives it back). Not granted when another thread polls it or holds it.
    GroupHold(SwroceDevice& dev, unsigned group) noexcept {
        std::atomic<std::uintptr_t>& owner = dev.groups[group]->owner;
        const std::uintptr_t me = this_thread_token();
        std::uintptr_t current = owner.load(std::memory_order_acquire);
        if (current == me || current == (me | control_hold_bit)) {
            granted_ = true;
            return;
        }
        if (dev.service_id) {
            wait_for_turn(dev, group, me);
            return;
        }
        // seq_cst, as the claim's: deregistration relies on one of the two seeing the other.
        if (current == 0 && owner.compare_exchange_strong(current, me | control_hold_bit,
                                                          std::memory_order_seq_cst)) {
            taken_ = &owner;
            granted_ = true;
            run_left_requests(dev, group);
        }
    }
    ~GroupHold() {
        if (taken_ != nullptr) {
            taken_->store(0, std::memory_order_release);
        }
    }
    GroupHold(const GroupHold&) = delete;
    GroupHold& operator=(const GroupHold&) = delete;

    explicit operator bool() const noexcept { return granted_; }

private:
    // progress=service: the service holds the group for one progress at a time (microseconds)
    // and leaves it alone while a hold is wanted, so the hold comes; not granted only if it has
    // not come in 100 ms (another control thread holding the group that long).
    void wait_for_turn(SwroceDevice& dev, unsigned group, std::uintptr_t me) noexcept {
        QueueGroupState& state = *dev.groups[group];
        state.holds_wanted.fetch_add(1, std::memory_order_seq_cst);
        const std::uint64_t deadline = rte_get_tsc_cycles() + rte_get_tsc_hz() / 10;
        do {
            std::uintptr_t idle = 0;
            if (state.owner.compare_exchange_strong(idle, me | control_hold_bit,
                                                    std::memory_order_seq_cst)) {
                taken_ = &state.owner;
                granted_ = true;
                break;
            }
            rte_pause();
        } while (rte_get_tsc_cycles() < deadline);
        state.holds_wanted.fetch_sub(1, std::memory_order_release);
        if (granted_) {
            run_left_requests(dev, group);
        }
    }

    std::atomic<std::uintptr_t>* taken_ = nullptr;
    bool granted_ = false;
};

} // namespace prdma::swroce
