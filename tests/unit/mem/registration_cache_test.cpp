// RegistrationCache: hits by containment, LRU eviction within both bounds, invalidation that never
// frees a region under its user, and the counters.
#include <gtest/gtest.h>

#include <prdma/mem/memory_registry.hpp>
#include <prdma/mem/registration_cache.hpp>

namespace prdma::mem {
namespace {

constexpr std::uint64_t k4k = 4096;
constexpr std::uintptr_t kBase = 0x7f0000000000;

const void* at(std::uint64_t offset) {
    return reinterpret_cast<const void*>(kBase + offset);
}

class CacheTest : public ::testing::Test {
protected:
    void SetUp() override {
        RegistryConfig config;
        config.max_keys = 256;
        registry_ = std::move(MemoryRegistry::create(config).value());
    }
    std::unique_ptr<RegistrationCache> make_cache(CacheLimits limits) {
        return std::make_unique<RegistrationCache>(
            *registry_, 1, limits, [this](const void* va, std::size_t length, PageList& out) {
                ++builds_;
                const VirtualPiece piece{reinterpret_cast<std::uintptr_t>(va), length};
                return build_virtual_page_list({&piece, 1}, 12, AddressTranslator::identity(), out);
            });
    }
    KeyCheck check(MemoryKey key, std::uint64_t offset) {
        const KeyEntry* entry = nullptr;
        return registry_->check({key, 1, 1, access_local_read, kBase + offset, 1}, &entry);
    }
    std::unique_ptr<MemoryRegistry> registry_;
    int builds_ = 0;
};

TEST_F(CacheTest, HitWhenACachedRegionContainsTheRangeWithEnoughAccess) {
    auto cache = make_cache({});
    auto big = cache->acquire(at(0), 4 * k4k, access_local_write | access_remote_read);
    ASSERT_TRUE(big.ok());
    auto inside = cache->acquire(at(k4k + 8), 100, access_local_write);
    ASSERT_TRUE(inside.ok());
    EXPECT_EQ(&inside->region(), &big->region());
    auto more_access = cache->acquire(at(k4k), 100, access_local_write | access_remote_write);
    ASSERT_TRUE(more_access.ok());
    EXPECT_NE(&more_access->region(), &big->region()) << "needs access the cached one lacks";
    auto past_end = cache->acquire(at(3 * k4k), 2 * k4k, access_local_write);
    ASSERT_TRUE(past_end.ok());
    EXPECT_NE(&past_end->region(), &big->region());
    const CacheStats stats = cache->stats();
    EXPECT_EQ(stats.hits, 1U);
    EXPECT_EQ(stats.misses, 3U);
    EXPECT_EQ(stats.entries, 3U);
    EXPECT_EQ(stats.in_use, 3U);
    EXPECT_EQ(builds_, 3);
    EXPECT_EQ(cache->acquire(at(0), 0, access_local_write).code(), StatusCode::invalid_parameter);
}

TEST_F(CacheTest, ReleasedEntriesStayCachedUntilEvictedInLruOrder) {
    auto cache = make_cache({3, 1ULL << 40});
    MemoryKey keys[3] = {};
    for (int i = 0; i < 3; ++i) {
        auto handle =
            cache->acquire(at(static_cast<std::uint64_t>(i) * 16 * k4k), k4k, access_local_write);
        ASSERT_TRUE(handle.ok());
        keys[i] = handle->lkey();
    } // all released: unused, LRU order 2, 1, 0 (0 oldest)
    EXPECT_EQ(cache->stats().in_use, 0U);
    EXPECT_EQ(check(keys[0], 0), KeyCheck::ok) << "released but still cached";
    {
        auto touch = cache->acquire(at(0), 8, access_local_write); // 0 becomes most recent
        ASSERT_TRUE(touch.ok());
    }
    auto fourth = cache->acquire(at(100 * k4k), k4k, access_local_write);
    ASSERT_TRUE(fourth.ok());
    EXPECT_EQ(cache->stats().evictions, 1U);
    EXPECT_NE(check(keys[1], 16 * k4k), KeyCheck::ok) << "entry 1 was least recently used";
    EXPECT_EQ(check(keys[0], 0), KeyCheck::ok);
    EXPECT_EQ(check(keys[2], 32 * k4k), KeyCheck::ok);
}

TEST_F(CacheTest, ByteBoundEvictsAndInUseEntriesAreNeverEvicted) {
    auto cache = make_cache({100, 8 * k4k});
    auto held = cache->acquire(at(0), 6 * k4k, access_local_write);
    ASSERT_TRUE(held.ok());
    auto too_big = cache->acquire(at(64 * k4k), 4 * k4k, access_local_write);
    EXPECT_EQ(too_big.code(), StatusCode::no_resources) << "only an in-use entry to evict";
    EXPECT_EQ(check(held->lkey(), 0), KeyCheck::ok);
    held->reset();
    auto now_fits = cache->acquire(at(64 * k4k), 4 * k4k, access_local_write);
    ASSERT_TRUE(now_fits.ok());
    EXPECT_EQ(cache->stats().evictions, 1U);
    EXPECT_EQ(cache->stats().bytes, 4 * k4k);
}

TEST_F(CacheTest, InvalidateDropsUnusedAtOnceAndInUseOnRelease) {
    auto cache = make_cache({});
    MemoryKey unused_key = 0;
    {
        auto unused = cache->acquire(at(0), k4k, access_local_write);
        unused_key = unused->lkey();
    }
    auto in_use = cache->acquire(at(8 * k4k), k4k, access_local_write);
    auto untouched = cache->acquire(at(32 * k4k), k4k, access_local_write);
    ASSERT_TRUE(in_use.ok() && untouched.ok());
    const MemoryKey in_use_key = in_use->lkey();

    cache->invalidate(at(100), 9 * k4k); // overlaps the first two only
    CacheStats stats = cache->stats();
    EXPECT_EQ(stats.invalidations, 2U);
    EXPECT_EQ(stats.entries, 1U);
    EXPECT_EQ(stats.in_use, 2U);
    EXPECT_NE(check(unused_key, 0), KeyCheck::ok) << "unused: deregistered at once";
    EXPECT_EQ(check(in_use_key, 8 * k4k), KeyCheck::ok) << "in use: still registered";

    auto fresh = cache->acquire(at(8 * k4k), k4k, access_local_write);
    ASSERT_TRUE(fresh.ok());
    EXPECT_NE(&fresh->region(), &in_use->region()) << "an invalidated entry is never found";
    EXPECT_EQ(cache->stats().misses, 4U);

    in_use->reset();
    EXPECT_NE(check(in_use_key, 8 * k4k), KeyCheck::ok) << "freed with its last user";
    EXPECT_EQ(check(untouched->lkey(), 32 * k4k), KeyCheck::ok);
}

TEST_F(CacheTest, HandlesMoveAndTheCacheCleansUpOnDestruction) {
    auto cache = make_cache({});
    auto first = cache->acquire(at(0), k4k, access_local_write);
    ASSERT_TRUE(first.ok());
    RegistrationCache::Handle moved = std::move(first.value());
    EXPECT_EQ(cache->stats().in_use, 1U);
    moved = RegistrationCache::Handle{};
    EXPECT_EQ(cache->stats().in_use, 0U);
    EXPECT_EQ(registry_->region_count(), 1U);
    cache.reset();
    EXPECT_EQ(registry_->region_count(), 0U);
}

TEST_F(CacheTest, BuilderErrorsReachTheCaller) {
    auto cache = std::make_unique<RegistrationCache>(
        *registry_, 1, CacheLimits{},
        [](const void*, std::size_t, PageList&) { return PageListError::not_dma_memory; });
    auto result = cache->acquire(at(0), 10, access_local_write);
    EXPECT_EQ(result.code(), StatusCode::invalid_parameter);
    EXPECT_NE(result.error().message().find("not_dma_memory"), std::string::npos);
    EXPECT_EQ(cache->stats().entries, 0U);
}

} // namespace
} // namespace prdma::mem
