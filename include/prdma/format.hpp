// printf-style formatting into std::string for control-path messages (g++ 12 has no
// std::format); the attribute lets the compiler check every format string.
#pragma once

#include <string>

namespace prdma {

[[gnu::format(printf, 1, 2)]] std::string strformat(const char* fmt, ...);

} // namespace prdma
