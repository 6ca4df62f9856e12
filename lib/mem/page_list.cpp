#include <prdma/format.hpp>
#include <prdma/mem/access.hpp>
#include <prdma/mem/page_list.hpp>

namespace prdma::mem {

std::string_view access_rule_error_name(AccessRuleError error) {
    switch (error) {
    case AccessRuleError::ok:
        return "ok";
    case AccessRuleError::unknown_flags:
        return "unknown_flags";
    case AccessRuleError::remote_write_needs_local_write:
        return "remote_write_needs_local_write";
    }
    return "unknown";
}

std::string_view page_list_error_name(PageListError error) {
    switch (error) {
    case PageListError::ok:
        return "ok";
    case PageListError::zero_length:
        return "zero_length";
    case PageListError::bad_page_size:
        return "bad_page_size";
    case PageListError::address_overflow:
        return "address_overflow";
    case PageListError::partial_middle_page:
        return "partial_middle_page";
    case PageListError::not_dma_memory:
        return "not_dma_memory";
    case PageListError::empty_sgl:
        return "empty_sgl";
    case PageListError::sgl_first_not_page_end:
        return "sgl_first_not_page_end";
    case PageListError::sgl_last_not_page_start:
        return "sgl_last_not_page_start";
    case PageListError::sgl_middle_not_whole_pages:
        return "sgl_middle_not_whole_pages";
    case PageListError::no_cpu_mapping:
        return "no_cpu_mapping";
    case PageListError::page_not_aligned:
        return "page_not_aligned";
    case PageListError::fbo_beyond_page:
        return "fbo_beyond_page";
    case PageListError::length_beyond_pages:
        return "length_beyond_pages";
    case PageListError::base_va_not_fbo_aligned:
        return "base_va_not_fbo_aligned";
    case PageListError::too_many_pages:
        return "too_many_pages";
    case PageListError::no_pages:
        return "no_pages";
    case PageListError::inconsistent_page_list:
        return "inconsistent_page_list";
    }
    return "unknown";
}

namespace {

std::string_view page_list_error_text(PageListError error) {
    switch (error) {
    case PageListError::zero_length:
        return "a region must have at least one byte";
    case PageListError::bad_page_size:
        return "page size must be a power of two from 4 KiB to 1 TiB";
    case PageListError::address_overflow:
        return "start + length wraps around the address space";
    case PageListError::partial_middle_page:
        return "only the first page of the first piece and the last page of the last piece may be "
               "partial";
    case PageListError::not_dma_memory:
        return "the range is not DMA memory (allocate it from DPDK or register it as external "
               "memory first)";
    case PageListError::empty_sgl:
        return "the scatter/gather list has no elements";
    case PageListError::sgl_first_not_page_end:
        return "with several elements, the first must end on a page boundary";
    case PageListError::sgl_last_not_page_start:
        return "with several elements, the last must start on a page boundary";
    case PageListError::sgl_middle_not_whole_pages:
        return "middle elements must be whole, page-aligned pages";
    case PageListError::no_cpu_mapping:
        return "an IOVA of the list has no CPU mapping";
    case PageListError::page_not_aligned:
        return "every page address must be aligned to the page size";
    case PageListError::fbo_beyond_page:
        return "the first-byte offset must be smaller than the page size";
    case PageListError::length_beyond_pages:
        return "length must be at most pages x page size - first-byte offset";
    case PageListError::base_va_not_fbo_aligned:
        return "base VA must be a multiple of the page size plus the first-byte offset";
    case PageListError::too_many_pages:
        return "more pages than the memory region was allocated for";
    case PageListError::no_pages:
        return "the page array is empty";
    case PageListError::inconsistent_page_list:
        return "the page list's arrays differ in size or hold fewer pages than its length needs";
    case PageListError::ok:
        break;
    }
    return "no error";
}

std::uint64_t page_mask(unsigned shift) {
    return (std::uint64_t{1} << shift) - 1;
}

bool adds_overflow(std::uint64_t a, std::uint64_t b) {
    return a + b < a;
}

} // namespace

Error page_list_error(PageListError error, std::string_view context) {
    return {StatusCode::invalid_parameter,
            strformat("%s%s%.*s (%.*s)", context.empty() ? "" : std::string(context).c_str(),
                      context.empty() ? "" : ": ",
                      static_cast<int>(page_list_error_text(error).size()),
                      page_list_error_text(error).data(),
                      static_cast<int>(page_list_error_name(error).size()),
                      page_list_error_name(error).data())};
}

PageListError check_page_list(const PageList& list) {
    if (!valid_page_shift(list.page_shift)) {
        return PageListError::bad_page_size;
    }
    if (list.length == 0) {
        return PageListError::zero_length;
    }
    const std::uint64_t mask = page_mask(list.page_shift);
    if (list.first_byte_offset > mask) {
        return PageListError::fbo_beyond_page;
    }
    if ((list.address & mask) != list.first_byte_offset) {
        return PageListError::base_va_not_fbo_aligned;
    }
    if (adds_overflow(list.address, list.length)) {
        return PageListError::address_overflow;
    }
    const std::uint64_t needed =
        ((list.first_byte_offset + list.length - 1) >> list.page_shift) + 1;
    if (list.page_iova.size() != list.page_va.size() || list.page_iova.size() < needed) {
        return PageListError::inconsistent_page_list;
    }
    for (std::size_t i = 0; i < list.page_iova.size(); ++i) {
        if (((list.page_iova[i] | list.page_va[i]) & mask) != 0) {
            return PageListError::page_not_aligned;
        }
    }
    return PageListError::ok;
}

PageListError build_virtual_page_list(std::span<const VirtualPiece> pieces, unsigned page_shift,
                                      const AddressTranslator& translator, PageList& out) {
    if (!valid_page_shift(page_shift)) {
        return PageListError::bad_page_size;
    }
    if (pieces.empty()) {
        return PageListError::zero_length;
    }
    const std::uint64_t mask = page_mask(page_shift);
    std::uint64_t total = 0;
    for (std::size_t i = 0; i < pieces.size(); ++i) {
        const VirtualPiece& piece = pieces[i];
        if (piece.length == 0) {
            return PageListError::zero_length;
        }
        if (adds_overflow(piece.va, piece.length) || adds_overflow(total, piece.length)) {
            return PageListError::address_overflow;
        }
        const bool first = i == 0;
        const bool last = i + 1 == pieces.size();
        if ((!first && (piece.va & mask) != 0) ||
            (!last && ((piece.va + piece.length) & mask) != 0)) {
            return PageListError::partial_middle_page;
        }
        total += piece.length;
    }
    if (adds_overflow(pieces.front().va, total)) {
        return PageListError::address_overflow;
    }

    PageList list;
    list.page_shift = static_cast<std::uint8_t>(page_shift);
    list.first_byte_offset = pieces.front().va & mask;
    list.length = total;
    list.address = pieces.front().va;
    for (const VirtualPiece& piece : pieces) {
        const std::uintptr_t end = piece.va + piece.length;
        for (std::uintptr_t page = piece.va & ~mask; page < end; page += mask + 1) {
            const std::uint64_t iova = translator.to_iova(page);
            if (iova == bad_iova) {
                return PageListError::not_dma_memory;
            }
            list.page_iova.push_back(iova);
            list.page_va.push_back(page);
        }
    }
    out = std::move(list);
    return PageListError::ok;
}

PageListError build_sgl_page_list(std::span<const SglElement> sgl, unsigned page_shift,
                                  const AddressTranslator& translator, PageList& out) {
    if (!valid_page_shift(page_shift)) {
        return PageListError::bad_page_size;
    }
    if (sgl.empty()) {
        return PageListError::empty_sgl;
    }
    const std::uint64_t mask = page_mask(page_shift);
    std::uint64_t total = 0;
    for (std::size_t i = 0; i < sgl.size(); ++i) {
        const SglElement& element = sgl[i];
        if (element.length == 0) {
            return PageListError::zero_length;
        }
        if (adds_overflow(element.iova, element.length) || adds_overflow(total, element.length)) {
            return PageListError::address_overflow;
        }
        const bool first = i == 0;
        const bool last = i + 1 == sgl.size();
        const std::uint64_t end = element.iova + element.length;
        if (sgl.size() > 1) {
            if (first && (end & mask) != 0) {
                return PageListError::sgl_first_not_page_end;
            }
            if (last && (element.iova & mask) != 0) {
                return PageListError::sgl_last_not_page_start;
            }
            if (!first && !last && ((element.iova & mask) != 0 || (end & mask) != 0)) {
                return PageListError::sgl_middle_not_whole_pages;
            }
        }
        total += element.length;
    }

    PageList list;
    list.page_shift = static_cast<std::uint8_t>(page_shift);
    list.first_byte_offset = sgl.front().iova & mask;
    list.length = total;
    list.address = sgl.front().iova;
    for (const SglElement& element : sgl) {
        const std::uint64_t end = element.iova + element.length;
        for (std::uint64_t page = element.iova & ~mask; page < end; page += mask + 1) {
            const std::uintptr_t va = translator.to_va(page);
            if (va == 0) {
                return PageListError::no_cpu_mapping;
            }
            list.page_iova.push_back(page);
            list.page_va.push_back(va);
        }
    }
    out = std::move(list);
    return PageListError::ok;
}

PageListError check_fast_reg(const FastRegRequest& request, std::uint32_t max_pages) {
    if (!valid_page_shift(request.page_shift)) {
        return PageListError::bad_page_size;
    }
    if (request.page_count == 0 || request.pages == nullptr) {
        return PageListError::no_pages;
    }
    if (request.page_count > max_pages) {
        return PageListError::too_many_pages;
    }
    if (request.length == 0) {
        return PageListError::zero_length;
    }
    const std::uint64_t page_size = std::uint64_t{1} << request.page_shift;
    const std::uint64_t mask = page_size - 1;
    if (request.first_byte_offset >= page_size) {
        return PageListError::fbo_beyond_page;
    }
    // Compared by division: pages x page size can exceed 64 bits (2^32 pages of 1 TiB).
    const std::uint64_t capacity_pages = request.page_count;
    if (adds_overflow(request.length, request.first_byte_offset) ||
        (request.length + request.first_byte_offset - 1) / page_size >= capacity_pages) {
        return PageListError::length_beyond_pages;
    }
    if ((request.base_va & mask) != request.first_byte_offset) {
        return PageListError::base_va_not_fbo_aligned;
    }
    if (adds_overflow(request.base_va, request.length)) {
        return PageListError::address_overflow;
    }
    for (std::uint32_t i = 0; i < request.page_count; ++i) {
        if ((request.pages[i] & mask) != 0) {
            return PageListError::page_not_aligned;
        }
    }
    return PageListError::ok;
}

PageListError build_fast_reg_page_list(const FastRegRequest& request, std::uint32_t max_pages,
                                       const AddressTranslator& translator, PageList& out) {
    const PageListError error = check_fast_reg(request, max_pages);
    if (error != PageListError::ok) {
        return error;
    }
    PageList list;
    list.page_shift = request.page_shift;
    list.first_byte_offset = request.first_byte_offset;
    list.length = request.length;
    list.address = request.base_va;
    const std::uint64_t page_size = list.page_size();
    // Only the pages the region touches; the array may describe more.
    const std::uint64_t used =
        (request.first_byte_offset + request.length + page_size - 1) / page_size;
    for (std::uint64_t i = 0; i < used; ++i) {
        const std::uintptr_t va = translator.to_va(request.pages[i]);
        if (va == 0) {
            return PageListError::no_cpu_mapping;
        }
        list.page_iova.push_back(request.pages[i]);
        list.page_va.push_back(va);
    }
    out = std::move(list);
    return PageListError::ok;
}

} // namespace prdma::mem
