// TranslationTable: region address -> CPU address and IOVA in O(1) (shift + index), for every
// registration path (DESIGN "Memory and translation tables").
//
// The table's block size is the largest page size the device supports that the region's layout
// allows (as Linux ib_umem_find_best_pgsz): a 1 GiB region on 2 MiB pages is 512 entries, and an
// IOVA- and VA-contiguous region may be a single large block. Above `single_level_max_entries`
// the entries live in fixed-size leaves under a directory (two levels), so no table needs one
// huge contiguous allocation.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include <prdma/compiler.hpp>
#include <prdma/mem/page_list.hpp>
#include <prdma/status.hpp>

namespace prdma::mem {

// Bit n set: the device can map pages of 2^n bytes (IB's page_size_cap).
using PageSizeBitmap = std::uint64_t;

inline constexpr PageSizeBitmap page_size_4k_2m_1g =
    (PageSizeBitmap{1} << 12) | (PageSizeBitmap{1} << 21) | (PageSizeBitmap{1} << 30);

// Largest block shift usable for `list` with the sizes in `supported`, or -1 when none fits
// (the layout needs blocks smaller than the device's smallest page).
int best_page_shift(const PageList& list, PageSizeBitmap supported);

// A contiguous piece of a translated range.
struct Chunk {
    std::uint8_t* host = nullptr;
    std::uint64_t iova = 0;
    std::uint32_t length = 0;
};

class TranslationTable {
public:
    static constexpr unsigned leaf_shift = 9;
    static constexpr std::uint64_t leaf_entries = std::uint64_t{1} << leaf_shift;
    static constexpr std::uint64_t single_level_max_entries = leaf_entries;

    struct Entry {
        std::uintptr_t va;
        std::uint64_t iova;
    };

    // Table for a registered page list, in the best block size `supported` allows.
    static Result<TranslationTable> build(const PageList& list, PageSizeBitmap supported);

    // Empty table with room for `max_pages` entries, for a fast-register MR: load() fills it on
    // the send queue without allocating.
    static Result<TranslationTable> with_capacity(std::uint32_t max_pages);

    // Loads a checked fast-register request (check_fast_reg() == ok, page_count <= capacity).
    // Returns no_cpu_mapping when a page has no CPU address; the table is then empty.
    PageListError load(const FastRegRequest& request, const AddressTranslator& translator);
    // Empties the table (invalidate): every later lookup is out of bounds.
    void clear() noexcept { length_ = 0; }

    TranslationTable(TranslationTable&&) noexcept = default;
    TranslationTable& operator=(TranslationTable&&) noexcept = default;
    TranslationTable(const TranslationTable&) = delete;
    TranslationTable& operator=(const TranslationTable&) = delete;
    ~TranslationTable() = default;

    [[nodiscard]] std::uint64_t address() const noexcept { return address_; }
    [[nodiscard]] std::uint64_t length() const noexcept { return length_; }
    [[nodiscard]] unsigned block_shift() const noexcept { return block_shift_; }
    [[nodiscard]] std::uint64_t entry_count() const noexcept { return entry_count_; }
    [[nodiscard]] std::uint64_t capacity() const noexcept { return capacity_; }
    [[nodiscard]] unsigned levels() const noexcept { return directory_.size() > 1 ? 2 : 1; }

    // [addr, addr + len) lies inside the region, and so does addr itself even when len is 0, so
    // host(addr) is always safe after it.
    [[nodiscard]] bool contains(std::uint64_t addr, std::uint64_t len) const noexcept {
        return addr >= address_ && addr - address_ < length_ && len <= length_ - (addr - address_);
    }

    // CPU address of a region address; the caller has checked contains().
    [[nodiscard]] std::uint8_t* host(std::uint64_t addr) const noexcept {
        const Entry& e = entry_for(addr);
        return reinterpret_cast<std::uint8_t*>(e.va) + (addr & block_mask());
    }
    // Device address of a region address; the caller has checked contains().
    [[nodiscard]] std::uint64_t iova(std::uint64_t addr) const noexcept {
        return entry_for(addr).iova + (addr & block_mask());
    }
    // CPU address of [addr, addr + len) when the range lies inside one block, so one copy does it
    // with no walk (a small message almost always); nullptr when it crosses into the next block.
    // The caller has checked contains().
    [[nodiscard]] std::uint8_t* host_in_block(std::uint64_t addr,
                                              std::uint64_t len) const noexcept {
        const std::uint64_t offset = addr & block_mask();
        if (PRDMA_UNLIKELY(len > block_mask() + 1 - offset)) {
            return nullptr;
        }
        return reinterpret_cast<std::uint8_t*>(entry_for(addr).va) + offset;
    }

    // Walks [addr, addr + len) in chunks that are contiguous in CPU and IOVA space, never past the
    // region's end. The caller has checked contains().
    class Cursor {
    public:
        Cursor(const TranslationTable& table, std::uint64_t addr, std::uint64_t len) noexcept
            : table_(&table), next_(addr), remaining_(len) {}
        // Next chunk, at most `max_len` bytes; false when the range is done.
        bool next(Chunk& chunk, std::uint32_t max_len = UINT32_MAX) noexcept;
        [[nodiscard]] std::uint64_t remaining() const noexcept { return remaining_; }

    private:
        const TranslationTable* table_;
        std::uint64_t next_;
        std::uint64_t remaining_;
    };

private:
    TranslationTable() = default;
    void allocate(std::uint64_t entries);
    [[nodiscard]] std::uint64_t block_mask() const noexcept {
        return (std::uint64_t{1} << block_shift_) - 1;
    }
    [[nodiscard]] Entry& slot(std::uint64_t index) noexcept {
        return directory_[index >> leaf_shift][index & (leaf_entries - 1)];
    }
    [[nodiscard]] const Entry& entry_for(std::uint64_t addr) const noexcept {
        const std::uint64_t index = (addr >> block_shift_) - first_block_;
        if (PRDMA_LIKELY(index < single_level_max_entries)) {
            return single_[index];
        }
        return directory_[index >> leaf_shift][index & (leaf_entries - 1)];
    }

    std::uint64_t address_ = 0; // region address of the first byte
    std::uint64_t length_ = 0;
    std::uint64_t first_block_ = 0; // address_ >> block_shift_
    std::uint64_t entry_count_ = 0;
    std::uint64_t capacity_ = 0;
    unsigned block_shift_ = 12;
    // Leaves of leaf_entries entries; single_ aliases leaf 0, so tables of up to
    // single_level_max_entries entries are one load away from their entry.
    std::vector<std::unique_ptr<Entry[]>> directory_;
    Entry* single_ = nullptr;
};

} // namespace prdma::mem
