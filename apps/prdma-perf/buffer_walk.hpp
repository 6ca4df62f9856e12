// Where each message of a bandwidth run goes in the peer's buffer: perftest walks it in
// cache-line steps while a message fits twice in a page (cycle buffer), and starts again at 0
// when the next message would not fit; larger messages all go to offset 0. The runner walks it
// message by message; --verify's checks ask where any message went, and which message last
// wrote a byte.
#pragma once

#include <cstdint>
#include <optional>

namespace prdma::perf {

class BufferWalk {
public:
    // `size` sets the step; `length` is what each message occupies (8 for atomics).
    BufferWalk(std::uint64_t size, std::uint64_t length, std::uint64_t cycle_buffer,
               std::uint64_t cache_line)
        : length_(length), cycle_buffer_(cycle_buffer),
          step_(size <= cycle_buffer / 2 ? (size + cache_line - 1) / cache_line * cache_line : 0) {}
    // Every message at offset 0 (the latency tests).
    static BufferWalk in_place(std::uint64_t length) { return {length, length, 0, 1}; }

    [[nodiscard]] std::uint64_t next(std::uint64_t offset) const {
        if (step_ == 0) {
            return 0;
        }
        offset += step_;
        return offset + length_ > cycle_buffer_ ? 0 : offset;
    }
    // How many places the walk visits before it starts again.
    [[nodiscard]] std::uint64_t period() const {
        return step_ == 0 ? 1 : (cycle_buffer_ - length_) / step_ + 1;
    }
    [[nodiscard]] std::uint64_t offset_of(std::uint64_t message) const {
        return step_ == 0 ? 0 : message % period() * step_;
    }
    // The last of `messages` messages that covered byte `offset`, if any did.
    [[nodiscard]] std::optional<std::uint64_t> last_message_at(std::uint64_t offset,
                                                               std::uint64_t messages) const {
        const std::uint64_t place = step_ == 0 ? 0 : offset / step_;
        if (place >= period() || offset - place * step_ >= length_ || place >= messages) {
            return std::nullopt;
        }
        return place + (messages - 1 - place) / period() * period();
    }
    [[nodiscard]] std::uint64_t length() const { return length_; }

private:
    std::uint64_t length_;
    std::uint64_t cycle_buffer_;
    std::uint64_t step_;
};

} // namespace prdma::perf
