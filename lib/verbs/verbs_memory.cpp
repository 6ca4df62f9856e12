// Memory registration on ordinary memory: ibv_reg_mr takes whatever the program allocated
// (malloc, memalign, an anonymous mmap). prdma's device translates DPDK memory only, so the pages
// under a region that are not DPDK's are pinned and registered with DPDK as external memory,
// page-expanded, once per page however many regions share it (mem::ExternalMemory).
#include <array>
#include <cerrno>
#include <map>
#include <sys/mman.h>

#include <rte_memory.h>

#include <prdma/format.hpp>
#include <prdma/mem/external_memory.hpp>

#include "verbs_shim.hpp"

#undef ibv_reg_mr
#undef ibv_reg_mr_iova

namespace prdma::verbs {
namespace {

constexpr std::uintptr_t page_size = 4096;

// A run of pinned pages and the regions using it.
struct PinnedRun {
    mem::ExternalMemory memory;
    unsigned users = 0;
};

// Pinned runs by first page; runs never overlap. Control path, under `mutex`.
struct Pins {
    std::mutex mutex;
    std::map<std::uintptr_t, std::unique_ptr<PinnedRun>> runs;
};
Pins& pins() {
    static Pins all;
    return all;
}

// The run holding `page`, or none.
std::map<std::uintptr_t, std::unique_ptr<PinnedRun>>::iterator run_at(Pins& p,
                                                                      std::uintptr_t page) {
    auto it = p.runs.upper_bound(page);
    if (it == p.runs.begin()) {
        return p.runs.end();
    }
    --it;
    const std::uintptr_t end = it->first + it->second->memory.length();
    return page < end ? it : p.runs.end();
}

} // namespace

// Pins [begin, end) (page-aligned): pages already pinned get one more user, DPDK's own memory
// is left alone, and each stretch of other pages is registered as a new run. The runs the range
// uses are appended to `used`. Page by page: a region may begin on a page pinned for another one
// and go on past it.
Status pin_pages(std::uintptr_t begin, std::uintptr_t end, std::vector<std::uintptr_t>& used) {
    Pins& p = pins();
    const std::lock_guard lock(p.mutex);
    const auto free_page = [&p](std::uintptr_t page) {
        return run_at(p, page) == p.runs.end() &&
               rte_mem_virt2memseg_list(reinterpret_cast<void*>(page)) == nullptr; // NOLINT
    };
    std::uintptr_t page = begin;
    while (page < end) {
        if (auto it = run_at(p, page); it != p.runs.end()) {
            ++it->second->users;
            used.push_back(it->first);
            page = it->first + it->second->memory.length();
            continue;
        }
        if (!free_page(page)) { // DPDK's
            page += page_size;
            continue;
        }
        std::uintptr_t stop = page + page_size;
        while (stop < end && free_page(stop)) {
            stop += page_size;
        }
        Result<mem::ExternalMemory> pinned = mem::ExternalMemory::register_memory(
            reinterpret_cast<void*>(page), stop - page, page_size); // NOLINT: an address
        if (!pinned.ok()) {
            return pinned.error();
        }
        auto run = std::make_unique<PinnedRun>(PinnedRun{std::move(pinned.value()), 1});
        p.runs.emplace(page, std::move(run));
        used.push_back(page);
        page = stop;
    }
    return {};
}

bool pages_mapped(std::uintptr_t begin, std::uintptr_t end) {
    // mincore fails ENOMEM on a range with a page not mapped, which is what it is asked here for.
    std::array<unsigned char, 64> resident{};
    for (std::uintptr_t at = begin; at < end; at += resident.size() * page_size) {
        const std::size_t length = std::min<std::uintptr_t>(end - at, resident.size() * page_size);
        if (::mincore(reinterpret_cast<void*>(at), length, resident.data()) != 0) { // NOLINT
            return false;
        }
    }
    return true;
}

void unpin_pages(const std::vector<std::uintptr_t>& used) {
    Pins& p = pins();
    const std::lock_guard lock(p.mutex);
    for (std::uintptr_t first : used) {
        auto it = p.runs.find(first);
        if (it != p.runs.end() && --it->second->users == 0) {
            p.runs.erase(it); // ExternalMemory's destructor unregisters and unlocks
        }
    }
}

} // namespace prdma::verbs
