#include <algorithm>
#include <bit>
#include <cerrno>
#include <cinttypes>
#include <climits>
#include <cstdint>
#include <cstring>
#include <string>
#include <sys/mman.h>
#include <sys/resource.h>
#include <utility>
#include <vector>

#include <rte_bus.h>
#include <rte_dev.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_memory.h>

#include <prdma/format.hpp>
#include <prdma/mem/external_memory.hpp>

#include "mem_log.hpp"

namespace prdma::mem {

namespace {

constexpr std::size_t min_page_size = 4096;

// DPDK's calls take pointers; runs are kept as integers so that page arithmetic stays exact.
void* as_pointer(std::uintptr_t va) noexcept {
    return reinterpret_cast<void*>(va); // NOLINT(performance-no-int-to-ptr)
}

Status validate(const void* va, std::size_t length, std::size_t page_size) {
    const auto start = reinterpret_cast<std::uintptr_t>(va);
    if (page_size < min_page_size || !std::has_single_bit(page_size)) {
        return Error(StatusCode::invalid_parameter,
                     strformat("page size %zu must be a power of two of at least %zu", page_size,
                               min_page_size));
    }
    if (va == nullptr) {
        return Error(StatusCode::invalid_parameter, "external memory address is null");
    }
    if (length == 0) {
        return Error(StatusCode::invalid_parameter, "external memory must be at least one page");
    }
    if (start % page_size != 0) {
        return Error(StatusCode::invalid_parameter,
                     strformat("address %p is not a multiple of the page size %zu", va, page_size));
    }
    if (length % page_size != 0) {
        return Error(
            StatusCode::invalid_parameter,
            strformat("length %zu is not a multiple of the page size %zu", length, page_size));
    }
    if (length > UINTPTR_MAX - start) {
        return Error(StatusCode::invalid_parameter,
                     strformat("range at %p of %zu bytes wraps the address space", va, length));
    }
    if (length / page_size > UINT_MAX) {
        return Error(StatusCode::invalid_parameter,
                     strformat("%zu pages of %zu bytes are more than DPDK can register; use a "
                               "larger page size",
                               length / page_size, page_size));
    }
    return {};
}

std::string memlock_limit_text() {
    rlimit limit{};
    if (getrlimit(RLIMIT_MEMLOCK, &limit) != 0) {
        return "unknown";
    }
    if (limit.rlim_cur == RLIM_INFINITY) {
        return "unlimited";
    }
    return strformat("%llu KiB", static_cast<unsigned long long>(limit.rlim_cur / 1024));
}

// rte_extmem_register only refuses a range identical to one already registered; a range that
// overlaps another list (partly registered already, or DPDK's own memory) would give two owners
// to the same pages, so it is refused here.
const rte_memseg_list* overlapping_list(std::uintptr_t start, std::size_t length) {
    struct Query {
        std::uintptr_t start;
        std::uintptr_t end;
        const rte_memseg_list* found;
    } query{start, start + length, nullptr};
    rte_memseg_list_walk(
        [](const rte_memseg_list* list, void* arg) {
            auto* q = static_cast<Query*>(arg);
            const auto base = reinterpret_cast<std::uintptr_t>(list->base_va);
            if (base < q->end && q->start < base + list->len) {
                q->found = list;
                return 1;
            }
            return 0;
        },
        &query);
    return query.found;
}

// Every probed device on every bus. Buses rather than ethdev ports: a device is listed once
// even when it has several ports, and devices of other classes (crypto, dma, raw) are included.
// Some buses cannot list their devices (vmbus, dsa and ifpga in 22.11); they have no DMA mapping
// either, and the ethdev pass finds their network ports so that they are counted as skipped.
std::vector<rte_device*> probed_devices() {
    std::vector<rte_device*> devices;
    const rte_bus_cmp_t any_bus = [](const rte_bus* /*bus*/, const void* /*data*/) { return 0; };
    for (rte_bus* bus = rte_bus_find(nullptr, any_bus, nullptr); bus != nullptr;
         bus = rte_bus_find(bus, any_bus, nullptr)) {
        // The iterator keeps a pointer to the filter string: it lives for the whole loop.
        const std::string filter = strformat("bus=%s", rte_bus_name(bus));
        rte_dev_iterator iterator{};
        rte_errno = 0;
        if (rte_dev_iterator_init(&iterator, filter.c_str()) != 0) {
            PRDMA_LOG(DEBUG, prdma_logtype_mem, "mem",
                      "bus %s cannot list its devices (%s): only its ethdev ports are seen",
                      rte_bus_name(bus), rte_strerror(rte_errno));
            continue;
        }
        for (rte_device* device = rte_dev_iterator_next(&iterator); device != nullptr;
             device = rte_dev_iterator_next(&iterator)) {
            if (rte_dev_is_probed(device) != 0) {
                devices.push_back(device);
            }
        }
    }
    std::uint16_t port = 0;
    RTE_ETH_FOREACH_DEV(port) {
        rte_eth_dev_info info{};
        if (rte_eth_dev_info_get(port, &info) == 0 && info.device != nullptr &&
            std::find(devices.begin(), devices.end(), info.device) == devices.end()) {
            devices.push_back(info.device);
        }
    }
    return devices;
}

// rte_dev_dma_map's documented failure is -1 with rte_errno; some drivers return -errno instead.
int dma_errno(int rc) {
    if (rc == -1 && rte_errno != 0) {
        return rte_errno;
    }
    return -rc;
}

} // namespace

Result<ExternalMemory> ExternalMemory::register_memory(void* va, std::size_t length,
                                                       std::size_t page_size) {
    if (auto valid = validate(va, length, page_size); !valid) {
        return valid.error();
    }
    // Each step records what it did; an early return destroys `memory`, which undoes exactly that.
    ExternalMemory memory(va, length, page_size);
    if (auto locked = memory.lock(); !locked) {
        return locked.error();
    }
    if (auto registered = memory.register_with_dpdk(); !registered) {
        return registered.error();
    }
    if (auto mapped = memory.map_probed_devices(); !mapped) {
        return mapped.error();
    }
    PRDMA_LOG(DEBUG, prdma_logtype_mem, "mem",
              "external memory %p +%zu (pages of %zu): %zu IOVA runs, mapped into %zu devices, "
              "%zu need no mapping",
              va, length, page_size, memory.runs(), memory.mapped_devices(),
              memory.skipped_devices());
    return memory;
}

Status ExternalMemory::lock() {
    // The IOVAs computed next must stay valid: pages may not be swapped out or left unpopulated.
    if (mlock(va_, length_) != 0) {
        const int err = errno;
        return Error(StatusCode::no_resources,
                     strformat("mlock(%p, %zu) failed: %s; the range must be mapped, and locked "
                               "memory is limited by RLIMIT_MEMLOCK (now %s: raise it with ulimit "
                               "-l or grant CAP_IPC_LOCK)",
                               va_, length_, std::strerror(err), memlock_limit_text().c_str()));
    }
    locked_ = true;
    return {};
}

Status ExternalMemory::register_with_dpdk() {
    const auto start = reinterpret_cast<std::uintptr_t>(va_);
    const std::size_t n_pages = length_ / page_size_;
    std::vector<rte_iova_t> iovas(n_pages);
    const bool iova_is_va = rte_eal_iova_mode() == RTE_IOVA_VA;
    for (std::size_t i = 0; i < n_pages; ++i) {
        const std::uintptr_t page = start + i * page_size_;
        iovas[i] = iova_is_va ? page : rte_mem_virt2phy(as_pointer(page));
        if (iovas[i] == RTE_BAD_IOVA) {
            return Error(StatusCode::not_supported,
                         strformat("no physical address for page %p: EAL runs with "
                                   "--iova-mode=pa, which needs root (CAP_SYS_ADMIN) to read "
                                   "/proc/self/pagemap; run as root or use --iova-mode=va",
                                   as_pointer(page)));
        }
    }
    if (const rte_memseg_list* other = overlapping_list(start, length_); other != nullptr) {
        return Error(StatusCode::busy,
                     strformat("[%p, +%zu) overlaps DPDK memory at [%p, +%zu) (%s): already "
                               "registered, or part of DPDK's own memory",
                               va_, length_, other->base_va, other->len,
                               other->external != 0 ? "external" : "internal"));
    }
    rte_errno = 0;
    if (rte_extmem_register(va_, length_, iovas.data(), static_cast<unsigned>(n_pages),
                            page_size_) != 0) {
        const int err = rte_errno;
        const std::string call =
            strformat("rte_extmem_register(%p, %zu, page size %zu)", va_, length_, page_size_);
        switch (err) {
        case EEXIST:
            return Error(StatusCode::busy, call + ": the range is already registered");
        case ENOSPC:
        case ENOMEM:
            return Error(StatusCode::no_resources,
                         call + strformat(": %s (no free memseg list: RTE_MAX_MEMSEG_LISTS "
                                          "external and internal lists at most)",
                                          rte_strerror(err)));
        case EINVAL:
            return Error(StatusCode::invalid_parameter,
                         call + strformat(": %s", rte_strerror(err)));
        default:
            return Error(StatusCode::internal, call + strformat(": %s", rte_strerror(err)));
        }
    }
    registered_ = true;

    // One mapping per IOVA-contiguous run: VFIO allows about 65k mappings per container (and
    // DPDK 22.11 tracks at most 256 user mappings), so 1 GiB of contiguous 4 KiB pages must be
    // one mapping, not 262144.
    for (std::size_t i = 0; i < n_pages; ++i) {
        const std::uintptr_t page = start + i * page_size_;
        if (!runs_.empty() && runs_.back().va + runs_.back().length == page &&
            runs_.back().iova + runs_.back().length == iovas[i]) {
            runs_.back().length += page_size_;
        } else {
            runs_.push_back(Run{page, iovas[i], page_size_});
        }
    }
    return {};
}

Status ExternalMemory::map_probed_devices() {
    for (rte_device* device : probed_devices()) {
        if (auto mapped = map_new_device(device); !mapped) {
            return mapped;
        }
    }
    return {};
}

bool ExternalMemory::knows(const rte_device* device) const {
    return std::find(mapped_.begin(), mapped_.end(), device) != mapped_.end() ||
           std::find(skipped_.begin(), skipped_.end(), device) != skipped_.end();
}

Status ExternalMemory::map_new_device(rte_device* device) {
    if (device == nullptr) {
        return Error(StatusCode::invalid_parameter, "device is null");
    }
    if (!registered_) {
        return Error(StatusCode::invalid_parameter,
                     strformat("cannot map device %s: the external memory was released",
                               rte_dev_name(device)));
    }
    if (knows(device)) {
        return {};
    }
    if (rte_dev_is_probed(device) == 0) {
        return Error(StatusCode::invalid_parameter,
                     strformat("device %s is not probed: probe it before mapping memory into it",
                               rte_dev_name(device)));
    }
    auto outcome = map_device(device);
    if (!outcome) {
        return outcome.error();
    }
    (outcome.value() == MapOutcome::mapped ? mapped_ : skipped_).push_back(device);
    return {};
}

Result<ExternalMemory::MapOutcome> ExternalMemory::map_device(rte_device* device) {
    for (std::size_t k = 0; k < runs_.size(); ++k) {
        const Run& run = runs_[k];
        rte_errno = 0;
        const int rc = rte_dev_dma_map(device, as_pointer(run.va), run.iova, run.length);
        if (rc == 0) {
            continue;
        }
        const int err = dma_errno(rc);
        if (k == 0 && err == ENOTSUP) {
            PRDMA_LOG(DEBUG, prdma_logtype_mem, "mem",
                      "device %s needs no DMA mapping (its bus has no IOMMU mapping)",
                      rte_dev_name(device));
            return MapOutcome::skipped;
        }
        (void)unmap_runs(device, k);
        const std::string reason = rc < 0 ? strformat("%s (errno %d)", rte_strerror(err), err)
                                          : strformat("unexpected return value %d", rc);
        PRDMA_LOG(ERR, prdma_logtype_mem, "mem", "rte_dev_dma_map(%s) failed: %s",
                  rte_dev_name(device), reason.c_str());
        return Error(StatusCode::internal,
                     strformat("rte_dev_dma_map(%s, va %p, iova 0x%" PRIx64 ", %zu bytes) "
                               "failed: %s",
                               rte_dev_name(device), as_pointer(run.va), run.iova, run.length,
                               reason.c_str()));
    }
    return MapOutcome::mapped;
}

Status ExternalMemory::unmap_runs(rte_device* device, std::size_t count) {
    Status first_failure;
    for (std::size_t k = count; k-- > 0;) {
        const Run& run = runs_[k];
        rte_errno = 0;
        const int rc = rte_dev_dma_unmap(device, as_pointer(run.va), run.iova, run.length);
        if (rc == 0) {
            continue;
        }
        const int err = dma_errno(rc);
        PRDMA_LOG(ERR, prdma_logtype_mem, "mem", "rte_dev_dma_unmap(%s, va %p, %zu bytes): %s",
                  rte_dev_name(device), as_pointer(run.va), run.length, rte_strerror(err));
        if (first_failure.ok()) {
            first_failure =
                Error(StatusCode::internal, strformat("rte_dev_dma_unmap(%s, va %p, iova 0x%" PRIx64
                                                      ", %zu bytes) failed: %s",
                                                      rte_dev_name(device), as_pointer(run.va),
                                                      run.iova, run.length, rte_strerror(err)));
        }
    }
    return first_failure;
}

Status ExternalMemory::unmap_device(rte_device* device) {
    if (const auto skipped = std::find(skipped_.begin(), skipped_.end(), device);
        skipped != skipped_.end()) {
        skipped_.erase(skipped);
        return {};
    }
    const auto mapped = std::find(mapped_.begin(), mapped_.end(), device);
    if (mapped == mapped_.end()) {
        return {};
    }
    mapped_.erase(mapped);
    // Forgotten even on failure: the caller is about to detach the device.
    return unmap_runs(device, runs_.size());
}

Status ExternalMemory::release() {
    Status first_failure;
    const auto note = [&first_failure](Status status) {
        if (first_failure.ok() && !status.ok()) {
            first_failure = std::move(status);
        }
    };
    for (std::size_t i = mapped_.size(); i-- > 0;) {
        note(unmap_runs(mapped_[i], runs_.size()));
    }
    mapped_.clear();
    skipped_.clear();
    runs_.clear();
    if (registered_) {
        registered_ = false;
        rte_errno = 0;
        if (rte_extmem_unregister(va_, length_) != 0) {
            const int err = rte_errno;
            PRDMA_LOG(ERR, prdma_logtype_mem, "mem", "rte_extmem_unregister(%p, %zu): %s", va_,
                      length_, rte_strerror(err));
            note(Error(StatusCode::internal, strformat("rte_extmem_unregister(%p, %zu) failed: %s",
                                                       va_, length_, rte_strerror(err))));
        }
    }
    if (locked_) {
        locked_ = false;
        if (munlock(va_, length_) != 0) {
            const int err = errno;
            PRDMA_LOG(ERR, prdma_logtype_mem, "mem", "munlock(%p, %zu): %s", va_, length_,
                      std::strerror(err));
            note(Error(StatusCode::internal,
                       strformat("munlock(%p, %zu) failed: %s", va_, length_, std::strerror(err))));
        }
    }
    return first_failure;
}

ExternalMemory::ExternalMemory(ExternalMemory&& other) noexcept
    : va_(std::exchange(other.va_, nullptr)), length_(std::exchange(other.length_, 0)),
      page_size_(std::exchange(other.page_size_, 0)), locked_(std::exchange(other.locked_, false)),
      registered_(std::exchange(other.registered_, false)), runs_(std::move(other.runs_)),
      mapped_(std::move(other.mapped_)), skipped_(std::move(other.skipped_)) {
    other.runs_.clear();
    other.mapped_.clear();
    other.skipped_.clear();
}

ExternalMemory& ExternalMemory::operator=(ExternalMemory&& other) noexcept {
    if (this != &other) {
        (void)release();
        va_ = std::exchange(other.va_, nullptr);
        length_ = std::exchange(other.length_, 0);
        page_size_ = std::exchange(other.page_size_, 0);
        locked_ = std::exchange(other.locked_, false);
        registered_ = std::exchange(other.registered_, false);
        runs_ = std::exchange(other.runs_, {});
        mapped_ = std::exchange(other.mapped_, {});
        skipped_ = std::exchange(other.skipped_, {});
    }
    return *this;
}

ExternalMemory::~ExternalMemory() {
    // Failures were logged where they happened; a destructor has no one to report to.
    (void)release();
}

} // namespace prdma::mem
