// Compiler hints and fast-path check macros shared by every prdma layer.
#pragma once

#include <prdma/build_config.hpp>

#define PRDMA_LIKELY(x) __builtin_expect(!!(x), 1)
#define PRDMA_UNLIKELY(x) __builtin_expect(!!(x), 0)

#define PRDMA_CACHE_LINE_SIZE 64
#define PRDMA_CACHE_ALIGNED alignas(PRDMA_CACHE_LINE_SIZE)

// Fast-path argument checks cost cycles on every burst, so they exist only when the build option
// debug_fastpath is on; the control path always checks.
#if PRDMA_DEBUG_FASTPATH
#define PRDMA_FASTPATH_CHECK(cond) PRDMA_UNLIKELY(!(cond))
#else
#define PRDMA_FASTPATH_CHECK(cond) false
#endif
