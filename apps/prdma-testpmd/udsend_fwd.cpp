// The udsend engine (--qp-type ud): each QP sends datagrams of `size` bytes round-robin to every
// UD QP of the peer it was connected to, through one address handle per peer QP, so one QP fans
// out to many destinations as a market-data publisher does. The peer runs rxonly, which counts
// and verifies them; what no receive was posted for is dropped there and counted by the device.
#include "fwd_lcore.hpp"

namespace prdma::testpmd {

const FwdEngine udsend_engine{.name = "udsend",
                              .help = "SEND datagrams to every peer QP in turn (--qp-type ud; "
                                      "peer: rxonly)",
                              .kind = EngineKind::udsend,
                              .begin = no_begin,
                              .burst = generator_burst<rdma::WrOpcode::send>};

} // namespace prdma::testpmd
