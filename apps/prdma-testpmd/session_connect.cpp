// INIT, RTR, RTS as three modify() calls, each with a request id: QueuePair::connect() passes its
// request id to the RTR step only, so on a queue group another lcore polls its INIT and RTS
// could not pend, and that is every QP here (its lcore polls it from creation on). A UD QP has
// no peer to be brought up to: the peer's descriptor becomes an address handle instead, one of
// the destinations udsend sends to.
#include <algorithm>
#include <array>
#include <cstring>
#include <optional>

#include <prdma/format.hpp>

#include "session.hpp"

namespace prdma::testpmd {

namespace {

// The MAC a descriptor carries; none when it left it zero, and then ARP or ND finds it (on queue
// group 0).
std::optional<std::array<std::uint8_t, 6>> descriptor_mac(const rdma::ConnectionDescriptor& peer) {
    std::array<std::uint8_t, 6> mac{};
    std::memcpy(mac.data(), peer.mac, mac.size());
    if (std::all_of(mac.begin(), mac.end(), [](std::uint8_t b) { return b == 0; })) {
        return std::nullopt;
    }
    return mac;
}

rdma::QpAttr init_attributes() {
    rdma::QpAttr init;
    init.state = rdma::QpState::init;
    init.port = 1;
    init.access = mem::access_remote_write | mem::access_remote_read | mem::access_remote_atomic;
    return init;
}

rdma::QpAttr rtr_attributes(const rdma::ConnectionDescriptor& peer, std::uint8_t rd_atomic,
                            bool selective_repeat) {
    rdma::QpAttr rtr;
    rtr.state = rdma::QpState::rtr;
    rtr.path_mtu = rdma::Mtu::mtu_1024;
    rtr.dest_gid = peer.gid;
    rtr.dest_mac = descriptor_mac(peer);
    rtr.dest_qpn = peer.qpn;
    rtr.rq_psn = peer.psn;
    rtr.max_dest_rd_atomic = rd_atomic;
    rtr.min_rnr_timer = 12;
    rtr.selective_repeat = selective_repeat;
    return rtr;
}

rdma::QpAttr rts_attributes(std::uint32_t sq_psn, std::uint8_t rd_atomic) {
    rdma::QpAttr rts;
    rts.state = rdma::QpState::rts;
    rts.sq_psn = sq_psn;
    rts.timeout = 14;
    rts.retry_cnt = 7;
    rts.rnr_retry = 7; // infinite: a SEND waits for the peer's receive as long as it takes
    rts.max_rd_atomic = rd_atomic;
    return rts;
}

} // namespace

Status Session::modify_qp(QpEntry& entry, const rdma::QpAttr& attr, rdma::QpAttrMask mask) {
    const std::uint64_t id = next_request();
    return await_if_pending(entry.qp.modify(attr, mask, id), id);
}

Status Session::bring_up(QpEntry& entry, const rdma::ConnectionDescriptor& peer,
                         std::uint32_t sq_psn) {
    if (Status s = modify_qp(entry, init_attributes(),
                             rdma::qp_attr_state | rdma::qp_attr_port | rdma::qp_attr_access_flags);
        !s) {
        return s;
    }
    const rdma::QpAttrMask rtr_mask =
        rdma::qp_attr_state | rdma::qp_attr_path_mtu | rdma::qp_attr_dest | rdma::qp_attr_dest_qpn |
        rdma::qp_attr_rq_psn | rdma::qp_attr_max_dest_rd_atomic | rdma::qp_attr_min_rnr_timer |
        (config_.selective_repeat ? rdma::qp_attr_selective_repeat : rdma::QpAttrMask{});
    if (Status s = modify_qp(entry, rtr_attributes(peer, max_rd_atomic_, config_.selective_repeat),
                             rtr_mask);
        !s) {
        return s;
    }
    return modify_qp(entry, rts_attributes(sq_psn, max_rd_atomic_),
                     rdma::qp_attr_state | rdma::qp_attr_sq_psn | rdma::qp_attr_timeout |
                         rdma::qp_attr_retry_cnt | rdma::qp_attr_rnr_retry |
                         rdma::qp_attr_max_rd_atomic);
}

// A UD QP has no peer of its own: the Q_Key at INIT, then RTR and RTS (IBTA's UD transitions).
Status Session::bring_up_ud(QpEntry& entry, std::uint32_t sq_psn) {
    rdma::QpAttr attr;
    attr.state = rdma::QpState::init;
    attr.port = 1;
    attr.qkey = ud_qkey;
    if (Status s =
            modify_qp(entry, attr, rdma::qp_attr_state | rdma::qp_attr_port | rdma::qp_attr_qkey);
        !s) {
        return s;
    }
    attr.state = rdma::QpState::rtr;
    if (Status s = modify_qp(entry, attr, rdma::qp_attr_state); !s) {
        return s;
    }
    attr.state = rdma::QpState::rts;
    attr.sq_psn = sq_psn;
    return modify_qp(entry, attr, rdma::qp_attr_state | rdma::qp_attr_sq_psn);
}

// The session's address handle for the peer's GID: one per peer host, whatever its QPs.
Result<void*> Session::ah_for(const rdma::ConnectionDescriptor& peer) {
    for (const rdma::AddressHandle& ah : ahs_) {
        if (ah.attr().dest_gid == peer.gid) {
            return ah.wr_handle();
        }
    }
    rdma::AhAttr attr;
    attr.dest_gid = peer.gid;
    attr.dest_mac = descriptor_mac(peer);
    const std::uint64_t id = next_request();
    Result<rdma::AddressHandle> ah = pd_.create_ah(attr, id);
    if (!ah) {
        return ah.error();
    }
    // Owned by the session before anything may use it: lcores hold only its handle.
    ahs_.push_back(std::move(ah.value()));
    if (!ahs_.back().ready()) {
        if (Status made = await(id); !made) {
            ahs_.pop_back();
            return made.error();
        }
    }
    return ahs_.back().wr_handle();
}

Status Session::add_ud_dest(void* ah, std::uint32_t qpn) {
    FwdLcore& first = *lcores_.front();
    for (unsigned i = 0; i < first.ud_dest_count; ++i) {
        if (first.ud_dests[i].ah == ah && first.ud_dests[i].qpn == qpn) {
            return {}; // another local QP connected to the same peer QP
        }
    }
    if (first.ud_dest_count == max_ud_dests) {
        return Error(StatusCode::no_resources,
                     strformat("udsend sends to at most %u peer QPs", max_ud_dests));
    }
    if (Status parked = park_all(); !parked) {
        return parked;
    }
    for (auto& lcore : lcores_) {
        lcore->ud_dests[lcore->ud_dest_count++] = {.ah = ah, .qpn = qpn};
    }
    resume_all();
    return {};
}

} // namespace prdma::testpmd
