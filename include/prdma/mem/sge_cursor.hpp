// A message laid over a scatter/gather list whose keys were checked once (one KeyEntry per SGE):
// gather reads `length` bytes of the message at `offset` into a buffer, scatter writes them.
// Any SGE type with `addr` and `length` members works (rdmadev's Sge, a driver's own copy).
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>

#include <prdma/mem/region_io.hpp>

namespace prdma::mem {

template <typename Sge>
class SgeCursor {
public:
    // `entries[i]` is the checked key entry of `sges[i]`; both spans have the same length.
    SgeCursor(std::span<const Sge> sges, std::span<const KeyEntry* const> entries) noexcept
        : sges_(sges), entries_(entries) {}

    // Every SGE still maps what it was checked for (see still_valid).
    [[nodiscard]] bool keys_valid() const noexcept {
        for (std::size_t i = 0; i < sges_.size(); ++i) {
            if (PRDMA_UNLIKELY(!still_valid(entries_[i], sges_[i].lkey))) {
                return false;
            }
        }
        return true;
    }

    // Copies message bytes [offset, offset + length) into `out`; the caller keeps the range
    // inside the message.
    void gather(std::uint32_t offset, std::uint32_t length, std::uint8_t* out) const noexcept {
        walk(offset, length, [&](std::size_t i, std::uint64_t addr, std::uint32_t take) {
            copy_from_region(*entries_[i], addr, take, out);
            out += take;
        });
    }

    // Copies `length` bytes of `data` to message bytes [offset, offset + length).
    void scatter(std::uint32_t offset, const std::uint8_t* data,
                 std::uint32_t length) const noexcept {
        walk(offset, length, [&](std::size_t i, std::uint64_t addr, std::uint32_t take) {
            copy_to_region(*entries_[i], addr, data, take);
            data += take;
        });
    }

private:
    template <typename Visit>
    void walk(std::uint32_t offset, std::uint32_t length, Visit&& visit) const noexcept {
        for (std::size_t i = 0; i < sges_.size() && length > 0; ++i) {
            const Sge& sge = sges_[i];
            if (offset >= sge.length) {
                offset -= sge.length;
                continue;
            }
            const std::uint32_t take = std::min(length, sge.length - offset);
            visit(i, sge.addr + offset, take);
            length -= take;
            offset = 0;
        }
    }

    std::span<const Sge> sges_;
    std::span<const KeyEntry* const> entries_;
};

} // namespace prdma::mem
