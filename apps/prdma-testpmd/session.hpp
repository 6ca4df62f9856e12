// A prdma-testpmd session: the device and everything the commands create on it (testpmd's ports
// and forwarding configuration), and the forwarding lcores that run the data path. Every member
// function runs on the main lcore, which never polls a CQ or posts a WR: it asks the lcores, and
// it changes what they read only while they are parked.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <prdma/mem/dma_memory.hpp>
#include <prdma/rdmadev/rdmadev.hpp>
#include <prdma/status.hpp>

#include "fwd_lcore.hpp"
#include "peer_channel.hpp"

namespace prdma::testpmd {

struct SessionConfig {
    std::string device; // empty: the first rdma device
    std::string peer_host;
    std::uint16_t peer_port = 18515;
    FwdConfig fwd;
    const FwdEngine* engine = &write_engine;
    bool srq = false;              // each lcore's QPs receive from one SRQ (srq_slots receives)
    bool ud = false;               // the QPs are UD: udsend and rxonly
    bool selective_repeat = false; // RC QPs recover by selective repeat (QpAttr)
};

struct QpEntry {
    rdma::QueuePair qp;
    std::optional<mem::DmaBuffer> buffer; // set once the QP exists
    rdma::MemoryRegionHandle mr;
    unsigned lcore = 0; // index into the session's lcores
    unsigned slot = 0;  // index into that lcore's streams
    std::optional<rdma::ConnectionDescriptor> peer;
};

// `register mr`: a buffer of the user's, and its fast-register region once `fast-register` ran.
struct UserMr {
    mem::DmaBuffer buffer;
    rdma::MemoryRegionHandle mr;
    mem::AccessFlags access;
    rdma::MemoryRegionHandle fast_reg;
    std::vector<std::uint64_t> pages; // read by the device when the FAST_REG executes
    std::uint32_t fast_key = 0;       // the key the last FAST_REG gave it
    bool fast_registered = false;
};

class Session {
public:
    static Result<std::unique_ptr<Session>> create(const SessionConfig& config);
    Session(const Session&) = delete;
    Session& operator=(const Session&) = delete;
    Session(Session&&) = delete;
    Session& operator=(Session&&) = delete;
    // Stops forwarding, releases everything while the lcores still answer, then ends them.
    ~Session();

    // QPs (session_qp.cpp).
    Status create_qp();
    Status set_qps(unsigned count);
    Status connect_qp(unsigned index);
    Status connect_all();
    Status connect_qp_from(unsigned index, std::string_view hex);
    Result<std::string> qp_descriptor(unsigned index) const;
    Status destroy_qp(unsigned index);
    Status sync_peer();

    // Forwarding (session_fwd.cpp).
    Status start(bool tx_first);
    Status stop();
    [[nodiscard]] bool forwarding() const { return forwarding_; }
    void show_fwd_stats() const;
    void clear_stats();
    Status set_engine(std::string_view name);
    Status set_mix(std::string_view list);
    Status set_fwd_value(std::string_view what, std::uint64_t value);
    Status set_fault(std::string_view kind, std::string_view rate, std::string_view direction);
    void show_config() const;

    // Memory regions (session_mr.cpp).
    Status register_mr(std::uint64_t size, std::string_view access);
    Status fast_register(unsigned mr, unsigned qp);
    Status invalidate(unsigned mr, unsigned qp);

    // Displays (session_show.cpp).
    void show_device_info() const;
    void show_device_stats(bool all) const;
    void show_qps(std::optional<unsigned> index) const;
    void show_cqs() const;
    void show_mrs() const;
    void show_faults() const;

private:
    Session() = default;
    Status open_device(const SessionConfig& config);
    Status launch_lcores();
    Status create_srqs(unsigned workers);
    // The lcore stops between two bursts and waits; resume() lets it go on.
    Status park(FwdLcore& lcore);
    void resume(FwdLcore& lcore) const;
    Status park_all();
    void resume_all();
    Status wait_state(const FwdLcore& lcore, LcoreState state, std::chrono::milliseconds limit);
    // Polls the context until the pending control request `id` completes.
    Status await(std::uint64_t id);
    Status await_if_pending(const Status& status, std::uint64_t id);
    std::uint64_t next_request() { return ++last_request_; }
    Status check_qp(unsigned index, bool want_connected) const;
    Status check_rc_qp(unsigned qp, const char* what) const;
    Status check_stopped(const char* what) const;
    Status connect_with(unsigned index, const rdma::ConnectionDescriptor& peer);
    Status modify_qp(QpEntry& entry, const rdma::QpAttr& attr, rdma::QpAttrMask mask);
    // RESET to RTS; `sq_psn` is the PSN this side's descriptor told the peer.
    Status bring_up(QpEntry& entry, const rdma::ConnectionDescriptor& peer, std::uint32_t sq_psn);
    Status bring_up_ud(QpEntry& entry, std::uint32_t sq_psn);
    // --qp-type ud: the address handle (its WR handle) for the peer's host, made on first use,
    // and the peer QP added (once) to every lcore's destinations.
    Result<void*> ah_for(const rdma::ConnectionDescriptor& peer);
    Status add_ud_dest(void* ah, std::uint32_t qpn);
    Status post_from_lcore(unsigned qp, const rdma::SendWr& wr, const char* what);
    [[nodiscard]] std::vector<StreamStats> raw_stream_stats() const;
    [[nodiscard]] std::vector<StreamStats> stream_stats() const;
    void print_run_stats(double seconds) const;
    void teardown();

    SessionConfig config_;
    rdma::DeviceId device_ = rdma::invalid_device;
    std::optional<rdma::Context> context_;
    rdma::ProtectionDomain pd_;
    std::vector<rdma::CompletionQueue> cqs_; // one per forwarding lcore
    // With --srq, one per forwarding lcore (in its queue group), with its receive slots.
    std::vector<rdma::SharedReceiveQueue> srqs_;
    std::vector<mem::DmaBuffer> srq_buffers_;
    std::vector<rdma::MemoryRegionHandle> srq_mrs_;
    std::vector<std::unique_ptr<FwdLcore>> lcores_;
    std::vector<std::unique_ptr<QpEntry>> qps_; // null: destroyed (QP numbers are not reused)
    std::vector<UserMr> mrs_;
    std::vector<rdma::AddressHandle> ahs_; // --qp-type ud: one per peer host
    std::uint32_t mtu_bytes_ = 0;          // the port's: a datagram's largest
    std::vector<EngineKind> mix_{EngineKind::write, EngineKind::read, EngineKind::send,
                                 EngineKind::atomic};
    std::unique_ptr<PeerChannel> peer_;
    std::uint32_t max_inline_ = 0;
    std::uint8_t max_rd_atomic_ = 1;
    std::uint64_t last_request_ = 0;
    std::vector<rdma::ControlCompletion> finished_;
    bool forwarding_ = false;
    bool launched_ = false;
    // What `start` or `clear stats` saw, so reports cover the run.
    std::vector<StreamStats> baseline_;
    std::chrono::steady_clock::time_point started_{};
    std::chrono::steady_clock::time_point stopped_{};
};

} // namespace prdma::testpmd
