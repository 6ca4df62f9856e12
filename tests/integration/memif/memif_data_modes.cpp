// Data-moving conformance modes of swroce-memif-peer (issue 5): immediate data, inline and
// multi-SGE work requests, many QPs at once. The client posts, the server posts receives and owns
// the target memory; whichever side receives data checks every byte of it against the producer's
// pattern stream, and the bytes just past it against a marker that must survive.
#include <algorithm>
#include <chrono>
#include <cstdio>
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

// ---- imm: SEND_WITH_IMM and WRITE_WITH_IMM ------------------------------------------------------

// Server memory of the imm mode.
constexpr std::uint64_t kImmRecvAt = 0;        // SEND_WITH_IMM lands here
constexpr std::uint64_t kImmWriteAt = 2 << 20; // WRITE_WITH_IMM target
// The receive a WRITE_WITH_IMM consumes.
constexpr std::uint64_t kImmSpareRecvAt = (3 << 20) + (1 << 19);

// Reads differently byte-swapped, so a wrong byte order of the ImmDt header cannot pass.
std::uint32_t immediate_for(std::uint32_t index) {
    return 0xa1b2c300U | (index & 0xffU);
}

void expect_receive(const Session& s, const WorkCompletion& wc, WcOpcode opcode, std::uint32_t imm,
                    std::uint32_t byte_len, const std::string& what) {
    expect(wc.opcode == opcode, what + ": completion opcode " +
                                    std::to_string(static_cast<int>(wc.opcode)) + ", not " +
                                    std::to_string(static_cast<int>(opcode)));
    expect(wc.flags.has(wc_with_imm), what + ": completion without the immediate flag");
    expect(wc.imm_or_invalidated == imm, what + ": immediate " +
                                             std::to_string(wc.imm_or_invalidated) + ", not " +
                                             std::to_string(imm));
    expect(wc.byte_len == byte_len, what + ": byte_len " + std::to_string(wc.byte_len) + ", not " +
                                        std::to_string(byte_len));
    expect(wc.qpn == s.qp.qpn() && wc.src_qpn == s.peer.qpn,
           what + ": completion names another QP");
}

// Posts `wr` and waits for its completion, which must be a success with `opcode`.
void complete(Session& s, SendWr& wr, WcOpcode opcode) {
    post(s, wr);
    const WorkCompletion wc = wait_one(s);
    expect(wc.opcode == opcode, g_step + ": wrong send completion opcode");
}

// The requester's half of one message: fill, let the server post, post, complete.
void request(Session& s, Oob& oob, SendWr& wr, std::uint32_t seed, WcOpcode completion) {
    fill(s.data() + (wr.sge.addr - s.addr()), wr.sge.length, seed);
    oob.barrier([&] { drive(s); }); // the server is ready
    complete(s, wr, completion);
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

// ---- inline-sge: inline data, gather lists, scatter lists ---------------------------------------

namespace {

// Server memory of the inline-sge mode.
constexpr std::uint64_t kSgeRecvAt = 1 << 20;  // receives, single or scattered
constexpr std::uint64_t kSgeWriteAt = 2 << 20; // WRITE target
constexpr std::uint64_t kSgeReadAt = 3 << 20;  // READ source

// A piece of the session buffer; a list of them is one message, gathered or scattered in order.
struct Piece {
    std::uint64_t offset;
    std::uint32_t length;
};

std::uint32_t total_length(const std::vector<Piece>& pieces) {
    std::uint32_t total = 0;
    for (const Piece& piece : pieces) {
        total += piece.length;
    }
    return total;
}

std::vector<Sge> sges_of(const Session& s, const std::vector<Piece>& pieces) {
    std::vector<Sge> sges;
    for (const Piece& piece : pieces) {
        sges.push_back({s.addr() + piece.offset, piece.length, s.mr.lkey()});
    }
    return sges;
}

// Odd lengths at scattered, out-of-order offsets: SGE boundaries fall inside packets, and the
// requester's gather boundaries differ from the responder's scatter boundaries.
const std::vector<Piece> kGatherSmall = {
    {0x10003, 1}, {0x30001, 1023}, {0x20007, 3001}, {0x50000, 77}}; // 4102 B, 5 packets
const std::vector<Piece> kGatherLarge = {
    {0x60003, 20001}, {0x90001, 30011}, {0x80005, 9}, {0xa0000, 15000}}; // 65021 B, 64 packets
const std::vector<Piece> kScatterSmall = {
    {kSgeRecvAt + 5, 100}, {kSgeRecvAt + 0x10001, 2999}, {kSgeRecvAt + 0x20000, 5000}};
const std::vector<Piece> kScatterLarge = {
    {kSgeRecvAt + 0x40007, 33333}, {kSgeRecvAt + 0x50003, 1}, {kSgeRecvAt + 0x60000, 40000}};
// Where the client scatters a READ response (its own buffer); a READ's length is its SGEs' total.
const std::vector<Piece> kReadScatter = {
    {(2 << 20) + 1, 7}, {(2 << 20) + 0x10003, 40000}, {(2 << 20) + 0x30000, 15548}}; // 55555 B

// Fills the pieces with consecutive parts of stream `seed`.
void fill_pieces(Session& s, const std::vector<Piece>& pieces, std::uint32_t seed) {
    std::size_t from = 0;
    for (const Piece& piece : pieces) {
        fill(s.data() + piece.offset, piece.length, seed, from);
        from += piece.length;
    }
}

// Marks the pieces, and kGuard bytes past each, as untouched.
void clear_pieces(Session& s, const std::vector<Piece>& pieces) {
    for (const Piece& piece : pieces) {
        std::memset(s.data() + piece.offset, kUntouched, piece.length + kGuard);
    }
}

// The first `length` bytes of the pieces are stream `seed`; everything after them, to kGuard past
// each piece, is untouched.
void expect_scattered(const Session& s, const std::vector<Piece>& pieces, std::uint32_t length,
                      std::uint32_t seed, const std::string& what) {
    std::uint32_t from = 0;
    for (std::size_t i = 0; i < pieces.size(); ++i) {
        const Piece& piece = pieces[i];
        const std::uint32_t used = std::min(piece.length, length - from);
        const std::string where = what + ", piece " + std::to_string(i);
        expect_filled(s.data() + piece.offset, used, seed, where, from);
        expect_bytes(s.data() + piece.offset + used, piece.length - used + kGuard, kUntouched,
                     where + " past the message");
        from += used;
    }
}

// The receive's SGE list is built here and gone when the call returns: the device must have
// taken its own copy at post time, as ibv_post_recv promises.
void post_scattered_receive(Session& s, const std::vector<Piece>& pieces) {
    const std::vector<Sge> sges = sges_of(s, pieces);
    RecvWr wr;
    wr.num_sge = static_cast<std::uint8_t>(sges.size());
    wr.sg_list = sges.data();
    expect(post_recv(s.qp, {&wr, 1}) == 1, "post_recv refused");
}

// Likewise the send's SGE list only lives through the post.
void post_gathered(Session& s, WrOpcode opcode, const std::vector<Piece>& pieces,
                   std::uint64_t remote_offset) {
    const std::vector<Sge> sges = sges_of(s, pieces);
    SendWr wr;
    wr.opcode = opcode;
    wr.flags = send_signaled;
    wr.num_sge = static_cast<std::uint8_t>(sges.size());
    wr.sg_list = sges.data();
    wr.rdma.remote_addr = s.peer.address + remote_offset;
    wr.rdma.rkey = s.peer.rkey;
    post(s, wr);
}

void expect_plain_receive(const Session& s, const WorkCompletion& wc, std::uint32_t byte_len) {
    expect(wc.opcode == WcOpcode::recv && !wc.flags.any_of(wc_with_imm | wc_with_inv),
           g_step + ": not a plain receive completion");
    expect(wc.byte_len == byte_len, g_step + ": byte_len " + std::to_string(wc.byte_len) +
                                        ", not " + std::to_string(byte_len));
    expect(wc.qpn == s.qp.qpn(), g_step + ": completion names another QP");
}

// Inline payloads come from ordinary heap memory with no lkey at all, and are overwritten right
// after the post: the device copied them when it took the WR.
void inline_request(Session& s, Oob& oob, WrOpcode opcode, const std::vector<std::uint32_t>& parts,
                    std::uint32_t seed) {
    std::vector<std::vector<std::uint8_t>> sources;
    std::vector<Sge> sges;
    std::size_t from = 0;
    for (const std::uint32_t length : parts) {
        sources.emplace_back(length);
        fill(sources.back().data(), length, seed, from);
        from += length;
        sges.push_back({reinterpret_cast<std::uint64_t>(sources.back().data()), length, 0});
    }
    oob.barrier([&] { drive(s); }); // the server is ready
    SendWr wr;
    wr.opcode = opcode;
    wr.flags = send_signaled | send_inline;
    wr.num_sge = static_cast<std::uint8_t>(sges.size());
    wr.sge = sges.empty() ? Sge{} : sges[0];
    wr.sg_list = sges.data();
    wr.rdma.remote_addr = s.peer.address + kSgeWriteAt;
    wr.rdma.rkey = s.peer.rkey;
    post(s, wr);
    for (auto& source : sources) {
        if (!source.empty()) { // an empty vector's data() may be null, which memset must not get
            std::memset(source.data(), 0, source.size());
        }
    }
    const WorkCompletion wc = wait_one(s);
    expect(wc.opcode == (opcode == WrOpcode::send ? WcOpcode::send : WcOpcode::rdma_write),
           g_step + ": wrong send completion opcode");
    oob.barrier([&] { drive(s); }); // the server has checked
}

void serve_inline_send(Session& s, Oob& oob, std::uint32_t length, std::uint32_t seed) {
    const std::vector<Piece> buffer = {{kSgeRecvAt, kMaxInline}};
    clear_pieces(s, buffer);
    post_receive(s, kSgeRecvAt, kMaxInline);
    oob.barrier([&] { drive(s); });
    expect_plain_receive(s, wait_one(s), length);
    expect_scattered(s, buffer, length, seed, g_step);
    oob.barrier([&] { drive(s); });
}

// A WRITE's requester completes once the responder has placed it: after the barrier that follows
// the client's completion, the data is there.
void serve_write(Session& s, Oob& oob, std::uint32_t length, std::uint32_t seed) {
    std::memset(s.data() + kSgeWriteAt, kUntouched, length + kGuard);
    oob.barrier([&] { drive(s); });
    oob.barrier([&] { drive(s); });
    expect_filled(s.data() + kSgeWriteAt, length, seed, g_step);
    expect_bytes(s.data() + kSgeWriteAt + length, kGuard, kUntouched, g_step + ", past its end");
}

void serve_gathered_send(Session& s, Oob& oob, const std::vector<Piece>& scatter,
                         std::uint32_t length, std::uint32_t seed) {
    clear_pieces(s, scatter);
    post_scattered_receive(s, scatter);
    oob.barrier([&] { drive(s); });
    expect_plain_receive(s, wait_one(s), length);
    expect_scattered(s, scatter, length, seed, g_step);
    oob.barrier([&] { drive(s); });
}

void gathered_request(Session& s, Oob& oob, WrOpcode opcode, const std::vector<Piece>& gather,
                      std::uint32_t seed) {
    fill_pieces(s, gather, seed);
    oob.barrier([&] { drive(s); });
    post_gathered(s, opcode, gather, kSgeWriteAt);
    const WorkCompletion wc = wait_one(s);
    expect(wc.opcode == (opcode == WrOpcode::send ? WcOpcode::send : WcOpcode::rdma_write),
           g_step + ": wrong send completion opcode");
    oob.barrier([&] { drive(s); });
}

void serve_read(Session& s, Oob& oob, std::uint32_t length, std::uint32_t seed) {
    fill(s.data() + kSgeReadAt, length, seed);
    oob.barrier([&] { drive(s); });
    oob.barrier([&] { drive(s); });
}

void scattered_read(Session& s, Oob& oob, std::uint32_t length, std::uint32_t seed) {
    clear_pieces(s, kReadScatter);
    oob.barrier([&] { drive(s); });
    const std::vector<Sge> sges = sges_of(s, kReadScatter);
    SendWr wr;
    wr.opcode = WrOpcode::rdma_read;
    wr.flags = send_signaled;
    wr.num_sge = static_cast<std::uint8_t>(sges.size());
    wr.sg_list = sges.data();
    wr.rdma.remote_addr = s.peer.address + kSgeReadAt;
    wr.rdma.rkey = s.peer.rkey;
    complete(s, wr, WcOpcode::rdma_read);
    expect_scattered(s, kReadScatter, length, seed, g_step);
    oob.barrier([&] { drive(s); });
}

} // namespace

int run_inline_sge(Session& s, Oob& oob, bool server) {
    // Inline: every size up to the QP's max_inline_data, one SGE and several.
    const std::vector<std::vector<std::uint32_t>> inline_parts = {{0},
                                                                  {1},
                                                                  {16},
                                                                  {63},
                                                                  {64},
                                                                  {65},
                                                                  {200},
                                                                  {kMaxInline - 1},
                                                                  {kMaxInline},
                                                                  {10, 50, 3},
                                                                  {100, 1, kMaxInline - 101}};
    std::uint32_t seed = 300;
    for (const auto& parts : inline_parts) {
        std::uint32_t length = 0;
        for (const std::uint32_t part : parts) {
            length += part;
        }
        const std::string shape =
            size_text(length) + " in " + std::to_string(parts.size()) + " SGE(s)";
        for (const WrOpcode opcode : {WrOpcode::send, WrOpcode::rdma_write}) {
            g_step = std::string("inline ") + (opcode == WrOpcode::send ? "SEND" : "WRITE") +
                     " of " + shape;
            ++seed;
            if (!server) {
                inline_request(s, oob, opcode, parts, seed);
            } else if (opcode == WrOpcode::send) {
                serve_inline_send(s, oob, length, seed);
            } else {
                serve_write(s, oob, length, seed);
            }
        }
    }
    // Gather lists on the requester, scatter lists on the responder.
    const std::pair<const std::vector<Piece>*, const std::vector<Piece>*> messages[] = {
        {&kGatherSmall, &kScatterSmall}, {&kGatherLarge, &kScatterLarge}};
    for (const auto& [gather, scatter] : messages) {
        const std::uint32_t length = total_length(*gather);
        g_step = "SEND of " + size_text(length) + " gathered from 4 SGEs, scattered into 3";
        ++seed;
        if (server) {
            serve_gathered_send(s, oob, *scatter, length, seed);
        } else {
            gathered_request(s, oob, WrOpcode::send, *gather, seed);
        }
        g_step = "WRITE of " + size_text(length) + " gathered from 4 SGEs";
        ++seed;
        if (server) {
            serve_write(s, oob, length, seed);
        } else {
            gathered_request(s, oob, WrOpcode::rdma_write, *gather, seed);
        }
    }
    const std::uint32_t read_length = total_length(kReadScatter);
    g_step = "READ of " + size_text(read_length) + " scattered into 3 SGEs";
    ++seed;
    if (server) {
        serve_read(s, oob, read_length, seed);
        std::printf("memif-peer server: inline and scattered receives checked\n");
    } else {
        scattered_read(s, oob, read_length, seed);
        std::printf("memif-peer client: inline SEND/WRITE 0..%u B, multi-SGE SEND/WRITE/READ: ok\n",
                    kMaxInline);
    }
    return 0;
}

// ---- many-qps: sixteen QP pairs on one CQ, traffic in both directions at once -------------------

namespace {

constexpr std::uint32_t kPairs = 16;
constexpr std::uint64_t kSlot = 64 << 10; // each pair's share of a 1 MiB area

// Each pair moves its own sizes, so data that reached the wrong pair cannot pass for the right.
// Server memory: receives at 1 MiB, WRITE targets at 2 MiB, READ sources at 3 MiB, reply sources
// at 0. Client memory: SEND sources at 0, WRITE sources at 1 MiB, READ destinations at 2 MiB,
// receives of the replies at 3 MiB. Pair i uses slot i of each area.
std::uint32_t send_size(std::uint32_t i) {
    return 1000 + 2917 * i;
}
std::uint32_t write_size(std::uint32_t i) {
    return 3000 + 1999 * i;
}
std::uint32_t read_size(std::uint32_t i) {
    return 500 + 3001 * i;
}
std::uint32_t reply_size(std::uint32_t i) {
    return 64 + 777 * i;
}
std::uint64_t slot(std::uint64_t area, std::uint32_t i) {
    return (area << 20) + i * kSlot;
}

// What each work request is; a wr_id is pair * 4 + op.
enum PairOp : std::uint32_t { op_send, op_write, op_read, op_reply };
std::uint32_t seed_of(PairOp op, std::uint32_t pair) {
    return 100 * (op + 1) + pair;
}

struct Pairs {
    std::vector<QueuePair> qps;
    std::vector<ConnectionDescriptor> peers;

    std::uint32_t index_of(std::uint32_t qpn) const {
        for (std::uint32_t i = 0; i < qps.size(); ++i) {
            if (qps[i].qpn() == qpn) {
                return i;
            }
        }
        die("a completion for QP " + std::to_string(qpn) + ", which is none of the pairs");
    }
};

Pairs connect_pairs(Session& s, Oob& oob) {
    Pairs pairs;
    for (std::uint32_t i = 0; i < kPairs; ++i) {
        pairs.qps.push_back(make_qp(s));
    }
    for (QueuePair& qp : pairs.qps) {
        pairs.peers.push_back(connect_qp(s, oob, qp));
    }
    oob.barrier([&] { drive(s); }); // every pair is at RTS on both sides
    return pairs;
}

void post_pair_receive(Session& s, const Pairs& pairs, std::uint32_t i, std::uint64_t offset,
                       std::uint64_t wr_id) {
    std::memset(s.data() + offset, kUntouched, kSlot);
    RecvWr wr;
    wr.wr_id = wr_id;
    wr.num_sge = 1;
    wr.sge = {s.addr() + offset, static_cast<std::uint32_t>(kSlot - kGuard), s.mr.lkey()};
    expect(post_recv(pairs.qps[i], {&wr, 1}) == 1, "post_recv refused");
}

void post_pair(Session& s, const Pairs& pairs, std::uint32_t i, PairOp op, std::uint64_t local,
               std::uint32_t length, std::uint64_t remote) {
    const WrOpcode opcodes[] = {WrOpcode::send, WrOpcode::rdma_write, WrOpcode::rdma_read,
                                WrOpcode::send};
    SendWr wr = wr_for(s, opcodes[op], local, length);
    wr.wr_id = i * 4 + op;
    // The WRITE completes silently: the SEND behind it on the same QP completes for both.
    wr.flags = op == op_write ? SendFlags() : send_signaled;
    wr.rdma.remote_addr = pairs.peers[i].address + remote;
    wr.rdma.rkey = pairs.peers[i].rkey;
    expect(post_send(pairs.qps[i], {&wr, 1}) == 1, "post_send refused");
}

std::vector<WorkCompletion> wait_all(Session& s, std::size_t count) {
    std::vector<WorkCompletion> done;
    std::vector<WorkCompletion> burst(32);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (done.size() < count) {
        expect(std::chrono::steady_clock::now() < deadline,
               "timed out with " + std::to_string(done.size()) + " of " + std::to_string(count) +
                   " completions");
        const std::uint16_t n = poll_cq(s.cq, {burst.data(), 32});
        done.insert(done.end(), burst.begin(), burst.begin() + n);
    }
    return done;
}

// A receive of pair i: the right QP, the right size, and its data (and, on the server, the WRITE
// the same QP carried before the SEND, which RC ordering has placed by now).
void check_pair_receive(Session& s, const Pairs& pairs, std::uint32_t i, const WorkCompletion& wc,
                        bool server) {
    const std::string what = "pair " + std::to_string(i) + (server ? " SEND" : " reply");
    const PairOp op = server ? op_send : op_reply;
    const std::uint32_t length = server ? send_size(i) : reply_size(i);
    const std::uint64_t at = slot(server ? 1 : 3, i);
    expect(wc.opcode == WcOpcode::recv && wc.byte_len == length,
           what + ": byte_len " + std::to_string(wc.byte_len));
    expect(wc.src_qpn == pairs.peers[i].qpn, what + ": from another QP");
    expect_filled(s.data() + at, length, seed_of(op, i), what);
    expect_bytes(s.data() + at + length, kGuard, kUntouched, what + ", past its end");
    if (server) {
        expect_filled(s.data() + slot(2, i), write_size(i), seed_of(op_write, i),
                      "pair " + std::to_string(i) + " WRITE");
        expect_bytes(s.data() + slot(2, i) + write_size(i), kGuard, kUntouched,
                     "pair " + std::to_string(i) + " WRITE, past its end");
    }
}

// Every completion: success, on the pair its wr_id names, once each, sends in SQ order.
void check_pair_completions(Session& s, const Pairs& pairs, bool server,
                            const std::vector<WorkCompletion>& done) {
    std::vector<std::uint32_t> seen(kPairs, 0); // bit per PairOp
    for (const WorkCompletion& wc : done) {
        expect_status(wc, WcStatus::success, "many QPs");
        const std::uint32_t i = pairs.index_of(wc.qpn);
        const auto op = static_cast<PairOp>(wc.wr_id % 4);
        expect(wc.wr_id / 4 == i,
               "completion " + std::to_string(wc.wr_id) + " on pair " + std::to_string(i));
        expect((seen[i] & (1U << op)) == 0, "completion " + std::to_string(wc.wr_id) + " twice");
        seen[i] |= 1U << op;
        const bool receive = wc.opcode == WcOpcode::recv;
        if (receive) {
            check_pair_receive(s, pairs, i, wc, server);
        } else if (op == op_read) {
            expect(wc.opcode == WcOpcode::rdma_read, "pair READ completion opcode");
            expect((seen[i] & (1U << op_send)) != 0, "pair READ completed before its SEND");
            expect_filled(s.data() + slot(2, i), read_size(i), seed_of(op_read, i),
                          "pair " + std::to_string(i) + " READ");
        } else {
            expect(wc.opcode == WcOpcode::send, "pair SEND completion opcode");
        }
    }
}

} // namespace

// The client sends, WRITEs and READs on all sixteen pairs while the server SENDs a reply on each.
int run_many_qps(Session& s, Oob& oob, bool server) {
    g_step = "connecting " + std::to_string(kPairs) + " QP pairs";
    Pairs pairs = connect_pairs(s, oob);
    g_step = std::to_string(kPairs) + " QP pairs at once";
    for (std::uint32_t i = 0; i < kPairs; ++i) {
        if (server) {
            fill(s.data() + slot(3, i), read_size(i), seed_of(op_read, i));
            fill(s.data() + slot(0, i), reply_size(i), seed_of(op_reply, i));
            std::memset(s.data() + slot(2, i), kUntouched, kSlot);
            post_pair_receive(s, pairs, i, slot(1, i), i * 4 + op_send);
        } else {
            fill(s.data() + slot(0, i), send_size(i), seed_of(op_send, i));
            fill(s.data() + slot(1, i), write_size(i), seed_of(op_write, i));
            std::memset(s.data() + slot(2, i), kUntouched, kSlot);
            post_pair_receive(s, pairs, i, slot(3, i), i * 4 + op_reply);
        }
    }
    oob.barrier([&] { drive(s); }); // every receive is posted
    if (server) {
        for (std::uint32_t i = 0; i < kPairs; ++i) {
            post_pair(s, pairs, i, op_reply, slot(0, i), reply_size(i), slot(3, i));
        }
    } else {
        // One kind at a time across all pairs, so every pair has work in flight together.
        for (std::uint32_t i = 0; i < kPairs; ++i) {
            post_pair(s, pairs, i, op_write, slot(1, i), write_size(i), slot(2, i));
        }
        for (std::uint32_t i = 0; i < kPairs; ++i) {
            post_pair(s, pairs, i, op_send, slot(0, i), send_size(i), slot(1, i));
        }
        for (std::uint32_t i = 0; i < kPairs; ++i) {
            post_pair(s, pairs, i, op_read, slot(2, i), read_size(i), slot(3, i));
        }
    }
    // Server: 16 receives and 16 replies. Client: 16 SENDs, 16 READs, 16 replies received.
    const std::size_t expected = server ? 2 * kPairs : 3 * kPairs;
    check_pair_completions(s, pairs, server, wait_all(s, expected));
    oob.barrier([&] { drive(s); }); // both sides are done before the pairs go
    if (server) {
        std::printf("memif-peer server: %u pairs' SENDs and WRITEs checked\n", kPairs);
    } else {
        std::printf("memif-peer client: %u QP pairs on one CQ, SEND/WRITE/READ and replies: ok\n",
                    kPairs);
    }
    return 0;
}

} // namespace memif_peer
