// DMA memory from DPDK (DESIGN "Memory and translation tables"): buffers and IOVA-contiguous zones
// that a device can reach, and the translator that gives the IOVA of any byte of DPDK memory,
// internal (hugepages) or external (rte_extmem_register, see external_memory.hpp).
//
// Everything here needs a running EAL (prdma::Eal).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include <prdma/mem/address_translator.hpp>
#include <prdma/mem/page_list.hpp>
#include <prdma/status.hpp>

struct rte_memzone;

namespace prdma::mem {

// DPDK's SOCKET_ID_ANY, without pulling DPDK's headers (not clean C++20) into applications.
inline constexpr int any_socket = -1;

// Memory from DPDK's heap (rte_malloc_socket), freed when the buffer goes.
//
// Not IOVA-contiguous in general: with --iova-mode=pa a buffer larger than a page may span pages
// that are not physically adjacent, so a device gets its pages from build_dma_page_list; iova()
// is only the first byte's. Use DmaZone for one contiguous device range.
class DmaBuffer {
public:
    // size > 0; align a power of two. zero clears the memory (rte_zmalloc_socket).
    static Result<DmaBuffer> allocate(std::size_t size, std::size_t align = 64,
                                      int socket = any_socket, bool zero = true);

    DmaBuffer(DmaBuffer&& other) noexcept;
    DmaBuffer& operator=(DmaBuffer&& other) noexcept;
    DmaBuffer(const DmaBuffer&) = delete;
    DmaBuffer& operator=(const DmaBuffer&) = delete;
    ~DmaBuffer();

    [[nodiscard]] void* data() const noexcept { return data_; }
    [[nodiscard]] std::size_t size() const noexcept { return size_; }
    // Device address of data()[0].
    [[nodiscard]] std::uint64_t iova() const noexcept { return iova_; }
    // Size of the pages backing the buffer: 2 MiB or 1 GiB hugepages, 4 KiB under --no-huge.
    [[nodiscard]] std::size_t page_size() const noexcept { return page_size_; }
    // NUMA socket the memory really came from (also when any_socket was asked for).
    [[nodiscard]] int socket() const noexcept { return socket_; }

private:
    DmaBuffer(void* data, std::size_t size, std::uint64_t iova, std::size_t page_size,
              int socket) noexcept
        : data_(data), size_(size), iova_(iova), page_size_(page_size), socket_(socket) {}
    void free_memory() noexcept;

    void* data_ = nullptr;
    std::size_t size_ = 0;
    std::uint64_t iova_ = bad_iova;
    std::size_t page_size_ = 0;
    int socket_ = any_socket;
};

// A named memzone (rte_memzone_reserve_aligned) that is contiguous in IOVA: byte i of data() is at
// iova() + i for the device. For rings and tables a device walks by address.
class DmaZone {
public:
    // name: unique, at most 31 characters (RTE_MEMZONE_NAMESIZE - 1); size > 0; align a power of
    // two below 4 GiB.
    static Result<DmaZone> reserve(std::string_view name, std::size_t size, int socket = any_socket,
                                   std::size_t align = 64);

    DmaZone(DmaZone&& other) noexcept;
    DmaZone& operator=(DmaZone&& other) noexcept;
    DmaZone(const DmaZone&) = delete;
    DmaZone& operator=(const DmaZone&) = delete;
    ~DmaZone();

    [[nodiscard]] void* data() const noexcept;
    [[nodiscard]] std::size_t size() const noexcept;
    [[nodiscard]] std::uint64_t iova() const noexcept;
    [[nodiscard]] std::size_t page_size() const noexcept;
    [[nodiscard]] int socket() const noexcept;
    [[nodiscard]] std::string_view name() const noexcept;

private:
    explicit DmaZone(const rte_memzone* zone) noexcept : zone_(zone) {}
    void free_zone() noexcept;

    const rte_memzone* zone_ = nullptr;
};

// Translates through DPDK's memory map: the IOVA of any byte in an allocated segment of DPDK
// memory, internal or external; bad_iova for anything else (stack, malloc, freed hugepages,
// external memory registered without IOVAs). va_to_iova is allocation-free and lock-light (one
// fbarray read lock), for building page lists page by page. iova_to_va is 0 for an unknown IOVA.
// With --iova-mode=va the IOVA of internal memory is its VA.
AddressTranslator dpdk_translator();

// True when every byte of [va, va + length) is in allocated DPDK memory (internal or external)
// that has an IOVA; false for length 0 and for a range that wraps the address space.
bool is_dma_memory(const void* va, std::size_t length);

// The page list of DPDK memory [va, va + length) as one virtual piece, with the page size of the
// memory itself (21 for 2 MiB hugepages, 12 for external memory on 4 KiB pages; the smallest one
// when the range spans memory of several page sizes). not_dma_memory when is_dma_memory is false.
PageListError build_dma_page_list(const void* va, std::size_t length, PageList& out);

} // namespace prdma::mem
