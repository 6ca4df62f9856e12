// A small reader (and writer, to test the reader) for classic libpcap files, for the RoCE tests:
// both byte orders, microsecond and nanosecond timestamps. No libpcap; pcapng is not read.
//
// File header (24 bytes): magic, version major/minor (2.4), thiszone, sigfigs, snaplen,
// linktype. Record header (16 bytes): seconds, microseconds or nanoseconds, captured length,
// original length. Every field is in the byte order the magic shows.
#pragma once

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <span>
#include <string>
#include <vector>

namespace prdma::roce::pcap {

inline constexpr std::uint32_t magic_microseconds = 0xa1b2c3d4;
inline constexpr std::uint32_t magic_nanoseconds = 0xa1b23c4d;
inline constexpr std::uint32_t linktype_ethernet = 1;
inline constexpr std::size_t file_header_size = 24;
inline constexpr std::size_t record_header_size = 16;
// Larger than any snaplen a sane capture uses; a record claiming more is corrupt.
inline constexpr std::uint32_t max_record_length = 256 * 1024;

struct Record {
    std::uint32_t seconds = 0;
    std::uint32_t nanoseconds = 0; // microsecond files are scaled up
    std::uint32_t original_length = 0;
    std::vector<std::uint8_t> data;

    friend bool operator==(const Record&, const Record&) = default;
};

struct File {
    bool big_endian = false;
    bool nanosecond = false;
    std::uint16_t version_major = 2;
    std::uint16_t version_minor = 4;
    std::uint32_t snaplen = 65535;
    std::uint32_t linktype = linktype_ethernet;
    std::vector<Record> records;
};

struct ReadResult {
    std::string error; // empty when ok
    File file;
    [[nodiscard]] bool ok() const { return error.empty(); }
};

namespace detail {

inline std::uint32_t load32(const std::uint8_t* p, bool big_endian) {
    if (big_endian) {
        return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) |
               (std::uint32_t{p[2]} << 8) | p[3];
    }
    return (std::uint32_t{p[3]} << 24) | (std::uint32_t{p[2]} << 16) | (std::uint32_t{p[1]} << 8) |
           p[0];
}
inline std::uint16_t load16(const std::uint8_t* p, bool big_endian) {
    return big_endian ? static_cast<std::uint16_t>((p[0] << 8) | p[1])
                      : static_cast<std::uint16_t>((p[1] << 8) | p[0]);
}
inline void put32(std::vector<std::uint8_t>& out, std::uint32_t v, bool big_endian) {
    for (int i = 0; i < 4; ++i) {
        const int shift = big_endian ? 24 - 8 * i : 8 * i;
        out.push_back(static_cast<std::uint8_t>(v >> shift));
    }
}
inline void put16(std::vector<std::uint8_t>& out, std::uint16_t v, bool big_endian) {
    out.push_back(static_cast<std::uint8_t>(big_endian ? v >> 8 : v));
    out.push_back(static_cast<std::uint8_t>(big_endian ? v : v >> 8));
}

} // namespace detail

inline ReadResult parse(std::span<const std::uint8_t> bytes) {
    ReadResult result;
    if (bytes.size() < file_header_size) {
        result.error = "shorter than the 24-byte pcap file header";
        return result;
    }
    File& file = result.file;
    const std::uint32_t magic_le = detail::load32(bytes.data(), false);
    const std::uint32_t magic_be = detail::load32(bytes.data(), true);
    if (magic_le == magic_microseconds || magic_le == magic_nanoseconds) {
        file.big_endian = false;
        file.nanosecond = magic_le == magic_nanoseconds;
    } else if (magic_be == magic_microseconds || magic_be == magic_nanoseconds) {
        file.big_endian = true;
        file.nanosecond = magic_be == magic_nanoseconds;
    } else {
        result.error = "not a classic pcap file (unknown magic)";
        return result;
    }
    const bool be = file.big_endian;
    file.version_major = detail::load16(bytes.data() + 4, be);
    file.version_minor = detail::load16(bytes.data() + 6, be);
    file.snaplen = detail::load32(bytes.data() + 16, be);
    file.linktype = detail::load32(bytes.data() + 20, be);
    if (file.version_major != 2) {
        result.error = "unsupported pcap version " + std::to_string(file.version_major);
        return result;
    }
    std::size_t at = file_header_size;
    while (at < bytes.size()) {
        if (bytes.size() - at < record_header_size) {
            result.error = "truncated record header at offset " + std::to_string(at);
            return result;
        }
        const std::uint8_t* h = bytes.data() + at;
        Record record;
        record.seconds = detail::load32(h, be);
        const std::uint32_t fraction = detail::load32(h + 4, be);
        if (fraction >= (file.nanosecond ? 1'000'000'000U : 1'000'000U)) {
            result.error = "timestamp fraction out of range at offset " + std::to_string(at);
            return result;
        }
        record.nanoseconds = file.nanosecond ? fraction : fraction * 1000;
        const std::uint32_t captured = detail::load32(h + 8, be);
        record.original_length = detail::load32(h + 12, be);
        at += record_header_size;
        if (captured > max_record_length || captured > bytes.size() - at) {
            result.error = "record at offset " + std::to_string(at - record_header_size) +
                           " claims " + std::to_string(captured) + " bytes";
            return result;
        }
        record.data.assign(bytes.begin() + static_cast<std::ptrdiff_t>(at),
                           bytes.begin() + static_cast<std::ptrdiff_t>(at + captured));
        at += captured;
        file.records.push_back(std::move(record));
    }
    return result;
}

inline ReadResult read(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        ReadResult result;
        result.error = "cannot open " + path;
        return result;
    }
    const std::vector<std::uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                                          std::istreambuf_iterator<char>());
    ReadResult result = parse(bytes);
    if (!result.ok()) {
        result.error = path + ": " + result.error;
    }
    return result;
}

// Serialises `file` in the byte order and timestamp resolution it names (a microsecond file
// drops the sub-microsecond part of each timestamp).
inline std::vector<std::uint8_t> write(const File& file) {
    std::vector<std::uint8_t> out;
    const bool be = file.big_endian;
    detail::put32(out, file.nanosecond ? magic_nanoseconds : magic_microseconds, be);
    detail::put16(out, file.version_major, be);
    detail::put16(out, file.version_minor, be);
    detail::put32(out, 0, be); // thiszone
    detail::put32(out, 0, be); // sigfigs
    detail::put32(out, file.snaplen, be);
    detail::put32(out, file.linktype, be);
    for (const Record& r : file.records) {
        detail::put32(out, r.seconds, be);
        detail::put32(out, file.nanosecond ? r.nanoseconds : r.nanoseconds / 1000, be);
        detail::put32(out, static_cast<std::uint32_t>(r.data.size()), be);
        detail::put32(out, r.original_length, be);
        out.insert(out.end(), r.data.begin(), r.data.end());
    }
    return out;
}

} // namespace prdma::roce::pcap
