// The mbuf pools of swroce's ports, and what happens to one whose port goes away while some of
// its mbufs are still out.
//
// Why a pool can outlive its port: a port of the ring PMD hands mbuf pointers to its peer, not
// copies, so frames we sent may sit in the peer's rx ring after our port has stopped. Freeing
// our pool then makes the peer free those mbufs into freed memory when it drains (ASan caught
// it when two devices on a ring pair closed in the order they were opened). So a pool with mbufs
// out is retired, not freed, and freed by a later sweep once every mbuf has come back.
#pragma once

#include <cstdint>
#include <string>

struct rte_mempool;

namespace prdma::swroce::mbuf_pools {

// A name unique in the process: a retired pool of an earlier port with the same id may still
// exist, and mempool names must differ.
std::string name_for(std::uint16_t port_id, unsigned group);

// Frees `pool` now if all its mbufs are back, otherwise once they are; then sweeps.
void retire(rte_mempool* pool) noexcept;

// Frees every retired pool whose mbufs have all come back.
void sweep() noexcept;

// Retired pools not yet freed.
unsigned retired() noexcept;

} // namespace prdma::swroce::mbuf_pools
