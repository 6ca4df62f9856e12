// --verify's payload pattern and its checker: one function gives the byte every message carries
// at every offset, so the sender fills with it and the receiver checks against it.
//
// A stream is one direction of one QP in one size of one run; its seed mixes the sending QP's
// random start PSN (both sides know it from the key exchange), the QP index and the size index.
// Byte `o` of message `m` is 2*H(seed, m / 256, o) + m * B(seed, o) (mod 256), H a hash, B an
// odd hash: its low bit is m's parity, so two messages an odd number apart (consecutive ones in
// particular) differ at every offset, and so do two fewer than 256 apart within one block of 256;
// any other two agree at an offset with probability 1/128. A buffer is poisoned with the
// complement of what should arrive, so a byte that nobody wrote never passes either.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

namespace prdma::perf {

// The stream of the QP whose start PSN is `psn`; the data a READ or atomic serves is the stream
// of the serving QP at size index 0.
std::uint64_t stream_seed(std::uint32_t psn, unsigned qp, unsigned size_index);

std::uint8_t pattern_byte(std::uint64_t seed, std::uint64_t message, std::uint64_t offset);

// `out` is bytes first_offset.. of the message.
void fill_pattern(std::span<std::uint8_t> out, std::uint64_t seed, std::uint64_t message,
                  std::uint64_t first_offset = 0);
// Every byte the complement of fill_pattern's: wrong wherever the message does not land.
void fill_complement(std::span<std::uint8_t> out, std::uint64_t seed, std::uint64_t message,
                     std::uint64_t first_offset = 0);

struct Mismatch {
    std::uint64_t offset = 0; // of the first wrong byte, from the start of what was checked
    std::uint8_t expected = 0;
    std::uint8_t found = 0;
    std::uint64_t bad_bytes = 0; // all of them
};

std::optional<Mismatch> check_pattern(std::span<const std::uint8_t> got, std::uint64_t seed,
                                      std::uint64_t message, std::uint64_t first_offset = 0);
// `got` and `expected` of the same size.
std::optional<Mismatch> compare_bytes(std::span<const std::uint8_t> got,
                                      std::span<const std::uint8_t> expected);

// The original value an atomic on the served word at `offset` returns after `earlier` atomics
// of the run reached the same word: the served pattern read as a host-order word, plus one per
// earlier FETCH_AND_ADD (perftest adds 1); CMP_AND_SWAP compares with 0 and swaps in 0, so it
// returns what was there.
std::uint64_t atomic_original(std::uint64_t seed, std::uint64_t offset, std::uint64_t earlier,
                              bool fetch_and_add);

} // namespace prdma::perf
