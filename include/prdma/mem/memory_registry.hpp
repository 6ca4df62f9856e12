// MemoryRegistry: a device's memory registrations — the key table, the regions and their
// translation tables — and every registration path of the seeds:
//   register_virtual / register_pages  (seed 000 IbRegVirtMr; seed 002 per-connection, refcounted)
//   register_sgl                       (seed 000 IbRegScatterGatherMr)
//   get_dma_region                     (seed 000 IbGetDmaMr, seed 004 reserved L_Key)
//   allocate_fast_reg + fast_register  (seed 001 NdkFastRegister), invalidate (LOCAL_INV)
//
// Control-path calls allocate and return Result; fast_register() and invalidate() run on the
// queue pair's lcore, in send-queue order, and neither allocate nor throw. Registration and the
// data path of one device run on one thread, or the application serialises them.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <tuple>

#include <prdma/mem/access.hpp>
#include <prdma/mem/memory_key.hpp>
#include <prdma/mem/memory_region.hpp>
#include <prdma/mem/page_list.hpp>
#include <prdma/mem/translation_table.hpp>
#include <prdma/status.hpp>

namespace prdma::mem {

enum class FastRegResult : std::uint8_t {
    ok = 0,
    not_fast_reg_region, // the MR was not allocated for fast-register
    key_index_changed,   // fast-register may change the key's variant only
    variant_not_changed, // the new key must differ from the last registration's, or stale keys live
    still_valid,         // invalidate (LOCAL_INV) before registering new pages, as IBTA requires
    wrong_pd,            // the queue pair's PD is not the region's
    access_violation,    // remote access asked of an MR not initialised for it (seed 001)
    bad_access,          // the access mask breaks the IBTA rules
    bad_page_list,       // see the PageListError
    retired,             // the region is being deregistered (retire() ran): it takes no new pages
};

std::string_view fast_reg_result_name(FastRegResult result);

enum class InvalidateResult : std::uint8_t {
    ok = 0,
    bad_key,           // no region with this key (index, variant or state)
    wrong_pd,          // the region belongs to another PD
    not_invalidatable, // only fast-register regions can be invalidated by a work request
};

struct RegistryConfig {
    std::uint32_t max_keys = 1U << 16;
    PageSizeBitmap page_sizes = page_size_4k_2m_1g;
    std::uint64_t max_region_bytes = std::uint64_t{1} << 40;
    std::uint32_t max_fast_reg_pages = 1U << 16;
    AddressTranslator translator = AddressTranslator::identity();
    // Bounds of the DMA MR (seed 004): whether [addr, addr + len) is DMA memory. Without it the
    // DMA MR's key fails every access instead of reaching arbitrary memory.
    bool (*dma_range_valid)(std::uint64_t addr, std::uint64_t length) = nullptr;
};

class MemoryRegistry {
public:
    static Result<std::unique_ptr<MemoryRegistry>> create(const RegistryConfig& config);

    MemoryRegistry(const MemoryRegistry&) = delete;
    MemoryRegistry& operator=(const MemoryRegistry&) = delete;
    MemoryRegistry(MemoryRegistry&&) = delete;
    MemoryRegistry& operator=(MemoryRegistry&&) = delete;
    ~MemoryRegistry();

    // Registers a page list. The same (pd, address, length, access, connection) again returns the
    // same region with one more reference (seed 002). `connection` restricts every use of its keys
    // to one connection of one queue pair (seed 002: only the connected peer, only while
    // connected). Without `deduplicate` the region is private: it neither joins an existing one nor
    // is joined later.
    Result<MemoryRegion*> register_pages(std::uint32_t pd, const PageList& pages,
                                         AccessFlags access,
                                         RegionKind kind = RegionKind::virtual_range,
                                         ConnectionId connection = any_connection,
                                         bool deduplicate = true);
    Result<MemoryRegion*> register_virtual(std::uint32_t pd, std::span<const VirtualPiece> pieces,
                                           unsigned page_shift, AccessFlags access,
                                           ConnectionId connection = any_connection);
    Result<MemoryRegion*> register_sgl(std::uint32_t pd, std::span<const SglElement> sgl,
                                       unsigned page_shift, AccessFlags access);
    // The DMA MR: one region shared by every PD, lkey only, local write always granted; each call
    // is a reference, and deregister() of the last one frees the key (seed 004).
    Result<MemoryRegion*> get_dma_region(std::uint32_t pd);
    // A region initialised for fast-register with up to `max_pages` pages and at most
    // `allowed_access`; it is invalid until a FAST_REG work request registers pages.
    Result<MemoryRegion*> allocate_fast_reg(std::uint32_t pd, std::uint32_t max_pages,
                                            AccessFlags allowed_access);
    // New access rights for a registered region under a new key (ibv_rereg_mr).
    Status reregister(MemoryRegion& region, AccessFlags access);
    // Drops one reference; the last one frees the key and the translation table.
    Status deregister(MemoryRegion* region);
    // deregister() in two steps, for a device whose data path may still hold the region's key
    // entry or table when it is deregistered (a polling thread in the middle of a burst on
    // another core). retire() drops one reference; for the last one it takes the region out of
    // deduplication and invalidates its key (the variant moves on: no new access validates, no
    // FAST_REG revives it) but keeps the key index allocated and the translation table alive, and
    // sets `last`. reclaim() frees both, once the device knows no data path can still be using
    // them. Control path; the same thread rules as every registration call.
    Status retire(MemoryRegion* region, bool& last);
    void reclaim(MemoryRegion* region);

    // Fast path. `new_key` must keep the region's index; its variant becomes the key's (seed 001).
    FastRegResult fast_register(MemoryRegion& region, std::uint32_t pd, MemoryKey new_key,
                                const FastRegRequest& request, AccessFlags access,
                                PageListError* page_error = nullptr) noexcept;
    InvalidateResult invalidate(MemoryKey key, std::uint32_t pd) noexcept;

    // Fast path: check an access and return the entry to translate with.
    KeyCheck check(const KeyAccess& request, const KeyEntry** found) const noexcept {
        const KeyCheck result = keys_.check(request, found);
        if (PRDMA_UNLIKELY(result == KeyCheck::ok && (*found)->identity) &&
            (config_.dma_range_valid == nullptr ||
             !config_.dma_range_valid(request.addr, request.length))) {
            return KeyCheck::out_of_bounds;
        }
        return result;
    }

    [[nodiscard]] const KeyTable& keys() const noexcept { return keys_; }
    [[nodiscard]] const RegistryConfig& config() const noexcept { return config_; }
    [[nodiscard]] std::size_t region_count() const noexcept { return regions_.size(); }

private:
    friend class MemoryRegion;
    MemoryRegistry(const RegistryConfig& config, KeyTable keys);
    Result<MemoryRegion*> new_region(RegionKind kind, std::uint32_t pd);
    void destroy(MemoryRegion* region);

    using DedupKey = RegionDedupKey;
    // Takes `region` out of the dedup map (a no-op for a private region).
    void forget_dedup(MemoryRegion& region);

    RegistryConfig config_;
    KeyTable keys_;
    std::map<std::uint32_t, std::unique_ptr<MemoryRegion>>
        regions_; // by key index
                  // Several regions may share attributes (different pages, or after reregister());
                  // a new
    // registration joins one only if its pages are the same too.
    std::multimap<DedupKey, MemoryRegion*> dedup_;
    MemoryRegion* dma_region_ = nullptr;
};

// (dma_memory.cpp) A registry configured for DPDK memory: dpdk_translator(), and a DMA MR bounded
// by is_dma_memory(), so the reserved lkey reaches DPDK memory and nothing else.
RegistryConfig dpdk_registry_config(PageSizeBitmap page_sizes = page_size_4k_2m_1g);

} // namespace prdma::mem
