// lib/mem on real hugepage memory: registration through the DPDK translator, the DMA MR bounded
// by DPDK memory, and the registration cache invalidated by DPDK's own memory-free events.
#include <cstring>
#include <optional>

#include <gtest/gtest.h>
#include <rte_malloc.h>
#include <rte_memory.h>

#include <prdma/eal.hpp>
#include <prdma/mem/dma_memory.hpp>
#include <prdma/mem/memory_registry.hpp>
#include <prdma/mem/registration_cache.hpp>

#include "eal_environment.hpp"

namespace prdma::mem {
namespace {

const auto* const g_environment =
    prdma::test_support::add_eal_environment("registry_dpdk_test", {});

constexpr std::size_t k2m = 2U << 20;

TEST(RegistryOnHugepages, RegisterTranslateAndTouch) {
    if (!prdma::test_support::EalEnvironment::hugepage_backed()) {
        GTEST_SKIP() << "no hugepages: EAL runs with --no-huge";
    }
    auto buffer = DmaBuffer::allocate(16 * k2m + 100, k2m);
    ASSERT_TRUE(buffer.ok()) << buffer.error().to_string();
    auto registry = MemoryRegistry::create(dpdk_registry_config());
    ASSERT_TRUE(registry.ok());
    auto* bytes = static_cast<std::uint8_t*>(buffer->data());
    PageList pages;
    ASSERT_EQ(build_dma_page_list(bytes + 50, 16 * k2m, pages), PageListError::ok);
    EXPECT_EQ(pages.page_shift, 21);
    EXPECT_EQ(pages.page_count(), 17U);
    auto mr = registry.value()->register_pages(1, pages, access_local_write | access_remote_write);
    ASSERT_TRUE(mr.ok()) << mr.error().to_string();
    // IOVA = VA here, so a contiguous buffer needs few entries; never more than its 2 MiB pages.
    EXPECT_LE(mr.value()->table()->entry_count(), 17U);
    EXPECT_GE(mr.value()->table()->block_shift(), 21U);

    const std::uint64_t last = reinterpret_cast<std::uint64_t>(bytes + 50 + 16 * k2m - 1);
    const KeyEntry* entry = nullptr;
    ASSERT_EQ(
        registry.value()->check({mr.value()->rkey(), 1, 1, access_remote_write, last, 1}, &entry),
        KeyCheck::ok);
    EXPECT_EQ(KeyTable::host(*entry, last), bytes + 50 + 16 * k2m - 1);
    EXPECT_EQ(mr.value()->table()->iova(last), rte_mem_virt2iova(bytes + 50 + 16 * k2m - 1));
    *KeyTable::host(*entry, last) = 0x5a; // the translated address is really writable memory
    EXPECT_EQ(bytes[50 + 16 * k2m - 1], 0x5a);
    EXPECT_EQ(registry.value()->check({mr.value()->rkey(), 1, 1, access_remote_write, last + 1, 1},
                                      &entry),
              KeyCheck::out_of_bounds);
    EXPECT_TRUE(registry.value()->deregister(mr.value()).ok());
}

TEST(RegistryOnHugepages, DmaRegionReachesDpdkMemoryOnly) {
    auto registry = MemoryRegistry::create(dpdk_registry_config());
    ASSERT_TRUE(registry.ok());
    auto dma = registry.value()->get_dma_region(1);
    ASSERT_TRUE(dma.ok());
    auto buffer = DmaBuffer::allocate(4096);
    ASSERT_TRUE(buffer.ok());
    const auto addr = reinterpret_cast<std::uint64_t>(buffer->data());
    const KeyEntry* entry = nullptr;
    EXPECT_EQ(registry.value()->check({dma.value()->lkey(), 9, 1, access_local_write, addr, 4096},
                                      &entry),
              KeyCheck::ok);
    int on_stack = 0;
    EXPECT_EQ(registry.value()->check({dma.value()->lkey(), 9, 1, access_local_write,
                                       reinterpret_cast<std::uint64_t>(&on_stack), 4},
                                      &entry),
              KeyCheck::out_of_bounds)
        << "the reserved lkey must not reach the stack";
}

TEST(RegistryOnHugepages, CacheIsInvalidatedWhenDpdkFreesTheMemory) {
    if (!prdma::test_support::EalEnvironment::hugepage_backed()) {
        GTEST_SKIP() << "no hugepages: legacy memory never frees pages";
    }
    auto registry = MemoryRegistry::create(dpdk_registry_config());
    ASSERT_TRUE(registry.ok());
    RegistrationCache cache(*registry.value(), 1, {}, build_dma_page_list);
    ASSERT_TRUE(cache.watch_dpdk_memory_events().ok());

    // Whole hugepages of their own, so rte_free hands them back to the system (a FREE event).
    void* unused_memory = rte_malloc(nullptr, 8 * k2m, k2m);
    void* in_use_memory = rte_malloc(nullptr, 8 * k2m, k2m);
    ASSERT_NE(unused_memory, nullptr);
    ASSERT_NE(in_use_memory, nullptr);
    {
        auto handle = cache.acquire(unused_memory, 8 * k2m, access_local_write);
        ASSERT_TRUE(handle.ok()) << handle.error().to_string();
    }
    auto in_use = cache.acquire(in_use_memory, 8 * k2m, access_local_write);
    ASSERT_TRUE(in_use.ok());
    const MemoryKey in_use_key = in_use->lkey();
    ASSERT_EQ(cache.stats().entries, 2U);

    rte_free(unused_memory);
    rte_free(in_use_memory);
    const CacheStats stats = cache.stats();
    EXPECT_EQ(stats.invalidations, 2U) << "DPDK reported both frees";
    EXPECT_EQ(stats.entries, 0U);
    EXPECT_EQ(stats.in_use, 1U);
    // Still registered for its user until released, then gone.
    const KeyEntry* entry = nullptr;
    EXPECT_NE(registry.value()->keys().check({in_use_key, 1, 1, access_local_read,
                                              reinterpret_cast<std::uint64_t>(in_use_memory), 1},
                                             &entry),
              KeyCheck::free_entry);
    in_use->reset();
    EXPECT_EQ(registry.value()->keys().check({in_use_key, 1, 1, access_local_read,
                                              reinterpret_cast<std::uint64_t>(in_use_memory), 1},
                                             &entry),
              KeyCheck::free_entry);
}

} // namespace
} // namespace prdma::mem
