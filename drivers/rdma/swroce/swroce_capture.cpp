// pcap=<file>: every RoCE, ARP and ND frame the engine receives and transmits goes to a pcapng file
// (DPDK's librte_pcapng), for debugging and for the wire tests that decode prdma's own frames.
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>

#include <rte_cycles.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>
#include <rte_pcapng.h>
#include <rte_ring.h>

#include <prdma/format.hpp>

#include "engine.hpp"
#include "swroce_device.hpp"
#include "swroce_log.hpp"

namespace prdma::swroce {

SwroceDevice::~SwroceDevice() {
    // Control requests nobody will run or collect now (an owner that stopped polling).
    const auto free_requests = [](rte_ring* ring) {
        void* request = nullptr;
        while (ring != nullptr && rte_ring_dequeue(ring, &request) == 0) {
            std::unique_ptr<GroupRequest> owned(static_cast<GroupRequest*>(request));
        }
        rte_ring_free(ring);
    };
    for (const auto& qp : qps) {
        if (qp != nullptr) {
            release_kept(*qp); // requests kept past a gap, in the pools about to close
        }
    }
    for (const auto& group : groups) {
        for (std::uint16_t i = 0; i < group->tx_backlog_count; ++i) {
            rte_pktmbuf_free(group->tx_backlog[i]); // frames that never went out
        }
        group->tx_backlog_count = 0;
        rte_pktmbuf_free_bulk(group->mbuf_stash.data(), group->mbuf_stash_count);
        group->mbuf_stash_count = 0;
        if (group->handover != nullptr) {
            // Frames still in a ring go back to their pools before the port (and pools) close.
            rte_mbuf* mbuf = nullptr;
            while (rte_ring_dequeue(group->handover, reinterpret_cast<void**>(&mbuf)) == 0) {
                rte_pktmbuf_free(mbuf);
            }
            rte_ring_free(group->handover);
        }
        free_requests(group->control);
        rte_ring_free(group->events);
        rte_ring_free(group->doorbell);
    }
    free_requests(control_done);
    if (capture != nullptr) {
        rte_pcapng_close(capture); // closes the file descriptor too
    }
    if (capture_pool != nullptr) {
        rte_mempool_free(capture_pool);
    }
}

Status open_capture(SwroceDevice& dev) {
    const int fd = ::open(dev.args.pcap.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        return Error(StatusCode::invalid_parameter,
                     strformat("pcap=%s: %s", dev.args.pcap.c_str(), std::strerror(errno)));
    }
    dev.capture = rte_pcapng_fdopen(fd, nullptr, nullptr, "prdma swroce", dev.name.c_str());
    if (dev.capture == nullptr) {
        ::close(fd);
        return Error(StatusCode::internal,
                     strformat("rte_pcapng_fdopen(%s) failed", dev.args.pcap.c_str()));
    }
    const std::string pool_name = "cap_" + dev.name;
    // Enough for a few bursts in flight; the copies are written and freed in the same call.
    dev.capture_pool = rte_pktmbuf_pool_create(
        pool_name.c_str(), 1023, 0, 0, static_cast<std::uint16_t>(rte_pcapng_mbuf_size(9216)),
        SOCKET_ID_ANY);
    if (dev.capture_pool == nullptr) {
        return Error(StatusCode::no_resources,
                     strformat("no memory for the capture pool of %s", dev.name.c_str()));
    }
    SWROCE_LOG(INFO, "%s: capturing RoCE, ARP and ND frames to %s", dev.name.c_str(),
               dev.args.pcap.c_str());
    return {};
}

void write_capture(SwroceDevice& dev, unsigned group, rte_mbuf* const* mbufs, std::uint16_t count,
                   bool transmitted) noexcept {
    std::array<rte_mbuf*, 64> copies{};
    std::uint16_t n = 0;
    const std::uint64_t now = rte_get_tsc_cycles();
    for (std::uint16_t i = 0; i < count && n < copies.size(); ++i) {
        rte_mbuf* copy =
            rte_pcapng_copy(dev.port.port_id(), group, mbufs[i], dev.capture_pool, UINT32_MAX, now,
                            transmitted ? RTE_PCAPNG_DIRECTION_OUT : RTE_PCAPNG_DIRECTION_IN);
        if (copy != nullptr) {
            copies[n++] = copy;
        }
    }
    (void)rte_pcapng_write_packets(dev.capture, copies.data(), n);
}

} // namespace prdma::swroce
