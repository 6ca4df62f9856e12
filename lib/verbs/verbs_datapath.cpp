// The data path libibverbs' inline ibv_post_send, ibv_post_recv, ibv_post_srq_recv and ibv_poll_cq
// reach through the context's ops: verbs work requests and completions converted to prdma's, a
// burst at a time.
#include <arpa/inet.h>
#include <cerrno>

#include <prdma/rdmadev/fastpath.hpp>

#include "verbs_shim.hpp"

namespace prdma::verbs {
namespace {

constexpr std::size_t burst = 32;
constexpr std::size_t max_sge = 16;

// One burst's converted WRs and the SGEs they point at.
template <typename Wr>
struct Burst {
    std::array<Wr, burst> wrs;
    std::array<std::array<rdma::Sge, max_sge>, burst> sges;
    std::size_t count = 0;
};

// The WR's SGEs into `wr`: one in the WR itself, more in `room` (never touched for one or none).
template <typename Wr>
bool take_sges(const ibv_sge* list, int num_sge, Wr& wr, rdma::Sge* room) {
    if (num_sge < 0 || static_cast<std::size_t>(num_sge) > max_sge ||
        (num_sge > 1 && room == nullptr)) {
        return false;
    }
    wr.num_sge = static_cast<std::uint8_t>(num_sge);
    if (num_sge == 1) {
        wr.sge = {list[0].addr, list[0].length, list[0].lkey};
        return true;
    }
    for (int i = 0; i < num_sge; ++i) {
        room[i] = {list[i].addr, list[i].length, list[i].lkey};
    }
    if (num_sge > 1) {
        wr.sg_list = room;
    }
    return true;
}

bool opcode_of(ibv_wr_opcode opcode, rdma::WrOpcode& out) {
    switch (opcode) {
    case IBV_WR_RDMA_WRITE:
        out = rdma::WrOpcode::rdma_write;
        return true;
    case IBV_WR_RDMA_WRITE_WITH_IMM:
        out = rdma::WrOpcode::rdma_write_with_imm;
        return true;
    case IBV_WR_SEND:
        out = rdma::WrOpcode::send;
        return true;
    case IBV_WR_SEND_WITH_IMM:
        out = rdma::WrOpcode::send_with_imm;
        return true;
    case IBV_WR_RDMA_READ:
        out = rdma::WrOpcode::rdma_read;
        return true;
    case IBV_WR_ATOMIC_CMP_AND_SWP:
        out = rdma::WrOpcode::atomic_cmp_swap;
        return true;
    case IBV_WR_ATOMIC_FETCH_AND_ADD:
        out = rdma::WrOpcode::atomic_fetch_add;
        return true;
    case IBV_WR_LOCAL_INV:
        out = rdma::WrOpcode::local_inv;
        return true;
    case IBV_WR_SEND_WITH_INV:
        out = rdma::WrOpcode::send_with_inv;
        return true;
    default:
        return false; // memory windows, TSO, driver opcodes
    }
}

// A UD QP's SEND names its destination: the AH, the QP there and the Q_Key. Any other opcode is
// refused before wr.ud is read: the union holds an RDMA or atomic address then.
bool convert_ud(const ibv_send_wr& in, rdma::SendWr& out) {
    if ((out.opcode != rdma::WrOpcode::send && out.opcode != rdma::WrOpcode::send_with_imm) ||
        in.wr.ud.ah == nullptr) {
        return false;
    }
    out.ud = {shim_of<ShimAh>(in.wr.ud.ah).wr_handle, in.wr.ud.remote_qpn, in.wr.ud.remote_qkey};
    return true;
}

bool convert(const ibv_send_wr& in, rdma::SendWr& out, rdma::Sge* room, bool ud) {
    out = rdma::SendWr{};
    out.wr_id = in.wr_id;
    const unsigned known =
        IBV_SEND_FENCE | IBV_SEND_SIGNALED | IBV_SEND_SOLICITED | IBV_SEND_INLINE;
    if ((in.send_flags & ~known) != 0 || !opcode_of(in.opcode, out.opcode) ||
        !take_sges(in.sg_list, in.num_sge, out, room)) {
        return false;
    }
    out.flags |= (in.send_flags & IBV_SEND_SIGNALED) != 0 ? rdma::send_signaled : rdma::SendFlags{};
    out.flags |= (in.send_flags & IBV_SEND_FENCE) != 0 ? rdma::send_fence : rdma::SendFlags{};
    out.flags |=
        (in.send_flags & IBV_SEND_SOLICITED) != 0 ? rdma::send_solicited : rdma::SendFlags{};
    out.flags |= (in.send_flags & IBV_SEND_INLINE) != 0 ? rdma::send_inline : rdma::SendFlags{};
    switch (out.opcode) {
    case rdma::WrOpcode::send_with_imm:
    case rdma::WrOpcode::rdma_write_with_imm:
        out.imm_or_invalidate = ntohl(in.imm_data);
        break;
    case rdma::WrOpcode::send_with_inv:
        out.imm_or_invalidate = in.invalidate_rkey;
        break;
    case rdma::WrOpcode::local_inv:
        out.local_inv = {in.invalidate_rkey};
        break;
    case rdma::WrOpcode::atomic_cmp_swap:
    case rdma::WrOpcode::atomic_fetch_add:
        out.atomic = {in.wr.atomic.remote_addr, in.wr.atomic.compare_add, in.wr.atomic.swap,
                      in.wr.atomic.rkey};
        break;
    default:
        break;
    }
    if (out.opcode == rdma::WrOpcode::rdma_write ||
        out.opcode == rdma::WrOpcode::rdma_write_with_imm ||
        out.opcode == rdma::WrOpcode::rdma_read) {
        out.rdma = {in.wr.rdma.remote_addr, in.wr.rdma.rkey};
    }
    return !ud || convert_ud(in, out);
}

bool convert(const ibv_recv_wr& in, rdma::RecvWr& out, rdma::Sge* room, bool /*ud*/) {
    out = rdma::RecvWr{};
    out.wr_id = in.wr_id;
    return take_sges(in.sg_list, in.num_sge, out, room);
}

// Posts what is converted; on a refusal or a WR it cannot convert, *bad names the first WR not
// posted and the verb's error number is returned.
template <typename VerbsWr, typename Wr, typename Post>
int post_chain(VerbsWr* wr, VerbsWr** bad, bool ud, Post&& post) {
    if (wr != nullptr && wr->next == nullptr && wr->num_sge <= 1) {
        // One WR with one SGE or none, what most programs post: converted on the stack.
        Wr one;
        if (!convert(*wr, one, nullptr, ud)) {
            *bad = wr;
            return EINVAL;
        }
        const rdma::PostResult result = post(std::span<const Wr>(&one, 1));
        if (result.posted == 0) {
            *bad = wr;
            return post_errno(result.reason);
        }
        return 0;
    }
    // Per thread and made once: a burst's room is 12 KiB that a post must not clear each time.
    thread_local Burst<Wr> b;
    while (wr != nullptr) {
        VerbsWr* const first = wr;
        b.count = 0;
        int unconvertible = 0;
        for (; wr != nullptr && b.count < burst; wr = wr->next) {
            if (!convert(*wr, b.wrs[b.count], b.sges[b.count].data(), ud)) {
                unconvertible = EINVAL;
                break;
            }
            ++b.count;
        }
        const rdma::PostResult result = post(std::span<const Wr>(b.wrs.data(), b.count));
        if (result.posted < b.count) {
            VerbsWr* refused = first; // the WR `posted` after the burst's first
            for (std::size_t i = 0; i < result.posted && refused != nullptr; ++i) {
                refused = refused->next;
            }
            *bad = refused;
            return post_errno(result.reason);
        }
        if (unconvertible != 0) {
            *bad = wr;
            return unconvertible;
        }
    }
    return 0;
}

int post_send_op(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad) {
    const ShimQp& shim = shim_of<ShimQp>(qp);
    const rdma::QueuePair& handle = *shim.handle;
    return post_chain<ibv_send_wr, rdma::SendWr>(
        wr, bad, shim.ud,
        [&](std::span<const rdma::SendWr> wrs) { return rdma::post_send(handle, wrs); });
}

int post_recv_op(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad) {
    const rdma::QueuePair& handle = *shim_of<ShimQp>(qp).handle;
    return post_chain<ibv_recv_wr, rdma::RecvWr>(
        wr, bad, false,
        [&](std::span<const rdma::RecvWr> wrs) { return rdma::post_recv(handle, wrs); });
}

int post_srq_recv_op(ibv_srq* srq, ibv_recv_wr* wr, ibv_recv_wr** bad) {
    auto& shim = shim_of<ShimSrq>(srq);
    const rdma::SharedReceiveQueue& handle = *shim.handle;
    const std::lock_guard one_producer(shim.post_mutex);
    return post_chain<ibv_recv_wr, rdma::RecvWr>(
        wr, bad, false,
        [&](std::span<const rdma::RecvWr> wrs) { return rdma::post_srq_recv(handle, wrs); });
}

} // namespace

// A full queue is ENOMEM, as verbs has it; a QP in a state that takes no posts is EINVAL, as rxe
// answers (not a timeout).
int post_errno(StatusCode reason) {
    return reason == StatusCode::not_connected ? EINVAL : errno_of(reason);
}

ibv_wc_status wc_status(rdma::WcStatus status) {
    switch (status) {
    case rdma::WcStatus::success:
        return IBV_WC_SUCCESS;
    case rdma::WcStatus::local_length_error:
        return IBV_WC_LOC_LEN_ERR;
    case rdma::WcStatus::local_qp_operation_error:
        return IBV_WC_LOC_QP_OP_ERR;
    case rdma::WcStatus::local_protection_error:
        return IBV_WC_LOC_PROT_ERR;
    case rdma::WcStatus::wr_flush_error:
        return IBV_WC_WR_FLUSH_ERR;
    case rdma::WcStatus::bad_response_error:
        return IBV_WC_BAD_RESP_ERR;
    case rdma::WcStatus::local_access_error:
        return IBV_WC_LOC_ACCESS_ERR;
    case rdma::WcStatus::remote_invalid_request_error:
        return IBV_WC_REM_INV_REQ_ERR;
    case rdma::WcStatus::remote_access_error:
        return IBV_WC_REM_ACCESS_ERR;
    case rdma::WcStatus::remote_operation_error:
        return IBV_WC_REM_OP_ERR;
    case rdma::WcStatus::retry_exceeded:
        return IBV_WC_RETRY_EXC_ERR;
    case rdma::WcStatus::rnr_retry_exceeded:
        return IBV_WC_RNR_RETRY_EXC_ERR;
    case rdma::WcStatus::fatal_error:
        return IBV_WC_FATAL_ERR;
    case rdma::WcStatus::general_error:
        break;
    }
    return IBV_WC_GENERAL_ERR;
}

ibv_wc_opcode wc_opcode(rdma::WcOpcode opcode) {
    switch (opcode) {
    case rdma::WcOpcode::send:
        return IBV_WC_SEND;
    case rdma::WcOpcode::rdma_write:
        return IBV_WC_RDMA_WRITE;
    case rdma::WcOpcode::rdma_read:
        return IBV_WC_RDMA_READ;
    case rdma::WcOpcode::atomic_cmp_swap:
        return IBV_WC_COMP_SWAP;
    case rdma::WcOpcode::atomic_fetch_add:
        return IBV_WC_FETCH_ADD;
    case rdma::WcOpcode::local_inv:
    case rdma::WcOpcode::fast_reg: // verbs cannot post one: not seen here
        return IBV_WC_LOCAL_INV;
    case rdma::WcOpcode::recv:
        return IBV_WC_RECV;
    case rdma::WcOpcode::recv_rdma_with_imm:
        break;
    }
    return IBV_WC_RECV_RDMA_WITH_IMM;
}

void to_verbs_wc(const rdma::WorkCompletion& in, ibv_wc& out) {
    out = {};
    out.wr_id = in.wr_id;
    out.status = wc_status(in.status);
    out.opcode = wc_opcode(in.opcode);
    out.vendor_err = in.vendor_error;
    out.byte_len = in.byte_len;
    out.qp_num = in.qpn;
    out.src_qp = in.src_qpn;
    if (in.flags.has(rdma::wc_grh)) {
        out.wc_flags |= IBV_WC_GRH;
    }
    if (in.flags.has(rdma::wc_with_imm)) {
        out.wc_flags |= IBV_WC_WITH_IMM;
        out.imm_data = htonl(in.imm_or_invalidated);
    } else if (in.flags.has(rdma::wc_with_inv)) {
        out.wc_flags |= IBV_WC_WITH_INV;
        out.invalidated_rkey = in.imm_or_invalidated;
    }
}

namespace {

int poll_cq_op(ibv_cq* cq, int num_entries, ibv_wc* wc) {
    const ShimCq& shim = shim_of<ShimCq>(cq);
    CompletionRoom& room = *shim.room; // the CQ's: made once, not cleared per poll
    int total = 0;
    // What an extended poll left comes first (never called inside one: verbs forbids it).
    while (room.next < room.held && total < num_entries) {
        to_verbs_wc(room.wcs[room.next++], wc[total++]);
    }
    while (total < num_entries) {
        const std::size_t want =
            std::min<std::size_t>(room.wcs.size(), static_cast<std::size_t>(num_entries - total));
        const std::uint16_t n = rdma::poll_cq(*shim.handle, std::span(room.wcs.data(), want));
        for (std::uint16_t i = 0; i < n; ++i) {
            to_verbs_wc(room.wcs[i], wc[total + i]);
        }
        room.next = room.held = 0;
        total += n;
        if (n < want) {
            break;
        }
    }
    return total;
}

} // namespace

void set_data_path_ops(ShimContext& shim) {
    ibv_context_ops& ops = shim.vctx.context.ops;
    ops.poll_cq = poll_cq_op;
    ops.post_send = post_send_op;
    ops.post_recv = post_recv_op;
    ops.post_srq_recv = post_srq_recv_op;
}

} // namespace prdma::verbs
