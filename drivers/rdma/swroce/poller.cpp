// Explicit pollers (Context::attach_poller): a thread takes queue groups by swapping its token
// into their owner words, drives them with progress() until it detaches, and meanwhile other
// threads' posts ring the groups' doorbells and their CQ polls only reap (swroce_fastpath.cpp).
// What a thread's first CQ poll does implicitly, said out loud, with a way back.
#include <memory>
#include <mutex>

#include <prdma/format.hpp>

#include "engine.hpp"

namespace prdma::swroce {

namespace {

SwroceDevice& swroce(rdma::driver::Device& device) {
    return *static_cast<SwroceDevice*>(device.driver_private());
}

// Gives back the groups [first, end) that `token` holds.
void release_groups(SwroceDevice& dev, std::uintptr_t token, unsigned first,
                    unsigned end) noexcept {
    for (unsigned group = first; group < end; ++group) {
        std::uintptr_t held = token;
        (void)dev.groups[group]->owner.compare_exchange_strong(held, 0, std::memory_order_release);
    }
}

Error driven_elsewhere(const SwroceDevice& dev, unsigned group, std::uintptr_t owner) {
    const char* who = (owner & control_hold_bit) != 0
                          ? "a control call of another thread is acting on it right now"
                          : "another thread drives it (its poller, or its first poll of a CQ "
                            "of that group); that thread must detach first";
    return {StatusCode::busy,
            strformat("%s: queue group %u cannot be attached: %s", dev.name.c_str(), group, who)};
}

} // namespace

Status attach_poller(rdma::driver::Device& device, std::optional<std::uint16_t> group,
                     void** poller) {
    SwroceDevice& dev = swroce(device);
    if (dev.service_id) {
        return Error(StatusCode::busy,
                     dev.name + ": progress=service: a service lcore drives every queue group; "
                                "poll CQs to reap, or leave progress=service out to attach");
    }
    auto made = std::make_unique<SwrocePoller>();
    made->device = &dev;
    made->token = this_thread_token();
    made->first_group = group.value_or(0);
    made->end_group = group ? *group + 1U : static_cast<unsigned>(dev.groups.size());
    for (unsigned g = made->first_group; g < made->end_group; ++g) {
        std::uintptr_t owner = 0;
        // seq_cst, as a CQ poll's claim: deregistration's GroupHold relies on it.
        if (!dev.groups[g]->owner.compare_exchange_strong(owner, made->token,
                                                          std::memory_order_seq_cst) &&
            owner != made->token) {
            release_groups(dev, made->token, made->first_group, g);
            return driven_elsewhere(dev, g, owner);
        }
    }
    // A poller that detached before running them may have left requests: they go first.
    for (unsigned g = made->first_group; g < made->end_group; ++g) {
        run_left_requests(dev, g);
    }
    *poller = made.get();
    const std::lock_guard lock(dev.poller_mutex);
    dev.pollers.push_back(std::move(made));
    return {};
}

void detach_poller(rdma::driver::Device& device, void* poller) {
    SwroceDevice& dev = swroce(device);
    const auto& p = *static_cast<SwrocePoller*>(poller);
    release_groups(dev, p.token, p.first_group, p.end_group);
    const std::lock_guard lock(dev.poller_mutex);
    std::erase_if(dev.pollers, [&](const auto& owned) { return owned.get() == poller; });
}

std::uint32_t swroce_progress(void* poller) {
    const auto& p = *static_cast<const SwrocePoller*>(poller);
    std::uint32_t received = 0;
    for (unsigned group = p.first_group; group < p.end_group; ++group) {
        received += progress_group(*p.device, group);
    }
    return received;
}

} // namespace prdma::swroce
