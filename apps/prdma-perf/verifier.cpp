#include "verifier.hpp"

#include <prdma/format.hpp>

namespace prdma::perf {

void Verifier::fill(std::span<std::uint8_t> out, std::uint64_t seed, std::uint64_t message) const {
    fill_pattern(out, seed, message);
    if (corrupt_at_ && *corrupt_at_ == message && !out.empty()) {
        out[out.size() / 2] ^= 0x5a;
    }
}

void Verifier::count(std::uint64_t bytes, bool message) {
    total_.bytes += bytes;
    if (message) {
        ++total_.messages;
    } else {
        ++total_.buffers;
    }
}

Verifier::Failure Verifier::failure_of(FailureKind kind, const Place& where,
                                       const Mismatch& mismatch, std::uint64_t checked_bytes) {
    Failure failure;
    failure.kind = kind;
    failure.where = where;
    failure.mismatch = mismatch;
    failure.checked_bytes = checked_bytes;
    return failure;
}

void Verifier::fail(const Failure& failure) {
    ++total_.failures;
    if (!first_) {
        first_ = failure;
    }
}

bool Verifier::check(std::span<const std::uint8_t> got, std::uint64_t seed, std::uint64_t message,
                     std::uint64_t first_offset, const Place& where) {
    count(got.size(), true);
    const auto mismatch = check_pattern(got, seed, message, first_offset);
    if (mismatch) {
        fail(failure_of(FailureKind::message, where, *mismatch, got.size()));
    }
    return !mismatch;
}

bool Verifier::check_bytes(std::span<const std::uint8_t> got,
                           std::span<const std::uint8_t> expected, const Place& where) {
    count(got.size(), true);
    const auto mismatch = compare_bytes(got, expected);
    if (mismatch) {
        fail(failure_of(FailureKind::message, where, *mismatch, got.size()));
    }
    return !mismatch;
}

void Verifier::wrong_length(std::uint64_t received, const Place& where) {
    count(0, true);
    Failure failure = failure_of(FailureKind::length, where, {}, 0);
    failure.received_length = received;
    fail(failure);
}

bool Verifier::check_end_state(std::span<const std::uint8_t> receive_half, const WriteBwRun& run,
                               unsigned qp) {
    count(receive_half.size(), false);
    const WriteBwImage image = write_bw_image(run, receive_half.size(), theirs_[qp], qp);
    const auto mismatch = compare_bytes(receive_half, image.bytes);
    if (!mismatch) {
        return true;
    }
    Failure failure =
        failure_of(FailureKind::end_state, Place{qp, 0, 0}, *mismatch, receive_half.size());
    failure.last_write = last_write_at(run, mismatch->offset);
    if (failure.last_write) {
        failure.last_write_size = run.sizes[failure.last_write->size_index];
    }
    fail(failure);
    return false;
}

VerifySummary Verifier::take_summary() {
    const VerifySummary since{total_.bytes - reported_.bytes, total_.messages - reported_.messages,
                              total_.buffers - reported_.buffers,
                              total_.failures - reported_.failures};
    reported_ = total_;
    return since;
}

std::string Verifier::failure() const {
    if (!first_) {
        return {};
    }
    const Failure& f = *first_;
    const std::uint64_t checked = total_.messages + total_.buffers;
    // Nothing right at all is more often two sides run differently than a broken transport.
    const std::string hint =
        checked > 1 && total_.failures == checked
            ? "; every one was wrong: do both sides have --verify and the same options?"
            : "";
    std::string out = strformat(
        "%s: %llu of %llu checked %s wrong; the first: QP %u, ", test_name(test_).c_str(),
        static_cast<unsigned long long>(total_.failures), static_cast<unsigned long long>(checked),
        total_.buffers != 0 ? "buffers" : "messages", f.where.qp);
    const auto bytes = [&] {
        return strformat("%llu wrong byte(s) of %llu, the first at offset %llu (expected 0x%02x, "
                         "found 0x%02x)",
                         static_cast<unsigned long long>(f.mismatch.bad_bytes),
                         static_cast<unsigned long long>(f.checked_bytes),
                         static_cast<unsigned long long>(f.mismatch.offset), f.mismatch.expected,
                         f.mismatch.found);
    };
    const std::string message = strformat("message #%llu of the %llu-byte run",
                                          static_cast<unsigned long long>(f.where.message),
                                          static_cast<unsigned long long>(f.where.size));
    switch (f.kind) {
    case FailureKind::message:
        return out + message + ": " + bytes() + hint;
    case FailureKind::length:
        return out + message +
               strformat(" arrived with %llu bytes",
                         static_cast<unsigned long long>(f.received_length)) +
               hint;
    case FailureKind::end_state:
        out += "the receive buffer after the run: " + bytes();
        if (f.last_write) {
            return out +
                   strformat(", a byte that message #%llu of the %llu-byte run wrote last",
                             static_cast<unsigned long long>(f.last_write->message),
                             static_cast<unsigned long long>(f.last_write_size)) +
                   hint;
        }
        return out + ", a byte no WRITE should have reached" + hint;
    }
    return out;
}

} // namespace prdma::perf
