#include <prdma/status.hpp>

namespace prdma {

std::string_view status_name(StatusCode code) noexcept {
    switch (code) {
    case StatusCode::ok:
        return "ok";
    case StatusCode::pending:
        return "pending";
    case StatusCode::busy:
        return "busy";
    case StatusCode::buffer_too_small:
        return "buffer_too_small";
    case StatusCode::buffer_overflow:
        return "buffer_overflow";
    case StatusCode::invalid_parameter:
        return "invalid_parameter";
    case StatusCode::access_violation:
        return "access_violation";
    case StatusCode::not_connected:
        return "not_connected";
    case StatusCode::no_resources:
        return "no_resources";
    case StatusCode::device_removed:
        return "device_removed";
    case StatusCode::not_supported:
        return "not_supported";
    case StatusCode::internal:
        return "internal";
    }
    return "unknown";
}

std::string Error::to_string() const {
    std::string text(status_name(code_));
    text += ": ";
    text += message_;
    return text;
}

} // namespace prdma
