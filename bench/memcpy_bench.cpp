// The floor every data-moving benchmark is compared with: copying the bytes once, in cache.
#include <cstring>
#include <vector>

#include <benchmark/benchmark.h>

namespace {

void BM_memcpy(benchmark::State& state) {
    const auto size = static_cast<std::size_t>(state.range(0));
    std::vector<char> src(size, 'a');
    std::vector<char> dst(size);
    for (auto _ : state) {
        std::memcpy(dst.data(), src.data(), size);
        benchmark::DoNotOptimize(dst.data());
        benchmark::ClobberMemory();
    }
    state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(size));
}

} // namespace

BENCHMARK(BM_memcpy)->Arg(64)->Arg(4096)->Arg(64 * 1024);
