// A real EAL in a test binary: it starts with prdma's defaults, hands out hugepage-backed DMA
// memory whose IOVA is known, refuses a second start, and cannot restart after cleanup.
//
// PRDMA_REQUIRE_HUGEPAGES=1 (set by usertools/prdma-setup after it reserved pages) turns the
// --no-huge fallback into a failure, so CI proves the hugepage path rather than the fallback.
#include <cstdlib>
#include <cstring>

#include <gtest/gtest.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_memory.h>
#include <rte_memzone.h>

#include <prdma/eal.hpp>

namespace prdma {
namespace {

bool hugepages_required() {
    const char* value = std::getenv("PRDMA_REQUIRE_HUGEPAGES");
    return value != nullptr && std::strcmp(value, "1") == 0;
}

TEST(Eal, LifecycleAndHugepageMemzone) {
    const bool hugepages_free = free_hugepage_bytes() > 0;
    if (hugepages_required()) {
        ASSERT_TRUE(hugepages_free) << "PRDMA_REQUIRE_HUGEPAGES=1 but no free hugepages";
    }
    EalOptions options;
    options.program_name = "eal_test";
    options.args = {"-l", "0", "--log-level=lib.eal:error"};
    auto eal = Eal::start(options);
    ASSERT_TRUE(eal.ok()) << eal.error().to_string();
    EXPECT_EQ(eal->hugepage_backed(), hugepages_free);
    EXPECT_EQ(eal->lcore_count(), 1U);
    EXPECT_EQ(rte_eal_iova_mode(), RTE_IOVA_VA);

    // A memzone is DMA memory: contiguous in IOVA, and its IOVA is what virt2iova reports.
    const rte_memzone* zone =
        rte_memzone_reserve("eal_test_zone", 3 << 20, SOCKET_ID_ANY, RTE_MEMZONE_IOVA_CONTIG);
    ASSERT_NE(zone, nullptr) << rte_strerror(rte_errno);
    ASSERT_NE(zone->iova, RTE_BAD_IOVA);
    EXPECT_EQ(rte_mem_virt2iova(zone->addr), zone->iova);
    const auto* last_byte = static_cast<const char*>(zone->addr) + zone->len - 1;
    EXPECT_EQ(rte_mem_virt2iova(last_byte), zone->iova + zone->len - 1);
    // IOVA-as-VA: the device address of a byte is its virtual address.
    EXPECT_EQ(zone->iova, reinterpret_cast<rte_iova_t>(zone->addr));
    if (eal->hugepage_backed()) {
        EXPECT_GE(zone->hugepage_sz, 2ULL << 20);
        const rte_memseg* seg = rte_mem_virt2memseg(zone->addr, nullptr);
        ASSERT_NE(seg, nullptr);
        EXPECT_EQ(seg->hugepage_sz, zone->hugepage_sz);
    } else {
        RecordProperty("hugepages", "absent: ran with --no-huge");
    }
    std::memset(zone->addr, 0xa5, zone->len);
    EXPECT_EQ(rte_memzone_free(zone), 0);

    // One EAL per process.
    auto second = Eal::start(options);
    ASSERT_FALSE(second.ok());
    EXPECT_EQ(second.code(), StatusCode::busy);

    // Moving the handle keeps EAL up; cleanup happens once.
    Eal moved = std::move(eal.value());
    EXPECT_TRUE(moved.cleanup().ok());
    EXPECT_TRUE(moved.cleanup().ok()) << "second cleanup is a no-op";

    auto restart = Eal::start(options);
    ASSERT_FALSE(restart.ok());
    EXPECT_EQ(restart.code(), StatusCode::not_supported);
}

} // namespace
} // namespace prdma
