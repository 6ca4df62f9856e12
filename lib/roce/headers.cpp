// Names for the header-level enums (headers.hpp); the encoders and decoders are inline there.
#include <prdma/roce/headers.hpp>

namespace prdma::roce {

std::string_view header_error_name(HeaderError error) noexcept {
    switch (error) {
    case HeaderError::ok:
        return "ok";
    case HeaderError::too_short:
        return "too_short";
    case HeaderError::bad_version:
        return "bad_version";
    case HeaderError::bad_header_length:
        return "bad_header_length";
    case HeaderError::bad_checksum:
        return "bad_checksum";
    case HeaderError::bad_length:
        return "bad_length";
    }
    return "unknown";
}

std::string_view aeth_class_name(AethClass c) noexcept {
    switch (c) {
    case AethClass::ack:
        return "ack";
    case AethClass::rnr_nak:
        return "rnr_nak";
    case AethClass::nak_psn_sequence_error:
        return "nak_psn_sequence_error";
    case AethClass::nak_invalid_request:
        return "nak_invalid_request";
    case AethClass::nak_remote_access_error:
        return "nak_remote_access_error";
    case AethClass::nak_remote_operational_error:
        return "nak_remote_operational_error";
    case AethClass::nak_invalid_rd_request:
        return "nak_invalid_rd_request";
    case AethClass::nak_reserved_code:
        return "nak_reserved_code";
    case AethClass::reserved_type:
        return "reserved_type";
    }
    return "unknown";
}

} // namespace prdma::roce
