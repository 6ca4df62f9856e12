// Page-size choice, one and two levels, bounds, and the chunk cursor.
#include <vector>

#include <gtest/gtest.h>

#include <prdma/mem/translation_table.hpp>

namespace prdma::mem {
namespace {

constexpr std::uint64_t k4k = 1ULL << 12;
constexpr std::uint64_t k2m = 1ULL << 21;
constexpr std::uint64_t k1g = 1ULL << 30;
constexpr std::uint64_t kBase = 0x7f0000000000; // 1 GiB aligned

PageSizeBitmap sizes(std::initializer_list<unsigned> shifts) {
    PageSizeBitmap bitmap = 0;
    for (unsigned shift : shifts) {
        bitmap |= PageSizeBitmap{1} << shift;
    }
    return bitmap;
}

// `count` pages of 2^shift at `va`, IOVA = VA + iova_offset, contiguous unless `jump_every`.
PageList make_list(unsigned shift, std::uint64_t count, std::uint64_t va, std::uint64_t fbo,
                   std::uint64_t length, std::uint64_t iova_offset = 0,
                   std::uint64_t jump_every = 0, std::uint64_t jump = 0) {
    PageList list;
    list.page_shift = static_cast<std::uint8_t>(shift);
    list.first_byte_offset = fbo;
    list.length = length;
    list.address = va + fbo;
    std::uint64_t extra = 0;
    for (std::uint64_t i = 0; i < count; ++i) {
        if (jump_every != 0 && i != 0 && i % jump_every == 0) {
            extra += jump;
        }
        list.page_va.push_back(va + (i << shift) + extra);
        list.page_iova.push_back(va + (i << shift) + extra + iova_offset);
    }
    return list;
}

TEST(BestPageSize, OneGibOn2MibPagesIs512Entries) {
    const PageList list = make_list(21, 512, kBase, 0, k1g, 0, /*jump_every=*/1, /*jump=*/k2m);
    EXPECT_EQ(best_page_shift(list, sizes({12, 21})), 21);
    auto table = TranslationTable::build(list, sizes({12, 21}));
    ASSERT_TRUE(table.ok()) << table.error().to_string();
    EXPECT_EQ(table->entry_count(), 512U);
    EXPECT_EQ(table->block_shift(), 21U);
    EXPECT_EQ(table->levels(), 1U) << "512 entries is still one level";
}

TEST(BestPageSize, ContiguousAlignedRegionIsOneLargePage) {
    const PageList list = make_list(21, 512, kBase, 0, k1g);
    auto table = TranslationTable::build(list, page_size_4k_2m_1g);
    ASSERT_TRUE(table.ok());
    EXPECT_EQ(table->block_shift(), 30U);
    EXPECT_EQ(table->entry_count(), 1U);
    // IOVA shifted by 2 MiB only: 1 GiB blocks would put the IOVA's low bits out of step.
    const PageList shifted = make_list(21, 512, kBase, 0, k1g, k2m);
    EXPECT_EQ(best_page_shift(shifted, page_size_4k_2m_1g), 21);
}

TEST(BestPageSize, DiscontinuitiesBoundTheBlockSize) {
    // Jumps every 4 KiB page: only 4 KiB blocks work.
    const PageList scattered = make_list(12, 64, kBase, 0, 64 * k4k, 0, 1, k2m);
    EXPECT_EQ(best_page_shift(scattered, page_size_4k_2m_1g), 12);
    auto table = TranslationTable::build(scattered, page_size_4k_2m_1g);
    ASSERT_TRUE(table.ok());
    EXPECT_EQ(table->entry_count(), 64U);
    // A device without 4 KiB pages cannot map it.
    auto refused = TranslationTable::build(scattered, sizes({21, 30}));
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.code(), StatusCode::not_supported);
}

TEST(BestPageSize, NoLargerBlockThanTheRegionNeeds) {
    // 100 bytes in one 4 KiB page of a contiguous 1 GiB-aligned area: one 4 KiB block.
    const PageList tiny = make_list(12, 1, kBase, 8, 100);
    EXPECT_EQ(best_page_shift(tiny, page_size_4k_2m_1g), 12);
    // 8 KiB across a 2 MiB boundary of contiguous memory: 2 MiB blocks would need 2 entries,
    // 1 GiB one, but 4 KiB pages are two entries as well; the smallest single block wins.
    const PageList across = make_list(12, 2, kBase + k2m - k4k, 0, 2 * k4k);
    EXPECT_EQ(best_page_shift(across, page_size_4k_2m_1g), 30);
}

TEST(BestPageSize, MisalignedRegionStillUsesLargePagesItFits) {
    // Contiguous 4 MiB region starting one 4 KiB page past a 2 MiB boundary.
    const PageList list = make_list(12, 1024, kBase + k4k, 0, 1024 * k4k);
    EXPECT_EQ(best_page_shift(list, sizes({12, 21})), 21);
    auto table = TranslationTable::build(list, sizes({12, 21}));
    ASSERT_TRUE(table.ok());
    EXPECT_EQ(table->entry_count(), 3U) << "partial 2 MiB block at each end plus a whole one";
}

TEST(BestPageSize, LargePagesSplitForADeviceWithSmallerPages) {
    const PageList list = make_list(30, 2, kBase, 0, 2 * k1g, 0, 1, 4 * k1g);
    auto table = TranslationTable::build(list, sizes({12, 21}));
    ASSERT_TRUE(table.ok());
    EXPECT_EQ(table->block_shift(), 21U);
    EXPECT_EQ(table->entry_count(), 1024U);
    EXPECT_EQ(table->levels(), 2U);
    EXPECT_EQ(table->host(kBase + k1g), reinterpret_cast<std::uint8_t*>(kBase + 5 * k1g));
    EXPECT_EQ(table->host(kBase + k1g - 1), reinterpret_cast<std::uint8_t*>(kBase + k1g - 1));
}

TEST(TranslationTable, TwoLevelBoundary) {
    // 512 and 513 scattered 4 KiB pages: one level, then two.
    for (std::uint64_t count : {512ULL, 513ULL}) {
        const PageList list = make_list(12, count, kBase, 0, count * k4k, 0, 1, k4k);
        auto table = TranslationTable::build(list, sizes({12}));
        ASSERT_TRUE(table.ok());
        EXPECT_EQ(table->entry_count(), count);
        EXPECT_EQ(table->levels(), count > 512 ? 2U : 1U);
        // The last byte resolves through the last entry (of the second leaf when there is one).
        const std::uint64_t last = list.address + list.length - 1;
        EXPECT_EQ(table->host(last),
                  reinterpret_cast<std::uint8_t*>(list.page_va.back() + k4k - 1));
    }
}

TEST(TranslationTable, BoundsAtTheLastValidAndFirstInvalidByte) {
    const PageList list = make_list(12, 3, kBase, 100, 2 * k4k, 0, 1, k4k);
    auto table = TranslationTable::build(list, sizes({12}));
    ASSERT_TRUE(table.ok());
    const std::uint64_t first = kBase + 100;
    const std::uint64_t end = first + 2 * k4k;
    EXPECT_TRUE(table->contains(first, 2 * k4k));
    EXPECT_TRUE(table->contains(end - 1, 1));
    EXPECT_FALSE(table->contains(end, 1));
    EXPECT_FALSE(table->contains(first - 1, 1));
    EXPECT_FALSE(table->contains(first, 2 * k4k + 1));
    EXPECT_FALSE(table->contains(end, 0)) << "host(end) would read past the table";
    EXPECT_TRUE(table->contains(end - 1, 0));
    EXPECT_FALSE(table->contains(first + 8, ~std::uint64_t{0})) << "length overflow";
    EXPECT_EQ(table->host(first), reinterpret_cast<std::uint8_t*>(kBase + 100));
    EXPECT_EQ(table->iova(end - 1), list.page_iova[2] + 99);
}

TEST(TranslationTable, CursorChunksStopAtDiscontinuitiesAndTheEnd) {
    // Pages 0-1 contiguous, then a jump, then page 2.
    PageList list = make_list(12, 3, kBase, 0, 3 * k4k, 0, 2, k2m);
    auto table = TranslationTable::build(list, sizes({12}));
    ASSERT_TRUE(table.ok());
    TranslationTable::Cursor cursor(*table, kBase + 10, 3 * k4k - 10);
    std::vector<Chunk> chunks;
    for (Chunk chunk; cursor.next(chunk);) {
        chunks.push_back(chunk);
    }
    ASSERT_EQ(chunks.size(), 2U) << "contiguous neighbours merge into one chunk";
    EXPECT_EQ(chunks[0].host, reinterpret_cast<std::uint8_t*>(kBase + 10));
    EXPECT_EQ(chunks[0].length, 2 * k4k - 10);
    EXPECT_EQ(chunks[1].host, reinterpret_cast<std::uint8_t*>(list.page_va[2]));
    EXPECT_EQ(chunks[1].length, k4k);
    EXPECT_EQ(cursor.remaining(), 0U);

    TranslationTable::Cursor limited(*table, kBase, 100);
    Chunk chunk;
    ASSERT_TRUE(limited.next(chunk, 64));
    EXPECT_EQ(chunk.length, 64U);
    ASSERT_TRUE(limited.next(chunk, 64));
    EXPECT_EQ(chunk.length, 36U);
    EXPECT_FALSE(limited.next(chunk, 64));
}

TEST(TranslationTable, OneCopyOnlyForARangeInsideOneBlock) {
    // Pages 0-1 contiguous, then a jump, then page 2.
    PageList list = make_list(12, 3, kBase, 0, 3 * k4k, 0, 2, k2m);
    auto table = TranslationTable::build(list, sizes({12}));
    ASSERT_TRUE(table.ok());
    EXPECT_EQ(table->host_in_block(kBase + 10, k4k - 10),
              reinterpret_cast<std::uint8_t*>(kBase + 10));
    EXPECT_EQ(table->host_in_block(kBase + 10, k4k - 9), nullptr)
        << "one byte into the next block is the cursor's, contiguous or not";
    EXPECT_EQ(table->host_in_block(kBase + 2 * k4k - 1, 2), nullptr) << "across the jump";
    EXPECT_EQ(table->host_in_block(kBase + 2 * k4k, k4k),
              reinterpret_cast<std::uint8_t*>(list.page_va[2]));
    EXPECT_EQ(table->host_in_block(kBase + 3 * k4k - 1, 0),
              reinterpret_cast<std::uint8_t*>(list.page_va[2] + k4k - 1));
    EXPECT_EQ(table->host_in_block(kBase, ~std::uint64_t{0}), nullptr) << "no wrap-around";
}

TEST(TranslationTable, FastRegisterLoadInPlace) {
    auto table = TranslationTable::with_capacity(4);
    ASSERT_TRUE(table.ok());
    EXPECT_FALSE(table->contains(0, 1)) << "empty until loaded";
    const std::uint64_t pages[] = {kBase + 9 * k4k, kBase + 2 * k4k};
    const FastRegRequest request{pages, 2, 12, 16, k4k, 0x100000 + 16};
    ASSERT_EQ(table->load(request, AddressTranslator::identity()), PageListError::ok);
    EXPECT_TRUE(table->contains(0x100000 + 16, k4k));
    EXPECT_FALSE(table->contains(0x100000 + 16, k4k + 1));
    EXPECT_EQ(table->host(0x100000 + 16), reinterpret_cast<std::uint8_t*>(kBase + 9 * k4k + 16));
    EXPECT_EQ(table->host(0x100000 + k4k), reinterpret_cast<std::uint8_t*>(kBase + 2 * k4k));
    table->clear();
    EXPECT_FALSE(table->contains(0x100000 + 16, 1));
    const std::uint64_t many[5] = {};
    const FastRegRequest too_many{many, 5, 12, 0, 5 * k4k, 0};
    EXPECT_EQ(table->load(too_many, AddressTranslator::identity()), PageListError::too_many_pages);
}

} // namespace
} // namespace prdma::mem
