// The BTH opcodes prdma speaks (IBTA Vol. 1 9.2, table "OpCode Field"), and per opcode what the
// packet looks like: the extension headers after the BTH in wire order, whether a payload may
// follow, the packet's place in its message, and its name.
//
// All RC opcodes are here; of UD only SEND_ONLY and SEND_ONLY_WITH_IMMEDIATE (GSI/CM MADs and
// the UD capture). Anything else (UC, RD, XRC, CNP, RC RESYNC) is "unknown": opcode_info()
// returns an entry whose valid() is false and header_length() returns 0.
//
// The table is a constexpr array indexed by the opcode byte, so a lookup is one load.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include <prdma/roce/headers.hpp>

namespace prdma::roce {

enum class Opcode : std::uint8_t {
    rc_send_first = 0x00,
    rc_send_middle = 0x01,
    rc_send_last = 0x02,
    rc_send_last_with_immediate = 0x03,
    rc_send_only = 0x04,
    rc_send_only_with_immediate = 0x05,
    rc_rdma_write_first = 0x06,
    rc_rdma_write_middle = 0x07,
    rc_rdma_write_last = 0x08,
    rc_rdma_write_last_with_immediate = 0x09,
    rc_rdma_write_only = 0x0a,
    rc_rdma_write_only_with_immediate = 0x0b,
    rc_rdma_read_request = 0x0c,
    rc_rdma_read_response_first = 0x0d,
    rc_rdma_read_response_middle = 0x0e,
    rc_rdma_read_response_last = 0x0f,
    rc_rdma_read_response_only = 0x10,
    rc_acknowledge = 0x11,
    rc_atomic_acknowledge = 0x12,
    rc_compare_swap = 0x13,
    rc_fetch_add = 0x14,
    rc_send_last_with_invalidate = 0x16,
    rc_send_only_with_invalidate = 0x17,
    ud_send_only = 0x64,
    ud_send_only_with_immediate = 0x65,
};

enum class Transport : std::uint8_t { rc, ud };

enum class Operation : std::uint8_t {
    send,
    rdma_write,
    rdma_read_request,
    rdma_read_response,
    acknowledge,
    atomic_acknowledge,
    compare_swap,
    fetch_add,
};

// Where the packet sits in its message. Single-packet operations (READ request, atomics, ACKs)
// are `only`.
enum class Position : std::uint8_t { first, middle, last, only };

// Extension headers, numbered in the order they follow the BTH on the wire (IBTA 9.2: DETH,
// RETH, AtomicETH, AETH, AtomicAckETH, ImmDt, IETH). A packet carries at most two of them.
enum class ExtHeader : std::uint8_t {
    deth = 0,
    reth,
    atomic_eth,
    aeth,
    atomic_ack_eth,
    immdt,
    ieth,
};
inline constexpr std::size_t ext_header_kinds = 7;
inline constexpr std::size_t max_ext_headers = 2;

constexpr std::size_t ext_header_size(ExtHeader h) noexcept {
    constexpr std::array<std::size_t, ext_header_kinds> sizes = {
        deth_size,           reth_size,  atomic_eth_size, aeth_size,
        atomic_ack_eth_size, immdt_size, ieth_size,
    };
    return sizes[static_cast<std::size_t>(h)];
}

constexpr std::string_view ext_header_name(ExtHeader h) noexcept {
    constexpr std::array<std::string_view, ext_header_kinds> names = {
        "DETH", "RETH", "AtomicETH", "AETH", "AtomicAckETH", "ImmDt", "IETH",
    };
    return names[static_cast<std::size_t>(h)];
}

struct OpcodeInfo {
    std::string_view name; // "RC_SEND_FIRST"; empty for an opcode this library does not know
    Transport transport = Transport::rc;
    Operation operation = Operation::send;
    Position position = Position::only;
    bool has_payload = false; // a payload may follow the headers (it may still be empty)
    std::uint8_t ext_count = 0;
    std::array<ExtHeader, max_ext_headers> ext{}; // the first ext_count, in wire order
    std::uint8_t ext_mask = 0;                    // bit (1 << ExtHeader) per header present
    // Offset of each extension header from the start of the BTH, indexed by ExtHeader; 0 when
    // absent (the BTH itself is at 0).
    std::array<std::uint8_t, ext_header_kinds> offset{};
    std::uint8_t header_length = 0; // BTH + extension headers; 0 when unknown

    [[nodiscard]] constexpr bool valid() const noexcept { return header_length != 0; }
    [[nodiscard]] constexpr bool has(ExtHeader h) const noexcept {
        return (ext_mask & (1U << static_cast<unsigned>(h))) != 0;
    }
    [[nodiscard]] constexpr std::size_t offset_of(ExtHeader h) const noexcept {
        return offset[static_cast<std::size_t>(h)];
    }
    [[nodiscard]] constexpr bool is_first() const noexcept {
        return position == Position::first || position == Position::only;
    }
    [[nodiscard]] constexpr bool is_last() const noexcept {
        return position == Position::last || position == Position::only;
    }
    // Sent by the requester (SEND, WRITE, READ request, atomics) rather than the responder.
    [[nodiscard]] constexpr bool is_request() const noexcept {
        return operation == Operation::send || operation == Operation::rdma_write ||
               operation == Operation::rdma_read_request || operation == Operation::compare_swap ||
               operation == Operation::fetch_add;
    }
};

namespace detail {

struct OpcodeRow {
    Opcode opcode;
    std::string_view name;
    Transport transport;
    Operation operation;
    Position position;
    bool has_payload;
    std::array<ExtHeader, max_ext_headers> ext;
    std::uint8_t ext_count;
};

constexpr OpcodeRow row(Opcode opcode, std::string_view name, Transport transport,
                        Operation operation, Position position, bool has_payload) {
    return {opcode, name, transport, operation, position, has_payload, {}, 0};
}
constexpr OpcodeRow row(Opcode opcode, std::string_view name, Transport transport,
                        Operation operation, Position position, bool has_payload, ExtHeader h1) {
    return {opcode, name, transport, operation, position, has_payload, {h1, h1}, 1};
}
constexpr OpcodeRow row(Opcode opcode, std::string_view name, Transport transport,
                        Operation operation, Position position, bool has_payload, ExtHeader h1,
                        ExtHeader h2) {
    return {opcode, name, transport, operation, position, has_payload, {h1, h2}, 2};
}

using T = Transport;
using O = Operation;
using P = Position;
using E = ExtHeader;

inline constexpr std::array opcode_rows = {
    row(Opcode::rc_send_first, "RC_SEND_FIRST", T::rc, O::send, P::first, true),
    row(Opcode::rc_send_middle, "RC_SEND_MIDDLE", T::rc, O::send, P::middle, true),
    row(Opcode::rc_send_last, "RC_SEND_LAST", T::rc, O::send, P::last, true),
    row(Opcode::rc_send_last_with_immediate, "RC_SEND_LAST_WITH_IMMEDIATE", T::rc, O::send, P::last,
        true, E::immdt),
    row(Opcode::rc_send_only, "RC_SEND_ONLY", T::rc, O::send, P::only, true),
    row(Opcode::rc_send_only_with_immediate, "RC_SEND_ONLY_WITH_IMMEDIATE", T::rc, O::send, P::only,
        true, E::immdt),
    row(Opcode::rc_rdma_write_first, "RC_RDMA_WRITE_FIRST", T::rc, O::rdma_write, P::first, true,
        E::reth),
    row(Opcode::rc_rdma_write_middle, "RC_RDMA_WRITE_MIDDLE", T::rc, O::rdma_write, P::middle,
        true),
    row(Opcode::rc_rdma_write_last, "RC_RDMA_WRITE_LAST", T::rc, O::rdma_write, P::last, true),
    row(Opcode::rc_rdma_write_last_with_immediate, "RC_RDMA_WRITE_LAST_WITH_IMMEDIATE", T::rc,
        O::rdma_write, P::last, true, E::immdt),
    row(Opcode::rc_rdma_write_only, "RC_RDMA_WRITE_ONLY", T::rc, O::rdma_write, P::only, true,
        E::reth),
    row(Opcode::rc_rdma_write_only_with_immediate, "RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE", T::rc,
        O::rdma_write, P::only, true, E::reth, E::immdt),
    row(Opcode::rc_rdma_read_request, "RC_RDMA_READ_REQUEST", T::rc, O::rdma_read_request, P::only,
        false, E::reth),
    row(Opcode::rc_rdma_read_response_first, "RC_RDMA_READ_RESPONSE_FIRST", T::rc,
        O::rdma_read_response, P::first, true, E::aeth),
    row(Opcode::rc_rdma_read_response_middle, "RC_RDMA_READ_RESPONSE_MIDDLE", T::rc,
        O::rdma_read_response, P::middle, true),
    row(Opcode::rc_rdma_read_response_last, "RC_RDMA_READ_RESPONSE_LAST", T::rc,
        O::rdma_read_response, P::last, true, E::aeth),
    row(Opcode::rc_rdma_read_response_only, "RC_RDMA_READ_RESPONSE_ONLY", T::rc,
        O::rdma_read_response, P::only, true, E::aeth),
    row(Opcode::rc_acknowledge, "RC_ACKNOWLEDGE", T::rc, O::acknowledge, P::only, false, E::aeth),
    row(Opcode::rc_atomic_acknowledge, "RC_ATOMIC_ACKNOWLEDGE", T::rc, O::atomic_acknowledge,
        P::only, false, E::aeth, E::atomic_ack_eth),
    row(Opcode::rc_compare_swap, "RC_COMPARE_SWAP", T::rc, O::compare_swap, P::only, false,
        E::atomic_eth),
    row(Opcode::rc_fetch_add, "RC_FETCH_ADD", T::rc, O::fetch_add, P::only, false, E::atomic_eth),
    row(Opcode::rc_send_last_with_invalidate, "RC_SEND_LAST_WITH_INVALIDATE", T::rc, O::send,
        P::last, true, E::ieth),
    row(Opcode::rc_send_only_with_invalidate, "RC_SEND_ONLY_WITH_INVALIDATE", T::rc, O::send,
        P::only, true, E::ieth),
    row(Opcode::ud_send_only, "UD_SEND_ONLY", T::ud, O::send, P::only, true, E::deth),
    row(Opcode::ud_send_only_with_immediate, "UD_SEND_ONLY_WITH_IMMEDIATE", T::ud, O::send, P::only,
        true, E::deth, E::immdt),
};

constexpr std::array<OpcodeInfo, 256> make_opcode_table() {
    std::array<OpcodeInfo, 256> table{};
    for (const OpcodeRow& r : opcode_rows) {
        OpcodeInfo info;
        info.name = r.name;
        info.transport = r.transport;
        info.operation = r.operation;
        info.position = r.position;
        info.has_payload = r.has_payload;
        info.ext_count = r.ext_count;
        info.ext = r.ext;
        std::size_t at = bth_size;
        for (std::size_t i = 0; i < r.ext_count; ++i) {
            const auto kind = static_cast<std::size_t>(r.ext[i]);
            info.ext_mask = static_cast<std::uint8_t>(info.ext_mask | (1U << kind));
            info.offset[kind] = static_cast<std::uint8_t>(at);
            at += ext_header_size(r.ext[i]);
        }
        info.header_length = static_cast<std::uint8_t>(at);
        table[static_cast<std::size_t>(r.opcode)] = info;
    }
    return table;
}

} // namespace detail

inline constexpr std::array<OpcodeInfo, 256> opcode_table = detail::make_opcode_table();

constexpr const OpcodeInfo& opcode_info(Opcode opcode) noexcept {
    return opcode_table[static_cast<std::uint8_t>(opcode)];
}

// BTH plus this opcode's extension headers, in bytes; 0 for an opcode not in the table.
constexpr std::size_t header_length(Opcode opcode) noexcept {
    return opcode_info(opcode).header_length;
}

constexpr std::string_view opcode_name(Opcode opcode) noexcept {
    const std::string_view name = opcode_info(opcode).name;
    return name.empty() ? std::string_view("UNKNOWN") : name;
}

} // namespace prdma::roce
