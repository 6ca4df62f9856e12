#include <algorithm>

#include <rte_errno.h>
#include <rte_memory.h>

#include <prdma/format.hpp>
#include <prdma/mem/memory_registry.hpp>
#include <prdma/mem/registration_cache.hpp>

namespace prdma::mem {

RegistrationCache::Handle& RegistrationCache::Handle::operator=(Handle&& other) noexcept {
    if (this != &other) {
        reset();
        cache_ = std::exchange(other.cache_, nullptr);
        entry_ = other.entry_;
    }
    return *this;
}

const MemoryRegion& RegistrationCache::Handle::region() const noexcept {
    return *entry_->region;
}

void RegistrationCache::Handle::reset() noexcept {
    if (cache_ != nullptr) {
        std::exchange(cache_, nullptr)->release(entry_);
    }
}

RegistrationCache::RegistrationCache(CacheRegistrar registrar, CacheLimits limits)
    : registrar_(std::move(registrar)), limits_(limits) {}

RegistrationCache::RegistrationCache(MemoryRegistry& registry, std::uint32_t pd, CacheLimits limits,
                                     PageListBuilder builder)
    : RegistrationCache(
          CacheRegistrar{
              [&registry, pd, builder = std::move(builder)](
                  const void* va, std::size_t length, AccessFlags access) -> Result<MemoryRegion*> {
                  PageList pages;
                  const PageListError error = builder(va, length, pages);
                  if (error != PageListError::ok) {
                      return page_list_error(error, "registration cache");
                  }
                  return registry.register_pages(pd, pages, access, RegionKind::virtual_range,
                                                 any_connection, /*deduplicate=*/false);
              },
              [&registry](MemoryRegion* region) { (void)registry.deregister(region); }},
          limits) {}

RegistrationCache::~RegistrationCache() {
    if (!event_callback_name_.empty()) {
        rte_mem_event_callback_unregister(event_callback_name_.c_str(), this);
    }
    const std::lock_guard lock(mutex_);
    while (!entries_.empty()) {
        drop(entries_.begin()->second.get());
    }
}

Result<RegistrationCache::Handle> RegistrationCache::acquire(const void* va, std::size_t length,
                                                             AccessFlags access) {
    const auto start = reinterpret_cast<std::uintptr_t>(va);
    if (length == 0 || start + length < start) {
        return Error(StatusCode::invalid_parameter, "cache request: empty or wrapping range");
    }
    const std::lock_guard lock(mutex_);
    // Entries starting at or before `start`, nearest first; the first one containing the range
    // with enough access is a hit.
    for (auto it = entries_.upper_bound(start); it != entries_.begin();) {
        --it;
        Entry* entry = it->second.get();
        if (entry->findable && start + length <= entry->start + entry->length &&
            (entry->access & access) == access) {
            if (entry->users++ == 0) {
                unused_.erase(entry->lru_position);
            }
            ++stats_.hits;
            return Handle(this, entry);
        }
    }
    ++stats_.misses;
    if (!evict_for(1, length)) {
        return Error(StatusCode::no_resources,
                     strformat("registration cache full: %zu entries / %llu bytes in use, "
                               "limits %zu / %llu",
                               stats_.entries, static_cast<unsigned long long>(stats_.bytes),
                               limits_.max_entries,
                               static_cast<unsigned long long>(limits_.max_bytes)));
    }
    auto region = registrar_.register_range(va, length, access);
    if (!region) {
        return region.error();
    }
    auto entry = std::make_unique<Entry>();
    entry->start = start;
    entry->length = length;
    entry->access = access;
    entry->region = region.value();
    entry->users = 1;
    Entry* raw = entry.get();
    entries_.emplace(start, std::move(entry));
    ++stats_.entries;
    ++stats_.in_use;
    stats_.bytes += length;
    return Handle(this, raw);
}

bool RegistrationCache::evict_for(std::size_t entries, std::uint64_t bytes) {
    const auto over = [&] {
        return stats_.entries + entries > limits_.max_entries ||
               stats_.bytes + bytes > limits_.max_bytes;
    };
    while (over() && !unused_.empty()) {
        Entry* victim = unused_.back();
        ++stats_.evictions;
        drop(victim);
    }
    return !over();
}

void RegistrationCache::release(Entry* entry) noexcept {
    const std::lock_guard lock(mutex_);
    if (--entry->users > 0) {
        return;
    }
    --stats_.in_use;
    if (!entry->findable) {
        drop(entry); // invalidated while in use: this was the last user
        return;
    }
    unused_.push_front(entry);
    entry->lru_position = unused_.begin();
    evict_for(0, 0);
}

void RegistrationCache::drop(Entry* entry) noexcept {
    if (entry->findable) {
        --stats_.entries;
        stats_.bytes -= entry->length;
        if (entry->users == 0) {
            unused_.erase(entry->lru_position);
        }
    }
    if (entry->users > 0) {
        // Only the destructor drops entries in use; a Handle outliving its cache is a bug.
        --stats_.in_use;
    }
    registrar_.release(entry->region);
    auto range = entries_.equal_range(entry->start);
    for (auto it = range.first; it != range.second; ++it) {
        if (it->second.get() == entry) {
            entries_.erase(it);
            break;
        }
    }
}

void RegistrationCache::invalidate(const void* va, std::size_t length) {
    const auto start = reinterpret_cast<std::uintptr_t>(va);
    const std::uintptr_t end = start + length < start ? UINTPTR_MAX : start + length;
    const std::lock_guard lock(mutex_);
    std::vector<Entry*> overlapping;
    for (auto& [entry_start, entry] : entries_) {
        if (entry_start >= end) {
            break;
        }
        if (entry->findable && entry->start + entry->length > start) {
            overlapping.push_back(entry.get());
        }
    }
    for (Entry* entry : overlapping) {
        ++stats_.invalidations;
        if (entry->users == 0) {
            drop(entry);
        } else {
            // Keep it registered for its users; nobody finds it any more.
            entry->findable = false;
            --stats_.entries;
            stats_.bytes -= entry->length;
        }
    }
}

CacheStats RegistrationCache::stats() const {
    const std::lock_guard lock(mutex_);
    return stats_;
}

void RegistrationCache::on_dpdk_memory_event(int event, const void* addr, std::size_t length,
                                             void* arg) {
    if (event == RTE_MEM_EVENT_FREE) {
        static_cast<RegistrationCache*>(arg)->invalidate(addr, length);
    }
}

Status RegistrationCache::watch_dpdk_memory_events() {
    if (!event_callback_name_.empty()) {
        return {};
    }
    std::string name = strformat("prdma_regcache_%p", static_cast<void*>(this));
    const int rc = rte_mem_event_callback_register(
        name.c_str(),
        [](rte_mem_event event, const void* addr, size_t len, void* arg) {
            on_dpdk_memory_event(event, addr, len, arg);
        },
        this);
    if (rc != 0) {
        const int err = rte_errno;
        return Error(err == ENOTSUP ? StatusCode::not_supported : StatusCode::internal,
                     strformat("rte_mem_event_callback_register: %s", rte_strerror(err)));
    }
    event_callback_name_ = std::move(name);
    return {};
}

} // namespace prdma::mem
