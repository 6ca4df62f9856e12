#pragma once

#include "log.hpp"

extern int prdma_logtype_rdmadev;

#define RDMADEV_LOG(level, fmt, ...)                                                               \
    PRDMA_LOG(level, prdma_logtype_rdmadev, "rdmadev", fmt __VA_OPT__(, ) __VA_ARGS__)
