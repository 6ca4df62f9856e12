// lib/roce micro-benchmarks: CRC-32 / ICRC per byte on both paths at 64 B, 1 KiB and 4 KiB
// frames, building a WRITE ONLY frame, and parsing a frame shaped like the captured ones.
//
// Frames are built once before the timed loop; nothing is allocated inside it.
#include <cstdint>
#include <random>
#include <vector>

#include <benchmark/benchmark.h>

#include <prdma/roce/icrc.hpp>
#include <prdma/roce/packet.hpp>

namespace prdma::roce {
namespace {

// The headers of write_lat_64's first frame (Linux rxe, ib_write_lat -s 64).
FrameHeaders rxe_like_headers(Opcode opcode) {
    FrameHeaders h;
    h.eth.dst = {0x52, 0x54, 0x00, 0x77, 0x00, 0x11};
    h.eth.src = {0x52, 0x54, 0x00, 0x77, 0x00, 0x12};
    h.ipv4.identification = 0x73eb;
    h.ipv4.src = 0xc0a84d0c; // 192.168.77.12
    h.ipv4.dst = 0xc0a84d0b;
    h.udp_src_port = 49552;
    h.bth.opcode = opcode;
    h.bth.dest_qp = 0x14;
    h.bth.ack_req = true;
    h.bth.psn = 12240463;
    h.reth = {0x0000561ff7471000, 0x5c6, 64};
    return h;
}

// A RoCEv2 WRITE ONLY frame carrying `payload_size` bytes: Eth 14 + IPv4 20 + UDP 8 + BTH 12 +
// RETH 16 + payload + ICRC 4, i.e. 74 + payload bytes (138 for 64, like write_lat_64's frames).
std::vector<std::uint8_t> write_only_frame(std::size_t payload_size) {
    std::vector<std::uint8_t> payload(payload_size);
    std::mt19937 rng(1);
    for (auto& b : payload) {
        b = static_cast<std::uint8_t>(rng());
    }
    std::vector<std::uint8_t> frame(payload_size + 128);
    const FrameLayout layout =
        build_frame(rxe_like_headers(Opcode::rc_rdma_write_only), payload, frame);
    frame.resize(layout.frame_length);
    return frame;
}

void crc32_bench(benchmark::State& state, CrcPath path) {
    if (path == CrcPath::pclmul && !pclmul_supported()) {
        state.SkipWithError("no PCLMULQDQ on this CPU");
        return;
    }
    std::vector<std::uint8_t> data(static_cast<std::size_t>(state.range(0)));
    std::mt19937 rng(2);
    for (auto& b : data) {
        b = static_cast<std::uint8_t>(rng());
    }
    std::uint32_t crc = 0;
    for (auto _ : state) {
        crc ^= crc32(data, path);
        benchmark::DoNotOptimize(crc);
    }
    state.SetBytesProcessed(state.iterations() * state.range(0));
}

void BM_Crc32Table(benchmark::State& state) {
    crc32_bench(state, CrcPath::table);
}
void BM_Crc32Pclmul(benchmark::State& state) {
    crc32_bench(state, CrcPath::pclmul);
}
BENCHMARK(BM_Crc32Table)->Arg(64)->Arg(1024)->Arg(4096);
BENCHMARK(BM_Crc32Pclmul)->Arg(64)->Arg(1024)->Arg(4096);

// verify_icrc of `datagram` (an IP datagram) in the loop: masking copy, FF prefix, CRC and
// compare. False when the path cannot run here or the ICRC does not verify (the state says why).
bool verify_loop(benchmark::State& state, std::span<const std::uint8_t> datagram, CrcPath path) {
    if (path == CrcPath::pclmul && !pclmul_supported()) {
        state.SkipWithError("no PCLMULQDQ on this CPU");
        return false;
    }
    bool ok = true;
    for (auto _ : state) {
        ok &= verify_icrc(datagram, path);
        benchmark::DoNotOptimize(ok);
    }
    if (!ok) {
        state.SkipWithError("ICRC did not verify");
    }
    return ok;
}

// A WRITE ONLY frame with range(0) payload bytes. Bytes processed are the whole frame's
// (Ethernet header included), so bytes_per_second is per frame byte.
void icrc_bench(benchmark::State& state, CrcPath path) {
    const std::vector<std::uint8_t> frame =
        write_only_frame(static_cast<std::size_t>(state.range(0)));
    if (verify_loop(state, std::span(frame).subspan(14), path)) {
        state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(frame.size()));
    }
}

// An ACK (IPv4 + UDP + BTH + AETH: 44 bytes covered, less than the three 16-byte blocks the
// masked headers round up to): one answers every WRITE.
void icrc_ack_bench(benchmark::State& state, CrcPath path) {
    FrameHeaders h = rxe_like_headers(Opcode::rc_acknowledge);
    h.aeth = {0x1f, 7};
    std::vector<std::uint8_t> frame(128);
    const FrameLayout layout = build_frame(h, {}, frame);
    (void)verify_loop(
        state, std::span(frame).subspan(layout.ip_offset, layout.frame_length - layout.ip_offset),
        path);
}
void BM_IcrcAckTable(benchmark::State& state) {
    icrc_ack_bench(state, CrcPath::table);
}
void BM_IcrcAckPclmul(benchmark::State& state) {
    icrc_ack_bench(state, CrcPath::pclmul);
}
BENCHMARK(BM_IcrcAckTable);
BENCHMARK(BM_IcrcAckPclmul);

void BM_IcrcTable(benchmark::State& state) {
    icrc_bench(state, CrcPath::table);
}
void BM_IcrcPclmul(benchmark::State& state) {
    icrc_bench(state, CrcPath::pclmul);
}
BENCHMARK(BM_IcrcTable)->Arg(64)->Arg(1024)->Arg(4096);
BENCHMARK(BM_IcrcPclmul)->Arg(64)->Arg(1024)->Arg(4096);

// Headers of a WRITE ONLY (Eth + IPv4 + UDP + BTH + RETH, IPv4 checksum), no payload copy or
// ICRC: what the engine does before it gathers the payload.
void BM_BuildWriteOnlyHeaders(benchmark::State& state) {
    FrameHeaders h = rxe_like_headers(Opcode::rc_rdma_write_only);
    std::vector<std::uint8_t> frame(2048);
    for (auto _ : state) {
        h.bth.psn = (h.bth.psn + 1) & 0xffffff;
        const FrameLayout layout = build_frame_headers(h, 64, frame);
        benchmark::DoNotOptimize(layout);
        benchmark::ClobberMemory();
    }
}
BENCHMARK(BM_BuildWriteOnlyHeaders);

// The whole frame: headers, payload copy of range(0) bytes, pad and ICRC (automatic CRC path).
void BM_BuildWriteOnlyFrame(benchmark::State& state) {
    FrameHeaders h = rxe_like_headers(Opcode::rc_rdma_write_only);
    std::vector<std::uint8_t> payload(static_cast<std::size_t>(state.range(0)), 0x7b);
    std::vector<std::uint8_t> frame(8192);
    for (auto _ : state) {
        h.bth.psn = (h.bth.psn + 1) & 0xffffff;
        const FrameLayout layout = build_frame(h, payload, frame);
        benchmark::DoNotOptimize(layout);
        benchmark::ClobberMemory();
    }
}
BENCHMARK(BM_BuildWriteOnlyFrame)->Arg(64)->Arg(1024)->Arg(4096);

// Parse of a write_lat_64-like frame (138 bytes), with and without the ICRC check.
void parse_bench(benchmark::State& state, bool verify_icrc) {
    const std::vector<std::uint8_t> frame = write_only_frame(64);
    ParsedFrame parsed;
    const ParseOptions options{.verify_ipv4_checksum = true, .verify_icrc = verify_icrc};
    for (auto _ : state) {
        const ParseError error = parse_roce_frame(frame, parsed, options);
        benchmark::DoNotOptimize(error);
        benchmark::DoNotOptimize(parsed);
    }
    if (!parsed.ok()) {
        state.SkipWithError("frame did not parse");
    }
}
void BM_ParseWriteOnly(benchmark::State& state) {
    parse_bench(state, true);
}
void BM_ParseWriteOnlyNoIcrc(benchmark::State& state) {
    parse_bench(state, false);
}
BENCHMARK(BM_ParseWriteOnly);
BENCHMARK(BM_ParseWriteOnlyNoIcrc);

} // namespace
} // namespace prdma::roce
