// The key table a device checks every local SGE and every incoming RETH/AtomicETH against (the
// keys themselves, plain values, are key.hpp's). Driver SDK: installed with -Ddriver_sdk=true.
//
// Every registration, re-registration, fast-register and invalidate moves the variant on, so a
// key kept from an earlier life of the same index fails as stale_variant. The new variant is drawn
// from a secret the table takes from the kernel at creation (as Linux rxe draws each key byte at
// random), and the order in which indices are handed out is shuffled with a second secret: an
// endpoint that was never given a key cannot guess one from the first key of a process, nor a
// region's successor from its predecessor. A FAST_REG's variant is the consumer's (ib_inc_rkey), so
// LOCAL_INV moves a fast-register region's variant on by one, as before: the consumer's next_key
// of the invalidated key then never repeats the variant it replaces.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include <prdma/compiler.hpp>
#include <prdma/mem/access.hpp>
#include <prdma/mem/key.hpp>
#include <prdma/mem/translation_table.hpp>
#include <prdma/status.hpp>

namespace prdma::mem {

enum class KeyState : std::uint8_t {
    free,    // index not allocated to any region
    valid,   // registered: lookups may succeed
    invalid, // allocated but not usable (fast-register MR before registration, after invalidate)
};

// One key's state, checked on every access: kept to one cache line.
struct PRDMA_CACHE_ALIGNED KeyEntry {
    std::uint8_t variant = 0;
    KeyState state = KeyState::free;
    bool any_pd = false;       // DMA MR shared by every PD (seed 004)
    bool lkey_only = false;    // DMA MR: local access only
    bool identity = false;     // DMA MR: address == CPU address, bounded by start/length
    std::uint8_t lives = 0;    // variants drawn at this index (mod 256): the next is the lives-th
    std::uint8_t previous = 0; // the variant before this one: no draw gives it back at once
    AccessFlags access = access_none;
    std::uint32_t pd = 0;
    ConnectionId bound_connection = any_connection;
    std::uint64_t start = 0; // region address of the first byte
    std::uint64_t length = 0;
    const TranslationTable* table = nullptr; // null for identity regions
    void* owner = nullptr;                   // the MemoryRegion, for the control path
};
static_assert(sizeof(KeyEntry) == PRDMA_CACHE_LINE_SIZE);

// What an access needs: the key, who asks (PD, the queue pair's connection), what and where.
struct KeyAccess {
    MemoryKey key;
    std::uint32_t pd;
    ConnectionId connection;
    AccessFlags
        access; // access_local_read / access_local_write for lkeys, access_remote_* for rkeys
    std::uint64_t addr;
    std::uint64_t length;
};

class KeyTable {
public:
    // Index 0 is never handed out, so key 0 (a zeroed WR) always fails.
    static Result<KeyTable> create(std::uint32_t capacity);

    KeyTable(KeyTable&&) noexcept = default;
    KeyTable& operator=(KeyTable&&) noexcept = default;
    KeyTable(const KeyTable&) = delete;
    KeyTable& operator=(const KeyTable&) = delete;
    ~KeyTable() = default;

    // Takes a free index (O(1)); its entry is `invalid` with the variant moved on.
    Result<std::uint32_t> allocate();
    // Returns an index; its entry becomes `free` and its variant moves on.
    void release(std::uint32_t index) noexcept;

    [[nodiscard]] KeyEntry& entry(std::uint32_t index) noexcept { return entries_[index]; }
    [[nodiscard]] const KeyEntry& entry(std::uint32_t index) const noexcept {
        return entries_[index];
    }
    [[nodiscard]] MemoryKey key_of(std::uint32_t index) const noexcept {
        return make_key(index, entries_[index].variant);
    }
    [[nodiscard]] std::uint32_t capacity() const noexcept {
        return static_cast<std::uint32_t>(entries_.size());
    }
    [[nodiscard]] std::uint32_t in_use() const noexcept {
        return capacity() - 1 - static_cast<std::uint32_t>(free_.size());
    }

    // Makes the entry valid under a new variant and returns the new key.
    MemoryKey validate(std::uint32_t index) noexcept {
        KeyEntry& e = entries_[index];
        roll_variant(index, e);
        e.state = KeyState::valid;
        return make_key(index, e.variant);
    }
    // Fast-register: the consumer chose the variant (seed 001). The draws go on from it, so the
    // next 255 differ from it too.
    void set_variant(std::uint32_t index, std::uint8_t variant) noexcept {
        KeyEntry& e = entries_[index];
        e.previous = e.variant;
        e.variant = variant;
        e.lives = unpermute(index, variant);
    }
    // Makes the entry invalid under a new drawn variant (a deregistration's last reference).
    void retire(std::uint32_t index) noexcept {
        KeyEntry& e = entries_[index];
        roll_variant(index, e);
        e.state = KeyState::invalid;
    }
    // Makes a valid entry invalid and moves the variant on by one (LOCAL_INV, SEND_WITH_INV): see
    // the top of this file.
    void invalidate(std::uint32_t index) noexcept {
        set_variant(index, static_cast<std::uint8_t>(entries_[index].variant + 1));
        entries_[index].state = KeyState::invalid;
    }

    // The check every SGE, RETH and AtomicETH goes through. Inline: it is the fast path.
    KeyCheck check(const KeyAccess& request, const KeyEntry** found) const noexcept {
        const std::uint32_t index = key_index(request.key);
        if (PRDMA_UNLIKELY(index >= entries_.size())) {
            return KeyCheck::bad_index;
        }
        const KeyEntry& e = entries_[index];
        if (PRDMA_UNLIKELY(e.state == KeyState::free)) {
            return KeyCheck::free_entry;
        }
        if (PRDMA_UNLIKELY(e.variant != key_variant(request.key))) {
            return KeyCheck::stale_variant;
        }
        if (PRDMA_UNLIKELY(e.state != KeyState::valid)) {
            return KeyCheck::invalidated;
        }
        if (PRDMA_UNLIKELY(e.pd != request.pd && !e.any_pd)) {
            return KeyCheck::wrong_pd;
        }
        if (PRDMA_UNLIKELY(request.access.any_of(access_remote_any) && e.lkey_only)) {
            return KeyCheck::lkey_only;
        }
        // Local use too (seed 002: only that connection, only while it is established). A QP
        // without a connection asks with no_connection, which no bound region carries.
        if (PRDMA_UNLIKELY(e.bound_connection != any_connection &&
                           e.bound_connection != request.connection)) {
            return KeyCheck::wrong_connection;
        }
        if (PRDMA_UNLIKELY(!(e.access | access_local_read).all_of(request.access))) {
            return KeyCheck::access_denied;
        }
        // addr itself must be inside even for a zero-length access: host(addr) follows.
        if (PRDMA_UNLIKELY(request.addr < e.start || request.addr - e.start >= e.length ||
                           request.length > e.length - (request.addr - e.start))) {
            return KeyCheck::out_of_bounds;
        }
        *found = &e;
        return KeyCheck::ok;
    }

    // CPU address of a checked access.
    static std::uint8_t* host(const KeyEntry& e, std::uint64_t addr) noexcept {
        if (e.identity) {
            return reinterpret_cast<std::uint8_t*>(addr);
        }
        return e.table->host(addr);
    }

private:
    KeyTable(std::uint32_t capacity, std::uint64_t variant_secret, std::uint64_t order_secret);

    // The n-th variant of an index is a secret permutation of n (mod 256), a Feistel network keyed
    // by the secret and the index: draws do not repeat within 255 of one another, as counting up
    // did, never give back the variant before the current one, and neither a key nor its
    // predecessor tells the next. It keeps no state beside the entry's, so
    // the control path and the lcore that invalidates on the fast path share no generator.
    void roll_variant(std::uint32_t index, KeyEntry& e) const noexcept {
        std::uint8_t next = 0;
        do { // a re-based sequence may hold the previous variant ahead: at most one draw skipped
            ++e.lives;
            next = permute(index, e.lives);
        } while (next == e.previous);
        e.previous = e.variant;
        e.variant = next;
    }
    // Round r: (high, low) -> (low, high ^ F_r(low)), four rounds over two nibbles.
    std::uint8_t permute(std::uint32_t index, std::uint8_t n) const noexcept {
        const std::uint64_t key = mix64(secret_ ^ index);
        std::uint8_t high = n >> 4;
        std::uint8_t low = n & 0xfU;
        for (std::uint64_t round = 0; round < 4; ++round) {
            const auto next_low = static_cast<std::uint8_t>(high ^ round_function(key, round, low));
            high = low;
            low = next_low;
        }
        return static_cast<std::uint8_t>((high << 4) | low);
    }
    // The rounds undone in reverse: which n gives this variant.
    std::uint8_t unpermute(std::uint32_t index, std::uint8_t variant) const noexcept {
        const std::uint64_t key = mix64(secret_ ^ index);
        std::uint8_t high = variant >> 4;
        std::uint8_t low = variant & 0xfU;
        for (std::uint64_t round = 4; round-- > 0;) {
            const auto prev_high =
                static_cast<std::uint8_t>(low ^ round_function(key, round, high));
            low = high;
            high = prev_high;
        }
        return static_cast<std::uint8_t>((high << 4) | low);
    }
    static std::uint8_t round_function(std::uint64_t key, std::uint64_t round,
                                       std::uint8_t nibble) noexcept {
        return static_cast<std::uint8_t>(mix64(key + (round << 4) + nibble) & 0xfU);
    }
    // Clears the entry for its next life, the variant moved on.
    void renew(std::uint32_t index, KeyEntry& e) const noexcept;
    static std::uint64_t mix64(std::uint64_t x) noexcept { // splitmix64's finaliser
        x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
        x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
        return x ^ (x >> 31);
    }

    std::uint64_t secret_ = 0; // the variants' alone: the index order reveals nothing of it
    std::vector<KeyEntry> entries_;
    std::vector<std::uint32_t> free_; // stack of free indices
};

} // namespace prdma::mem
