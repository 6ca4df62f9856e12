#include "port.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <functional>
#include <utility>

#include <rte_alarm.h>
#include <rte_bus.h>
#include <rte_dev.h>
#include <rte_errno.h>
#include <rte_ether.h>
#include <rte_lcore.h>

#include <prdma/build_config.hpp>
#include <prdma/format.hpp>

#include "interrupt_thread.hpp"
#include "mbuf_pools.hpp"
#include "port_profile.hpp"
#include "swroce_log.hpp"

namespace prdma::swroce {

namespace {

constexpr char owner_name[] = "prdma_swroce";

// Every ethdev, with the owner of those taken, for messages that tell a person what to pass.
std::string describe_ethdevs() {
    std::string text;
    for (std::uint16_t id = rte_eth_find_next(0); id < RTE_MAX_ETHPORTS;
         id = rte_eth_find_next(id + 1)) {
        char name[RTE_ETH_NAME_MAX_LEN] = {};
        if (rte_eth_dev_get_name_by_port(id, name) != 0) {
            continue;
        }
        if (!text.empty()) {
            text += ", ";
        }
        text += name;
        rte_eth_dev_owner owner{};
        if (rte_eth_dev_owner_get(id, &owner) == 0 && owner.id != RTE_ETH_DEV_NO_OWNER) {
            text += strformat(" (owned by %s)", owner.name);
        }
    }
    if (text.empty()) {
        return "none exist; create one on the EAL command line (--vdev=net_memif0, "
               "--vdev=net_af_packet0,iface=eth0) or allow a PCI NIC (-a 0000:01:00.0)";
    }
    return text;
}

// The largest MTU the ethdev layer accepts at configure: max_mtu, and no frame longer than
// max_rx_pktlen (DPDK 22.11's af_packet reports 1518 bytes beside a far larger max_mtu, and
// configure refuses anything above 1500 with a bare EINVAL). The overhead is ethdev's own rule.
unsigned max_ethernet_mtu(const rte_eth_dev_info& info) {
    const unsigned overhead = info.max_mtu != UINT16_MAX && info.max_rx_pktlen > info.max_mtu
                                  ? info.max_rx_pktlen - info.max_mtu
                                  : RTE_ETHER_HDR_LEN + RTE_ETHER_CRC_LEN;
    return std::min<unsigned>(info.max_mtu, info.max_rx_pktlen - overhead);
}

Error dpdk_error(const char* call, const std::string& port, int ret) {
    return {StatusCode::internal, strformat("%s on ethdev %s failed: %s", call, port.c_str(),
                                            rte_strerror(ret < 0 ? -ret : ret))};
}

// Drains what is waiting so our mbufs go back to their pools (a ring port hands mbuf pointers
// across, not copies). Bounded: a peer that keeps sending must not hold up a stop.
void drain_rx(std::uint16_t port_id, unsigned queues) {
    constexpr unsigned max_bursts = 1024;
    std::array<rte_mbuf*, 32> burst{};
    for (unsigned queue = 0; queue < queues; ++queue) {
        for (unsigned i = 0; i < max_bursts; ++i) {
            const std::uint16_t got = rte_eth_rx_burst(port_id, static_cast<std::uint16_t>(queue),
                                                       burst.data(), burst.size());
            if (got == 0) {
                break;
            }
            rte_pktmbuf_free_bulk(burst.data(), got);
        }
    }
}

bool ask_link_up(std::uint16_t port_id) noexcept {
    rte_eth_link link{};
    return rte_eth_link_get_nowait(port_id, &link) == 0 && link.link_status == RTE_ETH_LINK_UP;
}

// Ports on the vdev bus are software (memif, ring, af_packet, tap...): nothing of theirs needs
// the interrupt thread to answer while they stop, so they can stop on it.
bool on_vdev_bus(const rte_eth_dev_info& info) {
    if (info.device == nullptr) {
        return false;
    }
    const rte_bus* bus = rte_dev_bus(info.device);
    const char* name = bus != nullptr ? rte_bus_name(bus) : nullptr;
    return name != nullptr && std::strcmp(name, "vdev") == 0;
}

// memif tears its shared memory down on the interrupt thread when its peer goes away.
bool unmaps_queues_from_interrupt_thread(const rte_eth_dev_info& info) {
    return info.driver_name != nullptr && std::strcmp(info.driver_name, "net_memif") == 0;
}

} // namespace

unsigned SwrocePort::mempool_size_for(std::uint16_t rx_descriptors, std::uint16_t tx_descriptors,
                                      unsigned kept_by_driver) {
    const unsigned cache_worst = mempool_lcores * (mempool_cache_size * 3 / 2);
    const unsigned needed = unsigned{rx_descriptors} + tx_descriptors + cache_worst +
                            mbufs_held_by_driver + kept_by_driver;
    return std::bit_ceil(needed + 1) - 1;
}

Status SwrocePort::check_open_arguments(const std::string& name, unsigned queue_groups,
                                        std::optional<unsigned> ib_mtu) {
    if (queue_groups < 1 || queue_groups > PRDMA_MAX_QUEUE_GROUPS) {
        return Error{StatusCode::invalid_parameter,
                     strformat("swroce port %s: %u queue groups asked; 1..%u are possible "
                               "(PRDMA_MAX_QUEUE_GROUPS)",
                               name.c_str(), queue_groups,
                               static_cast<unsigned>(PRDMA_MAX_QUEUE_GROUPS))};
    }
    if (ib_mtu && (*ib_mtu < 256 || *ib_mtu > 4096 || !std::has_single_bit(*ib_mtu))) {
        return Error{StatusCode::invalid_parameter,
                     strformat("swroce port %s: IB MTU %u is not one of 256, 512, 1024, 2048, "
                               "4096",
                               name.c_str(), *ib_mtu)};
    }
    return {};
}

// Finds the ethdev and makes swroce its owner; from here on the port gives back what it took.
Status SwrocePort::claim(const std::string& name) {
    std::uint16_t port_id = RTE_MAX_ETHPORTS;
    if (rte_eth_dev_get_port_by_name(name.c_str(), &port_id) != 0) {
        return Error{StatusCode::invalid_parameter,
                     strformat("swroce: no ethdev named '%s'; ethdevs: %s", name.c_str(),
                               describe_ethdevs().c_str())};
    }
    rte_eth_dev_owner current{};
    if (int ret = rte_eth_dev_owner_get(port_id, &current); ret != 0) {
        return dpdk_error("rte_eth_dev_owner_get", name, ret);
    }
    if (current.id != RTE_ETH_DEV_NO_OWNER) {
        return Error{StatusCode::busy,
                     strformat("swroce: ethdev %s is already owned by %s; each swroce device "
                               "needs a port of its own",
                               name.c_str(), current.name)};
    }
    port_id_ = port_id;
    name_ = name;
    shared_ = std::make_unique<Shared>();
    shared_->port_id = port_id;
    rte_eth_dev_owner owner{};
    if (int ret = rte_eth_dev_owner_new(&owner.id); ret != 0) {
        return dpdk_error("rte_eth_dev_owner_new", name, ret);
    }
    std::strncpy(owner.name, owner_name, sizeof(owner.name) - 1);
    if (int ret = rte_eth_dev_owner_set(port_id, &owner); ret != 0) {
        // Lost a race with another claimer between the check above and here.
        return Error{StatusCode::busy,
                     strformat("swroce: cannot take ethdev %s (%s); another user claimed it",
                               name.c_str(), rte_strerror(-ret))};
    }
    owner_id_ = owner.id;
    return {};
}

// What the port's driver can carry against what the device asks of it.
Status SwrocePort::check_capabilities(const rte_eth_dev_info& info, const PortProfile& profile,
                                      unsigned queue_groups, std::optional<unsigned> ib_mtu) {
    max_ib_mtu_ = profile.max_ib_mtu;
    buffer_mtu_ = profile.buffer_mtu;
    buffer_mtu_known_ = profile.buffer_mtu_known;
    if (ib_mtu && profile.max_ib_mtu && *ib_mtu > *profile.max_ib_mtu) {
        return Error{StatusCode::not_supported,
                     strformat("swroce: ethdev %s (driver %s) takes frames of an IB MTU of at "
                               "most %u (one mbuf per page of its umem); use mtu=%u or less",
                               name_.c_str(), info.driver_name, *profile.max_ib_mtu,
                               *profile.max_ib_mtu)};
    }
    stop_on_interrupt_thread_ = on_vdev_bus(info);
    gated_ = unmaps_queues_from_interrupt_thread(info);
    if (queue_groups > info.max_rx_queues || queue_groups > info.max_tx_queues) {
        return Error{StatusCode::not_supported,
                     strformat("swroce: ethdev %s (driver %s) has at most %u rx and %u tx "
                               "queues; %u queue groups need %u of each. Use queues=%u or a "
                               "port with more queues",
                               name_.c_str(), info.driver_name, info.max_rx_queues,
                               info.max_tx_queues, queue_groups, queue_groups,
                               std::min<unsigned>(info.max_rx_queues, info.max_tx_queues))};
    }
    return {};
}

// The Ethernet MTU to configure: the port's own (af_packet would push a lower one onto the
// kernel interface), raised only as far as the IB MTU asked needs (not on memif: its buffers
// decide).
Result<unsigned> SwrocePort::choose_mtu(const rte_eth_dev_info& info,
                                        std::optional<unsigned> ib_mtu) const {
    std::uint16_t current_mtu = 0;
    if (rte_eth_dev_get_mtu(port_id_, &current_mtu) != 0 || current_mtu == 0) {
        current_mtu = RTE_ETHER_MTU;
    }
    unsigned wanted_mtu = current_mtu;
    const unsigned max_mtu = max_ethernet_mtu(info);
    if (ib_mtu && buffer_mtu_ != 0) {
        // memif: the ring buffers decide, not the MTU (left as it is).
        if (ethernet_mtu_for(*ib_mtu) > buffer_mtu_) {
            return Error{StatusCode::not_supported,
                         strformat("swroce: ethdev %s (%s): its ring buffers hold frames of IP "
                                   "packets up to %u bytes; IB MTU %u needs %u. Give the memif "
                                   "port bsize=4224 (the client's lays the buffers out, and a "
                                   "server expects its client's) or use a smaller mtu= devarg",
                                   name_.c_str(), info.driver_name, buffer_mtu_, *ib_mtu,
                                   ethernet_mtu_for(*ib_mtu))};
        }
    } else if (ib_mtu) {
        const unsigned needed = ethernet_mtu_for(*ib_mtu);
        if (needed > max_mtu) {
            return Error{StatusCode::not_supported,
                         strformat("swroce: ethdev %s (%s) carries an Ethernet MTU of at most %u; "
                                   "IB MTU %u needs %u (%u + %u bytes of IPv6/UDP/BTH/RETH/ImmDt/"
                                   "ICRC headers). Use a smaller mtu= devarg",
                                   name_.c_str(), info.driver_name, max_mtu, *ib_mtu, needed,
                                   *ib_mtu, roce_l3_overhead)};
        }
        wanted_mtu = std::max(wanted_mtu, needed);
    }
    return std::clamp<unsigned>(wanted_mtu, info.min_mtu,
                                std::max<unsigned>(max_mtu, info.min_mtu));
}

// rte_eth_dev_configure and the descriptor counts (testpmd's init_port_config).
Status SwrocePort::configure(const rte_eth_dev_info& info, unsigned queue_groups,
                             std::optional<unsigned> ib_mtu) {
    const Result<unsigned> wanted_mtu = choose_mtu(info, ib_mtu);
    if (!wanted_mtu) {
        return wanted_mtu.error();
    }
    rte_eth_conf conf{};
    conf.rxmode.mtu = wanted_mtu.value();
    // Frames above one mbuf are never RoCE; scatter lets a jumbo port still take them (to drop)
    // instead of refusing its queue setup.
    if (wanted_mtu.value() + RTE_ETHER_HDR_LEN + 4 > max_roce_frame_size &&
        (info.rx_offload_capa & RTE_ETH_RX_OFFLOAD_SCATTER) != 0) {
        conf.rxmode.offloads |= RTE_ETH_RX_OFFLOAD_SCATTER;
    }
    // Spread arriving traffic over the groups where the port can hash; the driver hands frames
    // that land in the wrong group over to the right one.
    const std::uint64_t rss_types =
        (RTE_ETH_RSS_IP | RTE_ETH_RSS_UDP) & info.flow_type_rss_offloads;
    if (queue_groups > 1 && rss_types != 0) {
        conf.rxmode.mq_mode = RTE_ETH_MQ_RX_RSS;
        conf.rx_adv_conf.rss_conf.rss_hf = rss_types;
    }
    // Header mbuf + payload segments lets the driver send from registered memory without a copy.
    if ((info.tx_offload_capa & RTE_ETH_TX_OFFLOAD_MULTI_SEGS) != 0) {
        conf.txmode.offloads |= RTE_ETH_TX_OFFLOAD_MULTI_SEGS;
        tx_multi_segment_ = true;
    }
    const auto groups16 = static_cast<std::uint16_t>(queue_groups);
    if (int ret = rte_eth_dev_configure(port_id_, groups16, groups16, &conf); ret != 0) {
        if (ret == -EBUSY) {
            return Error{StatusCode::busy,
                         strformat("swroce: ethdev %s is started by another user of this "
                                   "process; stop it (rte_eth_dev_stop) or give swroce a port "
                                   "of its own",
                                   name_.c_str())};
        }
        return dpdk_error("rte_eth_dev_configure", name_, ret);
    }
    rx_descriptors_ = wanted_rx_descriptors;
    tx_descriptors_ = wanted_tx_descriptors;
    if (int ret = rte_eth_dev_adjust_nb_rx_tx_desc(port_id_, &rx_descriptors_, &tx_descriptors_);
        ret != 0) {
        return dpdk_error("rte_eth_dev_adjust_nb_rx_tx_desc", name_, ret);
    }
    return {};
}

// One mbuf pool, one rx and one tx queue per queue group.
Status SwrocePort::setup_queues(const PortProfile& profile, unsigned queue_groups) {
    const unsigned pool_size =
        mempool_size_for(rx_descriptors_, tx_descriptors_, profile.mbufs_kept_by_driver);
    pools_.reserve(queue_groups);
    for (unsigned group = 0; group < queue_groups; ++group) {
        const std::string pool_name = mbuf_pools::name_for(port_id_, group);
        rte_mempool* pool = rte_pktmbuf_pool_create(
            pool_name.c_str(), pool_size, mempool_cache_size, 0, profile.mbuf_data_room, socket_);
        if (pool == nullptr) {
            const int err = rte_errno;
            return Error{err == ENOMEM ? StatusCode::no_resources : StatusCode::internal,
                         strformat("swroce: mbuf pool %s for ethdev %s (%u mbufs of %u bytes "
                                   "on socket %d) could not be created: %s",
                                   pool_name.c_str(), name_.c_str(), pool_size,
                                   unsigned{profile.mbuf_data_room}, socket_, rte_strerror(err))};
        }
        pools_.push_back(pool);
        if (profile.af_xdp) {
            if (Status st = check_af_xdp_pool(name_, pool, queue_groups); !st.ok()) {
                return st.error();
            }
        }
        const auto queue = static_cast<std::uint16_t>(group);
        if (int ret =
                rte_eth_rx_queue_setup(port_id_, queue, rx_descriptors_, socket_, nullptr, pool);
            ret != 0) {
            return dpdk_error("rte_eth_rx_queue_setup", name_, ret);
        }
        if (int ret = rte_eth_tx_queue_setup(port_id_, queue, tx_descriptors_, socket_, nullptr);
            ret != 0) {
            return dpdk_error("rte_eth_tx_queue_setup", name_, ret);
        }
    }
    return {};
}

// rte_eth_dev_start and the receive modes (testpmd's start_port).
Status SwrocePort::start() {
    if (int ret = rte_eth_dev_start(port_id_); ret != 0) {
        return dpdk_error("rte_eth_dev_start", name_, ret);
    }
    started_ = true;
    // Broadcast ARP arrives without these; they matter where peers reach us at another MAC or
    // through multicast (IPv6 neighbour discovery). A VF may refuse them and still carry RoCE,
    // so a refusal is a warning, not a failed open.
    if (int ret = rte_eth_promiscuous_enable(port_id_); ret != 0 && ret != -ENOTSUP) {
        SWROCE_LOG(WARNING, "ethdev %s refused promiscuous mode: %s", name_.c_str(),
                   rte_strerror(-ret));
    }
    if (int ret = rte_eth_allmulticast_enable(port_id_); ret != 0 && ret != -ENOTSUP) {
        SWROCE_LOG(WARNING, "ethdev %s refused all-multicast mode: %s", name_.c_str(),
                   rte_strerror(-ret));
    }
    return {};
}

bool SwrocePort::accept_multicast(std::span<const MacAddress> groups) {
    if (rte_eth_allmulticast_get(port_id_) == 1 || rte_eth_promiscuous_get(port_id_) == 1) {
        return true;
    }
    std::array<rte_ether_addr, 8> list{};
    const std::size_t count = std::min(groups.size(), list.size());
    for (std::size_t i = 0; i < count; ++i) {
        std::copy(groups[i].begin(), groups[i].end(), list[i].addr_bytes);
    }
    const int ret =
        rte_eth_dev_set_mc_addr_list(port_id_, list.data(), static_cast<std::uint32_t>(count));
    // A PMD without the op (memif, af_packet, af_xdp) filters nothing: every group arrives.
    if (ret != 0 && ret != -ENOTSUP) {
        SWROCE_LOG(WARNING,
                   "ethdev %s takes neither all-multicast mode nor a multicast filter (%s): "
                   "IPv6 peers cannot resolve this device's MAC, only be resolved by it",
                   name_.c_str(), rte_strerror(-ret));
        return false;
    }
    return true;
}

Status SwrocePort::read_mac() {
    rte_ether_addr address{};
    if (int ret = rte_eth_macaddr_get(port_id_, &address); ret != 0) {
        return dpdk_error("rte_eth_macaddr_get", name_, ret);
    }
    if (rte_is_zero_ether_addr(&address) || !rte_is_unicast_ether_addr(&address)) {
        // Ring ports (and a few other software PMDs) report 00:00:00:00:00:00. ARP cannot
        // answer for that, so the device takes a random locally administered address; where the
        // PMD cannot be told, it filters on no address either, so frames to ours still arrive.
        rte_eth_random_addr(address.addr_bytes);
        const int ret = rte_eth_dev_default_mac_addr_set(port_id_, &address);
        if (ret != 0 && ret != -ENOTSUP) {
            return dpdk_error("rte_eth_dev_default_mac_addr_set", name_, ret);
        }
        mac_generated_ = true;
        char text[RTE_ETHER_ADDR_FMT_SIZE] = {};
        rte_ether_format_addr(text, sizeof(text), &address);
        SWROCE_LOG(INFO, "ethdev %s has no MAC address; swroce uses %s%s", name_.c_str(), text,
                   ret == 0 ? "" : " (the PMD cannot store it)");
    }
    std::copy(std::begin(address.addr_bytes), std::end(address.addr_bytes), mac_.begin());
    return {};
}

// The MTU the port runs with, the link poll and the burst gate.
Status SwrocePort::watch_link(std::optional<unsigned> ib_mtu) {
    std::uint16_t mtu = 0;
    if (int ret = rte_eth_dev_get_mtu(port_id_, &mtu); ret != 0) {
        return dpdk_error("rte_eth_dev_get_mtu", name_, ret);
    }
    ethernet_mtu_ = mtu;
    if (ib_mtu && buffer_mtu_ == 0 && mtu < ethernet_mtu_for(*ib_mtu)) {
        return Error{StatusCode::not_supported,
                     strformat("swroce: ethdev %s runs with Ethernet MTU %u after configuration; "
                               "IB MTU %u needs %u",
                               name_.c_str(), unsigned{mtu}, *ib_mtu, ethernet_mtu_for(*ib_mtu))};
    }
    // The fast path's view of the link starts right and is kept so from the interrupt thread.
    shared_->link_up.store(ask_link_up(port_id_) ? 1 : 0, std::memory_order_relaxed);
    if (int ret = rte_eal_alarm_set(link_poll_interval_us, poll_link, shared_.get()); ret != 0) {
        return dpdk_error("rte_eal_alarm_set (link poll)", name_, ret);
    }
    link_polled_ = true;
    if (gated_) {
        if (Status st = burst_gate::attach(shared_->bursts); !st.ok()) {
            SWROCE_LOG(WARNING,
                       "ethdev %s: bursts run ungated (%s): the process may fault if the "
                       "memif peer goes away while a burst is under way",
                       name_.c_str(), st.error().message().c_str());
            gated_ = false;
        }
    }
    return {};
}

Result<SwrocePort> SwrocePort::open(std::string_view ethdev_name, unsigned queue_groups,
                                    std::optional<unsigned> ib_mtu, int socket) {
    const std::string name(ethdev_name);
    if (Status st = check_open_arguments(name, queue_groups, ib_mtu); !st.ok()) {
        return st.error();
    }
    // Each step leaves in `port` what it took, so an early return gives everything back.
    SwrocePort port;
    if (Status st = port.claim(name); !st.ok()) {
        return st.error();
    }
    rte_eth_dev_info info{};
    if (int ret = rte_eth_dev_info_get(port.port_id_, &info); ret != 0) {
        return dpdk_error("rte_eth_dev_info_get", name, ret);
    }
    const PortProfile profile = port_profile_for(info);
    port.socket_ = socket == SOCKET_ID_ANY ? rte_eth_dev_socket_id(port.port_id_) : socket;
    if (Status st = port.check_capabilities(info, profile, queue_groups, ib_mtu); !st.ok()) {
        return st.error();
    }
    if (Status st = port.configure(info, queue_groups, ib_mtu); !st.ok()) {
        return st.error();
    }
    if (Status st = port.setup_queues(profile, queue_groups); !st.ok()) {
        return st.error();
    }
    if (Status st = port.start(); !st.ok()) {
        return st.error();
    }
    if (Status st = port.read_mac(); !st.ok()) {
        return st.error();
    }
    if (Status st = port.watch_link(ib_mtu); !st.ok()) {
        return st.error();
    }
    SWROCE_LOG(
        DEBUG,
        "ethdev %s (port %u): %u queue groups, %u rx / %u tx descriptors, %u mbufs "
        "per group on socket %d, MTU %u, link %s",
        name.c_str(), unsigned{port.port_id_}, queue_groups, unsigned{port.rx_descriptors_},
        unsigned{port.tx_descriptors_},
        mempool_size_for(port.rx_descriptors_, port.tx_descriptors_, profile.mbufs_kept_by_driver),
        port.socket_, port.ethernet_mtu(), port.link_up() ? "up" : "down");
    return port;
}

SwrocePort::SwrocePort(SwrocePort&& other) noexcept
    : shared_(std::move(other.shared_)), link_polled_(std::exchange(other.link_polled_, false)),
      stop_on_interrupt_thread_(other.stop_on_interrupt_thread_),
      gated_(std::exchange(other.gated_, false)),
      port_id_(std::exchange(other.port_id_, RTE_MAX_ETHPORTS)), name_(std::move(other.name_)),
      owner_id_(std::exchange(other.owner_id_, RTE_ETH_DEV_NO_OWNER)),
      started_(std::exchange(other.started_, false)), mac_(other.mac_),
      mac_generated_(other.mac_generated_), ethernet_mtu_(other.ethernet_mtu_),
      buffer_mtu_(other.buffer_mtu_), buffer_mtu_known_(other.buffer_mtu_known_),
      max_ib_mtu_(other.max_ib_mtu_), socket_(other.socket_),
      rx_descriptors_(other.rx_descriptors_), tx_descriptors_(other.tx_descriptors_),
      tx_multi_segment_(other.tx_multi_segment_), pools_(std::exchange(other.pools_, {})) {}

SwrocePort& SwrocePort::operator=(SwrocePort&& other) noexcept {
    if (this != &other) {
        release();
        shared_ = std::move(other.shared_);
        link_polled_ = std::exchange(other.link_polled_, false);
        stop_on_interrupt_thread_ = other.stop_on_interrupt_thread_;
        gated_ = std::exchange(other.gated_, false);
        port_id_ = std::exchange(other.port_id_, RTE_MAX_ETHPORTS);
        name_ = std::move(other.name_);
        owner_id_ = std::exchange(other.owner_id_, RTE_ETH_DEV_NO_OWNER);
        started_ = std::exchange(other.started_, false);
        mac_ = other.mac_;
        mac_generated_ = other.mac_generated_;
        ethernet_mtu_ = other.ethernet_mtu_;
        buffer_mtu_ = other.buffer_mtu_;
        buffer_mtu_known_ = other.buffer_mtu_known_;
        max_ib_mtu_ = other.max_ib_mtu_;
        socket_ = other.socket_;
        rx_descriptors_ = other.rx_descriptors_;
        tx_descriptors_ = other.tx_descriptors_;
        tx_multi_segment_ = other.tx_multi_segment_;
        pools_ = std::exchange(other.pools_, {});
    }
    return *this;
}

SwrocePort::~SwrocePort() {
    release();
}

void SwrocePort::poll_link(void* arg) noexcept {
    auto* shared = static_cast<Shared*>(arg);
    shared->link_up.store(ask_link_up(shared->port_id) ? 1 : 0, std::memory_order_relaxed);
    // Re-armed from its own call; release() cancels it (waiting for a call under way). Should
    // re-arming fail, link_up() on the control path still brings the view up to date.
    (void)rte_eal_alarm_set(link_poll_interval_us, poll_link, arg);
}

std::uint16_t SwrocePort::drop_while_link_down(unsigned group, rte_mbuf** mbufs,
                                               std::uint16_t count) const noexcept {
    if (shared_ != nullptr && group < shared_->counters.size()) {
        shared_->counters[group].tx_dropped_link_down += count;
    }
    rte_pktmbuf_free_bulk(mbufs, count);
    return count;
}

PortLinkDownCounters SwrocePort::link_down_counters(unsigned group) const noexcept {
    if (shared_ == nullptr || group >= shared_->counters.size()) {
        return {};
    }
    return shared_->counters[group];
}

void SwrocePort::stop() noexcept {
    const std::uint16_t port_id = port_id_;
    const auto queues = static_cast<unsigned>(pools_.size());
    const std::string& name = name_;
    const std::function<void()> drain_and_stop = [port_id, queues, &name] {
        drain_rx(port_id, queues);
        if (int ret = rte_eth_dev_stop(port_id); ret != 0) {
            SWROCE_LOG(WARNING, "rte_eth_dev_stop on ethdev %s failed: %s", name.c_str(),
                       rte_strerror(-ret));
        }
    };
    if (stop_on_interrupt_thread_) {
        const Status ran = run_on_interrupt_thread(
            drain_and_stop, std::chrono::milliseconds(interrupt_thread_wait_ms));
        if (!ran.ok()) {
            SWROCE_LOG(WARNING, "ethdev %s: %s", name_.c_str(), ran.error().message().c_str());
        }
    } else {
        drain_and_stop();
    }
}

void SwrocePort::release() noexcept {
    if (link_polled_) {
        // Waits for a poll under way; none runs after this.
        (void)rte_eal_alarm_cancel(poll_link, shared_.get());
        link_polled_ = false;
    }
    if (shared_ != nullptr) {
        shared_->link_up.store(0, std::memory_order_relaxed);
    }
    if (started_) {
        stop();
        started_ = false;
    }
    if (gated_) {
        burst_gate::detach(shared_->bursts);
        gated_ = false;
    }
    if (owner_id_ != RTE_ETH_DEV_NO_OWNER) {
        // The port may be gone already (hot-unplugged); there is nothing to give back then.
        rte_eth_dev_owner_unset(port_id_, owner_id_);
        owner_id_ = RTE_ETH_DEV_NO_OWNER;
    }
    for (rte_mempool* pool : pools_) {
        mbuf_pools::retire(pool);
    }
    pools_.clear();
    port_id_ = RTE_MAX_ETHPORTS;
}

bool SwrocePort::link_up() const noexcept {
    // An empty handle must not ask ethdev, which logs an error for an invalid port id.
    if (port_id_ == RTE_MAX_ETHPORTS || shared_ == nullptr) {
        return false;
    }
    const bool up = ask_link_up(port_id_);
    shared_->link_up.store(up ? 1 : 0, std::memory_order_relaxed);
    return up;
}

std::uint32_t SwrocePort::link_speed_mbps() const noexcept {
    rte_eth_link link{};
    if (port_id_ == RTE_MAX_ETHPORTS || rte_eth_link_get_nowait(port_id_, &link) != 0 ||
        link.link_speed == RTE_ETH_SPEED_NUM_UNKNOWN) {
        return 0;
    }
    return link.link_speed;
}

rte_mbuf* SwrocePort::copy_to_mbuf(unsigned group,
                                   std::span<const std::uint8_t> frame) const noexcept {
    rte_mempool* pool = mempool(group);
    if (pool == nullptr || frame.size() > max_roce_frame_size) {
        return nullptr;
    }
    rte_mbuf* mbuf = rte_pktmbuf_alloc(pool);
    if (mbuf == nullptr) {
        return nullptr;
    }
    auto* data = rte_pktmbuf_append(mbuf, static_cast<std::uint16_t>(frame.size()));
    if (data == nullptr) {
        rte_pktmbuf_free(mbuf);
        return nullptr;
    }
    std::memcpy(data, frame.data(), frame.size());
    return mbuf;
}

} // namespace prdma::swroce
