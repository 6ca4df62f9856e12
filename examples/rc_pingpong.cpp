// rc_pingpong: prdma's ibv_rc_pingpong. Two processes connect an RC queue pair each, exchanging
// their connection descriptors over TCP, then bounce a SEND back and forth: the client sends,
// the server receives and sends back, `iters` times, and both print the round trips.
//
//   server:  rc_pingpong [EAL options] -- [-p port] [-s size] [-n iters]
//   client:  rc_pingpong [EAL options] -- [-p port] [-s size] [-n iters] server-host
//
// e.g. over memif between two processes on one host (the server first; one line each):
//   rc_pingpong -l 0 --vdev=net_memif0,role=server,socket=/tmp/pp.sock,socket-abstract=no
//       --vdev=rdma_swroce0,port=net_memif0,ip=10.0.0.1
//   rc_pingpong -l 1 --vdev=net_memif0,role=client,socket=/tmp/pp.sock,socket-abstract=no
//       --vdev=rdma_swroce0,port=net_memif0,ip=10.0.0.2 -- 127.0.0.1
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <sys/socket.h>
#include <unistd.h>

#include <prdma/eal.hpp>
#include <prdma/mem/dma_memory.hpp>
#include <prdma/rdmadev/fastpath.hpp>
#include <prdma/rdmadev/rdmadev.hpp>

#include "example_common.hpp"

using namespace prdma;
using namespace example;

namespace {

constexpr const char* usage_text =
    "Usage: rc_pingpong [EAL options] -- [-p port] [-s size] [-n iters] [server-host]\n"
    "Bounces a SEND between two processes over an RC queue pair: the client (given the\n"
    "server's host) sends, the server sends back; both print the round trips.\n"
    "\n"
    "Options (after --; both sides give the same -s and -n):\n"
    "  -p, --port=<port>    TCP port of the descriptor exchange (default 18515)\n"
    "  -s, --size=<bytes>   message size (default 4096, up to 1 GiB)\n"
    "  -n, --iters=<n>      round trips (default 1000)\n"
    "  -h, --help           this text (also without --)\n";

void exchange(int fd, const void* mine, void* theirs, std::size_t length) {
    send_all(fd, mine, length);
    std::size_t got = 0;
    while (got < length) {
        const ssize_t n = read(fd, static_cast<char*>(theirs) + got, length - got);
        if (n <= 0) {
            fail("the peer closed the connection during the exchange");
        }
        got += static_cast<std::size_t>(n);
    }
}

// Completions in whatever order they come (a reply may overtake the ACK of the SEND it answers):
// counts both kinds until `sends` and `recvs` are reached; a failed one ends the program.
struct Progress {
    unsigned sends = 0;
    unsigned recvs = 0;
};

void wait_for(rdma::CompletionQueue& cq, Progress& done, unsigned sends, unsigned recvs,
              std::uint32_t size) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (done.sends < sends || done.recvs < recvs) {
        rdma::WorkCompletion wc;
        if (rdma::poll_cq(cq, {&wc, 1}) == 0) {
            if (std::chrono::steady_clock::now() > deadline) {
                fail("no completion in 10 s (is the peer still running?)");
            }
            continue;
        }
        if (wc.status != rdma::WcStatus::success) {
            fail("work request failed: " + std::string(rdma::wc_status_name(wc.status)));
        }
        if (wc.opcode != rdma::WcOpcode::recv) {
            ++done.sends;
        } else if (wc.byte_len != size) {
            fail("received " + std::to_string(wc.byte_len) + " bytes, not " + std::to_string(size));
        } else {
            ++done.recvs;
        }
    }
}

// Tells the peer this side is done and polls (so ACKs still go out) until the peer says so too.
void finish(int fd, rdma::CompletionQueue& cq) {
    const char done = 'd';
    if (write(fd, &done, 1) != 1) {
        fail("the peer closed the connection before the end");
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    char theirs = 0;
    while (recv(fd, &theirs, 1, MSG_DONTWAIT) != 1) {
        if (errno != EAGAIN && errno != EWOULDBLOCK) {
            fail("the peer closed the connection before the end");
        }
        rdma::WorkCompletion wc;
        (void)rdma::poll_cq(cq, {&wc, 1}); // drives the device; nothing more is expected
        if (std::chrono::steady_clock::now() > deadline) {
            fail("the peer did not finish within 10 s");
        }
    }
    close(fd);
}

} // namespace

int main(int argc, char** argv) {
    const Options o = parse(argc, argv, {}, usage_text);
    int consumed = 0;
    Eal eal = must(Eal::start_from_argv(argc, argv, &consumed), "EAL");

    rdma::Context context = must(rdma::Context::open(0), "open the first rdma device");
    // Traffic starts once the link is up: posted before, it would be retried into a dead link.
    wait_port_active(context, std::chrono::seconds(20));
    rdma::ProtectionDomain pd = must(context.alloc_pd(), "PD");
    rdma::CompletionQueue cq = must(context.create_cq(16), "CQ");
    rdma::QueuePair qp = must(context.create_qp({.pd = &pd, .send_cq = &cq, .recv_cq = &cq}), "QP");
    // One buffer for both directions, as ibv_rc_pingpong: a side sends only what it received.
    mem::DmaBuffer buffer = must(mem::DmaBuffer::allocate(o.size), "memory");
    rdma::MemoryRegionHandle mr =
        must(pd.register_memory(buffer.data(), buffer.size(), mem::access_local_write), "register");

    // Descriptors cross over TCP; the byte after them says "my receive is posted".
    std::uint8_t mine[sizeof(rdma::ConnectionDescriptor)];
    std::uint8_t theirs[sizeof(rdma::ConnectionDescriptor)];
    std::uint32_t length = sizeof(mine);
    check(qp.export_connection(nullptr, mine, &length), "export");
    const int fd = tcp_connect(o.server, o.port);
    exchange(fd, mine, theirs, length);
    check(qp.connect(must(rdma::import_connection(theirs, length), "import")), "connect");

    const rdma::Sge sge{reinterpret_cast<std::uint64_t>(buffer.data()), o.size, mr.lkey()};
    const rdma::RecvWr recv = rdma::recv_wr(1, sge);
    const rdma::SendWr send = rdma::send_wr(2, sge);
    if (rdma::post_recv(qp, {&recv, 1}) != 1) {
        fail("the first receive was refused");
    }
    char ready = 'r';
    exchange(fd, &ready, &ready, 1);

    // The client sends and waits for the reply; the server waits, then replies. Each side posts
    // its next receive before the SEND that lets the peer answer.
    const bool client = !o.server.empty();
    const auto start = std::chrono::steady_clock::now();
    Progress done;
    for (unsigned i = 0; i < o.iters; ++i) {
        if (client && rdma::post_send(qp, {&send, 1}) != 1) {
            fail("post_send refused");
        }
        wait_for(cq, done, 0, i + 1, o.size);
        if (rdma::post_recv(qp, {&recv, 1}) != 1) {
            fail("post_recv refused");
        }
        if (!client && rdma::post_send(qp, {&send, 1}) != 1) {
            fail("post_send refused");
        }
    }
    wait_for(cq, done, o.iters, o.iters, o.size);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    // The last SEND is acknowledged by the peer's device, which runs in the peer's process: each
    // side keeps polling until the other says it is done, and only then closes its port.
    finish(fd, cq);
    const double bytes = 2.0 * o.size * o.iters;
    std::printf("%.0f bytes in %.2f seconds = %.2f Mbit/sec\n", bytes, seconds,
                bytes * 8 / seconds / 1e6);
    std::printf("%u iters in %.2f seconds = %.2f usec/iter\n", o.iters, seconds,
                seconds * 1e6 / o.iters);
    return 0;
}
