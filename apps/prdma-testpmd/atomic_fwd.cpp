// The atomic engine: FETCH_ADD 1 on the first quadword of the peer's buffer, `burst` at a
// time; each completion carries 8 bytes.
#include "fwd_lcore.hpp"

namespace prdma::testpmd {

const FwdEngine atomic_engine{.name = "atomic",
                              .help = "FETCH_ADD 1 on the peer's buffer",
                              .kind = EngineKind::atomic,
                              .begin = no_begin,
                              .burst = generator_burst<rdma::WrOpcode::atomic_fetch_add>};

} // namespace prdma::testpmd
