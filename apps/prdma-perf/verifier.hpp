// --verify's record of a run: the streams each way (verify.hpp), what was checked and the first
// thing found wrong, kept as numbers so a check in the measured loop never allocates; the words
// come at the end.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "options.hpp"
#include "report.hpp"
#include "verify.hpp"
#include "write_bw_image.hpp"

namespace prdma::perf {

// Where a checked message was.
struct Place {
    unsigned qp = 0;
    std::uint64_t size = 0;    // the message size of the run
    std::uint64_t message = 0; // from 0, within the run of that size and QP
};

class Verifier {
public:
    Verifier(TestId test, std::optional<std::uint64_t> corrupt_at)
        : test_(test), corrupt_at_(corrupt_at) {}

    // The start PSNs of our QPs and of the peer's, from the key exchange.
    void set_psns(std::vector<std::uint32_t> mine, std::vector<std::uint32_t> theirs) {
        mine_ = std::move(mine);
        theirs_ = std::move(theirs);
    }
    // Data this side produces (it sends it, or serves it to READs and atomics), and data the
    // peer produces.
    [[nodiscard]] std::uint64_t outgoing(unsigned qp, unsigned size_index) const {
        return stream_seed(mine_[qp], qp, size_index);
    }
    [[nodiscard]] std::uint64_t incoming(unsigned qp, unsigned size_index) const {
        return stream_seed(theirs_[qp], qp, size_index);
    }
    [[nodiscard]] std::uint32_t peer_psn(unsigned qp) const { return theirs_[qp]; }
    [[nodiscard]] std::optional<std::uint64_t> corrupt_at() const { return corrupt_at_; }

    // A message to send; --verify-corrupt-at's gets one byte wrong.
    void fill(std::span<std::uint8_t> out, std::uint64_t seed, std::uint64_t message) const;

    // One received message (or a READ's data from `first_offset` of the served buffer). Counts
    // it; keeps the first mismatch. Returns whether it was right.
    bool check(std::span<const std::uint8_t> got, std::uint64_t seed, std::uint64_t message,
               std::uint64_t first_offset, const Place& where);
    bool check_bytes(std::span<const std::uint8_t> got, std::span<const std::uint8_t> expected,
                     const Place& where);
    // A receive that completed with `received` bytes instead of where.size.
    void wrong_length(std::uint64_t received, const Place& where);
    // write_bw's passive side, after the run: QP `qp`'s whole receive half against the image of
    // the client's WRITEs (write_bw_image.hpp).
    bool check_end_state(std::span<const std::uint8_t> receive_half, const WriteBwRun& run,
                         unsigned qp);

    [[nodiscard]] bool failed() const { return total_.failures != 0; }
    // What went wrong, for a person: the test, how many failed, and the first in detail.
    [[nodiscard]] std::string failure() const;
    // What was checked since the last call, for a result line.
    VerifySummary take_summary();

private:
    enum class FailureKind : std::uint8_t { message, length, end_state };
    struct Failure {
        FailureKind kind = FailureKind::message;
        Place where;
        Mismatch mismatch;
        std::uint64_t checked_bytes = 0;
        std::uint64_t received_length = 0;
        std::optional<LastWrite> last_write; // end_state: who should have written the byte
        std::uint64_t last_write_size = 0;
    };
    static Failure failure_of(FailureKind kind, const Place& where, const Mismatch& mismatch,
                              std::uint64_t checked_bytes);
    void count(std::uint64_t bytes, bool message);
    void fail(const Failure& failure);

    TestId test_;
    std::optional<std::uint64_t> corrupt_at_;
    std::vector<std::uint32_t> mine_;
    std::vector<std::uint32_t> theirs_;
    VerifySummary total_;
    VerifySummary reported_; // total_ at the last take_summary
    std::optional<Failure> first_;
};

} // namespace prdma::perf
