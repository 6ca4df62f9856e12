// prdma-devinfo: the rdma devices prdma sees, as `ibv_devinfo` prints them, and with -s what is
// under them (EAL, hugepage memory, lcores, NUMA topology, DPDK ports).
//
//   prdma-devinfo [EAL options] [-- -d DEV -i PORT -l -v -s]     prdma-devinfo --help
#include <algorithm>
#include <arpa/inet.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <getopt.h>
#include <string>
#include <string_view>
#include <vector>

#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_memory.h>
#include <rte_memzone.h>
#include <rte_version.h>

#include <prdma/build_config.hpp>
#include <prdma/eal.hpp>
#include <prdma/format.hpp>
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

// The options after `--` (EAL's come first, as in every DPDK app), as ibv_devinfo has them.
struct Options {
    std::string device; // -d: only this device
    unsigned port = 0;  // -i: only this port (1-based; 0 = every port)
    bool list = false;  // -l: names only
    bool verbose = false;
    bool system = false; // -s: EAL, memory, topology and ethdev ports too
};

constexpr const char* usage_text =
    "Usage: prdma-devinfo [EAL options] [-- options]\n"
    "Prints the rdma devices prdma sees, as ibv_devinfo does. EAL options create them, e.g.\n"
    "  --vdev=net_ring0 --vdev=rdma_swroce0,port=net_ring0,ip=10.0.0.1\n"
    "\n"
    "Options (after --):\n"
    "  -d, --ib-dev=<dev>     only this device (default: every device)\n"
    "  -i, --ib-port=<port>   only this port of the device (1-based)\n"
    "  -l, --list             print only the device names\n"
    "  -v, --verbose          every attribute, every GID with its type\n"
    "  -s, --system           EAL, hugepage memory, NUMA topology and ethdev ports first\n"
    "  -h, --help             this text (also without --)\n"
    "prdma adds %s and a per-process --file-prefix unless given.\n";

std::string gid_text(const prdma::rdma::Gid& gid) {
    char text[INET6_ADDRSTRLEN] = {};
    inet_ntop(AF_INET6, gid.raw.data(), text, sizeof(text));
    return text;
}

// The ethdev a device runs on, from its port= devarg: name, port id and driver.
std::string ethdev_text(prdma::rdma::DeviceId id) {
    const std::string args = prdma::rdma::device_args(id);
    const auto at = args.find("port=");
    if (at == std::string::npos || (at != 0 && args[at - 1] != ',')) {
        return "-";
    }
    std::string name = args.substr(at + 5, args.find(',', at) - (at + 5));
    std::uint16_t port = 0;
    rte_eth_dev_info info{};
    if (rte_eth_dev_get_port_by_name(name.c_str(), &port) != 0 ||
        rte_eth_dev_info_get(port, &info) != 0) {
        return name;
    }
    return prdma::strformat("%s (port %u, driver %s)", name.c_str(), port, info.driver_name);
}

const char* port_state_text(prdma::rdma::PortState state) {
    switch (state) {
    case prdma::rdma::PortState::nop:
        return "PORT_NOP";
    case prdma::rdma::PortState::down:
        return "PORT_DOWN";
    case prdma::rdma::PortState::init:
        return "PORT_INIT";
    case prdma::rdma::PortState::armed:
        return "PORT_ARMED";
    case prdma::rdma::PortState::active:
        return "PORT_ACTIVE";
    }
    return "PORT_UNKNOWN";
}

void print_port(const prdma::rdma::PortInfo& port, bool verbose) {
    namespace rdma = prdma::rdma;
    const rdma::PortAttr& a = port.attr;
    std::printf("\t\tport:\t%u\n", a.port_num);
    std::printf("\t\t\tstate:\t\t\t%s (%u)\n", port_state_text(a.state),
                static_cast<unsigned>(a.state));
    std::printf("\t\t\tmax_mtu:\t\t%u (%u)\n", rdma::mtu_bytes(a.max_mtu),
                static_cast<unsigned>(a.max_mtu));
    std::printf("\t\t\tactive_mtu:\t\t%u (%u)\n", rdma::mtu_bytes(a.active_mtu),
                static_cast<unsigned>(a.active_mtu));
    std::printf("\t\t\tsm_lid:\t\t\t0\n\t\t\tport_lid:\t\t0\n\t\t\tport_lmc:\t\t0x00\n");
    std::printf("\t\t\tlink_layer:\t\tEthernet\n");
    if (!verbose) {
        return;
    }
    std::printf("\t\t\tmax_msg_sz:\t\t0x%llx\n\t\t\tport_cap_flags:\t\t0x%08x\n"
                "\t\t\tactive_speed:\t\t%u Mb/s\n\t\t\tphys_mac:\t\t"
                "%02x:%02x:%02x:%02x:%02x:%02x\n\t\t\tpkey_tbl_len:\t\t%zu\n"
                "\t\t\tgid_tbl_len:\t\t%zu\n",
                static_cast<unsigned long long>(a.max_msg_size), a.capability_flags.bits(),
                a.link_speed_mbps, a.mac[0], a.mac[1], a.mac[2], a.mac[3], a.mac[4], a.mac[5],
                port.pkeys.size(), port.gids.size());
    // swroce speaks RoCEv2 only: every GID of its table is a RoCE v2 GID.
    for (std::size_t i = 0; i < port.gids.size(); ++i) {
        std::printf("\t\t\tGID[%3zu]:\t\t%s, RoCE v2\n", i, gid_text(port.gids[i]).c_str());
    }
}

// In ibv_devinfo's names: its max_qp_rd_atom is what a QP accepts from its peer, which prdma
// calls max_qp_init_rd_atomic (attributes.hpp), and the other way round.
void print_device_attrs(const prdma::rdma::DeviceAttr& a) {
    std::printf("\tmax_mr_size:\t\t\t0x%llx\n\tpage_size_cap:\t\t\t0x%llx\n"
                "\tmax_qp:\t\t\t\t%u\n\tmax_qp_wr:\t\t\t%u\n\tdevice_cap_flags:\t\t0x%08x\n"
                "\tmax_sge:\t\t\t%u\n\tmax_cq:\t\t\t\t%u\n\tmax_cqe:\t\t\t%u\n"
                "\tmax_mr:\t\t\t\t%u\n\tmax_pd:\t\t\t\t%u\n\tmax_qp_rd_atom:\t\t\t%u\n"
                "\tmax_qp_init_rd_atom:\t\t%u\n\tmax_inline_data:\t\t%u\n"
                "\tmax_fast_reg_page_list_len:\t%u\n\tmax_queue_groups:\t\t%u\n"
                "\tmax_srq:\t\t\t%u\n\tmax_srq_wr:\t\t\t%u\n\tmax_srq_sge:\t\t\t%u\n"
                "\treserved_lkey:\t\t\t0x%llx\n",
                static_cast<unsigned long long>(a.max_mr_size),
                static_cast<unsigned long long>(a.page_size_support), a.max_qp, a.max_qp_wr,
                a.capability_flags.bits(), a.max_sge, a.max_cq, a.max_cqe, a.max_mr, a.max_pd,
                a.max_qp_init_rd_atomic, a.max_qp_rd_atomic, a.max_inline_data,
                a.max_fast_reg_pages, a.max_queue_groups, a.max_srq,
                a.max_srq != 0 ? a.max_qp_wr : 0U, a.max_srq != 0 ? a.max_sge : 0U,
                static_cast<unsigned long long>(a.reserved_lkey));
}

// One device as ibv_devinfo prints it, read through the query an application uses.
int print_device(prdma::rdma::DeviceId id, const Options& options) {
    namespace rdma = prdma::rdma;
    auto context = rdma::Context::open(id);
    if (!context) {
        std::fprintf(stderr, "prdma-devinfo: %s\n", context.error().to_string().c_str());
        return 1;
    }
    auto info = context->device_info();
    if (!info) {
        std::fprintf(stderr, "prdma-devinfo: %s\n", info.error().to_string().c_str());
        return 1;
    }
    const rdma::DeviceAttr& a = info->attr;
    if (options.port > info->ports.size()) {
        std::fprintf(stderr, "prdma-devinfo: %s has %zu port(s); there is no port %u\n",
                     rdma::device_name(id).c_str(), info->ports.size(), options.port);
        return 1;
    }
    std::printf("hca_id:\t%s\n\ttransport:\t\t\tInfiniBand (0)\n\tfw_ver:\t\t\t\t%u.%u.%u\n"
                "\tnode_guid:\t\t\t%s\n\tsys_image_guid:\t\t\t%s\n\tvendor_id:\t\t\t0x%04x\n"
                "\tvendor_part_id:\t\t\t%u\n\thw_ver:\t\t\t\t0x%x\n\tphys_port_cnt:\t\t\t%u\n"
                "\tethdev:\t\t\t\t%s\n",
                rdma::device_name(id).c_str(), a.fw_version >> 16, (a.fw_version >> 8) & 0xffU,
                a.fw_version & 0xffU, prdma::rdma::guid_string(a.node_guid).c_str(),
                prdma::rdma::guid_string(a.system_image_guid).c_str(), a.vendor_id, a.device_id,
                a.device_rev, a.port_count, ethdev_text(id).c_str());
    if (options.verbose) {
        print_device_attrs(a);
    }
    for (const rdma::PortInfo& port : info->ports) {
        if (options.port == 0 || port.attr.port_num == options.port) {
            print_port(port, options.verbose);
        }
    }
    std::printf("\n");
    return 0;
}

int print_rdma_devices(const Options& options) {
    namespace rdma = prdma::rdma;
    std::vector<rdma::DeviceId> devices = rdma::device_list();
    if (!options.device.empty()) {
        auto id = rdma::find_device(options.device);
        if (!id) {
            std::fprintf(stderr, "prdma-devinfo: %s\n", id.error().to_string().c_str());
            return 1;
        }
        devices = {id.value()};
    }
    if (options.list) {
        std::printf("%zu HCA%s found:\n", devices.size(), devices.size() == 1 ? "" : "s");
        for (rdma::DeviceId id : devices) {
            std::printf("\t%s\n", rdma::device_name(id).c_str());
        }
        return 0;
    }
    if (devices.empty()) {
        std::printf("No IB devices found\n");
    }
    int rc = 0;
    for (rdma::DeviceId id : devices) {
        rc |= print_device(id, options);
    }
    return rc;
}

bool wants_help(int argc, char** argv) {
    for (int i = 1; i < argc; ++i) {
        if (std::strcmp(argv[i], "-h") == 0 || std::strcmp(argv[i], "--help") == 0) {
            return true;
        }
    }
    return false;
}

// Parses what follows EAL's arguments; false (with a message) on anything it does not know.
bool parse_options(int argc, char** argv, Options& options) {
    static const option long_options[] = {
        {"ib-dev", required_argument, nullptr, 'd'}, {"ib-port", required_argument, nullptr, 'i'},
        {"list", no_argument, nullptr, 'l'},         {"verbose", no_argument, nullptr, 'v'},
        {"system", no_argument, nullptr, 's'},       {nullptr, 0, nullptr, 0}};
    optind = 1;
    opterr = 0;
    int c = 0;
    while ((c = getopt_long(argc, argv, ":d:i:lvs", long_options, nullptr)) != -1) {
        switch (c) {
        case 'd':
            options.device = optarg;
            break;
        case 'i': {
            char* end = nullptr;
            const unsigned long port = std::strtoul(optarg, &end, 10);
            if (*optarg == '\0' || *end != '\0' || port == 0 || port > 255) {
                std::fprintf(stderr, "prdma-devinfo: -i needs a port number 1..255, not '%s'\n",
                             optarg);
                return false;
            }
            options.port = static_cast<unsigned>(port);
            break;
        }
        case 'l':
            options.list = true;
            break;
        case 'v':
            options.verbose = true;
            break;
        case 's':
            options.system = true;
            break;
        case ':':
            std::fprintf(stderr, "prdma-devinfo: option '%s' needs a value\n", argv[optind - 1]);
            return false;
        default:
            if (optopt != 0) {
                std::fprintf(stderr, "prdma-devinfo: unknown option '-%c' (try --help)\n", optopt);
            } else {
                std::fprintf(stderr, "prdma-devinfo: unknown option '%s' (try --help)\n",
                             argv[optind - 1]);
            }
            return false;
        }
    }
    if (optind < argc) {
        std::fprintf(stderr, "prdma-devinfo: unexpected argument '%s' (try --help)\n",
                     argv[optind]);
        return false;
    }
    return true;
}

void print_system(const prdma::Eal& eal, int& rc) {
    std::printf("prdma %s on %s\n", PRDMA_VERSION_STRING, rte_version());
    std::printf("eal:\n  args:");
    for (const auto& arg : eal.args()) {
        std::printf(" %s", arg.c_str());
    }
    std::printf("\n  lcores: %u (main %u)\n  iova mode: %s\n", eal.lcore_count(), eal.main_lcore(),
                rte_eal_iova_mode() == RTE_IOVA_VA ? "va" : "pa");
    rc |= print_memory(eal);
    auto topology = prdma::Topology::discover();
    if (topology) {
        print_topology(topology.value());
    } else {
        std::fprintf(stderr, "prdma-devinfo: topology: %s\n", topology.error().to_string().c_str());
        rc = 1;
    }
    print_ports();
    std::printf("\n");
}

// argv[0] and what follows the first `--`: prdma-devinfo's own options (the EAL's come before).
std::vector<char*> own_arguments(int argc, char** argv) {
    std::vector<char*> own{argv[0]};
    char** const end = argv + argc;
    char** const dashes =
        std::find_if(argv + 1, end, [](const char* arg) { return std::strcmp(arg, "--") == 0; });
    if (dashes != end) {
        own.insert(own.end(), dashes + 1, end);
    }
    return own;
}

int run_main(int argc, char** argv) {
    if (wants_help(argc, argv)) {
        std::printf(usage_text, PRDMA_DEFAULT_EAL_ARGS);
        return 0;
    }
    // Parsed before the EAL starts, so a mistake in them is said at once and alone, not after
    // (or instead of) whatever starting the EAL and its devices prints. Parsed from a copy:
    // getopt permutes what it parses, and the EAL has yet to read argv.
    std::vector<char*> own = own_arguments(argc, argv);
    Options options;
    if (!parse_options(static_cast<int>(own.size()), own.data(), options)) {
        return 2;
    }
    int consumed = 0;
    auto eal = prdma::Eal::start_from_argv(argc, argv, &consumed);
    if (!eal) {
        std::fprintf(stderr, "prdma-devinfo: %s\n", eal.error().to_string().c_str());
        return 1;
    }
    int rc = 0;
    if (options.system) {
        print_system(eal.value(), rc);
    }
    rc |= print_rdma_devices(options);
    return rc;
}

} // namespace

int main(int argc, char** argv) {
    // Standard-library allocations are the only things that throw here; say so, never abort.
    try {
        return run_main(argc, argv);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "prdma-devinfo: unexpected error: %s\n", e.what());
        return 1;
    }
}
