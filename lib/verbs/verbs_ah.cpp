// Address handles: ibv_create_ah and ibv_destroy_ah on prdma's AddressHandle. RoCE needs the GRH
// (is_global) for the peer's GID; the MAC is resolved by the device (ARP), which the creation
// waits for, as rdma-core's providers wait for the kernel's neighbour table.
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

} // extern "C"
