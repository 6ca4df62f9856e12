// PageList: the one description of registered memory every registration path reduces to
// (DESIGN "Memory and translation tables"): page size, the IOVA and CPU address of every page,
// the first byte's offset in page 0, the length, and the address the region is accessed by.
//
// Builders follow the seeds' rules; each violated rule is its own PageListError.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include <prdma/mem/address_translator.hpp>
#include <prdma/status.hpp>

namespace prdma::mem {

enum class PageListError : std::uint8_t {
    ok = 0,
    zero_length,      // a region has at least one byte
    bad_page_size,    // page size not a power of two in [4 KiB, 1 TiB]
    address_overflow, // start + length wraps the address space
    // Virtual ranges (seed 000 IbRegVirtMr)
    partial_middle_page, // a piece other than the first starts, or other than the last ends,
                         // inside a page
    not_dma_memory,      // a page of the range has no IOVA (not hugepage/external memory)
    // IOVA scatter/gather lists (seed 000 IbRegScatterGatherMr)
    empty_sgl,                  // no elements
    sgl_first_not_page_end,     // with several elements, the first must end on a page boundary
    sgl_last_not_page_start,    // with several elements, the last must start on a page boundary
    sgl_middle_not_whole_pages, // middle elements are whole, aligned pages
    no_cpu_mapping,             // an IOVA with no CPU address (the software device must copy)
    // Fast-register page arrays (seed 001 NdkFastRegister)
    page_not_aligned,        // a page address is not a multiple of the page size
    fbo_beyond_page,         // first-byte offset >= page size
    length_beyond_pages,     // length > pages * page size - FBO
    base_va_not_fbo_aligned, // base VA != n * page size + FBO
    too_many_pages,          // more pages than the MR was allocated for
    no_pages,                // zero pages
    inconsistent_page_list,  // page arrays of different sizes, or fewer pages than the length
};

std::string_view page_list_error_name(PageListError error);

struct PageList;
// Checks a PageList someone else built (register_pages is public): valid page size, aligned pages,
// FBO inside page 0, address % page size == FBO, and as many pages as the length needs.
PageListError check_page_list(const PageList& list);
// invalid_parameter Error naming the rule, for control-path callers.
Error page_list_error(PageListError error, std::string_view context = {});

struct PageList {
    std::uint8_t page_shift = 12;
    std::vector<std::uint64_t> page_iova; // page-aligned device addresses
    std::vector<std::uintptr_t> page_va;  // page-aligned CPU addresses, same count
    std::uint64_t first_byte_offset = 0;  // of the region's first byte within page 0
    std::uint64_t length = 0;             // bytes in the region
    // The address work requests and peers use for the region's first byte (its VA for a virtual
    // registration, the base VA of a fast-register, the IOVA of an SGL's first byte).
    // Invariant: address % page size == first_byte_offset.
    std::uint64_t address = 0;

    [[nodiscard]] std::uint64_t page_size() const { return std::uint64_t{1} << page_shift; }
    [[nodiscard]] std::size_t page_count() const { return page_iova.size(); }
};

inline constexpr std::uint8_t min_page_shift = 12;
inline constexpr std::uint8_t max_page_shift = 40;

constexpr bool valid_page_shift(unsigned shift) {
    return shift >= min_page_shift && shift <= max_page_shift;
}

// One piece of a virtual registration (an MDL): pinned memory at [va, va + length).
struct VirtualPiece {
    std::uintptr_t va = 0;
    std::uint64_t length = 0;
};

// A virtual range in pieces (seed 000): the region's address is the first piece's VA and the
// pieces follow each other in the region. Only the first page of the first piece and the last page
// of the last piece may be partial. Pages are looked up with `translator`.
PageListError build_virtual_page_list(std::span<const VirtualPiece> pieces, unsigned page_shift,
                                      const AddressTranslator& translator, PageList& out);

// One element of an IOVA scatter/gather list.
struct SglElement {
    std::uint64_t iova = 0;
    std::uint64_t length = 0;
};

// An IOVA scatter/gather list (seed 000): only the first and last elements may be partial; with
// several elements the first ends and the last starts on a page boundary; middle elements are
// whole pages. The region's address is the IOVA of the first byte.
PageListError build_sgl_page_list(std::span<const SglElement> sgl, unsigned page_shift,
                                  const AddressTranslator& translator, PageList& out);

// A fast-register request (seed 001), checked without allocating: it runs on the send queue.
struct FastRegRequest {
    const std::uint64_t* pages = nullptr; // page-aligned IOVAs
    std::uint32_t page_count = 0;
    std::uint8_t page_shift = 12;
    std::uint32_t first_byte_offset = 0;
    std::uint64_t length = 0;
    std::uint64_t base_va = 0;
};

PageListError check_fast_reg(const FastRegRequest& request, std::uint32_t max_pages);

// Builds the page list of a fast-register request (control-path form, e.g. for tests and for a
// device that programs its tables from a PageList).
PageListError build_fast_reg_page_list(const FastRegRequest& request, std::uint32_t max_pages,
                                       const AddressTranslator& translator, PageList& out);

} // namespace prdma::mem
