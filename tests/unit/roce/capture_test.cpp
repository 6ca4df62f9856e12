// Every frame of every reference capture (tests/data/roce-pcaps, Linux rxe): parsed field by field,
// counted against INDEX.txt, its ICRC recomputed on both CRC paths, rebuilt byte for byte from
// the parsed fields, mutated (every covered byte must break the ICRC, every masked one must not)
// and truncated at every length.
#include <algorithm>
#include <cstdint>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <prdma/roce/headers.hpp>
#include <prdma/roce/icrc.hpp>
#include <prdma/roce/opcodes.hpp>
#include <prdma/roce/packet.hpp>
#include <prdma/roce/psn.hpp>

#include "captures.hpp"

namespace prdma::roce {
namespace {

using Bytes = std::vector<std::uint8_t>;

struct Frame {
    std::string file;
    std::size_t number; // 1-based, as tshark numbers them
    const Bytes* data;
    ParsedFrame parsed;
};

std::vector<Frame> parse_file(const captures::Capture& capture) {
    std::vector<Frame> frames;
    std::size_t number = 0;
    for (const pcap::Record& record : capture.file.records) {
        Frame f{capture.name, ++number, &record.data, {}};
        parse_roce_frame(record.data, f.parsed);
        frames.push_back(f);
    }
    return frames;
}

std::vector<Frame> parse_named(const std::string& name) {
    const captures::Capture* capture = captures::find(name);
    if (capture == nullptr) {
        ADD_FAILURE() << "capture " << name << " missing: " << captures::all().error;
        return {};
    }
    std::vector<Frame> frames = parse_file(*capture);
    for (const Frame& f : frames) {
        EXPECT_TRUE(f.parsed.ok())
            << name << " frame " << f.number << ": " << parse_error_name(f.parsed.error);
    }
    return frames;
}

std::vector<const Frame*> with_opcode(const std::vector<Frame>& frames, Opcode opcode) {
    std::vector<const Frame*> out;
    for (const Frame& f : frames) {
        if (f.parsed.opcode() == opcode) {
            out.push_back(&f);
        }
    }
    return out;
}

// CM MAD attribute names (IBTA 12.6), as INDEX.txt (tshark) prints them.
std::string cm_attribute_name(std::uint16_t id) {
    switch (id) {
    case 0x0010:
        return "ConnectRequest";
    case 0x0011:
        return "MsgRcptAck";
    case 0x0012:
        return "ConnectReject";
    case 0x0013:
        return "ConnectReply";
    case 0x0014:
        return "ReadyToUse";
    case 0x0015:
        return "DisconnectRequest";
    case 0x0016:
        return "DisconnectReply";
    default:
        return "attribute " + std::to_string(id);
    }
}

constexpr std::uint8_t mad_class_cm = 0x07;

// What INDEX.txt calls a frame: the opcode in tshark's words, or "CM: <attribute>" for a CM MAD
// on QP1. The library treats the MAD as opaque payload; only this test looks inside.
std::string index_name(const ParsedFrame& p) {
    if (p.opcode() == Opcode::ud_send_only && p.bth.dest_qp == 1 && p.payload.size() >= 24 &&
        p.payload[1] == mad_class_cm) {
        return "CM: " + cm_attribute_name(load_be16(p.payload.data() + 16));
    }
    static const std::map<Opcode, std::string> names = {
        {Opcode::rc_send_first, "RC Send First"},
        {Opcode::rc_send_middle, "RC Send Middle"},
        {Opcode::rc_send_last, "RC Send Last"},
        {Opcode::rc_send_only, "RC Send Only"},
        {Opcode::rc_rdma_write_first, "RC RDMA Write First"},
        {Opcode::rc_rdma_write_middle, "RC RDMA Write Middle"},
        {Opcode::rc_rdma_write_last, "RC RDMA Write Last"},
        {Opcode::rc_rdma_write_only, "RC RDMA Write Only"},
        {Opcode::rc_rdma_read_request, "RC RDMA Read Request"},
        {Opcode::rc_rdma_read_response_first, "RC RDMA Read Response First"},
        {Opcode::rc_rdma_read_response_middle, "RC RDMA Read Response Middle"},
        {Opcode::rc_rdma_read_response_last, "RC RDMA Read Response Last"},
        {Opcode::rc_rdma_read_response_only, "RC RDMA Read Response Only"},
        {Opcode::rc_acknowledge, "RC Acknowledge"},
        {Opcode::rc_atomic_acknowledge, "RC Atomic Acknowledge"},
        {Opcode::rc_compare_swap, "RC Compare Swap"},
        {Opcode::rc_fetch_add, "RC Fetch Add"},
        {Opcode::ud_send_only, "UD Send Only"},
    };
    const auto it = names.find(p.opcode());
    return it == names.end() ? std::string(opcode_name(p.opcode())) : it->second;
}

class CaptureTest : public ::testing::Test {
protected:
    void SetUp() override { ASSERT_TRUE(captures::all().error.empty()) << captures::all().error; }
};

TEST_F(CaptureTest, AllTenFilesLoadCompletely) {
    const auto& all = captures::all().captures;
    std::set<std::string> names;
    for (const auto& c : all) {
        names.insert(c.name);
        EXPECT_EQ(c.file.linktype, pcap::linktype_ethernet) << c.name;
        for (const auto& r : c.file.records) {
            EXPECT_EQ(r.data.size(), r.original_length) << c.name << ": a frame was cut by snaplen";
        }
    }
    const std::set<std::string> expected = {
        "atomic_cmp_swap", "atomic_fetch_add", "rc_send_pingpong", "read_lat_4096", "read_lat_64",
        "rping_cm",        "send_lat_64",      "ud_send_pingpong", "write_bw_4096", "write_lat_64",
    };
    EXPECT_EQ(names, expected);
}

TEST_F(CaptureTest, EveryFrameParsesAndOpcodeCountsMatchIndex) {
    const auto index = captures::read_index();
    ASSERT_EQ(index.size(), captures::all().captures.size()) << "INDEX.txt lists every file";
    std::size_t total = 0;
    for (const auto& capture : captures::all().captures) {
        SCOPED_TRACE(capture.name);
        const auto it = index.find(capture.name);
        ASSERT_NE(it, index.end()) << "not in INDEX.txt";
        std::map<std::string, std::size_t> counts;
        for (const Frame& f : parse_file(capture)) {
            ASSERT_TRUE(f.parsed.ok())
                << "frame " << f.number << ": " << parse_error_name(f.parsed.error);
            ++counts[index_name(f.parsed)];
            ++total;
        }
        EXPECT_EQ(capture.file.records.size(), it->second.frames);
        EXPECT_EQ(counts, it->second.counts);
    }
    EXPECT_EQ(total, 198U);
}

TEST_F(CaptureTest, FieldsEveryRxeFrameShares) {
    for (const auto& capture : captures::all().captures) {
        for (const Frame& f : parse_file(capture)) {
            SCOPED_TRACE(capture.name + " frame " + std::to_string(f.number));
            const ParsedFrame& p = f.parsed;
            ASSERT_TRUE(p.ok());
            EXPECT_FALSE(p.eth.vlan);
            EXPECT_EQ(p.ip_version, IpVersion::ipv4);
            EXPECT_EQ(p.ipv4.header_length, ipv4_header_size);
            EXPECT_EQ(p.ipv4.ttl, 64);
            EXPECT_EQ(p.ipv4.tos, 0);
            EXPECT_TRUE(p.ipv4.dont_fragment);
            EXPECT_EQ(p.ipv4.total_length, f.data->size() - ethernet_header_size)
                << "no Ethernet padding in these captures";
            EXPECT_EQ(p.udp.dst_port, roce_udp_port);
            EXPECT_EQ(p.udp.checksum, 0) << "rxe sends UDP checksum 0";
            EXPECT_GE(p.udp.src_port, 0xc000) << "rxe picks source ports from the dynamic range";
            EXPECT_EQ(p.bth.tver, 0);
            EXPECT_EQ(p.bth.pkey, default_pkey);
            EXPECT_FALSE(p.bth.fecn);
            EXPECT_FALSE(p.bth.becn);
            EXPECT_FALSE(p.bth.migreq);
            EXPECT_FALSE(p.bth.solicited);
            EXPECT_EQ(p.bth.pad_count, 0) << "every captured payload is a multiple of 4";
            EXPECT_EQ(p.payload_offset, p.bth_offset + p.info->header_length);
            EXPECT_EQ(p.payload.data(), f.data->data() + p.payload_offset);
            EXPECT_EQ(p.ip_datagram.size(), f.data->size() - ethernet_header_size);
            if (p.has(ExtHeader::aeth)) {
                EXPECT_EQ(p.aeth.syndrome, ack_syndrome(aeth_credits_invalid))
                    << "rxe ACKs carry credit count 31 (no end-to-end credits)";
                EXPECT_EQ(classify_aeth(p.aeth.syndrome), AethClass::ack);
            }
        }
    }
}

TEST_F(CaptureTest, IcrcOfEveryFrameOnBothPaths) {
    for (const auto& capture : captures::all().captures) {
        for (const Frame& f : parse_file(capture)) {
            SCOPED_TRACE(capture.name + " frame " + std::to_string(f.number));
            const auto datagram = f.parsed.ip_datagram;
            const std::uint32_t carried = stored_icrc(datagram);
            EXPECT_EQ(f.parsed.icrc, carried);
            EXPECT_EQ(compute_icrc(datagram, CrcPath::table), carried);
            EXPECT_EQ(compute_icrc(datagram, CrcPath::pclmul), carried);
            EXPECT_EQ(compute_icrc(datagram), carried);
            EXPECT_TRUE(verify_icrc(datagram, CrcPath::table));
            EXPECT_TRUE(verify_icrc(datagram, CrcPath::pclmul));
            // Little-endian on the wire: the first trailer byte is the CRC's low byte (tshark
            // shows the four bytes as a big-endian number, i.e. byte-swapped).
            EXPECT_EQ((*f.data)[f.data->size() - 4], carried & 0xffU);
        }
    }
}

TEST_F(CaptureTest, EveryFrameRebuildsByteForByte) {
    for (const auto& capture : captures::all().captures) {
        for (const Frame& f : parse_file(capture)) {
            SCOPED_TRACE(capture.name + " frame " + std::to_string(f.number));
            const FrameHeaders headers = frame_headers_of(f.parsed);
            Bytes out(f.data->size() + 64, 0xee);
            const FrameLayout layout = build_frame(headers, f.parsed.payload, out);
            ASSERT_TRUE(layout.ok()) << build_error_name(layout.error);
            ASSERT_EQ(layout.frame_length, f.data->size());
            EXPECT_EQ(layout.wire_length, f.data->size());
            EXPECT_EQ(layout.payload_offset, f.parsed.payload_offset);
            out.resize(layout.frame_length);
            EXPECT_EQ(out, *f.data);

            // The two-step form the engine uses: headers, payload gathered in, finalize.
            Bytes two_step(f.data->size(), 0);
            const FrameLayout l2 = build_frame_headers(
                headers, static_cast<std::uint32_t>(f.parsed.payload.size()), two_step);
            ASSERT_TRUE(l2.ok());
            std::copy(f.parsed.payload.begin(), f.parsed.payload.end(),
                      two_step.begin() + l2.payload_offset);
            ASSERT_TRUE(finalize_frame(two_step, l2, CrcPath::table));
            EXPECT_EQ(two_step, *f.data);
        }
    }
}

TEST_F(CaptureTest, WriteBw4096) {
    const auto frames = parse_named("write_bw_4096");
    const auto firsts = with_opcode(frames, Opcode::rc_rdma_write_first);
    ASSERT_EQ(firsts.size(), 8U);
    // Each 4096-byte message: FIRST (RETH) + MIDDLE + MIDDLE + LAST, PSNs in a row, 1024 each.
    std::vector<const Frame*> requests;
    for (const Frame& f : frames) {
        if (f.parsed.info->is_request()) {
            requests.push_back(&f);
        }
    }
    ASSERT_EQ(requests.size(), 32U);
    const Psn first_psn = requests[0]->parsed.bth.psn;
    for (std::size_t i = 0; i < requests.size(); ++i) {
        const ParsedFrame& p = requests[i]->parsed;
        SCOPED_TRACE("request " + std::to_string(i));
        const Opcode expected[] = {Opcode::rc_rdma_write_first, Opcode::rc_rdma_write_middle,
                                   Opcode::rc_rdma_write_middle, Opcode::rc_rdma_write_last};
        EXPECT_EQ(p.opcode(), expected[i % 4]);
        EXPECT_EQ(p.bth.psn, psn_add(first_psn, static_cast<std::uint32_t>(i)));
        EXPECT_EQ(p.payload.size(), 1024U);
        EXPECT_EQ(p.bth.ack_req, i % 4 == 3) << "AckReq on the last packet of each message";
        if (i % 4 == 0) {
            ASSERT_TRUE(p.has(ExtHeader::reth));
            EXPECT_EQ(p.reth.dma_length, 4096U);
            EXPECT_EQ(p.reth.va, 0x000055d1ef8dd000U);
            EXPECT_EQ(p.reth.rkey, 0x6c4U);
            EXPECT_EQ(p.info->header_length, bth_size + reth_size);
        } else {
            EXPECT_FALSE(p.has(ExtHeader::reth));
        }
        EXPECT_EQ(packets_for(4096, 1024), 4U);
    }
    const auto acks = with_opcode(frames, Opcode::rc_acknowledge);
    ASSERT_EQ(acks.size(), 8U);
    for (std::size_t i = 0; i < acks.size(); ++i) {
        const ParsedFrame& p = acks[i]->parsed;
        EXPECT_EQ(p.aeth.msn, i + 1) << "one completed message per ACK";
        EXPECT_EQ(p.bth.psn, psn_add(first_psn, static_cast<std::uint32_t>(4 * i + 3)))
            << "each ACK acknowledges its message's LAST";
        EXPECT_TRUE(p.payload.empty());
    }
}

TEST_F(CaptureTest, ReadLat64) {
    const auto frames = parse_named("read_lat_64");
    ASSERT_EQ(frames.size(), 10U);
    for (std::size_t i = 0; i < frames.size(); i += 2) {
        const ParsedFrame& request = frames[i].parsed;
        const ParsedFrame& response = frames[i + 1].parsed;
        ASSERT_EQ(request.opcode(), Opcode::rc_rdma_read_request);
        EXPECT_EQ(request.reth.dma_length, 64U);
        EXPECT_EQ(request.reth.va, 0x000055651a0b6000U);
        EXPECT_EQ(request.reth.rkey, 0x758U);
        EXPECT_TRUE(request.payload.empty());
        EXPECT_TRUE(request.bth.ack_req);
        ASSERT_EQ(response.opcode(), Opcode::rc_rdma_read_response_only);
        EXPECT_EQ(response.payload.size(), 64U);
        EXPECT_EQ(response.bth.psn, request.bth.psn) << "the response carries the request's PSN";
        EXPECT_EQ(response.aeth.msn, i / 2 + 1);
        EXPECT_EQ(response.info->header_length, bth_size + aeth_size);
    }
}

TEST_F(CaptureTest, ReadLat4096) {
    const auto frames = parse_named("read_lat_4096");
    ASSERT_EQ(frames.size(), 25U);
    for (std::size_t i = 0; i < frames.size(); i += 5) {
        const ParsedFrame& request = frames[i].parsed;
        ASSERT_EQ(request.opcode(), Opcode::rc_rdma_read_request);
        EXPECT_EQ(request.reth.dma_length, 4096U);
        const Opcode expected[] = {
            Opcode::rc_rdma_read_response_first, Opcode::rc_rdma_read_response_middle,
            Opcode::rc_rdma_read_response_middle, Opcode::rc_rdma_read_response_last};
        for (std::size_t k = 0; k < 4; ++k) {
            const ParsedFrame& r = frames[i + 1 + k].parsed;
            EXPECT_EQ(r.opcode(), expected[k]);
            EXPECT_EQ(r.bth.psn, psn_add(request.bth.psn, static_cast<std::uint32_t>(k)));
            EXPECT_EQ(r.payload.size(), 1024U);
            EXPECT_EQ(r.has(ExtHeader::aeth), k == 0 || k == 3) << "AETH on FIRST and LAST only";
        }
        if (i + 5 < frames.size()) {
            EXPECT_EQ(frames[i + 5].parsed.bth.psn, psn_add(request.bth.psn, 4))
                << "a READ request uses one PSN per response packet";
        }
    }
}

TEST_F(CaptureTest, AtomicFetchAdd) {
    const auto frames = parse_named("atomic_fetch_add");
    ASSERT_EQ(frames.size(), 10U);
    std::uint64_t first_original = 0;
    for (std::size_t i = 0; i < frames.size(); i += 2) {
        const ParsedFrame& request = frames[i].parsed;
        const ParsedFrame& ack = frames[i + 1].parsed;
        ASSERT_EQ(request.opcode(), Opcode::rc_fetch_add);
        EXPECT_EQ(request.info->header_length, bth_size + atomic_eth_size);
        EXPECT_EQ(request.atomic_eth.va, 0x000055c61113d000U);
        EXPECT_EQ(request.atomic_eth.rkey, 0x954U);
        EXPECT_EQ(request.atomic_eth.swap_add, 1U) << "ib_atomic_lat adds 1";
        EXPECT_EQ(request.atomic_eth.compare, 0U);
        EXPECT_TRUE(request.payload.empty());
        ASSERT_EQ(ack.opcode(), Opcode::rc_atomic_acknowledge);
        EXPECT_EQ(ack.info->header_length, bth_size + aeth_size + atomic_ack_eth_size);
        EXPECT_EQ(ack.bth.psn, request.bth.psn);
        EXPECT_EQ(ack.aeth.msn, i / 2 + 1);
        if (i == 0) {
            first_original = ack.atomic_ack_eth.original_data;
            EXPECT_EQ(first_original, 0x3df67fe70f7c5aebU);
        }
        EXPECT_EQ(ack.atomic_ack_eth.original_data, first_original + i / 2)
            << "each fetch-add returns the previous value, one higher every time";
    }
}

TEST_F(CaptureTest, AtomicCompareSwap) {
    const auto frames = parse_named("atomic_cmp_swap");
    ASSERT_EQ(frames.size(), 10U);
    for (std::size_t i = 0; i < frames.size(); i += 2) {
        const ParsedFrame& request = frames[i].parsed;
        const ParsedFrame& ack = frames[i + 1].parsed;
        ASSERT_EQ(request.opcode(), Opcode::rc_compare_swap);
        EXPECT_EQ(request.atomic_eth.va, 0x00005598139a1000U);
        EXPECT_EQ(request.atomic_eth.rkey, 0xa74U);
        EXPECT_EQ(request.atomic_eth.swap_add, 0U);
        EXPECT_EQ(request.atomic_eth.compare, 0U);
        ASSERT_EQ(ack.opcode(), Opcode::rc_atomic_acknowledge);
        EXPECT_EQ(ack.bth.psn, request.bth.psn);
        // The target never held the compare value (0), so nothing was swapped and every ACK
        // returns the same original data.
        EXPECT_EQ(ack.atomic_ack_eth.original_data, 0xc7ddb52b14c4d4cfU);
    }
}

TEST_F(CaptureTest, RcSendPingpong2500BytesAtMtu1024) {
    const auto frames = parse_named("rc_send_pingpong");
    ASSERT_EQ(frames.size(), 24U);
    for (std::size_t i = 0; i < frames.size(); i += 4) {
        const ParsedFrame& first = frames[i].parsed;
        const ParsedFrame& middle = frames[i + 1].parsed;
        const ParsedFrame& last = frames[i + 2].parsed;
        const ParsedFrame& ack = frames[i + 3].parsed;
        ASSERT_EQ(first.opcode(), Opcode::rc_send_first);
        ASSERT_EQ(middle.opcode(), Opcode::rc_send_middle);
        ASSERT_EQ(last.opcode(), Opcode::rc_send_last);
        ASSERT_EQ(ack.opcode(), Opcode::rc_acknowledge);
        EXPECT_EQ(first.payload.size(), 1024U);
        EXPECT_EQ(middle.payload.size(), 1024U);
        EXPECT_EQ(last.payload.size(), 452U);
        EXPECT_EQ(first.payload.size() + middle.payload.size() + last.payload.size(), 2500U);
        EXPECT_EQ(packets_for(2500, mtu_bytes(PathMtu::mtu1024)), 3U);
        EXPECT_EQ(middle.bth.psn, psn_next(first.bth.psn));
        EXPECT_EQ(last.bth.psn, psn_next(middle.bth.psn));
        EXPECT_FALSE(first.bth.ack_req);
        EXPECT_FALSE(middle.bth.ack_req);
        EXPECT_TRUE(last.bth.ack_req);
        EXPECT_EQ(ack.bth.psn, last.bth.psn);
        for (const ParsedFrame* p : {&first, &middle, &last}) {
            EXPECT_TRUE(std::all_of(p->payload.begin(), p->payload.end(), [](std::uint8_t b) {
                return b == 0x7b;
            })) << "ibv_rc_pingpong fills its buffer with 0x7b";
        }
    }
}

TEST_F(CaptureTest, SendAndWriteLat64) {
    for (const Frame& f : parse_named("send_lat_64")) {
        const ParsedFrame& p = f.parsed;
        if (p.opcode() == Opcode::rc_send_only) {
            EXPECT_EQ(p.payload.size(), 64U);
            EXPECT_TRUE(p.bth.ack_req);
            EXPECT_EQ(p.info->header_length, bth_size);
        } else {
            EXPECT_EQ(p.opcode(), Opcode::rc_acknowledge);
        }
    }
    for (const Frame& f : parse_named("write_lat_64")) {
        const ParsedFrame& p = f.parsed;
        if (p.opcode() == Opcode::rc_rdma_write_only) {
            EXPECT_EQ(p.payload.size(), 64U);
            EXPECT_EQ(p.reth.dma_length, 64U);
            EXPECT_TRUE(p.bth.ack_req);
        } else {
            EXPECT_EQ(p.opcode(), Opcode::rc_acknowledge);
        }
    }
}

TEST_F(CaptureTest, UdSendPingpong) {
    const auto frames = parse_named("ud_send_pingpong");
    ASSERT_EQ(frames.size(), 6U);
    for (const Frame& f : frames) {
        const ParsedFrame& p = f.parsed;
        EXPECT_EQ(p.opcode(), Opcode::ud_send_only);
        EXPECT_EQ(p.info->transport, Transport::ud);
        ASSERT_TRUE(p.has(ExtHeader::deth));
        EXPECT_EQ(p.deth.qkey, 0x11111111U) << "ibv_ud_pingpong's Q_Key";
        EXPECT_EQ(p.deth.src_qp, 0x12U);
        EXPECT_EQ(p.bth.dest_qp, 0x12U);
        EXPECT_EQ(p.payload.size(), 512U) << "no GRH on the wire: the 40 bytes are receive-side";
        EXPECT_EQ(p.info->header_length, bth_size + deth_size);
    }
}

TEST_F(CaptureTest, RpingConnectionManagerAndData) {
    const auto frames = parse_named("rping_cm");
    ASSERT_EQ(frames.size(), 33U);
    std::vector<std::string> cm;
    for (const Frame& f : frames) {
        const ParsedFrame& p = f.parsed;
        if (p.opcode() != Opcode::ud_send_only) {
            continue;
        }
        // QP1 (GSI): BTH + DETH, then a 256-byte MAD the library does not look into.
        EXPECT_EQ(p.bth.dest_qp, 1U);
        EXPECT_EQ(p.deth.src_qp, 1U);
        EXPECT_EQ(p.deth.qkey, gsi_qkey);
        ASSERT_EQ(p.payload.size(), 256U);
        EXPECT_EQ(p.payload[0], 1) << "MAD base version";
        EXPECT_EQ(p.payload[1], mad_class_cm);
        cm.push_back(index_name(p));
    }
    const std::vector<std::string> expected = {"CM: ConnectRequest", "CM: ConnectReply",
                                               "CM: ReadyToUse", "CM: DisconnectRequest",
                                               "CM: DisconnectReply"};
    EXPECT_EQ(cm, expected);
    // rping's 2000-byte buffer: READ response FIRST 1024 + LAST 976, starting with its banner.
    const auto read_first = with_opcode(frames, Opcode::rc_rdma_read_response_first);
    const auto read_last = with_opcode(frames, Opcode::rc_rdma_read_response_last);
    ASSERT_EQ(read_first.size(), 2U);
    ASSERT_EQ(read_last.size(), 2U);
    for (std::size_t i = 0; i < 2; ++i) {
        const auto payload = read_first[i]->parsed.payload;
        const std::string banner = "rdma-ping-" + std::to_string(i) + ": ";
        EXPECT_EQ(std::string(payload.begin(), payload.begin() + 13), banner);
        EXPECT_EQ(payload.size(), 1024U);
        EXPECT_EQ(read_last[i]->parsed.payload.size(), 976U);
    }
    for (const Frame* f : with_opcode(frames, Opcode::rc_rdma_read_request)) {
        EXPECT_EQ(f->parsed.reth.dma_length, 2000U);
    }
    for (const Frame* f : with_opcode(frames, Opcode::rc_send_only)) {
        EXPECT_EQ(f->parsed.payload.size(), 16U) << "rping's rdma_info: addr, rkey, size";
    }
}

// ---- Mutations ----------------------------------------------------------------------------------

// Offsets within an IPv4 datagram (20-byte header) that the ICRC masks.
bool masked_offset(std::size_t at) {
    constexpr std::size_t udp = ipv4_header_size;
    constexpr std::size_t bth = udp + udp_header_size;
    return at == 1 || at == 8 || at == 10 || at == 11 || at == udp + 6 || at == udp + 7 ||
           at == bth + 4;
}

TEST_F(CaptureTest, FlippingAnyCoveredByteBreaksTheIcrc) {
    std::size_t flips = 0;
    for (const auto& capture : captures::all().captures) {
        for (const Frame& f : parse_file(capture)) {
            Bytes datagram(f.parsed.ip_datagram.begin(), f.parsed.ip_datagram.end());
            const std::uint32_t original = stored_icrc(datagram);
            for (std::size_t at = 0; at < datagram.size(); ++at) {
                for (const std::uint8_t flip : {std::uint8_t{0x01}, std::uint8_t{0xff}}) {
                    datagram[at] ^= flip;
                    ++flips;
                    if (at >= datagram.size() - icrc_size) {
                        ASSERT_FALSE(verify_icrc(datagram))
                            << capture.name << " frame " << f.number << ": ICRC byte " << at;
                    } else if (masked_offset(at)) {
                        ASSERT_EQ(compute_icrc(datagram), original)
                            << capture.name << " frame " << f.number << ": masked byte " << at;
                        ASSERT_TRUE(verify_icrc(datagram));
                    } else {
                        ASSERT_FALSE(verify_icrc(datagram))
                            << capture.name << " frame " << f.number << ": byte " << at;
                    }
                    datagram[at] ^= flip;
                }
            }
        }
    }
    EXPECT_GT(flips, 100000U);
}

TEST_F(CaptureTest, MaskedFieldsCanChangeFreely) {
    const captures::Capture* capture = captures::find("write_lat_64");
    ASSERT_NE(capture, nullptr);
    Bytes frame = capture->file.records.at(0).data;
    ParsedFrame parsed = parse_roce_frame(frame);
    ASSERT_TRUE(parsed.ok());
    const std::uint32_t icrc = parsed.icrc;
    // A router decrements TTL, re-marks DSCP/ECN, fixes the header checksum; a switch sets
    // FECN/BECN; someone fills in the UDP checksum. None of it may break the ICRC.
    constexpr std::size_t ip = ethernet_header_size;
    frame[ip + 8] = 3;               // TTL
    frame[ip + 1] = make_tos(26, 3); // DSCP AF31, ECN CE
    store_be16(&frame[ip + 10], ipv4_header_checksum(std::span(frame).subspan(ip, 20)));
    store_be16(&frame[ip + ipv4_header_size + 6], 0x1234);     // UDP checksum
    frame[ip + ipv4_header_size + udp_header_size + 4] = 0xc0; // FECN | BECN
    parsed = parse_roce_frame(frame);
    ASSERT_TRUE(parsed.ok()) << parse_error_name(parsed.error);
    EXPECT_EQ(parsed.icrc, icrc);
    EXPECT_EQ(parsed.ipv4.ttl, 3);
    EXPECT_EQ(parsed.ipv4.dscp(), 26);
    EXPECT_EQ(parsed.ipv4.ecn(), 3);
    EXPECT_TRUE(parsed.bth.fecn);
    EXPECT_TRUE(parsed.bth.becn);
    EXPECT_EQ(parsed.udp.checksum, 0x1234);
}

// ---- Robustness ---------------------------------------------------------------------------------

TEST_F(CaptureTest, EveryTruncationIsAnError) {
    for (const auto& capture : captures::all().captures) {
        for (const Frame& f : parse_file(capture)) {
            for (std::size_t length = 0; length < f.data->size(); ++length) {
                const std::span<const std::uint8_t> cut(f.data->data(), length);
                for (const bool verify : {true, false}) {
                    ParsedFrame p;
                    const ParseError error = parse_roce_frame(
                        cut, p, {.verify_ipv4_checksum = verify, .verify_icrc = verify});
                    ASSERT_NE(error, ParseError::ok)
                        << capture.name << " frame " << f.number << " cut to " << length;
                    ASSERT_EQ(error, p.error);
                    if (length < ethernet_header_size) {
                        ASSERT_EQ(error, ParseError::eth_too_short);
                    } else if (length < ethernet_header_size + ipv4_header_size) {
                        ASSERT_EQ(error, ParseError::ip_too_short);
                    } else {
                        ASSERT_EQ(error, ParseError::bad_ip_length)
                            << "the IP total length no longer fits";
                    }
                }
            }
        }
    }
}

TEST_F(CaptureTest, TrailingEthernetPaddingOrFcsIsIgnored) {
    for (const auto& capture : captures::all().captures) {
        for (const Frame& f : parse_file(capture)) {
            Bytes padded = *f.data;
            padded.insert(padded.end(), {0xde, 0xad, 0xbe, 0xef, 0, 0, 0});
            const ParsedFrame p = parse_roce_frame(padded);
            ASSERT_TRUE(p.ok()) << parse_error_name(p.error);
            EXPECT_EQ(p.payload.size(), f.parsed.payload.size());
            EXPECT_EQ(p.icrc, f.parsed.icrc);
        }
    }
}

TEST_F(CaptureTest, RandomCorruptionNeverCrashes) {
    std::mt19937_64 rng(4791);
    std::vector<const Bytes*> all;
    for (const auto& capture : captures::all().captures) {
        for (const auto& r : capture.file.records) {
            all.push_back(&r.data);
        }
    }
    std::map<ParseError, std::size_t> seen;
    for (int iteration = 0; iteration < 40000; ++iteration) {
        Bytes frame = *all[rng() % all.size()];
        const int edits = 1 + static_cast<int>(rng() % 4);
        for (int e = 0; e < edits; ++e) {
            // Mostly in the headers, where the parser makes its decisions.
            const std::size_t limit =
                rng() % 4 == 0 ? frame.size() : std::min<std::size_t>(80, frame.size());
            frame[rng() % limit] = static_cast<std::uint8_t>(rng());
        }
        if (rng() % 3 == 0) {
            frame.resize(rng() % (frame.size() + 1));
        }
        const bool verify = rng() % 2 == 0;
        const ParsedFrame p =
            parse_roce_frame(frame, {.verify_ipv4_checksum = verify, .verify_icrc = verify});
        ++seen[p.error];
        if (p.ok()) {
            // Whatever got through is self-consistent and inside the frame.
            ASSERT_NE(p.info, nullptr);
            ASSERT_GE(p.payload.data(), frame.data());
            ASSERT_LE(p.payload.data() + p.payload.size() + p.bth.pad_count + icrc_size,
                      frame.data() + frame.size());
            ASSERT_EQ(p.ip_datagram.data(), frame.data() + p.ip_offset);
        }
    }
    EXPECT_GE(seen.size(), 10U) << "the corruption reaches many different checks";
}

} // namespace
} // namespace prdma::roce
