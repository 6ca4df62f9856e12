// prdma::Topology — the machine's NUMA nodes, cores and PCI locality (hwloc), so queue groups can
// be placed on lcores close to the device they poll.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <prdma/status.hpp>

struct hwloc_topology;

namespace prdma {

struct NumaNode {
    unsigned os_index = 0;
    std::uint64_t memory_bytes = 0;
    std::vector<unsigned> cpus; // OS CPU numbers (EAL lcore ids when -l is not remapped)
};

struct CpuCore {
    unsigned logical_index = 0; // hwloc's index among cores, 0..n-1
    std::vector<unsigned> cpus; // hardware threads of the core (OS CPU numbers)
    std::optional<unsigned> numa_node;
};

class Topology {
public:
    // Loads the topology of this machine (with PCI devices). Control path; takes milliseconds.
    static Result<Topology> discover();

    Topology(Topology&&) noexcept;
    Topology& operator=(Topology&&) noexcept;
    ~Topology();

    [[nodiscard]] const std::vector<NumaNode>& numa_nodes() const noexcept { return nodes_; }
    [[nodiscard]] const std::vector<CpuCore>& cores() const noexcept { return cores_; }
    // Every online CPU (hardware thread) the process may run on.
    [[nodiscard]] std::vector<unsigned> cpus() const;

    // NUMA node of a PCI device given as "DDDD:BB:DD.F" or "BB:DD.F". *invalid parameter* for a
    // malformed address, *invalid parameter* for a device hwloc does not know, and an empty
    // optional when the device has no NUMA affinity (single-node machines, most VMs).
    [[nodiscard]] Result<std::optional<unsigned>> numa_node_of_pci(std::string_view address) const;

    // Up to `count` CPUs on `numa_node` (any node when empty), one per physical core first and
    // hyper-thread siblings only after that, skipping `exclude` (e.g. the EAL main lcore).
    [[nodiscard]] std::vector<unsigned> pick_cpus(std::optional<unsigned> numa_node, unsigned count,
                                                  const std::vector<unsigned>& exclude = {}) const;
    // pick_cpus() near a PCI device.
    [[nodiscard]] Result<std::vector<unsigned>>
    pick_cpus_near_pci(std::string_view address, unsigned count,
                       const std::vector<unsigned>& exclude = {}) const;

    // "0,2-4" for EAL's -l option.
    static std::string cpu_list_string(const std::vector<unsigned>& cpus);

private:
    struct HwlocDeleter {
        void operator()(hwloc_topology* topology) const noexcept;
    };
    explicit Topology(std::unique_ptr<hwloc_topology, HwlocDeleter> topology);

    std::unique_ptr<hwloc_topology, HwlocDeleter> topology_;
    std::vector<NumaNode> nodes_;
    std::vector<CpuCore> cores_;
};

} // namespace prdma
