// The RDMA resources of one prdma-perf run, laid out as perftest lays out its own so the numbers
// mean the same: one buffer registered once, per QP a send half and a receive half of
// max(message size, page size) bytes each; the peer WRITEs/READs in our receive half. --verify's
// own buffers (options.hpp: VerifyBuffers), when a side needs them, follow in the same region.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include <prdma/mem/dma_memory.hpp>
#include <prdma/rdmadev/fastpath.hpp>
#include <prdma/rdmadev/rdmadev.hpp>

#include "options.hpp"
#include "perftest_wire.hpp"

namespace prdma::perf {

struct PortInfo {
    rdma::Mtu active_mtu = rdma::Mtu::mtu_1024;
    rdma::Gid gid{};
    std::uint64_t link_speed_mbps = 0;
};

class PerfSession {
public:
    // Opens the device (--dev or the first one) and checks the options against its limits.
    static Result<PerfSession> open(const PerfOptions& options);
    // PD, CQ, QPs and the registered buffer, once both sides agreed on the page size.
    Status allocate(const PerfOptions& options, std::uint32_t cycle_buffer);

    // Waits (driving the device) until the port is up: memif's link comes up once both sides
    // are there.
    Result<PortInfo> wait_port_active(int gid_index);

    // Our key messages, one per QP (perftest's set_up_connection).
    std::vector<KeyMessage> local_keys(const PortInfo& port) const;
    // INIT -> RTR -> RTS against the peer's keys; RTR may go pending while ARP finds the peer.
    Status connect(const std::vector<KeyMessage>& mine, const std::vector<KeyMessage>& theirs,
                   rdma::Mtu mtu);

    // Runs the device without taking completions.
    void drive() const {
        if (cq_) {
            (void)rdma::poll_cq(cq_, {});
        }
    }

    [[nodiscard]] std::uint8_t* send_half(unsigned qp) const {
        return base() + static_cast<std::size_t>(qp) * slot_;
    }
    [[nodiscard]] std::uint8_t* receive_half(unsigned qp) const {
        return base() + static_cast<std::size_t>(qps_.size() + qp) * slot_;
    }
    [[nodiscard]] std::uint64_t slot() const { return slot_; }
    // --verify: message k's own buffer on QP qp (k modulo the slots).
    [[nodiscard]] std::uint8_t* verify_buffer(unsigned qp, std::uint64_t k) const {
        return base() + 2 * qps_.size() * slot_ +
               (static_cast<std::size_t>(qp) * verify_.slots + k % verify_.slots) * verify_.stride;
    }
    [[nodiscard]] std::uint32_t verify_slots() const { return verify_.slots; }
    [[nodiscard]] std::uint32_t lkey() const { return mr_.lkey(); }
    [[nodiscard]] const rdma::QueuePair& qp(unsigned i) const { return qps_[i]; }
    // A receive for QP `i`: into its own queue, or under --use-srq into the SRQ every QP takes
    // from. False when the queue is full.
    [[nodiscard]] bool post_receive(unsigned i, const rdma::RecvWr& wr) const {
        const std::span<const rdma::RecvWr> one(&wr, 1);
        return (srq_ ? rdma::post_srq_recv(srq_, one) : rdma::post_recv(qps_[i], one)) == 1;
    }
    [[nodiscard]] unsigned qp_count() const { return static_cast<unsigned>(qps_.size()); }
    [[nodiscard]] const rdma::CompletionQueue& cq() const { return cq_; }
    [[nodiscard]] const rdma::Context& context() const { return context_; }
    [[nodiscard]] std::uint32_t max_inline() const { return max_inline_; }
    [[nodiscard]] std::string device_name() const;

    // -c UD: where QP `qp`'s SENDs go (its peer's QP through an address handle); nothing for RC.
    void address(unsigned qp, rdma::SendWr& wr) const {
        if (ud_) {
            wr.ud = {ahs_[qp].wr_handle(), peer_qpns_[qp], ud_qkey};
        }
    }
    // The bytes a receive needs for a message of `size`: under -c UD the GRH first.
    [[nodiscard]] std::uint32_t receive_length(std::uint64_t size) const {
        return static_cast<std::uint32_t>(size + (ud_ ? grh_bytes : 0));
    }

    // Releases QPs, SRQ, MR, CQ and PD, in that order (the port stays until EAL stops).
    void close();

private:
    Status wait_for_control(std::uint64_t request, const char* what);
    Status connect_ud(const std::vector<KeyMessage>& mine, const std::vector<KeyMessage>& theirs);
    static constexpr std::uint32_t ud_qkey = 0x11111111; // perftest's DEF_QKEY
    static constexpr std::uint32_t grh_bytes = 40;
    explicit PerfSession(rdma::Context context) : context_(std::move(context)) {}
    [[nodiscard]] std::uint8_t* base() const { return static_cast<std::uint8_t*>(buffer_->data()); }

    rdma::Context context_;
    rdma::ProtectionDomain pd_;
    rdma::CompletionQueue cq_;
    rdma::SharedReceiveQueue srq_; // --use-srq
    std::vector<rdma::QueuePair> qps_;
    bool ud_ = false;                      // -c UD
    std::vector<rdma::AddressHandle> ahs_; // -c UD: one per QP, to its peer
    std::vector<std::uint32_t> peer_qpns_;
    std::optional<mem::DmaBuffer> buffer_; // allocated once both sides agreed on the page size
    rdma::MemoryRegionHandle mr_;
    std::uint64_t slot_ = 0;
    VerifyBuffers verify_;
    std::uint32_t out_reads_ = 16;
    std::uint8_t qp_timeout_ = 14;
    bool selective_repeat_ = false; // --selective-repeat
    std::uint32_t max_inline_ = 0;
    std::uint32_t max_cqe_ = 0;
    rdma::DeviceId device_ = rdma::invalid_device;
};

} // namespace prdma::perf
