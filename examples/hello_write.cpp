// The shortest correct prdma program: open a device, register memory, connect a queue pair,
// WRITE, poll. The QP connects to itself through a DPDK ring port that loops back, so it needs
// no peer; with two processes, each exports its descriptor and connects to the other's.
//
//   hello_write --vdev=net_ring0 --vdev=rdma_swroce0,port=net_ring0,ip=10.0.0.1
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <prdma/eal.hpp>
#include <prdma/mem/dma_memory.hpp>
#include <prdma/rdmadev/fastpath.hpp>
#include <prdma/rdmadev/rdmadev.hpp>

using namespace prdma;

namespace {

// Every control call says what went wrong; this example stops at the first failure.
void check(const Status& status, const char* what) {
    if (!status.ok()) {
        std::fprintf(stderr, "hello_write: %s: %s\n", what, status.error().to_string().c_str());
        std::exit(1);
    }
}

template <typename T>
T must(Result<T> result, const char* what) {
    check(result.ok() ? Status() : Status(result.error()), what);
    return std::move(result.value());
}

} // namespace

int main(int argc, char** argv) {
    int consumed = 0;
    Eal eal = must(Eal::start_from_argv(argc, argv, &consumed), "EAL");
    rdma::Context context =
        must(rdma::Context::open(must(rdma::find_device("rdma_swroce0"), "device")), "open");
    rdma::ProtectionDomain pd = must(context.alloc_pd(), "PD");
    rdma::CompletionQueue cq = must(context.create_cq(16), "CQ");
    rdma::QueuePair qp = must(context.create_qp({.pd = &pd, .send_cq = &cq, .recv_cq = &cq}), "QP");
    mem::DmaBuffer buffer = must(mem::DmaBuffer::allocate(8192), "memory");
    rdma::MemoryRegionHandle mr =
        must(pd.register_memory(buffer.data(), buffer.size(),
                                mem::access_local_write | mem::access_remote_write),
             "register");

    // The peer's connection descriptor travels out of band (TCP, a file, ...); here it is ours.
    std::uint8_t wire[sizeof(rdma::ConnectionDescriptor)];
    std::uint32_t length = sizeof(wire);
    check(qp.export_connection(&mr, wire, &length), "export");
    const rdma::ConnectionDescriptor peer = must(rdma::import_connection(wire, length), "import");
    check(qp.connect(peer), "connect");

    // WRITE the first 4 KiB of the buffer into the peer's region, 4 KiB in.
    constexpr char message[] = "hello, RDMA";
    auto* bytes = static_cast<char*>(buffer.data());
    std::memcpy(bytes, message, sizeof(message));
    const rdma::SendWr wr =
        rdma::write_wr(1, {reinterpret_cast<std::uint64_t>(bytes), 4096, mr.lkey()},
                       peer.address + 4096, peer.rkey);
    if (const rdma::PostResult posted = rdma::post_send(qp, {&wr, 1}); posted.posted != 1) {
        std::fprintf(stderr, "hello_write: post refused: %s\n", status_name(posted.reason).data());
        return 1;
    }

    // Polling drives the device; the completion says how the WRITE ended.
    rdma::WorkCompletion wc;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (rdma::poll_cq(cq, {&wc, 1}) == 0) {
        if (std::chrono::steady_clock::now() > deadline) {
            std::fprintf(stderr, "hello_write: no completion in 5 s\n");
            return 1;
        }
    }
    std::printf("WRITE %s: \"%s\"\n", rdma::wc_status_name(wc.status).data(), bytes + 4096);
    return wc.status == rdma::WcStatus::success && std::strcmp(bytes + 4096, message) == 0 ? 0 : 1;
}
