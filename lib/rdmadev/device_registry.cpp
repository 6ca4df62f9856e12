// The device table: slots indexed by DeviceId, the fast-path entries, and the calls drivers make
// into the class (register, unregister, complete_control, raise_event).
#include <algorithm>
#include <array>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include <rte_bus_vdev.h>
#include <rte_dev.h>
#include <rte_devargs.h>
#include <rte_errno.h>

#include <prdma/format.hpp>
#include <prdma/rdmadev/fastpath.hpp>

#include "objects.hpp"
#include "rdmadev_log.hpp"

PRDMA_LOG_REGISTER(prdma_logtype_rdmadev, prdma.rdmadev);

namespace prdma::rdma {

FastPathOps fast_path_ops[max_devices];

namespace {

// A removed or unused device's bursts take nothing, as ethdev's dummy ops do.
std::uint16_t dummy_post_send(void*, const SendWr*, std::uint16_t) {
    return 0;
}
std::uint16_t dummy_post_recv(void*, const RecvWr*, std::uint16_t) {
    return 0;
}
std::uint16_t dummy_poll_cq(void*, WorkCompletion*, std::uint16_t) {
    return 0;
}

std::uint16_t dummy_post_srq_recv(void*, const RecvWr*, std::uint16_t, StatusCode* reason) {
    *reason = StatusCode::device_removed;
    return 0;
}

constexpr FastPathOps dummy_ops{.post_send = dummy_post_send,
                                .post_recv = dummy_post_recv,
                                .poll_cq = dummy_poll_cq,
                                .device_private = nullptr,
                                .post_srq_recv = dummy_post_srq_recv};

struct Slot {
    std::unique_ptr<driver::Device> device;
    std::map<std::uint32_t, detail::ContextState*> contexts; // by context id
};

struct Registry {
    std::mutex mutex; // control path only: probe and remove can run on EAL's threads
    std::array<Slot, max_devices> slots;
    std::uint32_t next_context_id = 1;
    std::map<std::string, Error> probe_errors; // by device name, until create_device reads it

    Registry() { std::fill(std::begin(fast_path_ops), std::end(fast_path_ops), dummy_ops); }
};

Registry& registry() {
    static Registry instance;
    return instance;
}

void free_slot_if_unused(Slot& slot) {
    if (slot.device && slot.device->removed && slot.contexts.empty()) {
        slot.device.reset();
    }
}

} // namespace

namespace detail {

driver::Device* live_device(const ContextState& context) {
    driver::Device* dev = driver::device(context.device);
    return dev != nullptr && !dev->removed ? dev : nullptr;
}

std::string device_args_of(const driver::Device& dev) {
    if (dev.config.dpdk_device == nullptr) {
        return {};
    }
    const rte_devargs* args = rte_dev_devargs(dev.config.dpdk_device);
    return args != nullptr && args->args != nullptr ? std::string(args->args) : std::string();
}

bool with_live_device(DeviceId device, const std::function<void(driver::Device&)>& use) {
    Registry& reg = registry();
    const std::lock_guard lock(reg.mutex);
    if (device >= max_devices || !reg.slots[device].device || reg.slots[device].device->removed) {
        return false;
    }
    // Under the lock a device cannot be unregistered: its driver is not closed before `use` ends.
    use(*reg.slots[device].device);
    return true;
}

Error device_removed_error(DeviceId device) {
    return {StatusCode::device_removed,
            strformat("device %u was removed; release every resource and close the context",
                      static_cast<unsigned>(device))};
}

// Context registration, used by Context::open and ~ContextState.
std::uint32_t attach_context(DeviceId device, ContextState* context) {
    Registry& reg = registry();
    const std::lock_guard lock(reg.mutex);
    const std::uint32_t id = reg.next_context_id++;
    reg.slots[device].contexts.emplace(id, context);
    return id;
}

void detach_context(DeviceId device, std::uint32_t id) {
    Registry& reg = registry();
    const std::lock_guard lock(reg.mutex);
    if (device >= max_devices) {
        return;
    }
    Slot& slot = reg.slots[device];
    slot.contexts.erase(id);
    free_slot_if_unused(slot);
}

ContextState::~ContextState() {
    detach_context(device, id);
}

} // namespace detail

namespace driver {

void report_probe_error(const char* device_name, const Error& error) {
    RDMADEV_LOG(ERR, "%s: %s", device_name, error.to_string().c_str());
    Registry& reg = registry();
    const std::lock_guard lock(reg.mutex);
    reg.probe_errors.insert_or_assign(device_name, error);
}

Device* device(DeviceId id) {
    if (id >= max_devices) {
        return nullptr;
    }
    return registry().slots[id].device.get();
}

Device* device_by_dpdk(const rte_device* dpdk_device) {
    for (Slot& slot : registry().slots) {
        if (slot.device && !slot.device->removed &&
            slot.device->config.dpdk_device == dpdk_device) {
            return slot.device.get();
        }
    }
    return nullptr;
}

Result<DeviceId> register_device(DeviceConfig config) {
    if (config.ops == nullptr || config.fast_path.post_send == nullptr ||
        config.fast_path.post_recv == nullptr || config.fast_path.poll_cq == nullptr) {
        return Error(StatusCode::invalid_parameter,
                     strformat("driver for '%s' left ops or fast-path functions empty",
                               config.name.c_str()));
    }
    if (config.port_count == 0) {
        return Error(StatusCode::invalid_parameter, "a device needs at least one port");
    }
    auto mem_registry = mem::MemoryRegistry::create(config.registry);
    if (!mem_registry) {
        return mem_registry.error();
    }
    Registry& reg = registry();
    const std::lock_guard lock(reg.mutex);
    for (const Slot& slot : reg.slots) {
        if (slot.device && !slot.device->removed && slot.device->config.name == config.name) {
            return Error(StatusCode::busy,
                         strformat("an rdma device named '%s' exists", config.name.c_str()));
        }
    }
    for (DeviceId id = 0; id < max_devices; ++id) {
        Slot& slot = reg.slots[id];
        if (slot.device) {
            continue;
        }
        auto dev = std::make_unique<Device>();
        dev->id = id;
        dev->config = std::move(config);
        dev->registry = std::move(mem_registry.value());
        fast_path_ops[id] = dev->config.fast_path;
        RDMADEV_LOG(INFO, "device %u: %s", static_cast<unsigned>(id), dev->config.name.c_str());
        slot.device = std::move(dev);
        return id;
    }
    return Error(
        StatusCode::no_resources,
        strformat("all %u rdma device slots are in use (build option max_devices)", max_devices));
}

Status unregister_device(DeviceId id) {
    Registry& reg = registry();
    std::unique_lock lock(reg.mutex);
    if (id >= max_devices || !reg.slots[id].device || reg.slots[id].device->removed) {
        return Error(StatusCode::invalid_parameter,
                     strformat("no rdma device %u", static_cast<unsigned>(id)));
    }
    Slot& slot = reg.slots[id];
    Device& dev = *slot.device;
    dev.removed = true;
    fast_path_ops[id] = dummy_ops;
    std::vector<std::weak_ptr<detail::ContextState>> contexts;
    for (auto& [context_id, context] : slot.contexts) {
        context->events.push_back(Event{EventType::device_removed, 0, 0});
        contexts.push_back(context->weak_from_this());
    }
    lock.unlock();
    // The driver frees its queues; the class objects stay until their clients release them.
    dev.config.ops->close(dev);
    // Requests the driver will never finish now complete with device_removed (outside the lock:
    // finishing may free a context, which detaches itself).
    for (const auto& weak : contexts) {
        if (const std::shared_ptr<detail::ContextState> context = weak.lock()) {
            detail::fail_pending_requests(*context);
        }
    }
    RDMADEV_LOG(INFO, "device %u removed", static_cast<unsigned>(id));
    lock.lock();
    free_slot_if_unused(slot);
    return {};
}

void raise_event(Device& device, EventType type, std::uint8_t port, std::uint32_t qpn,
                 std::uint32_t srqn) {
    Registry& reg = registry();
    const std::lock_guard lock(reg.mutex);
    for (auto& [id, context] : reg.slots[device.id].contexts) {
        // A QP's or SRQ's events belong to the client that holds it (ibv_get_async_event's
        // context); one destroyed since the device recorded the event has nobody left to tell.
        const bool for_all = qpn == 0 && srqn == 0;
        if (for_all || (qpn != 0 && context->qps.contains(qpn)) ||
            (srqn != 0 && context->srqs.contains(srqn))) {
            context->events.push_back(Event{type, port, qpn, srqn});
        }
    }
}

} // namespace driver

namespace detail {

ContextState* find_context(DeviceId device, std::uint32_t id) {
    Registry& reg = registry();
    const std::lock_guard lock(reg.mutex);
    if (device >= max_devices) {
        return nullptr;
    }
    auto& contexts = reg.slots[device].contexts;
    auto it = contexts.find(id);
    return it == contexts.end() ? nullptr : it->second;
}

} // namespace detail

// ---- public device functions ------------------------------------------------------------------

unsigned device_count() {
    Registry& reg = registry();
    const std::lock_guard lock(reg.mutex);
    return static_cast<unsigned>(
        std::count_if(reg.slots.begin(), reg.slots.end(),
                      [](const Slot& s) { return s.device && !s.device->removed; }));
}

std::vector<DeviceId> device_list() {
    Registry& reg = registry();
    const std::lock_guard lock(reg.mutex);
    std::vector<DeviceId> ids;
    for (DeviceId id = 0; id < max_devices; ++id) {
        if (reg.slots[id].device && !reg.slots[id].device->removed) {
            ids.push_back(id);
        }
    }
    return ids;
}

Result<DeviceId> find_device(std::string_view name) {
    Registry& reg = registry();
    const std::lock_guard lock(reg.mutex);
    for (DeviceId id = 0; id < max_devices; ++id) {
        const auto& dev = reg.slots[id].device;
        if (dev && !dev->removed && dev->config.name == name) {
            return id;
        }
    }
    return Error(
        StatusCode::invalid_parameter,
        strformat("no rdma device named '%.*s'", static_cast<int>(name.size()), name.data()));
}

std::string device_name(DeviceId device) {
    const driver::Device* dev = driver::device(device);
    return dev != nullptr ? dev->config.name : std::string();
}

std::string device_args(DeviceId device) {
    const driver::Device* dev = driver::device(device);
    return dev != nullptr ? detail::device_args_of(*dev) : std::string();
}

Result<DeviceId> create_device(std::string_view devargs) {
    const std::string text(devargs);
    const auto comma = text.find(',');
    const std::string name = text.substr(0, comma);
    const std::string args = comma == std::string::npos ? std::string() : text.substr(comma + 1);
    if (name.empty()) {
        return Error(StatusCode::invalid_parameter, "devargs must start with a device name");
    }
    {
        Registry& reg = registry();
        const std::lock_guard lock(reg.mutex);
        reg.probe_errors.erase(name);
    }
    const int rc = rte_vdev_init(name.c_str(), args.c_str());
    if (rc != 0) {
        Registry& reg = registry();
        const std::lock_guard lock(reg.mutex);
        if (auto it = reg.probe_errors.find(name); it != reg.probe_errors.end()) {
            Error error = it->second;
            reg.probe_errors.erase(it);
            return error;
        }
        return Error(rc == -EEXIST ? StatusCode::busy : StatusCode::invalid_parameter,
                     strformat("cannot create '%s' (%s): see the driver's log line above",
                               name.c_str(), rte_strerror(-rc)));
    }
    auto id = find_device(name);
    if (!id) {
        (void)rte_vdev_uninit(name.c_str());
        return Error(StatusCode::not_supported,
                     strformat("'%s' was probed but is not an rdma device", name.c_str()));
    }
    return id;
}

Status remove_device(DeviceId device) {
    driver::Device* dev = driver::device(device);
    if (dev == nullptr || dev->removed) {
        return Error(StatusCode::invalid_parameter,
                     strformat("no rdma device %u", static_cast<unsigned>(device)));
    }
    // Through the bus, as a hot-unplug would: the driver's remove calls unregister_device().
    if (dev->config.dpdk_device != nullptr) {
        const int rc = rte_dev_remove(dev->config.dpdk_device);
        if (rc != 0) {
            return Error(
                StatusCode::internal,
                strformat("rte_dev_remove(%s): %s", dev->config.name.c_str(), rte_strerror(-rc)));
        }
        return {};
    }
    return driver::unregister_device(device);
}

#if PRDMA_DEBUG_FASTPATH
bool fastpath_args_valid(DeviceId device, const void* queue, const void* items,
                         std::uint16_t count) {
    if (device >= max_devices || queue == nullptr || (items == nullptr && count != 0)) {
        RDMADEV_LOG(ERR, "fast path: bad arguments (device %u, queue %p, items %p, count %u)",
                    static_cast<unsigned>(device), queue, items, static_cast<unsigned>(count));
        return false;
    }
    return true;
}
#endif

} // namespace prdma::rdma
