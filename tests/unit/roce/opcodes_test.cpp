// The opcode table against IBTA 9.2: header layout per opcode, payload, position, names; every
// other opcode byte is unknown.
#include <bit>
#include <cstdint>
#include <set>
#include <string>

#include <gtest/gtest.h>

#include <prdma/roce/opcodes.hpp>

namespace prdma::roce {
namespace {

struct Expected {
    Opcode opcode;
    std::uint8_t value;
    std::size_t header_length;
    Position position;
    bool payload;
};

// Header lengths are BTH (12) + RETH 16 / AETH 4 / AtomicETH 28 / AtomicAckETH 8 / ImmDt 4 /
// IETH 4 / DETH 8.
constexpr Expected expected[] = {
    {Opcode::rc_send_first, 0x00, 12, Position::first, true},
    {Opcode::rc_send_middle, 0x01, 12, Position::middle, true},
    {Opcode::rc_send_last, 0x02, 12, Position::last, true},
    {Opcode::rc_send_last_with_immediate, 0x03, 16, Position::last, true},
    {Opcode::rc_send_only, 0x04, 12, Position::only, true},
    {Opcode::rc_send_only_with_immediate, 0x05, 16, Position::only, true},
    {Opcode::rc_rdma_write_first, 0x06, 28, Position::first, true},
    {Opcode::rc_rdma_write_middle, 0x07, 12, Position::middle, true},
    {Opcode::rc_rdma_write_last, 0x08, 12, Position::last, true},
    {Opcode::rc_rdma_write_last_with_immediate, 0x09, 16, Position::last, true},
    {Opcode::rc_rdma_write_only, 0x0a, 28, Position::only, true},
    {Opcode::rc_rdma_write_only_with_immediate, 0x0b, 32, Position::only, true},
    {Opcode::rc_rdma_read_request, 0x0c, 28, Position::only, false},
    {Opcode::rc_rdma_read_response_first, 0x0d, 16, Position::first, true},
    {Opcode::rc_rdma_read_response_middle, 0x0e, 12, Position::middle, true},
    {Opcode::rc_rdma_read_response_last, 0x0f, 16, Position::last, true},
    {Opcode::rc_rdma_read_response_only, 0x10, 16, Position::only, true},
    {Opcode::rc_acknowledge, 0x11, 16, Position::only, false},
    {Opcode::rc_atomic_acknowledge, 0x12, 24, Position::only, false},
    {Opcode::rc_compare_swap, 0x13, 40, Position::only, false},
    {Opcode::rc_fetch_add, 0x14, 40, Position::only, false},
    {Opcode::rc_send_last_with_invalidate, 0x16, 16, Position::last, true},
    {Opcode::rc_send_only_with_invalidate, 0x17, 16, Position::only, true},
    {Opcode::ud_send_only, 0x64, 20, Position::only, true},
    {Opcode::ud_send_only_with_immediate, 0x65, 24, Position::only, true},
};

TEST(Opcodes, TableMatchesIbta) {
    for (const Expected& e : expected) {
        const OpcodeInfo& info = opcode_info(e.opcode);
        SCOPED_TRACE(std::string(info.name));
        EXPECT_EQ(static_cast<std::uint8_t>(e.opcode), e.value);
        EXPECT_TRUE(info.valid());
        EXPECT_EQ(header_length(e.opcode), e.header_length);
        EXPECT_EQ(info.position, e.position);
        EXPECT_EQ(info.has_payload, e.payload);
        EXPECT_EQ(info.transport, e.value >= 0x60 ? Transport::ud : Transport::rc);
        // Extension headers are in wire order and tile the header exactly.
        std::size_t at = bth_size;
        for (std::size_t i = 0; i < info.ext_count; ++i) {
            EXPECT_TRUE(info.has(info.ext[i]));
            EXPECT_EQ(info.offset_of(info.ext[i]), at);
            at += ext_header_size(info.ext[i]);
            if (i > 0) {
                EXPECT_LT(info.ext[i - 1], info.ext[i]);
            }
        }
        EXPECT_EQ(at, e.header_length);
        EXPECT_EQ(std::popcount(info.ext_mask), info.ext_count);
    }
}

TEST(Opcodes, ExtensionHeadersPerOpcode) {
    const auto& write_imm = opcode_info(Opcode::rc_rdma_write_only_with_immediate);
    ASSERT_EQ(write_imm.ext_count, 2);
    EXPECT_EQ(write_imm.ext[0], ExtHeader::reth);
    EXPECT_EQ(write_imm.ext[1], ExtHeader::immdt);
    EXPECT_EQ(write_imm.offset_of(ExtHeader::immdt), 28U);

    const auto& atomic_ack = opcode_info(Opcode::rc_atomic_acknowledge);
    ASSERT_EQ(atomic_ack.ext_count, 2);
    EXPECT_EQ(atomic_ack.ext[0], ExtHeader::aeth);
    EXPECT_EQ(atomic_ack.ext[1], ExtHeader::atomic_ack_eth);
    EXPECT_EQ(atomic_ack.offset_of(ExtHeader::atomic_ack_eth), 16U);

    const auto& ud_imm = opcode_info(Opcode::ud_send_only_with_immediate);
    EXPECT_EQ(ud_imm.ext[0], ExtHeader::deth);
    EXPECT_EQ(ud_imm.ext[1], ExtHeader::immdt);

    EXPECT_TRUE(opcode_info(Opcode::rc_send_only_with_invalidate).has(ExtHeader::ieth));
    EXPECT_TRUE(opcode_info(Opcode::rc_compare_swap).has(ExtHeader::atomic_eth));
    EXPECT_TRUE(opcode_info(Opcode::rc_rdma_read_request).has(ExtHeader::reth));
    EXPECT_FALSE(opcode_info(Opcode::rc_rdma_read_response_middle).has(ExtHeader::aeth));
    EXPECT_FALSE(opcode_info(Opcode::rc_rdma_write_middle).has(ExtHeader::reth));
    EXPECT_EQ(opcode_info(Opcode::rc_send_first).ext_count, 0);
}

TEST(Opcodes, RequestsAndResponses) {
    std::set<Opcode> requests;
    for (const Expected& e : expected) {
        if (opcode_info(e.opcode).is_request()) {
            requests.insert(e.opcode);
        }
    }
    EXPECT_EQ(requests.size(), 19U); // 10 SENDs, 6 WRITEs, READ request, 2 atomics
    EXPECT_FALSE(opcode_info(Opcode::rc_acknowledge).is_request());
    EXPECT_FALSE(opcode_info(Opcode::rc_atomic_acknowledge).is_request());
    EXPECT_FALSE(opcode_info(Opcode::rc_rdma_read_response_first).is_request());
    EXPECT_TRUE(opcode_info(Opcode::rc_fetch_add).is_request());
    EXPECT_TRUE(opcode_info(Opcode::rc_send_only).is_first());
    EXPECT_TRUE(opcode_info(Opcode::rc_send_only).is_last());
    EXPECT_FALSE(opcode_info(Opcode::rc_send_middle).is_first());
    EXPECT_FALSE(opcode_info(Opcode::rc_send_middle).is_last());
}

TEST(Opcodes, EverythingElseIsUnknown) {
    std::set<std::uint8_t> known;
    for (const Expected& e : expected) {
        known.insert(e.value);
    }
    std::set<std::string_view> names;
    for (unsigned v = 0; v < 256; ++v) {
        const auto opcode = static_cast<Opcode>(v);
        const OpcodeInfo& info = opcode_info(opcode);
        if (known.contains(static_cast<std::uint8_t>(v))) {
            EXPECT_TRUE(info.valid()) << v;
            names.insert(info.name);
        } else {
            EXPECT_FALSE(info.valid()) << v;
            EXPECT_EQ(header_length(opcode), 0U) << v;
            EXPECT_EQ(opcode_name(opcode), "UNKNOWN");
        }
    }
    EXPECT_EQ(names.size(), known.size()) << "names are distinct";
    EXPECT_FALSE(opcode_info(static_cast<Opcode>(0x15)).valid()) << "RC RESYNC is not spoken";
    EXPECT_FALSE(opcode_info(static_cast<Opcode>(0x81)).valid()) << "nor CNP";
    EXPECT_EQ(opcode_name(Opcode::rc_rdma_read_response_last), "RC_RDMA_READ_RESPONSE_LAST");
    EXPECT_EQ(opcode_name(Opcode::ud_send_only), "UD_SEND_ONLY");
}

// The table is usable at compile time.
static_assert(header_length(Opcode::rc_rdma_write_only) == 28);
static_assert(opcode_info(Opcode::rc_acknowledge).offset_of(ExtHeader::aeth) == 12);

} // namespace
} // namespace prdma::roce
