// The ibv_wr_* QP API (ibv_create_qp_ex with send_ops_flags, ibv_qp_to_qp_ex): a program builds
// work requests between ibv_wr_start and ibv_wr_complete, one call naming the operation (with
// the QP's wr_id and wr_flags at that moment) and one or more giving its data, and
// ibv_wr_complete posts them all. The batch is the QP's, sized at creation to its send queue,
// its SGEs and its inline room, so building one allocates nothing; inline data is copied when it
// is given, as verbs lets the program reuse its buffer at once. A call the batch cannot honour
// (too many WRs or SGEs, inline data too long) makes ibv_wr_complete fail with its error and post
// nothing.
#include <arpa/inet.h>
#include <cerrno>
#include <cstring>
#include <vector>

#include <prdma/format.hpp>
#include <prdma/rdmadev/fastpath.hpp>

#include "verbs_shim.hpp"

namespace prdma::verbs {

struct WrBatch {
    WrBatch(const rdma::QpCaps& caps)
        : max_sge(std::max<std::uint32_t>(caps.max_send_sge, 1)), max_inline(caps.max_inline_data),
          wrs(caps.max_send_wr), sges(std::size_t{caps.max_send_wr} * max_sge),
          inline_bytes(std::size_t{caps.max_send_wr} * max_inline) {}

    std::uint32_t max_sge;
    std::uint32_t max_inline;
    std::vector<rdma::SendWr> wrs;
    std::vector<rdma::Sge> sges;         // max_sge per WR
    std::vector<std::byte> inline_bytes; // max_inline per WR
    std::size_t count = 0;
    int error = 0; // the first call not honoured: what ibv_wr_complete returns
};

namespace {

constexpr std::uint64_t supported_send_ops =
    IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | IBV_QP_EX_WITH_SEND |
    IBV_QP_EX_WITH_SEND_WITH_IMM | IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |
    IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD | IBV_QP_EX_WITH_LOCAL_INV | IBV_QP_EX_WITH_SEND_WITH_INV;

ShimQp& shim_qp(ibv_qp_ex* qp) {
    return shim_of<ShimQp>(qp);
}

// A new WR of the batch with the QP's wr_id and wr_flags, or null when the batch is full or has
// failed already.
rdma::SendWr* begin_wr(ibv_qp_ex* qp, rdma::WrOpcode opcode) {
    ShimQp& shim = shim_qp(qp);
    WrBatch& b = *shim.batch;
    if (b.error != 0) {
        return nullptr;
    }
    if (b.count == b.wrs.size()) {
        b.error = ENOMEM; // more than the send queue holds
        return nullptr;
    }
    rdma::SendWr& wr = b.wrs[b.count++];
    wr = rdma::SendWr{};
    wr.wr_id = qp->wr_id;
    wr.opcode = opcode;
    const unsigned flags = qp->wr_flags;
    if ((flags & IBV_SEND_SIGNALED) != 0 || shim.signal_all) {
        wr.flags |= rdma::send_signaled;
    }
    if ((flags & IBV_SEND_FENCE) != 0) {
        wr.flags |= rdma::send_fence;
    }
    if ((flags & IBV_SEND_SOLICITED) != 0) {
        wr.flags |= rdma::send_solicited;
    }
    return &wr;
}

// The WR the data calls fill: the last one begun.
rdma::SendWr* current_wr(ibv_qp_ex* qp) {
    WrBatch& b = *shim_qp(qp).batch;
    if (b.error != 0 || b.count == 0) {
        b.error = b.error != 0 ? b.error : EINVAL; // data before any operation
        return nullptr;
    }
    return &b.wrs[b.count - 1];
}

// A UD QP's SEND: where it goes (ibv_wr_set_ud_addr).
void set_ud_addr(ibv_qp_ex* qp, ibv_ah* ah, uint32_t remote_qpn, uint32_t remote_qkey) {
    if (rdma::SendWr* wr = current_wr(qp)) {
        if (ah == nullptr) {
            shim_qp(qp).batch->error = EINVAL;
            return;
        }
        wr->ud = {shim_of<ShimAh>(ah).wr_handle, remote_qpn, remote_qkey};
    }
}

void rdma_write(ibv_qp_ex* qp, uint32_t rkey, uint64_t remote_addr) {
    if (rdma::SendWr* wr = begin_wr(qp, rdma::WrOpcode::rdma_write)) {
        wr->rdma = {remote_addr, rkey};
    }
}
void rdma_write_imm(ibv_qp_ex* qp, uint32_t rkey, uint64_t remote_addr, __be32 imm) {
    if (rdma::SendWr* wr = begin_wr(qp, rdma::WrOpcode::rdma_write_with_imm)) {
        wr->rdma = {remote_addr, rkey};
        wr->imm_or_invalidate = ntohl(imm);
    }
}
void rdma_read(ibv_qp_ex* qp, uint32_t rkey, uint64_t remote_addr) {
    if (rdma::SendWr* wr = begin_wr(qp, rdma::WrOpcode::rdma_read)) {
        wr->rdma = {remote_addr, rkey};
    }
}
void send(ibv_qp_ex* qp) {
    (void)begin_wr(qp, rdma::WrOpcode::send);
}
void send_imm(ibv_qp_ex* qp, __be32 imm) {
    if (rdma::SendWr* wr = begin_wr(qp, rdma::WrOpcode::send_with_imm)) {
        wr->imm_or_invalidate = ntohl(imm);
    }
}
void send_inv(ibv_qp_ex* qp, uint32_t invalidate_rkey) {
    if (rdma::SendWr* wr = begin_wr(qp, rdma::WrOpcode::send_with_inv)) {
        wr->imm_or_invalidate = invalidate_rkey;
    }
}
void local_inv(ibv_qp_ex* qp, uint32_t invalidate_rkey) {
    if (rdma::SendWr* wr = begin_wr(qp, rdma::WrOpcode::local_inv)) {
        wr->local_inv = {invalidate_rkey};
    }
}
void atomic_cmp_swp(ibv_qp_ex* qp, uint32_t rkey, uint64_t remote_addr, uint64_t compare,
                    uint64_t swap) {
    if (rdma::SendWr* wr = begin_wr(qp, rdma::WrOpcode::atomic_cmp_swap)) {
        wr->atomic = {remote_addr, compare, swap, rkey};
    }
}
void atomic_fetch_add(ibv_qp_ex* qp, uint32_t rkey, uint64_t remote_addr, uint64_t add) {
    if (rdma::SendWr* wr = begin_wr(qp, rdma::WrOpcode::atomic_fetch_add)) {
        wr->atomic = {remote_addr, add, 0, rkey};
    }
}

void set_sge_list(ibv_qp_ex* qp, size_t num_sge, const ibv_sge* list) {
    rdma::SendWr* wr = current_wr(qp);
    if (wr == nullptr) {
        return;
    }
    WrBatch& b = *shim_qp(qp).batch;
    if (num_sge > b.max_sge) {
        b.error = EINVAL;
        return;
    }
    wr->num_sge = static_cast<std::uint8_t>(num_sge);
    if (num_sge == 1) {
        wr->sge = {list[0].addr, list[0].length, list[0].lkey};
        return;
    }
    rdma::Sge* room = &b.sges[(b.count - 1) * b.max_sge];
    for (size_t i = 0; i < num_sge; ++i) {
        room[i] = {list[i].addr, list[i].length, list[i].lkey};
    }
    wr->sg_list = room;
}
void set_sge(ibv_qp_ex* qp, uint32_t lkey, uint64_t addr, uint32_t length) {
    const ibv_sge one{.addr = addr, .length = length, .lkey = lkey};
    set_sge_list(qp, 1, &one);
}

void set_inline_data_list(ibv_qp_ex* qp, size_t num_buf, const ibv_data_buf* buffers) {
    rdma::SendWr* wr = current_wr(qp);
    if (wr == nullptr) {
        return;
    }
    WrBatch& b = *shim_qp(qp).batch;
    std::byte* room = &b.inline_bytes[(b.count - 1) * b.max_inline];
    std::size_t length = 0;
    for (size_t i = 0; i < num_buf; ++i) {
        if (buffers[i].length > b.max_inline - length) {
            b.error = EINVAL; // more than the QP's inline room
            return;
        }
        std::memcpy(room + length, buffers[i].addr, buffers[i].length);
        length += buffers[i].length;
    }
    wr->flags |= rdma::send_inline;
    wr->num_sge = length > 0 ? 1 : 0;
    wr->sge = {reinterpret_cast<std::uintptr_t>(room), static_cast<std::uint32_t>(length), 0};
}
void set_inline_data(ibv_qp_ex* qp, void* addr, size_t length) {
    const ibv_data_buf one{.addr = addr, .length = length};
    set_inline_data_list(qp, 1, &one);
}

void wr_start(ibv_qp_ex* qp) {
    WrBatch& b = *shim_qp(qp).batch;
    b.count = 0;
    b.error = 0;
}
int wr_complete(ibv_qp_ex* qp) {
    ShimQp& shim = shim_qp(qp);
    WrBatch& b = *shim.batch;
    const std::size_t count = b.count;
    b.count = 0;
    if (b.error != 0) {
        return b.error;
    }
    const rdma::PostResult result =
        rdma::post_send(*shim.handle, std::span<const rdma::SendWr>(b.wrs.data(), count));
    return result.posted < count ? post_errno(result.reason) : 0;
}
void wr_abort(ibv_qp_ex* qp) {
    wr_start(qp);
}

void set_builders(ibv_qp_ex& qp, std::uint64_t ops) {
    qp.wr_start = wr_start;
    qp.wr_complete = wr_complete;
    qp.wr_abort = wr_abort;
    qp.wr_set_sge = set_sge;
    qp.wr_set_sge_list = set_sge_list;
    qp.wr_set_inline_data = set_inline_data;
    qp.wr_set_inline_data_list = set_inline_data_list;
    qp.wr_set_ud_addr = set_ud_addr;
    const auto asked = [ops](std::uint64_t op) { return (ops & op) != 0; };
    qp.wr_rdma_write = asked(IBV_QP_EX_WITH_RDMA_WRITE) ? rdma_write : nullptr;
    qp.wr_rdma_write_imm = asked(IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM) ? rdma_write_imm : nullptr;
    qp.wr_send = asked(IBV_QP_EX_WITH_SEND) ? send : nullptr;
    qp.wr_send_imm = asked(IBV_QP_EX_WITH_SEND_WITH_IMM) ? send_imm : nullptr;
    qp.wr_rdma_read = asked(IBV_QP_EX_WITH_RDMA_READ) ? rdma_read : nullptr;
    qp.wr_atomic_cmp_swp = asked(IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP) ? atomic_cmp_swp : nullptr;
    qp.wr_atomic_fetch_add =
        asked(IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD) ? atomic_fetch_add : nullptr;
    qp.wr_local_inv = asked(IBV_QP_EX_WITH_LOCAL_INV) ? local_inv : nullptr;
    qp.wr_send_inv = asked(IBV_QP_EX_WITH_SEND_WITH_INV) ? send_inv : nullptr;
}

} // namespace

ibv_qp* create_qp_ex_op(ibv_context* context, ibv_qp_init_attr_ex* attr) {
    const std::uint32_t known = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
    if (attr == nullptr || (attr->comp_mask & IBV_QP_INIT_ATTR_PD) == 0 || attr->pd == nullptr ||
        attr->pd->context != context) {
        refuse("ibv_create_qp_ex", EINVAL, "no attributes, or no PD of this context");
        return nullptr;
    }
    const bool builders = (attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) != 0;
    if ((attr->comp_mask & ~known) != 0 ||
        (builders && (attr->send_ops_flags & ~supported_send_ops) != 0)) {
        refuse(
            "ibv_create_qp_ex", EOPNOTSUPP,
            strformat("comp_mask 0x%x, send_ops_flags 0x%llx: XRC, create flags, TSO, RSS, "
                      "memory windows and atomic writes are not supported",
                      attr->comp_mask & ~known,
                      static_cast<unsigned long long>(attr->send_ops_flags & ~supported_send_ops)));
        return nullptr;
    }
    ibv_qp_init_attr init{};
    init.qp_context = attr->qp_context;
    init.send_cq = attr->send_cq;
    init.recv_cq = attr->recv_cq;
    init.srq = attr->srq;
    init.cap = attr->cap;
    init.qp_type = attr->qp_type;
    init.sq_sig_all = attr->sq_sig_all;
    ShimQp* made = create_qp("ibv_create_qp_ex", attr->pd, &init);
    if (made == nullptr) {
        return nullptr;
    }
    attr->cap = init.cap;
    if (builders) {
        made->batch = keep(std::make_unique<WrBatch>(made->caps));
        set_builders(made->qpx, attr->send_ops_flags);
    }
    return &made->qpx.qp_base;
}

} // namespace prdma::verbs

extern "C" {

ibv_qp_ex* ibv_qp_to_qp_ex(ibv_qp* qp) {
    // As libibverbs': only a QP created with send_ops_flags has the builders.
    auto& shim = prdma::verbs::shim_of<prdma::verbs::ShimQp>(qp);
    return shim.batch != nullptr ? &shim.qpx : nullptr;
}

} // extern "C"
