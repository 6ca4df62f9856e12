// swroce devargs: every accepted form parses to the documented values, and every broken rule is
// invalid_parameter with a message that names the key, the value and what is allowed.
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <prdma/build_config.hpp>

#include "devargs.hpp"

namespace prdma::swroce {
namespace {

constexpr std::array<std::uint8_t, 16> mapped(std::uint8_t a, std::uint8_t b, std::uint8_t c,
                                              std::uint8_t d) {
    return {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, a, b, c, d};
}

TEST(Devargs, MinimalTakesDefaults) {
    auto args = parse_devargs("port=net_memif0,ip=10.0.0.1");
    ASSERT_TRUE(args.ok()) << args.error().to_string();
    EXPECT_EQ(args->port, "net_memif0");
    EXPECT_TRUE(args->ip.is_v4);
    EXPECT_EQ(args->ip.bytes, mapped(10, 0, 0, 1));
    EXPECT_EQ(args->ip.ipv4_host_order(), 0x0a000001U);
    EXPECT_FALSE(args->mtu.has_value());
    EXPECT_EQ(args->queues, 1U);
    EXPECT_TRUE(args->pcap.empty());
    EXPECT_EQ(args->rx_faults.drop, 0.0);
    EXPECT_FALSE(args->rx_faults.any());
    EXPECT_FALSE(args->tx_faults.any());
    EXPECT_EQ(args->reorder_depth, 3U);
    EXPECT_EQ(args->delay_us, 100U);
    EXPECT_EQ(args->seed, 1U);
}

TEST(Devargs, EveryKey) {
    auto args = parse_devargs(
        "port=net_memif0,ip=10.0.0.1,mtu=1024,queues=2,pcap=/tmp/x.pcapng,drop=0.01,seed=7");
    ASSERT_TRUE(args.ok()) << args.error().to_string();
    EXPECT_EQ(args->port, "net_memif0");
    EXPECT_EQ(args->ip.to_string(), "10.0.0.1");
    ASSERT_TRUE(args->mtu.has_value());
    EXPECT_EQ(*args->mtu, 1024U);
    EXPECT_EQ(args->queues, 2U);
    EXPECT_EQ(args->pcap, "/tmp/x.pcapng");
    EXPECT_DOUBLE_EQ(args->rx_faults.drop, 0.01);
    EXPECT_EQ(args->seed, 7U);
}

TEST(Devargs, EveryFaultKey) {
    auto args = parse_devargs("port=p,ip=10.0.0.1,rx_drop=0.01,rx_reorder=0.02,rx_duplicate=0.03,"
                              "rx_corrupt=0.04,rx_delay=0.05,tx_drop=0.06,tx_reorder=0.07,"
                              "tx_duplicate=0.08,tx_corrupt=0.09,tx_delay=0.1,reorder_depth=5,"
                              "delay_us=250,seed=9");
    ASSERT_TRUE(args.ok()) << args.error().to_string();
    EXPECT_DOUBLE_EQ(args->rx_faults.drop, 0.01);
    EXPECT_DOUBLE_EQ(args->rx_faults.reorder, 0.02);
    EXPECT_DOUBLE_EQ(args->rx_faults.duplicate, 0.03);
    EXPECT_DOUBLE_EQ(args->rx_faults.corrupt, 0.04);
    EXPECT_DOUBLE_EQ(args->rx_faults.delay, 0.05);
    EXPECT_DOUBLE_EQ(args->tx_faults.drop, 0.06);
    EXPECT_DOUBLE_EQ(args->tx_faults.reorder, 0.07);
    EXPECT_DOUBLE_EQ(args->tx_faults.duplicate, 0.08);
    EXPECT_DOUBLE_EQ(args->tx_faults.corrupt, 0.09);
    EXPECT_DOUBLE_EQ(args->tx_faults.delay, 0.1);
    EXPECT_EQ(args->reorder_depth, 5U);
    EXPECT_EQ(args->delay_us, 250U);
    EXPECT_EQ(args->seed, 9U);
}

// Each key sets its own field and nothing else.
TEST(Devargs, EachRateKeySetsOnlyItsField) {
    struct Case {
        const char* key;
        bool tx;
        double FaultRates::*rate;
    };
    const Case cases[] = {
        {"rx_drop", false, &FaultRates::drop},
        {"rx_reorder", false, &FaultRates::reorder},
        {"rx_duplicate", false, &FaultRates::duplicate},
        {"rx_corrupt", false, &FaultRates::corrupt},
        {"rx_delay", false, &FaultRates::delay},
        {"tx_drop", true, &FaultRates::drop},
        {"tx_reorder", true, &FaultRates::reorder},
        {"tx_duplicate", true, &FaultRates::duplicate},
        {"tx_corrupt", true, &FaultRates::corrupt},
        {"tx_delay", true, &FaultRates::delay},
        {"drop", false, &FaultRates::drop},
    };
    for (const Case& c : cases) {
        auto args = parse_devargs(std::string("port=p,ip=10.0.0.1,") + c.key + "=0.25");
        ASSERT_TRUE(args.ok()) << c.key << ": " << args.error().to_string();
        FaultRates expected;
        expected.*c.rate = 0.25;
        const FaultRates& set = c.tx ? args->tx_faults : args->rx_faults;
        const FaultRates& other = c.tx ? args->rx_faults : args->tx_faults;
        EXPECT_TRUE(set.any()) << c.key;
        EXPECT_FALSE(other.any()) << c.key;
        for (double FaultRates::*rate :
             {&FaultRates::drop, &FaultRates::reorder, &FaultRates::duplicate, &FaultRates::corrupt,
              &FaultRates::delay}) {
            EXPECT_EQ(set.*rate, expected.*rate) << c.key;
        }
    }
}

TEST(Devargs, DropIsRxDropsOlderName) {
    auto old_name = parse_devargs("port=p,ip=10.0.0.1,drop=0.2");
    ASSERT_TRUE(old_name.ok()) << old_name.error().to_string();
    EXPECT_DOUBLE_EQ(old_name->rx_faults.drop, 0.2);

    EXPECT_FALSE(old_name->tx_faults.any());
    auto new_name = parse_devargs("port=p,ip=10.0.0.1,rx_drop=0.3");
    ASSERT_TRUE(new_name.ok()) << new_name.error().to_string();
    EXPECT_DOUBLE_EQ(new_name->rx_faults.drop, 0.3);
}

TEST(Devargs, ReorderDepthAndDelayBounds) {
    for (const unsigned depth : {1U, 2U, 64U}) {
        auto args = parse_devargs("port=p,ip=10.0.0.1,reorder_depth=" + std::to_string(depth));
        ASSERT_TRUE(args.ok()) << depth << ": " << args.error().to_string();
        EXPECT_EQ(args->reorder_depth, depth);
    }
    for (const std::uint32_t delay : {1U, 100U, 1000000U}) {
        auto args = parse_devargs("port=p,ip=10.0.0.1,delay_us=" + std::to_string(delay));
        ASSERT_TRUE(args.ok()) << delay << ": " << args.error().to_string();
        EXPECT_EQ(args->delay_us, delay);
    }
}

TEST(Devargs, KeysInAnyOrder) {
    auto args = parse_devargs("seed=3,queues=4,ip=192.168.1.20,port=0000:01:00.0,mtu=4096");
    ASSERT_TRUE(args.ok()) << args.error().to_string();
    EXPECT_EQ(args->port, "0000:01:00.0");
    EXPECT_EQ(args->ip.to_string(), "192.168.1.20");
    EXPECT_EQ(*args->mtu, 4096U);
    EXPECT_EQ(args->queues, 4U);
    EXPECT_EQ(args->seed, 3U);
}

TEST(Devargs, ProgressByPollingOrAsAService) {
    auto plain = parse_devargs("port=p,ip=10.0.0.1");
    ASSERT_TRUE(plain.ok()) << plain.error().to_string();
    EXPECT_FALSE(plain->service_progress);
    auto poll = parse_devargs("port=p,ip=10.0.0.1,progress=poll");
    ASSERT_TRUE(poll.ok()) << poll.error().to_string();
    EXPECT_FALSE(poll->service_progress);
    auto service = parse_devargs("progress=service,port=p,ip=10.0.0.1");
    ASSERT_TRUE(service.ok()) << service.error().to_string();
    EXPECT_TRUE(service->service_progress);
}

TEST(Devargs, EveryIbMtu) {
    for (const unsigned mtu : {256U, 512U, 1024U, 2048U, 4096U}) {
        auto args = parse_devargs("port=p,ip=10.0.0.1,mtu=" + std::to_string(mtu));
        ASSERT_TRUE(args.ok()) << mtu << ": " << args.error().to_string();
        EXPECT_EQ(*args->mtu, mtu);
    }
}

TEST(Devargs, QueueBounds) {
    auto one = parse_devargs("port=p,ip=10.0.0.1,queues=1");
    ASSERT_TRUE(one.ok()) << one.error().to_string();
    EXPECT_EQ(one->queues, 1U);
    const std::string max = std::to_string(PRDMA_MAX_QUEUE_GROUPS);
    auto most = parse_devargs("port=p,ip=10.0.0.1,queues=" + max);
    ASSERT_TRUE(most.ok()) << most.error().to_string();
    EXPECT_EQ(most->queues, static_cast<unsigned>(PRDMA_MAX_QUEUE_GROUPS));
}

TEST(Devargs, DropForms) {
    const std::vector<std::pair<std::string, double>> cases = {
        {"0", 0.0}, {"0.0", 0.0}, {"0.5", 0.5}, {"1e-3", 0.001}, {"0.999999", 0.999999}};
    for (const auto& [text, value] : cases) {
        auto args = parse_devargs("port=p,ip=10.0.0.1,drop=" + text);
        ASSERT_TRUE(args.ok()) << text << ": " << args.error().to_string();
        EXPECT_DOUBLE_EQ(args->rx_faults.drop, value) << text;
    }
}

TEST(Devargs, SeedBounds) {
    auto zero = parse_devargs("port=p,ip=10.0.0.1,seed=0");
    ASSERT_TRUE(zero.ok()) << zero.error().to_string();
    EXPECT_EQ(zero->seed, 0U);
    auto max = parse_devargs("port=p,ip=10.0.0.1,seed=18446744073709551615");
    ASSERT_TRUE(max.ok()) << max.error().to_string();
    EXPECT_EQ(max->seed, std::numeric_limits<std::uint64_t>::max());
}

TEST(Devargs, Ipv6Address) {
    auto args = parse_devargs("port=p,ip=fd00::1:2");
    ASSERT_TRUE(args.ok()) << args.error().to_string();
    EXPECT_FALSE(args->ip.is_v4);
    const std::array<std::uint8_t, 16> expected = {0xfd, 0, 0, 0, 0, 0, 0, 0,
                                                   0,    0, 0, 0, 0, 1, 0, 2};
    EXPECT_EQ(args->ip.bytes, expected);
    EXPECT_EQ(args->ip.to_string(), "fd00::1:2");

    auto full = parse_devargs("port=p,ip=2001:0db8:0000:0000:0000:ff00:0042:8329");
    ASSERT_TRUE(full.ok()) << full.error().to_string();
    EXPECT_EQ(full->ip.to_string(), "2001:db8::ff00:42:8329");
    auto link_local = parse_devargs("port=p,ip=fe80::5054:ff:fe12:3456");
    ASSERT_TRUE(link_local.ok()) << link_local.error().to_string();
    EXPECT_FALSE(link_local->ip.is_v4);
}

TEST(Devargs, Ipv4MappedIpv6TextIsIpv4) {
    auto args = parse_devargs("port=p,ip=::ffff:10.1.2.3");
    ASSERT_TRUE(args.ok()) << args.error().to_string();
    EXPECT_TRUE(args->ip.is_v4);
    EXPECT_EQ(args->ip.bytes, mapped(10, 1, 2, 3));
    EXPECT_EQ(args->ip, IpAddress::from_ipv4(0x0a010203U));
    EXPECT_EQ(args->ip.to_string(), "10.1.2.3");
}

TEST(Devargs, GidFromIp) {
    // RoCEv2 GID of an IPv4 address: ::ffff:a.b.c.d, what rxe puts at the IPv4 GID index.
    const rdma::Gid v4 = gid_from_ip(IpAddress::from_ipv4(0xc0a80114U)); // 192.168.1.20
    EXPECT_EQ(v4.raw, mapped(192, 168, 1, 20));

    auto v6 = parse_ip_address("fe80::5054:ff:fe12:3456");
    ASSERT_TRUE(v6.has_value());
    const std::array<std::uint8_t, 16> expected = {0xfe, 0x80, 0,    0,    0,    0,    0,    0,
                                                   0x50, 0x54, 0x00, 0xff, 0xfe, 0x12, 0x34, 0x56};
    EXPECT_EQ(gid_from_ip(*v6).raw, expected);
}

TEST(Devargs, IpTextParser) {
    EXPECT_TRUE(parse_ip_address("1.2.3.4").has_value());
    EXPECT_TRUE(parse_ip_address("::").has_value()) << "syntax only; devargs rejects it";
    EXPECT_FALSE(parse_ip_address("").has_value());
    EXPECT_FALSE(parse_ip_address("1.2.3").has_value());
    EXPECT_FALSE(parse_ip_address("1.2.3.4.5").has_value());
    EXPECT_FALSE(parse_ip_address("256.1.1.1").has_value());
    EXPECT_FALSE(parse_ip_address(std::string(100, '1')).has_value());
    // A view that is not NUL-terminated must not read past its end.
    const std::string text = "10.0.0.12";
    const std::string_view view = text;
    auto prefix = parse_ip_address(view.substr(0, 8));
    ASSERT_TRUE(prefix.has_value());
    EXPECT_EQ(prefix->to_string(), "10.0.0.1");
}

struct Rejection {
    const char* args;
    // Fragments the message must contain: the key (or the problem), and the value.
    const char* fragment1;
    const char* fragment2;
};

class DevargsRejects : public ::testing::TestWithParam<Rejection> {};

TEST_P(DevargsRejects, InvalidParameterNamingKeyAndValue) {
    const Rejection& r = GetParam();
    auto args = parse_devargs(r.args);
    ASSERT_FALSE(args.ok()) << "accepted: '" << r.args << "'";
    EXPECT_EQ(args.code(), StatusCode::invalid_parameter);
    const std::string& message = args.error().message();
    EXPECT_NE(message.find(r.fragment1), std::string::npos) << message;
    EXPECT_NE(message.find(r.fragment2), std::string::npos) << message;
}

const Rejection rejections[] = {
    // Structure.
    {"", "'port' is required", "port=net_memif0"},
    {"ip=10.0.0.1", "'port' is required", "port="},
    {"port=net_memif0", "'ip' is required", "ip=10.0.0.1"},
    {"port=p,ip=10.0.0.1,colour=blue", "unknown key 'colour'", "valid keys: port, ip, mtu"},
    {"port=p,ip=10.0.0.1,Port=q", "unknown key 'Port'", "valid keys"},
    {"port=p,ip=10.0.0.1,port=q", "'port' is given twice", "('p' and 'q')"},
    {"port=p,ip=10.0.0.1,ip=10.0.0.2", "'ip' is given twice", "'10.0.0.1' and '10.0.0.2'"},
    {"port=p,ip=10.0.0.1,mtu=1024,mtu=1024", "'mtu' is given twice", "'1024'"},
    {"port=p,,ip=10.0.0.1", "entry 2 is empty", "single commas"},
    {",port=p,ip=10.0.0.1", "entry 1 is empty", "key=value"},
    {"port=p,ip=10.0.0.1,", "entry 3 is empty", "single commas"},
    {"port=p,ip=10.0.0.1,pcap", "'pcap' is not key=value", "valid keys"},
    {"port=p,ip=10.0.0.1,=5", "unknown key ''", "valid keys"},
    // port / pcap.
    {"port=,ip=10.0.0.1", "port=''", "name the ethdev"},
    {"port=p,ip=10.0.0.1,pcap=", "pcap=''", "pcapng"},
    // ip.
    {"port=p,ip=", "ip=''", "IPv4"},
    {"port=p,ip=10.0.0", "ip='10.0.0'", "IPv4 (a.b.c.d) or IPv6"},
    {"port=p,ip=10.0.0.256", "ip='10.0.0.256'", "IPv4"},
    {"port=p,ip=10.0.0.1/24", "ip='10.0.0.1/24'", "IPv4"},
    {"port=p,ip= 10.0.0.1", "ip=' 10.0.0.1'", "IPv4"},
    {"port=p,ip=host.example", "ip='host.example'", "IPv6"},
    {"port=p,ip=fe80::1%eth0", "ip='fe80::1%eth0'", "IPv6"},
    {"port=p,ip=fd00:::1", "ip='fd00:::1'", "IPv6"},
    {"port=p,ip=0.0.0.0", "ip='0.0.0.0'", "unspecified"},
    {"port=p,ip=255.255.255.255", "ip='255.255.255.255'", "broadcast"},
    {"port=p,ip=224.0.0.1", "ip='224.0.0.1'", "multicast"},
    {"port=p,ip=127.0.0.1", "ip='127.0.0.1'", "loopback"},
    {"port=p,ip=::", "ip='::'", "unspecified"},
    {"port=p,ip=::1", "ip='::1'", "loopback"},
    {"port=p,ip=ff02::1", "ip='ff02::1'", "multicast"},
    // progress.
    {"port=p,ip=10.0.0.1,progress=", "progress=''", "progress=service"},
    {"port=p,ip=10.0.0.1,progress=Service", "progress='Service'", "service lcore"},
    {"port=p,ip=10.0.0.1,progress=1", "progress='1'", "progress=poll"},
    // mtu.
    {"port=p,ip=10.0.0.1,mtu=", "mtu=''", "256, 512, 1024, 2048, 4096"},
    {"port=p,ip=10.0.0.1,mtu=1000", "mtu='1000'", "256, 512, 1024, 2048, 4096"},
    {"port=p,ip=10.0.0.1,mtu=1500", "mtu='1500'", "one of"},
    {"port=p,ip=10.0.0.1,mtu=128", "mtu='128'", "one of"},
    {"port=p,ip=10.0.0.1,mtu=8192", "mtu='8192'", "one of"},
    {"port=p,ip=10.0.0.1,mtu=0", "mtu='0'", "one of"},
    {"port=p,ip=10.0.0.1,mtu=+1024", "mtu='+1024'", "one of"},
    {"port=p,ip=10.0.0.1,mtu=0x400", "mtu='0x400'", "one of"},
    {"port=p,ip=10.0.0.1,mtu=1k", "mtu='1k'", "one of"},
    {"port=p,ip=10.0.0.1,mtu=1024 ", "mtu='1024 '", "one of"},
    // queues.
    {"port=p,ip=10.0.0.1,queues=0", "queues='0'", "must be 1.."},
    {"port=p,ip=10.0.0.1,queues=-1", "queues='-1'", "PRDMA_MAX_QUEUE_GROUPS"},
    {"port=p,ip=10.0.0.1,queues=two", "queues='two'", "must be 1.."},
    {"port=p,ip=10.0.0.1,queues=1.5", "queues='1.5'", "must be 1.."},
    {"port=p,ip=10.0.0.1,queues=4294967296", "queues='4294967296'", "must be 1.."},
    // drop.
    {"port=p,ip=10.0.0.1,drop=1", "drop='1'", "[0, 1)"},
    {"port=p,ip=10.0.0.1,drop=1.0", "drop='1.0'", "[0, 1)"},
    {"port=p,ip=10.0.0.1,drop=-0.1", "drop='-0.1'", "[0, 1)"},
    {"port=p,ip=10.0.0.1,drop=nan", "drop='nan'", "[0, 1)"},
    {"port=p,ip=10.0.0.1,drop=inf", "drop='inf'", "[0, 1)"},
    {"port=p,ip=10.0.0.1,drop=half", "drop='half'", "[0, 1)"},
    {"port=p,ip=10.0.0.1,drop=0.5x", "drop='0.5x'", "[0, 1)"},
    {"port=p,ip=10.0.0.1,drop=", "drop=''", "[0, 1)"},
    {"port=p,ip=10.0.0.1,drop=1%", "drop='1%'", "[0, 1)"},
    // Fault probabilities: every key has the same rule as drop.
    {"port=p,ip=10.0.0.1,rx_drop=1", "rx_drop='1'", "[0, 1), e.g. rx_drop=0.01"},
    {"port=p,ip=10.0.0.1,rx_reorder=1.5", "rx_reorder='1.5'", "[0, 1)"},
    {"port=p,ip=10.0.0.1,rx_duplicate=-0.5", "rx_duplicate='-0.5'", "[0, 1)"},
    {"port=p,ip=10.0.0.1,rx_corrupt=nan", "rx_corrupt='nan'", "[0, 1)"},
    {"port=p,ip=10.0.0.1,rx_delay=", "rx_delay=''", "[0, 1)"},
    {"port=p,ip=10.0.0.1,tx_drop=inf", "tx_drop='inf'", "[0, 1), e.g. tx_drop=0.01"},
    {"port=p,ip=10.0.0.1,tx_reorder=0.1x", "tx_reorder='0.1x'", "[0, 1)"},
    {"port=p,ip=10.0.0.1,tx_duplicate=10%", "tx_duplicate='10%'", "[0, 1)"},
    {"port=p,ip=10.0.0.1,tx_corrupt=1.0", "tx_corrupt='1.0'", "[0, 1)"},
    {"port=p,ip=10.0.0.1,tx_delay=often", "tx_delay='often'", "[0, 1)"},
    {"port=p,ip=10.0.0.1,tx_delay=0.1,tx_delay=0.2", "'tx_delay' is given twice",
     "'0.1' and '0.2'"},
    {"port=p,ip=10.0.0.1,rx_drop=0.1,drop=0.2", "drop='0.2' and rx_drop='0.1'",
     "give only rx_drop"},
    {"port=p,ip=10.0.0.1,drop=0,rx_drop=0", "drop='0' and rx_drop='0'", "older name of rx_drop"},
    {"port=p,ip=10.0.0.1,tx_jitter=0.1", "unknown key 'tx_jitter'", "tx_delay, reorder_depth"},
    // reorder_depth.
    {"port=p,ip=10.0.0.1,reorder_depth=0", "reorder_depth='0'", "1..64"},
    {"port=p,ip=10.0.0.1,reorder_depth=65", "reorder_depth='65'", "1..64"},
    {"port=p,ip=10.0.0.1,reorder_depth=-1", "reorder_depth='-1'", "1..64"},
    {"port=p,ip=10.0.0.1,reorder_depth=2.5", "reorder_depth='2.5'", "1..64"},
    {"port=p,ip=10.0.0.1,reorder_depth=", "reorder_depth=''", "later frames"},
    {"port=p,ip=10.0.0.1,reorder_depth=4294967299", "reorder_depth='4294967299'", "1..64"},
    // delay_us.
    {"port=p,ip=10.0.0.1,delay_us=0", "delay_us='0'", "1..1000000"},
    {"port=p,ip=10.0.0.1,delay_us=1000001", "delay_us='1000001'", "1..1000000"},
    {"port=p,ip=10.0.0.1,delay_us=1e3", "delay_us='1e3'", "microseconds"},
    {"port=p,ip=10.0.0.1,delay_us=100us", "delay_us='100us'", "microseconds"},
    {"port=p,ip=10.0.0.1,delay_us=", "delay_us=''", "1..1000000"},
    {"port=p,ip=10.0.0.1,delay_us=-5", "delay_us='-5'", "1..1000000"},
    // seed.
    {"port=p,ip=10.0.0.1,seed=", "seed=''", "decimal integer"},
    {"port=p,ip=10.0.0.1,seed=abc", "seed='abc'", "decimal integer"},
    {"port=p,ip=10.0.0.1,seed=-1", "seed='-1'", "decimal integer"},
    {"port=p,ip=10.0.0.1,seed=0x10", "seed='0x10'", "decimal integer"},
    {"port=p,ip=10.0.0.1,seed=1e3", "seed='1e3'", "decimal integer"},
    {"port=p,ip=10.0.0.1,seed=18446744073709551616", "seed='18446744073709551616'",
     "0..18446744073709551615"},
};

INSTANTIATE_TEST_SUITE_P(Every, DevargsRejects, ::testing::ValuesIn(rejections));

} // namespace
} // namespace prdma::swroce
