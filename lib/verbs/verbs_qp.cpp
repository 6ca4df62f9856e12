// Queue pairs: create (with its own receive queue or an SRQ's), modify (ibv_qp_attr and its mask
// to prdma's), query, destroy. RC and UD.
#include <array>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include <prdma/format.hpp>

#include "verbs_shim.hpp"

namespace prdma::verbs {
namespace {

constexpr std::array<rdma::QpState, 7> qp_states = {
    rdma::QpState::reset, rdma::QpState::init, rdma::QpState::rtr, rdma::QpState::rts,
    rdma::QpState::sqd,   rdma::QpState::sqe,  rdma::QpState::err};

Result<rdma::QpState> state_of(ibv_qp_state state) {
    const auto index = static_cast<std::size_t>(state);
    if (index >= qp_states.size()) {
        return Error(StatusCode::invalid_parameter, strformat("no QP state %zu", index));
    }
    return qp_states[index];
}

ibv_qp_state verbs_state(rdma::QpState state) {
    return static_cast<ibv_qp_state>(static_cast<unsigned>(state)); // the same order as IBTA's
}

unsigned verbs_access(rdma::AccessFlags access) {
    unsigned flags = 0;
    flags |= access.has(mem::access_local_write) ? unsigned{IBV_ACCESS_LOCAL_WRITE} : 0U;
    flags |= access.has(mem::access_remote_write) ? unsigned{IBV_ACCESS_REMOTE_WRITE} : 0U;
    flags |= access.has(mem::access_remote_read) ? unsigned{IBV_ACCESS_REMOTE_READ} : 0U;
    flags |= access.has(mem::access_remote_atomic) ? unsigned{IBV_ACCESS_REMOTE_ATOMIC} : 0U;
    return flags;
}

// The attribute-mask bits prdma has, one to one.
struct MaskBit {
    int verbs;
    rdma::QpAttrField prdma;
};
constexpr std::array<MaskBit, 15> mask_bits = {{
    {IBV_QP_STATE, rdma::qp_attr_state},
    {IBV_QP_CUR_STATE, rdma::qp_attr_cur_state},
    {IBV_QP_ACCESS_FLAGS, rdma::qp_attr_access_flags},
    {IBV_QP_PORT, rdma::qp_attr_port},
    {IBV_QP_AV, rdma::qp_attr_dest},
    {IBV_QP_PATH_MTU, rdma::qp_attr_path_mtu},
    {IBV_QP_TIMEOUT, rdma::qp_attr_timeout},
    {IBV_QP_RETRY_CNT, rdma::qp_attr_retry_cnt},
    {IBV_QP_RNR_RETRY, rdma::qp_attr_rnr_retry},
    {IBV_QP_RQ_PSN, rdma::qp_attr_rq_psn},
    {IBV_QP_MAX_QP_RD_ATOMIC, rdma::qp_attr_max_rd_atomic},
    {IBV_QP_MIN_RNR_TIMER, rdma::qp_attr_min_rnr_timer},
    {IBV_QP_SQ_PSN, rdma::qp_attr_sq_psn},
    {IBV_QP_MAX_DEST_RD_ATOMIC, rdma::qp_attr_max_dest_rd_atomic},
    {IBV_QP_QKEY, rdma::qp_attr_qkey},
}};
// Bits a QP on RoCE may carry without meaning anything here: P_Key index 0 is the only one, and
// the destination QPN is in prdma's mask below.
constexpr int ignored_bits = IBV_QP_PKEY_INDEX | IBV_QP_EN_SQD_ASYNC_NOTIFY;

Result<rdma::QpAttrMask> mask_of(int mask) {
    rdma::QpAttrMask out;
    int known = ignored_bits | IBV_QP_DEST_QPN;
    for (const MaskBit& bit : mask_bits) {
        known |= bit.verbs;
        if ((mask & bit.verbs) != 0) {
            out |= bit.prdma;
        }
    }
    if ((mask & IBV_QP_DEST_QPN) != 0) {
        out |= rdma::qp_attr_dest_qpn;
    }
    if ((mask & ~known) != 0) {
        return Error(StatusCode::not_supported,
                     strformat("attribute mask bits 0x%x are not supported", mask & ~known));
    }
    return out;
}

Result<rdma::QpAttr> attr_of(const ibv_qp_attr& in, int mask) {
    rdma::QpAttr out;
    if ((mask & IBV_QP_STATE) != 0) {
        Result<rdma::QpState> state = state_of(in.qp_state);
        if (!state.ok()) {
            return state.error();
        }
        out.state = state.value();
    }
    if ((mask & IBV_QP_CUR_STATE) != 0) {
        Result<rdma::QpState> state = state_of(in.cur_qp_state);
        if (!state.ok()) {
            return state.error();
        }
        out.cur_state = state.value();
    }
    if ((mask & IBV_QP_PKEY_INDEX) != 0 && in.pkey_index != 0) {
        return Error(StatusCode::invalid_parameter, "P_Key index 0 is the only one");
    }
    if ((mask & IBV_QP_AV) != 0) {
        if (in.ah_attr.is_global == 0) {
            return Error(StatusCode::invalid_parameter, "RoCE needs a GRH: set ah_attr.is_global");
        }
        std::memcpy(out.dest_gid.raw.data(), in.ah_attr.grh.dgid.raw, out.dest_gid.raw.size());
    }
    if ((mask & IBV_QP_ACCESS_FLAGS) != 0) {
        Result<rdma::AccessFlags> access = access_of(in.qp_access_flags);
        if (!access.ok()) {
            return access.error();
        }
        out.access = access.value();
    }
    if ((mask & IBV_QP_PATH_MTU) != 0 &&
        (in.path_mtu < IBV_MTU_256 || in.path_mtu > IBV_MTU_4096)) {
        return Error(StatusCode::invalid_parameter, strformat("no path MTU code %d", in.path_mtu));
    }
    out.port = in.port_num;
    out.path_mtu = static_cast<rdma::Mtu>(in.path_mtu);
    out.dest_qpn = in.dest_qp_num;
    out.rq_psn = in.rq_psn;
    out.sq_psn = in.sq_psn;
    out.timeout = in.timeout;
    out.retry_cnt = in.retry_cnt;
    out.rnr_retry = in.rnr_retry;
    out.min_rnr_timer = in.min_rnr_timer;
    out.max_rd_atomic = in.max_rd_atomic;
    out.max_dest_rd_atomic = in.max_dest_rd_atomic;
    out.qkey = in.qkey;
    return out;
}

// Verbs has no attribute for it: PRDMA_SELECTIVE_REPEAT=1, given to both programs (each peer
// prdma), sets QpAttr::selective_repeat on every RC QP's way to RTR.
void ask_selective_repeat(rdma::QpAttr& attr, rdma::QpAttrMask& mask) {
    static const bool wanted = [] {
        const char* text = std::getenv("PRDMA_SELECTIVE_REPEAT");
        return text != nullptr && std::string_view(text) == "1";
    }();
    if (wanted && mask.has(rdma::qp_attr_state) && attr.state == rdma::QpState::rtr) {
        attr.selective_repeat = true;
        mask |= rdma::qp_attr_selective_repeat;
    }
}

Status check_init(const ibv_qp_init_attr& init) {
    if (init.qp_type != IBV_QPT_RC && init.qp_type != IBV_QPT_UD) {
        return Error(StatusCode::not_supported, "only RC and UD QPs are supported (not UC or XRC)");
    }
    if (init.send_cq == nullptr || init.recv_cq == nullptr) {
        return Error(StatusCode::invalid_parameter, "a QP needs a send and a receive CQ");
    }
    return {};
}

rdma::QpCaps caps_of(const ibv_qp_cap& cap) {
    return {.max_send_wr = cap.max_send_wr,
            .max_recv_wr = cap.max_recv_wr,
            .max_send_sge = cap.max_send_sge,
            .max_recv_sge = cap.max_recv_sge,
            .max_inline_data = cap.max_inline_data};
}

ibv_qp_cap verbs_caps(const rdma::QpCaps& caps) {
    return {.max_send_wr = caps.max_send_wr,
            .max_recv_wr = caps.max_recv_wr,
            .max_send_sge = caps.max_send_sge,
            .max_recv_sge = caps.max_recv_sge,
            .max_inline_data = caps.max_inline_data};
}

Result<std::unique_ptr<ShimQp>> make_qp(ShimContext& context, ibv_pd* pd,
                                        const ibv_qp_init_attr& init) {
    if (Status checked = check_init(init); !checked.ok()) {
        return checked.error();
    }
    auto made = std::make_unique<ShimQp>();
    made->caps = caps_of(init.cap);
    made->signal_all = init.sq_sig_all != 0;
    made->ud = init.qp_type == IBV_QPT_UD;
    rdma::QpInitAttr attr;
    attr.type = made->ud ? rdma::QpType::ud : rdma::QpType::rc;
    attr.pd = &shim_of<ShimPd>(pd).handle;
    attr.send_cq = shim_of<ShimCq>(init.send_cq).handle;
    attr.recv_cq = shim_of<ShimCq>(init.recv_cq).handle;
    if (init.srq != nullptr) {
        if (init.srq->context != pd->context) {
            return Error(StatusCode::invalid_parameter, "the SRQ is another context's");
        }
        attr.srq = shim_of<ShimSrq>(init.srq).handle;
        // Its receives are the SRQ's: verbs reports no receive queue of its own.
        made->caps.max_recv_wr = 0;
        made->caps.max_recv_sge = 0;
    }
    attr.caps = made->caps;
    attr.signal_all = made->signal_all;
    const std::uint64_t request = next_request(context);
    Result<rdma::QueuePair> qp = context.context.create_qp(attr, request);
    if (Status created = await_created(context, request, qp); !created.ok()) {
        return created.error();
    }
    made->handle = keep(std::make_unique<rdma::QueuePair>(std::move(qp.value())));
    return made;
}

} // namespace

ShimQp* create_qp(const char* verb, ibv_pd* pd, ibv_qp_init_attr* init) {
    if (pd == nullptr || init == nullptr) {
        refuse(verb, EINVAL, "no PD or no attributes");
        return nullptr;
    }
    ShimContext& context = shim_context(pd->context);
    ContextHold hold(context, verb);
    if (!hold) {
        return nullptr;
    }
    const std::lock_guard lock(context.control_mutex()); // with watch_qp_events below
    Result<std::unique_ptr<ShimQp>> made = make_qp(context, pd, *init);
    if (!made.ok()) {
        refuse(verb, errno_of(made.error().code()), made.error().message());
        return nullptr;
    }
    ibv_qp& qp = made.value()->qpx.qp_base;
    qp.context = pd->context;
    qp.qp_context = init->qp_context;
    qp.pd = pd;
    qp.send_cq = init->send_cq;
    qp.recv_cq = init->recv_cq;
    qp.srq = init->srq;
    qp.qp_num = made.value()->handle->qpn();
    qp.handle = qp.qp_num;
    qp.state = IBV_QPS_RESET;
    qp.qp_type = init->qp_type;
    pthread_mutex_init(&qp.mutex, nullptr);
    pthread_cond_init(&qp.cond, nullptr);
    watch_qp_events(context, &qp);
    init->cap = verbs_caps(made.value()->caps); // what the QP got, as verbs reports it
    hold.keep();
    return made.value().release(); // the caller's until ibv_destroy_qp
}

} // namespace prdma::verbs

using prdma::verbs::refuse;
using prdma::verbs::shim_of;
using prdma::verbs::ShimContext;
using prdma::verbs::ShimQp;

extern "C" {

ibv_qp* ibv_create_qp(ibv_pd* pd, ibv_qp_init_attr* qp_init_attr) {
    ShimQp* made = prdma::verbs::create_qp("ibv_create_qp", pd, qp_init_attr);
    return made != nullptr ? &made->qpx.qp_base : nullptr;
}

int ibv_modify_qp(ibv_qp* qp, ibv_qp_attr* attr, int mask) {
    if (qp == nullptr || attr == nullptr) {
        return EINVAL;
    }
    prdma::Result<prdma::rdma::QpAttrMask> prdma_mask = prdma::verbs::mask_of(mask);
    prdma::Result<prdma::rdma::QpAttr> prdma_attr =
        prdma_mask.ok() ? prdma::verbs::attr_of(*attr, mask)
                        : prdma::Result<prdma::rdma::QpAttr>(prdma_mask.error());
    if (!prdma_attr.ok()) {
        refuse("ibv_modify_qp", prdma::verbs::errno_of(prdma_attr.error().code()),
               prdma_attr.error().message());
        return errno;
    }
    auto& shim = shim_of<ShimQp>(qp);
    if (!shim.ud) {
        prdma::verbs::ask_selective_repeat(prdma_attr.value(), prdma_mask.value());
    }
    ShimContext& context = prdma::verbs::shim_context(qp->context);
    const std::lock_guard lock(context.control_mutex());
    const std::uint64_t request = prdma::verbs::next_request(context);
    prdma::Status status = prdma::verbs::await_control(
        context, request, shim.handle->modify(prdma_attr.value(), prdma_mask.value(), request));
    if (!status.ok()) {
        refuse("ibv_modify_qp", prdma::verbs::errno_of(status.error().code()),
               status.error().message());
        return errno;
    }
    qp->state = prdma::verbs::verbs_state(shim.handle->state());
    return 0;
}

int ibv_query_qp(ibv_qp* qp, ibv_qp_attr* attr, int, ibv_qp_init_attr* init) {
    if (qp == nullptr || attr == nullptr || init == nullptr) {
        return EINVAL;
    }
    auto& shim = shim_of<ShimQp>(qp);
    std::unique_lock lock(prdma::verbs::shim_context(qp->context).control_mutex());
    prdma::Result<prdma::rdma::QpAttr> now = shim.handle->attributes();
    lock.unlock();
    if (!now.ok()) {
        return prdma::verbs::errno_of(now.error().code());
    }
    const prdma::rdma::QpAttr& a = now.value();
    *attr = {};
    attr->qp_state = prdma::verbs::verbs_state(a.state);
    attr->cur_qp_state = attr->qp_state;
    attr->path_mtu = static_cast<ibv_mtu>(a.path_mtu);
    attr->qp_access_flags = prdma::verbs::verbs_access(a.access);
    attr->rq_psn = a.rq_psn;
    attr->sq_psn = a.sq_psn;
    attr->dest_qp_num = a.dest_qpn;
    attr->cap = prdma::verbs::verbs_caps(shim.caps);
    attr->ah_attr.is_global = shim.ud ? 0 : 1; // a UD QP has no destination of its own
    std::memcpy(attr->ah_attr.grh.dgid.raw, a.dest_gid.raw.data(),
                sizeof(attr->ah_attr.grh.dgid.raw));
    attr->ah_attr.port_num = a.port;
    attr->port_num = a.port;
    attr->max_rd_atomic = a.max_rd_atomic;
    attr->max_dest_rd_atomic = a.max_dest_rd_atomic;
    attr->min_rnr_timer = a.min_rnr_timer;
    attr->timeout = a.timeout;
    attr->retry_cnt = a.retry_cnt;
    attr->rnr_retry = a.rnr_retry;
    attr->qkey = a.qkey;
    *init = {};
    init->qp_context = qp->qp_context;
    init->send_cq = qp->send_cq;
    init->recv_cq = qp->recv_cq;
    init->srq = qp->srq;
    init->cap = attr->cap;
    init->qp_type = shim.ud ? IBV_QPT_UD : IBV_QPT_RC;
    init->sq_sig_all = shim.signal_all ? 1 : 0;
    qp->state = attr->qp_state;
    return 0;
}

int ibv_destroy_qp(ibv_qp* qp) {
    if (qp == nullptr) {
        return EINVAL;
    }
    std::unique_ptr<ShimQp> shim(&shim_of<ShimQp>(qp));
    ShimContext& context = prdma::verbs::shim_context(qp->context);
    std::uint32_t reported = 0;
    if (const int error = prdma::verbs::destroy_and_wait(
            "ibv_destroy_qp", context, *shim->handle,
            [&] { reported = prdma::verbs::forget_qp_events(context, qp); });
        error != 0) {
        (void)shim.release(); // still the caller's
        return error;
    }
    prdma::verbs::release_kept(shim->handle);
    prdma::verbs::release_kept(shim->batch);
    prdma::verbs::wait_qp_acks(qp, reported);
    pthread_cond_destroy(&qp->cond);
    pthread_mutex_destroy(&qp->mutex);
    prdma::verbs::release_context(context);
    return 0;
}

} // extern "C"
