// MemoryRegion: a registered region as seed 000's IB_MR reports it (local and remote start/end,
// access, lkey, rkey), plus the export of its remote descriptor with seed 002's size negotiation.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <tuple>

#include <prdma/mem/access.hpp>
#include <prdma/mem/key.hpp>
#include <prdma/status.hpp>

namespace prdma::mem {

enum class RegionKind : std::uint8_t {
    virtual_range, // IbRegVirtMr / ibv_reg_mr
    sgl,           // IbRegScatterGatherMr
    dma,           // IbGetDmaMr / reserved L_Key
    fast_reg,      // initialised for NdkFastRegister; pages come with each FAST_REG WR
};

// The remote descriptor a peer needs (seed 002): little-endian, versioned, fixed size.
struct RegionDescriptor {
    static constexpr std::uint16_t current_version = 1;
    std::uint16_t version = current_version;
    std::uint16_t size = sizeof(RegionDescriptor);
    std::uint32_t rkey = 0;
    std::uint64_t address = 0; // remote start
    std::uint64_t length = 0;
    std::uint32_t access = 0; // remote access bits only
    std::uint32_t reserved = 0;
};
static_assert(sizeof(RegionDescriptor) == 32);

class MemoryRegistry;
class TranslationTable; // the driver SDK's translation_table.hpp
struct KeyEntry;        // the driver SDK's memory_key.hpp

// What makes two registrations the same region (seed 002's reference counting): PD, address,
// length, access, connection, kind.
using RegionDedupKey =
    std::tuple<std::uint32_t, std::uint64_t, std::uint64_t, AccessFlags, ConnectionId, RegionKind>;

class MemoryRegion {
public:
    [[nodiscard]] RegionKind kind() const noexcept { return kind_; }
    [[nodiscard]] std::uint32_t pd() const noexcept { return pd_; }
    // [start, end): local_end is one past the last byte.
    [[nodiscard]] std::uint64_t local_start() const noexcept;
    [[nodiscard]] std::uint64_t local_end() const noexcept;
    // The range a peer may address with rkey(); empty (0, 0) without remote access.
    [[nodiscard]] std::uint64_t remote_start() const noexcept;
    [[nodiscard]] std::uint64_t remote_end() const noexcept;
    [[nodiscard]] AccessFlags access() const noexcept;
    [[nodiscard]] MemoryKey lkey() const noexcept;
    // 0 when the region grants no remote access (and always for the DMA MR).
    [[nodiscard]] MemoryKey rkey() const noexcept;
    [[nodiscard]] std::uint32_t references() const noexcept { return references_; }
    // The connection it is bound to (seed 002), any_connection when none.
    [[nodiscard]] ConnectionId bound_connection() const noexcept;
    [[nodiscard]] const TranslationTable* table() const noexcept { return table_.get(); }
    // Fast-register MRs: the page capacity and the access they were initialised for.
    [[nodiscard]] std::uint32_t max_pages() const noexcept { return max_pages_; }
    [[nodiscard]] AccessFlags allowed_access() const noexcept { return allowed_access_; }
    [[nodiscard]] bool valid() const noexcept;
    // Deregistered, waiting for MemoryRegistry::reclaim (see retire()).
    [[nodiscard]] bool retired() const noexcept { return retired_; }

    // Writes the remote descriptor into `buffer` (seed 002): *length is the buffer's size on the
    // way in and the descriptor's size on the way out. Too small: buffer_too_small and *length set
    // to the size required. A null `length`, or a null buffer claiming room, is invalid_parameter
    // and nothing is written anywhere.
    Status export_descriptor(void* buffer, std::uint32_t* length) const;

    MemoryRegion(const MemoryRegion&) = delete;
    MemoryRegion& operator=(const MemoryRegion&) = delete;
    MemoryRegion(MemoryRegion&&) = delete;
    MemoryRegion& operator=(MemoryRegion&&) = delete;
    ~MemoryRegion();

private:
    friend class MemoryRegistry;
    // Out of line, as the destructor: a member's TranslationTable is incomplete here.
    MemoryRegion(MemoryRegistry& registry, RegionKind kind, std::uint32_t pd, std::uint32_t index);
    [[nodiscard]] const KeyEntry& entry() const noexcept;

    MemoryRegistry* registry_;
    RegionKind kind_;
    std::uint32_t pd_;
    std::uint32_t index_;
    std::uint32_t references_ = 1;
    std::uint32_t max_pages_ = 0;
    AccessFlags allowed_access_ = access_none;
    int last_fast_reg_variant_ = -1; // -1: never fast-registered
    bool retired_ = false;
    // Its key in the registry's dedup map, so leaving it is a lookup, not a scan of every region.
    std::optional<RegionDedupKey> dedup_key_;
    std::unique_ptr<TranslationTable> table_;
};

} // namespace prdma::mem
