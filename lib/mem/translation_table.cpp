#include <algorithm>
#include <bit>

#include <prdma/format.hpp>
#include <prdma/mem/translation_table.hpp>

namespace prdma::mem {

int best_page_shift(const PageList& list, PageSizeBitmap supported) {
    if (list.page_count() == 0 || list.length == 0) {
        return -1;
    }
    const unsigned shift = list.page_shift;
    const std::uint64_t page_size = list.page_size();
    const std::uint64_t base = list.address - list.first_byte_offset;
    // A block of 2^b bytes maps region addresses to CPU and device addresses by one entry only if
    // all three agree in their low b bits and nothing jumps inside the block. Every bit where they
    // disagree, and the address of every jump, bounds b from above.
    std::uint64_t conflicts = 0;
    for (std::size_t i = 0; i < list.page_count(); ++i) {
        const std::uint64_t region = base + i * page_size;
        conflicts |= (region ^ list.page_iova[i]) | (region ^ list.page_va[i]);
        if (i > 0 && (list.page_iova[i] != list.page_iova[i - 1] + page_size ||
                      list.page_va[i] != list.page_va[i - 1] + page_size)) {
            conflicts |= region;
        }
    }
    const unsigned fit = conflicts == 0 ? 63U : static_cast<unsigned>(std::countr_zero(conflicts));
    // Pages of the list are aligned, so any size up to the list's own page size fits too.
    const unsigned limit = std::max(fit, shift);
    const PageSizeBitmap candidates =
        supported & (limit >= 63 ? ~PageSizeBitmap{0} : ((PageSizeBitmap{2} << limit) - 1));
    if (candidates == 0) {
        return -1;
    }
    // The smallest size that covers the region in one block, if any, else the largest candidate:
    // the fewest entries, without blocks larger than needed.
    const std::uint64_t last = list.address + list.length - 1;
    const unsigned span_bits =
        (list.address ^ last) == 0
            ? 0U
            : 64U - static_cast<unsigned>(std::countl_zero(list.address ^ last));
    const PageSizeBitmap covering =
        span_bits >= 64 ? 0 : candidates & ~((PageSizeBitmap{1} << span_bits) - 1);
    if (covering != 0) {
        return std::countr_zero(covering);
    }
    return 63 - std::countl_zero(candidates);
}

void TranslationTable::allocate(std::uint64_t entries) {
    directory_.clear();
    if (entries <= single_level_max_entries) {
        directory_.push_back(
            std::make_unique_for_overwrite<Entry[]>(std::max<std::uint64_t>(entries, 1)));
    } else {
        const std::uint64_t leaves = (entries + leaf_entries - 1) / leaf_entries;
        directory_.reserve(leaves);
        for (std::uint64_t i = 0; i < leaves; ++i) {
            directory_.push_back(std::make_unique_for_overwrite<Entry[]>(leaf_entries));
        }
    }
    single_ = directory_.front().get();
    capacity_ = entries;
}

Result<TranslationTable> TranslationTable::build(const PageList& list, PageSizeBitmap supported) {
    if (const PageListError error = check_page_list(list); error != PageListError::ok) {
        return page_list_error(error, "translation table");
    }
    const int shift = best_page_shift(list, supported);
    if (shift < 0) {
        return Error(StatusCode::not_supported,
                     strformat("the region's layout needs pages smaller than any the device "
                               "supports (page size bitmap 0x%llx)",
                               static_cast<unsigned long long>(supported)));
    }
    TranslationTable table;
    table.address_ = list.address;
    table.length_ = list.length;
    table.block_shift_ = static_cast<unsigned>(shift);
    table.first_block_ = list.address >> shift;
    const std::uint64_t last_block = (list.address + list.length - 1) >> shift;
    table.entry_count_ = last_block - table.first_block_ + 1;
    table.allocate(table.entry_count_);

    const unsigned page_shift = list.page_shift;
    const std::uint64_t base = list.address - list.first_byte_offset;
    for (std::uint64_t j = 0; j < table.entry_count_; ++j) {
        const std::uint64_t block = (table.first_block_ + j) << shift;
        Entry entry{};
        if (block >= base) {
            const std::uint64_t offset = block - base;
            const std::uint64_t page = offset >> page_shift;
            const std::uint64_t within = offset & (list.page_size() - 1);
            entry = {list.page_va[page] + within, list.page_iova[page] + within};
        } else {
            // The first block starts before page 0; best_page_shift() proved the mapping linear.
            const std::uint64_t before = base - block;
            entry = {list.page_va[0] - before, list.page_iova[0] - before};
        }
        table.slot(j) = entry;
    }
    return table;
}

Result<TranslationTable> TranslationTable::with_capacity(std::uint32_t max_pages) {
    if (max_pages == 0) {
        return page_list_error(PageListError::no_pages, "fast-register table");
    }
    TranslationTable table;
    table.allocate(max_pages);
    return table;
}

PageListError TranslationTable::load(const FastRegRequest& request,
                                     const AddressTranslator& translator) {
    length_ = 0;
    const std::uint64_t page_size = std::uint64_t{1} << request.page_shift;
    const std::uint64_t used =
        (request.first_byte_offset + request.length + page_size - 1) >> request.page_shift;
    if (used > capacity_) {
        return PageListError::too_many_pages;
    }
    for (std::uint64_t i = 0; i < used; ++i) {
        const std::uintptr_t va = translator.to_va(request.pages[i]);
        if (va == 0) {
            return PageListError::no_cpu_mapping;
        }
        slot(i) = Entry{va, request.pages[i]};
    }
    block_shift_ = request.page_shift;
    address_ = request.base_va;
    first_block_ = request.base_va >> request.page_shift;
    entry_count_ = used;
    length_ = request.length;
    return PageListError::ok;
}

bool TranslationTable::Cursor::next(Chunk& chunk, std::uint32_t max_len) noexcept {
    if (remaining_ == 0 || max_len == 0) {
        return false;
    }
    const std::uint64_t mask = table_->block_mask();
    std::uint8_t* const host = table_->host(next_);
    const std::uint64_t iova = table_->iova(next_);
    const std::uint64_t limit = std::min<std::uint64_t>(remaining_, max_len);
    std::uint64_t length = std::min<std::uint64_t>(limit, mask + 1 - (next_ & mask));
    // Neighbouring blocks that happen to be contiguous make one chunk: fewer copies.
    while (length < limit) {
        const std::uint64_t addr = next_ + length;
        if (table_->host(addr) != host + length || table_->iova(addr) != iova + length) {
            break;
        }
        length = std::min<std::uint64_t>(limit, length + mask + 1);
    }
    chunk = {host, iova, static_cast<std::uint32_t>(length)};
    next_ += length;
    remaining_ -= length;
    return true;
}

} // namespace prdma::mem
