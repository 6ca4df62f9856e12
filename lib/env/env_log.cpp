#include "env_log.hpp"

PRDMA_LOG_REGISTER(prdma_logtype_env, prdma.env);
