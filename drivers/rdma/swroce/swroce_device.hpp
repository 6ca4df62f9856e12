// The swroce device: its port, ARP resolver, queues and the control work in flight. Internal to
// the driver.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include <prdma/rdmadev/driver.hpp>

#include "arp.hpp"
#include "devargs.hpp"
#include "port.hpp"
#include "work_ring.hpp"

namespace prdma::swroce {

struct SwroceDevice;

struct SwroceCq {
    SwroceDevice* device = nullptr;
    std::uint16_t queue_group = 0;
    WorkRing<rdma::WorkCompletion> ring;
    std::uint64_t overflows = 0; // completions lost to a full CQ (a CQ error event is raised)

    // Queues a completion; false (counted) when the CQ is full.
    bool push(const rdma::WorkCompletion& wc) noexcept;
};

struct SwroceQp {
    SwroceDevice* device = nullptr;
    std::uint32_t qpn = 0;
    std::uint32_t pd = 0;
    SwroceCq* send_cq = nullptr;
    SwroceCq* recv_cq = nullptr;
    std::uint16_t queue_group = 0;
    rdma::QpCaps caps{};
    bool signal_all = false;
    rdma::QpState state = rdma::QpState::reset;
    rdma::QpAttr attr{};
    std::optional<MacAddress> dest_mac;
    WorkRing<rdma::RecvWr> receive_queue;
    WorkRing<rdma::SendWr> send_queue;
    std::uint32_t send_psn = 0;
    StatusCode post_error = StatusCode::ok; // why the last post took fewer WRs than offered
    bool destroying = false;
};

struct PendingRtr {
    SwroceQp* qp = nullptr;
    rdma::driver::ControlToken token;
    std::uint32_t ip = 0;
    rdma::QpAttr attr;
    std::uint32_t mask = 0;
};

struct PendingDestroy {
    SwroceQp* qp = nullptr;
    rdma::driver::ControlToken token;
};

struct SwroceCounters {
    std::uint64_t arp_requests_sent = 0;
    std::uint64_t arp_replies_sent = 0;
    std::uint64_t arp_resolved = 0;
    std::uint64_t arp_failed = 0;
    std::array<std::uint64_t, 8> arp_errors{}; // by ArpError
    std::uint64_t rx_not_handled = 0;          // frames the control path had no use for
    std::uint64_t tx_dropped = 0;              // control frames the port did not take
};

inline constexpr std::uint32_t first_qpn = 0x11; // QPN 0 and 1 are IB's special QPs

struct SwroceDevice {
    rdma::DeviceId id = rdma::invalid_device;
    std::string name;
    SwroceDevargs args;
    SwrocePort port;
    std::unique_ptr<ArpResolver> arp;
    rdma::Gid gid{};
    rdma::Mtu path_mtu = rdma::Mtu::mtu_1024;
    std::uint64_t tsc_hz = 0;
    std::uint32_t max_qp = 0;
    std::vector<std::unique_ptr<SwroceQp>> qps; // index = qpn - first_qpn
    std::vector<std::unique_ptr<SwroceCq>> cqs;
    std::vector<PendingRtr> pending_rtr;
    std::vector<PendingDestroy> pending_destroy;
    bool link_was_up = false; // last link state reported, for port_active / port_error events
    SwroceCounters counters;

    [[nodiscard]] SwroceQp* qp_by_number(std::uint32_t qpn) noexcept {
        const std::uint32_t index = qpn - first_qpn;
        return qpn >= first_qpn && index < qps.size() ? qps[index].get() : nullptr;
    }
};

// Control ops (swroce_control.cpp) and fast path (swroce_fastpath.cpp).
extern const rdma::driver::DeviceOps swroce_ops;
std::uint16_t swroce_post_send(void* queue, const rdma::SendWr* wrs, std::uint16_t count);
std::uint16_t swroce_post_recv(void* queue, const rdma::RecvWr* wrs, std::uint16_t count);
std::uint16_t swroce_poll_cq(void* queue, rdma::WorkCompletion* wcs, std::uint16_t count);

// Moves every queued WR of `qp` to its CQs as a flush error (QP in ERR, or being destroyed).
void flush_queues(SwroceQp& qp) noexcept;

} // namespace prdma::swroce
