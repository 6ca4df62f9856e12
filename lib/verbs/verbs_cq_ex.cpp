// Extended CQs (ibv_create_cq_ex): a program reads completions one at a time with
// ibv_start_poll / ibv_next_poll / ibv_end_poll and the ibv_wc_read_* accessors, which libibverbs
// inlines as calls through the ibv_cq_ex. A burst is polled from prdma into the CQ's room and
// handed out from there; what the program leaves when it ends a poll early stays for the next
// poll of either kind, so nothing polled is lost.
#include <arpa/inet.h>
#include <cerrno>
#include <limits>
#include <string>

#include <prdma/format.hpp>
#include <prdma/rdmadev/fastpath.hpp>

#include "verbs_shim.hpp"

namespace prdma::verbs {
namespace {

// What a completion here can carry: RoCE has no LIDs or SLs (read as 0, as RoCE NICs answer).
constexpr std::uint64_t supported_wc_flags =
    IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_IMM | IBV_WC_EX_WITH_QP_NUM | IBV_WC_EX_WITH_SRC_QP |
    IBV_WC_EX_WITH_SLID | IBV_WC_EX_WITH_SL | IBV_WC_EX_WITH_DLID_PATH_BITS;

CompletionRoom& room_of(ibv_cq_ex* cq) {
    return *shim_of<ShimCq>(cq).room;
}
const rdma::WorkCompletion& current(ibv_cq_ex* cq) {
    const CompletionRoom& room = room_of(cq);
    return room.wcs[room.next];
}

// Makes wcs[next] the current completion, polling a burst when none is held.
int take_next(ibv_cq_ex* cq) {
    CompletionRoom& room = room_of(cq);
    if (room.next >= room.held) {
        room.next = 0;
        room.held = rdma::poll_cq(*shim_of<ShimCq>(cq).handle, std::span(room.wcs));
        if (room.held == 0) {
            room.reading = false;
            return ENOENT;
        }
    }
    room.reading = true;
    cq->status = wc_status(room.wcs[room.next].status);
    cq->wr_id = room.wcs[room.next].wr_id;
    return 0;
}

int start_poll(ibv_cq_ex* cq, ibv_poll_cq_attr* attr) {
    if (attr == nullptr || attr->comp_mask != 0) {
        return EINVAL;
    }
    return take_next(cq);
}

int next_poll(ibv_cq_ex* cq) {
    ++room_of(cq).next; // the current one has been read
    return take_next(cq);
}

void end_poll(ibv_cq_ex* cq) {
    CompletionRoom& room = room_of(cq);
    if (room.reading) {
        ++room.next;
        room.reading = false;
    }
}

ibv_wc_opcode read_opcode(ibv_cq_ex* cq) {
    return wc_opcode(current(cq).opcode);
}
uint32_t read_vendor_err(ibv_cq_ex* cq) {
    return current(cq).vendor_error;
}
uint32_t read_byte_len(ibv_cq_ex* cq) {
    return current(cq).byte_len;
}
// Immediate data in network order, as ibv_wc's; ibv_wc_read_invalidated_rkey reads an
// invalidated rkey here too, in host order.
__be32 read_imm_data(ibv_cq_ex* cq) {
    const rdma::WorkCompletion& wc = current(cq);
    return wc.flags.has(rdma::wc_with_imm) ? htonl(wc.imm_or_invalidated) : wc.imm_or_invalidated;
}
uint32_t read_qp_num(ibv_cq_ex* cq) {
    return current(cq).qpn;
}
uint32_t read_src_qp(ibv_cq_ex* cq) {
    return current(cq).src_qpn;
}
unsigned int read_wc_flags(ibv_cq_ex* cq) {
    ibv_wc wc{};
    to_verbs_wc(current(cq), wc);
    return wc.wc_flags;
}
uint32_t read_slid(ibv_cq_ex*) {
    return 0;
}
uint8_t read_sl(ibv_cq_ex*) {
    return 0;
}
uint8_t read_dlid_path_bits(ibv_cq_ex*) {
    return 0;
}

// What the attributes ask that prdma cannot give, or "".
std::string unsupported(const ibv_cq_init_attr_ex& attr) {
    if ((attr.wc_flags & ~supported_wc_flags) != 0) {
        return strformat("completion fields 0x%llx (timestamps, VLAN, flow tag, tag matching)",
                         static_cast<unsigned long long>(attr.wc_flags & ~supported_wc_flags));
    }
    const std::uint32_t known_mask = IBV_CQ_INIT_ATTR_MASK_FLAGS | IBV_CQ_INIT_ATTR_MASK_PD;
    if ((attr.comp_mask & ~known_mask) != 0) {
        return strformat("comp_mask 0x%x", attr.comp_mask & ~known_mask);
    }
    if ((attr.comp_mask & IBV_CQ_INIT_ATTR_MASK_PD) != 0) {
        return "parent domains";
    }
    // One thread polls a CQ at a time here anyway; overrun is always reported.
    if ((attr.comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS) != 0 &&
        (attr.flags & ~static_cast<std::uint32_t>(IBV_CREATE_CQ_ATTR_SINGLE_THREADED)) != 0) {
        return strformat("CQ flags 0x%x", attr.flags);
    }
    return {};
}

} // namespace

ibv_cq_ex* create_cq_ex_op(ibv_context* context, ibv_cq_init_attr_ex* attr) {
    if (attr == nullptr ||
        attr->comp_vector >= static_cast<std::uint32_t>(context->num_comp_vectors)) {
        refuse("ibv_create_cq_ex", EINVAL, "no attributes, or a completion vector out of range");
        return nullptr;
    }
    if (const std::string what = unsupported(*attr); !what.empty()) {
        refuse("ibv_create_cq_ex", EOPNOTSUPP, what + " not supported");
        return nullptr;
    }
    if (attr->cqe > static_cast<std::uint32_t>(std::numeric_limits<int>::max())) {
        refuse("ibv_create_cq_ex", EINVAL, "too many entries");
        return nullptr;
    }
    ShimCq* made = make_cq("ibv_create_cq_ex", context, static_cast<int>(attr->cqe),
                           attr->cq_context, attr->channel);
    if (made == nullptr) {
        return nullptr;
    }
    ibv_cq_ex& cq = made->cq;
    cq.start_poll = start_poll;
    cq.next_poll = next_poll;
    cq.end_poll = end_poll;
    cq.read_opcode = read_opcode;
    cq.read_vendor_err = read_vendor_err;
    cq.read_byte_len = read_byte_len;
    cq.read_imm_data = read_imm_data;
    cq.read_qp_num = read_qp_num;
    cq.read_src_qp = read_src_qp;
    cq.read_wc_flags = read_wc_flags;
    cq.read_slid = read_slid;
    cq.read_sl = read_sl;
    cq.read_dlid_path_bits = read_dlid_path_bits;
    return &cq;
}

} // namespace prdma::verbs
