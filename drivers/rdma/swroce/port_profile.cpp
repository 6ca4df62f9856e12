#include "port_profile.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sys/resource.h>
#include <unistd.h>

#include <rte_dev.h>
#include <rte_devargs.h>
#include <rte_kvargs.h>

#include <prdma/format.hpp>

#include "port.hpp"

namespace prdma::swroce {

namespace {

// af_xdp's fill ring, filled at rx queue setup whatever nb_rx_desc is (DPDK 22.11).
constexpr unsigned af_xdp_fill_ring = 2048;
// The umem headroom (mempool header + mbuf + RTE_PKTMBUF_HEADROOM) and the kernel's
// XDP_PACKET_HEADROOM come before every received frame: data starts 384 bytes into the chunk.
constexpr unsigned af_xdp_rx_offset = 256;
// Room for a 2048-byte IB MTU frame (2154 bytes, 2176 rounded) after that offset: the element
// is then 2688 bytes and the umem chunk 2752, under a 4 KiB page. 4096 cannot fit: its frame
// needs more than the 3456 bytes the largest one-page chunk leaves.
constexpr std::uint16_t af_xdp_data_room = RTE_PKTMBUF_HEADROOM + af_xdp_rx_offset + 2176;
constexpr unsigned af_xdp_max_ib_mtu = 2048;
constexpr unsigned cap_ipc_lock_bit = 14;
// memif's ring buffer size when its vdev has no bsize devarg (DPDK 22.11).
constexpr unsigned memif_default_buffer_size = 2048;

// What a memif port's buffers hold (PortProfile::buffer_mtu): its bsize devarg, less the link
// header and a VLAN tag, within one of swroce's mbufs; and whether it is the client, whose bsize
// the buffers have (memif's default role).
void memif_buffers(const rte_eth_dev_info& info, PortProfile& profile) {
    unsigned size = memif_default_buffer_size;
    bool client = true;
    const rte_devargs* devargs = info.device != nullptr ? rte_dev_devargs(info.device) : nullptr;
    rte_kvargs* kvargs = devargs != nullptr && devargs->args != nullptr
                             ? rte_kvargs_parse(devargs->args, nullptr)
                             : nullptr;
    if (kvargs != nullptr) {
        if (const char* bsize = rte_kvargs_get(kvargs, "bsize"); bsize != nullptr) {
            size = static_cast<unsigned>(std::strtoul(bsize, nullptr, 10));
        }
        if (const char* role = rte_kvargs_get(kvargs, "role"); role != nullptr) {
            client = std::strcmp(role, "server") != 0;
        }
        rte_kvargs_free(kvargs);
    }
    const unsigned frame = std::min(size, max_roce_frame_size);
    constexpr unsigned link_header = RTE_ETHER_HDR_LEN + RTE_VLAN_HLEN;
    profile.buffer_mtu = frame > link_header ? frame - link_header : 1;
    profile.buffer_mtu_known = client;
}

// The kernel charges an AF_XDP umem against RLIMIT_MEMLOCK unless CAP_IPC_LOCK is effective.
bool has_ipc_lock() {
    std::ifstream status("/proc/self/status");
    std::string line;
    while (std::getline(status, line)) {
        if (line.starts_with("CapEff:")) {
            const std::uint64_t caps = std::stoull(line.substr(7), nullptr, 16);
            return (caps >> cap_ipc_lock_bit & 1U) != 0;
        }
    }
    return false;
}

} // namespace

PortProfile port_profile_for(const rte_eth_dev_info& info) {
    if (info.driver_name != nullptr && std::strcmp(info.driver_name, "net_af_xdp") == 0) {
        // One spare mbuf: 22.11 registers populated_size chunks from the pool's start, and the
        // object that the 2 MiB page boundaries push past that span is refused by the kernel.
        return {af_xdp_data_room, af_xdp_fill_ring + 1, af_xdp_max_ib_mtu, 0, false, true};
    }
    if (info.driver_name != nullptr && std::strcmp(info.driver_name, "net_memif") == 0) {
        PortProfile profile{SwrocePort::mbuf_data_room, 0, std::nullopt, 0, false, false};
        memif_buffers(info, profile);
        return profile;
    }
    return {SwrocePort::mbuf_data_room, 0, std::nullopt, 0, false, false};
}

Status check_af_xdp_pool(const std::string& ethdev, const rte_mempool* pool, unsigned pools) {
    const auto page = static_cast<unsigned>(::sysconf(_SC_PAGESIZE));
    const unsigned chunk = rte_mempool_calc_obj_size(pool->elt_size, pool->flags, nullptr);
    if (chunk > page) {
        return Error{StatusCode::not_supported,
                     strformat("swroce: ethdev %s (net_af_xdp): AF_XDP needs each mbuf in one "
                               "%u-byte page, but these make %u-byte umem chunks",
                               ethdev.c_str(), page, chunk)};
    }
    rlimit limit{};
    if (has_ipc_lock() || ::getrlimit(RLIMIT_MEMLOCK, &limit) != 0 ||
        limit.rlim_cur == RLIM_INFINITY) {
        return {};
    }
    const std::uint64_t bytes = std::uint64_t{pool->size} * chunk * pools + page;
    if (bytes <= limit.rlim_cur) {
        return {};
    }
    const std::uint64_t fits = (limit.rlim_cur - page) / chunk;
    return Error{StatusCode::no_resources,
                 strformat("swroce: ethdev %s (net_af_xdp): RLIMIT_MEMLOCK of %llu KiB fits %llu "
                           "mbufs of %u bytes (shared by every AF_XDP umem of uid %u); af_xdp "
                           "needs %u for %u queue group(s) (%llu KiB). Grant CAP_IPC_LOCK or "
                           "raise ulimit -l",
                           ethdev.c_str(), static_cast<unsigned long long>(limit.rlim_cur / 1024),
                           static_cast<unsigned long long>(fits), chunk,
                           static_cast<unsigned>(::getuid()), pool->size * pools, pools,
                           static_cast<unsigned long long>(bytes / 1024))};
}

} // namespace prdma::swroce
