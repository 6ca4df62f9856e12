// Session: the device opened, one CQ per forwarding lcore (on the queue group of the same index),
// the lcores launched, and the waits the main lcore does on them and on the device.
#include "session.hpp"

#include <array>
#include <cstdio>
#include <thread>

#include <rte_launch.h>
#include <rte_lcore.h>

#include <prdma/format.hpp>

namespace prdma::testpmd {

namespace {
constexpr std::uint32_t cq_entries = 4096;
constexpr auto control_limit = std::chrono::seconds(10);
} // namespace

Result<std::unique_ptr<Session>> Session::create(const SessionConfig& config) {
    std::unique_ptr<Session> session(new Session()); // NOLINT: the constructor is private
    session->config_ = config;
    session->peer_ = std::make_unique<PeerChannel>(config.peer_host, config.peer_port);
    if (Status opened = session->open_device(config); !opened) {
        return opened.error();
    }
    if (Status launched = session->launch_lcores(); !launched) {
        return launched.error();
    }
    return session;
}

Status Session::open_device(const SessionConfig& config) {
    Result<rdma::DeviceId> device =
        config.device.empty()
            ? (rdma::device_count() > 0
                   ? Result<rdma::DeviceId>(rdma::device_list().front())
                   : Result<rdma::DeviceId>(
                         Error(StatusCode::invalid_parameter,
                               "no rdma device: add --vdev=rdma_swroce0,port=...,ip=...")))
            : rdma::find_device(config.device);
    if (!device) {
        return device.error();
    }
    device_ = *device;
    Result<rdma::Context> context = rdma::Context::open(device_);
    if (!context) {
        return context.error();
    }
    context_.emplace(std::move(context.value()));
    Result<rdma::DeviceInfo> info = context_->device_info();
    if (!info) {
        return info.error();
    }
    max_inline_ = std::min<std::uint32_t>(info->attr.max_inline_data, 1024);
    if (config.fwd.inline_size > max_inline_) {
        return Error(StatusCode::invalid_parameter,
                     strformat("--inline %u: %s inlines at most %u bytes", config.fwd.inline_size,
                               rdma::device_name(device_).c_str(), max_inline_));
    }
    max_rd_atomic_ =
        std::max<std::uint8_t>(1, std::min<std::uint8_t>(info->attr.max_qp_rd_atomic, 16));
    mtu_bytes_ = info->ports.empty() ? rdma::mtu_bytes(rdma::Mtu::mtu_1024)
                                     : rdma::mtu_bytes(info->ports.front().attr.active_mtu);
    if (config.ud && !info->attr.capability_flags.has(rdma::cap_ud)) {
        return Error(StatusCode::not_supported, strformat("--qp-type ud: %s has no UD QPs",
                                                          rdma::device_name(device_).c_str()));
    }
    if (config.selective_repeat && !info->attr.capability_flags.has(rdma::cap_selective_repeat)) {
        return Error(StatusCode::not_supported,
                     strformat("--selective-repeat: %s recovers by go-back-N only",
                               rdma::device_name(device_).c_str()));
    }
    const unsigned workers = rte_lcore_count() - 1;
    if (workers == 0) {
        return Error(StatusCode::invalid_parameter,
                     "no forwarding lcore: give EAL two lcores or more (-l 0,1), the first runs "
                     "the prompt");
    }
    if (info->attr.max_queue_groups < workers) {
        return Error(StatusCode::invalid_parameter,
                     strformat("%u forwarding lcores need %u queue groups, and %s has %u: add "
                               "queues=%u to its devargs",
                               workers, workers, rdma::device_name(device_).c_str(),
                               info->attr.max_queue_groups, workers));
    }
    Result<rdma::ProtectionDomain> pd = context_->alloc_pd();
    if (!pd) {
        return pd.error();
    }
    pd_ = std::move(pd.value());
    for (unsigned group = 0; group < workers; ++group) {
        Result<rdma::CompletionQueue> cq =
            context_->create_cq(cq_entries, static_cast<std::uint16_t>(group));
        if (!cq) {
            return cq.error();
        }
        cqs_.push_back(std::move(cq.value()));
    }
    return config.srq ? create_srqs(workers) : Status{};
}

// --srq: one SRQ per forwarding lcore, in its queue group, with one buffer of receive slots for
// every QP the lcore drives.
Status Session::create_srqs(unsigned workers) {
    for (unsigned group = 0; group < workers; ++group) {
        Result<rdma::SharedReceiveQueue> srq = context_->create_srq(
            pd_, {.max_wr = srq_slots, .max_sge = 1}, static_cast<std::uint16_t>(group));
        if (!srq) {
            return srq.error();
        }
        srqs_.push_back(std::move(srq.value()));
        Result<mem::DmaBuffer> buffer = mem::DmaBuffer::allocate(srq_buffer_size, 4096);
        if (!buffer) {
            return buffer.error();
        }
        srq_buffers_.push_back(std::move(buffer.value()));
        Result<rdma::MemoryRegionHandle> mr = pd_.register_memory(
            srq_buffers_.back().data(), srq_buffer_size, mem::access_local_write);
        if (!mr) {
            return mr.error();
        }
        srq_mrs_.push_back(std::move(mr.value()));
    }
    return {};
}

Status Session::launch_lcores() {
    unsigned group = 0;
    unsigned lcore_id = 0;
    RTE_LCORE_FOREACH_WORKER(lcore_id) {
        auto lcore = std::make_unique<FwdLcore>();
        lcore->lcore_id = lcore_id;
        lcore->group = group;
        lcore->cq = cqs_[group];
        lcore->cq_handle = &cqs_[group];
        lcore->engine = config_.engine;
        lcore->config = config_.fwd;
        if (!srqs_.empty()) {
            lcore->use_srq = true;
            lcore->srq = srqs_[group];
            lcore->srq_buffer = static_cast<std::uint8_t*>(srq_buffers_[group].data());
            lcore->srq_lkey = srq_mrs_[group].lkey();
        }
        if (rte_eal_remote_launch(fwd_lcore_main, lcore.get(), lcore_id) != 0) {
            return Error(StatusCode::internal, strformat("cannot launch lcore %u", lcore_id));
        }
        lcores_.push_back(std::move(lcore));
        ++group;
    }
    launched_ = true;
    // Until an lcore has polled its CQ once, its queue group is unclaimed and the control path
    // may drive it too (ENGINE.md "Known limits": the claim has no handshake): no control call
    // before every group has its owner.
    for (const auto& lcore : lcores_) {
        if (Status claimed = wait_state(*lcore, LcoreState::idle, std::chrono::seconds(5));
            !claimed) {
            return claimed;
        }
    }
    return {};
}

Status Session::wait_state(const FwdLcore& lcore, LcoreState state,
                           std::chrono::milliseconds limit) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (lcore.state.load(std::memory_order_acquire) != state) {
        if (std::chrono::steady_clock::now() > deadline) {
            return Error(StatusCode::busy,
                         strformat("lcore %u did not answer within %lld ms", lcore.lcore_id,
                                   static_cast<long long>(limit.count())));
        }
        std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    return {};
}

Status Session::park(FwdLcore& lcore) {
    lcore.command.store(LcoreCommand::park, std::memory_order_release);
    return wait_state(lcore, LcoreState::parked, std::chrono::seconds(5));
}

void Session::resume(FwdLcore& lcore) const {
    lcore.command.store(forwarding_ ? LcoreCommand::forward : LcoreCommand::idle,
                        std::memory_order_release);
}

Status Session::park_all() {
    for (auto& lcore : lcores_) {
        if (Status parked = park(*lcore); !parked) {
            resume_all();
            return parked;
        }
    }
    return {};
}

void Session::resume_all() {
    for (auto& lcore : lcores_) {
        resume(*lcore);
    }
}

Status Session::await(std::uint64_t id) {
    const auto deadline = std::chrono::steady_clock::now() + control_limit;
    std::array<rdma::ControlCompletion, 8> done;
    for (;;) {
        for (auto it = finished_.begin(); it != finished_.end(); ++it) {
            if (it->request_id == id) {
                const rdma::ControlCompletion completion = *it;
                finished_.erase(it);
                if (completion.status != StatusCode::ok) {
                    return Error(completion.status, completion.message);
                }
                return {};
            }
        }
        const std::size_t count = context_->poll_control(done);
        finished_.insert(finished_.end(), done.begin(),
                         done.begin() + static_cast<std::ptrdiff_t>(count));
        if (count == 0) {
            if (std::chrono::steady_clock::now() > deadline) {
                return Error(StatusCode::busy, "the device did not finish the request within 10 s");
            }
            std::this_thread::sleep_for(std::chrono::microseconds(200));
        }
    }
}

Status Session::await_if_pending(const Status& status, std::uint64_t id) {
    return status.code() == StatusCode::pending ? await(id) : status;
}

Status Session::check_stopped(const char* what) const {
    if (forwarding_) {
        return Error(StatusCode::busy,
                     strformat("%s needs forwarding stopped: run `stop` first", what));
    }
    return {};
}

Status Session::check_qp(unsigned index, bool want_connected) const {
    if (index >= qps_.size() || !qps_[index]) {
        return Error(StatusCode::invalid_parameter,
                     strformat("no QP %u (`show qp` lists them, `create qp` makes one)", index));
    }
    if (want_connected && !qps_[index]->peer) {
        return Error(StatusCode::not_connected,
                     strformat("QP %u is not connected: `connect qp %u` first", index, index));
    }
    return {};
}

void Session::teardown() {
    if (forwarding_) {
        (void)stop();
    }
    // The lcores still poll: destroys and deregistrations that go through them complete.
    for (std::size_t i = 0; i < qps_.size(); ++i) {
        if (qps_[i]) {
            (void)destroy_qp(static_cast<unsigned>(i));
        }
    }
    for (UserMr& mr : mrs_) {
        const std::uint64_t id = next_request();
        if (mr.fast_reg) {
            (void)await_if_pending(mr.fast_reg.deregister(id), id);
        }
        const std::uint64_t id2 = next_request();
        (void)await_if_pending(mr.mr.deregister(id2), id2);
    }
    for (rdma::MemoryRegionHandle& mr : srq_mrs_) {
        const std::uint64_t id = next_request();
        (void)await_if_pending(mr.deregister(id), id);
    }
    // One at a time: each destroys its CQ on the way out, a control call, and a context takes
    // control calls from one thread at a time.
    for (auto& lcore : lcores_) {
        lcore->command.store(LcoreCommand::exit, std::memory_order_release);
        (void)wait_state(*lcore, LcoreState::exited, std::chrono::seconds(5));
    }
    if (launched_) {
        rte_eal_mp_wait_lcore();
    }
    if (peer_) {
        // Nothing polls this port any more; close it only once the peer's lcores stopped too.
        (void)peer_->leave(std::chrono::seconds(2));
    }
    for (rdma::SharedReceiveQueue& srq : srqs_) {
        // Its QPs are gone (the receives still in it go with it); busy if one could not be.
        if (Status gone = srq.destroy(); !gone) {
            std::fprintf(stderr, "prdma-testpmd: SRQ: %s\n", gone.error().to_string().c_str());
        }
    }
    for (rdma::AddressHandle& ah : ahs_) {
        (void)ah.destroy();
    }
    (void)pd_.destroy();
    if (context_) {
        (void)context_->close();
    }
}

Session::~Session() {
    teardown();
}

} // namespace prdma::testpmd
