// perftest's statistics and tables from known timestamps.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "report.hpp"

namespace prdma::perf {
namespace {

// Timestamps whose consecutive differences are `deltas` (in cycles).
std::vector<std::uint64_t> stamps(const std::vector<std::uint64_t>& deltas) {
    std::vector<std::uint64_t> out{1000};
    for (const std::uint64_t d : deltas) {
        out.push_back(out.back() + d);
    }
    return out;
}

TEST(PerfReport, LatencyIsHalfTheRoundTripForWrites) {
    // 1000 cycles per microsecond; deltas 2..11 us plus two outliers perftest drops.
    std::vector<std::uint64_t> deltas;
    for (std::uint64_t us = 2; us <= 11; ++us) {
        deltas.push_back(us * 1000);
    }
    deltas.push_back(500'000);
    deltas.push_back(900'000);
    const auto ts = stamps(deltas);
    const LatencyReport write = latency_report(ts, 1000.0, true, 8);
    EXPECT_EQ(write.iterations, ts.size());
    EXPECT_DOUBLE_EQ(write.t_min, 1.0);   // 2 us round trip / 2
    EXPECT_DOUBLE_EQ(write.t_max, 250.0); // the largest kept: the smaller outlier, halved
    // n = 10 kept samples: 2..11 us; the median of an even count is the mean of the middle two.
    EXPECT_DOUBLE_EQ(write.t_typical, 3.25); // (6 + 7) / 2 / 2
    EXPECT_DOUBLE_EQ(write.t_avg, 3.25);
    const LatencyReport read = latency_report(ts, 1000.0, false, 8);
    EXPECT_DOUBLE_EQ(read.t_min, 2.0);
    EXPECT_DOUBLE_EQ(read.t_typical, 6.5);
    EXPECT_GT(read.t_stdev, 2.8);
    EXPECT_LT(read.t_stdev, 2.9); // population stdev of 2..11
}

TEST(PerfReport, PercentilesComeFromTheSortedSamples) {
    std::vector<std::uint64_t> deltas;
    for (std::uint64_t i = 1; i <= 1002; ++i) {
        deltas.push_back(i * 10);
    }
    const LatencyReport r = latency_report(stamps(deltas), 10.0, false, 2);
    EXPECT_DOUBLE_EQ(r.t_min, 1.0);
    EXPECT_DOUBLE_EQ(r.p99, 991.0);    // delta[ceil(1000 * 0.99)] = delta[990]
    EXPECT_DOUBLE_EQ(r.p999, 1000.0);  // delta[999]
    EXPECT_DOUBLE_EQ(r.t_max, 1001.0); // delta[1000], the two largest dropped
}

TEST(PerfReport, BandwidthAverageAndPeak) {
    // 100 WRs of 1 MiB, one posted every 1000 cycles, each completing 500 cycles later, on a
    // 1 GHz clock: 1 MiB per microsecond on average.
    std::vector<std::uint64_t> posted, completed;
    for (std::uint64_t i = 0; i < 100; ++i) {
        posted.push_back(i * 1000);
        completed.push_back(i * 1000 + 500);
    }
    BandwidthInput in;
    in.posted = posted;
    in.completed = completed;
    in.iterations = 100;
    in.cycles_per_second = 1e9;
    in.size = 1 << 20;
    in.cq_moderation = 1;
    const BandwidthReport r = bandwidth_report(in);
    const double cycles = 99 * 1000 + 500;
    EXPECT_NEAR(r.bw_average, 100.0 * 1e9 / cycles, 1e-6); // MiB/s
    EXPECT_NEAR(r.msg_rate, 100.0 * 1e9 / cycles / 1e6, 1e-9);
    EXPECT_NEAR(r.bw_peak, 1e9 / 500, 1e-6); // the best single WR: 500 cycles
    in.gbits = true;
    const BandwidthReport g = bandwidth_report(in);
    EXPECT_NEAR(g.bw_average, r.bw_average * 1048576.0 / 125e6, 1e-6);
    in.no_peak = true;
    EXPECT_EQ(bandwidth_report(in).bw_peak, 0.0);
}

TEST(PerfReport, TablesArePerftests) {
    EXPECT_EQ(
        latency_table_header(false),
        result_line() +
            " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    "
            "t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] \n");
    LatencyReport l;
    l.size = 2;
    l.iterations = 1000;
    l.t_min = 0.71;
    l.t_max = 3.2;
    l.t_typical = 0.75;
    l.t_avg = 0.76;
    l.t_stdev = 0.05;
    l.p99 = 0.9;
    l.p999 = 2.5;
    EXPECT_EQ(latency_row(l, false),
              " 2       1000          0.71           3.20         0.75     \t       0.76        "
              "\t0.05   \t\t0.90    \t\t2.50   \n");
    EXPECT_EQ(bandwidth_table_header(false),
              result_line() + " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   "
                              "MsgRate[Mpps]\n");
    BandwidthReport b;
    b.size = 65536;
    b.iterations = 5000;
    b.bw_peak = 2345.67;
    b.bw_average = 2300.5;
    b.msg_rate = 0.036808;
    EXPECT_EQ(bandwidth_row(b, false),
              " 65536      5000             2345.67            2300.50\t\t   0.036808\n");
    EXPECT_EQ(result_line().size(), 88U); // 87 dashes and the newline
}

TEST(PerfReport, AddressLinesAsPerftestPrintsThem) {
    KeyMessage k;
    k.qpn = 0x11;
    k.psn = 0x1234;
    k.rkey = 0x5678;
    k.vaddr = 0x7f0000001000;
    k.out_reads = 16;
    k.gid = rdma::Gid::from_ipv4(0x0a000001);
    EXPECT_EQ(address_lines(true, k, Verb::write),
              " local address: LID 0000 QPN 0x0011 PSN 0x1234 RKey 0x005678 VAddr "
              "0x007f0000001000\n"
              " GID: 00:00:00:00:00:00:00:00:00:00:255:255:10:00:00:01\n");
    EXPECT_EQ(address_lines(false, k, Verb::send)
                  .rfind(" remote address: LID 0000 QPN 0x0011 PSN 0x1234\n GID: 00", 0),
              0U); // SEND: no RKey/VAddr
    EXPECT_NE(address_lines(false, k, Verb::read).find(" OUT 0x10 RKey"), std::string::npos);
}

TEST(PerfReport, TestInfoNamesTheTest) {
    TestInfo info;
    info.test = TestId{Verb::atomic, Kind::bandwidth};
    info.device = "rdma_swroce0";
    info.atomic_type = AtomicType::cmp_and_swap;
    const std::string block = test_info_block(info);
    EXPECT_NE(block.find("                    Atomic CMP_AND_SWAP BW Test\n"), std::string::npos);
    EXPECT_NE(block.find(" Dual-port       : OFF\t\tDevice         : rdma_swroce0\n"),
              std::string::npos);
    EXPECT_NE(block.find(" Outstand reads  : 16\n"), std::string::npos);
    EXPECT_NE(block.find(" Mtu             : 1024[B]\n"), std::string::npos);
    EXPECT_NE(block.find(" rdma_cm QPs\t : OFF\n Data ex. method : Ethernet\n"), std::string::npos);
}

TEST(PerfReport, OutJsonHasPerftestsLayoutAndNames) {
    TestInfo info;
    info.test = TestId{Verb::write, Kind::latency};
    info.device = "rdma_swroce0";
    info.inline_size = 220;
    LatencyReport l;
    l.size = 8;
    l.iterations = 1000;
    l.t_min = 0.5;
    l.t_typical = 0.8;
    l.p999 = 3.25;
    const std::string j = perftest_json(info, l, false, std::nullopt, false);
    EXPECT_TRUE(j.starts_with("{\n\"test_info\": {\n\"test\": \"RDMA_Write_Latency_Test\",\n"))
        << j;
    EXPECT_NE(j.find("\"Device\": \"rdma_swroce0\",\n\"Number_of_qps\": 1,\n"), std::string::npos);
    EXPECT_NE(j.find("\"TX_depth\": 1,\n"), std::string::npos);
    EXPECT_EQ(j.find("CQ_Moderation"), std::string::npos); // bandwidth tests only
    EXPECT_NE(j.find("\"Max_inline_data\": 220,\n"), std::string::npos);
    EXPECT_NE(j.find("\"Data_ex_method\": \"Ethernet\"\n},\n\"results\": {\n\"MsgSize\": 8,\n"
                     "\"n_iterations\": 1000,\n\"t_min\": 0.50,\n"),
              std::string::npos)
        << j;
    EXPECT_NE(j.find("\"t_typical\": 0.80,\n"), std::string::npos);
    EXPECT_TRUE(j.ends_with("\"percentile_99.9\": 3.25\n}\n}\n")) << j;
    EXPECT_EQ(j.find("verified"), std::string::npos); // no --verify, no fields

    const std::string line = perftest_json(info, l, true, std::nullopt, true);
    EXPECT_EQ(std::count(line.begin(), line.end(), '\n'), 1);
    EXPECT_NE(line.find("\"t_avg\": 0.00,\"tps_average\": 0.00}}"), std::string::npos) << line;

    info.test = TestId{Verb::atomic, Kind::bandwidth};
    info.bidirectional = true;
    info.post_list = 4;
    info.client = false;
    BandwidthReport b;
    b.size = 8;
    b.bw_average = 0.05;
    const std::string bw = perftest_json(info, b, true, std::nullopt, false);
    EXPECT_NE(bw.find("\"Atomic_FETCH_AND_ADD_Bidirectional_Post_List_BW_Test\""),
              std::string::npos)
        << bw;
    EXPECT_NE(bw.find("\"TX_depth\": 1,\n\"Post_List\": 4,\n\"CQ_Moderation\": 1,\n"),
              std::string::npos)
        << bw;
    EXPECT_NE(bw.find("\"Outstand_reads\": 16,\n"), std::string::npos);
    EXPECT_NE(bw.find("\"BW_peak\": 0.000000,\n\"BW_average\": 0.050000,\n\"MsgRate\": 0.000000\n"),
              std::string::npos)
        << bw;
}

TEST(PerfReport, SampleListsAsPerftestsUAndH) {
    // Deltas 30, 10, 20, 50, 40 cycles at 10 cycles/us, whole round trips.
    const std::vector<std::uint64_t> stamps{0, 30, 40, 60, 110, 150};
    EXPECT_EQ(latency_samples(stamps, 10, false, false), "#, usec\n1, 3\n2, 1\n3, 2\n4, 5\n5, 4\n");
    // Sorted, the largest two dropped, as the statistics see them.
    EXPECT_EQ(latency_samples(stamps, 10, false, true), "#, usec\n1, 1\n2, 2\n3, 3\n");
    EXPECT_EQ(latency_samples(stamps, 10, true, true), "#, usec\n1, 0.5\n2, 1\n3, 1.5\n");
}

TEST(PerfReport, VerifyLineAndJsonFields) {
    VerifySummary checked;
    checked.bytes = 6300;
    checked.messages = 100;
    EXPECT_EQ(verify_line(checked), " Data verified: 6300 bytes in 100 messages, no errors\n");
    checked.failures = 2;
    EXPECT_EQ(verify_line(checked), " Data verification FAILED: 2 wrong of 100 messages (6300 "
                                    "bytes checked; details on stderr)\n");
    VerifySummary end;
    end.bytes = 4096;
    end.buffers = 1;
    EXPECT_EQ(verify_line(end),
              " Data verified: 4096 bytes in 1 receive buffer(s) after the run, no errors\n");
    EXPECT_NE(verify_line(VerifySummary{}).find("the peer checks"), std::string::npos);
    BandwidthReport b;
    b.size = 64;
    TestInfo info;
    info.test = TestId{Verb::send, Kind::bandwidth};
    const std::string j = perftest_json(info, b, false, checked, true);
    EXPECT_NE(j.find("\"MsgRate\": 0.000000,\"verified_bytes\": 6300,\"verified_messages\": 100,"
                     "\"verified_buffers\": 0,\"verify_failures\": 2}}\n"),
              std::string::npos)
        << j;
    info.test = TestId{Verb::write, Kind::latency};
    const std::string l = perftest_json(info, LatencyReport{}, false, end, true);
    EXPECT_NE(l.find("\"verified_buffers\": 1"), std::string::npos) << l;
}

} // namespace
} // namespace prdma::perf
