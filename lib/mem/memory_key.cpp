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

KeyTable::KeyTable(std::uint32_t capacity) : entries_(capacity) {
    free_.reserve(capacity - 1);
    // Lowest indices on top of the stack: keys come out small and predictable.
    for (std::uint32_t index = capacity - 1; index >= 1; --index) {
        free_.push_back(index);
    }
}

Result<KeyTable> KeyTable::create(std::uint32_t capacity) {
    if (capacity < 2 || capacity - 1 > max_key_index) {
        return Error(
            StatusCode::invalid_parameter,
            strformat("key table capacity %u outside [2, %u]", capacity, max_key_index + 1));
    }
    return KeyTable(capacity);
}

Result<std::uint32_t> KeyTable::allocate() {
    if (free_.empty()) {
        return Error(StatusCode::no_resources,
                     strformat("all %u memory keys are in use", capacity() - 1));
    }
    const std::uint32_t index = free_.back();
    free_.pop_back();
    KeyEntry& e = entries_[index];
    const std::uint8_t variant = e.variant;
    e = KeyEntry{};
    e.variant = static_cast<std::uint8_t>(variant + 1);
    e.state = KeyState::invalid;
    return index;
}

void KeyTable::release(std::uint32_t index) noexcept {
    if (index == 0 || index >= entries_.size() || entries_[index].state == KeyState::free) {
        return;
    }
    KeyEntry& e = entries_[index];
    const std::uint8_t variant = e.variant;
    e = KeyEntry{};
    e.variant = static_cast<std::uint8_t>(variant + 1);
    free_.push_back(index);
}

} // namespace prdma::mem
