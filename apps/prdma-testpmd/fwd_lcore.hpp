// A forwarding lcore (testpmd's fwd_lcore): its CQ (one queue group of the device), its streams,
// and the two words the main lcore and it talk through. The main lcore writes `command`; the lcore
// answers in `state`. Everything else is the lcore's, except while it is parked: then the main
// lcore may change streams and settings, and the park/unpark pair orders those writes.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>

#include <prdma/rdmadev/queue_handle.hpp>
#include <prdma/rdmadev/rdmadev.hpp>
#include <prdma/rdmadev/work_request.hpp>

#include "fwd_engine.hpp"
#include "stream.hpp"

namespace prdma::testpmd {

inline constexpr unsigned max_streams_per_lcore = 64;
inline constexpr unsigned max_burst = 64;
// udsend's destinations: a fixed array, so the lcores read it without a lock and the main lcore
// grows it only while they are parked. A destroyed peer QP stays in it (its datagrams are dropped
// and counted there, as any fabric drops them).
inline constexpr unsigned max_ud_dests = 256;

// Where udsend's datagrams go: a UD QP of the peer, through the session's address handle for it.
struct UdDest {
    void* ah = nullptr; // AddressHandle::wr_handle()
    std::uint32_t qpn = 0;
};

enum class LcoreCommand : std::uint8_t { idle, forward, drain, park, exit };
enum class LcoreState : std::uint8_t { starting, idle, forwarding, drained, parked, exited };

// Forwarding settings, copied into each lcore at `start` (set burst, size, inline, signal-every).
struct FwdConfig {
    std::uint32_t burst = 32;
    std::uint32_t size = 64;
    std::uint32_t inline_size = 0;
    std::uint32_t signal_every = 16;
};

// One send work request the main lcore hands the lcore that owns the QP (fast-register,
// invalidate): the lcore posts it between bursts and reports its completion.
struct Mailbox {
    enum class State : std::uint8_t { empty, posted, in_flight, done };
    std::atomic<State> state{State::empty};
    unsigned slot = 0;
    rdma::SendWr wr;
    bool refused = false;
    rdma::WcStatus status = rdma::WcStatus::success;
};

struct FwdLcore {
    unsigned lcore_id = 0;
    unsigned group = 0; // the queue group its CQ and QPs are on
    LcoreCq cq;
    // The CQ's handle, destroyed by this lcore as it exits: it owns the queue group, so the destroy
    // is done at once, and no poll of it can follow (from the main lcore the destroy would pend
    // on this lcore and free the CQ under its next poll).
    rdma::CompletionQueue* cq_handle = nullptr;
    std::array<Stream, max_streams_per_lcore> streams{};
    unsigned stream_count = 0;
    const FwdEngine* engine = nullptr;
    FwdConfig config;
    bool tx_first = false;
    bool echo = false;        // receives are sent back (echo forwarding)
    bool needs_recvs = false; // a stream was connected: post its receives
    // --srq: the lcore's shared receive queue and its slots (srq_slots of max_message bytes).
    bool use_srq = false;
    LcoreSrq srq;
    std::uint8_t* srq_buffer = nullptr;
    std::uint32_t srq_lkey = 0;
    // Slots below this went in once; completions give them back since. Filling goes on from here
    // when the SRQ refused one.
    std::uint32_t srq_fill_next = 0;
    std::uint64_t drain_deadline = 0;
    // --qp-type ud: every peer QP connected so far; each stream sends round-robin to all of them.
    std::array<UdDest, max_ud_dests> ud_dests{};
    unsigned ud_dest_count = 0;
    std::atomic<LcoreCommand> command{LcoreCommand::idle};
    std::atomic<LcoreState> state{LcoreState::starting};
    Mailbox mailbox;
    std::array<rdma::WorkCompletion, max_burst> wcs{};
    std::array<rdma::SendWr, max_burst> wrs{};
};

// The lcore's loop (rte_eal_remote_launch's function); returns on LcoreCommand::exit.
int fwd_lcore_main(void* arg);

// Fast path, shared by the engines.
// Posts up to `burst` WRs of `opcode` on the stream, within its send queue's room.
void post_tx(FwdLcore& lcore, Stream& stream, rdma::WrOpcode opcode);
// Polls the lcore's CQ once (which drives its queue group) and accounts every completion;
// returns how many there were.
std::uint16_t poll_completions(FwdLcore& lcore);
// Posts the receives a connected stream lacks (one per receive slot).
void post_missing_recvs(FwdLcore& lcore);

// The generator engines (write, read, send, atomic): nothing to prepare; each burst posts one
// opcode on every enabled stream and polls once.
inline void no_begin(FwdLcore& /*lcore*/, bool /*tx_first*/) {}

template <rdma::WrOpcode Opcode>
void generator_burst(FwdLcore& lcore) {
    for (unsigned i = 0; i < lcore.stream_count; ++i) {
        Stream& stream = lcore.streams[i];
        if (stream.enabled) {
            post_tx(lcore, stream, Opcode);
        }
    }
    poll_completions(lcore);
}

} // namespace prdma::testpmd
