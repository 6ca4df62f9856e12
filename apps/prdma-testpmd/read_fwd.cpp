// The read engine: READs `size` bytes of the peer's buffer into this side's, `burst` at a
// time (the device keeps max_rd_atomic of them outstanding; the rest wait in the send queue).
#include "fwd_lcore.hpp"

namespace prdma::testpmd {

const FwdEngine read_engine{.name = "read",
                            .help = "READ size bytes from the peer's buffer",
                            .kind = EngineKind::read,
                            .begin = no_begin,
                            .burst = generator_burst<rdma::WrOpcode::rdma_read>};

} // namespace prdma::testpmd
