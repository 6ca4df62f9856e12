// A peer's MAC for what needs one before it can send: a QP's RTR without dest_mac, an address
// handle without one. Known to the ARP table, it is used at once; else ARP asks for it (group 0
// owns the resolver), the request pends in the device's pending_resolutions, and it finishes when
// the answer, or the resolver's giving up, reaches the control path.
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

Error pending_resolution(const char* how) {
    return {StatusCode::pending, strformat("resolving the peer's MAC address with ARP%s", how)};
}

// Another thread drives group 0, which ARP belongs to: that thread looks the peer up, or starts
// the resolution, between two bursts (start_resolution), and `pending` waits as for one started
// here.
Error resolve_on_owner(SwroceDevice& dev, const PendingResolution& pending) {
    auto request = make_request(GroupWork::resolve_arp, 0, pending.token);
    request->arp_ip = pending.ip;
    if (Status sent = send_to_owner(dev, std::move(request)); !sent.ok()) {
        return sent.error();
    }
    dev.pending_resolutions.push_back(pending);
    return pending_resolution(" (queue group 0's poller asks)");
}

} // namespace

Result<MacAddress> resolve_peer(SwroceDevice& dev, const PendingResolution& pending) {
    const GroupHold arp_group(dev, 0); // the resolver and its frames are group 0's
    // Outcomes first (under the hold, so none comes in between): a resolution started here then
    // never finds arp_outcomes holding more than the resolutions in flight.
    finish_arp_outcomes(dev);
    if (!arp_group) {
        return resolve_on_owner(dev, pending);
    }
    const std::uint64_t now = rte_get_tsc_cycles();
    if (auto mac = dev.arp->lookup(pending.ip, now)) {
        return *mac;
    }
    ArpFrame frame;
    switch (dev.arp->request(pending.ip, now, frame)) {
    case ArpRequestResult::send:
        send_control_frame(dev, frame.view(), dev.control_counters);
        ++dev.control_counters.arp_requests_sent;
        break;
    case ArpRequestResult::pending:
    case ArpRequestResult::already_known:
        break;
    case ArpRequestResult::no_resources:
        return Error(StatusCode::no_resources, "too many ARP resolutions in flight");
    case ArpRequestResult::invalid_target:
        return Error(StatusCode::invalid_parameter,
                     "the destination GID is not a unicast IPv4 peer address");
    }
    dev.groups[0]->arp_due = 0; // its retries are group 0's timers from now on (under the hold)
    dev.pending_resolutions.push_back(pending);
    return pending_resolution("");
}

namespace {

// What waited on ARP finishes: with the MAC, or failed with `code` and `why`.
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

// The request whose resolve_arp could not start a resolution: only that one (another for the
// same peer may have started its own since).
void fail_request(SwroceDevice& dev, const ControlToken& token, StatusCode code, const char* why) {
    for (PendingResolution& pending : take_pending(dev, [&token](const PendingResolution& p) {
             return p.token.serial == token.serial && p.token.context == token.context;
         })) {
        finish(dev, pending, std::nullopt, code, why);
    }
}

void finish_all(SwroceDevice& dev, std::uint32_t ip, std::optional<MacAddress> mac) {
    std::string why;
    if (!mac) {
        char text[16] = {};
        std::snprintf(text, sizeof(text), "%u.%u.%u.%u", ip >> 24, (ip >> 16) & 0xff,
                      (ip >> 8) & 0xff, ip & 0xff);
        why = strformat("no ARP reply from %s after %u requests: is the peer up on this link?",
                        text, dev.arp->config().max_tries);
    }
    for (PendingResolution& pending :
         take_pending(dev, [ip](const PendingResolution& p) { return p.ip == ip; })) {
        finish(dev, pending, mac, StatusCode::not_connected, why);
    }
}

} // namespace

void resolution_started(SwroceDevice& dev, const GroupRequest& request) {
    switch (request.arp_result) {
    case ArpRequestResult::send:
    case ArpRequestResult::pending:
        return; // the outcome comes through arp_outcomes
    case ArpRequestResult::already_known:
        finish_all(dev, request.arp_ip, request.arp_mac);
        return;
    case ArpRequestResult::no_resources:
        fail_request(dev, request.token, StatusCode::no_resources,
                     "too many ARP resolutions in flight");
        return;
    case ArpRequestResult::invalid_target:
        fail_request(dev, request.token, StatusCode::invalid_parameter,
                     "the destination GID is not a unicast IPv4 peer address");
        return;
    }
}

void finish_arp_outcomes(SwroceDevice& dev) {
    while (!dev.arp_outcomes.empty()) {
        const ArpOutcome outcome = dev.arp_outcomes.front();
        dev.arp_outcomes.pop();
        finish_all(dev, outcome.ip, outcome.mac);
    }
}

} // namespace prdma::swroce
