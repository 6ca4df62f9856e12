#include <array>
#include <cerrno>
#include <cstring>
#include <sys/random.h>
#include <utility>

#include <prdma/format.hpp>
#include <prdma/mem/memory_key.hpp>

namespace prdma::mem {

std::string_view key_check_name(KeyCheck check) {
    switch (check) {
    case KeyCheck::ok:
        return "ok";
    case KeyCheck::bad_index:
        return "bad_index";
    case KeyCheck::free_entry:
        return "free_entry";
    case KeyCheck::stale_variant:
        return "stale_variant";
    case KeyCheck::invalidated:
        return "invalidated";
    case KeyCheck::wrong_pd:
        return "wrong_pd";
    case KeyCheck::lkey_only:
        return "lkey_only";
    case KeyCheck::access_denied:
        return "access_denied";
    case KeyCheck::out_of_bounds:
        return "out_of_bounds";
    case KeyCheck::wrong_connection:
        return "wrong_connection";
    }
    return "unknown";
}

KeyTable::KeyTable(std::uint32_t capacity, std::uint64_t variant_secret, std::uint64_t order_secret)
    : secret_(variant_secret), entries_(capacity) {
    free_.reserve(capacity - 1);
    for (std::uint32_t index = capacity - 1; index >= 1; --index) {
        free_.push_back(index);
    }
    // Fisher-Yates over the free stack, so the first index handed out is anyone's guess too.
    std::uint64_t state = order_secret;
    for (std::size_t i = free_.size(); i > 1; --i) {
        state += 0x9e3779b97f4a7c15ULL;
        std::swap(free_[i - 1], free_[mix64(state) % i]);
    }
}

Result<KeyTable> KeyTable::create(std::uint32_t capacity) {
    if (capacity < 2 || capacity - 1 > max_key_index) {
        return Error(
            StatusCode::invalid_parameter,
            strformat("key table capacity %u outside [2, %u]", capacity, max_key_index + 1));
    }
    std::array<std::uint64_t, 2> secrets{};
    ssize_t got = 0;
    do {
        got = getrandom(secrets.data(), sizeof secrets, 0);
    } while (got < 0 && errno == EINTR);
    if (got != static_cast<ssize_t>(sizeof secrets)) {
        return Error(StatusCode::no_resources,
                     strformat("no random bytes for memory keys: %s", std::strerror(errno)));
    }
    return KeyTable(capacity, secrets[0], secrets[1]);
}

void KeyTable::renew(std::uint32_t index, KeyEntry& e) const noexcept {
    const KeyEntry old = e;
    e = KeyEntry{};
    e.variant = old.variant;
    e.lives = old.lives;
    e.previous = old.previous;
    roll_variant(index, e);
}

Result<std::uint32_t> KeyTable::allocate() {
    if (free_.empty()) {
        return Error(StatusCode::no_resources,
                     strformat("all %u memory keys are in use", capacity() - 1));
    }
    const std::uint32_t index = free_.back();
    free_.pop_back();
    KeyEntry& e = entries_[index];
    renew(index, e);
    e.state = KeyState::invalid;
    return index;
}

void KeyTable::release(std::uint32_t index) noexcept {
    if (index == 0 || index >= entries_.size() || entries_[index].state == KeyState::free) {
        return;
    }
    renew(index, entries_[index]);
    free_.push_back(index);
}

} // namespace prdma::mem
