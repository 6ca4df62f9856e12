#include <algorithm>
#include <filesystem>
#include <set>
#include <unistd.h>

#include <gtest/gtest.h>

#include <prdma/topology.hpp>

namespace prdma {
namespace {

TEST(Topology, ReportsThisMachinesCpus) {
    auto topology = Topology::discover();
    ASSERT_TRUE(topology.ok()) << topology.error().to_string();
    // hwloc and the kernel must agree on the CPUs this process may use.
    cpu_set_t affinity;
    ASSERT_EQ(sched_getaffinity(0, sizeof(affinity), &affinity), 0);
    std::set<unsigned> expected;
    for (unsigned cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
        if (CPU_ISSET(cpu, &affinity)) {
            expected.insert(cpu);
        }
    }
    const auto cpus = topology->cpus();
    EXPECT_EQ(std::set<unsigned>(cpus.begin(), cpus.end()), expected);

    // Every CPU belongs to exactly one core and one NUMA node.
    std::multiset<unsigned> in_cores;
    for (const auto& core : topology->cores()) {
        EXPECT_FALSE(core.cpus.empty());
        in_cores.insert(core.cpus.begin(), core.cpus.end());
    }
    EXPECT_EQ(static_cast<long>(in_cores.size()), ::sysconf(_SC_NPROCESSORS_ONLN));
    ASSERT_FALSE(topology->numa_nodes().empty());
    std::size_t in_nodes = 0;
    for (const auto& node : topology->numa_nodes()) {
        in_nodes += node.cpus.size();
        EXPECT_GT(node.memory_bytes, 0U);
    }
    EXPECT_EQ(static_cast<long>(in_nodes), ::sysconf(_SC_NPROCESSORS_ONLN));
}

TEST(Topology, PicksOneCpuPerCoreBeforeSiblings) {
    auto topology = Topology::discover();
    ASSERT_TRUE(topology.ok());
    const auto cores = topology->cores().size();
    const auto picked = topology->pick_cpus(std::nullopt, static_cast<unsigned>(cores));
    ASSERT_EQ(picked.size(), cores);
    std::set<unsigned> cores_used;
    for (unsigned cpu : picked) {
        for (const auto& core : topology->cores()) {
            if (std::find(core.cpus.begin(), core.cpus.end(), cpu) != core.cpus.end()) {
                cores_used.insert(core.logical_index);
            }
        }
    }
    EXPECT_EQ(cores_used.size(), cores) << "two picked CPUs share a core";
}

TEST(Topology, PickRespectsExclusionsAndAvailability) {
    auto topology = Topology::discover();
    ASSERT_TRUE(topology.ok());
    const auto all = topology->cpus();
    const auto picked = topology->pick_cpus(std::nullopt, 1000, {all.front()});
    EXPECT_EQ(picked.size(), all.size() - 1);
    EXPECT_EQ(std::find(picked.begin(), picked.end(), all.front()), picked.end());
    EXPECT_TRUE(topology->pick_cpus(12345U, 1).empty()) << "no such NUMA node";
}

TEST(Topology, NumaNodeOfPciDevice) {
    auto topology = Topology::discover();
    ASSERT_TRUE(topology.ok());
    EXPECT_EQ(topology->numa_node_of_pci("not-a-bdf").code(), StatusCode::invalid_parameter);
    EXPECT_EQ(topology->numa_node_of_pci("0000:00:1f.9").code(), StatusCode::invalid_parameter);
    EXPECT_EQ(topology->numa_node_of_pci("ffff:ff:1f.7").code(), StatusCode::invalid_parameter);
    // Any real device of this machine: on a one-node machine it is local to that node.
    for (const auto& entry : std::filesystem::directory_iterator("/sys/bus/pci/devices")) {
        const auto node = topology->numa_node_of_pci(entry.path().filename().string());
        ASSERT_TRUE(node.ok()) << entry.path() << ": " << node.error().to_string();
        if (topology->numa_nodes().size() == 1) {
            ASSERT_TRUE(node.value().has_value());
            EXPECT_EQ(*node.value(), topology->numa_nodes().front().os_index);
            const auto near = topology->pick_cpus_near_pci(entry.path().filename().string(), 1);
            ASSERT_TRUE(near.ok());
            EXPECT_EQ(near.value().size(), 1U);
        }
        break;
    }
}

TEST(Topology, CpuListString) {
    EXPECT_EQ(Topology::cpu_list_string({}), "");
    EXPECT_EQ(Topology::cpu_list_string({3}), "3");
    EXPECT_EQ(Topology::cpu_list_string({4, 0, 1, 2, 7, 8, 2}), "0-2,4,7-8");
}

} // namespace
} // namespace prdma
