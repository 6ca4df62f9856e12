// SwrocePort on a real EAL with ring ports: opening with one and more queue groups, every
// refusal (unknown name, too many queues, a port taken twice or started by someone else), MTU
// raising, and an ARP request/reply between two SwrocePorts over a crossed pair of rings: the
// exact flow the swroce driver uses to find a peer's MAC.
#include <array>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <vector>

#include <gtest/gtest.h>
#include <rte_alarm.h>
#include <rte_bus_vdev.h>
#include <rte_cycles.h>
#include <rte_eth_ring.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>
#include <rte_ring.h>

#include <prdma/build_config.hpp>
#include <prdma/eal.hpp>
#include <prdma/rdmadev/types.hpp>

#include "arp.hpp"
#include "eal_environment.hpp"
#include "mbuf_pools.hpp"
#include "port.hpp"

namespace prdma::swroce {
namespace {

const auto* const g_environment = prdma::test_support::add_eal_environment(
    "swroce_port_test", {"--vdev=net_ring0", "--vdev=net_ring1"},
    [] { ASSERT_EQ(rte_eth_dev_count_avail(), 2U) << "--vdev=net_ring0/1 were not probed"; });

// Two ring ports wired back to back: what A sends B receives and the other way round, as two
// hosts on a cable. rte_eth_from_rings names them net_ring_<name>; the rings stay ours.
class CrossedRingPorts {
public:
    explicit CrossedRingPorts(const std::string& tag, unsigned queues = 1) {
        for (unsigned q = 0; q < queues; ++q) {
            a_to_b_.push_back(make_ring(tag + "_ab" + std::to_string(q)));
            b_to_a_.push_back(make_ring(tag + "_ba" + std::to_string(q)));
        }
        name_a_ = "net_ring_" + tag + "_a";
        name_b_ = "net_ring_" + tag + "_b";
        port_a_ = rte_eth_from_rings((tag + "_a").c_str(), b_to_a_.data(), queues, a_to_b_.data(),
                                     queues, rte_socket_id());
        port_b_ = rte_eth_from_rings((tag + "_b").c_str(), a_to_b_.data(), queues, b_to_a_.data(),
                                     queues, rte_socket_id());
    }
    CrossedRingPorts(const CrossedRingPorts&) = delete;
    CrossedRingPorts& operator=(const CrossedRingPorts&) = delete;
    ~CrossedRingPorts() {
        // The ports go first: their queues point at the rings.
        if (port_a_ >= 0) {
            EXPECT_EQ(rte_vdev_uninit(name_a_.c_str()), 0);
        }
        if (port_b_ >= 0) {
            EXPECT_EQ(rte_vdev_uninit(name_b_.c_str()), 0);
        }
        for (rte_ring* ring : a_to_b_) {
            EXPECT_EQ(rte_ring_count(ring), 0U) << "frames left in " << ring->name;
            rte_ring_free(ring);
        }
        for (rte_ring* ring : b_to_a_) {
            EXPECT_EQ(rte_ring_count(ring), 0U) << "frames left in " << ring->name;
            rte_ring_free(ring);
        }
    }

    [[nodiscard]] bool ok() const { return port_a_ >= 0 && port_b_ >= 0; }
    [[nodiscard]] const std::string& name_a() const { return name_a_; }
    [[nodiscard]] const std::string& name_b() const { return name_b_; }
    [[nodiscard]] int port_a() const { return port_a_; }

private:
    static rte_ring* make_ring(const std::string& name) {
        rte_ring* ring = rte_ring_create(name.c_str(), 1024, static_cast<int>(rte_socket_id()),
                                         RING_F_SP_ENQ | RING_F_SC_DEQ);
        EXPECT_NE(ring, nullptr) << name << ": " << rte_strerror(rte_errno);
        return ring;
    }

    std::vector<rte_ring*> a_to_b_;
    std::vector<rte_ring*> b_to_a_;
    std::string name_a_;
    std::string name_b_;
    int port_a_ = -1;
    int port_b_ = -1;
};

std::uint16_t port_id_of(const char* name) {
    std::uint16_t id = RTE_MAX_ETHPORTS;
    EXPECT_EQ(rte_eth_dev_get_port_by_name(name, &id), 0) << name;
    return id;
}

bool has_owner(std::uint16_t port_id) {
    rte_eth_dev_owner owner{};
    return rte_eth_dev_owner_get(port_id, &owner) == 0 && owner.id != RTE_ETH_DEV_NO_OWNER;
}

// Sends `frame` on `group` and returns what `receiver` gets on `group`, as bytes.
std::vector<std::uint8_t> send_and_receive(SwrocePort& sender, SwrocePort& receiver, unsigned group,
                                           std::span<const std::uint8_t> frame) {
    rte_mbuf* mbuf = sender.copy_to_mbuf(group, frame);
    EXPECT_NE(mbuf, nullptr);
    if (mbuf == nullptr) {
        return {};
    }
    EXPECT_EQ(sender.send_frames(group, &mbuf, 1), 1U);
    std::array<rte_mbuf*, 4> received{};
    const std::uint16_t count = receiver.receive_frames(group, received.data(), received.size());
    EXPECT_EQ(count, 1U);
    if (count == 0) {
        return {};
    }
    const auto* data = rte_pktmbuf_mtod(received[0], const std::uint8_t*);
    std::vector<std::uint8_t> bytes(data, data + rte_pktmbuf_data_len(received[0]));
    rte_pktmbuf_free_bulk(received.data(), count);
    return bytes;
}

std::uint16_t current_mtu(const char* name) {
    std::uint16_t mtu = 0;
    EXPECT_EQ(rte_eth_dev_get_mtu(port_id_of(name), &mtu), 0) << name;
    return mtu;
}

TEST(SwrocePort, OpensWithOneQueueGroup) {
    const std::uint16_t mtu_before = current_mtu("net_ring0");
    auto port = SwrocePort::open("net_ring0", 1, std::nullopt, SOCKET_ID_ANY);
    ASSERT_TRUE(port.ok()) << port.error().to_string();
    EXPECT_EQ(port->port_id(), port_id_of("net_ring0"));
    EXPECT_EQ(port->name(), "net_ring0");
    EXPECT_EQ(port->queue_groups(), 1U);
    rte_mempool* pool = port->mempool(0);
    ASSERT_NE(pool, nullptr);
    EXPECT_EQ(port->mempool(1), nullptr);
    EXPECT_EQ(rte_pktmbuf_data_room_size(pool), SwrocePort::mbuf_data_room);
    EXPECT_EQ(pool->size,
              SwrocePort::mempool_size_for(port->rx_descriptors(), port->tx_descriptors()));
    EXPECT_EQ(pool->cache_size, SwrocePort::mempool_cache_size);
    EXPECT_EQ(port->ethernet_mtu(), mtu_before) << "no mtu devarg: the port's MTU is kept";
    EXPECT_TRUE(port->link_up());
    EXPECT_EQ(port->link_speed_mbps(), RTE_ETH_SPEED_NUM_10G);
    EXPECT_EQ(port->socket(), rte_eth_dev_socket_id(port->port_id()));
    // DPDK 22.11's ring PMD reports 00:00:00:00:00:00 and cannot store another address, so
    // the port makes up a locally administered unicast one.
    EXPECT_FALSE(is_multicast_mac(port->mac()));
    EXPECT_FALSE(is_zero_mac(port->mac()));
    EXPECT_TRUE(port->mac_generated());
    EXPECT_NE(port->mac()[0] & 0x02U, 0U) << "locally administered";
    EXPECT_TRUE(has_owner(port->port_id()));
    const std::uint16_t id = port->port_id();
    { auto gone = std::move(port).value(); }
    EXPECT_FALSE(has_owner(id)) << "ownership is given back";
}

// DPDK 22.11's memif reports a 1500-byte MTU and refuses more at configure, yet carries a frame
// as long as one of its ring buffers, which the client lays out with its bsize devarg: a client
// with bsize=4224 runs IB MTU 4096 by default, one with the default 2048-byte buffers 1024 (and
// mtu=4096 is refused naming bsize), one with 1024-byte buffers 512. A server does not know its
// client's buffers: 1024 by default, and an mtu= its own bsize expects of the client. The value
// survives the move out of open's Result.
class MemifPort {
public:
    MemifPort(const std::string& name, const std::string& extra)
        : name_(name), dir_(std::filesystem::temp_directory_path() /
                            ("prdma-port-test-" + std::to_string(getpid()))) {
        std::filesystem::create_directories(dir_);
        const std::string socket = (dir_ / (name + ".sock")).string();
        if (extra.find("role=client") != std::string::npos) {
            listen_as_server(socket); // a client's start needs a server socket to connect to
        }
        const std::string args = "socket=" + socket + ",socket-abstract=no" + extra;
        created_ = rte_vdev_init(name.c_str(), args.c_str()) == 0;
    }
    MemifPort(const MemifPort&) = delete;
    MemifPort& operator=(const MemifPort&) = delete;
    ~MemifPort() {
        if (created_) {
            EXPECT_EQ(rte_vdev_uninit(name_.c_str()), 0);
        }
        if (listener_ >= 0) {
            ::close(listener_);
        }
        std::filesystem::remove_all(dir_);
    }
    [[nodiscard]] bool created() const { return created_; }

private:
    // Nobody answers memif's hello on it: the link stays down, which the MTU does not need.
    void listen_as_server(const std::string& path) {
        listener_ = ::socket(AF_UNIX, SOCK_SEQPACKET, 0); // as memif's
        sockaddr_un address{};
        address.sun_family = AF_UNIX;
        std::snprintf(address.sun_path, sizeof(address.sun_path), "%s", path.c_str());
        ASSERT_EQ(::bind(listener_, reinterpret_cast<const sockaddr*>(&address), sizeof(address)),
                  0);
        ASSERT_EQ(::listen(listener_, 1), 0);
    }

    int listener_ = -1;
    std::string name_;
    std::filesystem::path dir_;
    bool created_ = false;
};

TEST(SwrocePort, OnMemifTheIbMtuIsWhatTheClientsRingBuffersHold) {
    struct Case {
        const char* args;
        std::optional<unsigned> mtu;
        rdma::Mtu expected; // what the port's frames default to
    };
    const Case cases[] = {
        {",role=client,bsize=4224", std::nullopt, rdma::Mtu::mtu_4096},
        {",role=client,bsize=4224", 4096U, rdma::Mtu::mtu_4096},
        {",role=client", std::nullopt, rdma::Mtu::mtu_1024},
        {",role=client,bsize=1024", std::nullopt, rdma::Mtu::mtu_512},
        {",role=server,bsize=4224", std::nullopt, rdma::Mtu::mtu_1024},
        {",role=server,bsize=4224", 4096U, rdma::Mtu::mtu_1024},
    };
    for (const Case& c : cases) {
        SCOPED_TRACE(std::string(c.args) + (c.mtu ? " mtu=4096" : ""));
        const MemifPort memif("net_memif_mtu", c.args);
        ASSERT_TRUE(memif.created());
        auto opened = SwrocePort::open("net_memif_mtu", 1, c.mtu, SOCKET_ID_ANY);
        ASSERT_TRUE(opened.ok()) << opened.error().to_string();
        const SwrocePort port = std::move(opened).value();
        EXPECT_EQ(current_mtu("net_memif_mtu"), RTE_ETHER_MTU) << "the ethdev keeps its MTU";
        EXPECT_EQ(rdma::mtu_for_ethernet(port.ethernet_mtu()), c.expected);
    }
    const MemifPort memif("net_memif_mtu", ",role=client");
    auto refused = SwrocePort::open("net_memif_mtu", 1, 4096U, SOCKET_ID_ANY);
    ASSERT_FALSE(refused.ok());
    EXPECT_NE(refused.error().message().find("bsize=4224"), std::string::npos)
        << refused.error().message();
}

TEST(SwrocePort, TwoQueueGroupsEachWithItsOwnPoolAndQueue) {
    auto port = SwrocePort::open("net_ring0", 2, std::nullopt, SOCKET_ID_ANY);
    ASSERT_TRUE(port.ok()) << port.error().to_string();
    EXPECT_EQ(port->queue_groups(), 2U);
    ASSERT_NE(port->mempool(0), nullptr);
    ASSERT_NE(port->mempool(1), nullptr);
    EXPECT_NE(port->mempool(0), port->mempool(1));

    // net_ring0 from --vdev loops each tx queue back into the rx queue of the same number.
    for (unsigned group = 0; group < 2; ++group) {
        std::array<std::uint8_t, 60> frame{};
        build_arp_request(frame, {0x02, 0, 0, 0, 0, 1}, 0x0a000001, 0x0a000002 + group);
        const auto received = send_and_receive(*port, *port, group, frame);
        EXPECT_EQ(received, std::vector<std::uint8_t>(frame.begin(), frame.end()));
        std::array<rte_mbuf*, 4> none{};
        EXPECT_EQ(port->receive_frames(1 - group, none.data(), none.size()), 0U)
            << "a frame sent on group " << group << " stays in its group";
    }
    EXPECT_EQ(rte_mempool_in_use_count(port->mempool(0)), 0U);
    EXPECT_EQ(rte_mempool_in_use_count(port->mempool(1)), 0U);
}

TEST(SwrocePort, CopyToMbufRefusesWhatDoesNotFit) {
    auto port = SwrocePort::open("net_ring0", 1, std::nullopt, SOCKET_ID_ANY);
    ASSERT_TRUE(port.ok()) << port.error().to_string();
    std::vector<std::uint8_t> biggest(max_roce_frame_size, 0xab);
    rte_mbuf* mbuf = port->copy_to_mbuf(0, biggest);
    ASSERT_NE(mbuf, nullptr) << "a full 4096-MTU RoCEv2 frame fits one mbuf";
    EXPECT_EQ(rte_pktmbuf_pkt_len(mbuf), max_roce_frame_size);
    EXPECT_EQ(mbuf->nb_segs, 1U);
    rte_pktmbuf_free(mbuf);
    biggest.push_back(0);
    EXPECT_EQ(port->copy_to_mbuf(0, biggest), nullptr);
    EXPECT_EQ(port->copy_to_mbuf(1, std::span<const std::uint8_t>{}), nullptr) << "no group 1";
}

TEST(SwrocePort, UnknownNameListsEthdevs) {
    auto port = SwrocePort::open("net_memif7", 1, std::nullopt, SOCKET_ID_ANY);
    ASSERT_FALSE(port.ok());
    EXPECT_EQ(port.code(), StatusCode::invalid_parameter);
    const std::string& message = port.error().message();
    EXPECT_NE(message.find("'net_memif7'"), std::string::npos) << message;
    EXPECT_NE(message.find("net_ring0"), std::string::npos) << message;
    EXPECT_NE(message.find("net_ring1"), std::string::npos) << message;
}

TEST(SwrocePort, ListingShowsWhoOwnsAPort) {
    auto first = SwrocePort::open("net_ring1", 1, std::nullopt, SOCKET_ID_ANY);
    ASSERT_TRUE(first.ok()) << first.error().to_string();
    auto port = SwrocePort::open("nonexistent", 1, std::nullopt, SOCKET_ID_ANY);
    ASSERT_FALSE(port.ok());
    EXPECT_NE(port.error().message().find("net_ring1 (owned by prdma_swroce)"), std::string::npos)
        << port.error().message();
}

TEST(SwrocePort, MoreQueueGroupsThanThePortHas) {
    CrossedRingPorts rings("fewq", 1);
    ASSERT_TRUE(rings.ok());
    auto port = SwrocePort::open(rings.name_a(), 2, std::nullopt, SOCKET_ID_ANY);
    ASSERT_FALSE(port.ok());
    EXPECT_EQ(port.code(), StatusCode::not_supported);
    const std::string& message = port.error().message();
    EXPECT_NE(message.find("at most 1 rx and 1 tx"), std::string::npos) << message;
    EXPECT_NE(message.find("2 queue groups"), std::string::npos) << message;
    EXPECT_FALSE(has_owner(static_cast<std::uint16_t>(rings.port_a())))
        << "a failed open gives the port back";
    // The same port with what it has works.
    auto one = SwrocePort::open(rings.name_a(), 1, std::nullopt, SOCKET_ID_ANY);
    EXPECT_TRUE(one.ok()) << one.error().to_string();
}

TEST(SwrocePort, MoreQueueGroupsThanPrdmaAllows) {
    for (const unsigned groups : {0U, static_cast<unsigned>(PRDMA_MAX_QUEUE_GROUPS) + 1}) {
        auto port = SwrocePort::open("net_ring0", groups, std::nullopt, SOCKET_ID_ANY);
        ASSERT_FALSE(port.ok()) << groups;
        EXPECT_EQ(port.code(), StatusCode::invalid_parameter);
        EXPECT_NE(port.error().message().find("PRDMA_MAX_QUEUE_GROUPS"), std::string::npos);
    }
}

TEST(SwrocePort, SecondOpenIsBusyUntilTheFirstCloses) {
    auto first = SwrocePort::open("net_ring1", 1, std::nullopt, SOCKET_ID_ANY);
    ASSERT_TRUE(first.ok()) << first.error().to_string();
    auto second = SwrocePort::open("net_ring1", 1, std::nullopt, SOCKET_ID_ANY);
    ASSERT_FALSE(second.ok());
    EXPECT_EQ(second.code(), StatusCode::busy);
    EXPECT_NE(second.error().message().find("owned by prdma_swroce"), std::string::npos)
        << second.error().message();
    EXPECT_TRUE(first->link_up()) << "the refused open did not disturb the first";

    // Moving the handle moves the ownership; destroying it gives the port back.
    SwrocePort moved;
    EXPECT_EQ(moved.queue_groups(), 0U);
    EXPECT_EQ(moved.mempool(0), nullptr);
    EXPECT_FALSE(moved.link_up());
    EXPECT_EQ(moved.link_speed_mbps(), 0U);
    moved = std::move(first).value();
    EXPECT_TRUE(moved.link_up());
    EXPECT_EQ(moved.queue_groups(), 1U);
    auto other = SwrocePort::open("net_ring0", 1, std::nullopt, SOCKET_ID_ANY);
    ASSERT_TRUE(other.ok()) << other.error().to_string();
    moved = std::move(other).value(); // releases net_ring1
    EXPECT_EQ(moved.name(), "net_ring0");
    auto third = SwrocePort::open("net_ring1", 1, std::nullopt, SOCKET_ID_ANY);
    EXPECT_TRUE(third.ok()) << third.error().to_string();
}

TEST(SwrocePort, PortStartedByAnotherUserIsBusy) {
    const std::uint16_t id = port_id_of("net_ring1");
    rte_mempool* pool =
        rte_pktmbuf_pool_create("other_user", 511, 0, 0, RTE_MBUF_DEFAULT_BUF_SIZE, SOCKET_ID_ANY);
    ASSERT_NE(pool, nullptr);
    rte_eth_conf conf{};
    ASSERT_EQ(rte_eth_dev_configure(id, 1, 1, &conf), 0);
    ASSERT_EQ(rte_eth_rx_queue_setup(id, 0, 128, SOCKET_ID_ANY, nullptr, pool), 0);
    ASSERT_EQ(rte_eth_tx_queue_setup(id, 0, 128, SOCKET_ID_ANY, nullptr), 0);
    ASSERT_EQ(rte_eth_dev_start(id), 0);

    auto port = SwrocePort::open("net_ring1", 1, std::nullopt, SOCKET_ID_ANY);
    ASSERT_FALSE(port.ok());
    EXPECT_EQ(port.code(), StatusCode::busy);
    EXPECT_NE(port.error().message().find("started by another user"), std::string::npos)
        << port.error().message();
    EXPECT_FALSE(has_owner(id));
    rte_eth_link link{};
    ASSERT_EQ(rte_eth_link_get_nowait(id, &link), 0);
    EXPECT_EQ(link.link_status, RTE_ETH_LINK_UP) << "the other user's port kept running";

    ASSERT_EQ(rte_eth_dev_stop(id), 0);
    {
        auto after = SwrocePort::open("net_ring1", 1, std::nullopt, SOCKET_ID_ANY);
        EXPECT_TRUE(after.ok()) << after.error().to_string();
    }
    rte_mempool_free(pool);
}

TEST(SwrocePort, IbMtuRaisesTheEthernetMtuOnlyAsNeeded) {
    // A fresh port: earlier tests on net_ring0/1 may have raised theirs (the raise outlives the
    // SwrocePort, as the MTU is the ethdev's).
    CrossedRingPorts rings("mtu");
    ASSERT_TRUE(rings.ok());
    ASSERT_EQ(current_mtu(rings.name_a().c_str()), RTE_ETHER_MTU);
    {
        auto port = SwrocePort::open(rings.name_a(), 1, 1024U, SOCKET_ID_ANY);
        ASSERT_TRUE(port.ok()) << port.error().to_string();
        EXPECT_EQ(port->ethernet_mtu(), RTE_ETHER_MTU) << "1500 already carries 1024 + 84";
    }
    {
        auto port = SwrocePort::open(rings.name_a(), 1, 4096U, SOCKET_ID_ANY);
        ASSERT_TRUE(port.ok()) << port.error().to_string();
        EXPECT_EQ(port->ethernet_mtu(), ethernet_mtu_for(4096));
        EXPECT_EQ(port->ethernet_mtu(), 4180U);
    }
    EXPECT_EQ(current_mtu(rings.name_a().c_str()), 4180U) << "the raise stays with the ethdev";
    auto odd = SwrocePort::open(rings.name_a(), 1, 1500U, SOCKET_ID_ANY);
    ASSERT_FALSE(odd.ok());
    EXPECT_EQ(odd.code(), StatusCode::invalid_parameter);
}

// Polls `port` group 0 once and feeds every frame to `resolver`; returns the last result and
// sends any reply back out.
ArpRxResult receive_arp(SwrocePort& port, ArpResolver& resolver, std::uint64_t now) {
    std::array<rte_mbuf*, 8> burst{};
    const std::uint16_t count = port.receive_frames(0, burst.data(), burst.size());
    EXPECT_EQ(count, 1U);
    ArpRxResult result;
    for (std::uint16_t i = 0; i < count; ++i) {
        const std::span<const std::uint8_t> bytes(rte_pktmbuf_mtod(burst[i], const std::uint8_t*),
                                                  rte_pktmbuf_data_len(burst[i]));
        ArpFrame reply;
        result = resolver.on_frame(bytes, now, reply);
        if (result.reply_ready) {
            rte_mbuf* out = port.copy_to_mbuf(0, reply.view());
            EXPECT_NE(out, nullptr);
            EXPECT_EQ(port.send_frames(0, &out, 1), 1U);
        }
    }
    rte_pktmbuf_free_bulk(burst.data(), count);
    return result;
}

TEST(SwrocePort, ArpAcrossCrossedRingPorts) {
    CrossedRingPorts rings("arp");
    ASSERT_TRUE(rings.ok());
    {
        auto a = SwrocePort::open(rings.name_a(), 1, 1024U, SOCKET_ID_ANY);
        ASSERT_TRUE(a.ok()) << a.error().to_string();
        auto b = SwrocePort::open(rings.name_b(), 1, 1024U, SOCKET_ID_ANY);
        ASSERT_TRUE(b.ok()) << b.error().to_string();
        ASSERT_NE(a->mac(), b->mac()) << "two ports on one wire need distinct MACs";

        constexpr std::uint32_t ip_a = 0x0a000001;
        constexpr std::uint32_t ip_b = 0x0a000002;
        ArpResolverConfig config;
        config.tsc_hz = rte_get_tsc_hz();
        config.mac = a->mac();
        config.ip = ip_a;
        auto resolver_a = ArpResolver::create(config);
        ASSERT_TRUE(resolver_a.ok()) << resolver_a.error().to_string();
        config.mac = b->mac();
        config.ip = ip_b;
        auto resolver_b = ArpResolver::create(config);
        ASSERT_TRUE(resolver_b.ok()) << resolver_b.error().to_string();

        // A asks for B; the request crosses the wire as a broadcast.
        std::uint64_t now = rte_get_tsc_cycles();
        ArpFrame request;
        ASSERT_EQ(resolver_a->request(ip_b, now, request), ArpRequestResult::send);
        rte_mbuf* mbuf = a->copy_to_mbuf(0, request.view());
        ASSERT_NE(mbuf, nullptr);
        ASSERT_EQ(a->send_frames(0, &mbuf, 1), 1U);

        // B learns A and answers; A receives the answer and resolves B.
        const ArpRxResult at_b = receive_arp(*b, *resolver_b, now);
        EXPECT_EQ(at_b.error, ArpError::ok);
        EXPECT_TRUE(at_b.reply_ready);
        EXPECT_EQ(resolver_b->lookup(ip_a, now), a->mac());

        const ArpRxResult at_a = receive_arp(*a, *resolver_a, now);
        EXPECT_EQ(at_a.error, ArpError::ok);
        ASSERT_TRUE(at_a.resolved);
        EXPECT_EQ(at_a.resolved_ip, ip_b);
        EXPECT_EQ(at_a.resolved_mac, b->mac());
        EXPECT_FALSE(at_a.reply_ready);
        EXPECT_EQ(resolver_a->lookup(ip_b, now), b->mac());
        EXPECT_FALSE(resolver_a->is_pending(ip_b));

        // Nothing else is on the wire, and every mbuf went home to its pool.
        std::array<rte_mbuf*, 4> none{};
        EXPECT_EQ(a->receive_frames(0, none.data(), none.size()), 0U);
        EXPECT_EQ(b->receive_frames(0, none.data(), none.size()), 0U);
        EXPECT_EQ(rte_mempool_in_use_count(a->mempool(0)), 0U);
        EXPECT_EQ(rte_mempool_in_use_count(b->mempool(0)), 0U);
    }
}

TEST(SwrocePort, UnansweredArpGivesUpAfterFiveTries) {
    // B is open but nobody answers for it: A's requests pile up on B's rx and A gives up.
    CrossedRingPorts rings("noanswer");
    ASSERT_TRUE(rings.ok());
    auto a = SwrocePort::open(rings.name_a(), 1, std::nullopt, SOCKET_ID_ANY);
    ASSERT_TRUE(a.ok()) << a.error().to_string();
    auto b = SwrocePort::open(rings.name_b(), 1, std::nullopt, SOCKET_ID_ANY);
    ASSERT_TRUE(b.ok()) << b.error().to_string();
    ArpResolverConfig config;
    config.tsc_hz = rte_get_tsc_hz();
    config.mac = a->mac();
    config.ip = 0x0a000001;
    auto resolver = ArpResolver::create(config);
    ASSERT_TRUE(resolver.ok()) << resolver.error().to_string();

    const auto send = [&](const ArpFrame& frame) {
        rte_mbuf* mbuf = a->copy_to_mbuf(0, frame.view());
        ASSERT_NE(mbuf, nullptr);
        ASSERT_EQ(a->send_frames(0, &mbuf, 1), 1U);
    };
    std::uint64_t now = rte_get_tsc_cycles();
    ArpFrame request;
    ASSERT_EQ(resolver->request(0x0a000009, now, request), ArpRequestResult::send);
    send(request);
    std::array<ArpFrame, 4> frames{};
    std::array<std::uint32_t, 4> failed{};
    std::size_t sent = 1;
    std::size_t gave_up = 0;
    // Simulated time: the TSC values are what the driver would pass, without sleeping a second.
    for (int step = 0; step < 10 && gave_up == 0; ++step) {
        now += resolver->retry_interval_cycles();
        const ArpPollResult polled = resolver->poll(now, frames, failed);
        for (std::size_t i = 0; i < polled.frames; ++i) {
            send(frames[i]);
        }
        sent += polled.frames;
        gave_up += polled.failed;
    }
    EXPECT_EQ(sent, 5U);
    ASSERT_EQ(gave_up, 1U);
    EXPECT_EQ(failed[0], 0x0a000009U);

    std::array<rte_mbuf*, 8> burst{};
    EXPECT_EQ(b->receive_frames(0, burst.data(), burst.size()), 5U);
    rte_pktmbuf_free_bulk(burst.data(), 5);
}

// Waits (up to 2 s) for the fast path's view of `port`'s link to become `up`: the EAL interrupt
// thread polls it every SwrocePort::link_poll_interval_us, without anyone calling link_up().
bool link_view_becomes(const SwrocePort& port, bool up) {
    const std::uint64_t deadline = rte_get_tsc_cycles() + 2 * rte_get_tsc_hz();
    while (port.link_up_cached() != up) {
        if (rte_get_tsc_cycles() > deadline) {
            return false;
        }
        rte_delay_us_sleep(1000);
    }
    return true;
}

TEST(SwrocePort, LinkDownDropsWhatIsSentAndPollsNothing) {
    CrossedRingPorts rings("down");
    ASSERT_TRUE(rings.ok());
    auto opened = SwrocePort::open(rings.name_a(), 1, std::nullopt, SOCKET_ID_ANY);
    ASSERT_TRUE(opened.ok()) << opened.error().to_string();
    // Moved after open: the interrupt thread's poll must follow the handle.
    SwrocePort a = std::move(opened).value();
    auto b = SwrocePort::open(rings.name_b(), 1, std::nullopt, SOCKET_ID_ANY);
    ASSERT_TRUE(b.ok()) << b.error().to_string();
    EXPECT_TRUE(a.link_up_cached());
    std::array<std::uint8_t, 60> frame{};
    build_arp_request(frame, {0x02, 0, 0, 0, 0, 1}, 0x0a000001, 0x0a000002);
    EXPECT_EQ(send_and_receive(a, *b, 0, frame).size(), frame.size());

    ASSERT_EQ(rte_eth_dev_set_link_down(a.port_id()), 0);
    ASSERT_TRUE(link_view_becomes(a, false)) << "the interrupt thread never saw the link go down";
    std::array<rte_mbuf*, 3> out{};
    for (rte_mbuf*& mbuf : out) {
        mbuf = a.copy_to_mbuf(0, frame);
        ASSERT_NE(mbuf, nullptr);
    }
    EXPECT_EQ(a.send_frames(0, out.data(), out.size()), out.size()) << "taken, as a NIC would";
    EXPECT_EQ(a.link_down_counters(0).tx_dropped_link_down, out.size());
    EXPECT_EQ(rte_mempool_in_use_count(a.mempool(0)), 0U) << "the dropped frames were freed";
    std::array<rte_mbuf*, 4> in{};
    EXPECT_EQ(b->receive_frames(0, in.data(), in.size()), 0U) << "nothing reached the wire";

    // B's frame waits on A's rx ring while A's link is down: A does not poll it.
    rte_mbuf* towards_a = b->copy_to_mbuf(0, frame);
    ASSERT_NE(towards_a, nullptr);
    ASSERT_EQ(b->send_frames(0, &towards_a, 1), 1U);
    EXPECT_EQ(a.receive_frames(0, in.data(), in.size()), 0U);
    EXPECT_EQ(a.receive_frames(0, in.data(), in.size()), 0U);
    EXPECT_EQ(a.link_down_counters(0).rx_polls_link_down, 2U);
    EXPECT_FALSE(a.link_up());

    ASSERT_EQ(rte_eth_dev_set_link_up(a.port_id()), 0);
    ASSERT_TRUE(link_view_becomes(a, true)) << "the interrupt thread never saw the link come up";
    ASSERT_EQ(a.receive_frames(0, in.data(), in.size()), 1U) << "the waiting frame arrives";
    rte_pktmbuf_free(in[0]);
    EXPECT_EQ(send_and_receive(a, *b, 0, frame).size(), frame.size());
    EXPECT_EQ(a.link_down_counters(0).tx_dropped_link_down, out.size()) << "nothing more dropped";
    EXPECT_EQ(a.link_down_counters(1).tx_dropped_link_down, 0U) << "no group 1";
    EXPECT_FALSE(SwrocePort{}.link_up_cached());
}

// A ring port hands its mbufs to the peer by pointer: frames A sent and B has not yet received
// are A's. Releasing A must not free its pool under them; B's drain gives them back, and then the
// pool goes. (A was freed at once, and B's drain wrote into freed memory: ASan found it.)
TEST(SwrocePort, APoolWithMbufsOnThePeersRingOutlivesItsPort) {
    CrossedRingPorts rings("retire");
    ASSERT_TRUE(rings.ok());
    auto a = SwrocePort::open(rings.name_a(), 1, std::nullopt, SOCKET_ID_ANY);
    auto b = SwrocePort::open(rings.name_b(), 1, std::nullopt, SOCKET_ID_ANY);
    ASSERT_TRUE(a.ok() && b.ok());
    std::array<std::uint8_t, 60> frame{};
    build_arp_request(frame, {0x02, 0, 0, 0, 0, 1}, 0x0a000001, 0x0a000002);
    rte_mbuf* mbuf = a->copy_to_mbuf(0, frame);
    ASSERT_NE(mbuf, nullptr);
    ASSERT_EQ(a->send_frames(0, &mbuf, 1), 1U);
    const std::string pool_name = a->mempool(0)->name;
    const unsigned retired_before = mbuf_pools::retired();

    *a = SwrocePort{};
    EXPECT_NE(rte_mempool_lookup(pool_name.c_str()), nullptr) << "freed under B's ring";
    EXPECT_EQ(mbuf_pools::retired(), retired_before + 1);
    *b = SwrocePort{}; // drains its rx ring: A's frame goes home, and A's pool with it
    EXPECT_EQ(rte_mempool_lookup(pool_name.c_str()), nullptr) << "the retired pool leaked";
    EXPECT_EQ(mbuf_pools::retired(), retired_before);
}

// A port released on the EAL interrupt thread itself (a device removed from an interrupt or
// alarm callback) stops there at once instead of waiting for that thread.
TEST(SwrocePort, ReleasedOnTheInterruptThreadStopsInline) {
    CrossedRingPorts rings("intr");
    ASSERT_TRUE(rings.ok());
    auto opened = SwrocePort::open(rings.name_a(), 1, std::nullopt, SOCKET_ID_ANY);
    ASSERT_TRUE(opened.ok()) << opened.error().to_string();
    struct Handoff {
        SwrocePort port;
        std::atomic<bool> done{false};
    } handoff{std::move(opened).value(), {}};
    const std::uint16_t id = handoff.port.port_id();
    const auto release_here = [](void* arg) {
        auto* h = static_cast<Handoff*>(arg);
        h->port = SwrocePort{};
        h->done.store(true);
    };
    ASSERT_EQ(rte_eal_alarm_set(1, release_here, &handoff), 0);
    // Waiting on itself would take SwrocePort::interrupt_thread_wait_ms before giving up.
    const std::uint64_t deadline = rte_get_tsc_cycles() + 2 * rte_get_tsc_hz();
    while (!handoff.done.load() && rte_get_tsc_cycles() < deadline) {
        rte_delay_us_sleep(1000);
    }
    ASSERT_TRUE(handoff.done.load()) << "releasing on the interrupt thread did not finish at once";
    EXPECT_FALSE(has_owner(id));
    rte_eth_link link{};
    ASSERT_EQ(rte_eth_link_get_nowait(id, &link), 0);
    EXPECT_EQ(link.link_status, RTE_ETH_LINK_DOWN) << "the ring port was stopped";
}

} // namespace
} // namespace prdma::swroce
