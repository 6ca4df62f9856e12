// Memory-key conformance modes of swroce-memif-peer (issue 5, seed 001): fast-register and
// invalidation as the peer sees them, and the errors a requester gets for memory it may not touch.
// A failed access must fail at the requester with the IBTA status, take the QP to error (later
// WRs flushed), and leave the target's memory exactly as it was; each such case ends with a fresh
// QP pair.
#include <cstdio>
#include <cstring>
#include <string>

#include "memif_session.hpp"

namespace memif_peer {

namespace {

constexpr std::uint8_t kUntouched = 0xee;

// A key the server hands the client over the OOB channel, with the range it covers.
struct RemoteKey {
    std::uint32_t rkey = 0;
    std::uint32_t length = 0;
    std::uint64_t va = 0;
};

RemoteKey receive_key(Session& s, Oob& oob) {
    RemoteKey key;
    oob.receive(&key, sizeof(key), [&] { drive(s); });
    return key;
}

SendWr remote_wr(Session& s, WrOpcode op, std::uint64_t local, std::uint32_t length,
                 std::uint32_t rkey, std::uint64_t remote_addr) {
    SendWr wr = wr_for(s, op, local, length);
    wr.wr_id = 1;
    wr.rdma.remote_addr = remote_addr;
    wr.rdma.rkey = rkey;
    return wr;
}

// Posts `bad` with a SEND right behind it: `bad` fails with `status`, the SEND is flushed, the QP
// reports the error state, and a WR posted to it now is flushed as well.
void expect_failure(Session& s, const SendWr& bad, WcStatus status, const std::string& what) {
    SendWr behind = wr_for(s, WrOpcode::send, 0, 8);
    behind.wr_id = 2;
    const SendWr both[] = {bad, behind};
    expect(post_send(s.qp, {both, 2}) == 2, what + ": post_send refused");
    const WorkCompletion failed = wait_completion(s);
    expect(failed.wr_id == 1, what + ": the first completion is not the failing WR's");
    expect_status(failed, status, what);
    const WorkCompletion flushed = wait_completion(s);
    expect(flushed.wr_id == 2, what + ": the second completion is not the WR behind it");
    expect_status(flushed, WcStatus::wr_flush_error, what + ", the WR behind it");
    expect(s.qp.state() == QpState::err,
           what + ": the QP reports " + std::string(qp_state_name(s.qp.state())) + ", not err");
    SendWr after = wr_for(s, WrOpcode::send, 0, 8);
    after.wr_id = 3;
    post(s, after);
    const WorkCompletion late = wait_completion(s);
    expect(late.wr_id == 3, what + ": no completion for a WR posted in error");
    expect_status(late, WcStatus::wr_flush_error, what + ", a WR posted in error");
    std::printf("memif-peer client: %s -> %s, then flushed\n", what.c_str(),
                std::string(wc_status_name(status)).c_str());
}

// ---- fast-reg -----------------------------------------------------------------------------------

// The server fast-registers four 4 KiB pages at 1 MiB of its buffer, out of order, under a
// virtual range of its own choosing (seed 001: base VA = n x page size + first-byte offset).
constexpr std::uint64_t kPagesAt = 1 << 20;
constexpr std::uint32_t kPageSize = 4096;
constexpr std::uint32_t kPageCount = 4;
constexpr std::uint32_t kPageOrder[kPageCount] = {3, 0, 2, 1}; // virtual page k -> buffer page
constexpr std::uint32_t kFirstByteOffset = 100;
constexpr std::uint64_t kRegionVa = 0x7000000000ULL + kFirstByteOffset;
constexpr std::uint32_t kRegionLength = kPageCount * kPageSize - kFirstByteOffset;
constexpr mem::AccessFlags kRegionAccess =
    mem::access_local_write | mem::access_remote_write | mem::access_remote_read;

// Where byte `v` of the page-aligned virtual range (v = va - (kRegionVa - kFirstByteOffset))
// lives in the server's buffer.
std::uint8_t& page_byte(Session& s, std::uint32_t v) {
    return s.data()[kPagesAt + kPageOrder[v / kPageSize] * kPageSize + v % kPageSize];
}

// Posts FAST_REG for the pages under the region's next key and returns that key once it is live.
mem::MemoryKey fast_register(Session& s, MemoryRegionHandle& region) {
    const mem::AddressTranslator translator = mem::dpdk_translator();
    std::uint64_t pages[kPageCount];
    for (std::uint32_t k = 0; k < kPageCount; ++k) {
        pages[k] = translator.to_iova(
            reinterpret_cast<std::uintptr_t>(s.data() + kPagesAt + kPageOrder[k] * kPageSize));
        expect(pages[k] != mem::bad_iova, "no IOVA for a page of the buffer");
    }
    const mem::MemoryKey key = mem::next_key(region.lkey());
    SendWr wr;
    wr.wr_id = 50;
    wr.opcode = WrOpcode::fast_reg;
    wr.flags = send_signaled;
    wr.fast_reg.region = region.get();
    wr.fast_reg.pages = pages; // read when the WR executes: it lives until the completion below
    wr.fast_reg.page_count = kPageCount;
    wr.fast_reg.page_shift = 12;
    wr.fast_reg.first_byte_offset = kFirstByteOffset;
    wr.fast_reg.length = kRegionLength;
    wr.fast_reg.base_va = kRegionVa;
    wr.fast_reg.key = key;
    wr.fast_reg.access = kRegionAccess;
    post(s, wr);
    const WorkCompletion wc = wait_one(s);
    expect(wc.opcode == WcOpcode::fast_reg, "FAST_REG completed as another opcode");
    expect(region.rkey() == key, "the new rkey is not readable once FAST_REG completes");
    return key;
}

// The virtual bytes [from, from + length) hold stream `seed`, wherever their pages are.
void expect_region(Session& s, std::uint32_t from, std::uint32_t length, std::uint32_t seed,
                   const std::string& what) {
    for (std::uint32_t i = 0; i < length; ++i) {
        if (page_byte(s, from + i) != pattern(i, seed)) {
            die(what + ": virtual byte " + std::to_string(from + i) + " is wrong");
        }
    }
}

// Server half. The client's WRITE of the whole region (stream 51) must land page by page where
// the page list says, and nothing in front of the first-byte offset.
void serve_fast_reg(Session& s, Oob& oob) {
    g_step = "FAST_REG";
    MemoryRegionHandle region =
        check(s.pd.alloc_fast_reg_region(8, kRegionAccess), "alloc_fast_reg_region");
    std::memset(s.data() + kPagesAt, kUntouched, kPageCount * kPageSize);
    const RemoteKey key{fast_register(s, region), kRegionLength, kRegionVa};
    oob.send(&key, sizeof(key));
    oob.barrier([&] { drive(s); }); // the client WRITEs and READs through the key
    g_step = "WRITE through the fast-registered key";
    expect_region(s, kFirstByteOffset, kRegionLength, 51, g_step);
    for (std::uint32_t v = 0; v < kFirstByteOffset; ++v) {
        expect(page_byte(s, v) == kUntouched, "the WRITE reached below the first-byte offset");
    }

    g_step = "LOCAL_INV";
    SendWr inv;
    inv.wr_id = 51;
    inv.opcode = WrOpcode::local_inv;
    inv.flags = send_signaled;
    inv.local_inv.key = key.rkey;
    post(s, inv);
    expect(wait_one(s).opcode == WcOpcode::local_inv, "LOCAL_INV completed as another opcode");
    expect(!region.get()->valid(), "the region is still valid after LOCAL_INV");
    oob.barrier([&] { drive(s); }); // the client tries the dead key
    oob.barrier([&] { drive(s); });
    expect_region(s, kFirstByteOffset, kRegionLength, 51, "after a WRITE through the dead key");
    reconnect(s, oob);

    g_step = "SEND_WITH_INV";
    const RemoteKey again{fast_register(s, region), kRegionLength, kRegionVa};
    std::memset(s.data(), kUntouched, 64);
    post_receive(s, 0, 64);
    oob.send(&again, sizeof(again));
    // The client WRITEs 64 B across the first virtual page boundary, then SENDs with invalidate.
    const WorkCompletion wc = wait_one(s);
    expect(wc.opcode == WcOpcode::recv && wc.byte_len == 16, "SEND_WITH_INV's receive completion");
    expect(wc.flags.has(wc_with_inv), "the receive completion does not report an invalidation");
    expect(wc.imm_or_invalidated == again.rkey, "the completion reports rkey " +
                                                    std::to_string(wc.imm_or_invalidated) +
                                                    ", not " + std::to_string(again.rkey));
    expect(!region.get()->valid(), "the region is still valid after SEND_WITH_INV");
    expect_filled(s.data(), 16, 55, "SEND_WITH_INV's payload");
    expect_region(s, 4080, 64, 53, "WRITE before SEND_WITH_INV");
    oob.barrier([&] { drive(s); }); // checked; the client tries the invalidated key
    oob.barrier([&] { drive(s); });
    expect_region(s, 4080, 64, 53, "after a WRITE through the invalidated key");
    std::printf("memif-peer server: page placement, LOCAL_INV and SEND_WITH_INV checked\n");
}

// Client half: access through the keys the server hands over.
void fast_reg_client(Session& s, Oob& oob) {
    g_step = "WRITE and READ through the fast-registered key";
    const RemoteKey key = receive_key(s, oob);
    expect(key.length == kRegionLength && key.va == kRegionVa, "the server sent another range");
    fill(s.data(), key.length, 51);
    SendWr write = remote_wr(s, WrOpcode::rdma_write, 0, key.length, key.rkey, key.va);
    post(s, write);
    expect(wait_one(s).opcode == WcOpcode::rdma_write, "WRITE completed as another opcode");
    std::memset(s.data() + (1 << 20), 0, key.length);
    SendWr read = remote_wr(s, WrOpcode::rdma_read, 1 << 20, key.length, key.rkey, key.va);
    post(s, read);
    expect(wait_one(s).opcode == WcOpcode::rdma_read, "READ completed as another opcode");
    expect_filled(s.data() + (1 << 20), key.length, 51, "READ through the fast-registered key");
    oob.barrier([&] { drive(s); });

    oob.barrier([&] { drive(s); }); // the server has invalidated the key
    g_step = "WRITE through a key LOCAL_INV invalidated";
    fill(s.data(), 200, 52);
    expect_failure(s, remote_wr(s, WrOpcode::rdma_write, 0, 200, key.rkey, key.va),
                   WcStatus::remote_access_error, g_step);
    oob.barrier([&] { drive(s); });
    reconnect(s, oob);

    g_step = "SEND_WITH_INV";
    const RemoteKey again = receive_key(s, oob);
    expect(again.rkey != key.rkey, "FAST_REG handed out the invalidated key again");
    fill(s.data(), 64, 53);
    // Virtual bytes 4080..4143 straddle the first page boundary of the range.
    SendWr live =
        remote_wr(s, WrOpcode::rdma_write, 0, 64, again.rkey, again.va - kFirstByteOffset + 4080);
    post(s, live);
    wait_one(s);
    fill(s.data() + 4096, 16, 55);
    SendWr send = wr_for(s, WrOpcode::send_with_inv, 4096, 16);
    send.imm_or_invalidate = again.rkey;
    post(s, send);
    expect(wait_one(s).opcode == WcOpcode::send, "SEND_WITH_INV completed as another opcode");
    oob.barrier([&] { drive(s); });
    g_step = "WRITE through a key SEND_WITH_INV invalidated";
    fill(s.data(), 64, 54);
    expect_failure(s, live, WcStatus::remote_access_error, g_step);
    oob.barrier([&] { drive(s); });
}

} // namespace

int run_fast_reg(Session& s, Oob& oob, bool server) {
    if (server) {
        serve_fast_reg(s, oob);
    } else {
        fast_reg_client(s, oob);
        std::printf("memif-peer client: FAST_REG, peer WRITE/READ, LOCAL_INV, SEND_WITH_INV: ok\n");
    }
    return 0;
}

// ---- errors -------------------------------------------------------------------------------------

namespace {

constexpr std::uint32_t kServerSeed = 77; // the server's whole buffer: no failed WR may change it
constexpr std::uint64_t kReadOnlyAt = 3 << 20; // a region registered for remote read only
constexpr std::uint32_t kReadOnlyLength = 64 << 10;
constexpr std::uint64_t kLocalAt = 2 << 20; // the client's READ destination / atomic result

enum class KeyKind { whole_buffer, unknown, stale, read_only };

// One request the target must refuse, and the status IBTA gives the requester for it (rxe's too):
// an rkey, bounds or access violation is NAKed remote access error; an atomic whose address is not
// 8-byte aligned is NAKed invalid request (rxe: RESPST_ERR_MISALIGNED_ATOMIC).
struct ErrorCase {
    const char* name;
    WrOpcode opcode;
    KeyKind key;
    std::uint64_t remote_offset; // into the server's buffer
    std::uint32_t length;
    WcStatus status;
};

constexpr ErrorCase kErrorCases[] = {
    {"WRITE with an rkey no region has", WrOpcode::rdma_write, KeyKind::unknown, 0, 256,
     WcStatus::remote_access_error},
    {"READ with a stale rkey", WrOpcode::rdma_read, KeyKind::stale, 0, 64,
     WcStatus::remote_access_error},
    {"WRITE past the end of the region", WrOpcode::rdma_write, KeyKind::whole_buffer, kBuffer - 32,
     64, WcStatus::remote_access_error},
    {"READ past the end of the region", WrOpcode::rdma_read, KeyKind::whole_buffer, kBuffer - 8, 64,
     WcStatus::remote_access_error},
    {"WRITE to a read-only region", WrOpcode::rdma_write, KeyKind::read_only, kReadOnlyAt, 64,
     WcStatus::remote_access_error},
    {"fetch-add on a read-only region", WrOpcode::atomic_fetch_add, KeyKind::read_only, kReadOnlyAt,
     8, WcStatus::remote_access_error},
    {"fetch-add at a misaligned address", WrOpcode::atomic_fetch_add, KeyKind::whole_buffer,
     (1 << 20) + 4, 8, WcStatus::remote_invalid_request_error},
    {"compare-swap at a misaligned address", WrOpcode::atomic_cmp_swap, KeyKind::whole_buffer,
     (1 << 20) + 1, 8, WcStatus::remote_invalid_request_error},
};

std::uint32_t rkey_for(const Session& s, KeyKind kind, std::uint32_t read_only) {
    switch (kind) {
    case KeyKind::whole_buffer:
        return s.peer.rkey;
    case KeyKind::unknown:
        return mem::make_key(0xfffff, 1);
    case KeyKind::stale:
        return mem::next_key(s.peer.rkey); // the right index, a variant it does not have
    case KeyKind::read_only:
        return read_only;
    }
    return 0;
}

// The read-only key is good for what it allows: a READ through it works and returns the data.
void read_through(Session& s, std::uint32_t rkey) {
    std::memset(s.data() + kLocalAt, kUntouched, 4096);
    SendWr read =
        remote_wr(s, WrOpcode::rdma_read, kLocalAt, 4096, rkey, s.peer.address + kReadOnlyAt);
    post(s, read);
    wait_one(s);
    expect_filled(s.data() + kLocalAt, 4096, kServerSeed, "READ through the read-only key",
                  kReadOnlyAt);
}

void error_request(Session& s, const ErrorCase& c, std::uint32_t read_only) {
    const std::uint32_t rkey = rkey_for(s, c.key, read_only);
    if (c.key == KeyKind::read_only) {
        read_through(s, rkey);
    }
    const bool writes_locally = c.opcode != WrOpcode::rdma_write;
    fill(s.data(), c.length, 99);
    std::memset(s.data() + kLocalAt, kUntouched, c.length);
    SendWr wr = remote_wr(s, c.opcode, writes_locally ? kLocalAt : 0, c.length, rkey,
                          s.peer.address + c.remote_offset);
    if (c.opcode == WrOpcode::atomic_fetch_add || c.opcode == WrOpcode::atomic_cmp_swap) {
        wr.atomic.remote_addr = s.peer.address + c.remote_offset;
        wr.atomic.rkey = rkey;
        // Compare with what is there, so a compare-swap the target wrongly ran would change it.
        std::uint8_t current[8];
        fill(current, 8, kServerSeed, c.remote_offset);
        std::memcpy(&wr.atomic.compare_add, current, 8);
        wr.atomic.swap = 5;
    }
    expect_failure(s, wr, c.status, c.name);
    if (writes_locally) {
        expect_bytes(s.data() + kLocalAt, c.length, kUntouched,
                     std::string(c.name) + ": the local buffer");
    }
}

} // namespace

int run_errors(Session& s, Oob& oob, bool server) {
    g_step = "registering a read-only region";
    MemoryRegionHandle read_only;
    RemoteKey key;
    if (server) {
        fill(s.data(), kBuffer, kServerSeed);
        read_only = check(s.pd.register_memory(s.data() + kReadOnlyAt, kReadOnlyLength,
                                               mem::access_from_wsp(mem::WspAccess::read)),
                          "register_memory read-only");
        key = {read_only.rkey(), kReadOnlyLength, s.addr() + kReadOnlyAt};
        oob.send(&key, sizeof(key));
    } else {
        key = receive_key(s, oob);
    }
    for (const ErrorCase& c : kErrorCases) {
        g_step = c.name;
        oob.barrier([&] { drive(s); });
        if (!server) {
            error_request(s, c, key.rkey);
        }
        oob.barrier([&] { drive(s); });
        if (server) {
            expect_filled(s.data(), kBuffer, kServerSeed, std::string(c.name) + ": server memory");
            std::printf("memif-peer server: after %s the responder QP is %s\n", c.name,
                        std::string(qp_state_name(s.qp.state())).c_str());
        }
        reconnect(s, oob);
    }
    std::printf("memif-peer %s: %zu refused requests, target memory intact: ok\n",
                server ? "server" : "client", std::size(kErrorCases));
    return 0;
}

} // namespace memif_peer
