// What ARP (IPv4) and neighbour discovery (IPv6) share: a table of learned IP -> MAC bindings and
// the resolutions in flight with their retry timers. The protocols differ only in their frames
// (arp.hpp, neighbour_discovery.hpp); the bookkeeping, keyed by each family's address, is here.
//
// Nothing allocates after construction, and time is TSC cycles passed in by the caller.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

namespace prdma::swroce {

using MacAddress = std::array<std::uint8_t, 6>;

inline constexpr MacAddress broadcast_mac = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff};

// Group bit set: multicast, which includes broadcast. Such an address never owns an IP.
constexpr bool is_multicast_mac(const MacAddress& mac) {
    return (mac[0] & 0x01U) != 0;
}
constexpr bool is_zero_mac(const MacAddress& mac) {
    return mac == MacAddress{};
}

// A frame a resolver wants sent; the caller copies view() into an mbuf.
template <std::size_t Capacity>
struct ControlFrame {
    std::array<std::uint8_t, Capacity> bytes{};
    std::size_t length = 0;
    [[nodiscard]] std::span<const std::uint8_t> view() const noexcept {
        return {bytes.data(), length};
    }
};

template <class Address>
struct BasicNeighbourEntry {
    Address ip{};
    MacAddress mac{};
    std::uint64_t updated_at = 0; // TSC cycles of the last message that confirmed it
};

enum class NeighbourUpdate : std::uint8_t {
    updated,           // the IP was known; its MAC and time were refreshed
    inserted,          // a free slot took it
    inserted_evicting, // the table was full: the least recently confirmed entry made room
};

// IP -> MAC, fixed capacity. All memory is taken at construction, so learning from the wire
// never allocates; when full, the entry confirmed longest ago is replaced. Lookups scan: 256
// entries are a few KiB, and the table serves the control path (QP connect, address handles),
// not the per-packet path, which keeps the peer's MAC in the QP or AH.
template <class Address>
class BasicNeighbourTable {
public:
    using Entry = BasicNeighbourEntry<Address>;
    static constexpr std::size_t default_capacity = 256;

    explicit BasicNeighbourTable(std::size_t capacity = default_capacity)
        : slots_(std::max<std::size_t>(capacity, 1)) {}

    [[nodiscard]] const Entry* find(const Address& ip) const noexcept {
        for (std::size_t i = 0; i < size_; ++i) {
            if (slots_[i].ip == ip) {
                return &slots_[i];
            }
        }
        return nullptr;
    }
    // The MAC of `ip` unless it is missing or stale (confirmed more than max_age cycles ago).
    [[nodiscard]] std::optional<MacAddress> lookup(const Address& ip, std::uint64_t now,
                                                   std::uint64_t max_age) const noexcept {
        const Entry* entry = find(ip);
        if (entry == nullptr || is_stale(*entry, now, max_age)) {
            return std::nullopt;
        }
        return entry->mac;
    }
    // RFC 826's merge step: refreshes an entry that exists, adds nothing. True when it existed.
    bool refresh(const Address& ip, const MacAddress& mac, std::uint64_t now) noexcept {
        Entry* entry = find_mutable(ip);
        if (entry == nullptr) {
            return false;
        }
        entry->mac = mac;
        entry->updated_at = now;
        return true;
    }
    NeighbourUpdate insert(const Address& ip, const MacAddress& mac, std::uint64_t now) noexcept {
        if (refresh(ip, mac, now)) {
            return NeighbourUpdate::updated;
        }
        if (size_ < slots_.size()) {
            slots_[size_++] = Entry{ip, mac, now};
            return NeighbourUpdate::inserted;
        }
        // Full: the entry heard from longest ago is the one most likely gone.
        auto oldest =
            std::min_element(slots_.begin(), slots_.end(), [](const Entry& a, const Entry& b) {
                return a.updated_at < b.updated_at;
            });
        *oldest = Entry{ip, mac, now};
        return NeighbourUpdate::inserted_evicting;
    }
    bool erase(const Address& ip) noexcept {
        Entry* entry = find_mutable(ip);
        if (entry == nullptr) {
            return false;
        }
        // Order carries no meaning, so the last entry fills the hole.
        *entry = slots_[--size_];
        return true;
    }
    // Drops every stale entry; returns how many went.
    std::size_t expire(std::uint64_t now, std::uint64_t max_age) noexcept {
        std::size_t removed = 0;
        for (std::size_t i = 0; i < size_;) {
            if (is_stale(slots_[i], now, max_age)) {
                slots_[i] = slots_[--size_];
                ++removed;
            } else {
                ++i;
            }
        }
        return removed;
    }

    [[nodiscard]] std::size_t size() const noexcept { return size_; }
    [[nodiscard]] std::size_t capacity() const noexcept { return slots_.size(); }
    [[nodiscard]] std::span<const Entry> entries() const noexcept { return {slots_.data(), size_}; }

    // A clock that went backwards (a caller mixing TSCs) reads as age 0, not as ancient.
    static bool is_stale(const Entry& entry, std::uint64_t now, std::uint64_t max_age) noexcept {
        return now > entry.updated_at && now - entry.updated_at > max_age;
    }

private:
    Entry* find_mutable(const Address& ip) noexcept {
        return const_cast<Entry*>(std::as_const(*this).find(ip));
    }

    std::vector<Entry> slots_; // sized once; [0, size_) are in use
    std::size_t size_ = 0;
};

// What asking a resolver for an address did.
enum class NeighbourRequestResult : std::uint8_t {
    send,           // a request is in `frame`: send it now
    already_known,  // a fresh table entry answers it: use lookup()
    pending,        // a resolution is already in flight; poll() retransmits it
    no_resources,   // max_pending resolutions are in flight
    invalid_target, // not a unicast address a neighbour can own, or our own
};
std::string_view neighbour_request_result_name(NeighbourRequestResult result);

// What a poll of the resolutions in flight produced.
struct ProbePollResult {
    std::size_t frames = 0; // retransmitted requests written to the caller's frames
    std::size_t failed = 0; // addresses written to the caller's failed list
};

// Resolutions in flight: the address asked for, how often, and when the last ask counts as
// unanswered. Fixed capacity, taken at construction.
template <class Address>
class PendingProbes {
public:
    explicit PendingProbes(std::size_t capacity) : slots_(capacity) {}

    [[nodiscard]] bool contains(const Address& ip) const noexcept { return find(ip) != size_; }
    [[nodiscard]] bool full() const noexcept { return size_ == slots_.size(); }
    [[nodiscard]] std::size_t size() const noexcept { return size_; }

    // A resolver's request for `ip`, not known to its table: starts a probe whose first ask the
    // caller sends now (send), or says why not.
    NeighbourRequestResult start(const Address& ip, bool known, std::uint64_t deadline) noexcept {
        if (known) {
            return NeighbourRequestResult::already_known;
        }
        if (contains(ip)) {
            return NeighbourRequestResult::pending;
        }
        if (full()) {
            return NeighbourRequestResult::no_resources;
        }
        slots_[size_++] = Probe{ip, 1, deadline};
        return NeighbourRequestResult::send;
    }
    bool remove(const Address& ip) noexcept {
        const std::size_t index = find(ip);
        if (index == size_) {
            return false;
        }
        slots_[index] = slots_[--size_];
        return true;
    }

    // Asks again (ask(address, frame index)) for each probe whose timer ran out, up to
    // `max_frames`, and gives up on those asked max_tries times. When the frames or `failed`
    // are full the rest wait for the next poll, so nothing is lost.
    template <class Ask>
    ProbePollResult poll(std::uint64_t now, unsigned max_tries, std::uint64_t retry_cycles,
                         std::size_t max_frames, Ask&& ask, std::span<Address> failed) noexcept {
        ProbePollResult result;
        for (std::size_t i = 0; i < size_;) {
            Probe& probe = slots_[i];
            if (now < probe.deadline) {
                ++i;
                continue;
            }
            if (probe.tries >= max_tries) {
                if (result.failed == failed.size()) {
                    ++i; // reported by a later poll with room
                    continue;
                }
                failed[result.failed++] = probe.ip;
                slots_[i] = slots_[--size_]; // the last probe moved into i: look at i again
                continue;
            }
            if (result.frames < max_frames) {
                ask(probe.ip, result.frames++);
                ++probe.tries;
                probe.deadline = now + retry_cycles;
            }
            ++i;
        }
        return result;
    }

private:
    struct Probe {
        Address ip{};
        unsigned tries = 0;         // asks sent so far
        std::uint64_t deadline = 0; // when the last one counts as unanswered
    };

    [[nodiscard]] std::size_t find(const Address& ip) const noexcept {
        for (std::size_t i = 0; i < size_; ++i) {
            if (slots_[i].ip == ip) {
                return i;
            }
        }
        return size_;
    }

    std::vector<Probe> slots_; // sized once; [0, size_) are in use
    std::size_t size_ = 0;
};

// tsc_hz * ms / 1000 without overflowing for any 32-bit millisecond count.
constexpr std::uint64_t ms_to_cycles(std::uint64_t tsc_hz, std::uint32_t ms) {
    return (tsc_hz / 1000) * ms + (tsc_hz % 1000) * ms / 1000;
}

} // namespace prdma::swroce
