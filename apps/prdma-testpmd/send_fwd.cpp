// The send engine: SENDs of `size` bytes carrying the verification pattern, for a peer
// running rxonly (counts and verifies) or echo (sends them back, and this side counts the echoes
// as received).
#include "fwd_lcore.hpp"

namespace prdma::testpmd {

const FwdEngine send_engine{.name = "send",
                            .help = "SEND size bytes (peer: rxonly or echo)",
                            .kind = EngineKind::send,
                            .begin = no_begin,
                            .burst = generator_burst<rdma::WrOpcode::send>};

} // namespace prdma::testpmd
