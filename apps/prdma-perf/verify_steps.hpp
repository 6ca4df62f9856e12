// What --verify does around the measured loops. Before the hand shake that starts the test (the
// peer sends, writes or reads nothing before it): the data a server serves to READs and atomics,
// a write_bw server's receive halves (the complement of what the client's WRITEs must leave, so
// a byte no WRITE reached fails), write_lat's first poisoned message. In the loops
// (test_runners.cpp): each message checked where it landed, and its buffer poisoned for the next
// one to land there. After write_bw, the passive side's check of what the WRITEs left.
#pragma once

#include <cstdint>
#include <vector>

#include "buffer_walk.hpp"
#include "options.hpp"
#include "perf_session.hpp"
#include "perftest_wire.hpp"
#include "verifier.hpp"

namespace prdma::perf {

// --verify's part in the run of one size (verifier.hpp): no verifier when it is off, and then the
// loops do exactly what they do without it.
struct VerifyRun {
    Verifier* verifier = nullptr;
    unsigned size_index = 0; // in PerfOptions::sizes
};

// The walk's parameters both sides agreed on.
struct WalkParams {
    std::uint64_t cycle_buffer = 4096;
    std::uint64_t cache_line = 64;
};

void prepare_verification(Verifier& v, const PerfSession& s, const PerfOptions& o,
                          const std::vector<KeyMessage>& mine,
                          const std::vector<KeyMessage>& theirs, WalkParams walk);

// Where receive `index` of QP qp lands: the receive half, or under --verify in send_bw a buffer of
// its own, so no message lands on one not yet checked.
std::uint8_t* receive_buffer(const PerfSession& s, unsigned qp, std::uint64_t index,
                             const VerifyRun& verify);
// How many messages apart two that land in the same receive buffer are.
std::uint64_t receive_slots(const PerfSession& s);
// A receive of a send test: the message it brought, then its buffer poisoned for the message that
// lands there next.
void check_receive(Verifier& v, const PerfSession& s, const PerfOptions& o, const VerifyRun& verify,
                   unsigned qp, std::uint64_t message, std::uint32_t byte_len);
// write_lat: the message the poll byte announced, then the buffer poisoned for the next one.
void check_write_latency(Verifier& v, const PerfSession& s, const PerfOptions& o,
                         const VerifyRun& verify, std::uint64_t message);
// READ / atomic WR k of QP qp: its destination poisoned before it is posted, and checked once it
// completed.
void poison_destination(const Verifier& v, const PerfOptions& o, unsigned qp,
                        const BufferWalk& walk, std::uint64_t k, std::uint8_t* buffer);
void check_destination(Verifier& v, const PerfOptions& o, const VerifyRun& verify, unsigned qp,
                       const BufferWalk& walk, std::uint64_t k, const std::uint8_t* buffer);

// write_bw's passive side, after the client's end-of-test hand shake: the client sends it only
// once every WRITE completed, and a WRITE completes only after its data was placed here.
void check_write_bw_end(Verifier& v, const PerfSession& s, const PerfOptions& o, WalkParams walk);

} // namespace prdma::perf
