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
#include <arpa/inet.h>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <getopt.h>
#include <netdb.h>
#include <string>
#include <sys/socket.h>
#include <unistd.h>
#include <vector>

#include <prdma/eal.hpp>
#include <prdma/mem/dma_memory.hpp>
#include <prdma/rdmadev/fastpath.hpp>
#include <prdma/rdmadev/rdmadev.hpp>

using namespace prdma;

namespace {

struct Options {
    std::string port = "18515"; // ibv_rc_pingpong's default
    std::uint32_t size = 4096;
    unsigned iters = 1000;
    std::string server; // empty: this side is the server
};

[[noreturn]] void fail(const std::string& message) {
    std::fprintf(stderr, "rc_pingpong: %s\n", message.c_str());
    std::exit(1);
}

template <typename T>
T must(Result<T> result, const char* what) {
    if (!result) {
        fail(std::string(what) + ": " + result.error().to_string());
    }
    return std::move(result.value());
}

void check(const Status& status, const char* what) {
    if (!status.ok()) {
        fail(std::string(what) + ": " + status.error().to_string());
    }
}

Options parse(int argc, char** argv) {
    Options o;
    optind = 1;
    int c = 0;
    while ((c = getopt(argc, argv, "p:s:n:h")) != -1) {
        switch (c) {
        case 'p':
            o.port = optarg;
            break;
        case 's':
            o.size = static_cast<std::uint32_t>(std::strtoul(optarg, nullptr, 0));
            break;
        case 'n':
            o.iters = static_cast<unsigned>(std::strtoul(optarg, nullptr, 0));
            break;
        default:
            std::fprintf(stderr, "usage: rc_pingpong [EAL options] -- [-p port] [-s size] "
                                 "[-n iters] [server-host]\n");
            std::exit(c == 'h' ? 0 : 2);
        }
    }
    if (o.size == 0 || o.iters == 0) {
        fail("-s and -n need a positive number");
    }
    if (optind < argc) {
        o.server = argv[optind];
    }
    return o;
}

// The out-of-band channel: the client connects to the server's TCP port.
int tcp_connect(const Options& o) {
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = o.server.empty() ? AI_PASSIVE : 0;
    addrinfo* list = nullptr;
    if (int rc = getaddrinfo(o.server.empty() ? nullptr : o.server.c_str(), o.port.c_str(), &hints,
                             &list);
        rc != 0) {
        fail(std::string("getaddrinfo: ") + gai_strerror(rc));
    }
    int fd = socket(list->ai_family, SOCK_STREAM, 0);
    if (o.server.empty()) {
        const int on = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
        if (bind(fd, list->ai_addr, list->ai_addrlen) != 0 || listen(fd, 1) != 0) {
            fail("cannot listen on port " + o.port + ": " + std::strerror(errno));
        }
        const int peer = accept(fd, nullptr, nullptr);
        close(fd);
        fd = peer;
    } else {
        // The server may still be starting its EAL: try for ten seconds.
        int tries = 0;
        while (connect(fd, list->ai_addr, list->ai_addrlen) != 0) {
            if (++tries == 100) {
                fail("cannot reach " + o.server + ":" + o.port + ": " + std::strerror(errno));
            }
            usleep(100'000);
        }
    }
    freeaddrinfo(list);
    return fd;
}

void exchange(int fd, const void* mine, void* theirs, std::size_t length) {
    if (write(fd, mine, length) != static_cast<ssize_t>(length)) {
        fail("sending the descriptor failed");
    }
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
    int consumed = 0;
    Eal eal = must(Eal::start_from_argv(argc, argv, &consumed), "EAL");
    std::vector<char*> rest{argv[0]};
    rest.insert(rest.end(), argv + consumed, argv + argc);
    const Options o = parse(static_cast<int>(rest.size()), rest.data());

    rdma::Context context = must(rdma::Context::open(0), "open the first rdma device");
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
    const int fd = tcp_connect(o);
    exchange(fd, mine, theirs, length);
    check(qp.connect(must(rdma::import_connection(theirs, length), "import")), "connect");

    const rdma::Sge sge{reinterpret_cast<std::uint64_t>(buffer.data()), o.size, mr.lkey()};
    const rdma::RecvWr recv{.wr_id = 1, .num_sge = 1, .sge = sge};
    rdma::SendWr send;
    send.wr_id = 2;
    send.opcode = rdma::WrOpcode::send;
    send.flags = rdma::send_signaled;
    send.num_sge = 1;
    send.sge = sge;
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
