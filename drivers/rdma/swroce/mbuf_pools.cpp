#include "mbuf_pools.hpp"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <vector>

#include <rte_mempool.h>

#include <prdma/format.hpp>

#include "swroce_log.hpp"

namespace prdma::swroce::mbuf_pools {
namespace {

// Control path only: ports are released from control threads (and stopped on the interrupt
// thread), never from the fast path.
struct Retired {
    std::mutex lock;
    std::vector<rte_mempool*> pools;
};

Retired& retired_pools() {
    static Retired retired; // a function-local static: no order-of-initialisation hazard
    return retired;
}

} // namespace

std::string name_for(std::uint16_t port_id, unsigned group) {
    static std::atomic<unsigned> sequence{0};
    // RTE_MEMPOOL_NAMESIZE is 29 characters: the port id, not its name, keeps it short.
    return strformat("swroce_p%u_g%u_%u", unsigned{port_id}, group,
                     sequence.fetch_add(1, std::memory_order_relaxed));
}

void retire(rte_mempool* pool) noexcept {
    if (pool == nullptr) {
        return;
    }
    if (const unsigned in_use = rte_mempool_in_use_count(pool); in_use != 0) {
        SWROCE_LOG(DEBUG, "mbuf pool %s has %u mbufs out (a ring peer may hold them): freed later",
                   pool->name, in_use);
        Retired& retired = retired_pools();
        const std::lock_guard guard(retired.lock);
        retired.pools.push_back(pool);
    } else {
        rte_mempool_free(pool);
    }
    sweep();
}

void sweep() noexcept {
    Retired& retired = retired_pools();
    const std::lock_guard guard(retired.lock);
    std::erase_if(retired.pools, [](rte_mempool* pool) {
        if (rte_mempool_in_use_count(pool) != 0) {
            return false;
        }
        rte_mempool_free(pool);
        return true;
    });
}

unsigned retired() noexcept {
    Retired& retired = retired_pools();
    const std::lock_guard guard(retired.lock);
    return static_cast<unsigned>(retired.pools.size());
}

} // namespace prdma::swroce::mbuf_pools
