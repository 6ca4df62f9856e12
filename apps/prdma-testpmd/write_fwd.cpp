// The write engine: a WRITE generator (txonly of RDMA): every QP WRITEs `size` bytes
// into the peer's buffer, `burst` at a time. The peer's CPU never sees them, so it may run any
// engine, or none.
#include "fwd_lcore.hpp"

namespace prdma::testpmd {

const FwdEngine write_engine{.name = "write",
                             .help = "WRITE size bytes into the peer's buffer",
                             .kind = EngineKind::write,
                             .begin = no_begin,
                             .burst = generator_burst<rdma::WrOpcode::rdma_write>};

} // namespace prdma::testpmd
