// write_read: fast-register, remote WRITE and READ, invalidate. The server fast-registers a page
// list of its buffer under a new key and hands the rkey to the client, which WRITEs a pattern
// through it, READs it back and checks every byte; the server then invalidates the key
// (LOCAL_INV), `iters` times, each registration under a new key variant. Last, the client WRITEs
// through the dead key and gets the remote access error that proves the invalidation.
//
//   server:  write_read [EAL options] -- [-p port] [-s size] [-n iters]
//   client:  write_read [EAL options] -- [-p port] [-s size] [-n iters] server-host
//
// e.g. over memif between two processes on one host (the server first; one line each):
//   write_read -l 0 --vdev=net_memif0,role=server,socket=/tmp/wr.sock,socket-abstract=no
//       --vdev=rdma_swroce0,port=net_memif0,ip=10.0.0.1
//   write_read -l 1 --vdev=net_memif0,role=client,socket=/tmp/wr.sock,socket-abstract=no
//       --vdev=rdma_swroce0,port=net_memif0,ip=10.0.0.2 -- 127.0.0.1
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string>
#include <sys/socket.h>
#include <unistd.h>
#include <vector>

#include <prdma/eal.hpp>
#include <prdma/mem/dma_memory.hpp>
#include <prdma/rdmadev/fastpath.hpp>
#include <prdma/rdmadev/rdmadev.hpp>

#include "example_common.hpp"

using namespace prdma;
using namespace example;

namespace {

constexpr std::uint32_t page_size = 4096; // the page list's granularity (page_shift 12)

constexpr const char* usage_text =
    "Usage: write_read [EAL options] -- [-p port] [-s size] [-n iters] [server-host]\n"
    "The server fast-registers a buffer for remote WRITE and READ; the client (given the\n"
    "server's host) writes a pattern through the rkey, reads it back and checks every byte.\n"
    "The server then invalidates the key; a WRITE through it fails with a remote access error.\n"
    "\n"
    "Options (after --; both sides give the same -s and -n):\n"
    "  -p, --port=<port>    TCP port of the descriptor exchange (default 18515)\n"
    "  -s, --size=<bytes>   bytes registered, written and read (default 4096, up to 1 GiB)\n"
    "  -n, --iters=<n>      registrations, each under a new key variant (default 3)\n"
    "  -h, --help           this text (also without --)\n";

// Receives `length` bytes while polling the CQ: this side's device serves the peer's WRITEs and
// READs (and ACKs) only while this process drives it.
void receive(int fd, rdma::CompletionQueue& cq, void* data, std::size_t length) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    std::size_t got = 0;
    while (got < length) {
        const ssize_t n = recv(fd, static_cast<char*>(data) + got, length - got, MSG_DONTWAIT);
        if (n > 0) {
            got += static_cast<std::size_t>(n);
        } else if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) {
            fail("the peer closed the connection (did it fail?)");
        } else if (std::chrono::steady_clock::now() > deadline) {
            fail("no word from the peer in 20 s");
        }
        (void)rdma::poll_cq(cq, {}); // drives the device without taking a completion
    }
}

// The next completion, whatever its status: the caller says which one it expects.
rdma::WorkCompletion next_completion(rdma::CompletionQueue& cq) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    rdma::WorkCompletion wc;
    while (rdma::poll_cq(cq, {&wc, 1}) == 0) {
        if (std::chrono::steady_clock::now() > deadline) {
            fail("no completion in 10 s (is the peer still running?)");
        }
    }
    return wc;
}

void post_and_complete(rdma::QueuePair& qp, rdma::CompletionQueue& cq, const rdma::SendWr& wr,
                       const char* what) {
    if (const rdma::PostResult posted = rdma::post_send(qp, {&wr, 1}); posted.posted != 1) {
        fail(std::string(what) + " refused: " + std::string(status_name(posted.reason)));
    }
    const rdma::WorkCompletion wc = next_completion(cq);
    if (wc.status != rdma::WcStatus::success) {
        fail(std::string(what) + " failed: " + std::string(rdma::wc_status_name(wc.status)));
    }
}

// What the server grants for one registration.
struct Grant {
    std::uint64_t address = 0;
    std::uint32_t rkey = 0;
    std::uint32_t length = 0;
};

// A prime period, so a page placed wrongly shows (4096 is no multiple of 251); a new phase each
// round, so bytes left over from the round before show too.
std::uint8_t pattern(std::size_t i, unsigned round) {
    return static_cast<std::uint8_t>(i % 251 + std::size_t{round} * 37);
}

int serve(const Options& o, rdma::ProtectionDomain& pd, rdma::CompletionQueue& cq,
          rdma::QueuePair& qp, int fd) {
    const std::uint32_t pages = (o.size + page_size - 1) / page_size;
    mem::DmaBuffer buffer =
        must(mem::DmaBuffer::allocate(std::size_t{pages} * page_size, page_size), "memory");
    constexpr mem::AccessFlags access =
        mem::access_local_write | mem::access_remote_write | mem::access_remote_read;
    // One region for every round: a fast-register region is allocated once and re-pointed by
    // work requests, which is what makes per-I/O registration cheap.
    rdma::MemoryRegionHandle region =
        must(pd.alloc_fast_reg_region(pages, access), "alloc_fast_reg_region");
    // The device reads the list when the FAST_REG executes, so it lives until the completion.
    std::vector<std::uint64_t> page_list(pages);
    const mem::AddressTranslator translator = mem::dpdk_translator();
    auto* bytes = static_cast<std::uint8_t*>(buffer.data());
    for (std::uint32_t k = 0; k < pages; ++k) {
        page_list[k] = translator.to_iova(
            reinterpret_cast<std::uintptr_t>(bytes + std::size_t{k} * page_size));
        if (page_list[k] == mem::bad_iova) {
            fail("a page of the buffer has no IOVA");
        }
    }
    int rc = 0;
    for (unsigned round = 0; round < o.iters; ++round) {
        rdma::FastRegFields map;
        map.region = region.get();
        map.pages = page_list.data();
        map.page_count = pages;
        map.page_shift = 12;
        map.length = o.size;
        // The peer addresses the region by the buffer's own address; any page-aligned VA would
        // do, since the page list, not the address, says where the bytes land.
        map.base_va = reinterpret_cast<std::uint64_t>(bytes);
        // A new variant each time: an rkey a peer kept from an earlier round must not reach
        // this one's pages.
        map.key = mem::next_key(region.lkey());
        map.access = access;
        const rdma::SendWr reg = rdma::fast_reg_wr(round, map);
        post_and_complete(qp, cq, reg, "FAST_REG");
        const Grant grant{map.base_va, region.rkey(), o.size};
        send_all(fd, &grant, sizeof(grant));
        std::printf("round %u: %u bytes (%u pages) fast-registered as rkey 0x%08x\n", round + 1,
                    o.size, pages, grant.rkey);

        char done = 0; // the client has written and read back
        receive(fd, cq, &done, 1);
        // The READ checked the round trip; this checks the bytes reached the pages listed.
        for (std::uint32_t i = 0; i < o.size; ++i) {
            if (bytes[i] != pattern(i, round)) {
                std::fprintf(stderr, "write_read: round %u: byte %u of the buffer is wrong\n",
                             round + 1, i);
                rc = 1;
                break;
            }
        }

        post_and_complete(qp, cq, rdma::local_inv_wr(round, grant.rkey), "LOCAL_INV");
        send_all(fd, "i", 1);
        std::printf("round %u: rkey 0x%08x invalidated\n", round + 1, grant.rkey);
    }
    return rc;
}

int client(const Options& o, rdma::ProtectionDomain& pd, rdma::CompletionQueue& cq,
           rdma::QueuePair& qp, int fd) {
    // The first half is the WRITE's source, the second the READ's destination, which the device
    // writes into: hence local write access.
    mem::DmaBuffer buffer = must(mem::DmaBuffer::allocate(2 * std::size_t{o.size}), "memory");
    rdma::MemoryRegionHandle mr =
        must(pd.register_memory(buffer.data(), buffer.size(), mem::access_local_write), "register");
    auto* source = static_cast<std::uint8_t*>(buffer.data());
    std::uint8_t* target = source + o.size;
    const rdma::Sge from{reinterpret_cast<std::uint64_t>(source), o.size, mr.lkey()};
    const rdma::Sge into{reinterpret_cast<std::uint64_t>(target), o.size, mr.lkey()};
    rdma::SendWr write;

    Grant grant;
    for (unsigned round = 0; round < o.iters; ++round) {
        receive(fd, cq, &grant, sizeof(grant));
        if (grant.length != o.size) {
            fail("the server registered " + std::to_string(grant.length) + " bytes, not " +
                 std::to_string(o.size) + ": give both sides the same -s");
        }
        for (std::uint32_t i = 0; i < o.size; ++i) {
            source[i] = pattern(i, round);
        }
        std::memset(target, 0, o.size);
        write = rdma::write_wr(round, from, grant.address, grant.rkey);
        post_and_complete(qp, cq, write, "WRITE");
        post_and_complete(qp, cq, rdma::read_wr(round, into, grant.address, grant.rkey), "READ");
        if (std::memcmp(source, target, o.size) != 0) {
            fail("round " + std::to_string(round + 1) + ": the READ returned other bytes");
        }
        std::printf("round %u: %u bytes written and read back through rkey 0x%08x: ok\n", round + 1,
                    o.size, grant.rkey);
        send_all(fd, "c", 1);
        char invalidated = 0;
        receive(fd, cq, &invalidated, 1);
    }

    // The key is dead at the server: its responder refuses the WRITE with a NAK, and both QPs go
    // to error, which is why this comes last.
    if (rdma::post_send(qp, {&write, 1}) != 1) {
        fail("the last WRITE was refused");
    }
    const rdma::WorkCompletion wc = next_completion(cq);
    if (wc.status != rdma::WcStatus::remote_access_error) {
        std::fprintf(stderr, "write_read: WRITE through the invalidated rkey: %s, not %s\n",
                     rdma::wc_status_name(wc.status).data(),
                     rdma::wc_status_name(rdma::WcStatus::remote_access_error).data());
        return 1;
    }
    std::printf("WRITE through the invalidated rkey 0x%08x: %s (expected)\n", grant.rkey,
                rdma::wc_status_name(wc.status).data());
    return 0;
}

// Tells the peer this side is done and keeps driving the device until the peer says so too: the
// peer may still need this side's ACKs or NAKs.
void finish(int fd, rdma::CompletionQueue& cq) {
    send_all(fd, "d", 1);
    char theirs = 0;
    receive(fd, cq, &theirs, 1);
    close(fd);
}

} // namespace

int main(int argc, char** argv) {
    Options defaults;
    defaults.iters = 3;
    const Options o = parse(argc, argv, defaults, usage_text);
    int consumed = 0;
    Eal eal = must(Eal::start_from_argv(argc, argv, &consumed), "EAL");

    rdma::Context context = must(rdma::Context::open(0), "open the first rdma device");
    // Traffic starts once the link is up: posted before, it would be retried into a dead link.
    wait_port_active(context, std::chrono::seconds(20));
    rdma::ProtectionDomain pd = must(context.alloc_pd(), "PD");
    rdma::CompletionQueue cq = must(context.create_cq(16), "CQ");
    rdma::QueuePair qp = must(context.create_qp({.pd = &pd, .send_cq = &cq, .recv_cq = &cq}), "QP");

    // Descriptors cross over TCP as rc_pingpong's do; the keys follow, one per registration.
    std::uint8_t mine[sizeof(rdma::ConnectionDescriptor)];
    std::uint8_t theirs[sizeof(rdma::ConnectionDescriptor)];
    std::uint32_t length = sizeof(mine);
    check(qp.export_connection(nullptr, mine, &length), "export");
    const int fd = tcp_connect(o.server, o.port);
    // The messages are small and often back to back (an "invalidated" and the next key): Nagle
    // would hold the second for the peer's delayed ACK, 40 ms a round.
    const int on = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
    send_all(fd, mine, length);
    receive(fd, cq, theirs, length);
    check(qp.connect(must(rdma::import_connection(theirs, length), "import")), "connect");

    const int rc = o.server.empty() ? serve(o, pd, cq, qp, fd) : client(o, pd, cq, qp, fd);
    finish(fd, cq);
    return rc;
}
