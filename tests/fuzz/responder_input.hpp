// The responder harness's input format: one configuration byte, then frames, each as
//
//   flags (1 byte) | length (2 bytes, little-endian) | length bytes of frame
//
// The flags are frame_fixup.hpp's FixupFlags (bits 0-4) and frame_on_second_queue (bit 5).
// A last chunk shorter than its length takes what is left. The configuration byte:
//
//   bits 0-1  PSN window: the QP's rq_psn and sq_psn, from psn_bases below
//   bit  2    the QP has requester work outstanding (a READ, an atomic, a WRITE, a SEND), so
//             ACKs and responses reach the completer
//   bit  3    receives are posted (else every SEND meets an empty receive queue)
//   bits 4-5  path MTU, from path_mtus below
//   bit  6    the device is polled after every frame (else once all are queued)
//
// Pure: no DPDK, so the format is the same for the harness and the seed generator.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

namespace prdma::fuzz {

inline constexpr std::size_t max_input_frames = 64;
// The frame arrives on the port's second rx queue, queue group 1's; the QP is group 0's, so the
// frame takes the steering hand-over (and skips the checks the receiving group already did).
inline constexpr std::uint8_t frame_on_second_queue = 1U << 5;
inline constexpr std::size_t max_frame_length = 4096;

inline constexpr std::array<std::uint32_t, 4> psn_bases = {1000, 0xfffffe, 0, 0x800000};
// IB path MTU in bytes; 1024 twice because that is what real peers mostly use.
inline constexpr std::array<std::uint32_t, 4> path_mtus = {1024, 256, 512, 1024};

struct InputFrame {
    std::uint8_t flags = 0;
    std::span<const std::uint8_t> bytes;
};

struct ResponderInput {
    std::uint32_t psn_base = psn_bases[0];
    bool requester_work = false;
    bool receives = false;
    std::uint32_t path_mtu = path_mtus[0];
    bool poll_each_frame = false;
    std::array<InputFrame, max_input_frames> frames{};
    std::size_t frame_count = 0;
};

// Splits `data` into the configuration and at most max_input_frames frames (longer ones are cut
// to max_frame_length). False when `data` is empty.
inline bool parse_responder_input(std::span<const std::uint8_t> data, ResponderInput& out) {
    if (data.empty()) {
        return false;
    }
    const std::uint8_t config = data[0];
    out.psn_base = psn_bases[config & 3U];
    out.requester_work = (config & 4U) != 0;
    out.receives = (config & 8U) != 0;
    out.path_mtu = path_mtus[(config >> 4) & 3U];
    out.poll_each_frame = (config & 64U) != 0;
    out.frame_count = 0;
    std::size_t at = 1;
    while (at + 3 <= data.size() && out.frame_count < max_input_frames) {
        const std::uint8_t flags = data[at];
        const std::size_t length = data[at + 1] | (std::size_t{data[at + 2]} << 8);
        at += 3;
        const std::size_t take = std::min({length, data.size() - at, max_frame_length});
        out.frames[out.frame_count++] = {flags, data.subspan(at, take)};
        at += std::min(length, data.size() - at);
    }
    return true;
}

} // namespace prdma::fuzz
