// Which responses of a READ arrived past the first one still missing. Go-back-N would drop them
// and ask for everything from the gap on again, so one lost response of a 1 MiB READ cost half
// the READ on average; kept here, a loss costs the missing packets alone (the completer asks for
// them by themselves). The map covers a bounded window after the first missing response: one
// further ahead is not kept, and is asked for again once the window has moved on. The window
// outlasts a repair's round trip behind the responses queued on the path: with 256 packets, a
// 1 MiB READ at 1 % loss dropped two in five responses past a gap (bench/loss read_bw).
#pragma once

#include <array>
#include <bit>
#include <cstdint>

namespace prdma::swroce {

class ResponseMap {
public:
    static constexpr std::uint32_t capacity = 1024; // packets after the first missing one

    // Response `ahead` packets after the first missing one (1 <= ahead < capacity) arrived.
    [[nodiscard]] bool holds(std::uint32_t ahead) const noexcept {
        return ((words_[ahead / 64] >> (ahead % 64)) & 1U) != 0;
    }
    void mark(std::uint32_t ahead) noexcept {
        words_[ahead / 64] |= std::uint64_t{1} << (ahead % 64);
        ++marked_;
    }

    // The first missing response arrived: how many responses are now in order (it, and those
    // after it that had arrived), the map moved past them.
    [[nodiscard]] std::uint32_t fill_first() noexcept {
        if (marked_ == 0) {
            return 1; // in order, nothing kept: the common case costs no scan
        }
        words_[0] |= 1U;
        std::uint32_t run = 0;
        for (const std::uint64_t word : words_) {
            const auto ones = static_cast<std::uint32_t>(std::countr_one(word));
            run += ones;
            if (ones < 64) {
                break;
            }
        }
        shift(run);
        marked_ -= run - 1;
        return run;
    }

    // How many responses from the first missing one on are missing before the next that arrived;
    // 0 when none after it arrived (everything from it on is missing, as far as we know).
    [[nodiscard]] std::uint32_t first_hole() const noexcept {
        if (marked_ == 0) {
            return 0;
        }
        for (std::uint32_t i = 0; i < words_.size(); ++i) {
            if (words_[i] != 0) {
                return i * 64 + static_cast<std::uint32_t>(std::countr_zero(words_[i]));
            }
        }
        return 0;
    }

    void clear() noexcept {
        if (marked_ != 0) {
            words_ = {};
            marked_ = 0;
        }
    }

private:
    void shift(std::uint32_t count) noexcept {
        const std::uint32_t whole = count / 64;
        const std::uint32_t bits = count % 64;
        for (std::uint32_t i = 0; i < words_.size(); ++i) {
            const std::uint32_t from = i + whole;
            const std::uint64_t low = from < words_.size() ? words_[from] : 0;
            const std::uint64_t high = from + 1 < words_.size() ? words_[from + 1] : 0;
            words_[i] = bits == 0 ? low : (low >> bits) | (high << (64 - bits));
        }
    }

    std::array<std::uint64_t, capacity / 64> words_{};
    std::uint32_t marked_ = 0; // bits set in words_
};

// A QP's READs and atomics in flight take maps by the order they were sent (SendWqe::read_seq):
// the oldest this many have one each, any after them none (responses past a gap of theirs are
// asked for again). Kept apart from the send queue, whose slots are mostly not READs.
inline constexpr std::uint32_t response_map_slots = 16;

} // namespace prdma::swroce
