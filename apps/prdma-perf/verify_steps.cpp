#include "verify_steps.hpp"

#include <algorithm>
#include <cstring>

namespace prdma::perf {

namespace {

// What READs and atomics find: the server's stream at size index 0, by offset in the receive half.
// --verify-corrupt-at damages the byte that iteration reads (and every later one reading there).
void serve_pattern(const Verifier& v, const PerfSession& s, const PerfOptions& o,
                   WalkParams params) {
    const std::uint64_t length = o.test.verb == Verb::atomic ? 8 : o.sizes.front();
    for (unsigned q = 0; q < s.qp_count(); ++q) {
        const std::span<std::uint8_t> half(s.receive_half(q), s.slot());
        fill_pattern(half, v.outgoing(q, 0), 0);
        if (const auto n = v.corrupt_at()) {
            const BufferWalk walk =
                o.test.kind == Kind::latency
                    ? BufferWalk::in_place(length)
                    : BufferWalk(o.sizes.front(), length, params.cycle_buffer, params.cache_line);
            half[walk.offset_of(*n) + length / 2] ^= 0x5a;
        }
    }
}

// What atomic k of QP qp returns: the served word at its place, plus the FETCH_AND_ADDs before it
// there (the walk comes back to a place once per period).
std::uint64_t atomic_result(const Verifier& v, const PerfOptions& o, unsigned qp,
                            const BufferWalk& walk, std::uint64_t k) {
    return atomic_original(v.incoming(qp, 0), walk.offset_of(k), k / walk.period(),
                           o.atomic_type == AtomicType::fetch_and_add);
}

WriteBwRun write_bw_run(const PerfOptions& o, WalkParams params) {
    return {o.sizes, o.iterations, params.cycle_buffer, params.cache_line};
}

} // namespace

// Where receive `index` of QP qp lands: the receive half, or under --verify in send_bw a buffer of
// its own, so no message lands on one not yet checked.
std::uint8_t* receive_buffer(const PerfSession& s, unsigned qp, std::uint64_t index,
                             const VerifyRun& verify) {
    return verify.verifier != nullptr && s.verify_slots() != 0 ? s.verify_buffer(qp, index)
                                                               : s.receive_half(qp);
}

// How many messages apart two that land in the same receive buffer are: send_bw's receives each
// have one; send_lat's share the receive half, one message in flight at a time.
std::uint64_t receive_slots(const PerfSession& s) {
    return std::max<std::uint64_t>(s.verify_slots(), 1);
}

// A receive of a send test: the message it brought, then its buffer poisoned for the message that
// lands there next (whose receive is posted, or whose sender waits for us, only after this).
void check_receive(Verifier& v, const PerfSession& s, const PerfOptions& o, const VerifyRun& verify,
                   unsigned qp, std::uint64_t message, std::uint32_t byte_len) {
    const std::uint64_t size = o.sizes[verify.size_index];
    const std::uint64_t seed = v.incoming(qp, verify.size_index);
    const std::span<std::uint8_t> buffer(receive_buffer(s, qp, message, verify), size);
    const Place where{qp, size, message};
    if (byte_len != size) {
        v.wrong_length(byte_len, where);
    } else {
        v.check(buffer, seed, message, 0, where);
    }
    if (message + receive_slots(s) < o.iterations) {
        fill_complement(buffer, seed, message + receive_slots(s));
    }
}

// write_lat: the message the poll byte announced (all but the poll byte itself), then the buffer
// poisoned for the next one, which the peer sends only after our answer to this one.
void check_write_latency(Verifier& v, const PerfSession& s, const PerfOptions& o,
                         const VerifyRun& verify, std::uint64_t message) {
    const unsigned index = verify.size_index;
    const std::uint64_t size = o.sizes[index];
    std::uint8_t* const buffer = s.receive_half(0);
    v.check({buffer, size - 1}, v.incoming(0, index), message, 0, Place{0, size, message});
    if (message + 1 < o.iterations) {
        fill_complement({buffer, size - 1}, v.incoming(0, index), message + 1);
    } else if (index + 1 < o.sizes.size()) {
        fill_complement({buffer, o.sizes[index + 1] - 1}, v.incoming(0, index + 1), 0);
    }
}

// READ / atomic WR k's destination, poisoned before it is posted: the complement of what it must
// bring back.
void poison_destination(const Verifier& v, const PerfOptions& o, unsigned qp,
                        const BufferWalk& walk, std::uint64_t k, std::uint8_t* buffer) {
    if (o.test.verb == Verb::read) {
        fill_complement({buffer, walk.length()}, v.incoming(qp, 0), 0, walk.offset_of(k));
    } else {
        const std::uint64_t poison = ~atomic_result(v, o, qp, walk, k);
        std::memcpy(buffer, &poison, sizeof(poison));
    }
}

void check_destination(Verifier& v, const PerfOptions& o, const VerifyRun& verify, unsigned qp,
                       const BufferWalk& walk, std::uint64_t k, const std::uint8_t* buffer) {
    const Place where{qp, o.sizes[verify.size_index], k};
    if (o.test.verb == Verb::read) {
        v.check({buffer, walk.length()}, v.incoming(qp, 0), 0, walk.offset_of(k), where);
        return;
    }
    const std::uint64_t value = atomic_result(v, o, qp, walk, k);
    std::uint8_t expected[sizeof(value)];
    std::memcpy(expected, &value, sizeof(value));
    v.check_bytes({buffer, sizeof(value)}, expected, where);
}

void prepare_verification(Verifier& v, const PerfSession& s, const PerfOptions& o,
                          const std::vector<KeyMessage>& mine,
                          const std::vector<KeyMessage>& theirs, WalkParams walk) {
    std::vector<std::uint32_t> my_psns;
    std::vector<std::uint32_t> their_psns;
    for (unsigned q = 0; q < mine.size(); ++q) {
        my_psns.push_back(mine[q].psn);
        their_psns.push_back(theirs[q].psn);
    }
    v.set_psns(std::move(my_psns), std::move(their_psns));
    const bool client = o.server.has_value();
    const bool latency = o.test.kind == Kind::latency;
    if (!client && (o.test.verb == Verb::read || o.test.verb == Verb::atomic)) {
        serve_pattern(v, s, o, walk);
    } else if (!client && o.test.verb == Verb::write && !latency) {
        for (unsigned q = 0; q < s.qp_count(); ++q) {
            const WriteBwImage image =
                write_bw_image(write_bw_run(o, walk), s.slot(), v.peer_psn(q), q);
            std::uint8_t* const half = s.receive_half(q);
            for (std::size_t i = 0; i < image.bytes.size(); ++i) {
                half[i] =
                    static_cast<std::uint8_t>(image.written[i] ? ~image.bytes[i] : image.bytes[i]);
            }
        }
    } else if (o.test.verb == Verb::write && latency) {
        fill_complement({s.receive_half(0), o.sizes.front() - 1}, v.incoming(0, 0), 0);
    }
}

void check_write_bw_end(Verifier& v, const PerfSession& s, const PerfOptions& o, WalkParams walk) {
    for (unsigned q = 0; q < s.qp_count(); ++q) {
        v.check_end_state({s.receive_half(q), s.slot()}, write_bw_run(o, walk), q);
    }
}

} // namespace prdma::perf
