// Control-path status values and the error/result types every prdma call returns.
//
// The status set is the one the seeds specify (seed 003 IRP-based verbs, seed 000/001/002
// registration): a caller can branch on the code and show the message to a person.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace prdma {

enum class StatusCode : std::uint8_t {
    ok = 0,
    pending,           // accepted; completes later through a polled control completion
    busy,              // the object still holds resources or work
    buffer_too_small,  // the caller's buffer cannot even hold the header
    buffer_overflow,   // partial result copied; the required size is reported
    invalid_parameter, // an argument breaks a documented rule
    access_violation,  // access rights do not allow the operation
    not_connected,     // the queue pair / connection is not connected
    no_resources,      // out of memory, keys, table entries or queue slots
    device_removed,    // the device is gone; release everything and close
    not_supported,     // the device or build does not do this
    internal,          // a lower layer (DPDK, OS) failed; the message says which call
};

// Stable lower-case name of a status ("buffer_overflow"), for messages and logs.
std::string_view status_name(StatusCode code) noexcept;

// A failed control call: what went wrong, for code (code) and for people (message).
class Error {
public:
    Error(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

    [[nodiscard]] StatusCode code() const noexcept { return code_; }
    [[nodiscard]] const std::string& message() const noexcept { return message_; }
    // "<status name>: <message>"
    [[nodiscard]] std::string to_string() const;

private:
    StatusCode code_;
    std::string message_;
};

// Either a value or an Error; C++20 has no std::expected, and exceptions stay off the verbs.
template <typename T>
class [[nodiscard]] Result {
public:
    Result(T value) : state_(std::in_place_index<0>, std::move(value)) {}     // NOLINT: implicit
    Result(Error error) : state_(std::in_place_index<1>, std::move(error)) {} // NOLINT: implicit

    [[nodiscard]] bool ok() const noexcept { return state_.index() == 0; }
    explicit operator bool() const noexcept { return ok(); }

    T& value() & { return std::get<0>(state_); }
    const T& value() const& { return std::get<0>(state_); }
    T&& value() && { return std::get<0>(std::move(state_)); }
    T* operator->() { return &value(); }
    const T* operator->() const { return &value(); }
    T& operator*() & { return value(); }

    [[nodiscard]] const Error& error() const& { return std::get<1>(state_); }
    [[nodiscard]] StatusCode code() const noexcept {
        return ok() ? StatusCode::ok : std::get<1>(state_).code();
    }

private:
    std::variant<T, Error> state_;
};

// Result of a call that returns nothing but a status.
template <>
class [[nodiscard]] Result<void> {
public:
    Result() = default;
    Result(Error error) : error_(std::move(error)), failed_(true) {} // NOLINT: implicit

    [[nodiscard]] bool ok() const noexcept { return !failed_; }
    explicit operator bool() const noexcept { return ok(); }
    [[nodiscard]] const Error& error() const& { return error_; }
    [[nodiscard]] StatusCode code() const noexcept {
        return failed_ ? error_.code() : StatusCode::ok;
    }

private:
    Error error_{StatusCode::ok, {}};
    bool failed_ = false;
};

using Status = Result<void>;

} // namespace prdma
