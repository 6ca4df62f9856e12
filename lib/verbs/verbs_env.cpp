// The shim's process state: EAL started from PRDMA_EAL_ARGS and prdma's devices as libibverbs
// lists them.
#include <array>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <endian.h>
#include <mutex>
#include <sstream>
#include <thread>
#include <unordered_map>

#include <rte_ethdev.h>

#include <prdma/format.hpp>

#include "verbs_shim.hpp"

namespace prdma::verbs {

namespace {

std::vector<std::string> split_words(const char* text) {
    std::vector<std::string> words;
    std::istringstream in(text);
    for (std::string word; in >> word;) {
        words.push_back(word);
    }
    return words;
}

void copy_name(char* to, std::size_t room, const std::string& from) {
    std::snprintf(to, room, "%s", from.c_str());
}

std::unique_ptr<ShimDevice> make_device(rdma::DeviceId id) {
    auto shim = std::make_unique<ShimDevice>();
    shim->id = id;
    const std::string name = rdma::device_name(id);
    ibv_device& device = shim->device;
    device.node_type = IBV_NODE_CA;
    device.transport_type = IBV_TRANSPORT_IB; // RoCE: IB transport over an Ethernet link layer
    copy_name(device.name, sizeof(device.name), name);
    copy_name(device.dev_name, sizeof(device.dev_name), "prdma_" + std::to_string(id));
    // No kernel device stands behind it: sysfs reads under these paths find nothing.
    copy_name(device.dev_path, sizeof(device.dev_path), "/sys/class/infiniband_verbs/" + name);
    copy_name(device.ibdev_path, sizeof(device.ibdev_path), "/sys/class/infiniband/" + name);
    if (Result<rdma::Context> context = rdma::Context::open(id); context.ok()) {
        if (Result<rdma::DeviceInfo> info = context.value().device_info(); info.ok()) {
            shim->node_guid = htobe64(info.value().attr.node_guid);
        }
    }
    return shim;
}

// DPDK 22.11's memif frees its socket's interrupt handle when the port is removed, even while its
// disconnect callback for a peer that just left runs on the EAL interrupt thread, which then reads
// freed memory. A verbs program exits right after its peer (perftest's server after its client),
// so before EAL stops, the peer's departure is given time to be handled: until every port's link
// is down (memif's disconnect says so first), then a little more, for at most 300 ms.
void settle_departed_peers() {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
    for (;;) {
        bool any_up = false;
        std::uint16_t port = 0;
        RTE_ETH_FOREACH_DEV(port) {
            rte_eth_link link{};
            any_up |= rte_eth_link_get_nowait(port, &link) == 0 && link.link_status != 0;
        }
        if (!any_up || std::chrono::steady_clock::now() > deadline) {
            break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
}

// PRDMA_STATS=1: each device's counters that moved, on stderr as the program exits. perftest and
// the pingpongs print nothing of the device's, and what it did under loss (retransmissions,
// selective_resends, read_repairs) or what it refused is otherwise lost with the process.
void print_device_stats(const ShimState& state) {
    const char* text = std::getenv("PRDMA_STATS");
    if (text == nullptr || std::strcmp(text, "1") != 0) {
        return;
    }
    for (const auto& device : state.devices) {
        Result<rdma::Context> context = rdma::Context::open(device->id);
        Result<std::vector<rdma::Counter>> counters =
            context.ok() ? context.value().query_stats()
                         : Result<std::vector<rdma::Counter>>(context.error());
        const std::string name = rdma::device_name(device->id);
        if (!counters.ok()) {
            std::fprintf(stderr, "prdma-verbs: %s: no counters: %s\n", name.c_str(),
                         counters.error().message().c_str());
            continue;
        }
        std::fprintf(stderr, "prdma-verbs: %s counters at exit:\n", name.c_str());
        for (const rdma::Counter& counter : counters.value()) {
            if (counter.value != 0) {
                std::fprintf(stderr, "  %s=%llu\n", counter.name.c_str(),
                             static_cast<unsigned long long>(counter.value));
            }
        }
    }
}

// A verbs program expects its port up when it opens the device (perftest refuses a port that is
// down), where a memif port comes up only once the peer's process has started. Each device's
// first port is given PRDMA_LINK_WAIT seconds (default 10, 0: no wait) to come up.
void wait_for_links(const ShimState& state) {
    const char* text = std::getenv("PRDMA_LINK_WAIT");
    const long seconds = text != nullptr ? std::strtol(text, nullptr, 10) : 10;
    if (seconds <= 0) {
        return;
    }
    for (const auto& device : state.devices) {
        Result<rdma::Context> context = rdma::Context::open(device->id);
        if (context.ok()) {
            (void)rdma::wait_port_active(context.value(), 1, std::chrono::seconds(seconds));
        }
    }
}

void bring_up(ShimState& state) {
    const char* args = std::getenv("PRDMA_EAL_ARGS");
    if (args == nullptr || *args == '\0') {
        state.error = "PRDMA_EAL_ARGS is not set: give it the EAL arguments that create the "
                      "devices, e.g. \"--vdev=net_memif0,... "
                      "--vdev=rdma_swroce0,port=net_memif0,ip=...,progress=service -s 0x2\"";
        return;
    }
    EalOptions options;
    options.program_name = "prdma-verbs";
    options.args = split_words(args);
    Result<Eal> eal = Eal::start(options);
    if (!eal.ok()) {
        state.error = "EAL did not start from PRDMA_EAL_ARGS: " + eal.error().message();
        return;
    }
    state.eal.emplace(std::move(eal.value()));
    for (rdma::DeviceId id : rdma::device_list()) {
        state.devices.push_back(make_device(id));
    }
    // At exit the devices go (peers see their ports close) before the statics prdma made while
    // EAL started are destroyed: they were made after this state, so they would go first.
    std::atexit([] {
        settle_departed_peers();
        print_device_stats(shim_state());
        shim_state().eal->stop_for_exit();
    });
    wait_for_links(state);
    if (state.devices.empty()) {
        state.error = "PRDMA_EAL_ARGS creates no rdma device (add --vdev=rdma_swroce0,port=...)";
    }
}

} // namespace

ShimState& shim_state() {
    static ShimState state;
    static std::once_flag once;
    std::call_once(once, [] { bring_up(state); });
    return state;
}

ShimContext& shim_context(ibv_context* context) {
    // The ibv_context is the last member of the verbs_context that opens a ShimContext.
    verbs_context* vctx = verbs_get_ctx(context);
    return *reinterpret_cast<ShimContext*>(vctx); // NOLINT: the first member of a standard layout
}

bool hold_context(ShimContext& shim, const char* verb) {
    if ((shim.lifetime.load() & ShimContext::closed_bit) != 0) {
        refuse(verb, EBADF, "the context is closed");
        return false;
    }
    shim.lifetime.fetch_add(1);
    return true;
}

// Whoever leaves the context closed with nothing on it frees it (once: one word holds both).
void release_context(ShimContext& shim) {
    if (shim.lifetime.fetch_sub(1) == (ShimContext::closed_bit | 1U)) {
        delete &shim; // NOLINT(cppcoreguidelines-owning-memory): ibv_open_device's allocation
    }
}

ShimContext::~ShimContext() {
    stop_async_events(*this);
    if (device != nullptr) {
        // The device's other contexts may be mid-call, and their control progress finds this
        // client's state through the device until it is gone.
        const std::lock_guard lock(device->control_mutex);
        const rdma::Context gone = std::move(context);
    }
    pthread_mutex_destroy(&vctx.context.mutex);
}

void close_context(ShimContext& shim) {
    if (shim.lifetime.fetch_or(ShimContext::closed_bit) == 0) {
        delete &shim; // NOLINT(cppcoreguidelines-owning-memory): see release_context
    }
}

namespace {

struct Kept {
    std::mutex mutex;
    std::unordered_map<const void*, std::shared_ptr<void>> owners;
};
Kept& kept() {
    static Kept all;
    return all;
}

} // namespace

void keep_erased(const void* key, std::shared_ptr<void> owner) {
    Kept& k = kept();
    const std::lock_guard lock(k.mutex);
    k.owners.emplace(key, std::move(owner));
}

void release_kept(const void* key) {
    std::shared_ptr<void> owner; // destroyed outside the lock: a handle's release calls the device
    {
        Kept& k = kept();
        const std::lock_guard lock(k.mutex);
        if (auto it = k.owners.find(key); it != k.owners.end()) {
            owner = std::move(it->second);
            k.owners.erase(it);
        }
    }
}

std::uint64_t next_request(ShimContext& shim) {
    return ++shim.last_request;
}

namespace {

Status outcome_of(const rdma::ControlCompletion& done) {
    if (done.status == StatusCode::ok) {
        return {};
    }
    return Error(done.status, done.message);
}

// The completion of `request_id` if this poll, or another waiter's, has taken it.
std::optional<rdma::ControlCompletion> take_finished(ShimContext& shim, std::uint64_t request_id) {
    std::array<rdma::ControlCompletion, 8> done;
    const std::size_t n = shim.context.poll_control(done);
    for (std::size_t i = 0; i < n; ++i) {
        if (shim.waits->awaited.contains(done[i].request_id)) {
            shim.waits->finished.insert_or_assign(done[i].request_id, std::move(done[i]));
        } // else a dropped handle's clean-up: nobody waits for it
    }
    const auto it = shim.waits->finished.find(request_id);
    if (it == shim.waits->finished.end()) {
        return std::nullopt;
    }
    rdma::ControlCompletion mine = std::move(it->second);
    shim.waits->finished.erase(it);
    return mine;
}

} // namespace

Status await_control(ShimContext& shim, std::uint64_t request_id, Status status) {
    if (status.code() != StatusCode::pending) {
        return status;
    }
    shim.waits->awaited.insert(request_id);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    for (;;) {
        if (std::optional<rdma::ControlCompletion> done = take_finished(shim, request_id)) {
            shim.waits->awaited.erase(request_id);
            return outcome_of(*done);
        }
        if (std::chrono::steady_clock::now() > deadline) {
            shim.waits->awaited.erase(request_id); // a late completion is dropped, not kept
            return Error(StatusCode::not_connected,
                         "the device did not finish the request in 10 s");
        }
        // The caller's lock_guard holds the mutex again before it lets go of it.
        shim.control_mutex().unlock();
        std::this_thread::sleep_for(std::chrono::microseconds(50));
        shim.control_mutex().lock();
    }
}

int errno_of(StatusCode code) {
    switch (code) {
    case StatusCode::ok:
        return 0;
    case StatusCode::busy:
    case StatusCode::pending:
        return EBUSY;
    case StatusCode::no_resources:
        return ENOMEM;
    case StatusCode::not_supported:
        return EOPNOTSUPP;
    case StatusCode::access_violation:
        return EACCES;
    case StatusCode::not_connected:
        return ETIMEDOUT;
    case StatusCode::device_removed:
        return ENODEV;
    case StatusCode::internal:
        return EIO;
    case StatusCode::buffer_too_small:
    case StatusCode::buffer_overflow:
    case StatusCode::invalid_parameter:
        break;
    }
    return EINVAL;
}

void refuse(const char* verb, int error, const std::string& why) {
    std::fprintf(stderr, "libprdma-verbs: %s: %s\n", verb, why.c_str());
    errno = error;
}

} // namespace prdma::verbs
