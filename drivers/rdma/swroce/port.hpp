// The Ethernet port under an swroce device: claims an ethdev, gives each queue group its own
// rx/tx queue pair and mbuf pool, starts it, and gives it back on destruction.
//
// The ethdev belongs to its own driver (a vdev such as net_memif0, or a PCI NIC); SwrocePort
// takes it with DPDK's ownership API, so a second user (another swroce device, testpmd's port
// iteration) cannot configure it underneath us, and never closes it.
//
// A link that goes down (memif: the peer process died or closed its port) stops the bursts: the
// fast path reads one byte that the EAL interrupt thread keeps up to date, frames sent meanwhile
// are dropped and counted as a NIC with its cable pulled would, and receive polls return nothing.
// The RoCE timers then fail the outstanding work (retry exceeded) instead of waiting on a backlog.
//
// DPDK 22.11's memif unmaps the shared rings from its interrupt thread as soon as it sees the
// peer's socket close, while an lcore may be inside a burst that checked "connected" on entry:
// that lcore would fault. A memif port's bursts therefore go through the burst gate
// (burst_gate.hpp), which runs the interrupt thread's callbacks only while no burst is under way.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

#include <prdma/build_config.hpp>
#include <prdma/compiler.hpp>
#include <prdma/status.hpp>

#include "arp.hpp"
#include "burst_gate.hpp"
#include "port_profile.hpp"

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

// What one queue group's port did not do because the link was down. Written by the group's own
// lcore only; a control-path read is a snapshot, as for the engine's counters.
struct alignas(RTE_CACHE_LINE_SIZE) PortLinkDownCounters {
    std::uint64_t tx_dropped_link_down = 0; // frames handed to send_frames and freed unsent
    std::uint64_t rx_polls_link_down = 0;   // receive_frames calls that did not poll the port
};

class SwrocePort {
public:
    // How often the EAL interrupt thread reads the link of a port whose driver cannot tell it
    // (memif and most virtual ports have no link interrupt): 10 ms, as DPDK's bonding driver
    // polls its members. RoCE timers are tens of milliseconds and longer.
    static constexpr std::uint64_t link_poll_interval_us = 10'000;
    // How long a stop waits for the interrupt thread before running on the caller's thread.
    static constexpr unsigned interrupt_thread_wait_ms = 5'000;

    // Descriptors asked of the PMD per queue; rte_eth_dev_adjust_nb_rx_tx_desc clamps them to
    // what the port takes. 1024 rides out a few hundred microseconds of a busy lcore at 10 GbE.
    static constexpr std::uint16_t wanted_rx_descriptors = 1024;
    static constexpr std::uint16_t wanted_tx_descriptors = 1024;
    // Per-lcore mempool cache: several 32-packet bursts, well under RTE_MEMPOOL_CACHE_MAX_SIZE.
    static constexpr unsigned mempool_cache_size = 256;
    // Lcores that take mbufs from a group's pool: its owner and the control lcore (ARP).
    static constexpr unsigned mempool_lcores = 2;
    // Received requests a group's QPs may keep past PSN gaps at once (reorder.cpp; two windows of
    // a selective-repeat peer, ReorderBuffer::selective_repeat_reach): each from
    // the pool of the queue it arrived on, which is the QP's own group's (handed-over frames are
    // not kept; on a ring port, whose frames are the sender's mbufs, the peer's pool).
    static constexpr unsigned mbufs_kept_past_gaps = 512;
    // mbufs the driver holds outside the port at once: an rx burst, a tx burst being built, the
    // group's stash of mbufs taken in bulk for the next frames, and the requests kept past gaps.
    static constexpr unsigned mbufs_held_by_driver = 2 * 64 + 32 + mbufs_kept_past_gaps;
    static constexpr std::uint16_t mbuf_data_room = RTE_PKTMBUF_HEADROOM + max_roce_frame_size;

    // Pool size for a queue group: every rx descriptor holds an mbuf, every tx descriptor may
    // hold one until the PMD reclaims it, each lcore's cache may hold up to 1.5x its size before
    // flushing, plus what the driver holds; rounded up to 2^k - 1, the size a ring-backed
    // mempool uses without waste.
    // `kept_by_driver`: mbufs the PMD holds beyond its descriptors (af_xdp's fill ring).
    static unsigned mempool_size_for(std::uint16_t rx_descriptors, std::uint16_t tx_descriptors,
                                     unsigned kept_by_driver = 0);

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
    //
    // A virtual port (vdev bus) is drained and stopped on the EAL interrupt thread: memif runs
    // its peer's disconnect there, unmapping the shared rings and freeing its regions, and a stop
    // on another thread at the same moment would unmap and free them twice (DPDK 22.11 takes no
    // lock around either). A hardware port stops on the caller's thread, since some drivers need
    // the interrupt thread to answer while they stop.
    ~SwrocePort();

    [[nodiscard]] std::uint16_t port_id() const noexcept { return port_id_; }
    [[nodiscard]] const std::string& name() const noexcept { return name_; }
    // The port's unicast address; a random locally administered one when the port has none.
    [[nodiscard]] const MacAddress& mac() const noexcept { return mac_; }
    // Multicast groups the device must hear (IPv6 neighbour discovery's solicited-node group)
    // on a port in neither all-multicast nor promiscuous mode: programmed into its filter when
    // it has one. Logs a warning, and returns false, when it has a filter that refuses them.
    bool accept_multicast(std::span<const MacAddress> groups);
    [[nodiscard]] bool mac_generated() const noexcept { return mac_generated_; }
    // The IP packet size frames have by default: the MTU the port runs with; on memif what its
    // ring buffers hold (PortProfile::buffer_mtu), on a server no more than the MTU.
    [[nodiscard]] unsigned ethernet_mtu() const noexcept {
        if (buffer_mtu_ == 0) {
            return ethernet_mtu_;
        }
        return buffer_mtu_known_ ? buffer_mtu_ : std::min(ethernet_mtu_, buffer_mtu_);
    }
    // The largest IB MTU whose frames the port's mbufs hold (af_xdp: 2048), if it has one.
    [[nodiscard]] std::optional<unsigned> max_ib_mtu() const noexcept { return max_ib_mtu_; }
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
    // Link state now, asked of the port (memif's link comes up when its peer connects, long
    // after open()); also brings the fast path's view up to date. Control path.
    [[nodiscard]] bool link_up() const noexcept;
    // The fast path's view of the link: at most link_poll_interval_us old.
    [[nodiscard]] bool link_up_cached() const noexcept {
        // Relaxed: the byte guards no other data. A stale "up" costs one burst the driver itself
        // refuses (memif checks its own connected flag on entry); a stale "down" drops frames the
        // RoCE retransmission timer sends again. On x86 and ARM this is a plain byte load.
        return shared_ != nullptr && shared_->link_up.load(std::memory_order_relaxed) != 0;
    }
    // 0 when the port does not know its speed.
    [[nodiscard]] std::uint32_t link_speed_mbps() const noexcept;
    // What `group` skipped because the link was down (zeros for an empty handle).
    [[nodiscard]] PortLinkDownCounters link_down_counters(unsigned group) const noexcept;

    // Fast path: one queue group's lcore only. Const because the queues are the ethdev's state,
    // not this handle's. Like rte_eth_tx_burst, the mbufs of the count returned are the port's:
    // on a link that is down that is every one of them, freed unsent and counted.
    std::uint16_t send_frames(unsigned group, rte_mbuf** mbufs,
                              std::uint16_t count) const noexcept {
        if (PRDMA_UNLIKELY(!link_up_cached())) {
            return drop_while_link_down(group, mbufs, count);
        }
        // A closed gate sends nothing: the frames stay the caller's, as with a full ring.
        return through_gate(group, [&] {
            return rte_eth_tx_burst(port_id_, static_cast<std::uint16_t>(group), mbufs, count);
        });
    }
    // Nothing while the link is down: the port is not polled at all then, so a driver that tears
    // its queues down with the link is entered as little as possible.
    std::uint16_t receive_frames(unsigned group, rte_mbuf** mbufs,
                                 std::uint16_t count) const noexcept {
        if (PRDMA_UNLIKELY(!link_up_cached())) {
            if (shared_ != nullptr && group < shared_->counters.size()) {
                ++shared_->counters[group].rx_polls_link_down;
            }
            return 0;
        }
        return through_gate(group, [&] {
            return rte_eth_rx_burst(port_id_, static_cast<std::uint16_t>(group), mbufs, count);
        });
    }

    // A new single-segment mbuf from `group`'s pool holding a copy of `frame` (control frames
    // such as ARP); nullptr when the pool is empty or the frame does not fit one mbuf.
    rte_mbuf* copy_to_mbuf(unsigned group, std::span<const std::uint8_t> frame) const noexcept;

private:
    // What the fast path and the EAL interrupt thread share: at a fixed address, so the link
    // poll's alarm keeps pointing at it when the handle moves.
    struct Shared {
        std::uint16_t port_id = RTE_MAX_ETHPORTS;
        // 1 while the link is up. Written by the interrupt thread's link poll and by link_up();
        // read by every lcore polling the port.
        std::atomic<std::uint8_t> link_up{0};
        std::array<PortLinkDownCounters, PRDMA_MAX_QUEUE_GROUPS> counters{};
        GatedBursts bursts;
    };

    // Runs `burst` (0 when the burst gate is closed) inside the gate when the port needs it.
    template <typename Burst>
    std::uint16_t through_gate(unsigned group, Burst&& burst) const noexcept {
        if (!gated_) {
            return burst();
        }
        BurstSlot& slot = shared_->bursts.slots[group];
        if (PRDMA_UNLIKELY(!burst_gate::enter(slot))) {
            return 0;
        }
        const std::uint16_t done = burst();
        burst_gate::leave(slot);
        return done;
    }

    // open()'s steps, in order (as testpmd's init_port_config and start_port).
    static Status check_open_arguments(const std::string& name, unsigned queue_groups,
                                       std::optional<unsigned> ib_mtu);
    Status claim(const std::string& name);
    Status check_capabilities(const rte_eth_dev_info& info, const PortProfile& profile,
                              unsigned queue_groups, std::optional<unsigned> ib_mtu);
    [[nodiscard]] Result<unsigned> choose_mtu(const rte_eth_dev_info& info,
                                              std::optional<unsigned> ib_mtu) const;
    Status configure(const rte_eth_dev_info& info, unsigned queue_groups,
                     std::optional<unsigned> ib_mtu);
    Status setup_queues(const PortProfile& profile, unsigned queue_groups);
    Status start();
    Status read_mac();
    Status watch_link(std::optional<unsigned> ib_mtu);

    static void poll_link(void* arg) noexcept;
    std::uint16_t drop_while_link_down(unsigned group, rte_mbuf** mbufs,
                                       std::uint16_t count) const noexcept;
    void stop() noexcept;
    void release() noexcept;

    std::unique_ptr<Shared> shared_;
    bool link_polled_ = false; // the interrupt thread's alarm is armed for shared_
    bool stop_on_interrupt_thread_ = false;
    // Bursts go through the burst gate (drivers that unmap queue memory from the interrupt
    // thread: memif).
    bool gated_ = false;
    std::uint16_t port_id_ = RTE_MAX_ETHPORTS;
    std::string name_;
    std::uint64_t owner_id_ = RTE_ETH_DEV_NO_OWNER;
    bool started_ = false;
    MacAddress mac_{};
    bool mac_generated_ = false;
    unsigned ethernet_mtu_ = 0;
    unsigned buffer_mtu_ = 0;
    bool buffer_mtu_known_ = false;
    std::optional<unsigned> max_ib_mtu_;
    int socket_ = SOCKET_ID_ANY;
    std::uint16_t rx_descriptors_ = 0;
    std::uint16_t tx_descriptors_ = 0;
    bool tx_multi_segment_ = false;
    std::vector<rte_mempool*> pools_;
};

} // namespace prdma::swroce
