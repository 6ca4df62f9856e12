// ExternalMemory: application memory (anonymous 4 KiB pages, or hugepages the application mapped
// itself) made usable for DMA, as DESIGN "Memory and translation tables" describes: pinned,
// registered with DPDK (rte_extmem_register) so that dpdk_translator() and build_dma_page_list()
// know its IOVAs, and DMA-mapped (rte_dev_dma_map) into every probed device.
//
// Needs a running EAL. Not thread-safe: one owner registers, maps and releases.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include <prdma/status.hpp>

struct rte_device;

namespace prdma::mem {

class ExternalMemory {
public:
    // [va, va + length) must be mapped and stay mapped while registered; va and length are
    // multiples of page_size, a power of two >= 4096 that is the size of the pages really backing
    // the range (a smaller one also works for hugepages, at the cost of more pages).
    //
    // Devices probed after this call are not mapped: call map_new_device() for each.
    // The range is munlock'ed on release, also if the application had locked it itself.
    static Result<ExternalMemory> register_memory(void* va, std::size_t length,
                                                  std::size_t page_size);

    ExternalMemory(ExternalMemory&& other) noexcept;
    ExternalMemory& operator=(ExternalMemory&& other) noexcept;
    ExternalMemory(const ExternalMemory&) = delete;
    ExternalMemory& operator=(const ExternalMemory&) = delete;
    ~ExternalMemory();

    // Undoes the registration now: unmaps from every device (latest first), unregisters from
    // DPDK, unlocks. Reports the first failure but always finishes; a second call does nothing.
    Status release();

    // Maps the memory into a device probed after register_memory(), e.g. after a hot-plug or
    // rte_dev_probe(); the caller calls this, nothing watches for new devices. A device already
    // handled is a no-op. A device that needs no mapping (its bus answers ENOTSUP) counts as
    // skipped.
    Status map_new_device(rte_device* device);
    // Unmaps the memory from one device; call it before detaching that device, which would leave
    // release() with a dangling device pointer. Unknown devices are a no-op.
    Status unmap_device(rte_device* device);

    [[nodiscard]] void* data() const noexcept { return va_; }
    [[nodiscard]] std::size_t length() const noexcept { return length_; }
    [[nodiscard]] std::size_t page_size() const noexcept { return page_size_; }
    // Number of IOVA-contiguous runs of pages, each one DMA mapping per device.
    [[nodiscard]] std::size_t runs() const noexcept { return runs_.size(); }
    // Devices holding a mapping of every run.
    [[nodiscard]] std::size_t mapped_devices() const noexcept { return mapped_.size(); }
    // Devices that need no mapping (no IOMMU behind them: rte_dev_dma_map answered ENOTSUP).
    [[nodiscard]] std::size_t skipped_devices() const noexcept { return skipped_.size(); }

private:
    struct Run {
        std::uintptr_t va = 0;
        std::uint64_t iova = 0;
        std::size_t length = 0;
    };
    enum class MapOutcome : std::uint8_t { mapped, skipped };

    ExternalMemory(void* va, std::size_t length, std::size_t page_size) noexcept
        : va_(va), length_(length), page_size_(page_size) {}

    Status lock();
    Status register_with_dpdk();
    Status map_probed_devices();
    Result<MapOutcome> map_device(rte_device* device);
    // Unmaps runs [0, count) from device, latest first; returns the first failure.
    Status unmap_runs(rte_device* device, std::size_t count);
    [[nodiscard]] bool knows(const rte_device* device) const;

    void* va_ = nullptr;
    std::size_t length_ = 0;
    std::size_t page_size_ = 0;
    bool locked_ = false;
    bool registered_ = false;
    std::vector<Run> runs_;
    std::vector<rte_device*> mapped_;  // in mapping order
    std::vector<rte_device*> skipped_; // remembered so that map_new_device() is idempotent
};

} // namespace prdma::mem
