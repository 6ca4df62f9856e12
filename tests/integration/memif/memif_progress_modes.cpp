// Progress modes of swroce-memif-peer (issue 27): a target whose engine runs as a DPDK service on
// an EAL service lcore (progress=service). After connecting, the target's own thread only sleeps
// in a blocking read on the out-of-band socket; the peer's WRITEs, READs, atomics and a SEND
// complete all the same, and the target then finds the data in its memory and the SEND's
// completion in its CQ, filled by the service lcore.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

#include "memif_session.hpp"

namespace memif_peer {
namespace {

// Server memory of the mode.
constexpr std::uint64_t kReadFrom = 0;         // what the client READs: stream 99
constexpr std::uint32_t kReadLength = 1 << 20; // 1024 packets of a 1024-byte MTU
constexpr std::uint64_t kWriteAt = 1 << 20;    // the client's large WRITE: stream 5
constexpr std::uint32_t kWriteLength = 256 << 10;
constexpr std::uint64_t kSmallWriteAt = 3 << 19; // an 8-byte inline WRITE: stream 6
constexpr std::uint64_t kAtomicAt = 2 << 20;     // compare-swap, then fetch-adds
constexpr std::uint64_t kRecvAt = 3 << 20;       // the SEND: stream 7
constexpr std::uint32_t kSendLength = 64;
constexpr int kAdds = 10;

int serve_asleep(Session& s, Oob& oob) {
    fill(s.data() + kReadFrom, kReadLength, 99);
    const std::uint64_t initial = 1000;
    std::memcpy(s.data() + kAtomicAt, &initial, sizeof(initial));
    post_receive(s, kRecvAt, kSendLength);
    // From here this thread makes no prdma call until the client says it is done: a blocking
    // read, no progress of its own.
    const char ready = 'r';
    oob.send(&ready, 1);
    char done = 0;
    oob.receive(&done, 1);
    expect(done == 'd', "the client did not finish");
    g_step = "checking what the peer did while the target slept";
    expect_filled(s.data() + kWriteAt, kWriteLength, 5, "the 256 KiB WRITE");
    expect_filled(s.data() + kSmallWriteAt, 8, 6, "the 8-byte inline WRITE");
    std::uint64_t total = 0;
    std::memcpy(&total, s.data() + kAtomicAt, sizeof(total));
    expect(total == 2000 + 7 * kAdds, "the atomics left " + std::to_string(total));
    // The SEND's completion: written by the service lcore, reaped here (a poll that only reaps).
    WorkCompletion wc;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (poll_cq(s.cq, {&wc, 1}) == 0) {
        expect(std::chrono::steady_clock::now() < deadline, "no completion for the SEND");
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    expect_status(wc, WcStatus::success, "the SEND's receive");
    expect(wc.opcode == WcOpcode::recv && wc.byte_len == kSendLength,
           "the SEND's receive completed as opcode " + std::to_string(static_cast<int>(wc.opcode)) +
               ", " + std::to_string(wc.byte_len) + " bytes");
    expect_filled(s.data() + kRecvAt, kSendLength, 7, "the SEND");
    const char verdict = 'k';
    oob.send(&verdict, 1);
    std::printf("memif-peer server: slept through WRITE, READ, %d atomics and a SEND\n", kAdds + 1);
    return 0;
}

SendWr remote_wr(Session& s, WrOpcode op, std::uint64_t local, std::uint32_t length,
                 std::uint64_t remote) {
    SendWr wr = wr_for(s, op, local, length);
    wr.rdma.remote_addr = s.peer.address + remote;
    wr.rdma.rkey = s.peer.rkey;
    return wr;
}

SendWr atomic_wr(Session& s, WrOpcode op, std::uint64_t add_or_compare, std::uint64_t swap) {
    SendWr wr = wr_for(s, op, 3 << 20, 8);
    wr.atomic.remote_addr = s.peer.address + kAtomicAt;
    wr.atomic.rkey = s.peer.rkey;
    wr.atomic.compare_add = add_or_compare;
    wr.atomic.swap = swap;
    return wr;
}

int drive_a_sleeper(Session& s, Oob& oob) {
    char ready = 0;
    oob.receive(&ready, 1, [&] { drive(s); });
    g_step = "WRITEs to a sleeping target";
    fill(s.data(), kWriteLength, 5);
    SendWr write = remote_wr(s, WrOpcode::rdma_write, 0, kWriteLength, kWriteAt);
    post(s, write);
    fill(s.data() + kWriteLength, 8, 6);
    SendWr small = remote_wr(s, WrOpcode::rdma_write, kWriteLength, 8, kSmallWriteAt);
    small.flags = small.flags | send_inline;
    post(s, small);
    wait_one(s);
    wait_one(s);
    g_step = "a READ from a sleeping target";
    SendWr read = remote_wr(s, WrOpcode::rdma_read, 2 << 20, kReadLength, kReadFrom);
    post(s, read);
    wait_one(s);
    expect_filled(s.data() + (2 << 20), kReadLength, 99, "the 1 MiB READ");
    g_step = "atomics on a sleeping target";
    SendWr swap = atomic_wr(s, WrOpcode::atomic_cmp_swap, 1000, 2000);
    post(s, swap);
    wait_one(s);
    std::uint64_t original = 0;
    std::memcpy(&original, s.data() + (3 << 20), sizeof(original));
    expect(original == 1000, "compare-swap found " + std::to_string(original));
    for (int i = 0; i < kAdds; ++i) {
        SendWr add = atomic_wr(s, WrOpcode::atomic_fetch_add, 7, 0);
        post(s, add);
        wait_one(s);
        std::memcpy(&original, s.data() + (3 << 20), sizeof(original));
        expect(original == 2000 + 7U * static_cast<unsigned>(i),
               "fetch-add " + std::to_string(i) + " found " + std::to_string(original));
    }
    g_step = "a SEND to a sleeping target";
    fill(s.data(), kSendLength, 7);
    SendWr send = wr_for(s, WrOpcode::send, 0, kSendLength);
    post(s, send);
    wait_one(s);
    const char done = 'd';
    oob.send(&done, 1);
    char verdict = 0;
    oob.receive(&verdict, 1, [&] { drive(s); });
    expect(verdict == 'k', "the target's checks failed");
    std::printf("memif-peer client: sleeping target ok\n");
    return 0;
}

} // namespace

int run_sleeping_target(Session& s, Oob& oob, bool server) {
    return server ? serve_asleep(s, oob) : drive_a_sleeper(s, oob);
}

} // namespace memif_peer
