#include "perf_session.hpp"

#include <chrono>
#include <cstring>
#include <random>
#include <unistd.h>

namespace prdma::perf {

namespace {

using Clock = std::chrono::steady_clock;

template <typename T>
Error wrap(const Result<T>& result, const std::string& what) {
    return Error(result.error().code(), what + ": " + result.error().message());
}

} // namespace

Result<PerfSession> PerfSession::open(const PerfOptions& options) {
    rdma::DeviceId device = rdma::invalid_device;
    if (options.device.empty()) {
        const auto devices = rdma::device_list();
        if (devices.empty()) {
            return Error(
                StatusCode::invalid_parameter,
                "no prdma device: give one with --vdev=rdma_swroce0,port=<ethdev>,ip=<addr>");
        }
        device = devices.front();
    } else {
        auto found = rdma::find_device(options.device);
        if (!found) {
            return wrap(found, "device '" + options.device + "'");
        }
        device = found.value();
    }
    auto context = rdma::Context::open(device);
    if (!context) {
        return wrap(context, "open " + rdma::device_name(device));
    }
    PerfSession s(std::move(context.value()));
    s.device_ = device;
    s.out_reads_ = options.out_reads;
    s.qp_timeout_ = options.qp_timeout;
    s.selective_repeat_ = options.selective_repeat;

    const auto device_info = s.context_.device_info();
    if (!device_info) {
        return Error(device_info.error().code(), "query_device: " + device_info.error().message());
    }
    const rdma::DeviceAttr& attr = device_info->attr;
    // -o is both what a QP may have outstanding and what it accepts from its peer (perftest's).
    const unsigned max_reads = std::min(attr.max_qp_rd_atomic, attr.max_qp_init_rd_atomic);
    if (options.out_reads > max_reads) {
        return Error(StatusCode::invalid_parameter,
                     "-o " + std::to_string(options.out_reads) + ": the device allows at most " +
                         std::to_string(max_reads) + " outstanding reads/atomics");
    }
    if (options.inline_size > attr.max_inline_data) {
        return Error(StatusCode::invalid_parameter,
                     "-I " + std::to_string(options.inline_size) + ": the device inlines at most " +
                         std::to_string(attr.max_inline_data) + " bytes");
    }
    s.max_inline_ = options.inline_size;
    s.max_cqe_ = attr.max_cqe;
    return s;
}

Status PerfSession::allocate(const PerfOptions& options, std::uint32_t cycle_buffer) {
    PerfSession& s = *this;
    auto pd = s.context_.alloc_pd();
    if (!pd) {
        return wrap(pd, "alloc_pd");
    }
    s.pd_ = std::move(pd.value());
    const std::uint32_t depth = std::max(options.tx_depth, options.rx_depth);
    auto cq =
        s.context_.create_cq(std::min<std::uint32_t>(s.max_cqe_, 4 * depth * options.qps + 64));
    if (!cq) {
        return wrap(cq, "create_cq");
    }
    s.cq_ = std::move(cq.value());
    if (options.use_srq) {
        // perftest's SRQ: rx_depth receives, shared out among the QPs.
        auto srq = s.context_.create_srq(
            s.pd_, {.max_wr = receives_per_qp(options) * options.qps, .max_sge = 1});
        if (!srq) {
            return wrap(srq, "create_srq");
        }
        s.srq_ = std::move(srq.value());
    }
    for (unsigned i = 0; i < options.qps; ++i) {
        rdma::QpInitAttr init;
        init.pd = &s.pd_;
        init.send_cq = &s.cq_;
        init.recv_cq = &s.cq_;
        init.caps.max_send_wr = std::max<std::uint32_t>(options.tx_depth, 16);
        init.caps.max_recv_wr = std::max<std::uint32_t>(options.rx_depth, 16);
        init.caps.max_send_sge = 1;
        init.caps.max_recv_sge = 1;
        init.caps.max_inline_data = options.inline_size;
        init.srq = s.srq_ ? &s.srq_ : nullptr;
        init.type = options.ud ? rdma::QpType::ud : rdma::QpType::rc;
        auto qp = s.context_.create_qp(init);
        if (!qp) {
            return wrap(qp, "create_qp");
        }
        s.qps_.push_back(std::move(qp.value()));
    }
    s.ud_ = options.ud;
    std::uint64_t largest = 0;
    for (const std::uint64_t size : options.sizes) {
        largest = std::max(largest, size);
    }
    largest += options.ud ? grh_bytes : 0; // a receive holds the GRH too
    // perftest's BUFF_SIZE: the message, at least a page ("cycle buffer"), page aligned.
    s.slot_ = (std::max<std::uint64_t>(largest, cycle_buffer) + cycle_buffer - 1) / cycle_buffer *
              cycle_buffer;
    s.verify_ = verify_buffers(options);
    const std::uint64_t bytes =
        (2 * s.slot_ + std::uint64_t{s.verify_.slots} * s.verify_.stride) * options.qps;
    auto buffer = mem::DmaBuffer::allocate(bytes, cycle_buffer);
    if (!buffer) {
        return wrap(buffer, "allocate " + std::to_string(bytes) + " bytes");
    }
    s.buffer_.emplace(std::move(buffer.value()));
    auto mr = s.pd_.register_memory(s.buffer_->data(), s.buffer_->size(),
                                    mem::access_local_write | mem::access_remote_write |
                                        mem::access_remote_read | mem::access_remote_atomic);
    if (!mr) {
        return wrap(mr, "register_memory");
    }
    s.mr_ = std::move(mr.value());
    return {};
}

Result<PortInfo> PerfSession::wait_port_active(int gid_index) {
    auto port = rdma::wait_port_active(context_, 1, std::chrono::seconds(20));
    if (!port) {
        return Error(port.code(), device_name() + ": " + port.error().message());
    }
    if (gid_index < 0 || static_cast<std::size_t>(gid_index) >= port->gids.size()) {
        return Error(StatusCode::invalid_parameter,
                     "-x " + std::to_string(gid_index) + ": the port has " +
                         std::to_string(port->gids.size()) + " GID(s)");
    }
    PortInfo info;
    info.active_mtu = port->attr.active_mtu;
    info.link_speed_mbps = port->attr.link_speed_mbps;
    info.gid = port->gids[static_cast<std::size_t>(gid_index)];
    return info;
}

std::vector<KeyMessage> PerfSession::local_keys(const PortInfo& port) const {
    std::random_device entropy;
    std::vector<KeyMessage> keys(qps_.size());
    for (unsigned i = 0; i < keys.size(); ++i) {
        keys[i].lid = 0;
        keys[i].out_reads = out_reads_;
        keys[i].qpn = qps_[i].qpn();
        keys[i].psn = entropy() & 0xffffff;
        keys[i].rkey = mr_.rkey();
        keys[i].vaddr = reinterpret_cast<std::uint64_t>(receive_half(i));
        keys[i].gid = port.gid;
    }
    return keys;
}

// -c UD: each QP to RTS with perftest's Q_Key, and an address handle to its peer's GID (which may
// pend while ARP or ND finds the peer).
Status PerfSession::connect_ud(const std::vector<KeyMessage>& mine,
                               const std::vector<KeyMessage>& theirs) {
    for (unsigned i = 0; i < qps_.size(); ++i) {
        rdma::QpAttr attr;
        attr.state = rdma::QpState::init;
        attr.qkey = ud_qkey;
        Status st =
            qps_[i].modify(attr, rdma::qp_attr_state | rdma::qp_attr_port | rdma::qp_attr_qkey);
        attr.state = rdma::QpState::rtr;
        st = st.ok() ? qps_[i].modify(attr, rdma::qp_attr_state) : st;
        attr.state = rdma::QpState::rts;
        attr.sq_psn = mine[i].psn;
        st = st.ok() ? qps_[i].modify(attr, rdma::qp_attr_state | rdma::qp_attr_sq_psn) : st;
        if (!st.ok()) {
            return Error(st.error().code(), "UD QP " + std::to_string(qps_[i].qpn()) +
                                                " to RTS: " + st.error().message());
        }
        rdma::AhAttr to;
        to.dest_gid = theirs[i].gid;
        const std::uint64_t request = 0x414800000ULL + i; // "AH" + QP index
        auto ah = pd_.create_ah(to, request);
        if (!ah) {
            return wrap(ah, "create_ah");
        }
        if (!ah->ready()) {
            if (Status resolved = wait_for_control(request, "create_ah"); !resolved.ok()) {
                return resolved;
            }
        }
        ahs_.push_back(std::move(ah.value()));
        peer_qpns_.push_back(theirs[i].qpn);
    }
    return {};
}

Status PerfSession::connect(const std::vector<KeyMessage>& mine,
                            const std::vector<KeyMessage>& theirs, rdma::Mtu mtu) {
    if (ud_) {
        return connect_ud(mine, theirs); // run_test kept the sizes within the MTU
    }
    for (unsigned i = 0; i < qps_.size(); ++i) {
        rdma::ConnectionDescriptor
            peer; // no MAC: the device resolves it (ARP over IPv4, ND over IPv6)
        peer.qpn = theirs[i].qpn;
        peer.psn = theirs[i].psn;
        peer.gid = theirs[i].gid;
        rdma::ConnectOptions options;
        options.path_mtu = mtu;
        options.timeout = qp_timeout_;
        options.selective_repeat = selective_repeat_;
        options.max_dest_rd_atomic = static_cast<std::uint8_t>(mine[i].out_reads);
        options.max_rd_atomic =
            static_cast<std::uint8_t>(std::min(mine[i].out_reads, theirs[i].out_reads));
        options.sq_psn = mine[i].psn;                      // what our key message told the peer
        const std::uint64_t request = 0x5254520000ULL + i; // "RTR" + QP index
        Status st = qps_[i].connect(peer, options, request);
        if (st.code() == StatusCode::pending) {
            if (Status resolved = wait_for_control(request, "QP to RTR"); !resolved.ok()) {
                return resolved;
            }
            st = qps_[i].connect(peer, options); // on from RTR
        }
        if (!st.ok()) {
            return Error(st.error().code(), "connecting QP " + std::to_string(qps_[i].qpn()) +
                                                ": " + st.error().message());
        }
    }
    return {};
}

// Keeps the device running until control request `request` (`what`: an RTR or an address handle
// resolving the peer's MAC) completes, for at most 10 s.
Status PerfSession::wait_for_control(std::uint64_t request, const char* what) {
    const auto deadline = Clock::now() + std::chrono::seconds(10);
    rdma::ControlCompletion done[1];
    for (;;) {
        drive();
        if (context_.poll_control(done) == 1 && done[0].request_id == request) {
            break;
        }
        if (Clock::now() > deadline) {
            return Error(StatusCode::not_connected,
                         std::string(what) + ": the peer's address did not resolve within 10 s");
        }
    }
    if (done[0].status != StatusCode::ok) {
        return Error(done[0].status, std::string(what) + ": " + done[0].message);
    }
    return {};
}

std::string PerfSession::device_name() const {
    return rdma::device_name(device_);
}

void PerfSession::close() {
    ahs_.clear();
    qps_.clear();
    srq_ = rdma::SharedReceiveQueue{}; // goes with its last QP if a QP's destroy still pends
    mr_ = rdma::MemoryRegionHandle{};
    cq_ = rdma::CompletionQueue{};
    pd_ = rdma::ProtectionDomain{};
}

} // namespace prdma::perf
