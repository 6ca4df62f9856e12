// Data-moving conformance modes of swroce-memif-peer (issue 5): immediate data, inline and
// multi-SGE work requests, many QPs at once. The client posts, the server posts receives and owns
// the target memory; whichever side receives data checks every byte of it against the producer's
// pattern stream, and the bytes just past it against a marker that must survive.
#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "memif_session.hpp"

namespace memif_peer {
namespace {

constexpr std::uint8_t kUntouched = 0xee; // what memory no message may reach holds
constexpr std::uint32_t kGuard = 64;      // bytes past each message that must keep kUntouched

std::string size_text(std::uint32_t size) {
    return std::to_string(size) + " B";
}

// ---- imm: SEND_WITH_IMM and WRITE_WITH_IMM
// --------------------------------------------------------

// Server memory of the imm mode.
constexpr std::uint64_t kImmRecvAt = 0;        // SEND_WITH_IMM lands here
constexpr std::uint64_t kImmWriteAt = 2 << 20; // WRITE_WITH_IMM target
constexpr std::uint64_t kImmSpareRecvAt =
    (3 << 20) + (1 << 19); // receive a WRITE_WITH_IMM consumes

// Reads differently byte-swapped, so a wrong byte order of the ImmDt header cannot pass.
std::uint32_t immediate_for(std::uint32_t index) {
    return 0xa1b2c300U | (index & 0xffU);
}

void expect_receive(const Session& s, const WorkCompletion& wc, WcOpcode opcode, std::uint32_t imm,
                    std::uint32_t byte_len, const std::string& what) {
    expect(wc.opcode == opcode, what + ": completion opcode " +
                                    std::to_string(static_cast<int>(wc.opcode)) + ", not " +
                                    std::to_string(static_cast<int>(opcode)));
    expect((wc.flags & wc_with_imm) != 0, what + ": completion without the immediate flag");
    expect(wc.imm_or_invalidated == imm, what + ": immediate " +
                                             std::to_string(wc.imm_or_invalidated) + ", not " +
                                             std::to_string(imm));
    expect(wc.byte_len == byte_len, what + ": byte_len " + std::to_string(wc.byte_len) + ", not " +
                                        std::to_string(byte_len));
    expect(wc.qpn == s.qp.qpn() && wc.src_qpn == s.peer.qpn,
           what + ": completion names another QP");
}

// The requester's half of one message: fill, let the server post, post, complete.
void request(Session& s, Oob& oob, SendWr& wr, std::uint32_t seed, WcOpcode completion) {
    fill(s.data() + (wr.sge.addr - s.addr()), wr.sge.length, seed);
    oob.barrier([&] { drive(s); }); // the server is ready
    post(s, wr);
    const WorkCompletion wc = wait_one(s);
    expect(wc.opcode == completion, g_step + ": wrong send completion opcode");
    oob.barrier([&] { drive(s); }); // the server has checked
}

void serve_send_with_imm(Session& s, Oob& oob, std::uint32_t size, std::uint32_t imm,
                         std::uint32_t seed) {
    std::memset(s.data() + kImmRecvAt, kUntouched, size + kGuard);
    post_receive(s, kImmRecvAt, size + kGuard);
    oob.barrier([&] { drive(s); }); // receive posted
    const WorkCompletion wc = wait_one(s);
    expect_receive(s, wc, WcOpcode::recv, imm, size, g_step);
    expect_filled(s.data() + kImmRecvAt, size, seed, g_step);
    expect_bytes(s.data() + kImmRecvAt + size, kGuard, kUntouched, g_step + ", past its end");
    oob.barrier([&] { drive(s); });
}

// The receive a WRITE_WITH_IMM consumes only carries the completion: its buffer stays untouched.
void post_spare_receive(Session& s) {
    std::memset(s.data() + kImmSpareRecvAt, kUntouched, kGuard);
    post_receive(s, kImmSpareRecvAt, kGuard);
}

void check_write_with_imm(Session& s, const WorkCompletion& wc, std::uint32_t size,
                          std::uint32_t imm, std::uint32_t seed) {
    expect_receive(s, wc, WcOpcode::recv_rdma_with_imm, imm, size, g_step);
    expect_filled(s.data() + kImmWriteAt, size, seed, g_step);
    expect_bytes(s.data() + kImmWriteAt + size, kGuard, kUntouched, g_step + ", past its end");
    expect_bytes(s.data() + kImmSpareRecvAt, kGuard, kUntouched,
                 g_step + ": the consumed receive buffer");
}

void serve_write_with_imm(Session& s, Oob& oob, std::uint32_t size, std::uint32_t imm,
                          std::uint32_t seed) {
    std::memset(s.data() + kImmWriteAt, kUntouched, size + kGuard);
    post_spare_receive(s);
    oob.barrier([&] { drive(s); });
    check_write_with_imm(s, wait_one(s), size, imm, seed);
    oob.barrier([&] { drive(s); });
}

// A multi-packet WRITE_WITH_IMM that finds no receive: the responder NAKs receiver-not-ready on
// its last packet, and the retried packet must still complete the message once one is posted.
constexpr std::uint32_t kRnrSize = 5000; // five packets at MTU 1024

void serve_write_with_imm_before_receive(Session& s, Oob& oob, std::uint32_t imm,
                                         std::uint32_t seed) {
    std::memset(s.data() + kImmWriteAt, kUntouched, kRnrSize + kGuard);
    oob.barrier([&] { drive(s); }); // no receive posted
    oob.barrier([&] { drive(s); }); // the client has been NAKed
    post_spare_receive(s);
    check_write_with_imm(s, wait_one(s), kRnrSize, imm, seed);
    oob.barrier([&] { drive(s); });
}

void write_with_imm_before_receive(Session& s, Oob& oob, std::uint32_t imm, std::uint32_t seed) {
    fill(s.data(), kRnrSize, seed);
    oob.barrier([&] { drive(s); });
    SendWr wr = wr_for(s, WrOpcode::rdma_write_with_imm, 0, kRnrSize);
    wr.rdma.remote_addr = s.peer.address + kImmWriteAt;
    wr.rdma.rkey = s.peer.rkey;
    wr.imm_or_invalidate = imm;
    const std::uint64_t naks = counter(s, "naks_received");
    post(s, wr);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (counter(s, "naks_received") == naks) {
        expect(std::chrono::steady_clock::now() < deadline, "no RNR NAK for " + g_step);
        drive(s);
    }
    oob.barrier([&] { drive(s); }); // the server posts its receive now
    const WorkCompletion wc = wait_one(s);
    expect(wc.opcode == WcOpcode::rdma_write, g_step + ": wrong send completion opcode");
    oob.barrier([&] { drive(s); });
}

} // namespace

// Every size from empty to 1 MiB (many MTU segments), each message with its own immediate.
int run_imm(Session& s, Oob& oob, bool server) {
    const std::uint32_t sizes[] = {0, 1, 1024, 1025, 4097, 65539, 1 << 20};
    std::uint32_t index = 0;
    for (const std::uint32_t size : sizes) {
        const std::uint32_t seed = 1000 + size % 251;
        g_step = "SEND_WITH_IMM of " + size_text(size);
        const std::uint32_t send_imm = immediate_for(index++);
        if (server) {
            serve_send_with_imm(s, oob, size, send_imm, seed);
        } else {
            SendWr wr = wr_for(s, WrOpcode::send_with_imm, 0, size);
            wr.imm_or_invalidate = send_imm;
            request(s, oob, wr, seed, WcOpcode::send);
        }
        g_step = "WRITE_WITH_IMM of " + size_text(size);
        const std::uint32_t write_imm = immediate_for(index++);
        if (server) {
            serve_write_with_imm(s, oob, size, write_imm, seed + 1);
        } else {
            SendWr wr = wr_for(s, WrOpcode::rdma_write_with_imm, 0, size);
            wr.rdma.remote_addr = s.peer.address + kImmWriteAt;
            wr.rdma.rkey = s.peer.rkey;
            wr.imm_or_invalidate = write_imm;
            request(s, oob, wr, seed + 1, WcOpcode::rdma_write);
        }
    }
    g_step = "WRITE_WITH_IMM of " + size_text(kRnrSize) + " before the receive is posted";
    const std::uint32_t imm = immediate_for(index++);
    if (server) {
        serve_write_with_imm_before_receive(s, oob, imm, 77);
        std::printf("memif-peer server: immediates of SEND and WRITE, 0 B..1 MiB, checked\n");
    } else {
        write_with_imm_before_receive(s, oob, imm, 77);
        std::printf("memif-peer client: SEND_WITH_IMM and WRITE_WITH_IMM 0 B..1 MiB, and after an "
                    "RNR NAK: ok\n");
    }
    return 0;
}

} // namespace memif_peer
