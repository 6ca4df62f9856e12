// swroce's entry in the conformance suite: two devices on a crossed pair of ring ports in one
// process (what A transmits, B receives), 10.0.0.1 and 10.0.0.2.
#include <vector>

#include <gtest/gtest.h>
#include <rte_bus_vdev.h>
#include <rte_eth_ring.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_ring.h>

#include "device_pair.hpp"

namespace prdma::rdma::conformance {

namespace {

class SwrocePair final : public DevicePair {
public:
    explicit SwrocePair(const PairOptions& options) : ipv6_(options.ipv6) {
        const std::string& extra = options.extra_a;
        const std::string extra_b = options.extra_b.value_or(options.extra_a);
        const bool ipv6 = options.ipv6;
        const unsigned queues = options.queues;
        static int instance = 0;
        const std::string tag = "cf" + std::to_string(instance++);
        // Queue q of a's port feeds queue q of b's, and back: one ring per queue and direction.
        for (unsigned q = 0; q < queues; ++q) {
            a_to_b_.push_back(rte_ring_create((tag + "ab" + std::to_string(q)).c_str(), 1024,
                                              static_cast<int>(rte_socket_id()),
                                              RING_F_SP_ENQ | RING_F_SC_DEQ));
            b_to_a_.push_back(rte_ring_create((tag + "ba" + std::to_string(q)).c_str(), 1024,
                                              static_cast<int>(rte_socket_id()),
                                              RING_F_SP_ENQ | RING_F_SC_DEQ));
            EXPECT_NE(a_to_b_.back(), nullptr);
            EXPECT_NE(b_to_a_.back(), nullptr);
        }
        port_a_ = "net_ring_" + tag + "a";
        port_b_ = "net_ring_" + tag + "b";
        EXPECT_GE(rte_eth_from_rings((tag + "a").c_str(), b_to_a_.data(), queues, a_to_b_.data(),
                                     queues, rte_socket_id()),
                  0);
        EXPECT_GE(rte_eth_from_rings((tag + "b").c_str(), a_to_b_.data(), queues, b_to_a_.data(),
                                     queues, rte_socket_id()),
                  0);
        name_a_ = "rdma_swroce_" + tag + "a";
        name_b_ = "rdma_swroce_" + tag + "b";
        const std::string ip_a = ipv6 ? "fd00::1" : "10.0.0.1";
        const std::string ip_b = ipv6 ? "fd00::2" : "10.0.0.2";
        const std::string groups = queues > 1 ? ",queues=" + std::to_string(queues) : "";
        auto a = create_device(name_a_ + ",port=" + port_a_ + ",ip=" + ip_a + groups + extra);
        auto b = create_device(name_b_ + ",port=" + port_b_ + ",ip=" + ip_b + groups + extra_b);
        EXPECT_TRUE(a.ok()) << a.error().to_string();
        EXPECT_TRUE(b.ok()) << b.error().to_string();
        a_ = a.ok() ? a.value() : invalid_device;
        b_ = b.ok() ? b.value() : invalid_device;
    }
    ~SwrocePair() override {
        // Devices first (they stop the ports), then the ports, then the rings under them.
        for (const std::string& name : {name_a_, name_b_}) {
            if (find_device(name).ok()) {
                (void)rte_vdev_uninit(name.c_str());
            }
        }
        (void)rte_vdev_uninit(port_a_.c_str());
        (void)rte_vdev_uninit(port_b_.c_str());
        for (rte_ring* ring : a_to_b_) {
            rte_ring_free(ring);
        }
        for (rte_ring* ring : b_to_a_) {
            rte_ring_free(ring);
        }
    }
    SwrocePair(const SwrocePair&) = delete;
    SwrocePair& operator=(const SwrocePair&) = delete;

    [[nodiscard]] DeviceId a() const override { return a_; }
    [[nodiscard]] DeviceId b() const override { return b_; }
    [[nodiscard]] Gid gid_a() const override { return ipv6_ ? v6(1) : Gid::from_ipv4(0x0a000001); }
    [[nodiscard]] Gid gid_b() const override { return ipv6_ ? v6(2) : Gid::from_ipv4(0x0a000002); }
    [[nodiscard]] Gid unreachable_gid() const override { return Gid::from_ipv4(0x0a000063); }
    bool set_link_a(bool up) override {
        std::uint16_t port = 0;
        if (rte_eth_dev_get_port_by_name(port_a_.c_str(), &port) != 0) {
            return false;
        }
        return (up ? rte_eth_dev_set_link_up(port) : rte_eth_dev_set_link_down(port)) == 0;
    }
    [[nodiscard]] std::vector<std::pair<std::string, std::string>> bad_devargs() const override {
        return {
            {"rdma_swroce_bad0,ip=10.0.0.9", "port"},
            {"rdma_swroce_bad1,port=" + port_a_, "ip"},
            {"rdma_swroce_bad2,port=no_such_port,ip=10.0.0.9", "no_such_port"},
            {"rdma_swroce_bad3,port=" + port_a_ + ",ip=10.0.0.300", "10.0.0.300"},
            {"rdma_swroce_bad4,port=" + port_a_ + ",ip=10.0.0.9,mtu=1000", "mtu"},
            {"rdma_swroce_bad5,port=" + port_a_ + ",ip=10.0.0.9,colour=blue", "colour"},
            // The tests' EAL has no service lcore.
            {"rdma_swroce_bad6,port=" + port_a_ + ",ip=10.0.0.9,progress=service", "-S"},
        };
    }

    // swroce hands such requests to the group's owner (ENGINE.md "Ownership").
    [[nodiscard]] bool owned_group_pends() const override { return true; }

private:
    static Gid v6(std::uint8_t last) {
        Gid gid;
        gid.raw[0] = 0xfd;
        gid.raw[15] = last;
        return gid;
    }
    bool ipv6_ = false;
    std::vector<rte_ring*> a_to_b_;
    std::vector<rte_ring*> b_to_a_;
    std::string port_a_, port_b_, name_a_, name_b_;
    DeviceId a_ = invalid_device;
    DeviceId b_ = invalid_device;
};

} // namespace

DriverFactory swroce_factory(PairOptions options) {
    return {"swroce",
            [options = std::move(options)] { return std::make_unique<SwrocePair>(options); }};
}

} // namespace prdma::rdma::conformance
