// The shim's process state: EAL started from PRDMA_EAL_ARGS and prdma's devices as libibverbs
// lists them.
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <endian.h>
#include <mutex>
#include <sstream>

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
    // EAL stops (and removes the devices) before the statics prdma made while it started are
    // destroyed: they were made after this state, so they would go first.
    std::atexit([] { shim_state().eal.reset(); });
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

void refuse(const char* verb, int error, const std::string& why) {
    std::fprintf(stderr, "libprdma-verbs: %s: %s\n", verb, why.c_str());
    errno = error;
}

} // namespace prdma::verbs
