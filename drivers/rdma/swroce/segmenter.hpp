// How one send-queue WR becomes RC packets (IBTA 9.4): the payload is cut into path-MTU pieces,
// first and middle packets exactly one MTU, the last the remainder; a zero-length message is one
// "only" packet. An RDMA READ is one request packet but consumes one PSN per response packet.
// Inline and allocation-free: the requester calls it per packet.
#pragma once

#include <algorithm>
#include <cstdint>

#include <prdma/rdmadev/work_request.hpp>
#include <prdma/roce/opcodes.hpp>

namespace prdma::swroce {

struct PacketPlan {
    roce::Opcode opcode = roce::Opcode::rc_send_only;
    std::uint32_t offset = 0; // of this packet's payload within the message
    std::uint32_t length = 0; // payload bytes in this packet
    bool last = true;         // AckReq goes on the last packet of a message
};

class Segmenter {
public:
    Segmenter(rdma::WrOpcode op, std::uint32_t length, std::uint32_t mtu) noexcept
        : op_(op), length_(length), mtu_(mtu),
          pieces_(length == 0 ? 1U : (length + mtu - 1) / mtu) {}

    // Packets the requester transmits for the WR.
    [[nodiscard]] std::uint32_t packet_count() const noexcept {
        return carries_payload() ? pieces_ : 1U;
    }
    // PSNs the WR consumes: a READ reserves one per response packet it asks for.
    [[nodiscard]] std::uint32_t psn_span() const noexcept {
        return op_ == rdma::WrOpcode::rdma_read ? pieces_ : packet_count();
    }

    [[nodiscard]] PacketPlan packet(std::uint32_t index) const noexcept {
        PacketPlan plan;
        switch (op_) {
        case rdma::WrOpcode::rdma_read:
            plan.opcode = roce::Opcode::rc_rdma_read_request;
            return plan; // no payload: the length travels in the RETH
        case rdma::WrOpcode::atomic_cmp_swap:
            plan.opcode = roce::Opcode::rc_compare_swap;
            return plan;
        case rdma::WrOpcode::atomic_fetch_add:
            plan.opcode = roce::Opcode::rc_fetch_add;
            return plan;
        default:
            break;
        }
        plan.offset = index * mtu_;
        plan.length = std::min(mtu_, length_ - std::min(length_, plan.offset));
        plan.last = index + 1 == pieces_;
        const bool first = index == 0;
        plan.opcode = opcode_for(first, plan.last);
        return plan;
    }

private:
    [[nodiscard]] bool carries_payload() const noexcept {
        return op_ != rdma::WrOpcode::rdma_read && op_ != rdma::WrOpcode::atomic_cmp_swap &&
               op_ != rdma::WrOpcode::atomic_fetch_add;
    }

    [[nodiscard]] roce::Opcode opcode_for(bool first, bool last) const noexcept {
        using roce::Opcode;
        const bool only = first && last;
        switch (op_) {
        case rdma::WrOpcode::send_with_imm:
            return only    ? Opcode::rc_send_only_with_immediate
                   : last  ? Opcode::rc_send_last_with_immediate
                   : first ? Opcode::rc_send_first
                           : Opcode::rc_send_middle;
        case rdma::WrOpcode::send_with_inv:
            return only    ? Opcode::rc_send_only_with_invalidate
                   : last  ? Opcode::rc_send_last_with_invalidate
                   : first ? Opcode::rc_send_first
                           : Opcode::rc_send_middle;
        case rdma::WrOpcode::rdma_write:
            return only    ? Opcode::rc_rdma_write_only
                   : last  ? Opcode::rc_rdma_write_last
                   : first ? Opcode::rc_rdma_write_first
                           : Opcode::rc_rdma_write_middle;
        case rdma::WrOpcode::rdma_write_with_imm:
            return only    ? Opcode::rc_rdma_write_only_with_immediate
                   : last  ? Opcode::rc_rdma_write_last_with_immediate
                   : first ? Opcode::rc_rdma_write_first
                           : Opcode::rc_rdma_write_middle;
        default: // send
            return only    ? Opcode::rc_send_only
                   : last  ? Opcode::rc_send_last
                   : first ? Opcode::rc_send_first
                           : Opcode::rc_send_middle;
        }
    }

    rdma::WrOpcode op_;
    std::uint32_t length_;
    std::uint32_t mtu_;
    std::uint32_t pieces_;
};

} // namespace prdma::swroce
