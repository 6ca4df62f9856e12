// The atomic engine: FETCH_ADD 1 on the first quadword of the peer's buffer, `burst` at a
// time; each completion carries 8 bytes.
#include "fwd_lcore.hpp"

namespace prdma::testpmd {

namespace {

void begin(FwdLcore& /*lcore*/, bool /*tx_first*/) {}

void burst(FwdLcore& lc) {
    for (unsigned i = 0; i < lc.stream_count; ++i) {
        Stream& stream = lc.streams[i];
        if (stream.enabled) {
            post_tx(lc, stream, rdma::WrOpcode::atomic_fetch_add);
        }
    }
    poll_completions(lc);
}

} // namespace

const FwdEngine atomic_engine{.name = "atomic",
                              .help = "FETCH_ADD 1 on the peer's buffer",
                              .kind = EngineKind::atomic,
                              .begin = begin,
                              .burst = burst};

} // namespace prdma::testpmd
