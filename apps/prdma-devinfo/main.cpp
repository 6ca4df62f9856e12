// prdma-devinfo: what prdma sees on this machine — EAL, hugepage memory, lcores, NUMA topology and
// DPDK ports — as `ibv_devinfo` and `dpdk-devbind --status` do for their layers.
//
//   prdma-devinfo [EAL options] [-- --help]
#include <cstdio>
#include <cstring>
#include <string_view>
#include <vector>

#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_memory.h>
#include <rte_memzone.h>
#include <rte_version.h>

#include <prdma/build_config.hpp>
#include <prdma/eal.hpp>
#include <prdma/rdmadev/rdmadev.hpp>
#include <prdma/topology.hpp>

namespace {

void print_topology(const prdma::Topology& topology) {
    std::printf("topology:\n");
    for (const auto& node : topology.numa_nodes()) {
        std::printf("  numa node %u: %llu MiB, cpus %s\n", node.os_index,
                    static_cast<unsigned long long>(node.memory_bytes >> 20),
                    prdma::Topology::cpu_list_string(node.cpus).c_str());
    }
    for (const auto& core : topology.cores()) {
        std::printf("  core %u: cpus %s%s\n", core.logical_index,
                    prdma::Topology::cpu_list_string(core.cpus).c_str(),
                    core.numa_node ? (" node " + std::to_string(*core.numa_node)).c_str() : "");
    }
}

int walk_memseg_list(const rte_memseg_list* msl, void* arg) {
    auto* total = static_cast<std::size_t*>(arg);
    if (msl->external == 0) {
        *total += msl->memseg_arr.count * msl->page_sz;
    }
    return 0;
}

// Reserves and frees one memzone to show the DMA memory path works: the IOVA is what a device
// would be given for the first byte.
int print_memory(const prdma::Eal& eal) {
    std::size_t mapped = 0;
    rte_memseg_list_walk(walk_memseg_list, &mapped);
    std::printf("memory:\n  hugepage backed: %s\n  mapped now: %zu MiB\n",
                eal.hugepage_backed() ? "yes" : "no (--no-huge)", mapped >> 20);
    const rte_memzone* zone =
        rte_memzone_reserve("prdma_devinfo_probe", 1 << 20, SOCKET_ID_ANY, RTE_MEMZONE_IOVA_CONTIG);
    if (zone == nullptr) {
        std::fprintf(stderr, "prdma-devinfo: cannot reserve a 1 MiB memzone: %s\n",
                     rte_strerror(rte_errno));
        return 1;
    }
    std::printf("  probe memzone: va %p iova 0x%llx page size %llu KiB socket %d\n", zone->addr,
                static_cast<unsigned long long>(zone->iova),
                static_cast<unsigned long long>(zone->hugepage_sz >> 10), zone->socket_id);
    rte_memzone_free(zone);
    return 0;
}

void print_ports() {
    std::printf("ethdev ports: %u\n", rte_eth_dev_count_avail());
    uint16_t port = 0;
    RTE_ETH_FOREACH_DEV(port) {
        rte_eth_dev_info info{};
        char name[RTE_ETH_NAME_MAX_LEN] = {};
        rte_eth_dev_get_name_by_port(port, name);
        rte_ether_addr mac{};
        rte_eth_macaddr_get(port, &mac);
        uint16_t mtu = 0;
        rte_eth_dev_get_mtu(port, &mtu);
        if (rte_eth_dev_info_get(port, &info) == 0) {
            std::printf("  port %u: %s driver %s mac " RTE_ETHER_ADDR_PRT_FMT " mtu %u "
                        "rxq %u txq %u numa %d\n",
                        port, name, info.driver_name, RTE_ETHER_ADDR_BYTES(&mac), mtu,
                        info.max_rx_queues, info.max_tx_queues, rte_eth_dev_socket_id(port));
        }
    }
}

// As ibv_devinfo does: every rdma device, its attributes and its port, read through the same
// versioned query an application uses.
int print_rdma_devices() {
    namespace rdma = prdma::rdma;
    const auto devices = rdma::device_list();
    std::printf("rdma devices: %zu\n", devices.size());
    int rc = 0;
    for (rdma::DeviceId id : devices) {
        auto context = rdma::Context::open(id);
        if (!context) {
            std::fprintf(stderr, "prdma-devinfo: %s\n", context.error().to_string().c_str());
            rc = 1;
            continue;
        }
        std::uint32_t size = 0;
        (void)context->query_device(nullptr, &size);
        std::vector<std::uint8_t> buffer(size);
        if (auto status = context->query_device(buffer.data(), &size); !status.ok()) {
            std::fprintf(stderr, "prdma-devinfo: %s\n", status.error().to_string().c_str());
            rc = 1;
            continue;
        }
        rdma::DeviceAttr attr;
        std::memcpy(&attr, buffer.data(), sizeof(attr));
        std::printf("  hca_id: %s (device %u)\n    node_guid: %016llx\n    vendor_id: 0x%06x\n"
                    "    max_qp: %u  max_qp_wr: %u  max_sge: %u  max_cqe: %u  max_mr: %u\n"
                    "    max_mr_size: %llu  page_size_cap: 0x%llx  max_qp_rd_atom: %u\n"
                    "    capabilities: 0x%x  queue groups: %u\n",
                    rdma::device_name(id).c_str(), static_cast<unsigned>(id),
                    static_cast<unsigned long long>(attr.node_guid), attr.vendor_id, attr.max_qp,
                    attr.max_qp_wr, attr.max_sge, attr.max_cqe, attr.max_mr,
                    static_cast<unsigned long long>(attr.max_mr_size),
                    static_cast<unsigned long long>(attr.page_size_support), attr.max_qp_rd_atomic,
                    attr.capability_flags.bits(), attr.max_queue_groups);
        const auto* port = rdma::attr_at<rdma::PortAttr>(buffer.data(), attr.port_attr_offset);
        for (unsigned p = 0; p < attr.port_count; ++p) {
            const auto* gid = rdma::attr_at<rdma::Gid>(port, port->gid_table_offset);
            char gid_text[48] = {};
            for (std::size_t i = 0; i < 16; i += 2) {
                std::snprintf(gid_text + i / 2 * 5, 6, "%02x%02x%s", gid->raw[i], gid->raw[i + 1],
                              i < 14 ? ":" : "");
            }
            std::printf("    port: %u\n      state: %s\n      active_mtu: %u\n"
                        "      mac: %02x:%02x:%02x:%02x:%02x:%02x\n      GID[0]: %s\n",
                        port->port_num,
                        port->state == rdma::PortState::active ? "PORT_ACTIVE" : "PORT_DOWN",
                        rdma::mtu_bytes(port->active_mtu), port->mac[0], port->mac[1], port->mac[2],
                        port->mac[3], port->mac[4], port->mac[5], gid_text);
            port = rdma::attr_at<rdma::PortAttr>(port, port->next_port_offset);
        }
    }
    return rc;
}

} // namespace

int main(int argc, char** argv) {
    for (int i = 1; i < argc; ++i) {
        if (std::strcmp(argv[i], "--") == 0 && i + 1 < argc) {
            if (std::strcmp(argv[i + 1], "--help") == 0 || std::strcmp(argv[i + 1], "-h") == 0) {
                std::printf("usage: %s [EAL options] [-- --help]\n"
                            "Prints EAL, memory, topology and port information as prdma sees "
                            "it.\nprdma adds %s and a per-process --file-prefix unless given.\n",
                            argv[0], PRDMA_DEFAULT_EAL_ARGS);
                return 0;
            }
            std::fprintf(stderr, "prdma-devinfo: unknown option '%s' (try -- --help)\n",
                         argv[i + 1]);
            return 2;
        }
    }
    int consumed = 0;
    auto eal = prdma::Eal::start_from_argv(argc, argv, &consumed);
    if (!eal) {
        std::fprintf(stderr, "prdma-devinfo: %s\n", eal.error().to_string().c_str());
        return 1;
    }
    std::printf("prdma %s on %s\n", PRDMA_VERSION_STRING, rte_version());
    std::printf("eal:\n  args:");
    for (const auto& arg : eal->args()) {
        std::printf(" %s", arg.c_str());
    }
    std::printf("\n  lcores: %u (main %u)\n  iova mode: %s\n", eal->lcore_count(),
                eal->main_lcore(), rte_eal_iova_mode() == RTE_IOVA_VA ? "va" : "pa");
    int rc = print_memory(eal.value());
    auto topology = prdma::Topology::discover();
    if (topology) {
        print_topology(topology.value());
    } else {
        std::fprintf(stderr, "prdma-devinfo: topology: %s\n", topology.error().to_string().c_str());
        rc = 1;
    }
    print_ports();
    if (print_rdma_devices() != 0) {
        rc = 1;
    }
    return rc;
}
