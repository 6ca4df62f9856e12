#pragma once

#include "log.hpp"

extern int prdma_logtype_swroce;

#define SWROCE_LOG(level, fmt, ...)                                                                \
    PRDMA_LOG(level, prdma_logtype_swroce, "swroce", fmt __VA_OPT__(, ) __VA_ARGS__)
