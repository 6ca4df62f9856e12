// What a port's driver asks of the mbufs swroce gives it, where that differs from the default.
// net_af_xdp registers the whole mbuf pool as its AF_XDP umem, one umem chunk per mbuf: the
// kernel takes chunks of at most a page (XDP_UMEM_REG fails with EINVAL above), the driver keeps
// 2048 mbufs on its fill ring whatever the rx ring size, and the umem counts against
// RLIMIT_MEMLOCK unless the process has CAP_IPC_LOCK. The driver reports every such failure as
// EINVAL from rte_eth_rx_queue_setup, so swroce checks first and says which limit it was.
// net_memif reports the 1500-byte MTU of a standard Ethernet frame (DPDK 22.11: max_rx_pktlen
// 1518, so configure refuses more), yet carries a frame as long as one of its ring buffers: with
// 4224-byte buffers RoCE frames of a 4096-byte IB MTU, 64 KiB in 16 packets instead of 64. Only
// what fits one buffer: a longer frame spans several, and 22.11's tx never clears the
// continuation flag of a frame's first buffer, so once the ring wraps a short frame there is
// glued to the next one (fixed upstream in 2026). The client lays every buffer out with its own
// bsize devarg (2048 by default) and memif never tells the server: a server's bsize is only what
// it expects of its client.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <rte_ethdev.h>
#include <rte_mempool.h>

#include <prdma/status.hpp>

namespace prdma::swroce {

struct PortProfile {
    std::uint16_t mbuf_data_room = 0;   // for rte_pktmbuf_pool_create
    unsigned mbufs_kept_by_driver = 0;  // beyond its descriptors (af_xdp: the fill ring)
    std::optional<unsigned> max_ib_mtu; // largest IB MTU whose frames fit one mbuf
    // memif: the IP packet size one ring buffer holds (0: not such a driver), and whether this
    // side knows it (the client) or only expects it of its peer (the server).
    unsigned buffer_mtu = 0;
    bool buffer_mtu_known = false;
    bool af_xdp = false;
};

PortProfile port_profile_for(const rte_eth_dev_info& info);

// af_xdp: the pool's mbufs must each fit one page, and all of them the locked-memory limit.
// `pools` is how many such pools (queue groups) the process registers.
Status check_af_xdp_pool(const std::string& ethdev, const rte_mempool* pool, unsigned pools);

} // namespace prdma::swroce
