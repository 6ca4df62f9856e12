#include <algorithm>
#include <cctype>
#include <set>

#include <hwloc.h>

#include <prdma/format.hpp>
#include <prdma/topology.hpp>

namespace prdma {

namespace {

std::vector<unsigned> cpus_of(hwloc_const_cpuset_t set) {
    std::vector<unsigned> cpus;
    for (int cpu = hwloc_bitmap_first(set); cpu >= 0; cpu = hwloc_bitmap_next(set, cpu)) {
        cpus.push_back(static_cast<unsigned>(cpu));
    }
    return cpus;
}

struct PciAddress {
    unsigned domain = 0, bus = 0, dev = 0, func = 0;
};

// Reads exactly `digits_max` or fewer hex digits up to `stop`; advances `text`.
std::optional<unsigned> take_hex(std::string_view& text, std::size_t digits_max, char stop) {
    std::size_t used = 0;
    unsigned value = 0;
    while (used < text.size() && used < digits_max &&
           std::isxdigit(static_cast<unsigned char>(text[used]))) {
        const char c = static_cast<char>(std::tolower(static_cast<unsigned char>(text[used])));
        value = value * 16 + static_cast<unsigned>(c <= '9' ? c - '0' : c - 'a' + 10);
        ++used;
    }
    if (used == 0) {
        return std::nullopt;
    }
    text.remove_prefix(used);
    if (stop != '\0') {
        if (text.empty() || text.front() != stop) {
            return std::nullopt;
        }
        text.remove_prefix(1);
    }
    return value;
}

// "DDDD:BB:DD.F" or "BB:DD.F", the forms lspci and DPDK print.
std::optional<PciAddress> parse_pci_address(std::string_view text) {
    PciAddress addr;
    const bool with_domain = std::count(text.begin(), text.end(), ':') == 2;
    if (with_domain) {
        const auto domain = take_hex(text, 4, ':');
        if (!domain) {
            return std::nullopt;
        }
        addr.domain = *domain;
    }
    const auto bus = take_hex(text, 2, ':');
    const auto dev = take_hex(text, 2, '.');
    const auto func = take_hex(text, 1, '\0');
    if (!bus || !dev || !func || !text.empty() || *dev > 0x1f || *func > 7) {
        return std::nullopt;
    }
    addr.bus = *bus;
    addr.dev = *dev;
    addr.func = *func;
    return addr;
}

} // namespace

void Topology::HwlocDeleter::operator()(hwloc_topology* topology) const noexcept {
    hwloc_topology_destroy(topology);
}

Topology::Topology(std::unique_ptr<hwloc_topology, HwlocDeleter> topology)
    : topology_(std::move(topology)) {
    hwloc_topology_t topo = topology_.get();
    const int node_count = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE);
    for (int i = 0; i < node_count; ++i) {
        hwloc_obj_t obj = hwloc_get_obj_by_type(topo, HWLOC_OBJ_NUMANODE, static_cast<unsigned>(i));
        if (obj == nullptr) {
            continue;
        }
        NumaNode node;
        node.os_index = obj->os_index;
        node.memory_bytes = obj->attr != nullptr ? obj->attr->numanode.local_memory : 0;
        node.cpus = cpus_of(obj->cpuset);
        nodes_.push_back(std::move(node));
    }
    const int core_count = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE);
    for (int i = 0; i < core_count; ++i) {
        hwloc_obj_t obj = hwloc_get_obj_by_type(topo, HWLOC_OBJ_CORE, static_cast<unsigned>(i));
        if (obj == nullptr) {
            continue;
        }
        CpuCore core;
        core.logical_index = obj->logical_index;
        core.cpus = cpus_of(obj->cpuset);
        for (const NumaNode& node : nodes_) {
            if (!core.cpus.empty() && std::find(node.cpus.begin(), node.cpus.end(),
                                                core.cpus.front()) != node.cpus.end()) {
                core.numa_node = node.os_index;
            }
        }
        cores_.push_back(std::move(core));
    }
}

Topology::Topology(Topology&&) noexcept = default;
Topology& Topology::operator=(Topology&&) noexcept = default;
Topology::~Topology() = default;

Result<Topology> Topology::discover() {
    hwloc_topology_t raw = nullptr;
    if (hwloc_topology_init(&raw) != 0) {
        return Error(StatusCode::no_resources, "hwloc_topology_init failed");
    }
    std::unique_ptr<hwloc_topology, HwlocDeleter> topology(raw);
    // I/O objects are filtered out by default, and "important" PCI devices leave out some a NIC
    // may sit behind (VMs show virtio NICs as plain devices), so keep every PCI device.
    hwloc_topology_set_io_types_filter(raw, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
    hwloc_topology_set_type_filter(raw, HWLOC_OBJ_PCI_DEVICE, HWLOC_TYPE_FILTER_KEEP_ALL);
    if (hwloc_topology_load(raw) != 0) {
        return Error(StatusCode::internal, "hwloc_topology_load failed");
    }
    return Topology(std::move(topology));
}

std::vector<unsigned> Topology::cpus() const {
    return cpus_of(hwloc_topology_get_allowed_cpuset(topology_.get()));
}

Result<std::optional<unsigned>> Topology::numa_node_of_pci(std::string_view address) const {
    const auto addr = parse_pci_address(address);
    if (!addr) {
        return Error(StatusCode::invalid_parameter,
                     strformat("'%.*s' is not a PCI address (expected DDDD:BB:DD.F)",
                               static_cast<int>(address.size()), address.data()));
    }
    hwloc_obj_t dev =
        hwloc_get_pcidev_by_busid(topology_.get(), addr->domain, addr->bus, addr->dev, addr->func);
    if (dev == nullptr) {
        return Error(StatusCode::invalid_parameter,
                     strformat("no PCI device %04x:%02x:%02x.%x on this machine", addr->domain,
                               addr->bus, addr->dev, addr->func));
    }
    hwloc_obj_t parent = hwloc_get_non_io_ancestor_obj(topology_.get(), dev);
    // A device under one node's host bridge is local to it; one attached at machine level (every
    // node in its set) has no affinity, except on a one-node machine where the answer is trivial.
    if (parent != nullptr && parent->nodeset != nullptr &&
        hwloc_bitmap_weight(parent->nodeset) == 1) {
        return std::optional<unsigned>{static_cast<unsigned>(hwloc_bitmap_first(parent->nodeset))};
    }
    if (nodes_.size() == 1) {
        return std::optional<unsigned>{nodes_.front().os_index};
    }
    return std::optional<unsigned>{};
}

std::vector<unsigned> Topology::pick_cpus(std::optional<unsigned> numa_node, unsigned count,
                                          const std::vector<unsigned>& exclude) const {
    const std::set<unsigned> excluded(exclude.begin(), exclude.end());
    const std::vector<unsigned> allowed = cpus();
    const std::set<unsigned> allowed_set(allowed.begin(), allowed.end());
    std::vector<unsigned> picked;
    // Pass 0 takes the first free thread of each core, pass 1 the siblings: two polling lcores
    // on one physical core share its pipeline and halve each other's rate.
    for (int pass = 0; pass < 2 && picked.size() < count; ++pass) {
        for (const CpuCore& core : cores_) {
            if (numa_node && core.numa_node != numa_node) {
                continue;
            }
            bool took_one_in_core = false;
            for (unsigned cpu : core.cpus) {
                if (picked.size() >= count) {
                    break;
                }
                if (excluded.contains(cpu) || !allowed_set.contains(cpu) ||
                    std::find(picked.begin(), picked.end(), cpu) != picked.end()) {
                    continue;
                }
                if (pass == 0 && took_one_in_core) {
                    break;
                }
                picked.push_back(cpu);
                took_one_in_core = true;
            }
        }
    }
    return picked;
}

Result<std::vector<unsigned>>
Topology::pick_cpus_near_pci(std::string_view address, unsigned count,
                             const std::vector<unsigned>& exclude) const {
    auto node = numa_node_of_pci(address);
    if (!node) {
        return node.error();
    }
    return pick_cpus(node.value(), count, exclude);
}

std::string Topology::cpu_list_string(const std::vector<unsigned>& cpus) {
    std::vector<unsigned> sorted = cpus;
    std::sort(sorted.begin(), sorted.end());
    sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
    std::string text;
    for (std::size_t i = 0; i < sorted.size();) {
        std::size_t j = i;
        while (j + 1 < sorted.size() && sorted[j + 1] == sorted[j] + 1) {
            ++j;
        }
        if (!text.empty()) {
            text += ',';
        }
        text += std::to_string(sorted[i]);
        if (j > i) {
            text += '-' + std::to_string(sorted[j]);
        }
        i = j + 1;
    }
    return text;
}

} // namespace prdma
