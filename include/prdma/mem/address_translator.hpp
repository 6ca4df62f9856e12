// How lib/mem turns a CPU address into a device address (IOVA) and back, without depending on
// EAL: pure code and tests use identity(), applications dpdk_translator() (dma_memory.hpp).
#pragma once

#include <cstdint>

namespace prdma::mem {

inline constexpr std::uint64_t bad_iova = ~std::uint64_t{0};

struct AddressTranslator {
    // IOVA of a CPU address, or bad_iova when the address is not DMA memory.
    std::uint64_t (*va_to_iova)(std::uintptr_t va, void* context) = nullptr;
    // CPU address of an IOVA, or 0 when no CPU mapping is known.
    std::uintptr_t (*iova_to_va)(std::uint64_t iova, void* context) = nullptr;
    void* context = nullptr;

    [[nodiscard]] std::uint64_t to_iova(std::uintptr_t va) const { return va_to_iova(va, context); }
    [[nodiscard]] std::uintptr_t to_va(std::uint64_t iova) const {
        return iova_to_va(iova, context);
    }

    // IOVA == VA, every address valid: DPDK's --iova-mode=va, and pure tests.
    static AddressTranslator identity() {
        return {[](std::uintptr_t va, void*) -> std::uint64_t { return va; },
                [](std::uint64_t iova, void*) -> std::uintptr_t { return iova; }, nullptr};
    }
};

} // namespace prdma::mem
