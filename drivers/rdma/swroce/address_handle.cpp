// Address handles: made from the peer's GID and, when the caller gives none, the MAC ARP finds
// for it (peer_resolution.cpp), as an RC QP's RTR does. The device keeps every AH it made; a
// destroy frees it at once, since a UD post copies what it needs from the AH.
#include <prdma/format.hpp>

#include "engine.hpp"
#include "swroce_control.hpp"

namespace prdma::swroce {

namespace {

// The datagrams' headers, and the AH usable from now on.
void make_ready(SwroceDevice& dev, SwroceAh& ah, const MacAddress& mac) {
    roce::FrameHeaders h = headers_towards(dev, ah.attr.dest_gid, mac);
    h.ipv4.tos = ah.attr.traffic_class;
    h.ipv4.ttl = ah.attr.hop_limit;
    h.ipv6.traffic_class = ah.attr.traffic_class;
    h.ipv6.hop_limit = ah.attr.hop_limit;
    h.ipv6.flow_label = ah.attr.flow_label;
    ah.headers = roce::HeaderTemplate::make(h);
    ah.ready.store(true, std::memory_order_release);
}

} // namespace

Status create_ah(Device& device, const rdma::driver::AhInit& init, const ControlToken& token,
                 void** out) {
    SwroceDevice& dev = swroce(device);
    const rdma::Gid& gid = init.attr.dest_gid;
    if (gid.is_ipv4_mapped() != dev.args.ip.is_v4) {
        return Error(StatusCode::invalid_parameter,
                     strformat("%s speaks %s: an address handle to an %s GID reaches nobody",
                               dev.name.c_str(), dev.args.ip.is_v4 ? "IPv4" : "IPv6",
                               gid.is_ipv4_mapped() ? "IPv4-mapped" : "IPv6"));
    }
    if (dev.ahs.size() >= max_ahs) {
        return Error(StatusCode::no_resources,
                     strformat("%s holds its %u address handles", dev.name.c_str(), max_ahs));
    }
    auto owned = std::make_unique<SwroceAh>();
    SwroceAh& ah = *owned;
    ah.pd = init.pd;
    ah.attr = init.attr;
    if (init.attr.dest_mac) {
        make_ready(dev, ah, *init.attr.dest_mac);
        *out = &ah;
        dev.ahs.emplace(&ah, std::move(owned));
        return {};
    }
    if (!resolves(dev, gid)) {
        return unresolvable_peer(dev, gid);
    }
    PendingResolution pending;
    pending.token = token;
    pending.peer = gid;
    pending.ah = &ah;
    Result<MacAddress> mac = resolve_peer(dev, pending);
    if (!mac && mac.error().code() != StatusCode::pending) {
        return mac.error();
    }
    if (!mac && !token.may_pend) {
        // The caller cannot wait: the resolution goes on without it, for its next call.
        (void)take_pending(dev, [&token](const PendingResolution& p) {
            return p.token.serial == token.serial && p.token.context == token.context;
        });
        const std::string protocol(resolution_protocol(dev));
        return Error(StatusCode::busy,
                     strformat("resolving the peer's MAC address with %s: call again, or pass a "
                               "request id and wait for its completion",
                               protocol.c_str()));
    }
    if (mac) {
        make_ready(dev, ah, mac.value());
    }
    *out = &ah;
    dev.ahs.emplace(&ah, std::move(owned));
    return mac ? Status{} : Status(mac.error());
}

void address_handle_resolved(SwroceDevice& dev, SwroceAh& ah, const ControlToken& token,
                             std::optional<MacAddress> mac, StatusCode code,
                             const std::string& why) {
    Device& device = *rdma::driver::device(dev.id);
    if (mac) {
        make_ready(dev, ah, *mac);
        rdma::driver::complete_control(device, token, StatusCode::ok);
        return;
    }
    dev.ahs.erase(&ah); // the class drops a failed AH without destroying it
    rdma::driver::complete_control(device, token, code, why);
}

void destroy_ah(Device& device, void* ah) {
    swroce(device).ahs.erase(static_cast<const SwroceAh*>(ah));
}

} // namespace prdma::swroce
