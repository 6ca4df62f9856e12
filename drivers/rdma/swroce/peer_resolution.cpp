// A peer's MAC for what needs one before it can send: a QP's RTR without dest_mac, an address
// handle without one. Known to the neighbour table, it is used at once; else ARP (IPv4) or
// neighbour discovery (IPv6) asks for it (group 0 owns the resolver), the request pends in the
// device's pending_resolutions, and it finishes when the answer, or the resolver's giving up,
// reaches the control path.
#include <cstdio>

#include <rte_cycles.h>

#include <prdma/format.hpp>

#include "group_hold.hpp"
#include "swroce_control.hpp"

namespace prdma::swroce {

std::vector<PendingResolution>
take_pending(SwroceDevice& dev, const std::function<bool(const PendingResolution&)>& match) {
    std::vector<PendingResolution> taken;
    std::erase_if(dev.pending_resolutions, [&](const PendingResolution& p) {
        if (!match(p)) {
            return false;
        }
        taken.push_back(p);
        return true;
    });
    return taken;
}

namespace {

Error pending_resolution(const SwroceDevice& dev, const char* how) {
    const std::string protocol(resolution_protocol(dev));
    return {StatusCode::pending,
            strformat("resolving the peer's MAC address with %s%s", protocol.c_str(), how)};
}

const char* invalid_target_reason(const rdma::Gid& peer) {
    return peer.is_ipv4_mapped() ? "the destination GID is not a unicast IPv4 peer address"
                                 : "the destination GID is not a unicast IPv6 peer address";
}

// Another thread drives group 0, which the resolver belongs to: that thread looks the peer up, or
// starts the resolution, between two bursts (start_resolution), and `pending` waits as for one
// started here.
Error resolve_on_owner(SwroceDevice& dev, const PendingResolution& pending) {
    auto request = make_request(GroupWork::resolve_neighbour, 0, pending.token);
    request->neighbour = pending.peer;
    if (Status sent = send_to_owner(dev, std::move(request)); !sent.ok()) {
        return sent.error();
    }
    dev.pending_resolutions.push_back(pending);
    return pending_resolution(dev, " (queue group 0's poller asks)");
}

} // namespace

Error unresolvable_peer(const SwroceDevice& dev, const rdma::Gid& peer) {
    return {StatusCode::not_supported,
            strformat("%s speaks %s and resolves only such peers' MACs; give dest_mac for the %s "
                      "peer %s",
                      dev.name.c_str(), dev.args.ip.is_v4 ? "IPv4" : "IPv6",
                      peer.is_ipv4_mapped() ? "IPv4" : "IPv6",
                      IpAddress{peer.raw, peer.is_ipv4_mapped()}.to_string().c_str())};
}

Result<MacAddress> resolve_peer(SwroceDevice& dev, const PendingResolution& pending) {
    const GroupHold resolver_group(dev, 0); // the resolver and its frames are group 0's
    // Outcomes first (under the hold, so none comes in between): a resolution started here then
    // never finds neighbour_outcomes holding more than the resolutions in flight.
    finish_neighbour_outcomes(dev);
    if (!resolver_group) {
        return resolve_on_owner(dev, pending);
    }
    const std::uint64_t now = rte_get_tsc_cycles();
    if (auto mac = neighbour_lookup(dev, pending.peer, now)) {
        return *mac;
    }
    switch (neighbour_request(dev, pending.peer, now, dev.control_counters)) {
    case NeighbourRequestResult::send:
    case NeighbourRequestResult::pending:
    case NeighbourRequestResult::already_known:
        break;
    case NeighbourRequestResult::no_resources:
        return Error(StatusCode::no_resources, "too many address resolutions in flight");
    case NeighbourRequestResult::invalid_target:
        return Error(StatusCode::invalid_parameter, invalid_target_reason(pending.peer));
    }
    dev.groups[0]->neighbour_due =
        0; // its retries are group 0's timers from now on (under the hold)
    dev.pending_resolutions.push_back(pending);
    return pending_resolution(dev, "");
}

namespace {

// What waited on the resolver finishes: with the MAC, or failed with `code` and `why`.
void finish(SwroceDevice& dev, PendingResolution& pending, std::optional<MacAddress> mac,
            StatusCode code, const std::string& why) {
    Device& device = *rdma::driver::device(dev.id);
    if (pending.ah != nullptr) {
        address_handle_resolved(dev, *pending.ah, pending.token, mac, code, why);
        return;
    }
    if (!mac) {
        rdma::driver::complete_control(device, pending.token, code, why);
        return;
    }
    pending.modify.resolved_mac = *mac;
    // The QP's group may have been claimed by a thread since the request started.
    Status applied = apply_or_send_modify(dev, *pending.qp, pending.modify, pending.token);
    if (applied.code() != StatusCode::pending) {
        rdma::driver::complete_control(device, pending.token, applied.code(),
                                       applied.ok() ? std::string() : applied.error().message());
    }
}

// The request whose resolve_neighbour could not start a resolution: only that one (another for the
// same peer may have started its own since).
void fail_request(SwroceDevice& dev, const ControlToken& token, StatusCode code, const char* why) {
    for (PendingResolution& pending : take_pending(dev, [&token](const PendingResolution& p) {
             return p.token.serial == token.serial && p.token.context == token.context;
         })) {
        finish(dev, pending, std::nullopt, code, why);
    }
}

void finish_all(SwroceDevice& dev, const rdma::Gid& peer, std::optional<MacAddress> mac) {
    std::string why;
    if (!mac) {
        const std::string protocol(resolution_protocol(dev));
        why = strformat("no %s reply from %s after %u requests: is the peer up on this link?",
                        protocol.c_str(),
                        IpAddress{peer.raw, peer.is_ipv4_mapped()}.to_string().c_str(),
                        neighbour_max_tries(dev));
    }
    for (PendingResolution& pending :
         take_pending(dev, [&peer](const PendingResolution& p) { return p.peer == peer; })) {
        finish(dev, pending, mac, StatusCode::not_connected, why);
    }
}

} // namespace

void resolution_started(SwroceDevice& dev, const GroupRequest& request) {
    switch (request.neighbour_result) {
    case NeighbourRequestResult::send:
    case NeighbourRequestResult::pending:
        return; // the outcome comes through neighbour_outcomes
    case NeighbourRequestResult::already_known:
        finish_all(dev, request.neighbour, request.neighbour_mac);
        return;
    case NeighbourRequestResult::no_resources:
        fail_request(dev, request.token, StatusCode::no_resources,
                     "too many address resolutions in flight");
        return;
    case NeighbourRequestResult::invalid_target:
        fail_request(dev, request.token, StatusCode::invalid_parameter,
                     invalid_target_reason(request.neighbour));
        return;
    }
}

void finish_neighbour_outcomes(SwroceDevice& dev) {
    while (!dev.neighbour_outcomes.empty()) {
        const NeighbourOutcome outcome = dev.neighbour_outcomes.front();
        dev.neighbour_outcomes.pop();
        finish_all(dev, outcome.peer, outcome.mac);
    }
}

} // namespace prdma::swroce
