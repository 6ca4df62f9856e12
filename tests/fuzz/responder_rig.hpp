// The responder harness's test bed, built once per process: EAL (--no-huge), rings made into a
// net_ring port with two queues, one swroce device on it (two queue groups) and one RC QP on group
// 0, connected to a peer that exists only as the frames the fuzzer writes. The QP's PD holds four
// regions inside one DMA buffer, each surrounded by guard bytes:
//
//   rw     remote write, read, atomic
//   ro     remote read only
//   wo     remote write only
//   local  local write only: the receive buffers and the requester's READ / atomic targets
//
// run() takes one input through the device and checks, after it: no byte outside what a valid
// request may touch changed (guards, the read-only region, the local region outside posted
// buffers), no READ response or atomic ACK carried guard bytes, every frame the device sent is a
// well-formed RoCEv2 (or ARP) frame with a valid ICRC, and no work request completed that was not
// posted, or twice. A broken rule aborts with what and where, which libFuzzer reports as a crash.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <prdma/eal.hpp>
#include <prdma/mem/dma_memory.hpp>
#include <prdma/rdmadev/rdmadev.hpp>

#include "frame_fixup.hpp"
#include "responder_input.hpp"

struct rte_ring;
struct rte_mempool;
struct rte_mbuf;

namespace prdma::fuzz {

class ResponderRig {
public:
    // The one rig of this process (EAL starts once); aborts with a message if it cannot be built.
    static ResponderRig& instance();

    ResponderRig(const ResponderRig&) = delete;
    ResponderRig& operator=(const ResponderRig&) = delete;
    ~ResponderRig();

    void run(const ResponderInput& input);

private:
    ResponderRig();
    void make_port_and_device();
    void make_objects();
    void connect(const ResponderInput& input);
    void post_work(const ResponderInput& input);
    // Copies a frame into an mbuf, fixes it up and queues it for the device; false when no mbuf.
    bool inject(const InputFrame& frame);
    // Polls until the device has taken every queued frame and answered, checking what it sends.
    void drive();
    void check_sent(const rte_mbuf* mbuf) const;
    void check_completion(const rdma::WorkCompletion& wc);
    void check_memory(const ResponderInput& input) const;
    void print_counters();

    std::optional<Eal> eal_;
    // Per port queue (= queue group): what the device receives, and what it sends.
    std::array<rte_ring*, 2> to_device_{};
    std::array<rte_ring*, 2> from_device_{};
    rte_mempool* pool_ = nullptr;
    rdma::DeviceId device_ = rdma::invalid_device;
    std::optional<rdma::Context> context_;
    rdma::ProtectionDomain pd_;
    rdma::CompletionQueue cq_;
    rdma::QueuePair qp_;
    std::optional<mem::DmaBuffer> buffer_;
    std::array<rdma::MemoryRegionHandle, fixup_regions> regions_;
    std::vector<std::uint8_t> pristine_;                 // the buffer as every input starts with it
    std::map<std::string, std::uint64_t> last_counters_; // PRDMA_FUZZ_DEBUG
    FixupTarget target_;
    // Per input: what completed, and whether guard bytes may legitimately appear in a response
    // (the input itself carried a run of them into a region).
    std::array<std::uint8_t, 32> completed_{};
    bool requester_work_ = false;
    bool receives_ = false;
    bool guard_runs_in_input_ = false;
};

} // namespace prdma::fuzz
