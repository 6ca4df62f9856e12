#include <algorithm>
#include <bit>
#include <cerrno>
#include <cinttypes>
#include <climits>
#include <cstdint>
#include <span>
#include <string>
#include <utility>

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_fbarray.h>
#include <rte_malloc.h>
#include <rte_memory.h>
#include <rte_memzone.h>

#include <prdma/format.hpp>
#include <prdma/mem/dma_memory.hpp>
#include <prdma/mem/memory_registry.hpp>

#include "mem_log.hpp"

namespace prdma::mem {

static_assert(any_socket == SOCKET_ID_ANY);

namespace {

// DPDK looks memory up by pointer; the translator's interface speaks integers.
const void* as_pointer(std::uintptr_t va) noexcept {
    return reinterpret_cast<const void*>(va); // NOLINT(performance-no-int-to-ptr)
}

std::uintptr_t list_base(const rte_memseg_list& list) noexcept {
    return reinterpret_cast<std::uintptr_t>(list.base_va);
}

// Index of the segment holding va in its list; page sizes are powers of two, so a shift.
unsigned segment_index(const rte_memseg_list& list, std::uintptr_t va) noexcept {
    return static_cast<unsigned>((va - list_base(list)) >> std::countr_zero(list.page_sz));
}

// The fbarray is read directly (rather than through rte_mem_virt2memseg) because the per-page
// cost matters when a page list of hundreds of pages is built, and because only the fbarray's
// "used" bit tells an allocated segment from a hole the list reserves VA for.
std::uint64_t dpdk_va_to_iova(std::uintptr_t va, void* /*context*/) noexcept {
    rte_memseg_list* list = rte_mem_virt2memseg_list(as_pointer(va));
    if (list == nullptr) {
        return bad_iova;
    }
    const unsigned index = segment_index(*list, va);
    if (rte_fbarray_is_used(&list->memseg_arr, index) != 1) {
        return bad_iova;
    }
    const auto* segment = static_cast<const rte_memseg*>(rte_fbarray_get(&list->memseg_arr, index));
    if (segment == nullptr || segment->iova == RTE_BAD_IOVA) {
        return bad_iova;
    }
    return segment->iova + (va - segment->addr_64);
}

std::uintptr_t dpdk_iova_to_va(std::uint64_t iova, void* context) noexcept {
    // rte_mem_iova2virt walks every segment under the memory lock. With IOVA = VA the answer is
    // usually the IOVA itself, which one cheap lookup confirms; external memory registered with
    // other IOVAs falls through to the walk.
    if (rte_eal_iova_mode() == RTE_IOVA_VA && dpdk_va_to_iova(iova, context) == iova) {
        return iova;
    }
    return reinterpret_cast<std::uintptr_t>(rte_mem_iova2virt(iova));
}

// The smallest page size of the DPDK memory holding [start, end), or 0 when some byte of it is not
// in an allocated segment with an IOVA. Walks memseg lists, as a range may cross from one into a
// neighbour whose VA happens to follow it.
std::uint64_t dma_range_page_size(std::uintptr_t start, std::uintptr_t end) {
    std::uint64_t smallest = 0;
    for (std::uintptr_t cursor = start; cursor < end;) {
        rte_memseg_list* list = rte_mem_virt2memseg_list(as_pointer(cursor));
        if (list == nullptr) {
            return 0;
        }
        const std::uintptr_t stop = std::min<std::uintptr_t>(end, list_base(*list) + list->len);
        const unsigned first = segment_index(*list, cursor);
        const unsigned last = segment_index(*list, stop - 1);
        const int used = rte_fbarray_find_contig_used(&list->memseg_arr, first);
        if (used < 0 || static_cast<unsigned>(used) < last - first + 1) {
            return 0;
        }
        for (unsigned i = first; i <= last; ++i) {
            const auto* segment =
                static_cast<const rte_memseg*>(rte_fbarray_get(&list->memseg_arr, i));
            if (segment == nullptr || segment->iova == RTE_BAD_IOVA) {
                return 0;
            }
        }
        smallest = smallest == 0 ? list->page_sz : std::min<std::uint64_t>(smallest, list->page_sz);
        cursor = stop;
    }
    return smallest;
}

std::string socket_text(int socket) {
    return socket == any_socket ? std::string("any socket") : strformat("socket %d", socket);
}

Error alignment_error(const char* what, std::size_t align) {
    return {StatusCode::invalid_parameter,
            strformat("%s alignment %zu must be a power of two below 4 GiB", what, align)};
}

bool valid_alignment(std::size_t align) {
    return std::has_single_bit(align) && align <= UINT_MAX;
}

} // namespace

// ---- DmaBuffer ----------------------------------------------------------------------------------

Result<DmaBuffer> DmaBuffer::allocate(std::size_t size, std::size_t align, int socket, bool zero) {
    if (size == 0) {
        return Error(StatusCode::invalid_parameter, "DmaBuffer size must be at least one byte");
    }
    if (!valid_alignment(align)) {
        return alignment_error("DmaBuffer", align);
    }
    const auto align_arg = static_cast<unsigned>(align);
    void* data = zero ? rte_zmalloc_socket("prdma_dma_buffer", size, align_arg, socket)
                      : rte_malloc_socket("prdma_dma_buffer", size, align_arg, socket);
    if (data == nullptr) {
        return Error(StatusCode::no_resources,
                     strformat("cannot allocate %zu bytes aligned to %zu on %s from DPDK's heap: "
                               "not enough free hugepage memory there (reserve more hugepages, "
                               "or allow any socket)",
                               size, align, socket_text(socket).c_str()));
    }
    const rte_memseg_list* list = rte_mem_virt2memseg_list(data);
    const rte_iova_t iova = rte_malloc_virt2iova(data);
    if (list == nullptr || iova == RTE_BAD_IOVA) {
        rte_free(data);
        return Error(StatusCode::internal,
                     strformat("DPDK's heap returned %zu bytes at %p without an IOVA (EAL in "
                               "--iova-mode=pa without access to physical addresses?)",
                               size, data));
    }
    PRDMA_LOG(DEBUG, prdma_logtype_mem, "mem", "DmaBuffer %zu bytes at %p iova 0x%" PRIx64, size,
              data, iova);
    return DmaBuffer(data, size, iova, list->page_sz, list->socket_id);
}

DmaBuffer::DmaBuffer(DmaBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)),
      iova_(std::exchange(other.iova_, bad_iova)), page_size_(std::exchange(other.page_size_, 0)),
      socket_(std::exchange(other.socket_, any_socket)) {}

DmaBuffer& DmaBuffer::operator=(DmaBuffer&& other) noexcept {
    if (this != &other) {
        free_memory();
        data_ = std::exchange(other.data_, nullptr);
        size_ = std::exchange(other.size_, 0);
        iova_ = std::exchange(other.iova_, bad_iova);
        page_size_ = std::exchange(other.page_size_, 0);
        socket_ = std::exchange(other.socket_, any_socket);
    }
    return *this;
}

DmaBuffer::~DmaBuffer() {
    free_memory();
}

void DmaBuffer::free_memory() noexcept {
    if (data_ != nullptr) {
        rte_free(data_);
        data_ = nullptr;
    }
}

// ---- DmaZone ------------------------------------------------------------------------------------

Result<DmaZone> DmaZone::reserve(std::string_view name, std::size_t size, int socket,
                                 std::size_t align) {
    if (name.empty() || name.size() >= RTE_MEMZONE_NAMESIZE) {
        return Error(StatusCode::invalid_parameter,
                     strformat("memzone name '%.*s' has %zu characters; DPDK allows 1 to %d",
                               static_cast<int>(name.size()), name.data(), name.size(),
                               RTE_MEMZONE_NAMESIZE - 1));
    }
    if (size == 0) {
        // DPDK would reserve the largest free block instead.
        return Error(StatusCode::invalid_parameter,
                     strformat("DmaZone '%.*s' size must be at least one byte",
                               static_cast<int>(name.size()), name.data()));
    }
    if (!valid_alignment(align)) {
        return alignment_error("DmaZone", align);
    }
    const std::string zone_name(name);
    rte_errno = 0;
    const rte_memzone* zone = rte_memzone_reserve_aligned(
        zone_name.c_str(), size, socket, RTE_MEMZONE_IOVA_CONTIG, static_cast<unsigned>(align));
    if (zone == nullptr) {
        const int err = rte_errno;
        switch (err) {
        case EEXIST:
            return Error(StatusCode::busy,
                         strformat("a memzone named '%s' already exists (names are global to "
                                   "the process; free that one or choose another name)",
                                   zone_name.c_str()));
        case ENOMEM:
            return Error(StatusCode::no_resources,
                         strformat("no IOVA-contiguous free block of %zu bytes on %s for memzone "
                                   "'%s' (reserve more hugepages, or ask for less)",
                                   size, socket_text(socket).c_str(), zone_name.c_str()));
        case ENOSPC:
            return Error(StatusCode::no_resources,
                         strformat("no free memzone descriptor for '%s' (RTE_MAX_MEMZONE reached)",
                                   zone_name.c_str()));
        case EINVAL:
        case ENAMETOOLONG:
            return Error(StatusCode::invalid_parameter,
                         strformat("rte_memzone_reserve_aligned('%s', %zu, %s, align %zu) "
                                   "rejected its arguments: %s",
                                   zone_name.c_str(), size, socket_text(socket).c_str(), align,
                                   rte_strerror(err)));
        default:
            return Error(StatusCode::internal,
                         strformat("rte_memzone_reserve_aligned('%s', %zu) failed: %s",
                                   zone_name.c_str(), size, rte_strerror(err)));
        }
    }
    PRDMA_LOG(DEBUG, prdma_logtype_mem, "mem", "DmaZone '%s' %zu bytes iova 0x%" PRIx64, zone->name,
              zone->len, zone->iova);
    return DmaZone(zone);
}

DmaZone::DmaZone(DmaZone&& other) noexcept : zone_(std::exchange(other.zone_, nullptr)) {}

DmaZone& DmaZone::operator=(DmaZone&& other) noexcept {
    if (this != &other) {
        free_zone();
        zone_ = std::exchange(other.zone_, nullptr);
    }
    return *this;
}

DmaZone::~DmaZone() {
    free_zone();
}

void DmaZone::free_zone() noexcept {
    if (zone_ == nullptr) {
        return;
    }
    const int rc = rte_memzone_free(zone_);
    if (rc != 0) {
        PRDMA_LOG(ERR, prdma_logtype_mem, "mem", "rte_memzone_free('%s') failed: %s", zone_->name,
                  rte_strerror(-rc));
    }
    zone_ = nullptr;
}

void* DmaZone::data() const noexcept {
    return zone_ == nullptr ? nullptr : zone_->addr;
}

std::size_t DmaZone::size() const noexcept {
    return zone_ == nullptr ? 0 : zone_->len;
}

std::uint64_t DmaZone::iova() const noexcept {
    return zone_ == nullptr ? bad_iova : zone_->iova;
}

std::size_t DmaZone::page_size() const noexcept {
    return zone_ == nullptr ? 0 : zone_->hugepage_sz;
}

int DmaZone::socket() const noexcept {
    return zone_ == nullptr ? any_socket : zone_->socket_id;
}

std::string_view DmaZone::name() const noexcept {
    return zone_ == nullptr ? std::string_view{} : std::string_view(zone_->name);
}

// ---- translation --------------------------------------------------------------------------------

AddressTranslator dpdk_translator() {
    return {dpdk_va_to_iova, dpdk_iova_to_va, nullptr};
}

bool is_dma_memory(const void* va, std::size_t length) {
    const auto start = reinterpret_cast<std::uintptr_t>(va);
    if (length == 0 || length > UINTPTR_MAX - start) {
        return false;
    }
    return dma_range_page_size(start, start + length) != 0;
}

PageListError build_dma_page_list(const void* va, std::size_t length, PageList& out) {
    const auto start = reinterpret_cast<std::uintptr_t>(va);
    if (length == 0) {
        return PageListError::zero_length;
    }
    if (length > UINTPTR_MAX - start) {
        return PageListError::address_overflow;
    }
    const std::uint64_t page_size = dma_range_page_size(start, start + length);
    if (page_size == 0) {
        return PageListError::not_dma_memory;
    }
    const VirtualPiece piece{start, length};
    return build_virtual_page_list(std::span(&piece, 1),
                                   static_cast<unsigned>(std::countr_zero(page_size)),
                                   dpdk_translator(), out);
}

RegistryConfig dpdk_registry_config(PageSizeBitmap page_sizes) {
    RegistryConfig config;
    config.page_sizes = page_sizes;
    config.translator = dpdk_translator();
    config.dma_range_valid = [](std::uint64_t addr, std::uint64_t length) {
        return is_dma_memory(reinterpret_cast<const void*>(addr), length);
    };
    return config;
}

} // namespace prdma::mem
