// The rxonly engine: keeps every QP's receive slots posted, counts what arrives and verifies it
// against the pattern SENDs carry (completions.cpp); sends nothing.
#include "fwd_lcore.hpp"

namespace prdma::testpmd {

namespace {

void begin(FwdLcore& /*lcore*/, bool /*tx_first*/) {}

void burst(FwdLcore& lc) {
    poll_completions(lc);
}

} // namespace

const FwdEngine rxonly_engine{.name = "rxonly",
                              .help = "count and verify the messages received",
                              .kind = EngineKind::rxonly,
                              .begin = begin,
                              .burst = burst};

} // namespace prdma::testpmd
