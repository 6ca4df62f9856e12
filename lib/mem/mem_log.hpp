#pragma once

#include "log.hpp"

extern int prdma_logtype_mem;
