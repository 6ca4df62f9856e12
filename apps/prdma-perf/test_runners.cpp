#include "test_runners.hpp"

#include <algorithm>
#include <numeric>

#include <rte_cycles.h>

#include "buffer_walk.hpp"
#include "verify_steps.hpp"

namespace prdma::perf {

namespace {

using rdma::RecvWr;
using rdma::SendWr;
using rdma::WcStatus;
using rdma::WorkCompletion;
using rdma::WrOpcode;

// A loop that makes no progress for this long has lost its peer.
constexpr std::uint64_t stall_seconds = 10;

// Checks the clock only every few thousand spins: rte_rdtsc is cheap, but not free.
class Watchdog {
public:
    Watchdog() : limit_(rte_get_tsc_hz() * stall_seconds), last_(rte_rdtsc()) {}
    void progressed() { last_ = rte_rdtsc(); }
    [[nodiscard]] bool expired() {
        if (++spins_ % 4096 != 0) {
            return false;
        }
        return rte_rdtsc() - last_ > limit_;
    }

private:
    std::uint64_t limit_;
    std::uint64_t last_;
    std::uint64_t spins_ = 0;
};

Error stalled(const char* waiting_for) {
    return {StatusCode::not_connected, std::string("no progress for ") +
                                           std::to_string(stall_seconds) + " s while waiting for " +
                                           waiting_for + " (is the peer still running?)"};
}

Error failed(const WorkCompletion& wc) {
    return {StatusCode::internal, "work request " + std::to_string(wc.wr_id) +
                                      " failed: " + std::string(rdma::wc_status_name(wc.status))};
}

bool is_receive(const WorkCompletion& wc) {
    return wc.opcode == rdma::WcOpcode::recv || wc.opcode == rdma::WcOpcode::recv_rdma_with_imm;
}

// The CQ is shared by sends and receives; this keeps count of both kinds.
struct Completions {
    std::uint64_t sends = 0;
    std::uint64_t receives = 0;
    std::uint32_t last_receive_length = 0; // send_lat has one receive in flight at a time
};

Status poll_into(PerfSession& s, Completions& c, Watchdog& watchdog) {
    WorkCompletion wcs[16];
    const std::uint16_t n = rdma::poll_cq(s.cq(), {wcs, 16});
    for (std::uint16_t i = 0; i < n; ++i) {
        if (wcs[i].status != WcStatus::success) {
            return failed(wcs[i]);
        }
        if (is_receive(wcs[i])) {
            ++c.receives;
            c.last_receive_length = wcs[i].byte_len;
        } else {
            ++c.sends;
        }
    }
    if (n != 0) {
        watchdog.progressed();
    }
    return {};
}

Status post_one(PerfSession& s, unsigned qp, const SendWr& wr) {
    if (const rdma::PostResult posted = rdma::post_send(s.qp(qp), {&wr, 1}); posted.posted != 1) {
        return Error(posted.reason, "the send queue refused a work request");
    }
    return {};
}

// The first `size` bytes of the send half: what latency tests send from (or read into).
rdma::Sge send_sge(PerfSession& s, std::uint64_t size) {
    return {reinterpret_cast<std::uint64_t>(s.send_half(0)), static_cast<std::uint32_t>(size),
            s.lkey()};
}

// Posts one WR and waits for its completion (read_lat, atomic_lat).
Status post_and_wait(PerfSession& s, const SendWr& wr, Watchdog& watchdog) {
    if (Status st = post_one(s, 0, wr); !st.ok()) {
        return st;
    }
    WorkCompletion wc;
    while (rdma::poll_cq(s.cq(), {&wc, 1}) == 0) {
        if (watchdog.expired()) {
            return stalled("a completion");
        }
    }
    watchdog.progressed();
    return wc.status == WcStatus::success ? Status{} : Status{failed(wc)};
}

// read_lat / atomic_lat: `-n` iterations, or as many as fit in `-D` seconds. before(k) and
// after(k) run around WR k: --verify's poison and check, nothing otherwise.
template <typename Before, typename After>
Status run_one_at_a_time(PerfSession& s, const PerfOptions& o, const SendWr& wr,
                         LatencySamples& out, Before before, After after) {
    Watchdog watchdog;
    if (o.duration_seconds != 0) {
        const std::uint64_t start = rte_rdtsc();
        const std::uint64_t end = start + rte_get_tsc_hz() * o.duration_seconds;
        std::uint64_t iterations = 0;
        std::uint64_t now = start;
        while (now < end) {
            before(iterations);
            if (Status st = post_and_wait(s, wr, watchdog); !st.ok()) {
                return st;
            }
            after(iterations);
            ++iterations;
            now = rte_rdtsc();
        }
        out.duration_iterations = iterations;
        out.duration_cycles = now - start;
        return {};
    }
    out.timestamps.assign(o.iterations, 0);
    for (std::uint64_t i = 0; i < o.iterations; ++i) {
        before(i);
        out.timestamps[i] = rte_rdtsc();
        if (Status st = post_and_wait(s, wr, watchdog); !st.ok()) {
            return st;
        }
        after(i);
    }
    return {};
}

// read_lat / atomic_lat with --verify around each WR, or without.
Status run_one_sided_latency(PerfSession& s, const PerfOptions& o, const SendWr& wr,
                             LatencySamples& out, const VerifyRun& verify) {
    if (verify.verifier == nullptr) {
        return run_one_at_a_time(
            s, o, wr, out, [](std::uint64_t) {}, [](std::uint64_t) {});
    }
    Verifier& v = *verify.verifier;
    const BufferWalk walk = BufferWalk::in_place(wr.sge.length);
    std::uint8_t* const destination = s.send_half(0);
    return run_one_at_a_time(
        s, o, wr, out, [&](std::uint64_t k) { poison_destination(v, o, 0, walk, k, destination); },
        [&](std::uint64_t k) { check_destination(v, o, verify, 0, walk, k, destination); });
}

// The fields every WR of a bandwidth run shares.
SendWr bandwidth_wr(const PerfOptions& o, std::uint64_t size) {
    SendWr base;
    switch (o.test.verb) {
    case Verb::write:
        base.opcode = WrOpcode::rdma_write;
        break;
    case Verb::read:
        base.opcode = WrOpcode::rdma_read;
        break;
    case Verb::send:
        base.opcode = WrOpcode::send;
        break;
    case Verb::atomic:
        base.opcode = o.atomic_type == AtomicType::cmp_and_swap ? WrOpcode::atomic_cmp_swap
                                                                : WrOpcode::atomic_fetch_add;
        break;
    }
    base.num_sge = 1;
    if (size <= o.inline_size && (o.test.verb == Verb::write || o.test.verb == Verb::send)) {
        base.flags |= rdma::send_inline;
    }
    return base;
}

} // namespace

Status run_write_latency(PerfSession& s, const PerfOptions& o, std::uint64_t size,
                         const KeyMessage& peer, bool server, LatencySamples& out,
                         VerifyRun verify) {
    const std::uint64_t iterations = o.iterations;
    out.timestamps.assign(iterations, 0);
    // The last byte of each message carries the iteration number: when it has arrived, the
    // whole message has (the responder writes a message's bytes in order).
    volatile std::uint8_t* const post_byte = s.send_half(0) + size - 1;
    const volatile std::uint8_t* const poll_byte = s.receive_half(0) + size - 1;
    Verifier* const v = verify.verifier;
    SendWr wr = rdma::write_wr(0, send_sge(s, size), peer.vaddr, peer.rkey);
    if (size <= o.inline_size) {
        wr.flags |= rdma::send_inline;
    }
    Watchdog watchdog;
    std::uint64_t posted = 0;
    std::uint64_t received = 0;
    std::uint64_t completed = 0;
    WorkCompletion wc;
    while (posted < iterations || completed < iterations || received < iterations) {
        // perftest's order: the server sends first, the client answers.
        if (received < iterations && !(posted == 0 && server)) {
            ++received;
            const auto expected = static_cast<std::uint8_t>(received);
            while (*poll_byte != expected) {
                s.drive();
                if (watchdog.expired()) {
                    return stalled("the peer's WRITE");
                }
            }
            watchdog.progressed();
            if (v != nullptr) {
                check_write_latency(*v, s, o, verify, received - 1);
            }
        }
        if (posted < iterations) {
            if (v != nullptr) {
                v->fill({s.send_half(0), size - 1}, v->outgoing(0, verify.size_index), posted);
            }
            out.timestamps[posted] = rte_rdtsc();
            *post_byte = static_cast<std::uint8_t>(++posted);
            if (Status st = post_one(s, 0, wr); !st.ok()) {
                return st;
            }
        }
        if (completed < iterations) {
            while (rdma::poll_cq(s.cq(), {&wc, 1}) == 0) {
                if (watchdog.expired()) {
                    return stalled("a WRITE's completion");
                }
            }
            if (wc.status != WcStatus::success) {
                return failed(wc);
            }
            ++completed;
        }
    }
    return {};
}

Status post_receives(PerfSession& s, const PerfOptions& o, std::uint64_t size, std::uint32_t count,
                     VerifyRun verify, std::span<const std::uint64_t> waiting) {
    for (unsigned q = 0; q < s.qp_count(); ++q) {
        RecvWr wr;
        wr.num_sge = 1;
        for (std::uint64_t i = waiting.empty() ? 0 : waiting[q]; i < count; ++i) {
            std::uint8_t* const buffer = receive_buffer(s, q, i, verify);
            if (verify.verifier != nullptr && i < receive_slots(s) && i < o.iterations) {
                fill_complement({buffer, size}, verify.verifier->incoming(q, verify.size_index), i);
            }
            wr.sge = {reinterpret_cast<std::uint64_t>(buffer), s.receive_length(size), s.lkey()};
            wr.wr_id = q;
            if (!s.post_receive(q, wr)) {
                return Error(StatusCode::no_resources, "the receive queue refused a work request");
            }
        }
    }
    return {};
}

Status run_send_latency(PerfSession& s, const PerfOptions& o, std::uint64_t size, bool server,
                        LatencySamples& out, VerifyRun verify) {
    const std::uint64_t iterations = o.iterations;
    out.timestamps.assign(iterations, 0);
    SendWr wr = rdma::send_wr(
        0, send_sge(s, size),
        rdma::send_signaled |
            (size <= o.inline_size ? rdma::SendFlags(rdma::send_inline) : rdma::SendFlags()));
    s.address(0, wr);
    const RecvWr recv = rdma::recv_wr(
        0, {reinterpret_cast<std::uint64_t>(s.receive_half(0)), s.receive_length(size), s.lkey()});
    Watchdog watchdog;
    Completions c;
    std::uint64_t posted = 0;
    std::uint64_t received = 0;
    while (posted < iterations || received < iterations) {
        // perftest's order: the client sends first, the server answers.
        if (received < iterations && !(posted == 0 && !server)) {
            while (c.receives <= received) {
                if (Status st = poll_into(s, c, watchdog); !st.ok()) {
                    return st;
                }
                if (watchdog.expired()) {
                    return stalled("the peer's SEND");
                }
            }
            ++received;
            if (verify.verifier != nullptr) {
                check_receive(*verify.verifier, s, o, verify, 0, received - 1,
                              c.last_receive_length);
            }
            if (received + receives_per_qp(o) <= iterations) {
                if (!s.post_receive(0, recv)) {
                    return Error(StatusCode::no_resources, "the receive queue is full");
                }
            }
        }
        if (posted < iterations) {
            if (verify.verifier != nullptr) {
                verify.verifier->fill({s.send_half(0), size},
                                      verify.verifier->outgoing(0, verify.size_index), posted);
            }
            out.timestamps[posted] = rte_rdtsc();
            if (Status st = post_one(s, 0, wr); !st.ok()) {
                return st;
            }
            ++posted;
            while (c.sends < posted) { // tx depth 1: every SEND is waited for
                if (Status st = poll_into(s, c, watchdog); !st.ok()) {
                    return st;
                }
                if (watchdog.expired()) {
                    return stalled("a SEND's completion");
                }
            }
        }
    }
    return {};
}

Status run_read_latency(PerfSession& s, const PerfOptions& o, std::uint64_t size,
                        const KeyMessage& peer, LatencySamples& out, VerifyRun verify) {
    return run_one_sided_latency(s, o, rdma::read_wr(0, send_sge(s, size), peer.vaddr, peer.rkey),
                                 out, verify);
}

Status run_atomic_latency(PerfSession& s, const PerfOptions& o, const KeyMessage& peer,
                          LatencySamples& out, VerifyRun verify) {
    const rdma::Sge original = send_sge(s, 8);
    const SendWr wr =
        o.atomic_type == AtomicType::cmp_and_swap
            ? rdma::compare_swap_wr(0, original, peer.vaddr, peer.rkey, 0, 0)
            : rdma::fetch_add_wr(0, original, peer.vaddr, peer.rkey, 1); // ATOMIC_ADD_VALUE
    return run_one_sided_latency(s, o, wr, out, verify);
}

namespace {

Status post_receive_again(PerfSession& s, const ReceiveSide& rx, unsigned q,
                          const VerifyRun& verify) {
    const RecvWr recv = rdma::recv_wr(
        q, {reinterpret_cast<std::uint64_t>(receive_buffer(s, q, rx.posted[q], verify)),
            s.receive_length(rx.size), s.lkey()});
    if (!s.post_receive(q, recv)) {
        return Error(StatusCode::no_resources, "the receive queue is full");
    }
    return {};
}

// One receive completion of send_bw: checked under --verify, counted, and its receive posted
// again while the QP expects more messages than it has receives posted for.
Status take_receive(PerfSession& s, const PerfOptions& o, ReceiveSide& rx, const WorkCompletion& wc,
                    const VerifyRun& verify) {
    const auto q = static_cast<unsigned>(wc.wr_id);
    if (q >= rx.received.size()) {
        return Error(StatusCode::internal, "a receive completion names no QP of this test");
    }
    if (verify.verifier != nullptr) {
        // Receives complete in the order they were posted: this is message received[q].
        check_receive(*verify.verifier, s, o, verify, q, rx.received[q], wc.byte_len);
    }
    ++rx.received[q];
    if (rx.posted[q] >= rx.per_qp) {
        return {};
    }
    if (Status st = post_receive_again(s, rx, q, verify); !st.ok()) {
        return st;
    }
    ++rx.posted[q];
    return {};
}

} // namespace

// A timed run's end: once time is up each QP posts on only to its next signaled WR, so every WR
// it posted is retired by a completion and its send queue is empty when the run ends (a later
// size or --run_infinitely interval starts from a free queue; WRs left after the last signaled
// one would hold their slots with no completion to come).
template <typename PerQp>
std::uint64_t closing_room(const PerQp& p, std::uint32_t moderation) {
    return p.posted % moderation == 0 ? 0 : moderation - p.posted % moderation;
}

template <typename PerQp>
bool all_retired(const std::vector<PerQp>& state, std::uint32_t moderation) {
    return std::all_of(state.begin(), state.end(), [moderation](const PerQp& p) {
        return closing_room(p, moderation) == 0 && p.completed == p.posted;
    });
}

Status run_bandwidth(PerfSession& s, const PerfOptions& o, std::uint64_t size,
                     const std::vector<KeyMessage>& peers, BandwidthSamples& out, VerifyRun verify,
                     ReceiveSide* rx) {
    const unsigned qps = s.qp_count();
    const bool timed = o.duration_seconds != 0;
    const std::uint64_t per_qp = timed ? UINT64_MAX : o.iterations;
    const std::uint32_t moderation = out.cq_moderation;
    if (!timed) {
        out.iterations = o.iterations * qps;
        out.posted.assign(out.iterations, 0);
        out.completed.assign(out.iterations, 0);
    }
    const std::uint64_t length = o.test.verb == Verb::atomic ? 8 : size;
    const BufferWalk walk(size, length, out.cycle_buffer, out.cache_line);
    Verifier* const v = verify.verifier;
    const bool check_results =
        v != nullptr && (o.test.verb == Verb::read || o.test.verb == Verb::atomic);
    struct PerQp {
        std::uint64_t posted = 0;
        std::uint64_t completed = 0;
        std::uint64_t offset = 0;
    };
    std::vector<PerQp> state(qps);
    // -l: exactly post_list WRs per post_send, and only when all fit (perftest's post list);
    // otherwise whatever fits, up to 64 per call.
    const std::uint32_t list = o.post_list;
    std::vector<SendWr> batch(list > 1 ? list : std::min<std::uint32_t>(o.tx_depth, 64));
    const SendWr base = bandwidth_wr(o, size);
    Watchdog watchdog;
    std::uint64_t total_posted = 0;
    std::uint64_t total_completed = 0;
    const std::uint64_t end = timed ? rte_rdtsc() + rte_get_tsc_hz() * o.duration_seconds : 0;
    bool time_up = false;
    WorkCompletion wcs[32];
    for (;;) {
        if (timed && !time_up && rte_rdtsc() >= end) {
            time_up = true;
        }
        for (unsigned q = 0; q < qps; ++q) {
            PerQp& p = state[q];
            const std::uint64_t left = time_up ? closing_room(p, moderation) : per_qp - p.posted;
            auto count = std::min<std::uint64_t>(
                {batch.size(), o.tx_depth - (p.posted - p.completed), left});
            if (list > 1) {
                count = count < list ? 0 : list;
            }
            std::size_t n = 0;
            for (; n < count; ++n) {
                SendWr& wr = batch[n];
                wr = base;
                const bool last = p.posted + 1 == per_qp;
                if ((p.posted + 1) % moderation == 0 || last) {
                    wr.flags |= rdma::send_signaled;
                }
                wr.wr_id = (static_cast<std::uint64_t>(q) << 48) | p.posted;
                std::uint8_t* local = s.send_half(q) + p.offset;
                if (v != nullptr) {
                    // Free again: WR posted - tx_depth, its last user, has completed.
                    local = s.verify_buffer(q, p.posted);
                    if (check_results) {
                        poison_destination(*v, o, q, walk, p.posted, local);
                    } else {
                        v->fill({local, length}, v->outgoing(q, verify.size_index), p.posted);
                    }
                }
                wr.sge = {reinterpret_cast<std::uint64_t>(local),
                          static_cast<std::uint32_t>(length), s.lkey()};
                s.address(q, wr);
                if (o.test.verb == Verb::atomic) {
                    wr.atomic.remote_addr = peers[q].vaddr + p.offset;
                    wr.atomic.rkey = peers[q].rkey;
                    wr.atomic.compare_add = o.atomic_type == AtomicType::cmp_and_swap ? 0 : 1;
                    wr.atomic.swap = 0;
                } else if (o.test.verb != Verb::send) {
                    wr.rdma.remote_addr = peers[q].vaddr + p.offset;
                    wr.rdma.rkey = peers[q].rkey;
                }
                p.offset = walk.next(p.offset);
                if (!timed) {
                    out.posted[total_posted + n] = rte_rdtsc();
                }
                ++p.posted;
            }
            if (n != 0) {
                if (rdma::post_send(s.qp(q), {batch.data(), static_cast<std::uint16_t>(n)}) != n) {
                    return Error(StatusCode::no_resources, "the send queue refused work requests");
                }
                if (timed && total_posted == 0) {
                    out.posted.assign(1, rte_rdtsc());
                }
                total_posted += n;
            }
        }
        const std::uint16_t got = rdma::poll_cq(s.cq(), {wcs, 32});
        const std::uint64_t now = got != 0 ? rte_rdtsc() : 0;
        for (std::uint16_t i = 0; i < got; ++i) {
            if (wcs[i].status != WcStatus::success) {
                return failed(wcs[i]);
            }
            if (rx != nullptr && is_receive(wcs[i])) {
                if (Status st = take_receive(s, o, *rx, wcs[i], {}); !st.ok()) {
                    return st;
                }
                continue;
            }
            const auto q = static_cast<unsigned>(wcs[i].wr_id >> 48);
            PerQp& p = state[q];
            const std::uint64_t done = (wcs[i].wr_id & 0xffffffffffffULL) + 1;
            if (check_results) {
                // A completion stands for every WR before it on the QP: all have landed.
                for (std::uint64_t k = p.completed; k < done; ++k) {
                    check_destination(*v, o, verify, q, walk, k, s.verify_buffer(q, k));
                }
            }
            if (!timed) {
                for (std::uint64_t k = total_completed; k < total_completed + (done - p.completed);
                     ++k) {
                    out.completed[k] = now;
                }
            }
            total_completed += done - p.completed;
            p.completed = done;
        }
        if (got != 0) {
            watchdog.progressed();
        } else if (watchdog.expired()) {
            return stalled("completions");
        }
        if (timed ? time_up && all_retired(state, moderation)
                  : total_posted == out.iterations && total_completed == total_posted &&
                        (rx == nullptr || rx->complete())) {
            break;
        }
    }
    if (timed) {
        out.iterations = total_completed;
        out.duration_cycles = rte_rdtsc() - (out.posted.empty() ? 0 : out.posted[0]);
    }
    return {};
}

bool ReceiveSide::complete() const {
    return std::all_of(received.begin(), received.end(),
                       [this](std::uint64_t n) { return n >= per_qp; });
}

std::uint64_t ReceiveSide::total() const {
    return std::accumulate(received.begin(), received.end(), std::uint64_t{0});
}

namespace {

// send_bw -c UD: once the sender has moved on, what it sent last is still on its way; after this
// much quiet nothing more will come, and what has not arrived is lost (one that still comes is
// known by its length in the next size's run and not counted there).
constexpr std::uint64_t ud_quiet_milliseconds = 10;

// When a datagram run is over: the sender said it is done (asked only every few thousand idle
// polls, it is a system call) and then nothing arrived for a while.
class DatagramEnd {
public:
    explicit DatagramEnd(const SenderDone& sender_done)
        : sender_done_(sender_done), quiet_(rte_get_tsc_hz() * ud_quiet_milliseconds / 1000) {}
    void arrived(std::uint64_t now) { last_ = now; }
    [[nodiscard]] bool over() {
        if (!sender_done_) {
            return false;
        }
        if (!sender_gone_) {
            if (++idle_polls_ % 4096 == 0 && sender_done_()) {
                sender_gone_ = true;
                last_ = rte_rdtsc();
            }
            return false;
        }
        return rte_rdtsc() - last_ > quiet_;
    }

private:
    const SenderDone& sender_done_;
    std::uint64_t quiet_;
    std::uint64_t last_ = 0;
    std::uint64_t idle_polls_ = 0;
    bool sender_gone_ = false;
};

} // namespace

Status run_send_bandwidth_server(PerfSession& s, const PerfOptions& o, ReceiveSide& rx,
                                 BandwidthSamples& out, VerifyRun verify,
                                 const SenderDone& sender_done) {
    const bool timed = o.duration_seconds != 0;
    const std::uint64_t start = rx.total();
    const std::uint64_t expected = timed ? 0 : rx.per_qp * rx.received.size() - start;
    out.iterations = expected;
    out.posted.assign(1, timed ? rte_rdtsc() : 0);
    out.completed.assign(expected, 0);
    const std::uint64_t end = timed ? out.posted[0] + rte_get_tsc_hz() * o.duration_seconds : 0;
    Watchdog watchdog;
    DatagramEnd datagrams(sender_done);
    WorkCompletion wcs[32];
    std::uint64_t got_total = 0;
    while (timed ? rte_rdtsc() < end : got_total < expected) {
        const std::uint16_t got = rdma::poll_cq(s.cq(), {wcs, 32});
        if (got == 0) {
            // A timed interval ends by the clock: a stopped client shows as an idle one.
            if (!timed && datagrams.over()) {
                break;
            }
            if (!timed && watchdog.expired()) {
                return stalled("the peer's SENDs");
            }
            continue;
        }
        const std::uint64_t now = rte_rdtsc();
        watchdog.progressed();
        datagrams.arrived(now);
        for (std::uint16_t i = 0; i < got; ++i) {
            if (wcs[i].status != WcStatus::success) {
                return failed(wcs[i]);
            }
            if (rx.datagram_length != 0 && wcs[i].byte_len != rx.datagram_length) {
                // An earlier size's straggler took a receive of this run's: give it back.
                const auto q = static_cast<unsigned>(wcs[i].wr_id);
                if (Status st = q < rx.posted.size() ? post_receive_again(s, rx, q, verify)
                                                     : Status(failed(wcs[i]));
                    !st.ok()) {
                    return st;
                }
                continue;
            }
            if (!timed) {
                if (got_total == 0) {
                    out.posted[0] = now; // the first arrival starts the clock
                }
                out.completed[got_total] = now;
            }
            ++got_total;
            if (Status st = take_receive(s, o, rx, wcs[i], verify); !st.ok()) {
                return st;
            }
        }
    }
    if (timed) {
        out.iterations = rx.total() - start;
        out.duration_cycles = rte_rdtsc() - out.posted[0];
    } else if (got_total < expected) {
        out.lost = expected - got_total;
        out.iterations = got_total;
        out.completed.resize(got_total);
    }
    return {};
}

} // namespace prdma::perf
