// The send engine: SENDs of `size` bytes carrying the verification pattern, for a peer
// running rxonly (counts and verifies) or echo (sends them back, and this side counts the echoes
// as received).
#include "fwd_lcore.hpp"

namespace prdma::testpmd {

namespace {

void begin(FwdLcore& /*lcore*/, bool /*tx_first*/) {}

void burst(FwdLcore& lc) {
    for (unsigned i = 0; i < lc.stream_count; ++i) {
        Stream& stream = lc.streams[i];
        if (stream.enabled) {
            post_tx(lc, stream, rdma::WrOpcode::send);
        }
    }
    poll_completions(lc);
}

} // namespace

const FwdEngine send_engine{.name = "send",
                            .help = "SEND size bytes (peer: rxonly or echo)",
                            .kind = EngineKind::send,
                            .begin = begin,
                            .burst = burst};

} // namespace prdma::testpmd
