#include "write_bw_image.hpp"

#include <algorithm>

#include "buffer_walk.hpp"
#include "verify.hpp"

namespace prdma::perf {

namespace {

// The stream of the bytes no WRITE reaches: no size index reaches it.
constexpr unsigned untouched_stream = 0xffff;

} // namespace

WriteBwImage write_bw_image(const WriteBwRun& run, std::uint64_t length, std::uint32_t psn,
                            unsigned qp) {
    WriteBwImage image;
    image.bytes.resize(length);
    image.written.assign(length, false);
    fill_pattern(image.bytes, stream_seed(psn, qp, untouched_stream), 0);
    for (unsigned index = 0; index < run.sizes.size(); ++index) {
        const std::uint64_t size = run.sizes[index];
        const BufferWalk walk(size, size, run.cycle_buffer, run.cache_line);
        const std::uint64_t seed = stream_seed(psn, qp, index);
        // Each place is rewritten every period: only the last period's messages remain.
        const std::uint64_t first =
            run.iterations > walk.period() ? run.iterations - walk.period() : 0;
        for (std::uint64_t message = first; message < run.iterations; ++message) {
            const std::uint64_t offset = walk.offset_of(message);
            const std::uint64_t end = std::min(offset + size, length);
            if (offset >= end) {
                continue;
            }
            fill_pattern(std::span(image.bytes).subspan(offset, end - offset), seed, message);
            std::fill(image.written.begin() + static_cast<std::ptrdiff_t>(offset),
                      image.written.begin() + static_cast<std::ptrdiff_t>(end), true);
        }
    }
    return image;
}

std::optional<LastWrite> last_write_at(const WriteBwRun& run, std::uint64_t offset) {
    for (auto index = static_cast<unsigned>(run.sizes.size()); index-- > 0;) {
        const std::uint64_t size = run.sizes[index];
        const BufferWalk walk(size, size, run.cycle_buffer, run.cache_line);
        if (auto message = walk.last_message_at(offset, run.iterations)) {
            return LastWrite{index, *message};
        }
    }
    return std::nullopt;
}

} // namespace prdma::perf
