// RegistrationCache: find-or-register for applications that post from arbitrary buffers
// (MPI/UCX-style "pin cache"), over a MemoryRegistry.
//
// A request is a hit when a cached region of the same PD contains the whole range with at least
// the access asked for. Unused entries are kept in LRU order and evicted when the cache exceeds
// its entry or byte bound. invalidate() (seed 002's cache callback) and DPDK memory-free events
// drop every entry overlapping the range: an unused one is deregistered at once, one in use when
// its last Handle goes. No malloc hooks: invalidation is explicit or comes from DPDK.
#pragma once

#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include <prdma/mem/access.hpp>
#include <prdma/mem/key.hpp>
#include <prdma/mem/memory_region.hpp>
#include <prdma/mem/page_list.hpp>
#include <prdma/status.hpp>

namespace prdma::mem {

class MemoryRegistry; // the driver SDK's memory_registry.hpp

struct CacheLimits {
    std::size_t max_entries = 1024;
    std::uint64_t max_bytes = std::uint64_t{16} << 30;
};

struct CacheStats {
    std::uint64_t hits = 0;
    std::uint64_t misses = 0;
    std::uint64_t evictions = 0;
    std::uint64_t invalidations = 0; // entries dropped by invalidate() or a DPDK free event
    std::size_t entries = 0;         // cached and findable
    std::size_t in_use = 0;          // entries (findable or invalidated) with a live Handle
    std::uint64_t bytes = 0;         // of findable entries
};

// Builds the page list of [va, va + length); build_dma_page_list for DPDK memory.
using PageListBuilder = std::function<PageListError(const void* va, std::size_t length, PageList&)>;

// How the cache registers a range and lets a region go: straight on a MemoryRegistry (the
// constructor that takes one), or through a device's protection domain, so the device sees the
// registrations as any other (rdma::ProtectionDomain::create_registration_cache).
struct CacheRegistrar {
    // A private registration of [va, va + length): never shared with another registration of
    // the range (once invalidated, its pages may no longer be the range's).
    std::function<Result<MemoryRegion*>(const void* va, std::size_t length, AccessFlags access)>
        register_range;
    std::function<void(MemoryRegion* region)> release;
};

class RegistrationCache {
    struct Entry;

public:
    // A reference to a cached region; releasing it (destruction) makes the entry evictable.
    class Handle {
    public:
        Handle() = default;
        Handle(Handle&& other) noexcept
            : cache_(std::exchange(other.cache_, nullptr)), entry_(other.entry_) {}
        Handle& operator=(Handle&& other) noexcept;
        Handle(const Handle&) = delete;
        Handle& operator=(const Handle&) = delete;
        ~Handle() { reset(); }

        [[nodiscard]] const MemoryRegion& region() const noexcept;
        [[nodiscard]] MemoryKey lkey() const noexcept { return region().lkey(); }
        [[nodiscard]] MemoryKey rkey() const noexcept { return region().rkey(); }
        void reset() noexcept;

    private:
        friend class RegistrationCache;
        Handle(RegistrationCache* cache, Entry* entry) : cache_(cache), entry_(entry) {}
        RegistrationCache* cache_ = nullptr;
        Entry* entry_ = nullptr;
    };

    RegistrationCache(CacheRegistrar registrar, CacheLimits limits);
    // Registers on `registry` directly, for protection domain `pd`.
    RegistrationCache(MemoryRegistry& registry, std::uint32_t pd, CacheLimits limits,
                      PageListBuilder builder);
    RegistrationCache(const RegistrationCache&) = delete;
    RegistrationCache& operator=(const RegistrationCache&) = delete;
    RegistrationCache(RegistrationCache&&) = delete;
    RegistrationCache& operator=(RegistrationCache&&) = delete;
    // Every Handle must be gone by now; remaining entries are deregistered.
    ~RegistrationCache();

    Result<Handle> acquire(const void* va, std::size_t length, AccessFlags access);
    // Drops every entry overlapping [va, va + length).
    void invalidate(const void* va, std::size_t length);
    [[nodiscard]] CacheStats stats() const;

    // Invalidate on DPDK memory-free events (rte_mem_event_callback_register). EAL must be up;
    // not_supported in DPDK's legacy memory mode, which never frees.
    Status watch_dpdk_memory_events();

private:
    struct Entry {
        std::uintptr_t start = 0;
        std::uint64_t length = 0;
        AccessFlags access = access_none;
        MemoryRegion* region = nullptr;
        std::uint32_t users = 0;
        bool findable = true;
        std::list<Entry*>::iterator lru_position{};
    };

    void release(Entry* entry) noexcept;
    void drop(Entry* entry) noexcept; // deregister + forget; lock held
    // Evicts unused entries until `entries` more entries of `bytes` fit; lock held.
    bool evict_for(std::size_t entries, std::uint64_t bytes);
    static void on_dpdk_memory_event(int event, const void* addr, std::size_t length, void* arg);

    CacheRegistrar registrar_;
    CacheLimits limits_;
    mutable std::mutex mutex_; // a DPDK memory event arrives on whichever thread frees memory
    std::multimap<std::uintptr_t, std::unique_ptr<Entry>> entries_; // by start address
    std::list<Entry*> unused_;                                      // LRU, most recent first
    CacheStats stats_;
    std::string event_callback_name_;
};

} // namespace prdma::mem
