// The Ethernet port under an swroce device: claims an ethdev, gives each queue group its own
// rx/tx queue pair and mbuf pool, starts it, and gives it back on destruction.
//
// The ethdev belongs to its own driver (a vdev such as net_memif0, or a PCI NIC); SwrocePort
// takes it with DPDK's ownership API, so a second user (another swroce device, testpmd's port
// iteration) cannot configure it underneath us, and never closes it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

#include <prdma/status.hpp>

#include "arp.hpp"

namespace prdma::swroce {

// Bytes a RoCEv2 packet adds to its payload above Ethernet, in the worst case: IPv6 40 + UDP 8 +
// BTH 12 + RETH 16 + ImmDt 4 (RDMA WRITE Only with Immediate) + ICRC 4. Linux rxe counts 80
// (no ImmDt); counting 84 keeps a full-MTU write-with-immediate inside the Ethernet MTU.
inline constexpr unsigned roce_l3_overhead = 84;
// Largest frame an mbuf must hold: Ethernet 14 + one VLAN tag 4 + the above + 4096 payload +
// FCS 4 (ports asked to keep it), rounded up to a multiple of 128 so buffers stay cache aligned.
inline constexpr unsigned max_roce_frame_size = 4224;
static_assert(max_roce_frame_size >= 14 + 4 + roce_l3_overhead + 4096 + 4);

// Ethernet MTU (IP packet size) needed to carry an IB path MTU of `ib_mtu` bytes.
constexpr unsigned ethernet_mtu_for(unsigned ib_mtu) {
    return ib_mtu + roce_l3_overhead;
}

class SwrocePort {
public:
    // Descriptors asked of the PMD per queue; rte_eth_dev_adjust_nb_rx_tx_desc clamps them to
    // what the port takes. 1024 rides out a few hundred microseconds of a busy lcore at 10 GbE.
    static constexpr std::uint16_t wanted_rx_descriptors = 1024;
    static constexpr std::uint16_t wanted_tx_descriptors = 1024;
    // Per-lcore mempool cache: several 32-packet bursts, well under RTE_MEMPOOL_CACHE_MAX_SIZE.
    static constexpr unsigned mempool_cache_size = 256;
    // Lcores that take mbufs from a group's pool: its owner and the control lcore (ARP).
    static constexpr unsigned mempool_lcores = 2;
    // mbufs the driver holds outside the port at once: an rx burst and a tx burst being built.
    static constexpr unsigned mbufs_held_by_driver = 2 * 64;
    static constexpr std::uint16_t mbuf_data_room = RTE_PKTMBUF_HEADROOM + max_roce_frame_size;

    // Pool size for a queue group: every rx descriptor holds an mbuf, every tx descriptor may
    // hold one until the PMD reclaims it, each lcore's cache may hold up to 1.5x its size before
    // flushing, plus what the driver holds; rounded up to 2^k - 1, the size a ring-backed
    // mempool uses without waste.
    static unsigned mempool_size_for(std::uint16_t rx_descriptors, std::uint16_t tx_descriptors);

    // Claims, configures and starts `ethdev_name` with `queue_groups` rx/tx queue pairs.
    // `ib_mtu` (256..4096), when given, must fit the port's Ethernet MTU, which is raised to fit
    // when the port allows. `socket` is where the mbuf pools live; SOCKET_ID_ANY means the port's.
    static Result<SwrocePort> open(std::string_view ethdev_name, unsigned queue_groups,
                                   std::optional<unsigned> ib_mtu, int socket);

    // An empty handle that owns no port (a member assigned by open() later); its accessors
    // report nothing: no queue groups, no pools, link down.
    SwrocePort() = default;
    SwrocePort(SwrocePort&& other) noexcept;
    SwrocePort& operator=(SwrocePort&& other) noexcept;
    SwrocePort(const SwrocePort&) = delete;
    SwrocePort& operator=(const SwrocePort&) = delete;
    // Drains and stops the port, releases ownership, frees the pools. Every lcore must have
    // stopped polling the queues first. The ethdev keeps queues that point at the freed pools
    // and any MTU raised for `ib_mtu`: whoever uses it next must set its queues up again before
    // starting it. A ring port passes mbuf pointers, not copies, so frames still queued towards
    // a peer come from our pools: the peer must have received them before this runs.
    ~SwrocePort();

    [[nodiscard]] std::uint16_t port_id() const noexcept { return port_id_; }
    [[nodiscard]] const std::string& name() const noexcept { return name_; }
    // The port's unicast address; a random locally administered one when the port has none.
    [[nodiscard]] const MacAddress& mac() const noexcept { return mac_; }
    [[nodiscard]] bool mac_generated() const noexcept { return mac_generated_; }
    [[nodiscard]] unsigned ethernet_mtu() const noexcept { return ethernet_mtu_; }
    [[nodiscard]] unsigned queue_groups() const noexcept {
        return static_cast<unsigned>(pools_.size());
    }
    [[nodiscard]] rte_mempool* mempool(unsigned group) const noexcept {
        return group < pools_.size() ? pools_[group] : nullptr;
    }
    [[nodiscard]] int socket() const noexcept { return socket_; }
    [[nodiscard]] std::uint16_t rx_descriptors() const noexcept { return rx_descriptors_; }
    [[nodiscard]] std::uint16_t tx_descriptors() const noexcept { return tx_descriptors_; }
    // Whether chained mbufs (header + payload segments) may be sent.
    [[nodiscard]] bool tx_multi_segment() const noexcept { return tx_multi_segment_; }
    // Link state now (memif's link comes up when its peer connects, long after open()).
    [[nodiscard]] bool link_up() const noexcept;
    // 0 when the port does not know its speed.
    [[nodiscard]] std::uint32_t link_speed_mbps() const noexcept;

    // Fast path: one queue group's lcore only. Const because the queues are the ethdev's state,
    // not this handle's.
    std::uint16_t send_frames(unsigned group, rte_mbuf** mbufs,
                              std::uint16_t count) const noexcept {
        return rte_eth_tx_burst(port_id_, static_cast<std::uint16_t>(group), mbufs, count);
    }
    std::uint16_t receive_frames(unsigned group, rte_mbuf** mbufs,
                                 std::uint16_t count) const noexcept {
        return rte_eth_rx_burst(port_id_, static_cast<std::uint16_t>(group), mbufs, count);
    }

    // A new single-segment mbuf from `group`'s pool holding a copy of `frame` (control frames
    // such as ARP); nullptr when the pool is empty or the frame does not fit one mbuf.
    rte_mbuf* copy_to_mbuf(unsigned group, std::span<const std::uint8_t> frame) const noexcept;

private:
    void release() noexcept;

    std::uint16_t port_id_ = RTE_MAX_ETHPORTS;
    std::string name_;
    std::uint64_t owner_id_ = RTE_ETH_DEV_NO_OWNER;
    bool started_ = false;
    MacAddress mac_{};
    bool mac_generated_ = false;
    unsigned ethernet_mtu_ = 0;
    int socket_ = SOCKET_ID_ANY;
    std::uint16_t rx_descriptors_ = 0;
    std::uint16_t tx_descriptors_ = 0;
    bool tx_multi_segment_ = false;
    std::vector<rte_mempool*> pools_;
};

} // namespace prdma::swroce
