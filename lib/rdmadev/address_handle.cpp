// AddressHandle: the handle of an address handle, and ProtectionDomain::create_ah. A creation may
// pend (the device resolves the peer's MAC); a destroy never does, since a UD WR takes what it
// needs from its AH when it is posted.
#include <prdma/format.hpp>

#include "objects.hpp"

namespace prdma::rdma {

using detail::AhObject;

namespace detail {

void free_ah(AhObject* ah) {
    std::unique_ptr<AhObject> owned(ah);
    if (driver::Device* dev = live_device(*owned->context);
        dev != nullptr && owned->driver != nullptr) {
        dev->config.ops->destroy_ah(*dev, owned->driver);
    }
    --owned->context->resources.ahs;
    --owned->pd->ahs;
    release_pd_child(owned->pd);
}

void finish_create_ah(AhObject* ah, StatusCode status) {
    ah->creating = false;
    if (status != StatusCode::ok) {
        // The driver has dropped its object (it never sends through a failed AH).
        ah->driver = nullptr;
    }
    if (ah->handle_dropped) {
        free_ah(ah);
    }
}

} // namespace detail

AddressHandle::AddressHandle(AddressHandle&& other) noexcept
    : ah_(std::exchange(other.ah_, nullptr)) {}
AddressHandle& AddressHandle::operator=(AddressHandle&& other) noexcept {
    detail::move_assign(*this, std::move(other));
    return *this;
}
AddressHandle::~AddressHandle() {
    release();
}

void AddressHandle::release() noexcept {
    if (ah_ == nullptr) {
        return;
    }
    AhObject* ah = std::exchange(ah_, nullptr);
    if (ah->creating) {
        ah->handle_dropped = true; // freed when its creation completes
        return;
    }
    detail::free_ah(ah);
}

bool AddressHandle::ready() const noexcept {
    return ah_ != nullptr && !ah_->creating && ah_->driver != nullptr;
}

void* AddressHandle::wr_handle() const noexcept {
    return ready() ? ah_->driver : nullptr;
}

AhAttr AddressHandle::attr() const {
    return ah_ != nullptr ? ah_->attr : AhAttr{};
}

Status AddressHandle::destroy() {
    if (ah_ == nullptr) {
        return {};
    }
    if (ah_->creating) {
        return detail::not_ready("address handle", true);
    }
    detail::free_ah(std::exchange(ah_, nullptr));
    return {};
}

namespace {

Status check_ah_attr(const driver::Device& dev, const AhAttr& attr) {
    if (attr.port == 0 || attr.port > dev.config.port_count) {
        return Error(StatusCode::invalid_parameter,
                     strformat("port %u does not exist (1..%u)", attr.port, dev.config.port_count));
    }
    if (attr.sgid_index != 0) {
        return Error(
            StatusCode::invalid_parameter,
            strformat("GID index %u: the device has its one GID at index 0", attr.sgid_index));
    }
    if (attr.flow_label > 0xfffffU) {
        return Error(StatusCode::invalid_parameter,
                     strformat("flow label 0x%x does not fit 20 bits", attr.flow_label));
    }
    if (attr.hop_limit == 0) {
        return Error(StatusCode::invalid_parameter, "a hop limit of 0 reaches nobody");
    }
    const Gid none{};
    if (attr.dest_gid == none) {
        return Error(StatusCode::invalid_parameter, "the address handle names no GID");
    }
    return {};
}

} // namespace

Result<AddressHandle> ProtectionDomain::create_ah(const AhAttr& attr, std::uint64_t request_id) {
    if (pd_ == nullptr) {
        return Error(StatusCode::invalid_parameter, "the PD is not allocated");
    }
    detail::ContextState& context = *pd_->context;
    driver::Device* dev = detail::live_device(context);
    if (dev == nullptr) {
        return detail::device_removed_error(context.device);
    }
    if (dev->config.ops->create_ah == nullptr ||
        !detail::device_attr(*dev).capability_flags.has(cap_ud)) {
        return Error(StatusCode::not_supported,
                     strformat("%s has no unreliable datagrams", dev->config.name.c_str()));
    }
    if (Status checked = check_ah_attr(*dev, attr); !checked.ok()) {
        return checked.error();
    }
    auto ah = std::make_unique<AhObject>();
    ah->context = pd_->context;
    ah->pd = pd_;
    ah->attr = attr;
    const driver::ControlToken token =
        context.token(request_id, ControlOp::create_ah, 0, request_id != 0);
    detail::track(context, token, ah.get());
    Status status = dev->config.ops->create_ah(*dev, {pd_->id, attr}, token, &ah->driver);
    if (status.code() == StatusCode::pending) {
        ah->creating = true;
    } else {
        detail::untrack(context, token);
        if (!status.ok()) {
            return status.error();
        }
    }
    ++pd_->ahs;
    ++context.resources.ahs;
    return AddressHandle(ah.release());
}

} // namespace prdma::rdma
