// Every registration path of the seeds through MemoryRegistry: region attributes, refcounted
// re-registration, access rules, the DMA MR, fast-register and invalidate, descriptor export.
#include <array>
#include <cstring>

#include <gtest/gtest.h>

#include <prdma/mem/memory_registry.hpp>

namespace prdma::mem {
namespace {

constexpr std::uint64_t k4k = 4096;
constexpr std::uintptr_t kBase = 0x7f0000000000;

class RegistryTest : public ::testing::Test {
protected:
    void SetUp() override {
        RegistryConfig config;
        config.max_keys = 64;
        config.dma_range_valid = [](std::uint64_t addr, std::uint64_t len) {
            // "DMA memory" for this test: [kBase, kBase + 1 GiB).
            return addr >= kBase && len <= (1ULL << 30) && addr - kBase <= (1ULL << 30) - len;
        };
        registry_ = std::move(MemoryRegistry::create(config).value());
    }
    Result<MemoryRegion*> reg(std::uint32_t pd, std::uintptr_t va, std::uint64_t len,
                              AccessFlags access, ConnectionId connection = any_connection) {
        const VirtualPiece piece{va, len};
        return registry_->register_virtual(pd, {&piece, 1}, 12, access, connection);
    }
    KeyCheck check(MemoryKey key, std::uint32_t pd, AccessFlags access, std::uint64_t addr,
                   std::uint64_t len, ConnectionId connection = 1) {
        const KeyEntry* entry = nullptr;
        return registry_->check({key, pd, connection, access, addr, len}, &entry);
    }
    std::unique_ptr<MemoryRegistry> registry_;
};

TEST_F(RegistryTest, CreateRejectsBadConfig) {
    RegistryConfig config;
    config.page_sizes = 0;
    EXPECT_EQ(MemoryRegistry::create(config).code(), StatusCode::invalid_parameter);
    config = {};
    config.translator.va_to_iova = nullptr;
    EXPECT_EQ(MemoryRegistry::create(config).code(), StatusCode::invalid_parameter);
}

TEST_F(RegistryTest, VirtualRegionReportsItsAttributes) {
    auto mr = reg(1, kBase + 100, 3 * k4k, access_local_write | access_remote_write);
    ASSERT_TRUE(mr.ok()) << mr.error().to_string();
    const MemoryRegion& region = *mr.value();
    EXPECT_EQ(region.kind(), RegionKind::virtual_range);
    EXPECT_EQ(region.pd(), 1U);
    EXPECT_EQ(region.local_start(), kBase + 100);
    EXPECT_EQ(region.local_end(), kBase + 100 + 3 * k4k);
    EXPECT_EQ(region.remote_start(), region.local_start());
    EXPECT_EQ(region.remote_end(), region.local_end());
    EXPECT_NE(region.lkey(), 0U);
    EXPECT_EQ(region.rkey(), region.lkey());
    EXPECT_TRUE(region.access() & access_remote_write);
    EXPECT_TRUE(region.valid());
    ASSERT_NE(region.table(), nullptr);
    EXPECT_EQ(check(region.rkey(), 1, access_remote_write, kBase + 100, 3 * k4k), KeyCheck::ok);
}

TEST_F(RegistryTest, LocalOnlyRegionHasNoRemoteRangeOrKey) {
    auto mr = reg(1, kBase, k4k, access_local_write);
    ASSERT_TRUE(mr.ok());
    EXPECT_EQ(mr.value()->rkey(), 0U);
    EXPECT_EQ(mr.value()->remote_start(), 0U);
    EXPECT_EQ(mr.value()->remote_end(), 0U);
    EXPECT_EQ(check(mr.value()->lkey(), 1, access_remote_read, kBase, 1), KeyCheck::access_denied);
}

TEST_F(RegistryTest, AccessRules) {
    EXPECT_EQ(reg(1, kBase, k4k, access_remote_write).code(), StatusCode::invalid_parameter)
        << "remote write needs local write";
    EXPECT_EQ(reg(1, kBase, k4k, access_remote_atomic).code(), StatusCode::invalid_parameter);
    EXPECT_EQ(reg(1, kBase, k4k, AccessFlags::from_bits(1U << 20)).code(),
              StatusCode::invalid_parameter);
    EXPECT_TRUE(reg(1, kBase, k4k, access_remote_read).ok()) << "remote read alone is fine";
    // NDK's ALLOW_REMOTE_WRITE (0x30) carries ALLOW_LOCAL_WRITE's bit: it passes the rule.
    EXPECT_EQ(access_from_ndk_flags(ndk::allow_remote_write) & access_local_write,
              access_local_write);
    EXPECT_EQ(check_access_rules(access_from_ndk_flags(ndk::allow_remote_write)),
              AccessRuleError::ok);
    EXPECT_FALSE(access_from_ndk_flags(ndk::allow_local_write).has(access_remote_write));
    // Its remote bit alone is remote write without local write: refused like the native mask,
    // not turned into a region nobody can write.
    constexpr std::uint32_t remote_bit_only = ndk::allow_remote_write & ~ndk::allow_local_write;
    EXPECT_EQ(access_from_ndk_flags(remote_bit_only), access_local_read | access_remote_write);
    EXPECT_EQ(check_access_rules(access_from_ndk_flags(remote_bit_only)),
              AccessRuleError::remote_write_needs_local_write);
    EXPECT_EQ(reg(1, kBase, k4k, access_from_ndk_flags(remote_bit_only)).code(),
              StatusCode::invalid_parameter);
}

TEST_F(RegistryTest, WspReadOnlyIsNeverRemotelyWritableAndWriteOnlyNeverReadable) {
    auto read_only = reg(1, kBase, k4k, access_from_wsp(WspAccess::read));
    auto write_only = reg(1, kBase + k4k, k4k, access_from_wsp(WspAccess::write));
    ASSERT_TRUE(read_only.ok() && write_only.ok());
    EXPECT_EQ(check(read_only.value()->rkey(), 1, access_remote_read, kBase, 8), KeyCheck::ok);
    EXPECT_EQ(check(read_only.value()->rkey(), 1, access_remote_write, kBase, 8),
              KeyCheck::access_denied);
    EXPECT_EQ(check(write_only.value()->rkey(), 1, access_remote_write, kBase + k4k, 8),
              KeyCheck::ok);
    EXPECT_EQ(check(write_only.value()->rkey(), 1, access_remote_read, kBase + k4k, 8),
              KeyCheck::access_denied);
}

TEST_F(RegistryTest, SameRangeAndAccessIsRefcounted) {
    const AccessFlags access = access_local_write | access_remote_read;
    auto first = reg(1, kBase, 2 * k4k, access);
    auto second = reg(1, kBase, 2 * k4k, access);
    ASSERT_TRUE(first.ok() && second.ok());
    EXPECT_EQ(first.value(), second.value());
    EXPECT_EQ(first.value()->references(), 2U);
    EXPECT_EQ(registry_->region_count(), 1U);
    // Different access, PD or connection: a region of its own.
    EXPECT_NE(reg(1, kBase, 2 * k4k, access_local_write).value(), first.value());
    EXPECT_NE(reg(2, kBase, 2 * k4k, access).value(), first.value());
    EXPECT_NE(reg(1, kBase, 2 * k4k, access, 5).value(), first.value());

    const MemoryKey key = first.value()->rkey();
    ASSERT_TRUE(registry_->deregister(first.value()).ok());
    EXPECT_EQ(check(key, 1, access_remote_read, kBase, 8), KeyCheck::ok) << "one reference left";
    ASSERT_TRUE(registry_->deregister(second.value()).ok());
    EXPECT_EQ(check(key, 1, access_remote_read, kBase, 8), KeyCheck::free_entry);
    auto again = reg(1, kBase, 2 * k4k, access);
    ASSERT_TRUE(again.ok());
    EXPECT_NE(again.value()->rkey(), key) << "the stale key must not come back";
    EXPECT_NE(check(key, 1, access_remote_read, kBase, 8), KeyCheck::ok);
}

// Two-step deregistration (a device whose polling threads may still hold the entry): retire()
// kills the key at once but keeps the index and the table until reclaim().
TEST_F(RegistryTest, RetireKillsTheKeyAndReclaimFreesIt) {
    const AccessFlags access = access_local_write | access_remote_read;
    auto first = reg(1, kBase, 2 * k4k, access);
    auto second = reg(1, kBase, 2 * k4k, access);
    ASSERT_TRUE(first.ok() && second.ok());
    MemoryRegion* region = first.value();
    const MemoryKey key = region->rkey();
    const TranslationTable* table = region->table();

    bool last = true;
    ASSERT_TRUE(registry_->retire(region, last).ok());
    EXPECT_FALSE(last) << "one reference left: nothing retired";
    EXPECT_EQ(check(key, 1, access_remote_read, kBase, 8), KeyCheck::ok);

    ASSERT_TRUE(registry_->retire(region, last).ok());
    EXPECT_TRUE(last);
    EXPECT_TRUE(region->retired());
    EXPECT_NE(check(key, 1, access_remote_read, kBase, 8), KeyCheck::ok) << "dead at once";
    EXPECT_EQ(region->table(), table) << "the table outlives the key until reclaim";
    EXPECT_EQ(registry_->region_count(), 1U);
    EXPECT_EQ(registry_->retire(region, last).code(), StatusCode::invalid_parameter)
        << "retired once";

    // The same range again is a new region with another index: the retired one is not joined and
    // its index is not reused while a data path may still look at it.
    auto again = reg(1, kBase, 2 * k4k, access);
    ASSERT_TRUE(again.ok());
    EXPECT_NE(again.value(), region);
    EXPECT_NE(key_index(again.value()->rkey()), key_index(key));

    registry_->reclaim(region);
    EXPECT_EQ(registry_->region_count(), 1U);
    EXPECT_EQ(check(key, 1, access_remote_read, kBase, 8), KeyCheck::free_entry);
    ASSERT_TRUE(registry_->deregister(again.value()).ok());
    EXPECT_EQ(registry_->region_count(), 0U);
}

TEST_F(RegistryTest, InconsistentPageListsAreRejected) {
    PageList pages;
    const VirtualPiece piece{kBase, k4k};
    ASSERT_EQ(build_virtual_page_list({&piece, 1}, 12, AddressTranslator::identity(), pages),
              PageListError::ok);
    PageList too_long = pages;
    too_long.length = 3 * k4k; // one page cannot hold it
    EXPECT_EQ(registry_->register_pages(1, too_long, access_local_write).code(),
              StatusCode::invalid_parameter);
    PageList uneven = pages;
    uneven.page_va.push_back(kBase + k4k);
    EXPECT_EQ(registry_->register_pages(1, uneven, access_local_write).code(),
              StatusCode::invalid_parameter);
    PageList off = pages;
    off.address += 8; // address % page size != first_byte_offset
    EXPECT_EQ(registry_->register_pages(1, off, access_local_write).code(),
              StatusCode::invalid_parameter);
    EXPECT_TRUE(registry_->register_pages(1, pages, access_local_write).ok());
}

TEST_F(RegistryTest, ConnectionBoundRegion) {
    auto mr = reg(1, kBase, k4k, access_local_write | access_remote_write, 42);
    ASSERT_TRUE(mr.ok());
    EXPECT_EQ(mr.value()->bound_connection(), 42U);
    EXPECT_EQ(check(mr.value()->rkey(), 1, access_remote_write, kBase, 8, 42), KeyCheck::ok);
    EXPECT_EQ(check(mr.value()->rkey(), 1, access_remote_write, kBase, 8, 43),
              KeyCheck::wrong_connection);
    EXPECT_EQ(check(mr.value()->lkey(), 1, access_local_write, kBase, 8, 43),
              KeyCheck::wrong_connection);
    EXPECT_EQ(check(mr.value()->rkey(), 1, access_remote_write, kBase, 8, no_connection),
              KeyCheck::wrong_connection)
        << "a QP that is not connected has no connection a region can be bound to";
    // The same buffer for another connection is another region, not one more reference.
    auto other = reg(1, kBase, k4k, access_local_write | access_remote_write, 43);
    ASSERT_TRUE(other.ok());
    EXPECT_NE(other.value(), mr.value());
}

TEST_F(RegistryTest, ScatterGatherRegion) {
    const std::array<SglElement, 2> sgl{{{kBase + k4k - 8, 8}, {kBase + 8 * k4k, 16}}};
    auto mr = registry_->register_sgl(1, sgl, 12, access_local_write);
    ASSERT_TRUE(mr.ok()) << mr.error().to_string();
    EXPECT_EQ(mr.value()->kind(), RegionKind::sgl);
    EXPECT_EQ(mr.value()->local_end() - mr.value()->local_start(), 24U);
    const KeyEntry* entry = nullptr;
    ASSERT_EQ(registry_->check(
                  {mr.value()->lkey(), 1, 1, access_local_write, mr.value()->local_start() + 8, 16},
                  &entry),
              KeyCheck::ok);
    EXPECT_EQ(KeyTable::host(*entry, mr.value()->local_start() + 8),
              reinterpret_cast<std::uint8_t*>(kBase + 8 * k4k));
    const std::array<SglElement, 2> bad{{{kBase, 8}, {kBase + 8 * k4k, 16}}};
    EXPECT_EQ(registry_->register_sgl(1, bad, 12, access_local_write).code(),
              StatusCode::invalid_parameter);
}

TEST_F(RegistryTest, DmaRegionIsOneLkeyForEveryPd) {
    auto a = registry_->get_dma_region(1);
    auto b = registry_->get_dma_region(2);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(a.value(), b.value());
    EXPECT_EQ(a.value()->lkey(), b.value()->lkey()) << "the same lkey for every consumer";
    EXPECT_EQ(a.value()->rkey(), 0U) << "only the L_Key is valid";
    EXPECT_TRUE(a.value()->access() & access_local_write) << "always with local write";
    const MemoryKey lkey = a.value()->lkey();
    EXPECT_EQ(check(lkey, 7, access_local_write, kBase + 5, 100), KeyCheck::ok);
    EXPECT_EQ(check(lkey, 7, access_remote_read, kBase + 5, 100), KeyCheck::lkey_only);
    EXPECT_EQ(check(lkey, 7, access_local_write, 0x1000, 100), KeyCheck::out_of_bounds)
        << "outside DMA memory";
    ASSERT_TRUE(registry_->deregister(a.value()).ok());
    EXPECT_EQ(check(lkey, 7, access_local_write, kBase, 1), KeyCheck::ok) << "still referenced";
    ASSERT_TRUE(registry_->deregister(b.value()).ok());
    EXPECT_EQ(check(lkey, 7, access_local_write, kBase, 1), KeyCheck::free_entry);
}

TEST_F(RegistryTest, DmaRegionWithoutRangeCheckFailsClosed) {
    RegistryConfig config;
    auto registry = std::move(MemoryRegistry::create(config).value());
    auto dma = registry->get_dma_region(1);
    ASSERT_TRUE(dma.ok());
    const KeyEntry* entry = nullptr;
    EXPECT_EQ(registry->check({dma.value()->lkey(), 1, 1, access_local_write, kBase, 1}, &entry),
              KeyCheck::out_of_bounds);
}

class FastRegRegionTest : public RegistryTest {
protected:
    void SetUp() override {
        RegistryTest::SetUp();
        auto mr = registry_->allocate_fast_reg(
            1, 4, access_local_write | access_remote_write | access_remote_read);
        ASSERT_TRUE(mr.ok()) << mr.error().to_string();
        mr_ = mr.value();
    }
    FastRegRequest request(std::uint64_t base_va = 0x200000 + 16) {
        return {pages_.data(), 2, 12, 16, k4k, base_va};
    }
    std::array<std::uint64_t, 2> pages_{kBase + 5 * k4k, kBase + 2 * k4k};
    MemoryRegion* mr_ = nullptr;
};

TEST_F(FastRegRegionTest, InvalidUntilRegistered) {
    EXPECT_FALSE(mr_->valid());
    EXPECT_EQ(mr_->max_pages(), 4U);
    EXPECT_EQ(check(mr_->lkey(), 1, access_local_read, 0, 1), KeyCheck::invalidated);
}

TEST_F(FastRegRegionTest, RegisterThenPeerAccessThenInvalidate) {
    const MemoryKey key = next_key(mr_->lkey());
    ASSERT_EQ(
        registry_->fast_register(*mr_, 1, key, request(), access_local_write | access_remote_write),
        FastRegResult::ok);
    EXPECT_TRUE(mr_->valid());
    EXPECT_EQ(mr_->rkey(), key) << "the remote token is readable once it returns";
    const KeyEntry* entry = nullptr;
    ASSERT_EQ(registry_->check({key, 1, 1, access_remote_write, 0x200000 + 16, k4k}, &entry),
              KeyCheck::ok);
    EXPECT_EQ(KeyTable::host(*entry, 0x200000 + 16),
              reinterpret_cast<std::uint8_t*>(kBase + 5 * k4k + 16));
    EXPECT_EQ(KeyTable::host(*entry, 0x200000 + k4k),
              reinterpret_cast<std::uint8_t*>(kBase + 2 * k4k));
    EXPECT_EQ(check(key, 1, access_remote_read, 0x200000 + 16, 1), KeyCheck::access_denied);
    EXPECT_EQ(check(key, 1, access_remote_write, 0x200000 + 16, k4k + 1), KeyCheck::out_of_bounds);

    EXPECT_EQ(registry_->invalidate(key, 2), InvalidateResult::wrong_pd);
    EXPECT_EQ(registry_->invalidate(next_key(key), 1), InvalidateResult::bad_key);
    ASSERT_EQ(registry_->invalidate(key, 1), InvalidateResult::ok);
    EXPECT_EQ(check(key, 1, access_remote_write, 0x200000 + 16, 8), KeyCheck::stale_variant);
    EXPECT_EQ(mr_->rkey(), 0U) << "no remote key while invalid";
    EXPECT_EQ(mr_->remote_end(), 0U);
    EXPECT_EQ(registry_->invalidate(key, 1), InvalidateResult::bad_key) << "already invalid";

    // The next registration takes the next variant; the old key stays dead.
    const MemoryKey key2 = next_key(key);
    ASSERT_EQ(registry_->fast_register(*mr_, 1, key2, request(0x300000 + 16), access_local_write),
              FastRegResult::ok);
    EXPECT_EQ(check(key2, 1, access_local_write, 0x300000 + 16, 8), KeyCheck::ok);
    EXPECT_NE(check(key, 1, access_local_write, 0x300000 + 16, 8), KeyCheck::ok);
}

TEST_F(FastRegRegionTest, Seed001Errors) {
    const MemoryKey key = next_key(mr_->lkey());
    // Remote access beyond what the MR was initialised for: access violation.
    auto local_only = registry_->allocate_fast_reg(1, 4, access_local_write);
    ASSERT_TRUE(local_only.ok());
    EXPECT_EQ(registry_->fast_register(*local_only.value(), 1, next_key(local_only.value()->lkey()),
                                       request(), access_local_write | access_remote_read),
              FastRegResult::access_violation);
    EXPECT_EQ(registry_->fast_register(*mr_, 1, make_key(key_index(key) + 1, 0), request(),
                                       access_local_write),
              FastRegResult::key_index_changed);
    EXPECT_EQ(registry_->fast_register(*mr_, 2, key, request(), access_local_write),
              FastRegResult::wrong_pd);
    EXPECT_EQ(registry_->fast_register(*mr_, 1, key, request(), access_remote_write),
              FastRegResult::bad_access);
    PageListError page_error = PageListError::ok;
    EXPECT_EQ(registry_->fast_register(*mr_, 1, key, request(0x200000 + 17), access_local_write,
                                       &page_error),
              FastRegResult::bad_page_list);
    EXPECT_EQ(page_error, PageListError::base_va_not_fbo_aligned);
    EXPECT_FALSE(mr_->valid());
    ASSERT_EQ(registry_->fast_register(*mr_, 1, key, request(), access_local_write),
              FastRegResult::ok);
    EXPECT_EQ(registry_->fast_register(*mr_, 1, next_key(key), request(), access_local_write),
              FastRegResult::still_valid)
        << "new pages only after LOCAL_INV";
    ASSERT_EQ(registry_->invalidate(key, 1), InvalidateResult::ok);
    EXPECT_EQ(registry_->fast_register(*mr_, 1, key, request(), access_local_write),
              FastRegResult::variant_not_changed);
    auto normal = reg(1, kBase, k4k, access_local_write);
    EXPECT_EQ(registry_->fast_register(*normal.value(), 1, normal.value()->lkey(), request(),
                                       access_local_write),
              FastRegResult::not_fast_reg_region);
    EXPECT_EQ(registry_->invalidate(normal.value()->lkey(), 1),
              InvalidateResult::not_invalidatable);
    EXPECT_EQ(registry_->allocate_fast_reg(1, 0, access_local_write).code(),
              StatusCode::invalid_parameter);
}

TEST_F(FastRegRegionTest, ARetiredRegionTakesNoNewPages) {
    const MemoryKey key = next_key(mr_->lkey());
    bool last = false;
    ASSERT_TRUE(registry_->retire(mr_, last).ok());
    ASSERT_TRUE(last);
    EXPECT_EQ(registry_->fast_register(*mr_, 1, key, request(), access_local_write),
              FastRegResult::retired)
        << "a FAST_REG still queued must not bring a deregistered key back";
    EXPECT_FALSE(mr_->valid());
    registry_->reclaim(mr_);
    EXPECT_EQ(registry_->region_count(), 0U);
}

TEST_F(RegistryTest, ReregistrationRollsTheKey) {
    auto mr = reg(1, kBase, k4k, access_local_write | access_remote_read);
    ASSERT_TRUE(mr.ok());
    const MemoryKey before = mr.value()->rkey();
    ASSERT_TRUE(registry_->reregister(*mr.value(), access_local_write | access_remote_write).ok());
    EXPECT_NE(mr.value()->rkey(), before);
    EXPECT_EQ(check(before, 1, access_remote_read, kBase, 8), KeyCheck::stale_variant);
    EXPECT_EQ(check(mr.value()->rkey(), 1, access_remote_write, kBase, 8), KeyCheck::ok);
    EXPECT_EQ(check(mr.value()->rkey(), 1, access_remote_read, kBase, 8), KeyCheck::access_denied);
    auto shared = reg(1, kBase, k4k, access_local_write | access_remote_write);
    EXPECT_EQ(shared.value(), mr.value()) << "dedup follows the new access";
    EXPECT_EQ(registry_->reregister(*mr.value(), access_local_write).code(), StatusCode::busy);
}

TEST_F(RegistryTest, KeysRunOut) {
    for (int i = 0; i < 63; ++i) {
        ASSERT_TRUE(
            reg(1, kBase + static_cast<std::uint64_t>(i) * k4k, k4k, access_local_write).ok());
    }
    EXPECT_EQ(reg(1, kBase + 100 * k4k, k4k, access_local_write).code(), StatusCode::no_resources);
}

TEST_F(RegistryTest, DescriptorSizeNegotiation) {
    auto mr = reg(1, kBase + 8, 100, access_local_write | access_remote_write);
    ASSERT_TRUE(mr.ok());
    std::array<std::byte, 64> buffer{};
    buffer.fill(std::byte{0xee});

    std::uint32_t length = 8;
    Status status = mr.value()->export_descriptor(buffer.data(), &length);
    EXPECT_EQ(status.code(), StatusCode::buffer_too_small);
    EXPECT_EQ(length, sizeof(RegionDescriptor)) << "the required size is reported";
    EXPECT_EQ(buffer[0], std::byte{0xee}) << "nothing written to a too-small buffer";

    length = 64;
    EXPECT_EQ(mr.value()->export_descriptor(nullptr, &length).code(),
              StatusCode::invalid_parameter);
    EXPECT_EQ(length, 64U) << "an invalid buffer leaves the length untouched";
    EXPECT_EQ(mr.value()->export_descriptor(buffer.data(), nullptr).code(),
              StatusCode::invalid_parameter);

    length = 64;
    ASSERT_TRUE(mr.value()->export_descriptor(buffer.data(), &length).ok());
    EXPECT_EQ(length, sizeof(RegionDescriptor));
    RegionDescriptor descriptor;
    std::memcpy(&descriptor, buffer.data(), sizeof(descriptor));
    EXPECT_EQ(descriptor.version, RegionDescriptor::current_version);
    EXPECT_EQ(descriptor.size, sizeof(RegionDescriptor));
    EXPECT_EQ(descriptor.rkey, mr.value()->rkey());
    EXPECT_EQ(descriptor.address, kBase + 8);
    EXPECT_EQ(descriptor.length, 100U);
    EXPECT_EQ(descriptor.access, static_cast<std::uint32_t>(access_remote_write));
    EXPECT_EQ(buffer[sizeof(RegionDescriptor)], std::byte{0xee}) << "no byte past the descriptor";

    auto local = reg(1, kBase, k4k, access_local_write);
    length = 64;
    EXPECT_EQ(local.value()->export_descriptor(buffer.data(), &length).code(),
              StatusCode::access_violation);
}

TEST_F(RegistryTest, DeregisterRejectsForeignRegions) {
    EXPECT_EQ(registry_->deregister(nullptr).code(), StatusCode::invalid_parameter);
    RegistryConfig config;
    auto other = std::move(MemoryRegistry::create(config).value());
    const VirtualPiece piece{kBase, 1};
    auto mr = other->register_virtual(1, {&piece, 1}, 12, access_local_write);
    EXPECT_EQ(registry_->deregister(mr.value()).code(), StatusCode::invalid_parameter);
}

} // namespace
} // namespace prdma::mem
