// Registration of prdma drivers on DPDK's vdev bus.
//
// Debian's libdpdk-dev (22.11) installs no driver-SDK headers (bus_vdev_driver.h, dev_driver.h),
// yet librte_bus_vdev exports rte_vdev_register (INTERNAL ABI) and EAL refuses --vdev names no
// vdev driver claims. So the two structs a vdev driver needs are declared here, to the layout of
// DPDK 22.11, and nowhere else: a build against another DPDK stops at the version check below,
// and probe checks at run time that the device it was handed carries the expected name.
#include <array>
#include <cstring>
#include <utility>

#include <rte_dev.h>
#include <rte_devargs.h>
#include <rte_version.h>

#include <prdma/rdmadev/driver.hpp>

#include "rdmadev_log.hpp"

#if RTE_VER_YEAR != 22 || RTE_VER_MONTH != 11
#error                                                                                             \
    "vdev_binding.cpp declares DPDK 22.11's vdev driver ABI; check bus_vdev_driver.h of this DPDK"
#endif

namespace {

// struct rte_vdev_device starts with a TAILQ_ENTRY (two pointers), then its struct rte_device.
struct VdevDevice;

constexpr std::size_t vdev_device_offset = 2 * sizeof(void*);

rte_device* device_of(VdevDevice* vdev) {
    return reinterpret_cast<rte_device*>(reinterpret_cast<char*>(vdev) + vdev_device_offset);
}

// struct rte_vdev_driver of DPDK 22.11: TAILQ_ENTRY, struct rte_driver {TAILQ_ENTRY, name, alias},
// probe, remove, dma_map, dma_unmap, drv_flags.
struct VdevDriverAbi {
    void* next[2];
    struct {
        void* next[2];
        const char* name;
        const char* alias;
    } driver;
    int (*probe)(VdevDevice* vdev);
    int (*remove)(VdevDevice* vdev);
    int (*dma_map)(VdevDevice* vdev, void* addr, std::uint64_t iova, std::size_t len);
    int (*dma_unmap)(VdevDevice* vdev, void* addr, std::uint64_t iova, std::size_t len);
    std::uint32_t drv_flags;
};

} // namespace

extern "C" void rte_vdev_register(VdevDriverAbi* driver);

namespace prdma::rdma::driver {

namespace {

constexpr std::size_t max_vdev_drivers = 8;

struct Registered {
    VdevDriverAbi abi{};
    VdevProbe probe = nullptr;
    VdevRemove remove = nullptr;
};

Registered g_drivers[max_vdev_drivers];
std::size_t g_driver_count = 0;

// One trampoline per slot: DPDK calls probe/remove with no user argument.
template <std::size_t Slot>
int probe_trampoline(VdevDevice* vdev) {
    rte_device* dev = device_of(vdev);
    const char* name = rte_dev_name(dev);
    const char* prefix = g_drivers[Slot].abi.driver.name;
    if (name == nullptr || std::strncmp(name, prefix, std::strlen(prefix)) != 0) {
        RDMADEV_LOG(ERR, "vdev ABI mismatch: driver %s was handed device '%s'", prefix,
                    name != nullptr ? name : "(null)");
        return -EINVAL;
    }
    const rte_devargs* devargs = rte_dev_devargs(dev);
    const char* args = devargs != nullptr && devargs->args != nullptr ? devargs->args : "";
    return g_drivers[Slot].probe(dev, name, args);
}

template <std::size_t Slot>
int remove_trampoline(VdevDevice* vdev) {
    rte_device* dev = device_of(vdev);
    return g_drivers[Slot].remove(dev, rte_dev_name(dev));
}

template <std::size_t... Slots>
constexpr auto make_probes(std::index_sequence<Slots...>) {
    return std::array<int (*)(VdevDevice*), sizeof...(Slots)>{probe_trampoline<Slots>...};
}
template <std::size_t... Slots>
constexpr auto make_removes(std::index_sequence<Slots...>) {
    return std::array<int (*)(VdevDevice*), sizeof...(Slots)>{remove_trampoline<Slots>...};
}

} // namespace

void register_vdev_driver(const char* name, VdevProbe probe, VdevRemove remove) {
    static constexpr auto probes = make_probes(std::make_index_sequence<max_vdev_drivers>{});
    static constexpr auto removes = make_removes(std::make_index_sequence<max_vdev_drivers>{});
    if (g_driver_count == max_vdev_drivers) {
        RDMADEV_LOG(ERR, "too many vdev drivers; %s not registered", name);
        return;
    }
    const std::size_t slot = g_driver_count++;
    Registered& entry = g_drivers[slot];
    entry.probe = probe;
    entry.remove = remove;
    entry.abi.driver.name = name;
    entry.abi.probe = probes[slot];
    entry.abi.remove = removes[slot];
    rte_vdev_register(&entry.abi);
}

} // namespace prdma::rdma::driver
