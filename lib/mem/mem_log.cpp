#include "mem_log.hpp"

PRDMA_LOG_REGISTER(prdma_logtype_mem, prdma.mem);
