#include "report.hpp"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <vector>

#include <prdma/format.hpp>

namespace prdma::perf {

namespace {

// perftest drops the two largest samples (LAT_MEASURE_TAIL) before its statistics.
constexpr std::size_t measure_tail = 2;

const char* verb_title(Verb verb) {
    switch (verb) {
    case Verb::send:
        return "Send";
    case Verb::write:
        return "RDMA_Write";
    case Verb::read:
        return "RDMA_Read";
    case Verb::atomic:
        return "Atomic";
    }
    return "";
}

} // namespace

LatencyReport latency_report(std::span<const std::uint64_t> timestamps, double cycles_per_usec,
                             bool half_round_trip, std::uint64_t size) {
    LatencyReport r;
    r.size = size;
    r.iterations = timestamps.size();
    if (timestamps.size() < measure_tail + 3) {
        return r; // the option parser keeps -n at 5 or more
    }
    std::vector<std::uint64_t> delta(timestamps.size() - 1);
    for (std::size_t i = 0; i < delta.size(); ++i) {
        delta[i] = timestamps[i + 1] - timestamps[i];
    }
    std::sort(delta.begin(), delta.end());
    const std::size_t n = delta.size() - measure_tail;
    const double unit = cycles_per_usec * (half_round_trip ? 2.0 : 1.0);
    // perftest's median, in whole cycles: the mean of the middle two when n is even.
    const std::uint64_t median =
        (n - 1) % 2 != 0 ? (delta[n / 2] + delta[n / 2 - 1]) / 2 : delta[n / 2];
    r.t_min = static_cast<double>(delta[0]) / unit;
    r.t_max = static_cast<double>(delta[n]) / unit; // the largest sample kept
    r.t_typical = static_cast<double>(median) / unit;
    double sum = 0;
    for (std::size_t i = 0; i < n; ++i) {
        sum += static_cast<double>(delta[i]) / unit;
    }
    r.t_avg = sum / static_cast<double>(n);
    // The real standard deviation; perftest 6.06 truncates each difference to whole
    // microseconds, which reports 0 for everything faster than a microsecond.
    double squares = 0;
    for (std::size_t i = 0; i < n; ++i) {
        const double d = static_cast<double>(delta[i]) / unit - r.t_avg;
        squares += d * d;
    }
    r.t_stdev = std::sqrt(squares / static_cast<double>(n));
    const auto at = [&](double fraction) {
        const auto index = static_cast<std::size_t>(std::ceil(static_cast<double>(n) * fraction));
        return static_cast<double>(delta[std::min(index, delta.size() - 1)]) / unit;
    };
    r.p99 = at(0.99);
    r.p999 = at(0.999);
    return r;
}

LatencyReport duration_latency_report(std::uint64_t iterations, std::uint64_t cycles,
                                      double cycles_per_usec, bool half_round_trip,
                                      std::uint64_t size) {
    LatencyReport r;
    r.size = size;
    r.iterations = iterations;
    if (iterations == 0 || cycles == 0) {
        return r;
    }
    const double usec = static_cast<double>(cycles) / cycles_per_usec;
    r.t_avg = usec / (half_round_trip ? 2.0 : 1.0) / static_cast<double>(iterations);
    r.tps = static_cast<double>(iterations) / (usec / 1e6);
    return r;
}

BandwidthReport bandwidth_report(const BandwidthInput& in) {
    BandwidthReport r;
    r.size = in.size;
    r.iterations = in.iterations;
    if (in.iterations == 0 || in.posted.empty() || in.completed.size() < in.iterations) {
        return r;
    }
    const double format_factor = in.gbits ? 125000000.0 : 1048576.0; // Gb/s or MiB/s
    const std::uint64_t cycles = in.completed[in.iterations - 1] - in.posted[0];
    if (cycles == 0) {
        return r;
    }
    const double bytes = static_cast<double>(in.size) * static_cast<double>(in.iterations);
    r.bw_average = bytes * in.cycles_per_second / (static_cast<double>(cycles) * format_factor);
    r.msg_rate = static_cast<double>(in.iterations) * in.cycles_per_second /
                 (static_cast<double>(cycles) * 1e6);
    if (in.no_peak || in.iterations > 20000 || in.posted.size() < in.iterations) {
        return r;
    }
    // The best average time per WR over any run of WRs that ends on a signaled one.
    const std::uint64_t moderation = std::max<std::uint32_t>(in.cq_moderation, 1);
    std::uint64_t best = UINT64_MAX;
    for (std::uint64_t i = 0; i < in.iterations; ++i) {
        for (std::uint64_t j = (i + moderation) / moderation * moderation - 1; j < in.iterations;
             j += moderation) {
            const std::uint64_t t = (in.completed[j] - in.posted[i]) / (j - i + 1);
            best = std::min(best, t);
        }
    }
    if (best != 0 && best != UINT64_MAX) {
        r.bw_peak = static_cast<double>(in.size) * in.cycles_per_second /
                    (static_cast<double>(best) * format_factor);
    }
    return r;
}

std::string result_line() {
    return "---------------------------------------------------------------------------------------"
           "\n";
}

std::string test_info_block(const TestInfo& info) {
    std::string out = result_line();
    out += "                    ";
    out += strformat("%s ", verb_title(info.test.verb));
    if (info.test.verb == Verb::atomic) {
        out += info.atomic_type == AtomicType::cmp_and_swap ? "CMP_AND_SWAP " : "FETCH_AND_ADD ";
    }
    if (info.bidirectional) {
        out += "Bidirectional ";
    }
    if (info.post_list > 1) {
        out += "Post List ";
    }
    out += info.test.kind == Kind::bandwidth ? "BW " : "Latency ";
    out += "Test\n";
    out += strformat(" Dual-port       : %s\t\tDevice         : %s\n", "OFF", info.device.c_str());
    out += strformat(" Number of qps   : %u\t\tTransport type : %s\n", info.qps, "IB");
    out += strformat(" Connection type : %s\t\tUsing SRQ      : %s\n", info.ud ? "UD" : "RC",
                     info.use_srq ? "ON" : "OFF");
    out += strformat(" PCIe relax order: %s\n", "OFF");
    out += strformat(" ibv_wr* API     : %s\n", "OFF");
    if (info.client || info.bidirectional) {
        out += strformat(" TX depth        : %u\n", info.tx_depth);
    }
    if (info.post_list > 1) {
        out += strformat(" Post List       : %u\n", info.post_list);
    }
    if (info.test.verb == Verb::send && !info.client) {
        out += strformat(" RX depth        : %u\n", info.rx_depth);
    }
    if (info.test.kind == Kind::bandwidth) {
        out += strformat(" CQ Moderation   : %u\n", info.cq_moderation);
    }
    out += strformat(" Mtu             : %u[B]\n", rdma::mtu_bytes(info.mtu));
    out += strformat(" Link type       : %s\n", info.link_type.c_str());
    out += strformat(" GID index       : %d\n", info.gid_index);
    if (info.test.verb == Verb::read || info.test.verb == Verb::atomic) {
        out += strformat(" Outstand reads  : %u\n", info.out_reads);
    } else {
        out += strformat(" Max inline data : %u[B]\n", info.inline_size);
    }
    out += " rdma_cm QPs\t : OFF\n";
    out += " Data ex. method : Ethernet\n";
    out += result_line();
    return out;
}

std::string address_lines(bool local, const KeyMessage& keys, Verb verb) {
    std::string out = strformat(" %s address: LID %#04x QPN %#06x PSN %#06x",
                                local ? "local" : "remote", keys.lid, keys.qpn, keys.psn);
    if (verb == Verb::read) {
        out += strformat(" OUT %#04x", keys.out_reads);
    }
    if (verb == Verb::read || verb == Verb::write) {
        out += strformat(" RKey %#08x VAddr %#016" PRIx64, keys.rkey, keys.vaddr);
    }
    out += "\n";
    const auto& g = keys.gid.raw;
    out += strformat(" GID: %02d:%02d:%02d:%02d:%02d:%02d:%02d:%02d:%02d:%02d:%02d:%02d:%02d:%02d:"
                     "%02d:%02d\n",
                     g[0], g[1], g[2], g[3], g[4], g[5], g[6], g[7], g[8], g[9], g[10], g[11],
                     g[12], g[13], g[14], g[15]);
    return out;
}

std::string latency_table_header(bool duration) {
    std::string out = result_line();
    out += duration ? " #bytes        #iterations       t_avg[usec]    tps average"
                    : " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    "
                      "t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% "
                      "percentile[usec] ";
    out += "\n";
    return out;
}

std::string latency_row(const LatencyReport& r, bool duration) {
    const auto size = static_cast<unsigned long>(r.size);
    const auto iterations = static_cast<unsigned long>(r.iterations);
    if (duration) {
        return strformat(" %-7lu       %lu            %-7.2f        %-7.2f\n", size, iterations,
                         r.t_avg, r.tps);
    }
    return strformat(" %-7lu %lu          %-7.2f        %-7.2f      %-7.2f  \t       %-7.2f     "
                     "\t%-7.2f\t\t%-7.2f \t\t%-7.2f\n",
                     size, iterations, r.t_min, r.t_max, r.t_typical, r.t_avg, r.t_stdev, r.p99,
                     r.p999);
}

std::string bandwidth_table_header(bool gbits) {
    std::string out = result_line();
    out += gbits
               ? " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]"
               : " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]";
    out += "\n";
    return out;
}

std::string bandwidth_row(const BandwidthReport& r, bool gbits) {
    const auto size = static_cast<unsigned long>(r.size);
    const auto iterations = static_cast<unsigned long>(r.iterations);
    if (gbits && r.bw_average < 0.1) {
        return strformat(" %-7lu    %lu           %-7.6lf            %-7.6lf            %-7.6lf\n",
                         size, iterations, r.bw_peak, r.bw_average, r.msg_rate);
    }
    return strformat(" %-7lu    %-10lu       %-7.2lf            %-7.2lf\t\t   %-7.6lf\n", size,
                     iterations, r.bw_peak, r.bw_average, r.msg_rate);
}

std::string loss_line(const BandwidthReport& r) {
    const std::uint64_t lost = r.lost.value_or(0);
    return strformat(" Datagrams: %" PRIu64 " of %" PRIu64 " arrived, %" PRIu64
                     " lost (no receive was posted, or the path dropped them)\n",
                     r.iterations, r.iterations + lost, lost);
}

std::string verify_line(const VerifySummary& s) {
    if (s.messages == 0 && s.buffers == 0) {
        return " Data verification: nothing arrives on this side; the peer checks its data\n";
    }
    const std::string what =
        s.buffers != 0 ? strformat("%" PRIu64 " receive buffer(s) after the run", s.buffers)
                       : strformat("%" PRIu64 " messages", s.messages);
    if (s.failures == 0) {
        return strformat(" Data verified: %" PRIu64 " bytes in ", s.bytes) + what + ", no errors\n";
    }
    return strformat(" Data verification FAILED: %" PRIu64 " wrong of ", s.failures) + what +
           strformat(" (%" PRIu64 " bytes checked; details on stderr)\n", s.bytes);
}

std::string latency_samples(std::span<const std::uint64_t> timestamps, double cycles_per_usec,
                            bool half_round_trip, bool sorted) {
    std::string out = "#, usec\n";
    if (timestamps.size() < measure_tail + 3) {
        return out;
    }
    std::vector<std::uint64_t> delta(timestamps.size() - 1);
    for (std::size_t i = 0; i < delta.size(); ++i) {
        delta[i] = timestamps[i + 1] - timestamps[i];
    }
    if (sorted) {
        std::sort(delta.begin(), delta.end());
        delta.resize(delta.size() - measure_tail);
    }
    const double unit = cycles_per_usec * (half_round_trip ? 2.0 : 1.0);
    for (std::size_t i = 0; i < delta.size(); ++i) {
        out += strformat("%zu, %g\n", i + 1, static_cast<double>(delta[i]) / unit);
    }
    return out;
}

namespace {

// perftest's name for the test: "RDMA_Write_BW_Test", "Atomic_FETCH_AND_ADD_Latency_Test".
std::string json_test_name(const TestInfo& info) {
    std::string name = std::string(verb_title(info.test.verb)) + "_";
    if (info.test.verb == Verb::atomic) {
        name += info.atomic_type == AtomicType::cmp_and_swap ? "CMP_AND_SWAP_" : "FETCH_AND_ADD_";
    }
    if (info.bidirectional) {
        name += "Bidirectional_";
    }
    if (info.post_list > 1) {
        name += "Post_List_";
    }
    return name + (info.test.kind == Kind::bandwidth ? "BW_Test" : "Latency_Test");
}

std::string json_test_info(const TestInfo& info) {
    std::string out = "\"test_info\": {\n";
    out += strformat("\"test\": \"%s\",\n", json_test_name(info).c_str());
    out += strformat("\"Dual_port\": \"OFF\",\n\"Device\": \"%s\",\n\"Number_of_qps\": %u,\n",
                     info.device.c_str(), info.qps);
    out += "\"Transport_type\": \"IB\",\n\"Connection_type\": \"RC\",\n\"Using_SRQ\": \"OFF\",\n";
    out += "\"PCIe_relax_order\": \"OFF\",\n\"ibv_wr_API\": \"OFF\",\n";
    if (info.client || info.bidirectional) {
        out += strformat("\"TX_depth\": %u,\n", info.tx_depth);
    }
    if (info.post_list > 1) {
        out += strformat("\"Post_List\": %u,\n", info.post_list);
    }
    if (info.test.verb == Verb::send && (!info.client || info.bidirectional)) {
        out += strformat("\"RX_depth\": %u,\n", info.rx_depth);
    }
    if (info.test.kind == Kind::bandwidth) {
        out += strformat("\"CQ_Moderation\": %u,\n", info.cq_moderation);
    }
    out += strformat("\"Mtu\": %u,\n\"Link_type\": \"%s\",\n\"GID_index\": %d,\n",
                     rdma::mtu_bytes(info.mtu), info.link_type.c_str(), info.gid_index);
    if (info.test.verb == Verb::read || info.test.verb == Verb::atomic) {
        out += strformat("\"Outstand_reads\": %u,\n", info.out_reads);
    } else {
        out += strformat("\"Max_inline_data\": %u,\n", info.inline_size);
    }
    out += "\"rdma_cm_QPs\": \"OFF\",\n\"Data_ex_method\": \"Ethernet\"\n},\n";
    return out;
}

// The object around "results", closed after --verify's counts when there are any.
std::string json_object(const TestInfo& info, const std::string& results,
                        const std::optional<VerifySummary>& verify, bool one_line) {
    std::string out = "{\n" + json_test_info(info) + "\"results\": {\n" + results;
    if (verify) {
        out += strformat(",\n\"verified_bytes\": %" PRIu64 ",\n\"verified_messages\": %" PRIu64
                         ",\n\"verified_buffers\": %" PRIu64 ",\n\"verify_failures\": %" PRIu64,
                         verify->bytes, verify->messages, verify->buffers, verify->failures);
    }
    out += "\n}\n}\n";
    if (one_line) {
        std::erase(out, '\n');
        out += '\n';
    }
    return out;
}

} // namespace

std::string perftest_json(const TestInfo& info, const LatencyReport& r, bool duration,
                          const std::optional<VerifySummary>& verify, bool one_line) {
    const std::string head = strformat(
        "\"MsgSize\": %" PRIu64 ",\n\"n_iterations\": %" PRIu64 ",\n", r.size, r.iterations);
    const std::string results =
        duration ? strformat("\"t_avg\": %.2f,\n\"tps_average\": %.2f", r.t_avg, r.tps)
                 : strformat("\"t_min\": %.2f,\n\"t_max\": %.2f,\n\"t_typical\": %.2f,\n"
                             "\"t_avg\": %.2f,\n\"t_stdev\": %.2f,\n\"percentile_99\": %.2f,\n"
                             "\"percentile_99.9\": %.2f",
                             r.t_min, r.t_max, r.t_typical, r.t_avg, r.t_stdev, r.p99, r.p999);
    return json_object(info, head + results, verify, one_line);
}

std::string perftest_json(const TestInfo& info, const BandwidthReport& r, bool gbits,
                          const std::optional<VerifySummary>& verify, bool one_line) {
    // perftest's extended format for small Gb/s numbers, which two decimals would show as 0.
    const bool extended = gbits && r.bw_average < 0.1;
    const auto bw = [extended](double value) {
        return extended ? strformat("%.6f", value) : strformat("%.2f", value);
    };
    const std::string results =
        strformat("\"MsgSize\": %" PRIu64 ",\n\"n_iterations\": %" PRIu64 ",\n", r.size,
                  r.iterations) +
        "\"BW_peak\": " + bw(r.bw_peak) + ",\n\"BW_average\": " + bw(r.bw_average) +
        strformat(",\n\"MsgRate\": %.6f", r.msg_rate) +
        (r.lost ? strformat(",\n\"lost\": %" PRIu64, *r.lost) : std::string());
    return json_object(info, results, verify, one_line);
}

} // namespace prdma::perf
