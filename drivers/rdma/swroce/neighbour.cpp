// The device's side of neighbour resolution: its resolver (ARP on an IPv4 device, neighbour
// discovery on an IPv6 one) fed with what group 0 receives, its frames put on the port, and its
// outcomes handed to the control path, which finishes the RTRs and address handles waiting on
// them (peer_resolution.cpp). Everything here runs under group 0's hold.
#include <rte_cycles.h>

#include "swroce_control.hpp"

namespace prdma::swroce {

namespace {

// Retries are 200 ms apart (ArpResolverConfig, NdResolverConfig): a millisecond late is nothing
// to them.
constexpr std::uint64_t resolver_polls_per_second = 1000;

// For the control path (SwroceDevice::neighbour_outcomes); run by group 0's holder.
void record_outcome(SwroceDevice& dev, const rdma::Gid& peer,
                    std::optional<MacAddress> mac) noexcept {
    NeighbourOutcome& slot = dev.neighbour_outcomes.next_slot();
    slot.peer = peer;
    slot.mac = mac;
    dev.neighbour_outcomes.push();
}

// What the device-side code needs to know of each protocol: its resolver, frames and addresses
// (as GIDs on the control path's side), and its counters.
struct Counted {
    std::uint64_t& asked;
    std::uint64_t& answered;
    std::uint64_t& resolved;
    std::uint64_t& failed;
    std::span<std::uint64_t> errors;
};

struct Arp {
    using Frame = ArpFrame;
    using Address = std::uint32_t;
    static constexpr ArpError not_ours = ArpError::not_arp;
    static ArpResolver& resolver(SwroceDevice& dev) { return *dev.arp; }
    static Address address(const rdma::Gid& gid) { return gid.ipv4_host_order(); }
    static rdma::Gid gid(Address ip) { return rdma::Gid::from_ipv4(ip); }
    static Counted counted(SwroceCounters& c) {
        return {c.arp_requests_sent, c.arp_replies_sent, c.arp_resolved, c.arp_failed,
                c.arp_errors};
    }
};

struct Nd {
    using Frame = NdFrame;
    using Address = Ipv6Address;
    static constexpr NdError not_ours = NdError::not_nd; // other ICMPv6, an echo request
    static NdResolver& resolver(SwroceDevice& dev) { return *dev.nd; }
    static Address address(const rdma::Gid& gid) { return gid.raw; }
    static rdma::Gid gid(const Address& ip) {
        rdma::Gid gid;
        gid.raw = ip;
        return gid;
    }
    static Counted counted(SwroceCounters& c) {
        return {c.nd_solicitations_sent, c.nd_advertisements_sent, c.nd_resolved, c.nd_failed,
                c.nd_errors};
    }
};

template <class Protocol>
NeighbourRequestResult request(SwroceDevice& dev, const rdma::Gid& peer, std::uint64_t now,
                               SwroceCounters& counters) noexcept {
    typename Protocol::Frame frame;
    const NeighbourRequestResult result =
        Protocol::resolver(dev).request(Protocol::address(peer), now, frame);
    if (result == NeighbourRequestResult::send) {
        send_control_frame(dev, frame.view(), counters);
        ++Protocol::counted(counters).asked;
    }
    return result;
}

// Asks again for what is still unanswered, and gives up on what was asked often enough.
template <class Protocol>
void poll(SwroceDevice& dev, std::uint64_t now) {
    std::array<typename Protocol::Frame, 8> retries;
    std::array<typename Protocol::Address, 8> failed{};
    const ProbePollResult polled = Protocol::resolver(dev).poll(now, retries, failed);
    SwroceCounters& counters = dev.groups[0]->counters;
    const Counted counted = Protocol::counted(counters);
    for (std::size_t i = 0; i < polled.frames; ++i) {
        send_control_frame(dev, retries[i].view(), counters);
        ++counted.asked;
    }
    for (std::size_t i = 0; i < polled.failed; ++i) {
        ++counted.failed;
        record_outcome(dev, Protocol::gid(failed[i]), std::nullopt);
    }
}

// False for a frame of another protocol: it is looked at as RoCE (and counted there).
template <class Protocol>
bool handle(SwroceDevice& dev, std::span<const std::uint8_t> frame, std::uint64_t now,
            SwroceCounters& counters, rte_mbuf* received) noexcept {
    typename Protocol::Frame reply;
    const auto result = Protocol::resolver(dev).on_frame(frame, now, reply);
    if (result.error == Protocol::not_ours) {
        return false;
    }
    if (received != nullptr) {
        capture_frames(dev, 0, &received, 1, false); // ahead of the answer it may cause
    }
    const Counted counted = Protocol::counted(counters);
    counters.address_conflicts += result.address_conflict ? 1 : 0;
    if (result.error != decltype(result.error)::ok) {
        ++counted.errors[static_cast<std::size_t>(result.error) % counted.errors.size()];
        return true;
    }
    if (result.reply_ready) {
        send_control_frame(dev, reply.view(), counters);
        ++counted.answered;
    }
    if (result.resolved) {
        ++counted.resolved;
        record_outcome(dev, Protocol::gid(result.resolved_ip), result.resolved_mac);
    }
    return true;
}

} // namespace

void send_control_frame(SwroceDevice& dev, std::span<const std::uint8_t> frame,
                        SwroceCounters& counters) {
    rte_mbuf* mbuf = dev.port.copy_to_mbuf(0, frame);
    if (mbuf == nullptr) {
        ++counters.tx_no_mbuf;
        return;
    }
    capture_frames(dev, 0, &mbuf, 1, true);
    // A port busy with RDMA traffic refuses it now and takes it on the next progress.
    send_frame(dev, 0, mbuf, counters);
}

bool resolves(const SwroceDevice& dev, const rdma::Gid& peer) noexcept {
    return peer.is_ipv4_mapped() ? dev.arp != nullptr : dev.nd != nullptr;
}

std::string_view resolution_protocol(const SwroceDevice& dev) noexcept {
    return dev.nd ? "neighbour discovery" : "ARP";
}

std::optional<MacAddress> neighbour_lookup(const SwroceDevice& dev, const rdma::Gid& peer,
                                           std::uint64_t now) noexcept {
    if (!resolves(dev, peer)) {
        return std::nullopt;
    }
    return peer.is_ipv4_mapped() ? dev.arp->lookup(Arp::address(peer), now)
                                 : dev.nd->lookup(Nd::address(peer), now);
}

NeighbourRequestResult neighbour_request(SwroceDevice& dev, const rdma::Gid& peer,
                                         std::uint64_t now, SwroceCounters& counters) noexcept {
    if (!resolves(dev, peer)) {
        return NeighbourRequestResult::invalid_target;
    }
    return peer.is_ipv4_mapped() ? request<Arp>(dev, peer, now, counters)
                                 : request<Nd>(dev, peer, now, counters);
}

std::size_t neighbour_pending_count(const SwroceDevice& dev) noexcept {
    return (dev.arp ? dev.arp->pending_count() : 0) + (dev.nd ? dev.nd->pending_count() : 0);
}

unsigned neighbour_max_tries(const SwroceDevice& dev) noexcept {
    return dev.nd ? dev.nd->config().max_tries : dev.arp ? dev.arp->config().max_tries : 0;
}

void start_resolution(SwroceDevice& dev, GroupRequest& request) noexcept {
    const std::uint64_t now = rte_get_tsc_cycles();
    request.neighbour_mac = neighbour_lookup(dev, request.neighbour, now);
    if (request.neighbour_mac) {
        request.neighbour_result = NeighbourRequestResult::already_known;
        return;
    }
    QueueGroupState& group = *dev.groups[0];
    request.neighbour_result = neighbour_request(dev, request.neighbour, now, group.counters);
    if (request.neighbour_result == NeighbourRequestResult::send ||
        request.neighbour_result == NeighbourRequestResult::pending) {
        group.neighbour_due = 0; // its retries are this group's timers
    }
}

std::uint64_t poll_neighbours(SwroceDevice& dev, std::uint64_t now) {
    if (dev.arp) {
        poll<Arp>(dev, now);
    }
    if (dev.nd) {
        poll<Nd>(dev, now);
    }
    return neighbour_pending_count(dev) == 0 ? no_neighbour_due
                                             : now + dev.tsc_hz / resolver_polls_per_second;
}

bool handle_neighbour_frame(SwroceDevice& dev, std::span<const std::uint8_t> frame,
                            std::uint64_t now, SwroceCounters& counters,
                            rte_mbuf* received) noexcept {
    if (is_arp_frame(frame)) {
        return dev.arp && handle<Arp>(dev, frame, now, counters, received);
    }
    return dev.nd && is_icmpv6_frame(frame) && handle<Nd>(dev, frame, now, counters, received);
}

} // namespace prdma::swroce
