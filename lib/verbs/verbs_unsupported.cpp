// Every other exported verb that takes a context or one of its objects. libibverbs' own versions
// reach the provider through the context's private part, which a shim context does not have, so
// each is defined here: what the shim does not do yet fails as verbs fails (NULL or an error
// number, errno EOPNOTSUPP) with one line naming the verb, never a crash. The data-path ops of the
// context refuse the same way.
#include <cerrno>

#include "verbs_shim.hpp"

#undef ibv_reg_mr
#undef ibv_reg_mr_iova

namespace prdma::verbs {
namespace {

constexpr const char* not_yet = "not supported by libprdma-verbs in this version";

template <typename T>
T* refuse_object(const char* verb) {
    refuse(verb, EOPNOTSUPP, not_yet);
    return nullptr;
}

int refuse_call(const char* verb) {
    refuse(verb, EOPNOTSUPP, not_yet);
    return EOPNOTSUPP;
}

// libibverbs' inline ibv_create_srq_ex hands a basic SRQ to ibv_create_srq: what reaches this
// op is an XRC or tag-matching SRQ.
ibv_srq* create_srq_ex_op(ibv_context*, ibv_srq_init_attr_ex*) {
    return refuse_object<ibv_srq>("ibv_create_srq_ex");
}
ibv_mw* alloc_mw_op(ibv_pd*, ibv_mw_type) {
    return refuse_object<ibv_mw>("ibv_alloc_mw");
}
int bind_mw_op(ibv_qp*, ibv_mw*, ibv_mw_bind*) {
    return refuse_call("ibv_bind_mw");
}
int dealloc_mw_op(ibv_mw*) {
    return refuse_call("ibv_dealloc_mw");
}

} // namespace

void set_context_ops(ShimContext& shim) {
    ibv_context_ops& ops = shim.vctx.context.ops;
    ops.req_notify_cq = req_notify_cq_op; // verbs_events.cpp
    set_data_path_ops(shim);
    shim.vctx.create_cq_ex = create_cq_ex_op; // verbs_cq_ex.cpp
    shim.vctx.create_qp_ex = create_qp_ex_op; // verbs_qp_ex.cpp
    shim.vctx.create_srq_ex = create_srq_ex_op;
    ops.alloc_mw = alloc_mw_op;
    ops.bind_mw = bind_mw_op;
    ops.dealloc_mw = dealloc_mw_op;
}

} // namespace prdma::verbs

using prdma::verbs::refuse_call;
using prdma::verbs::refuse_object;

extern "C" {

ibv_mr* ibv_reg_dmabuf_mr(ibv_pd*, uint64_t, size_t, uint64_t, int, int) {
    return refuse_object<ibv_mr>("ibv_reg_dmabuf_mr");
}
int ibv_rereg_mr(ibv_mr*, int, ibv_pd*, void*, size_t, int) {
    return refuse_call("ibv_rereg_mr");
}
int ibv_resize_cq(ibv_cq*, int) {
    return refuse_call("ibv_resize_cq");
}
int ibv_attach_mcast(ibv_qp*, const ibv_gid*, uint16_t) {
    return refuse_call("ibv_attach_mcast");
}
int ibv_detach_mcast(ibv_qp*, const ibv_gid*, uint16_t) {
    return refuse_call("ibv_detach_mcast");
}
int ibv_get_pkey_index(ibv_context*, uint8_t, __be16) {
    return -refuse_call("ibv_get_pkey_index");
}
int ibv_set_ece(ibv_qp*, ibv_ece*) {
    return refuse_call("ibv_set_ece");
}
int ibv_query_ece(ibv_qp*, ibv_ece*) {
    return refuse_call("ibv_query_ece");
}
ibv_context* ibv_import_device(int) {
    return refuse_object<ibv_context>("ibv_import_device");
}
ibv_pd* ibv_import_pd(ibv_context*, uint32_t) {
    return refuse_object<ibv_pd>("ibv_import_pd");
}
void ibv_unimport_pd(ibv_pd*) {
    (void)refuse_call("ibv_unimport_pd");
}
ibv_mr* ibv_import_mr(ibv_pd*, uint32_t) {
    return refuse_object<ibv_mr>("ibv_import_mr");
}
void ibv_unimport_mr(ibv_mr*) {
    (void)refuse_call("ibv_unimport_mr");
}
int ibv_query_qp_data_in_order(ibv_qp*, ibv_wr_opcode, uint32_t) {
    return 0; // no in-order guarantee beyond the verbs' own
}

} // extern "C"
