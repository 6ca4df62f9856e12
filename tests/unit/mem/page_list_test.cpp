// Page-list builders at the edges of every rule of seeds 000 and 001.
#include <array>
#include <set>
#include <vector>

#include <gtest/gtest.h>

#include <prdma/mem/page_list.hpp>

namespace prdma::mem {
namespace {

constexpr std::uint64_t k4k = 4096;
constexpr std::uintptr_t kBase = 0x7f0000000000; // 1 GiB aligned; never dereferenced

const AddressTranslator kIdentity = AddressTranslator::identity();

// IOVA = VA + 1 TiB, so tests can tell the two apart; "not DMA" below 0x1000'0000.
AddressTranslator shifted_translator() {
    return {[](std::uintptr_t va, void*) -> std::uint64_t {
                return va < 0x10000000 ? bad_iova : va + (std::uint64_t{1} << 40);
            },
            [](std::uint64_t iova, void*) -> std::uintptr_t {
                return iova < (std::uint64_t{1} << 40) ? 0 : iova - (std::uint64_t{1} << 40);
            },
            nullptr};
}

TEST(PageListErrors, NamesAreDistinctAndMessagesNameTheRule) {
    std::set<std::string_view> names;
    for (int e = 0; e <= static_cast<int>(PageListError::inconsistent_page_list); ++e) {
        EXPECT_TRUE(names.insert(page_list_error_name(static_cast<PageListError>(e))).second);
    }
    const Error error = page_list_error(PageListError::fbo_beyond_page, "fast-register");
    EXPECT_EQ(error.code(), StatusCode::invalid_parameter);
    EXPECT_NE(error.message().find("fbo_beyond_page"), std::string::npos);
    EXPECT_NE(error.message().find("fast-register"), std::string::npos);
}

// ---- virtual ranges (IbRegVirtMr) ------------------------------------------------------------

TEST(VirtualPageList, OneByteRegion) {
    const VirtualPiece piece{kBase + 100, 1};
    PageList list;
    ASSERT_EQ(build_virtual_page_list({&piece, 1}, 12, kIdentity, list), PageListError::ok);
    EXPECT_EQ(list.page_count(), 1U);
    EXPECT_EQ(list.first_byte_offset, 100U);
    EXPECT_EQ(list.length, 1U);
    EXPECT_EQ(list.address, kBase + 100);
    EXPECT_EQ(list.page_va[0], kBase);
}

TEST(VirtualPageList, PartialFirstAndLastPages) {
    // 10 bytes before a page boundary to 10 bytes after the next one: 3 pages.
    const VirtualPiece piece{kBase + k4k - 10, k4k + 20};
    PageList list;
    ASSERT_EQ(build_virtual_page_list({&piece, 1}, 12, shifted_translator(), list),
              PageListError::ok);
    ASSERT_EQ(list.page_count(), 3U);
    EXPECT_EQ(list.first_byte_offset, k4k - 10);
    EXPECT_EQ(list.page_va[2], kBase + 2 * k4k);
    EXPECT_EQ(list.page_iova[2], kBase + 2 * k4k + (std::uint64_t{1} << 40));
    EXPECT_EQ(list.address % list.page_size(), list.first_byte_offset);
}

TEST(VirtualPageList, ExactlyOnePageEndingOnTheBoundary) {
    const VirtualPiece piece{kBase, k4k};
    PageList list;
    ASSERT_EQ(build_virtual_page_list({&piece, 1}, 12, kIdentity, list), PageListError::ok);
    EXPECT_EQ(list.page_count(), 1U) << "the first byte of the next page is not in the region";
}

TEST(VirtualPageList, SeveralPiecesWithWholeMiddlePages) {
    const std::array<VirtualPiece, 3> pieces{{
        {kBase + 0x800, k4k - 0x800}, // partial first page, ends on a boundary
        {kBase + 16 * k4k, 2 * k4k},  // whole pages elsewhere
        {kBase + 64 * k4k, 10},       // starts on a boundary, partial last page
    }};
    PageList list;
    ASSERT_EQ(build_virtual_page_list(pieces, 12, kIdentity, list), PageListError::ok);
    EXPECT_EQ(list.page_count(), 4U);
    EXPECT_EQ(list.length, k4k - 0x800 + 2 * k4k + 10);
    EXPECT_EQ(list.page_va[1], kBase + 16 * k4k);
    EXPECT_EQ(list.page_va[3], kBase + 64 * k4k);
}

TEST(VirtualPageList, PartialPageInTheMiddleIsRejected) {
    const std::array<VirtualPiece, 2> first_ends_inside{{{kBase, 100}, {kBase + k4k, k4k}}};
    PageList list;
    EXPECT_EQ(build_virtual_page_list(first_ends_inside, 12, kIdentity, list),
              PageListError::partial_middle_page);
    const std::array<VirtualPiece, 2> second_starts_inside{{{kBase, k4k}, {kBase + k4k + 8, 8}}};
    EXPECT_EQ(build_virtual_page_list(second_starts_inside, 12, kIdentity, list),
              PageListError::partial_middle_page);
}

TEST(VirtualPageList, RejectsBadInput) {
    PageList list;
    const VirtualPiece empty{kBase, 0};
    EXPECT_EQ(build_virtual_page_list({&empty, 1}, 12, kIdentity, list),
              PageListError::zero_length);
    EXPECT_EQ(build_virtual_page_list({}, 12, kIdentity, list), PageListError::zero_length);
    const VirtualPiece wraps{UINTPTR_MAX - 10, 20};
    EXPECT_EQ(build_virtual_page_list({&wraps, 1}, 12, kIdentity, list),
              PageListError::address_overflow);
    const VirtualPiece fine{kBase, 1};
    EXPECT_EQ(build_virtual_page_list({&fine, 1}, 11, kIdentity, list),
              PageListError::bad_page_size);
    EXPECT_EQ(build_virtual_page_list({&fine, 1}, 41, kIdentity, list),
              PageListError::bad_page_size);
    const VirtualPiece not_dma{0x1000, 1};
    EXPECT_EQ(build_virtual_page_list({&not_dma, 1}, 12, shifted_translator(), list),
              PageListError::not_dma_memory);
    EXPECT_EQ(list.page_count(), 0U) << "a failed build leaves the output untouched";
}

// ---- IOVA scatter/gather lists (IbRegScatterGatherMr) -----------------------------------------

constexpr std::uint64_t kIova = std::uint64_t{1} << 41;

TEST(SglPageList, SingleElementMayBePartialAtBothEnds) {
    const SglElement element{kIova + 10, 100};
    PageList list;
    ASSERT_EQ(build_sgl_page_list({&element, 1}, 12, shifted_translator(), list),
              PageListError::ok);
    EXPECT_EQ(list.page_count(), 1U);
    EXPECT_EQ(list.address, kIova + 10);
    EXPECT_EQ(list.first_byte_offset, 10U);
    EXPECT_EQ(list.page_va[0], kIova - (std::uint64_t{1} << 40));
}

TEST(SglPageList, FirstEndsAndLastStartsOnBoundaries) {
    const std::array<SglElement, 3> sgl{{
        {kIova + k4k - 16, 16},     // partial start, ends on a boundary
        {kIova + 8 * k4k, 2 * k4k}, // whole pages
        {kIova + 32 * k4k, 5},      // starts on a boundary, partial end
    }};
    PageList list;
    ASSERT_EQ(build_sgl_page_list(sgl, 12, shifted_translator(), list), PageListError::ok);
    EXPECT_EQ(list.page_count(), 4U);
    EXPECT_EQ(list.length, 16 + 2 * k4k + 5);
}

TEST(SglPageList, EveryRuleHasItsOwnError) {
    PageList list;
    const AddressTranslator xlate = shifted_translator();
    EXPECT_EQ(build_sgl_page_list({}, 12, xlate, list), PageListError::empty_sgl);
    const std::array<SglElement, 2> first_short{{{kIova, 100}, {kIova + k4k, 10}}};
    EXPECT_EQ(build_sgl_page_list(first_short, 12, xlate, list),
              PageListError::sgl_first_not_page_end);
    const std::array<SglElement, 2> last_offset{{{kIova, k4k}, {kIova + k4k + 1, 10}}};
    EXPECT_EQ(build_sgl_page_list(last_offset, 12, xlate, list),
              PageListError::sgl_last_not_page_start);
    const std::array<SglElement, 3> middle_partial{
        {{kIova, k4k}, {kIova + 4 * k4k, k4k / 2}, {kIova + 8 * k4k, 10}}};
    EXPECT_EQ(build_sgl_page_list(middle_partial, 12, xlate, list),
              PageListError::sgl_middle_not_whole_pages);
    const std::array<SglElement, 3> middle_misaligned{
        {{kIova, k4k}, {kIova + 4 * k4k + 8, k4k}, {kIova + 8 * k4k, 10}}};
    EXPECT_EQ(build_sgl_page_list(middle_misaligned, 12, xlate, list),
              PageListError::sgl_middle_not_whole_pages);
    const SglElement no_mapping{0x5000, 10};
    EXPECT_EQ(build_sgl_page_list({&no_mapping, 1}, 12, xlate, list),
              PageListError::no_cpu_mapping);
    const SglElement zero{kIova, 0};
    EXPECT_EQ(build_sgl_page_list({&zero, 1}, 12, xlate, list), PageListError::zero_length);
    const SglElement wraps{~std::uint64_t{0} - 5, 10};
    EXPECT_EQ(build_sgl_page_list({&wraps, 1}, 12, xlate, list), PageListError::address_overflow);
}

// ---- fast-register page arrays (NdkFastRegister) ----------------------------------------------

class FastRegTest : public ::testing::Test {
protected:
    std::array<std::uint64_t, 4> pages_{kIova, kIova + 7 * k4k, kIova + 3 * k4k, kIova + 9 * k4k};
    FastRegRequest request(std::uint32_t fbo, std::uint64_t length, std::uint64_t base_va) {
        return {pages_.data(), static_cast<std::uint32_t>(pages_.size()), 12, fbo, length, base_va};
    }
};

TEST_F(FastRegTest, LengthUpToPagesTimesSizeMinusFbo) {
    EXPECT_EQ(check_fast_reg(request(100, 4 * k4k - 100, 0x10000 + 100), 4), PageListError::ok);
    EXPECT_EQ(check_fast_reg(request(100, 4 * k4k - 99, 0x10000 + 100), 4),
              PageListError::length_beyond_pages);
    EXPECT_EQ(check_fast_reg(request(0, 4 * k4k, 0x10000), 4), PageListError::ok);
    EXPECT_EQ(check_fast_reg(request(0, 4 * k4k + 1, 0x10000), 4),
              PageListError::length_beyond_pages);
    EXPECT_EQ(check_fast_reg(request(0, ~std::uint64_t{0}, 0x10000), 4),
              PageListError::length_beyond_pages);
}

TEST_F(FastRegTest, BaseVaIsPagesPlusFbo) {
    EXPECT_EQ(check_fast_reg(request(0, 10, 0), 4), PageListError::ok) << "zero is fine with FBO 0";
    EXPECT_EQ(check_fast_reg(request(8, 10, 0), 4), PageListError::base_va_not_fbo_aligned)
        << "zero only when FBO is zero";
    EXPECT_EQ(check_fast_reg(request(8, 10, 8), 4), PageListError::ok);
    EXPECT_EQ(check_fast_reg(request(8, 10, 5 * k4k + 8), 4), PageListError::ok);
    EXPECT_EQ(check_fast_reg(request(8, 10, 5 * k4k + 9), 4),
              PageListError::base_va_not_fbo_aligned);
    EXPECT_EQ(check_fast_reg(request(k4k - 1, 1, k4k - 1), 4), PageListError::ok);
    EXPECT_EQ(check_fast_reg(request(k4k, 1, 2 * k4k), 4), PageListError::fbo_beyond_page);
}

TEST_F(FastRegTest, PagesMustBeAlignedAndWithinCapacity) {
    pages_[2] += 512;
    EXPECT_EQ(check_fast_reg(request(0, 10, 0x10000), 4), PageListError::page_not_aligned);
    pages_[2] -= 512;
    EXPECT_EQ(check_fast_reg(request(0, 10, 0x10000), 3), PageListError::too_many_pages);
    FastRegRequest none = request(0, 10, 0x10000);
    none.page_count = 0;
    EXPECT_EQ(check_fast_reg(none, 4), PageListError::no_pages);
    EXPECT_EQ(check_fast_reg(request(0, 0, 0x10000), 4), PageListError::zero_length);
    FastRegRequest bad_size = request(0, 10, 0x10000);
    bad_size.page_shift = 9;
    EXPECT_EQ(check_fast_reg(bad_size, 4), PageListError::bad_page_size);
    EXPECT_EQ(check_fast_reg(request(0, 2 * k4k, ~std::uint64_t{0} - 4095), 4),
              PageListError::address_overflow);
}

TEST_F(FastRegTest, PageListUsesOnlyTouchedPagesInArrayOrder) {
    PageList list;
    ASSERT_EQ(
        build_fast_reg_page_list(request(16, k4k, 0x40000 + 16), 4, shifted_translator(), list),
        PageListError::ok);
    ASSERT_EQ(list.page_count(), 2U) << "16 + 4096 bytes touch two pages";
    EXPECT_EQ(list.page_iova[1], kIova + 7 * k4k);
    EXPECT_EQ(list.address, 0x40000U + 16);
    EXPECT_EQ(list.first_byte_offset, 16U);
}

} // namespace
} // namespace prdma::mem
