// Poller and Context::attach_poller: a thread's explicit claim on queue groups, driven with
// progress() (fastpath.hpp) until it detaches.
#include <utility>

#include <prdma/format.hpp>
#include <prdma/rdmadev/rdmadev.hpp>

#include "objects.hpp"

namespace prdma::rdma {

Poller::Poller(std::shared_ptr<detail::ContextState> context, DeviceId device, void* driver,
               std::optional<std::uint16_t> group) noexcept
    : PollerQueue(device, driver), context_(std::move(context)), group_(group) {}

Poller::Poller(Poller&& other) noexcept
    : PollerQueue(std::exchange(other.device_, invalid_device),
                  std::exchange(other.driver_, nullptr)),
      context_(std::move(other.context_)), group_(std::exchange(other.group_, std::nullopt)) {}

Poller& Poller::operator=(Poller&& other) noexcept {
    if (this != &other) {
        detach();
        device_ = std::exchange(other.device_, invalid_device);
        driver_ = std::exchange(other.driver_, nullptr);
        context_ = std::move(other.context_);
        group_ = std::exchange(other.group_, std::nullopt);
    }
    return *this;
}

Poller::~Poller() {
    detach();
}

void Poller::detach() noexcept {
    if (driver_ == nullptr) {
        return;
    }
    // A removed device's driver freed its pollers when it closed.
    (void)detail::with_live_device(
        device_, [&](driver::Device& dev) { dev.config.ops->detach_poller(dev, driver_); });
    driver_ = nullptr;
    device_ = invalid_device;
    group_.reset();
    context_.reset();
}

Result<Poller> Context::attach_poller(std::optional<std::uint16_t> group) {
    if (!state_) {
        return detail::context_closed_error();
    }
    driver::Device* dev = detail::live_device(*state_);
    if (dev == nullptr) {
        return detail::device_removed_error(state_->device);
    }
    if (dev->config.ops->attach_poller == nullptr) {
        return Error(StatusCode::not_supported,
                     strformat("device %s has no explicit pollers: poll its CQs instead",
                               dev->config.name.c_str()));
    }
    const std::uint32_t groups = dev->config.attr.max_queue_groups;
    if (group && *group >= groups) {
        return Error(StatusCode::invalid_parameter,
                     strformat("queue group %u does not exist; the device has %u (devarg queues=)",
                               static_cast<unsigned>(*group), groups));
    }
    void* driver = nullptr;
    if (Status attached = dev->config.ops->attach_poller(*dev, group, &driver); !attached.ok()) {
        return attached.error();
    }
    return Poller(state_, state_->device, driver, group);
}

} // namespace prdma::rdma
