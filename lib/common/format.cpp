#include <cstdarg>
#include <cstdio>

#include <prdma/format.hpp>

namespace prdma {

std::string strformat(const char* fmt, ...) {
    va_list args;
    va_start(args, fmt);
    va_list sizing;
    va_copy(sizing, args);
    const int needed = std::vsnprintf(nullptr, 0, fmt, sizing);
    va_end(sizing);
    std::string text;
    if (needed > 0) {
        text.resize(static_cast<std::size_t>(needed));
        // The buffer of a std::string has room for the terminating NUL after size().
        std::vsnprintf(text.data(), text.size() + 1, fmt, args);
    }
    va_end(args);
    return text;
}

} // namespace prdma
