// prdma-bench: every micro-benchmark of the project in one binary. JSON for machines with
//   prdma-bench --benchmark_out=results.json --benchmark_out_format=json
#include <benchmark/benchmark.h>

BENCHMARK_MAIN();
