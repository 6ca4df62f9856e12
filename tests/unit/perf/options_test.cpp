// prdma-perf's command line: perftest's names, defaults and limits, and clear refusals.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "options.hpp"

namespace prdma::perf {
namespace {

Result<PerfOptions> parse(TestId test, std::vector<std::string> args) {
    return parse_perf_options(test, args);
}

constexpr TestId write_lat{Verb::write, Kind::latency};
constexpr TestId write_bw{Verb::write, Kind::bandwidth};
constexpr TestId atomic_lat{Verb::atomic, Kind::latency};

TEST(PerfOptions, TestNamesInEveryForm) {
    for (const char* name : {"write_lat", "ib_write_lat", "prdma_write_lat"}) {
        auto test = parse_test_name(name);
        ASSERT_TRUE(test.has_value()) << name;
        EXPECT_EQ(test->verb, Verb::write);
        EXPECT_EQ(test->kind, Kind::latency);
    }
    EXPECT_EQ(test_name(*parse_test_name("atomic_bw")), "atomic_bw");
    EXPECT_FALSE(parse_test_name("write").has_value());
    EXPECT_FALSE(parse_test_name("write_latency").has_value());
    EXPECT_FALSE(parse_test_name("ib_foo_bw").has_value());
}

TEST(PerfOptions, PerftestDefaults) {
    auto lat = parse(write_lat, {});
    ASSERT_TRUE(lat.ok());
    EXPECT_FALSE(lat->server.has_value()); // no host name: server
    EXPECT_EQ(lat->tcp_port, 18515);
    EXPECT_EQ(lat->iterations, 1000U);
    EXPECT_EQ(lat->sizes, std::vector<std::uint64_t>{2});
    EXPECT_EQ(lat->inline_size, 220U);
    auto bw = parse(write_bw, {"10.0.0.2"});
    ASSERT_TRUE(bw.ok());
    EXPECT_EQ(*bw->server, "10.0.0.2");
    EXPECT_EQ(bw->iterations, 5000U);
    EXPECT_EQ(bw->sizes, std::vector<std::uint64_t>{65536});
    EXPECT_EQ(bw->tx_depth, 128U);
    EXPECT_EQ(bw->inline_size, 0U);
    auto read_bw = parse(TestId{Verb::read, Kind::bandwidth}, {});
    ASSERT_TRUE(read_bw.ok());
    EXPECT_EQ(read_bw->iterations, 1000U); // only ib_write_bw defaults to 5000
    EXPECT_FALSE(parse(TestId{Verb::read, Kind::latency}, {"-I", "64"}).ok());
    auto send_lat = parse(TestId{Verb::send, Kind::latency}, {});
    ASSERT_TRUE(send_lat.ok());
    EXPECT_EQ(send_lat->inline_size, 236U);
    EXPECT_EQ(send_lat->tx_depth, 1U);
    EXPECT_EQ(send_lat->rx_depth, 512U);
    auto warm = parse(write_bw, {"--perform_warm_up"});
    ASSERT_TRUE(warm.ok());
    EXPECT_TRUE(warm->warm_up);
    EXPECT_FALSE(parse(TestId{Verb::send, Kind::bandwidth}, {"--perform_warm_up"}).ok());
    auto atomic = parse(atomic_lat, {});
    ASSERT_TRUE(atomic.ok());
    EXPECT_EQ(atomic->sizes, std::vector<std::uint64_t>{8});
    EXPECT_EQ(atomic->atomic_type, AtomicType::fetch_and_add);
}

TEST(PerfOptions, ShortLongAndAttachedForms) {
    auto o = parse(write_bw, {"-s", "4096", "-n5000", "--qp=4", "--mtu", "2048", "-x", "0", "-p",
                              "20000", "--report_gbits", "-F", "host"});
    ASSERT_TRUE(o.ok()) << o.error().to_string();
    EXPECT_EQ(o->sizes, std::vector<std::uint64_t>{4096});
    EXPECT_EQ(o->iterations, 5000U);
    EXPECT_EQ(o->qps, 4U);
    EXPECT_EQ(o->mtu, rdma::Mtu::mtu_2048);
    EXPECT_EQ(o->tcp_port, 20000);
    EXPECT_TRUE(o->report_gbits);
    EXPECT_EQ(*o->server, "host");
}

TEST(PerfOptions, GetoptBundlesAndLongPrefixes) {
    auto o = parse(write_bw, {"-bNs4096", "-aF"});
    EXPECT_FALSE(o.ok()); // -a with -s
    o = parse(write_bw, {"-bNs4096", "-Fl", "4", "--report_g", "--iter=100"});
    ASSERT_TRUE(o.ok()) << o.error().to_string();
    EXPECT_TRUE(o->bidirectional);
    EXPECT_TRUE(o->no_peak);
    EXPECT_EQ(o->sizes, std::vector<std::uint64_t>{4096});
    EXPECT_TRUE(o->cpu_freq_warning_off);
    EXPECT_EQ(o->post_list, 4U);
    EXPECT_TRUE(o->report_gbits);
    EXPECT_EQ(o->iterations, 100U);
    auto unknown = parse(write_bw, {"-Fz"});
    ASSERT_FALSE(unknown.ok());
    EXPECT_NE(unknown.error().message().find("'-z' in '-Fz'"), std::string::npos);
    auto ambiguous = parse(write_bw, {"--out"}); // out_json, out_json_file, outs
    ASSERT_FALSE(ambiguous.ok());
    EXPECT_NE(ambiguous.error().message().find("ambiguous"), std::string::npos);
    auto twice = parse(write_bw, {"-n", "100", "--iters=200"});
    ASSERT_FALSE(twice.ok());
    EXPECT_NE(twice.error().message().find("given twice"), std::string::npos);
    EXPECT_FALSE(parse(write_bw, {"-l"}).ok()); // needs a value
}

TEST(PerfOptions, ReportingModesFollowPerftestsRules) {
    EXPECT_TRUE(parse(write_lat, {"-H", "-U"}).ok());
    EXPECT_FALSE(parse(write_bw, {"-H"}).ok());
    EXPECT_FALSE(parse(write_lat, {"-U", "-D", "2"}).ok());
    EXPECT_FALSE(parse(write_lat, {"-N"}).ok());
    EXPECT_FALSE(parse(write_lat, {"-b"}).ok());
    EXPECT_TRUE(parse(TestId{Verb::send, Kind::bandwidth}, {"-b"})->bidirectional);
    EXPECT_FALSE(parse(write_bw, {"-b", "--verify"}).ok());
    auto timed = parse(write_bw, {"-D", "2"});
    ASSERT_TRUE(timed.ok());
    EXPECT_TRUE(timed->no_peak); // perftest measures no peak in a timed run
    auto forever = parse(write_bw, {"--run_infinitely"});
    ASSERT_TRUE(forever.ok());
    EXPECT_EQ(forever->duration_seconds, 5U);
    EXPECT_TRUE(forever->no_peak);
    EXPECT_FALSE(parse(write_bw, {"--run_infinitely", "-n", "100"}).ok());
    EXPECT_TRUE(parse(TestId{Verb::send, Kind::bandwidth}, {"--run_infinitely"}).ok());
    auto json = parse(write_bw, {"--out_json", "--out_json_file", "/tmp/x.json"});
    ASSERT_TRUE(json.ok());
    EXPECT_TRUE(json->out_json);
    EXPECT_EQ(json->out_json_file, "/tmp/x.json");
    EXPECT_EQ(parse(write_bw, {"--out_json"})->out_json_file, "perftest_out.json");
}

TEST(PerfOptions, PostListAsPerftest) {
    auto o = parse(write_bw, {"-l", "8"});
    ASSERT_TRUE(o.ok()) << o.error().to_string();
    EXPECT_EQ(o->cq_moderation, 8U); // one completion per list unless -Q says otherwise
    EXPECT_TRUE(parse(write_bw, {"-l", "8", "-Q", "4"}).ok());
    EXPECT_FALSE(parse(write_bw, {"-l", "8", "-Q", "3"}).ok());
    EXPECT_FALSE(parse(write_bw, {"-l", "16", "-n", "1000"}).ok()); // 1000 % 16 != 0
    EXPECT_FALSE(parse(write_bw, {"-l", "64", "-t", "32"}).ok());   // the list does not fit
    EXPECT_TRUE(parse(write_bw, {"-l", "16", "-D", "1"}).ok());     // timed: any count
    EXPECT_FALSE(parse(write_lat, {"-l", "2"}).ok());
}

TEST(PerfOptions, AllSizesAreTwoToTwoToTheTwentyThird) {
    auto o = parse(write_lat, {"-a"});
    ASSERT_TRUE(o.ok());
    ASSERT_EQ(o->sizes.size(), 23U);
    EXPECT_EQ(o->sizes.front(), 2U);
    EXPECT_EQ(o->sizes.back(), 1U << 23);
}

TEST(PerfOptions, SizeSuffixesAndClamps) {
    auto o = parse(write_bw, {"-s", "64K", "-n", "50", "-t", "128"});
    ASSERT_TRUE(o.ok()) << o.error().to_string();
    EXPECT_EQ(o->sizes, std::vector<std::uint64_t>{65536});
    EXPECT_EQ(o->tx_depth, 50U); // perftest clamps the depth to the iterations
    auto q = parse(write_bw, {"-q", "0"});
    ASSERT_FALSE(q.ok());
    EXPECT_NE(q.error().message().find("1..1024"), std::string::npos);
}

TEST(PerfOptions, SizeList) {
    auto o = parse(write_lat, {"--sizes=8,64,4096"});
    ASSERT_TRUE(o.ok());
    EXPECT_EQ(o->sizes, (std::vector<std::uint64_t>{8, 64, 4096}));
    auto unsorted = parse(write_lat, {"--sizes", "4096,8,64,8"});
    ASSERT_TRUE(unsorted.ok());
    EXPECT_EQ(unsorted->sizes, (std::vector<std::uint64_t>{8, 64, 4096}));
    EXPECT_FALSE(parse(write_lat, {"--sizes", "8,,64"}).ok());
}

TEST(PerfOptions, AtomicType) {
    auto o = parse(atomic_lat, {"-A", "CMP_AND_SWAP"});
    ASSERT_TRUE(o.ok());
    EXPECT_EQ(o->atomic_type, AtomicType::cmp_and_swap);
    EXPECT_FALSE(parse(atomic_lat, {"-A", "SWAP"}).ok());
    EXPECT_FALSE(parse(atomic_lat, {"-s", "64"}).ok());
}

TEST(PerfOptions, RefusalsSayWhy) {
    struct Case {
        std::vector<std::string> args;
        const char* says;
    };
    const Case cases[] = {
        {{"--bogus"}, "unknown option '--bogus'"},
        {{"-k"}, "unknown option '-k'"},
        {{"-s", "8388609"}, "the largest message is 8388608 bytes"},
        {{"-s", "0"}, "is not a number in 1..8388608"},
        {{"-s", "12x"}, "'12x' is not a number"},
        {{"-n"}, "needs a value"},
        {{"-n", "3"}, "5..100000000"},
        {{"-m", "1500"}, "is not an MTU"},
        {{"-c", "UD"}, "a datagram is a SEND"},
        {{"-c", "UC"}, "connection type 'UC' is not supported"},
        {{"-a", "-s", "64"}, "do not combine"},
        {{"-D", "2", "-n", "100"}, "cannot be combined"},
        {{"host1", "host2"}, "more than one server name"},
        {{"--report_gbits=1"}, "takes no value"},
        {{"-q", "2"}, "only available in bandwidth tests"},
        {{"-A", "CMP_AND_SWAP"}, "atomic_lat and atomic_bw only"},
        {{"-o", "4"}, "READ and atomic tests only"},
        {{"-x", "65"}, "0..64"},
        {{"-I", "913"}, "0..912"},
        {{"-s", "9M"}, "the largest message is 8388608"},
        {{"--perform_warm_up"}, "bandwidth tests only"},
    };
    for (const Case& c : cases) {
        auto o = parse(write_lat, c.args);
        ASSERT_FALSE(o.ok()) << c.says;
        EXPECT_EQ(o.code(), StatusCode::invalid_parameter);
        EXPECT_NE(o.error().message().find(c.says), std::string::npos)
            << "message: " << o.error().message();
    }
}

TEST(PerfOptions, Verify) {
    auto off = parse(write_lat, {});
    ASSERT_TRUE(off.ok());
    EXPECT_FALSE(off->verify);
    EXPECT_EQ(verify_buffers(*off).slots, 0U);
    auto on = parse(write_lat, {"--verify", "--verify-corrupt-at", "7", "-n", "100"});
    ASSERT_TRUE(on.ok());
    EXPECT_TRUE(on->verify);
    EXPECT_EQ(on->verify_corrupt_at, 7U);
    EXPECT_EQ(verify_buffers(*on).slots, 0U); // latency tests check in place
    // A requester gives each WR in flight its own buffer; send_bw's receiver each receive.
    auto client = parse(TestId{Verb::read, Kind::bandwidth}, {"--verify", "-s", "100", "host"});
    ASSERT_TRUE(client.ok());
    EXPECT_EQ(verify_buffers(*client).slots, 128U);
    EXPECT_EQ(verify_buffers(*client).stride, 128U);
    auto receiver = parse(TestId{Verb::send, Kind::bandwidth}, {"--verify", "-r", "64"});
    ASSERT_TRUE(receiver.ok());
    EXPECT_EQ(verify_buffers(*receiver).slots, 64U);
    EXPECT_EQ(verify_buffers(*receiver).stride, 65536U);
    auto target = parse(write_bw, {"--verify"});
    ASSERT_TRUE(target.ok());
    EXPECT_EQ(verify_buffers(*target).slots, 0U);
    auto atomic = parse(TestId{Verb::atomic, Kind::bandwidth}, {"--verify", "-q", "4", "host"});
    ASSERT_TRUE(atomic.ok());
    EXPECT_EQ(verify_buffers(*atomic).stride, 64U);
}

TEST(PerfOptions, VerifyRefusesWhatItCannotCheck) {
    const TestId send_bw{Verb::send, Kind::bandwidth};
    const TestId atomic_bw{Verb::atomic, Kind::bandwidth};
    struct Case {
        TestId test;
        std::vector<std::string> args;
        const char* says;
    };
    const Case cases[] = {
        {write_lat, {"--verify-corrupt-at", "3"}, "--verify-corrupt-at needs --verify"},
        {write_bw, {"--verify", "-D", "5"}, "use -n, not -D"},
        {write_bw, {"--verify", "--perform_warm_up"}, "--perform_warm_up"},
        {atomic_bw, {"--verify", "--sizes", "8,16"}, "atomic tests run one size"},
        {write_lat, {"--verify", "-n", "10", "--verify-corrupt-at", "10"}, "iterations 0..9"},
        {write_bw, {"--verify", "-s", "8M", "host"}, "lower -t, the message size or -q"},
        {send_bw, {"--verify", "-s", "1M"}, "lower -r"},
    };
    for (const Case& c : cases) {
        auto o = parse(c.test, c.args);
        ASSERT_FALSE(o.ok()) << c.says;
        EXPECT_EQ(o.code(), StatusCode::invalid_parameter);
        EXPECT_NE(o.error().message().find(c.says), std::string::npos)
            << "message: " << o.error().message();
    }
    // Within the budget: 2 x 8 MiB in flight.
    EXPECT_TRUE(parse(write_bw, {"--verify", "-s", "8M", "-t", "2", "host"}).ok());
}

TEST(PerfOptions, EalOptionsBeforeTheSeparator) {
    const std::vector<std::string> with{"--vdev=net_ring0", "-l", "1", "--", "-s", "64", "host"};
    const CommandLine line = split_command_line(with);
    EXPECT_TRUE(line.eal_given);
    EXPECT_EQ(line.eal_args.size(), 3U);
    EXPECT_EQ(line.perf_args, (std::vector<std::string>{"-s", "64", "host"}));
    const std::vector<std::string> without{"-s", "64"};
    const CommandLine plain = split_command_line(without);
    EXPECT_FALSE(plain.eal_given);
    EXPECT_EQ(plain.perf_args.size(), 2U);
}

} // namespace
} // namespace prdma::perf
