// ProtectionDomain: every registration (seed 000-004) goes through the device's registry and is
// counted against the PD and its context.
#include <cstring>

#include <prdma/format.hpp>
#include <prdma/mem/dma_memory.hpp>

#include "objects.hpp"
#include "rdmadev_log.hpp"

namespace prdma::rdma {

using detail::ContextState;
using detail::MrObject;
using detail::PdObject;

namespace {

// The device a registration on `pd` goes to, or why there is none.
Result<driver::Device*> registering_device(const PdObject* pd) {
    if (pd == nullptr) {
        return Error(StatusCode::invalid_parameter, "the PD is not allocated");
    }
    driver::Device* dev = detail::live_device(*pd->context);
    if (dev == nullptr) {
        return detail::device_removed_error(pd->context->device);
    }
    return dev;
}

// Seed 002: exactly one of MEM_READ, MEM_WRITE, MEM_READWRITE; anything else is invalid flags.
Status check_wsp_access(mem::WspAccess access) {
    const auto raw = static_cast<unsigned>(access);
    const auto known = static_cast<unsigned>(mem::WspAccess::read_write);
    if ((raw & ~known) != 0) {
        return Error(StatusCode::invalid_parameter,
                     strformat("WSP access 0x%x has unknown bits 0x%x; use read (0x1), write (0x2) "
                               "or read_write (0x3)",
                               raw, raw & ~known));
    }
    if (raw == 0) {
        return Error(StatusCode::invalid_parameter,
                     "WSP access 0x0 grants nothing; use read (0x1), write (0x2) or read_write "
                     "(0x3)");
    }
    return {};
}

} // namespace

// ---- ProtectionDomain -------------------------------------------------------------------------

ProtectionDomain::ProtectionDomain(ProtectionDomain&& other) noexcept
    : pd_(std::exchange(other.pd_, nullptr)) {}
ProtectionDomain& ProtectionDomain::operator=(ProtectionDomain&& other) noexcept {
    detail::move_assign(*this, std::move(other));
    return *this;
}
ProtectionDomain::~ProtectionDomain() {
    release();
}

void ProtectionDomain::release() noexcept {
    if (pd_ != nullptr && !destroy().ok()) {
        // Children still live: the PD goes with the last of them.
        std::exchange(pd_, nullptr)->handle_dropped = true;
    }
}

std::uint32_t ProtectionDomain::id() const {
    return pd_ != nullptr ? pd_->id : 0;
}

Status ProtectionDomain::destroy() {
    if (pd_ == nullptr) {
        return {};
    }
    if (pd_->has_children()) {
        return Error(StatusCode::busy,
                     strformat("PD %u still has %u QPs, %u SRQs, %u MRs, %u address handles and %u "
                               "registration caches",
                               pd_->id, pd_->qps, pd_->srqs, pd_->mrs, pd_->ahs, pd_->caches));
    }
    std::unique_ptr<PdObject> owned(std::exchange(pd_, nullptr));
    --owned->context->resources.pds;
    return {};
}

Status ProtectionDomain::adopt(PdObject& pd, Result<mem::MemoryRegion*> region,
                               std::uint64_t request_id, MemoryRegionHandle& out) {
    if (!region) {
        return region.error();
    }
    ContextState& context = *pd.context;
    auto mr = std::make_unique<MrObject>();
    mr->context = pd.context;
    mr->pd = &pd;
    mr->region = region.value();
    ++pd.mrs;
    ++context.resources.mrs;
    driver::Device* dev = detail::live_device(context);
    // Only a new region is news to the device; another reference to a known one is not.
    if (dev != nullptr && dev->config.ops->register_mr != nullptr &&
        region.value()->references() == 1) {
        const driver::ControlToken token =
            context.token(request_id, ControlOp::register_mr, 0, request_id != 0);
        detail::track(context, token, mr.get());
        Status status = dev->config.ops->register_mr(*dev, *region.value(), token);
        if (status.code() == StatusCode::pending) {
            mr->creating = true;
            out = MemoryRegionHandle(mr.release());
            return status;
        }
        detail::untrack(context, token);
        if (!status.ok()) {
            (void)dev->registry->deregister(region.value());
            mr->region = nullptr;
            (void)detail::release_mr_object(mr.release(), 0);
            return status;
        }
    }
    out = MemoryRegionHandle(mr.release());
    return {};
}

template <typename RegistryCall>
Result<MemoryRegionHandle> ProtectionDomain::register_through(std::uint64_t request_id,
                                                              RegistryCall&& registry_call) {
    return detail::handle_or_error<MemoryRegionHandle>([&](MemoryRegionHandle& handle) -> Status {
        auto device = registering_device(pd_);
        if (!device) {
            return device.error();
        }
        return adopt(*pd_, registry_call(*device.value()), request_id, handle);
    });
}

Result<MemoryRegionHandle> ProtectionDomain::register_memory(const void* addr, std::size_t length,
                                                             AccessFlags access,
                                                             std::uint64_t request_id) {
    return register_through(request_id, [&](driver::Device& dev) -> Result<mem::MemoryRegion*> {
        mem::PageList pages;
        const mem::PageListError error = mem::build_dma_page_list(addr, length, pages);
        if (error != mem::PageListError::ok) {
            return mem::page_list_error(error, "register_memory");
        }
        return dev.registry->register_pages(pd_->id, pages, access);
    });
}

Result<MemoryRegionHandle>
ProtectionDomain::register_for_connection(const QueuePair& qp, const void* addr, std::size_t length,
                                          mem::WspAccess access, std::uint64_t request_id) {
    if (pd_ == nullptr || !qp) {
        return Error(StatusCode::invalid_parameter, "the PD or the QP is not allocated");
    }
    if (Status flags = check_wsp_access(access); !flags.ok()) {
        return flags.error();
    }
    return register_through(request_id, [&](driver::Device& dev) -> Result<mem::MemoryRegion*> {
        if (qp.qp_->pd != pd_) {
            return Error(StatusCode::invalid_parameter, "the QP belongs to another PD");
        }
        if (dev.config.ops->qp_connection == nullptr) {
            return Error(StatusCode::not_supported, "the device has no connection-bound regions");
        }
        // The driver's connection and state: the engine may have moved the QP to ERR on its own
        // since the last modify.
        const mem::ConnectionId connection = dev.config.ops->qp_connection(dev, qp.qp_->driver);
        const QpState state = dev.config.ops->qp_state(dev, qp.qp_->driver);
        if (connection == mem::no_connection || (state != QpState::rtr && state != QpState::rts)) {
            return Error(StatusCode::not_connected,
                         strformat("QP %u is not connected (%s): seed 002 registers memory for a "
                                   "connected socket only",
                                   qp.qp_->qpn, std::string(qp_state_name(state)).c_str()));
        }
        mem::PageList pages;
        const mem::PageListError error = mem::build_dma_page_list(addr, length, pages);
        if (error != mem::PageListError::ok) {
            return mem::page_list_error(error, "register_for_connection");
        }
        return dev.registry->register_pages(pd_->id, pages, mem::access_from_wsp(access),
                                            mem::RegionKind::virtual_range, connection);
    });
}

Result<MemoryRegionHandle> ProtectionDomain::register_sgl(std::span<const mem::SglElement> sgl,
                                                          unsigned page_shift, AccessFlags access,
                                                          std::uint64_t request_id) {
    return register_through(request_id, [&](driver::Device& dev) {
        return dev.registry->register_sgl(pd_->id, sgl, page_shift, access);
    });
}

Result<MemoryRegionHandle>
ProtectionDomain::register_virtual(std::span<const mem::VirtualPiece> pieces, unsigned page_shift,
                                   AccessFlags access, std::uint64_t request_id) {
    return register_through(request_id, [&](driver::Device& dev) {
        return dev.registry->register_virtual(pd_->id, pieces, page_shift, access);
    });
}

Result<MemoryRegionHandle> ProtectionDomain::get_dma_region(std::uint64_t request_id) {
    return register_through(
        request_id, [&](driver::Device& dev) { return dev.registry->get_dma_region(pd_->id); });
}

Result<MemoryRegionHandle> ProtectionDomain::alloc_fast_reg_region(std::uint32_t max_pages,
                                                                   AccessFlags allowed_access,
                                                                   std::uint64_t request_id) {
    return register_through(request_id, [&](driver::Device& dev) {
        return dev.registry->allocate_fast_reg(pd_->id, max_pages, allowed_access);
    });
}

} // namespace prdma::rdma
