// The measured loops of the eight tests, with perftest's method (perftest_resources.c:
// run_iter_lat_write, run_iter_lat_send, run_iter_lat, run_iter_bw, run_iter_bw_server) so each
// number means what it means in perftest. Timestamps are TSC cycles.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "options.hpp"
#include "perf_session.hpp"
#include "perftest_wire.hpp"
#include "verify_steps.hpp"

namespace prdma::perf {

struct LatencySamples {
    std::vector<std::uint64_t> timestamps; // one per iteration, at post time
    std::uint64_t duration_iterations = 0; // -D: iterations done in...
    std::uint64_t duration_cycles = 0;     // ...this many cycles
};

struct BandwidthSamples {
    // In: how the requester works (perftest's cq_mod and buffer walk).
    std::uint32_t cq_moderation = 1;
    std::uint64_t cycle_buffer = 4096;
    std::uint64_t cache_line = 64;
    // Out.
    std::vector<std::uint64_t> posted;    // per WR, at post time (-D: only the first)
    std::vector<std::uint64_t> completed; // per WR, when its (moderated) completion was seen
    std::uint64_t iterations = 0;         // WRs counted (all QPs)
    std::uint64_t duration_cycles = 0;    // -D: first post to last completion
    std::uint64_t lost = 0;               // send_bw -c UD's server: datagrams that never came
};

// write_lat / send_lat: both sides run; the client posts first. Under --verify each side fills
// what it sends and checks each message that arrives.
Status run_write_latency(PerfSession& s, const PerfOptions& o, std::uint64_t size,
                         const KeyMessage& peer, bool server, LatencySamples& out,
                         VerifyRun verify = {});
Status run_send_latency(PerfSession& s, const PerfOptions& o, std::uint64_t size, bool server,
                        LatencySamples& out, VerifyRun verify = {});
// read_lat / atomic_lat: the client posts one and waits for it; the server only serves. Under
// --verify the client checks what each one brought back.
Status run_read_latency(PerfSession& s, const PerfOptions& o, std::uint64_t size,
                        const KeyMessage& peer, LatencySamples& out, VerifyRun verify = {});
Status run_atomic_latency(PerfSession& s, const PerfOptions& o, const KeyMessage& peer,
                          LatencySamples& out, VerifyRun verify = {});

// send_bw's receiving half: what each QP has received, and how many receives it has posted (the
// rx_depth posted before the run included, and under -c UD those an earlier size's lost datagrams
// left posted). Each receive that completes is posted again until the QP has posted `per_qp`
// (UINT64_MAX: for as long as the test runs), so rx_depth stay in flight.
struct ReceiveSide {
    ReceiveSide(unsigned qps, std::uint64_t message_size, std::uint64_t messages_per_qp,
                std::uint32_t preposted)
        : size(message_size), per_qp(messages_per_qp), received(qps, 0), posted(qps, preposted) {}
    [[nodiscard]] bool complete() const;
    [[nodiscard]] std::uint64_t total() const;

    std::uint64_t size; // what a receive holds
    std::uint64_t per_qp;
    // -c UD: the length this run's datagrams complete with (the GRH included); one of another
    // length is an earlier size's that came after its run ended.
    std::uint32_t datagram_length = 0;
    std::vector<std::uint64_t> received;
    std::vector<std::uint64_t> posted;
};

// write_bw / read_bw / atomic_bw / send_bw requester: tx_depth WRs in flight per QP, one signaled
// per cq_moderation. Under --verify each WR has a local buffer of its own, filled before it is
// posted (WRITE, SEND) or checked once it completed (READ, atomic). With `rx` (send_bw -b) this
// side receives the peer's SENDs in the same loop, and an untimed run ends once they all arrived.
Status run_bandwidth(PerfSession& s, const PerfOptions& o, std::uint64_t size,
                     const std::vector<KeyMessage>& peers, BandwidthSamples& out,
                     VerifyRun verify = {}, ReceiveSide* rx = nullptr);
// Whether the sender has finished its run (send_bw -c UD); empty where every message arrives.
using SenderDone = std::function<bool()>;
// send_bw's receiver: until `rx` is complete, timed from the first arrival; or, with -D
// (--run_infinitely), for one interval of that length, counting what arrived in it. With
// `sender_done` (datagrams, which may be lost) also until the sender is done and what it sent
// last had time to arrive; `out.lost` counts what did not.
Status run_send_bandwidth_server(PerfSession& s, const PerfOptions& o, ReceiveSide& rx,
                                 BandwidthSamples& out, VerifyRun verify = {},
                                 const SenderDone& sender_done = {});
// send tests: fill each QP's receive queue before the peer may send; under --verify the buffers
// are poisoned for the messages that will land in them.
// With `waiting`, QP q has waiting[q] receives posted already and gets only the rest.
Status post_receives(PerfSession& s, const PerfOptions& o, std::uint64_t size, std::uint32_t count,
                     VerifyRun verify = {}, std::span<const std::uint64_t> waiting = {});

} // namespace prdma::perf
