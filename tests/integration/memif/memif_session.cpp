// The shared parts of swroce-memif-peer (memif_session.hpp).
#include "memif_session.hpp"

#include <arpa/inet.h>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <netinet/in.h>
#include <unistd.h>

namespace memif_peer {

const Context* g_context = nullptr;
std::string g_step = "setup";

void die(const std::string& what) {
    std::fprintf(stderr, "memif-peer: %s (during %s)\n", what.c_str(), g_step.c_str());
    if (g_context != nullptr) {
        if (auto stats = g_context->query_stats(); stats.ok()) {
            for (const Counter& counter : stats.value()) {
                if (counter.value != 0) {
                    std::fprintf(stderr, "  %s=%llu\n", counter.name.c_str(),
                                 static_cast<unsigned long long>(counter.value));
                }
            }
        }
    }
    std::fflush(stderr);
    std::_Exit(1);
}

void check(Status status, const char* what) {
    if (!status.ok()) {
        die(std::string(what) + ": " + status.error().to_string());
    }
}

// ---- out-of-band channel ------------------------------------------------------------------------

Oob::Oob(bool server, int port) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<std::uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (server) {
        const int listener = ::socket(AF_INET, SOCK_STREAM, 0);
        const int one = 1;
        ::setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
            ::listen(listener, 1) != 0) {
            die("oob listen failed");
        }
        fd_ = ::accept(listener, nullptr, nullptr);
        ::close(listener);
    } else {
        for (int attempt = 0; attempt < 200; ++attempt) {
            fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
            if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
                break;
            }
            ::close(fd_);
            fd_ = -1;
            ::usleep(50'000);
        }
    }
    if (fd_ < 0) {
        die("oob connect failed");
    }
}

Oob::~Oob() {
    if (fd_ >= 0) {
        ::close(fd_);
    }
}

void Oob::send(const void* data, std::size_t n) {
    if (::write(fd_, data, n) != static_cast<ssize_t>(n)) {
        die("oob write failed");
    }
}

void Oob::receive(void* data, std::size_t n) {
    auto* out = static_cast<char*>(data);
    for (std::size_t got = 0; got < n;) {
        const ssize_t r = ::read(fd_, out + got, n - got);
        if (r <= 0) {
            die("oob read failed");
        }
        got += static_cast<std::size_t>(r);
    }
}

// ---- queue pairs --------------------------------------------------------------------------------

QueuePair make_qp(Session& s) {
    QpInitAttr init;
    init.pd = &s.pd;
    init.send_cq = &s.cq;
    init.recv_cq = &s.cq;
    init.caps.max_send_wr = 1024;
    init.caps.max_recv_wr = 1024;
    init.caps.max_send_sge = kMaxSge;
    init.caps.max_recv_sge = kMaxSge;
    init.caps.max_inline_data = kMaxInline;
    return check(s.context.create_qp(init), "create_qp");
}

ConnectionDescriptor connect_qp(Session& s, Oob& oob, QueuePair& qp) {
    ConnectionDescriptor mine;
    std::uint32_t length = sizeof(mine);
    check(qp.export_connection(&s.mr, &mine, &length), "export_connection");
    oob.send(&mine, sizeof(mine));
    ConnectionDescriptor wire;
    oob.receive(&wire, sizeof(wire), [&] { drive(s); });
    const ConnectionDescriptor peer = check(import_connection(&wire, sizeof(wire)), "import");
    ConnectOptions options;
    options.path_mtu = s.mtu; // what the port carries (memif: 1500-byte frames -> 1024)
    options.max_rd_atomic = 16;
    options.max_dest_rd_atomic = 16;
    options.min_rnr_timer = 1;
    check(qp.connect(peer, options), "connect");
    return peer;
}

void connect(Session& s, Oob& oob) {
    s.peer = connect_qp(s, oob, s.qp);
}

void reconnect(Session& s, Oob& oob) {
    // The fresh QP is made while the old one still holds its QPN, so it gets another one: a frame
    // of the old connection still in the memif ring then finds no QP rather than the new one.
    QueuePair fresh = make_qp(s);
    s.peer = connect_qp(s, oob, fresh);
    s.qp = std::move(fresh);
    oob.barrier([&] { drive(s); }); // both sides are at RTS before either sends
}

// ---- data path ----------------------------------------------------------------------------------

void drive(Session& s) {
    (void)poll_cq(s.cq, {});
}

WorkCompletion wait_completion(Session& s) {
    WorkCompletion wc;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (poll_cq(s.cq, {&wc, 1}) == 0) {
        if (std::chrono::steady_clock::now() > deadline) {
            die("timed out waiting for a completion");
        }
    }
    return wc;
}

WorkCompletion wait_one(Session& s) {
    const WorkCompletion wc = wait_completion(s);
    if (wc.status != WcStatus::success) {
        die("completion " + std::to_string(wc.wr_id) +
            " failed: " + std::string(wc_status_name(wc.status)));
    }
    return wc;
}

void post(Session& s, SendWr& wr) {
    if (post_send(s.qp, {&wr, 1}) != 1) {
        die("post_send refused");
    }
}

void post_receive(Session& s, std::uint64_t offset, std::uint32_t length) {
    RecvWr wr;
    wr.num_sge = 1;
    wr.sge = {s.addr() + offset, length, s.mr.lkey()};
    if (post_recv(s.qp, {&wr, 1}) != 1) {
        die("post_recv refused");
    }
}

SendWr wr_for(Session& s, WrOpcode op, std::uint64_t offset, std::uint32_t length) {
    SendWr wr;
    wr.opcode = op;
    wr.flags = send_signaled;
    wr.num_sge = 1;
    wr.sge = {s.addr() + offset, length, s.mr.lkey()};
    return wr;
}

std::uint8_t pattern(std::size_t i, std::uint32_t seed) {
    return static_cast<std::uint8_t>((i * 131 + seed * 7 + (i >> 8)) & 0xff);
}

void fill(std::uint8_t* at, std::size_t length, std::uint32_t seed, std::size_t from) {
    for (std::size_t i = 0; i < length; ++i) {
        at[i] = pattern(from + i, seed);
    }
}

void expect_filled(const std::uint8_t* at, std::size_t length, std::uint32_t seed,
                   const std::string& what, std::size_t from) {
    for (std::size_t i = 0; i < length; ++i) {
        if (at[i] != pattern(from + i, seed)) {
            die(what + ": byte " + std::to_string(i) + " of " + std::to_string(length) + " is " +
                std::to_string(at[i]) + ", not " + std::to_string(pattern(from + i, seed)));
        }
    }
}

void expect_bytes(const std::uint8_t* at, std::size_t length, std::uint8_t value,
                  const std::string& what) {
    for (std::size_t i = 0; i < length; ++i) {
        if (at[i] != value) {
            die(what + ": byte " + std::to_string(i) + " of " + std::to_string(length) + " is " +
                std::to_string(at[i]) + ", not " + std::to_string(value));
        }
    }
}

void expect_status(const WorkCompletion& wc, WcStatus status, const std::string& what) {
    if (wc.status != status) {
        die(what + ": completion " + std::to_string(wc.wr_id) + " is " +
            std::string(wc_status_name(wc.status)) + ", not " +
            std::string(wc_status_name(status)));
    }
}

std::uint64_t counter(const Session& s, const std::string& name) {
    const auto stats = check(s.context.query_stats(), "query_stats");
    for (const Counter& c : stats) {
        if (c.name == name) {
            return c.value;
        }
    }
    return 0;
}

} // namespace memif_peer
