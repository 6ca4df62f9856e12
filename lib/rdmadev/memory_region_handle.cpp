// MemoryRegionHandle: one reference to a registered region; dropping it deregisters.
#include <cstring>

#include <prdma/format.hpp>

#include "objects.hpp"
#include "rdmadev_log.hpp"

namespace prdma::rdma {

using detail::MrObject;

// ---- MemoryRegionHandle -----------------------------------------------------------------------

MemoryRegionHandle::MemoryRegionHandle(MrObject* mr) : mr_(mr), region_(mr->region) {}
MemoryRegionHandle::MemoryRegionHandle(MemoryRegionHandle&& other) noexcept
    : mr_(std::exchange(other.mr_, nullptr)), region_(std::exchange(other.region_, nullptr)) {}
MemoryRegionHandle& MemoryRegionHandle::operator=(MemoryRegionHandle&& other) noexcept {
    detail::move_assign(*this, std::move(other));
    return *this;
}
MemoryRegionHandle::~MemoryRegionHandle() {
    release();
}

void MemoryRegionHandle::release() noexcept {
    if (mr_ != nullptr && mr_->creating) {
        // The context deregisters it once the device has finished registering it.
        std::exchange(mr_, nullptr)->handle_dropped = true;
        region_ = nullptr;
        return;
    }
    (void)deregister();
}

bool MemoryRegionHandle::ready() const noexcept {
    return mr_ != nullptr && !mr_->creating && mr_->region != nullptr;
}

Status MemoryRegionHandle::deregister(std::uint64_t request_id) {
    if (mr_ == nullptr) {
        return {};
    }
    if (mr_->creating) {
        return detail::not_ready("memory region", true);
    }
    region_ = nullptr;
    return detail::release_mr_object(std::exchange(mr_, nullptr), request_id);
}

} // namespace prdma::rdma
