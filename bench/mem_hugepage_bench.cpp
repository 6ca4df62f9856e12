// Registration of real hugepage memory: the page list comes from DPDK's memseg tables through
// dpdk_translator(), so this is what an application pays to register a DmaBuffer. EAL starts on
// the first run of a benchmark that needs it (the EAL-free benchmarks never pay for it).
#include <optional>

#include <benchmark/benchmark.h>

#include <prdma/eal.hpp>
#include <prdma/mem/dma_memory.hpp>
#include <prdma/mem/memory_registry.hpp>

namespace {

using namespace prdma;
using namespace prdma::mem;

// EAL for the benchmarks that need it, started once; nullptr when it could not start.
const Eal* bench_eal() {
    static std::optional<Eal> eal = [] {
        EalOptions options;
        options.program_name = "prdma-bench";
        options.args = {"-l", "0", "--log-level=lib.eal:error"};
        auto started = Eal::start(options);
        return started.ok() ? std::optional<Eal>(std::move(started.value())) : std::nullopt;
    }();
    return eal ? &*eal : nullptr;
}

// Page list + translation table + key for `bytes` of 2 MiB hugepages, then deregistration (not
// timed), against the real memseg tables.
void BM_RegisterHugepages(benchmark::State& state) {
    const Eal* eal = bench_eal();
    if (eal == nullptr || !eal->hugepage_backed()) {
        state.SkipWithError("needs EAL on hugepages (usertools/prdma-hugepages reserve)");
        return;
    }
    const auto bytes = static_cast<std::size_t>(state.range(0));
    auto buffer = DmaBuffer::allocate(bytes, 2U << 20, any_socket, /*zero=*/false);
    if (!buffer) {
        state.SkipWithError(buffer.error().to_string().c_str());
        return;
    }
    auto registry = MemoryRegistry::create(dpdk_registry_config());
    if (!registry) {
        state.SkipWithError(registry.error().to_string().c_str());
        return;
    }
    std::uint64_t entries = 0;
    for (auto _ : state) {
        PageList pages;
        if (build_dma_page_list(buffer->data(), bytes, pages) != PageListError::ok) {
            state.SkipWithError("build_dma_page_list failed");
            return;
        }
        auto mr =
            registry.value()->register_pages(1, pages, access_local_write | access_remote_write);
        if (!mr) {
            state.SkipWithError(mr.error().to_string().c_str());
            return;
        }
        entries = mr.value()->table()->entry_count();
        state.PauseTiming();
        (void)registry.value()->deregister(mr.value());
        state.ResumeTiming();
    }
    state.counters["pages"] = static_cast<double>(bytes >> 21);
    state.counters["entries"] = static_cast<double>(entries);
}

} // namespace

BENCHMARK(BM_RegisterHugepages)->ArgName("bytes")->Arg(2 << 20)->Arg(64 << 20)->Arg(1 << 30);
