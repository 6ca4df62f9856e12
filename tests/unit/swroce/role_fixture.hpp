// A test bed for driving swroce's engine roles directly (engine.hpp): a real swroce device on a
// net_ring port, one RC QP connected to a peer that exists only as the frames a test crafts, and
// the QP's driver object reached through its handle. Nothing polls the QP's queue group (no
// poll_cq, no poll_control while a test runs), so respond(), complete(), run_requester() and the
// rest run on the test thread alone and every frame a role builds stays in the test's TxBatch.
//
// The QP's PD holds two regions inside one DMA buffer, with guard bytes around the remote one:
//
//   remote  remote write, read and atomic (what the peer's requests name)
//   local   receive buffers, send and WRITE sources, READ and atomic targets
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <prdma/mem/dma_memory.hpp>
#include <prdma/rdmadev/rdmadev.hpp>
#include <prdma/roce/packet.hpp>

#include "engine.hpp"

struct rte_ring;

namespace prdma::swroce::test {

inline constexpr std::uint32_t peer_qpn = 0xabc;
inline constexpr std::uint32_t peer_ip = 0x0a000001;
inline constexpr std::uint32_t our_ip = 0x0a000002;
inline constexpr roce::MacAddress peer_mac = {0x02, 0, 0, 0, 0, 0x01};
inline constexpr std::uint32_t rq_psn = 1000; // the responder's first expected PSN
inline constexpr std::uint32_t sq_psn = 5000; // the requester's first PSN
inline constexpr std::uint32_t mtu = 1024;

inline constexpr std::size_t buffer_size = std::size_t{2} << 20;
inline constexpr std::size_t remote_offset = 64 * 1024; // guards before and after it
inline constexpr std::size_t remote_length = 64 * 1024;
inline constexpr std::size_t local_offset = 256 * 1024;
inline constexpr std::size_t local_length = 1536 * 1024; // a READ past ResponseMap::capacity
inline constexpr std::uint8_t guard_byte = 0xee;

// The frames a role put into a TxBatch, parsed (ICRC verified); owns the mbufs and frees them.
class SentFrames {
public:
    SentFrames() = default;
    SentFrames(const SentFrames&) = delete;
    SentFrames& operator=(const SentFrames&) = delete;
    SentFrames(SentFrames&& other) noexcept = default;
    SentFrames& operator=(SentFrames&&) = delete;
    ~SentFrames();

    // Takes every mbuf of `tx` (tx is empty afterwards); a frame that does not parse fails the
    // test.
    static SentFrames take(TxBatch& tx);

    [[nodiscard]] std::size_t size() const noexcept { return frames_.size(); }
    [[nodiscard]] const roce::ParsedFrame& operator[](std::size_t i) const { return frames_[i]; }

private:
    std::vector<rte_mbuf*> mbufs_;
    std::vector<roce::ParsedFrame> frames_; // point into mbufs_' data, which never moves
};

class RoleTest : public ::testing::Test {
protected:
    void SetUp() override;
    void TearDown() override;

    // RESET, then INIT / RTR / RTS with the peer above: every bit of connection state is new.
    void connect(std::uint32_t responder_psn, std::uint32_t requester_psn);

    [[nodiscard]] SwroceQp& qp() const { return *qp_object_; }
    [[nodiscard]] SwroceDevice& dev() const { return *device_object_; }
    [[nodiscard]] SwroceCounters& counters() const { return dev().counters_of(qp()); }

    // ---- memory ----
    [[nodiscard]] std::uint8_t* remote(std::size_t offset) const;
    [[nodiscard]] std::uint64_t remote_va(std::size_t offset) const;
    [[nodiscard]] std::uint32_t remote_rkey() const { return remote_mr_.rkey(); }
    [[nodiscard]] std::uint8_t* local(std::size_t offset) const;
    [[nodiscard]] std::uint64_t local_va(std::size_t offset) const;
    [[nodiscard]] std::uint32_t local_lkey() const { return local_mr_.lkey(); }
    // Bytes of the buffer that differ from their state after SetUp (guards, pattern).
    [[nodiscard]] std::vector<std::size_t> changed_bytes() const;
    // Commits the buffer's current state as the reference changed_bytes() compares with.
    void snapshot();

    // ---- work ----
    void post_receive(std::uint64_t wr_id, std::size_t local_off, std::uint32_t length);
    // Posts with send_defer, so the post rings no doorbell: the test runs the requester itself.
    void post_deferred(const rdma::SendWr& posted);
    [[nodiscard]] rdma::SendWr write_wr(std::uint64_t wr_id, std::size_t local_off,
                                        std::uint32_t length, std::uint64_t remote_addr) const;
    [[nodiscard]] rdma::SendWr read_wr(std::uint64_t wr_id, std::size_t local_off,
                                       std::uint32_t length, std::uint64_t remote_addr) const;
    [[nodiscard]] static std::vector<rdma::WorkCompletion> drain(SwroceCq& cq);
    [[nodiscard]] std::vector<rdma::WorkCompletion> send_completions() const {
        return drain(*qp().send_cq);
    }
    [[nodiscard]] std::vector<rdma::WorkCompletion> recv_completions() const {
        return drain(*qp().recv_cq);
    }

    // ---- frames ----
    // Headers of a packet from the peer to our QP.
    [[nodiscard]] roce::FrameHeaders from_peer(roce::Opcode opcode, std::uint32_t psn) const;
    // Builds the frame, parses it back as rx.cpp would and hands it to respond() / complete().
    void respond_to(const roce::FrameHeaders& h, std::span<const std::uint8_t> payload = {});
    void complete_with(const roce::FrameHeaders& h, std::uint64_t now,
                       std::span<const std::uint8_t> payload = {});
    // Puts the frame on the port's receive queue, for the group's next progress to take.
    void deliver(const roce::FrameHeaders& h, std::span<const std::uint8_t> payload = {});
    // An ACK / NAK (AETH `syndrome`) from the peer's responder for `psn`.
    void acknowledge(std::uint32_t psn, std::uint8_t syndrome, std::uint64_t now);
    // run_requester() into a fresh batch, and what it produced.
    SentFrames run_requester_once(std::uint64_t now);

    static std::vector<std::uint8_t> pattern(std::size_t length, std::uint8_t seed);
    static std::uint64_t tsc();

    // The ring the port transmits into: what the wire holds until a test takes it.
    [[nodiscard]] rte_ring* wire() const { return from_device_; }

private:
    void make_port_and_device();
    void make_objects();

    std::string tag_;
    rte_ring* to_device_ = nullptr;
    rte_ring* from_device_ = nullptr;
    rdma::DeviceId device_ = rdma::invalid_device;
    std::optional<rdma::Context> context_;
    rdma::ProtectionDomain pd_;
    rdma::CompletionQueue send_cq_;
    rdma::CompletionQueue recv_cq_;
    rdma::QueuePair qp_;
    std::optional<mem::DmaBuffer> buffer_;
    rdma::MemoryRegionHandle remote_mr_;
    rdma::MemoryRegionHandle local_mr_;
    std::vector<std::uint8_t> reference_;
    SwroceDevice* device_object_ = nullptr;
    SwroceQp* qp_object_ = nullptr;
};

} // namespace prdma::swroce::test
