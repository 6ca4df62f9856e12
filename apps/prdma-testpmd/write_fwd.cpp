// The write engine: a WRITE generator (txonly of RDMA): every QP WRITEs `size` bytes
// into the peer's buffer, `burst` at a time. The peer's CPU never sees them, so it may run any
// engine, or none.
#include "fwd_lcore.hpp"

namespace prdma::testpmd {

namespace {

void begin(FwdLcore& /*lcore*/, bool /*tx_first*/) {}

void burst(FwdLcore& lc) {
    for (unsigned i = 0; i < lc.stream_count; ++i) {
        Stream& stream = lc.streams[i];
        if (stream.enabled) {
            post_tx(lc, stream, rdma::WrOpcode::rdma_write);
        }
    }
    poll_completions(lc);
}

} // namespace

const FwdEngine write_engine{.name = "write",
                             .help = "WRITE size bytes into the peer's buffer",
                             .kind = EngineKind::write,
                             .begin = begin,
                             .burst = burst};

} // namespace prdma::testpmd
