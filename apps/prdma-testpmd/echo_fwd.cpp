// The echo engine (testpmd's macswap of RDMA): every message received is SENT back from the slot
// it arrived in (completions.cpp). With `start tx_first` each QP first sends one burst, so two
// echo sides bounce messages between them forever.
#include <algorithm>

#include "fwd_lcore.hpp"

namespace prdma::testpmd {

namespace {

void begin(FwdLcore& lc, bool tx_first) {
    if (!tx_first) {
        return;
    }
    // No more than half the receive slots: the peer echoes into its own, and so do we. On an SRQ
    // the slots are the lcore's, shared by its QPs.
    unsigned enabled = 0;
    for (unsigned i = 0; i < lc.stream_count; ++i) {
        enabled += lc.streams[i].enabled ? 1U : 0U;
    }
    const std::uint32_t room =
        lc.use_srq ? std::max(1U, srq_slots / 2 / std::max(enabled, 1U)) : recv_slots / 2;
    const std::uint32_t burst = lc.config.burst;
    lc.config.burst = std::min(burst, room);
    for (unsigned i = 0; i < lc.stream_count; ++i) {
        if (lc.streams[i].enabled) {
            post_tx(lc, lc.streams[i], rdma::WrOpcode::send);
        }
    }
    lc.config.burst = burst;
}

void burst(FwdLcore& lc) {
    poll_completions(lc);
}

} // namespace

const FwdEngine echo_engine{.name = "echo",
                            .help = "send back every message received",
                            .kind = EngineKind::echo,
                            .begin = begin,
                            .burst = burst};

} // namespace prdma::testpmd
