// The read engine: READs `size` bytes of the peer's buffer into this side's, `burst` at a
// time (the device keeps max_rd_atomic of them outstanding; the rest wait in the send queue).
#include "fwd_lcore.hpp"

namespace prdma::testpmd {

namespace {

void begin(FwdLcore& /*lcore*/, bool /*tx_first*/) {}

void burst(FwdLcore& lc) {
    for (unsigned i = 0; i < lc.stream_count; ++i) {
        Stream& stream = lc.streams[i];
        if (stream.enabled) {
            post_tx(lc, stream, rdma::WrOpcode::rdma_read);
        }
    }
    poll_completions(lc);
}

} // namespace

const FwdEngine read_engine{.name = "read",
                            .help = "READ size bytes from the peer's buffer",
                            .kind = EngineKind::read,
                            .begin = begin,
                            .burst = burst};

} // namespace prdma::testpmd
