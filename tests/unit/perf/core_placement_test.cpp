// Where prdma-perf runs without -l: EAL's core options recognised, the port's PCI address found,
// the two sides on different cores of this machine.
#include <algorithm>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core_placement.hpp"

namespace prdma::perf {
namespace {

TEST(CorePlacement, CoreOptionsInEveryForm) {
    for (const std::vector<std::string>& args : {std::vector<std::string>{"-l", "2"},
                                                 {"-l3"},
                                                 {"-c", "0x4"},
                                                 {"--lcores=1@2"},
                                                 {"--lcores", "1"}}) {
        EXPECT_TRUE(has_core_option(args)) << args[0];
    }
    EXPECT_FALSE(has_core_option(
        std::vector<std::string>{"--log-level=lib.eal:error", "--vdev=net_memif0", "--no-huge"}));
}

TEST(CorePlacement, PortAddressFromAllowedDevices) {
    EXPECT_EQ(port_pci_address(std::vector<std::string>{"-a", "0000:3b:00.0"}), "0000:3b:00.0");
    EXPECT_EQ(port_pci_address(std::vector<std::string>{"-a0000:3b:00.1,rxq_cqe_comp_en=0"}),
              "0000:3b:00.1");
    EXPECT_EQ(port_pci_address(std::vector<std::string>{"--allow=5e:00.0"}), "5e:00.0");
    EXPECT_EQ(port_pci_address(std::vector<std::string>{"-w", "af:00.0"}), "af:00.0");
    // memif and a kernel interface without a PCI device under it: no node to be near.
    EXPECT_FALSE(port_pci_address(std::vector<std::string>{"--vdev=net_memif0,role=server"}));
    EXPECT_FALSE(port_pci_address(std::vector<std::string>{"--vdev=net_af_xdp0,iface=lo"}));
    EXPECT_FALSE(port_pci_address(std::vector<std::string>{"--vdev"}));
}

TEST(CorePlacement, ServerAndClientOnDifferentCores) {
    auto topology = Topology::discover();
    ASSERT_TRUE(topology.ok()) << topology.error().to_string();
    const unsigned server = pick_side_core(topology.value(), std::nullopt, false);
    const unsigned client = pick_side_core(topology.value(), std::nullopt, true);
    const auto cpus = topology->cpus();
    EXPECT_NE(std::find(cpus.begin(), cpus.end(), server), cpus.end());
    if (topology->cores().size() > 1) {
        EXPECT_NE(server, client);
    }
    // An address hwloc does not know falls back to any node.
    EXPECT_EQ(pick_side_core(topology.value(), std::string("ffff:ff:1f.7"), false), server);
}

} // namespace
} // namespace prdma::perf
