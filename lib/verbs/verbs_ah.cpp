// Address handles: ibv_create_ah and ibv_destroy_ah on prdma's AddressHandle, and the reply
// address of a received datagram (ibv_init_ah_from_wc, ibv_create_ah_from_wc) read from its GRH.
// RoCE needs the GRH (is_global) for the peer's GID; the MAC is resolved by the device (ARP or ND),
// which the creation waits for, as rdma-core's providers wait for the kernel's neighbour table.
#include <algorithm>
#include <arpa/inet.h>
#include <array>
#include <cerrno>
#include <cstring>

#include <prdma/format.hpp>

#include "verbs_shim.hpp"

namespace prdma::verbs {
namespace {

Result<rdma::AhAttr> ah_attr_of(const ibv_ah_attr& in) {
    if (in.is_global == 0) {
        return Error(StatusCode::invalid_parameter, "RoCE needs a GRH: set ah_attr.is_global");
    }
    rdma::AhAttr out;
    std::memcpy(out.dest_gid.raw.data(), in.grh.dgid.raw, out.dest_gid.raw.size());
    out.port = in.port_num;
    out.sgid_index = in.grh.sgid_index;
    out.traffic_class = in.grh.traffic_class;
    // A GRH's hop limit of 0 would reach nobody; rdma-core's RoCE providers send 64 then.
    out.hop_limit = in.grh.hop_limit != 0 ? in.grh.hop_limit : 64;
    out.flow_label = in.grh.flow_label;
    return out;
}

Result<std::unique_ptr<ShimAh>> make_ah(ShimContext& context, ibv_pd* pd, const ibv_ah_attr& in) {
    Result<rdma::AhAttr> attr = ah_attr_of(in);
    if (!attr.ok()) {
        return attr.error();
    }
    const std::uint64_t request = next_request(context);
    Result<rdma::AddressHandle> ah = shim_of<ShimPd>(pd).handle.create_ah(attr.value(), request);
    if (Status created = await_created(context, request, ah); !created.ok()) {
        return created.error();
    }
    auto made = std::make_unique<ShimAh>();
    made->handle = keep(std::make_unique<rdma::AddressHandle>(std::move(ah.value())));
    made->wr_handle = made->handle->wr_handle();
    return made;
}

// The GRH of a RoCE v2 datagram as the device delivered it: an IPv4 header in its last 20 bytes
// behind zeros, or an IPv6 header.
int grh_ip_version(const std::uint8_t* grh) {
    constexpr std::size_t ipv4_at = 20;
    if ((grh[ipv4_at] >> 4) == 4 &&
        std::all_of(grh, grh + ipv4_at, [](std::uint8_t b) { return b == 0; })) {
        return 4;
    }
    return (grh[0] >> 4) == 6 ? 6 : 0;
}

// Who sent the datagram `wc` completed, from its GRH: the sender's GID, its traffic class, and
// our GID index of the address it was sent to (0, the device's one GID; -1 for another).
int reply_ah_attr(ibv_context* context, std::uint8_t port_num, const ibv_wc& wc, const ibv_grh& grh,
                  ibv_ah_attr& out) {
    out = {};
    out.port_num = port_num;
    out.sl = wc.sl;
    if ((wc.wc_flags & IBV_WC_GRH) == 0) {
        return -1; // RoCE has no LID: without the GRH nobody can be answered
    }
    const auto* bytes = reinterpret_cast<const std::uint8_t*>(&grh);
    ibv_gid ours{};
    std::array<std::uint8_t, 16> to{};
    switch (grh_ip_version(bytes)) {
    case 4: {
        const std::uint8_t* ip = bytes + 20;
        // IPv4-mapped GIDs (::ffff:a.b.c.d) of the source and destination addresses.
        out.grh.dgid.raw[10] = out.grh.dgid.raw[11] = 0xff;
        std::memcpy(out.grh.dgid.raw + 12, ip + 12, 4);
        to[10] = to[11] = 0xff;
        std::memcpy(to.data() + 12, ip + 16, 4);
        out.grh.traffic_class = ip[1];
        break;
    }
    case 6: {
        const std::uint32_t flow = ntohl(grh.version_tclass_flow);
        std::memcpy(out.grh.dgid.raw, grh.sgid.raw, sizeof(out.grh.dgid.raw));
        std::memcpy(to.data(), grh.dgid.raw, to.size());
        out.grh.traffic_class = static_cast<std::uint8_t>(flow >> 20);
        out.grh.flow_label = flow & 0xfffffU;
        break;
    }
    default:
        return -1;
    }
    out.is_global = 1;
    out.grh.hop_limit = 0xff;
    if (ibv_query_gid(context, port_num, 0, &ours) != 0 ||
        std::memcmp(ours.raw, to.data(), to.size()) != 0) {
        return -1; // sent to an address that is not this port's GID
    }
    out.grh.sgid_index = 0;
    return 0;
}

} // namespace
} // namespace prdma::verbs

using prdma::verbs::shim_of;
using prdma::verbs::ShimAh;
using prdma::verbs::ShimContext;

extern "C" {

ibv_ah* ibv_create_ah(ibv_pd* pd, ibv_ah_attr* attr) {
    constexpr const char* verb = "ibv_create_ah";
    if (pd == nullptr || attr == nullptr) {
        prdma::verbs::refuse(verb, EINVAL, "no PD or no attributes");
        return nullptr;
    }
    ShimContext& context = prdma::verbs::shim_context(pd->context);
    prdma::verbs::ContextHold hold(context, verb);
    if (!hold) {
        return nullptr;
    }
    const std::lock_guard lock(context.control_mutex());
    prdma::Result<std::unique_ptr<ShimAh>> made = prdma::verbs::make_ah(context, pd, *attr);
    if (!made.ok()) {
        prdma::verbs::refuse(verb, prdma::verbs::errno_of(made.error().code()),
                             made.error().message());
        return nullptr;
    }
    ibv_ah& ah = made.value()->ah;
    ah.context = pd->context;
    ah.pd = pd;
    hold.keep();
    return &made.value().release()->ah; // the caller's until ibv_destroy_ah
}

int ibv_destroy_ah(ibv_ah* ah) {
    if (ah == nullptr) {
        return EINVAL;
    }
    auto& shim = shim_of<ShimAh>(ah);
    ShimContext& context = prdma::verbs::shim_context(ah->context);
    {
        const std::lock_guard lock(context.control_mutex());
        if (prdma::Status destroyed = shim.handle->destroy(); !destroyed.ok()) {
            prdma::verbs::refuse("ibv_destroy_ah", prdma::verbs::errno_of(destroyed.error().code()),
                                 destroyed.error().message());
            return errno;
        }
    }
    prdma::verbs::release_kept(shim.handle);
    const std::unique_ptr<ShimAh> gone(&shim);
    prdma::verbs::release_context(context);
    return 0;
}

int ibv_init_ah_from_wc(ibv_context* context, uint8_t port_num, ibv_wc* wc, ibv_grh* grh,
                        ibv_ah_attr* ah_attr) {
    if (context == nullptr || wc == nullptr || grh == nullptr || ah_attr == nullptr) {
        return -1;
    }
    return prdma::verbs::reply_ah_attr(context, port_num, *wc, *grh, *ah_attr);
}

ibv_ah* ibv_create_ah_from_wc(ibv_pd* pd, ibv_wc* wc, ibv_grh* grh, uint8_t port_num) {
    ibv_ah_attr attr{};
    if (pd == nullptr || ibv_init_ah_from_wc(pd->context, port_num, wc, grh, &attr) != 0) {
        errno = EINVAL;
        return nullptr;
    }
    return ibv_create_ah(pd, &attr);
}

} // extern "C"
