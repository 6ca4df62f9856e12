// What every mode of swroce-memif-peer shares: failing loudly, the out-of-band TCP channel, the
// session's device objects, and small helpers to post, wait and check data.
//
// Both processes run the same binary and walk the same mode step by step; the OOB barrier keeps
// them in lock step, and every barrier keeps this side's device running (a one-sided READ or WRITE
// from the peer still needs our engine to answer it).
#pragma once

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <string>
#include <sys/socket.h>
#include <utility>

#include <prdma/mem/dma_memory.hpp>
#include <prdma/rdmadev/fastpath.hpp>
#include <prdma/rdmadev/rdmadev.hpp>

namespace memif_peer {

using namespace prdma;
using namespace prdma::rdma;

// The session's context, so a failure can say what the device counted.
extern const Context* g_context;
extern std::string g_step; // what the session was doing, for failure messages

// Prints `what`, the step and the device's non-zero counters, and exits with status 1.
[[noreturn]] void die(const std::string& what);

inline void expect(bool ok, const std::string& what) {
    if (!ok) {
        die(what);
    }
}

template <typename T>
T check(Result<T> result, const char* what) {
    if (!result) {
        die(std::string(what) + ": " + result.error().to_string());
    }
    return std::move(result.value());
}

void check(Status status, const char* what);

// Out-of-band channel: one TCP connection on loopback, blocking (control path only).
class Oob {
public:
    Oob(bool server, int port);
    ~Oob();
    Oob(const Oob&) = delete;
    Oob& operator=(const Oob&) = delete;
    void send(const void* data, std::size_t n);
    // Blocking: only where the peer needs nothing from our device meanwhile.
    void receive(void* data, std::size_t n);
    // Receives while `progress` keeps this side's device running.
    template <typename Progress>
    void receive(void* data, std::size_t n, Progress&& progress) {
        auto* out = static_cast<char*>(data);
        for (std::size_t got = 0; got < n;) {
            const ssize_t r = ::recv(fd_, out + got, n - got, MSG_DONTWAIT);
            if (r > 0) {
                got += static_cast<std::size_t>(r);
                continue;
            }
            if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) {
                die("oob receive failed");
            }
            progress();
        }
    }
    // Waits for the peer while `progress` keeps this side's device running.
    template <typename Progress>
    void barrier(Progress&& progress) {
        char token = 'b';
        send(&token, 1);
        receive(&token, 1, progress);
        if (token != 'b') {
            die("oob barrier out of step with the peer");
        }
    }

private:
    int fd_ = -1;
};

inline constexpr std::size_t kBuffer = 4 << 20;
// swroce's own limit (device attribute max_inline_data): the inline tests go up to it.
inline constexpr std::uint32_t kMaxInline = 256;
inline constexpr std::uint32_t kMaxSge = 4;

struct Session {
    Mtu mtu = Mtu::mtu_1024; // the port's active MTU
    Context context;
    ProtectionDomain pd;
    CompletionQueue cq;
    QueuePair qp;
    mem::DmaBuffer buffer;
    MemoryRegionHandle mr;
    ConnectionDescriptor peer{};
    std::uint8_t* data() const { return static_cast<std::uint8_t*>(buffer.data()); }
    std::uint64_t addr() const { return reinterpret_cast<std::uint64_t>(buffer.data()); }
};

// ---- queue pairs --------------------------------------------------------------------------------

// An RC QP on the session's PD and CQ (send and receive).
QueuePair make_qp(Session& s);
// Exchanges connection descriptors for `qp` with the peer's matching call and brings `qp` to RTS;
// returns the peer's descriptor (its QP, and the address and rkey of its whole buffer).
ConnectionDescriptor connect_qp(Session& s, Oob& oob, QueuePair& qp);
// The session's main QP: connect_qp into s.qp / s.peer.
void connect(Session& s, Oob& oob);
// A QP in error stays there (IBTA): both sides replace their main QP with a fresh connected pair.
void reconnect(Session& s, Oob& oob);

// ---- data path ----------------------------------------------------------------------------------

// Runs the device without taking completions (a zero-count poll drives the queue group).
void drive(Session& s);
// The next completion, whatever its status; dies after 20 s without one.
WorkCompletion wait_completion(Session& s);
// The next completion, which must be a success.
WorkCompletion wait_one(Session& s);
void post(Session& s, SendWr& wr);
void post_receive(Session& s, std::uint64_t offset, std::uint32_t length);
SendWr wr_for(Session& s, WrOpcode op, std::uint64_t offset, std::uint32_t length);

// Kept as the verify mode has always used it; the newer modes go through fill() / expect_filled().
std::uint8_t pattern(std::size_t i, std::uint32_t seed);
// Byte i of the stream `seed` is pattern(i, seed): what the producer writes and the consumer
// checks.
void fill(std::uint8_t* at, std::size_t length, std::uint32_t seed, std::size_t from = 0);
// Dies naming `what` and the first byte that is not stream `seed` from position `from`.
void expect_filled(const std::uint8_t* at, std::size_t length, std::uint32_t seed,
                   const std::string& what, std::size_t from = 0);
// Dies naming `what` and the first byte that is not `value`.
void expect_bytes(const std::uint8_t* at, std::size_t length, std::uint8_t value,
                  const std::string& what);
// Dies unless `wc` has status `status`, naming `what`.
void expect_status(const WorkCompletion& wc, WcStatus status, const std::string& what);
// A device counter by name (0 when it does not exist).
std::uint64_t counter(const Session& s, const std::string& name);

// ---- modes --------------------------------------------------------------------------------------
// Each returns 0 on success and dies otherwise; the client drives, the server serves and checks.

int run_imm(Session& s, Oob& oob, bool server); // memif_data_modes.cpp
int run_inline_sge(Session& s, Oob& oob, bool server);
int run_many_qps(Session& s, Oob& oob, bool server);
int run_fast_reg(Session& s, Oob& oob, bool server); // memif_key_modes.cpp
int run_errors(Session& s, Oob& oob, bool server);
// The server's device runs progress=service and its thread sleeps (memif_progress_modes.cpp).
int run_sleeping_target(Session& s, Oob& oob, bool server);

} // namespace memif_peer
