// ProtectionDomain::create_registration_cache: mem::RegistrationCache with its registrations made
// through the PD, so the device loads and unloads them (register_mr / deregister_mr, a data path
// still using a table) as it does register_memory's, and the PD and its context count them.
#include <unordered_map>

#include <prdma/mem/dma_memory.hpp>
#include <prdma/rdmadev/rdmadev.hpp>

#include "objects.hpp"

namespace prdma::rdma {

namespace {

// The cache's regions, each held by the handle that registered it. The cache counts as a child
// of the PD from creation to destruction, so the PD outlives it even while it holds no region.
class PdCacheRegions {
public:
    explicit PdCacheRegions(detail::PdObject& pd) : pd_(&pd) { ++pd_->caches; }
    PdCacheRegions(const PdCacheRegions&) = delete;
    PdCacheRegions& operator=(const PdCacheRegions&) = delete;
    PdCacheRegions(PdCacheRegions&&) = delete;
    PdCacheRegions& operator=(PdCacheRegions&&) = delete;
    ~PdCacheRegions() {
        regions_.clear(); // the cache released every region first; this is only a safety net
        --pd_->caches;
        detail::release_pd_child(pd_);
    }

    [[nodiscard]] detail::PdObject& pd() const noexcept { return *pd_; }
    void keep(MemoryRegionHandle handle) {
        const mem::MemoryRegion* region = handle.get();
        regions_.emplace(region, std::move(handle));
    }
    void release(const mem::MemoryRegion* region) {
        auto it = regions_.find(region);
        if (it != regions_.end()) {
            // The last reference may pend (a data path may still read the table): the context
            // finishes it; the key is dead at once.
            (void)it->second.deregister();
            regions_.erase(it);
        }
    }

private:
    detail::PdObject* pd_;
    std::unordered_map<const mem::MemoryRegion*, MemoryRegionHandle> regions_;
};

} // namespace

Result<std::unique_ptr<mem::RegistrationCache>>
ProtectionDomain::create_registration_cache(const mem::CacheLimits& limits) {
    if (pd_ == nullptr) {
        return Error(StatusCode::invalid_parameter, "the PD is not allocated");
    }
    if (detail::live_device(*pd_->context) == nullptr) {
        return detail::device_removed_error(pd_->context->device);
    }
    auto regions = std::make_shared<PdCacheRegions>(*pd_);
    mem::CacheRegistrar registrar{
        [regions](const void* va, std::size_t length,
                  AccessFlags access) -> Result<mem::MemoryRegion*> {
            detail::PdObject& pd = regions->pd();
            driver::Device* dev = detail::live_device(*pd.context);
            if (dev == nullptr) {
                return detail::device_removed_error(pd.context->device);
            }
            mem::PageList pages;
            const mem::PageListError error = mem::build_dma_page_list(va, length, pages);
            if (error != mem::PageListError::ok) {
                return mem::page_list_error(error, "registration cache");
            }
            MemoryRegionHandle handle;
            Status status = adopt(
                pd,
                dev->registry->register_pages(pd.id, pages, access, mem::RegionKind::virtual_range,
                                              mem::any_connection, /*deduplicate=*/false),
                0, handle);
            if (!status.ok()) {
                return status.error();
            }
            mem::MemoryRegion* region = handle.get();
            regions->keep(std::move(handle));
            return region;
        },
        [regions](mem::MemoryRegion* region) { regions->release(region); }};
    return std::make_unique<mem::RegistrationCache>(std::move(registrar), limits);
}

} // namespace prdma::rdma
