// The mixed engine: each QP runs the engine `set mix` gave it (write, read, send, atomic; echo and
// rxonly only receive), so one run loads the device with several verbs at once.
#include "fwd_lcore.hpp"

namespace prdma::testpmd {

namespace {

void begin(FwdLcore& /*lcore*/, bool /*tx_first*/) {}

void post_stream(FwdLcore& lc, Stream& stream) {
    switch (stream.kind) {
    case EngineKind::write:
        post_tx(lc, stream, rdma::WrOpcode::rdma_write);
        break;
    case EngineKind::read:
        post_tx(lc, stream, rdma::WrOpcode::rdma_read);
        break;
    case EngineKind::send:
        post_tx(lc, stream, rdma::WrOpcode::send);
        break;
    case EngineKind::atomic:
        post_tx(lc, stream, rdma::WrOpcode::atomic_fetch_add);
        break;
    case EngineKind::echo:
    case EngineKind::rxonly:
    case EngineKind::mixed:
    case EngineKind::udsend: // UD QPs never run mixed (engine_fits)
        break;
    }
}

void burst(FwdLcore& lc) {
    for (unsigned i = 0; i < lc.stream_count; ++i) {
        if (lc.streams[i].enabled) {
            post_stream(lc, lc.streams[i]);
        }
    }
    poll_completions(lc);
}

} // namespace

const FwdEngine mixed_engine{.name = "mixed",
                             .help = "each QP its own verb, as `set mix` says",
                             .kind = EngineKind::mixed,
                             .begin = begin,
                             .burst = burst};

} // namespace prdma::testpmd
