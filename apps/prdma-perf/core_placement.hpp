// Where prdma-perf runs when the command line does not say: on a core near its port's NUMA node,
// as perftest users place ib_write_bw with numactl, from the topology prdma reads with hwloc.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <vector>

#include <prdma/status.hpp>
#include <prdma/topology.hpp>

namespace prdma::perf {

// EAL's core options: -l, -c, --lcores (any form). With one, the user has placed the process.
bool has_core_option(std::span<const std::string> eal_args);

// The PCI address of the port the EAL arguments name: an allowed device (-a, --allow, -w) or the
// kernel interface of a vdev (iface=NAME, as af_xdp and af_packet take it) that sits on PCI.
// Nothing for memif, ring or a virtual interface.
std::optional<std::string> port_pci_address(std::span<const std::string> eal_args);

// The core for one side: near the port's node (any node when it has none), the server on the
// first such core and the client on the second, so two sides on one host do not share a core.
unsigned pick_side_core(const Topology& topology, const std::optional<std::string>& pci,
                        bool client);

// Puts `-l <core>` in front of `eal_args` unless they place the process already.
Status place_near_port(std::vector<std::string>& eal_args, bool client);

} // namespace prdma::perf
