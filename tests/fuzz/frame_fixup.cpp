// Rewrites are done on the bytes at the offsets the parser reports, after the parser has checked
// that they are there; nothing is rebuilt, so every other byte the fuzzer wrote stays as written.
#include "frame_fixup.hpp"

#include <prdma/roce/byte_order.hpp>
#include <prdma/roce/icrc.hpp>
#include <prdma/roce/packet.hpp>
#include <prdma/roce/psn.hpp>

namespace prdma::fuzz {

namespace {

// BTH field offsets (IBTA 9.2): destination QP in bytes 5-7, PSN in bytes 9-11.
constexpr std::size_t bth_dest_qp = 5;
constexpr std::size_t bth_psn = 9;
constexpr std::size_t ipv4_source = 12;
constexpr std::size_t ipv4_checksum = 10;
constexpr std::size_t ipv6_source = 8;

// The peer's address in the IP header, before parsing: the parser then sees what rx.cpp's source
// check will see.
void fix_source(std::span<std::uint8_t> frame, std::uint32_t peer_ipv4) noexcept {
    roce::EthernetHeader eth;
    if (roce::decode_ethernet(frame, eth) != roce::HeaderError::ok) {
        return;
    }
    const std::span<std::uint8_t> ip = frame.subspan(eth.size());
    if (eth.ether_type == roce::ethertype_ipv4 && ip.size() >= roce::ipv4_header_size &&
        (ip[0] >> 4) == 4) {
        const std::size_t header_length = std::size_t{ip[0] & 0x0fU} * 4;
        if (header_length < roce::ipv4_header_size || header_length > ip.size()) {
            return;
        }
        roce::store_be32(ip.data() + ipv4_source, peer_ipv4);
        roce::store_be16(ip.data() + ipv4_checksum,
                         roce::ipv4_header_checksum(ip.first(header_length)));
    } else if (eth.ether_type == roce::ethertype_ipv6 && ip.size() >= roce::ipv6_header_size) {
        std::uint8_t* src = ip.data() + ipv6_source;
        for (std::size_t i = 0; i < 10; ++i) {
            src[i] = 0;
        }
        src[10] = 0xff;
        src[11] = 0xff;
        roce::store_be32(src + 12, peer_ipv4);
    }
}

bool is_response(roce::Operation op) noexcept {
    return op == roce::Operation::acknowledge || op == roce::Operation::atomic_acknowledge ||
           op == roce::Operation::rdma_read_response;
}

// VA and R_Key at `at` (RETH and AtomicETH both start with them): the key's low bits choose a
// region, the VA's low 16 bits become a signed offset from its start. Every region is smaller
// than 32 KiB, so both of its edges, and the bytes just outside them, are a few mutations away
// (keep_keys reaches the rest of the address space).
void fix_va_and_key(std::uint8_t* at, const FixupTarget& target) noexcept {
    const auto offset = static_cast<std::int16_t>(roce::load_be64(at) & 0xffffU);
    const std::uint32_t key = roce::load_be32(at + 8);
    const FixupRegion& region = target.regions[key % fixup_regions];
    roce::store_be64(at, region.addr + static_cast<std::uint64_t>(std::int64_t{offset}));
    roce::store_be32(at + 8, region.rkey);
}

void fix_keys(std::uint8_t* bth, const roce::OpcodeInfo& info, const FixupTarget& target) noexcept {
    if (info.has(roce::ExtHeader::reth)) {
        fix_va_and_key(bth + info.offset_of(roce::ExtHeader::reth), target);
    }
    if (info.has(roce::ExtHeader::atomic_eth)) {
        fix_va_and_key(bth + info.offset_of(roce::ExtHeader::atomic_eth), target);
    }
    if (info.has(roce::ExtHeader::ieth)) {
        std::uint8_t* ieth = bth + info.offset_of(roce::ExtHeader::ieth);
        const std::uint32_t key = roce::load_be32(ieth);
        roce::store_be32(ieth, target.regions[key % fixup_regions].rkey);
    }
}

} // namespace

void fix_up_frame(std::span<std::uint8_t> frame, std::uint8_t flags,
                  const FixupTarget& target) noexcept {
    if ((flags & keep_source) == 0) {
        fix_source(frame, target.peer_ipv4);
    }
    roce::ParseOptions options;
    options.verify_icrc = false;
    options.verify_ipv4_checksum = false;
    roce::ParsedFrame parsed;
    (void)roce::parse_roce_frame(frame, parsed, options);
    if (parsed.info != nullptr) {
        // The BTH is there (and the opcode known): the parser checked BTH + ICRC fit.
        std::uint8_t* bth = frame.data() + parsed.bth_offset;
        if ((flags & keep_qpn) == 0) {
            roce::store_be24(bth + bth_dest_qp, target.qpn);
        }
        if ((flags & keep_psn) == 0) {
            const std::uint32_t base = is_response(parsed.info->operation)
                                           ? target.response_psn_base
                                           : target.request_psn_base;
            roce::store_be24(bth + bth_psn, roce::psn_add(base, parsed.bth.psn));
        }
        const bool headers_fit = parsed.error != roce::ParseError::headers_too_short;
        if ((flags & keep_keys) == 0 && headers_fit) {
            fix_keys(bth, *parsed.info, target);
        }
    }
    if ((flags & keep_icrc) == 0 && !parsed.ip_datagram.empty()) {
        // ip_datagram points into `frame`: the same bytes, writable through the frame.
        const std::size_t offset = parsed.ip_offset;
        (void)roce::store_icrc(frame.subspan(offset, parsed.ip_datagram.size()));
    }
}

} // namespace prdma::fuzz
