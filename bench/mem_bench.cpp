// lib/mem micro-benchmarks: translation lookups, key checks, registration and the registration
// cache (DESIGN "Memory and translation tables").
//
// EAL-free: page lists are synthetic, built with the identity translator (IOVA == VA, so tables
// collapse to a few large blocks) or a scattering one (every page at an unrelated IOVA, so a table
// needs one entry per page). Addresses are numbers; nothing is dereferenced. Random addresses are
// drawn before the timed loop.
#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include <benchmark/benchmark.h>

#include <prdma/mem/access.hpp>
#include <prdma/mem/address_translator.hpp>
#include <prdma/mem/memory_key.hpp>
#include <prdma/mem/memory_region.hpp>
#include <prdma/mem/memory_registry.hpp>
#include <prdma/mem/page_list.hpp>
#include <prdma/mem/registration_cache.hpp>
#include <prdma/mem/translation_table.hpp>

namespace prdma::mem {
namespace {

constexpr std::uintptr_t fake_base = 0x7f0000000000;        // 1 GiB aligned; never dereferenced
constexpr std::size_t address_count = std::size_t{1} << 20; // power of two; spans big tables
constexpr std::uint64_t kib = 1024;
constexpr std::uint64_t mib = 1024 * kib;
constexpr std::uint64_t gib = 1024 * mib;
constexpr AccessFlags remote_rw = access_local_write | access_remote_write | access_remote_read;

std::uint64_t mix(std::uint64_t x) { // splitmix64 finaliser
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

// Page VA -> a scattered IOVA (same offset within the page): neighbouring pages are never
// contiguous, so the table has one entry per page. The context is the page shift.
std::uint64_t scattered_iova(std::uintptr_t va, void* context) {
    const unsigned shift = *static_cast<const unsigned*>(context);
    const std::uint64_t page = mix(va >> shift) & ((std::uint64_t{1} << 24) - 1);
    return (std::uint64_t{1} << 52) + (page << shift) + (va & ((std::uint64_t{1} << shift) - 1));
}

std::uintptr_t no_cpu_mapping(std::uint64_t /*iova*/, void* /*context*/) {
    return 0;
}

AddressTranslator scattering_translator(const unsigned* page_shift) {
    return {scattered_iova, no_cpu_mapping, const_cast<unsigned*>(page_shift)};
}

// Region addresses in [start, start + length - access_length], drawn once.
std::vector<std::uint64_t> random_addresses(std::uint64_t start, std::uint64_t length,
                                            std::uint64_t access_length) {
    std::mt19937_64 rng(0xbe7c4);
    std::uniform_int_distribution<std::uint64_t> offset(0, length - access_length);
    std::vector<std::uint64_t> addresses(address_count);
    for (std::uint64_t& address : addresses) {
        address = start + offset(rng);
    }
    return addresses;
}

std::unique_ptr<MemoryRegistry> make_registry(benchmark::State& state) {
    auto registry = MemoryRegistry::create(RegistryConfig{});
    if (!registry) {
        state.SkipWithError(registry.error().to_string().c_str());
        return nullptr;
    }
    return std::move(registry.value());
}

// ---- TranslationTable::host() ----------------------------------------------------------------

// A table of `entries` 4 KiB entries (scattered pages): 64 is one level, 262144 (1 GiB) two.
void BM_TranslationLookup(benchmark::State& state) {
    const auto entries = static_cast<std::uint64_t>(state.range(0));
    const unsigned page_shift = 12;
    const VirtualPiece piece{fake_base, entries << page_shift};
    PageList pages;
    if (build_virtual_page_list({&piece, 1}, page_shift, scattering_translator(&page_shift),
                                pages) != PageListError::ok) {
        state.SkipWithError("page list");
        return;
    }
    auto built = TranslationTable::build(pages, page_size_4k_2m_1g);
    if (!built || built->entry_count() != entries) {
        state.SkipWithError("table does not have one entry per page");
        return;
    }
    const TranslationTable& table = built.value();
    const std::vector<std::uint64_t> addresses = random_addresses(fake_base, piece.length, 1);
    std::size_t i = 0;
    for (auto _ : state) {
        benchmark::DoNotOptimize(table.host(addresses[i]));
        i = (i + 1) & (address_count - 1);
    }
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
    state.counters["levels"] = table.levels();
}
BENCHMARK(BM_TranslationLookup)->Arg(64)->Arg(262144);

// ---- MemoryRegistry::check() + host() --------------------------------------------------------

// An RDMA WRITE's rkey check and translation: 1 GiB on scattered 2 MiB pages (512 entries).
void BM_KeyLookup(benchmark::State& state) {
    auto registry = make_registry(state);
    if (!registry) {
        return;
    }
    const unsigned page_shift = 21;
    const VirtualPiece piece{fake_base, gib};
    PageList pages;
    if (build_virtual_page_list({&piece, 1}, page_shift, scattering_translator(&page_shift),
                                pages) != PageListError::ok) {
        state.SkipWithError("page list");
        return;
    }
    auto region = registry->register_pages(1, pages, remote_rw);
    if (!region) {
        state.SkipWithError(region.error().to_string().c_str());
        return;
    }
    constexpr std::uint64_t access_length = 64;
    const std::vector<std::uint64_t> addresses = random_addresses(fake_base, gib, access_length);
    KeyAccess request{region.value()->rkey(), 1, 5, access_remote_write, 0, access_length};
    std::uint64_t failures = 0;
    std::size_t i = 0;
    for (auto _ : state) {
        request.addr = addresses[i];
        i = (i + 1) & (address_count - 1);
        const KeyEntry* entry = nullptr;
        if (registry->check(request, &entry) == KeyCheck::ok && entry != nullptr) [[likely]] {
            benchmark::DoNotOptimize(KeyTable::host(*entry, request.addr));
        } else {
            ++failures;
        }
    }
    if (failures != 0) {
        state.SkipWithError("a valid access failed its key check");
    }
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
    state.counters["entries"] = static_cast<double>(region.value()->table()->entry_count());
}
BENCHMARK(BM_KeyLookup);

// ---- Registration: page list + translation table + key, and deregistration -----------------

void register_region(benchmark::State& state, bool scattered) {
    auto registry = make_registry(state);
    if (!registry) {
        return;
    }
    const auto bytes = static_cast<std::uint64_t>(state.range(0));
    const auto page_shift = static_cast<unsigned>(state.range(1));
    const AddressTranslator translator =
        scattered ? scattering_translator(&page_shift) : AddressTranslator::identity();
    const VirtualPiece piece{fake_base, bytes};
    std::uint64_t entries = 0;
    for (auto _ : state) {
        PageList pages;
        if (build_virtual_page_list({&piece, 1}, page_shift, translator, pages) !=
            PageListError::ok) {
            state.SkipWithError("page list");
            break;
        }
        auto region = registry->register_pages(1, pages, remote_rw);
        if (!region) {
            state.SkipWithError(region.error().to_string().c_str());
            break;
        }
        benchmark::DoNotOptimize(region.value()->rkey());
        entries = region.value()->table()->entry_count();
        if (!registry->deregister(region.value())) {
            state.SkipWithError("deregister");
            break;
        }
    }
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
    state.counters["pages"] = static_cast<double>(bytes >> page_shift);
    state.counters["entries"] = static_cast<double>(entries);
}

// IOVA == VA: the table collapses to the largest block the alignment allows.
void BM_RegisterRegion(benchmark::State& state) {
    register_region(state, false);
}
// Every page at an unrelated IOVA: one table entry per page.
void BM_RegisterRegionScattered(benchmark::State& state) {
    register_region(state, true);
}

// 4 KiB on 4 KiB pages, 2 MiB on one 2 MiB page, 1 GiB on 2 MiB pages (512), and for contrast
// 1 GiB on 4 KiB pages (262144: a two-level table when scattered).
BENCHMARK(BM_RegisterRegion)
    ->ArgNames({"bytes", "page_shift"})
    ->Args({4 * kib, 12})
    ->Args({2 * mib, 21})
    ->Args({gib, 21})
    ->Args({gib, 12})
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_RegisterRegionScattered)
    ->ArgNames({"bytes", "page_shift"})
    ->Args({4 * kib, 12})
    ->Args({2 * mib, 21})
    ->Args({gib, 21})
    ->Args({gib, 12})
    ->Unit(benchmark::kMicrosecond);

// ---- RegistrationCache -----------------------------------------------------------------------

PageListError identity_builder(const void* va, std::size_t length, PageList& out) {
    const VirtualPiece piece{reinterpret_cast<std::uintptr_t>(va), length};
    return build_virtual_page_list({&piece, 1}, 12, AddressTranslator::identity(), out);
}

constexpr std::uint64_t cache_range = 64 * kib;
constexpr std::uint64_t cache_stride = mib;

const void* cache_address(std::uint64_t address) {
    return reinterpret_cast<const void*>(address);
}

// 4 KiB requests inside 64 cached 64 KiB ranges. pinned:1 — every range also held by another
// user (a hit only counts users); pinned:0 — the hit takes the entry off the LRU list and the
// release puts it back.
void BM_CacheHit(benchmark::State& state) {
    auto registry = make_registry(state);
    if (!registry) {
        return;
    }
    const bool pinned = state.range(0) != 0;
    constexpr std::uint64_t ranges = 64;
    constexpr std::uint64_t request_length = 4 * kib;
    RegistrationCache cache(*registry, 1, CacheLimits{}, identity_builder);
    std::vector<RegistrationCache::Handle> holders;
    for (std::uint64_t r = 0; r < ranges; ++r) {
        auto handle =
            cache.acquire(cache_address(fake_base + r * cache_stride), cache_range, remote_rw);
        if (!handle) {
            state.SkipWithError(handle.error().to_string().c_str());
            return;
        }
        if (pinned) {
            holders.push_back(std::move(handle.value()));
        }
    }
    std::vector<std::uint64_t> addresses(address_count);
    std::mt19937_64 rng(0xcac4e);
    for (std::uint64_t& address : addresses) {
        address =
            fake_base + rng() % ranges * cache_stride + rng() % (cache_range - request_length + 1);
    }
    const CacheStats before = cache.stats();
    std::size_t i = 0;
    for (auto _ : state) {
        auto handle = cache.acquire(cache_address(addresses[i]), request_length, remote_rw);
        i = (i + 1) & (address_count - 1);
        if (!handle) [[unlikely]] {
            state.SkipWithError(handle.error().to_string().c_str());
            break;
        }
        benchmark::DoNotOptimize(handle.value().rkey());
    }
    const CacheStats after = cache.stats();
    if (after.misses != before.misses) {
        state.SkipWithError("a hit benchmark missed");
    }
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
    holders.clear();
}
BENCHMARK(BM_CacheHit)->ArgName("pinned")->Arg(1)->Arg(0);

// Distinct 64 KiB ranges with room for 4 entries: every acquire misses, evicts (deregisters) the
// least recently used entry, builds a page list and registers.
void BM_CacheMiss(benchmark::State& state) {
    auto registry = make_registry(state);
    if (!registry) {
        return;
    }
    CacheLimits limits;
    limits.max_entries = 4;
    RegistrationCache cache(*registry, 1, limits, identity_builder);
    constexpr std::uint64_t ranges = 1024;
    std::uint64_t r = 0;
    for (auto _ : state) {
        auto handle =
            cache.acquire(cache_address(fake_base + r * cache_stride), cache_range, remote_rw);
        r = r + 1 == ranges ? 0 : r + 1;
        if (!handle) [[unlikely]] {
            state.SkipWithError(handle.error().to_string().c_str());
            break;
        }
        benchmark::DoNotOptimize(handle.value().rkey());
    }
    const CacheStats stats = cache.stats();
    if (stats.hits != 0) {
        state.SkipWithError("a miss benchmark hit");
    }
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
    state.counters["evictions/iter"] =
        static_cast<double>(stats.evictions) / static_cast<double>(state.iterations());
}
BENCHMARK(BM_CacheMiss);

} // namespace
} // namespace prdma::mem
