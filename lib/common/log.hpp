// Logging through rte_log, one registered logtype per library ("prdma.mem", "prdma.env", ...),
// so applications filter prdma with the usual EAL option: --log-level=prdma.*:debug.
// Internal to prdma's libraries; applications use rte_log directly.
#pragma once

#include <rte_log.h>

// Register a library's logtype; use once per library in one .cpp file.
#define PRDMA_LOG_REGISTER(var, name) RTE_LOG_REGISTER(var, name, INFO)

// PRDMA_LOG(ERR, prdma_logtype_mem, "mem", "bad page size %zu", size) — level as rte_log's
// RTE_LOG_<level> suffix. Never use INFO or more verbose on the fast path.
#define PRDMA_LOG(level, logtype, component, fmt, ...)                                             \
    rte_log(RTE_LOG_##level, logtype, "prdma." component ": " fmt "\n" __VA_OPT__(, ) __VA_ARGS__)
