// What a write_bw server's receive half must hold once all of the client's WRITEs are done: the
// passive side sees no WRITE arrive, so --verify checks the end state. Every byte a WRITE covered
// holds the pattern of the last WRITE that covered it (the sizes run in order, the messages of a
// size walk the buffer as the runner does); every other byte still holds the fill the server
// put there before the run.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace prdma::perf {

struct WriteBwRun {
    std::span<const std::uint64_t> sizes; // in the order they ran
    std::uint64_t iterations = 0;         // per QP and size
    std::uint64_t cycle_buffer = 4096;
    std::uint64_t cache_line = 64;
};

struct WriteBwImage {
    std::vector<std::uint8_t> bytes;
    std::vector<bool> written; // false: no WRITE should have reached the byte
};

// The image of a receive half of `length` bytes written by QP `qp` of the client whose start PSN
// is `psn`.
WriteBwImage write_bw_image(const WriteBwRun& run, std::uint64_t length, std::uint32_t psn,
                            unsigned qp);

struct LastWrite {
    unsigned size_index = 0;
    std::uint64_t message = 0;
};
std::optional<LastWrite> last_write_at(const WriteBwRun& run, std::uint64_t offset);

} // namespace prdma::perf
