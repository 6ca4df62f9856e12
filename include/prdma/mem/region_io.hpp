// Copies into and out of a registered region through a key entry the caller has already checked
// (KeyTable::check: key, PD, access and bounds). Identity regions (the DMA MR) are CPU addresses;
// a range inside one block of a translation table is one copy; any other is walked through the
// table, one physically contiguous chunk at a time. Inline and allocation-free: this is the data
// path of every device that copies.
#pragma once

#include <cstdint>
#include <cstring>

#include <prdma/mem/memory_key.hpp>
#include <prdma/mem/translation_table.hpp>

namespace prdma::mem {

// Writes `length` bytes at region address `addr` of a checked entry.
inline void copy_to_region(const KeyEntry& entry, std::uint64_t addr, const std::uint8_t* data,
                           std::uint32_t length) noexcept {
    if (entry.identity) {
        std::memcpy(reinterpret_cast<void*>(addr), data, length);
        return;
    }
    if (std::uint8_t* host = entry.table->host_in_block(addr, length);
        PRDMA_LIKELY(host != nullptr)) {
        std::memcpy(host, data, length);
        return;
    }
    TranslationTable::Cursor cursor(*entry.table, addr, length);
    for (Chunk chunk; cursor.next(chunk);) {
        std::memcpy(chunk.host, data, chunk.length);
        data += chunk.length;
    }
}

// Reads `length` bytes at region address `addr` of a checked entry.
inline void copy_from_region(const KeyEntry& entry, std::uint64_t addr, std::uint32_t length,
                             std::uint8_t* out) noexcept {
    if (entry.identity) {
        std::memcpy(out, reinterpret_cast<const void*>(addr), length);
        return;
    }
    if (const std::uint8_t* host = entry.table->host_in_block(addr, length);
        PRDMA_LIKELY(host != nullptr)) {
        std::memcpy(out, host, length);
        return;
    }
    TranslationTable::Cursor cursor(*entry.table, addr, length);
    for (Chunk chunk; cursor.next(chunk);) {
        std::memcpy(out, chunk.host, chunk.length);
        out += chunk.length;
    }
}

// A key entry kept across bursts (a queued WQE's SGE, a READ being answered, a WRITE in progress)
// may be used again only while it still carries the key it was checked for: a deregistration,
// LOCAL_INV or SEND_WITH_INV in between moves the variant on or the state off valid, and the
// translation table behind it may be gone.
inline bool still_valid(const KeyEntry* entry, MemoryKey key) noexcept {
    return entry != nullptr && entry->state == KeyState::valid &&
           entry->variant == key_variant(key);
}

} // namespace prdma::mem
