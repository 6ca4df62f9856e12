// The emulated IOMMU enforces prdma's DMA mapping of external memory (issue 15, section 2).
// Runs in the prdma-vm guest on a NIC bound to vfio-pci (tests/vm/guest.sh):
//
//   vm-dma-map-test EAL-OPTIONS   (one PCI ethdev allowed with -a, e.g. -a 0000:00:03.0)
//
// Application memory outside DPDK (anonymous 4 KiB pages) is registered with
// prdma::mem::ExternalMemory, which registers it with DPDK (rte_extmem_register) and maps it into
// every probed device (rte_dev_dma_map, here the VFIO container behind the vIOMMU). Frames whose
// bytes live in that memory are sent as external mbufs (rte_pktmbuf_attach_extbuf), so the NIC
// reads them from it by DMA:
//   1. mapped:   every frame is sent and the NIC completes them (mbufs come back).
//   2. unmapped: after ExternalMemory::unmap_device(), the same memory is still registered but no
//      longer in the IOMMU: the NIC's reads fault. The emulated IOMMU reports the fault to the
//      guest kernel ("DMAR: [DMA Read ...] Request device [00:03.0] fault addr ..."), which the
//      program reads back from /dev/kmsg, for an address inside the region; QEMU logs
//      "vtd_iommu_translate: detected translation failure". QEMU 7.2's virtio-net does not stop
//      on it: it completes the descriptors and sends nothing for them (vm_test.sh counts the
//      frames in test-bed host 2: the mapped phase's all arrive, none of these). Nothing blocks:
//      the fault is looked for until a deadline.
// Exit status 0 when the mapped phase sends with no fault and the unmapped one faults in the
// region.
#include <chrono>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <string>
#include <sys/mman.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>

#include <prdma/mem/external_memory.hpp>

namespace {

constexpr std::uint16_t ring_size = 256;
constexpr unsigned frames = 1024;
constexpr std::size_t region_size = 2U << 20U;
constexpr std::uint16_t frame_len = 64;

struct PhaseResult {
    unsigned sent = 0;
    std::uint64_t completed = 0;
};

void count_free(void* /*addr*/, void* opaque) {
    ++*static_cast<std::uint64_t*>(opaque);
}

// Sends `frames` frames whose bytes are at `va` in the external memory, one external mbuf each;
// gives up when tx_burst makes no progress for `patience`.
PhaseResult send_phase(std::uint16_t port, rte_mempool* pool, void* va, std::uint64_t& completed,
                       std::vector<rte_mbuf_ext_shared_info>& shinfo,
                       std::chrono::milliseconds patience) {
    PhaseResult result;
    const rte_iova_t iova = rte_mem_virt2iova(va);
    shinfo.assign(frames, rte_mbuf_ext_shared_info{});
    auto last_progress = std::chrono::steady_clock::now();
    while (result.sent < frames) {
        rte_mbuf_ext_shared_info& info = shinfo[result.sent];
        info.free_cb = count_free;
        info.fcb_opaque = &completed;
        rte_mbuf_ext_refcnt_set(&info, 1);
        rte_mbuf* m = rte_pktmbuf_alloc(pool);
        if (m == nullptr) {
            std::fprintf(stderr, "dma_map_test: mbuf pool empty\n");
            break;
        }
        rte_pktmbuf_attach_extbuf(m, va, iova, 2048, &info);
        m->data_off = 0;
        m->data_len = frame_len;
        m->pkt_len = frame_len;
        while (rte_eth_tx_burst(port, 0, &m, 1) == 0) {
            if (std::chrono::steady_clock::now() - last_progress > patience) {
                // Not the NIC's any more: give it back without counting it as completed.
                std::uint64_t ignored = 0;
                info.fcb_opaque = &ignored;
                rte_pktmbuf_free(m);
                result.completed = completed;
                return result;
            }
        }
        ++result.sent;
        last_progress = std::chrono::steady_clock::now();
    }
    result.completed = completed;
    return result;
}

// The kernel's log from now on: DMAR faults the IOMMU reported for `device` ("00:03.0") at an
// address in [iova, iova + length).
class FaultLog {
public:
    FaultLog() : fd_(open("/dev/kmsg", O_RDONLY | O_NONBLOCK)) {
        if (fd_ >= 0) {
            lseek(fd_, 0, SEEK_END);
        }
    }
    ~FaultLog() {
        if (fd_ >= 0) {
            close(fd_);
        }
    }
    FaultLog(const FaultLog&) = delete;
    FaultLog& operator=(const FaultLog&) = delete;
    [[nodiscard]] bool usable() const { return fd_ >= 0; }

    // NOLINTNEXTLINE(readability-make-member-function-const): it consumes the log
    unsigned faults_in(const std::string& device, rte_iova_t iova, std::size_t length) {
        unsigned count = 0;
        char record[1024];
        for (;;) {
            const ssize_t n = read(fd_, record, sizeof(record) - 1);
            if (n <= 0) {
                break; // EAGAIN: nothing more; EPIPE: a record was overwritten, read on
            }
            record[n] = '\0';
            const char* text = std::strchr(record, ';');
            if (text == nullptr || std::strstr(text, "DMAR") == nullptr ||
                std::strstr(text, ("[" + device + "]").c_str()) == nullptr) {
                continue;
            }
            const char* addr = std::strstr(text, "fault addr ");
            if (addr == nullptr) {
                continue;
            }
            const std::uint64_t at = std::strtoull(addr + 11, nullptr, 16);
            if (at >= iova && at < iova + length) {
                std::printf("dma_map_test: kernel: %s", text + 1);
                ++count;
            }
        }
        return count;
    }

private:
    int fd_;
};

} // namespace

int main(int argc, char** argv) {
    std::setvbuf(stdout, nullptr, _IOLBF, 0);
    if (rte_eal_init(argc, argv) < 0) {
        std::fprintf(stderr, "dma_map_test: rte_eal_init: %s\n", rte_strerror(rte_errno));
        return 2;
    }
    if (rte_eth_dev_count_avail() != 1) {
        std::fprintf(stderr, "dma_map_test: wants exactly one ethdev (-a BDF), has %u\n",
                     rte_eth_dev_count_avail());
        return 2;
    }
    const std::uint16_t port = rte_eth_find_next(0);
    rte_eth_dev_info info{};
    rte_eth_dev_info_get(port, &info);
    char name[RTE_ETH_NAME_MAX_LEN] = {};
    rte_eth_dev_get_name_by_port(port, name);
    std::printf("dma_map_test: port %u %s (driver %s), IOVA mode %s\n", port, name,
                info.driver_name, rte_eal_iova_mode() == RTE_IOVA_VA ? "VA" : "PA");

    rte_mempool* pool = rte_pktmbuf_pool_create("dma_map_test", 4095, 256, 0,
                                                RTE_MBUF_DEFAULT_BUF_SIZE, SOCKET_ID_ANY);
    rte_eth_conf conf{};
    if (pool == nullptr || rte_eth_dev_configure(port, 1, 1, &conf) != 0 ||
        rte_eth_rx_queue_setup(port, 0, ring_size, SOCKET_ID_ANY, nullptr, pool) != 0 ||
        rte_eth_tx_queue_setup(port, 0, ring_size, SOCKET_ID_ANY, nullptr) != 0 ||
        rte_eth_dev_start(port) != 0) {
        std::fprintf(stderr, "dma_map_test: port setup failed: %s\n", rte_strerror(rte_errno));
        return 2;
    }

    void* va = mmap(nullptr, region_size, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (va == MAP_FAILED) {
        std::perror("dma_map_test: mmap");
        return 2;
    }
    // A broadcast frame of the local experimental EtherType, so nobody acts on it.
    auto* frame = static_cast<std::uint8_t*>(va);
    std::memset(frame, 0xff, 6);
    rte_ether_addr mac{};
    rte_eth_macaddr_get(port, &mac);
    std::memcpy(frame + 6, mac.addr_bytes, 6);
    frame[12] = 0x88;
    frame[13] = 0xb5;
    for (unsigned i = 14; i < frame_len; ++i) {
        frame[i] = static_cast<std::uint8_t>(i);
    }

    auto memory = prdma::mem::ExternalMemory::register_memory(va, region_size, 4096);
    if (!memory) {
        std::fprintf(stderr, "dma_map_test: register_memory: %s\n",
                     memory.error().to_string().c_str());
        return 2;
    }
    std::printf("dma_map_test: %zu KiB of anonymous memory registered at %p (IOVA 0x%" PRIx64
                "): %zu run(s), mapped into %zu device(s), %zu skipped\n",
                region_size >> 10U, va, rte_mem_virt2iova(va), memory->runs(),
                memory->mapped_devices(), memory->skipped_devices());
    if (memory->mapped_devices() != 1) {
        std::fprintf(stderr, "dma_map_test: FAIL: the NIC needed no mapping: no IOMMU behind it "
                             "(is it bound to vfio-pci?)\n");
        return 1;
    }

    FaultLog faults;
    if (!faults.usable()) {
        std::perror("dma_map_test: /dev/kmsg");
        return 2;
    }
    // The kernel names the device bus:device.function, without the PCI domain.
    const std::string bdf = std::strlen(name) > 5 ? std::string(name + 5) : std::string(name);
    const rte_iova_t region_iova = rte_mem_virt2iova(va);
    std::uint64_t completed = 0;
    std::vector<rte_mbuf_ext_shared_info> shinfo;
    int rc = 0;

    const PhaseResult mapped =
        send_phase(port, pool, va, completed, shinfo, std::chrono::milliseconds(5000));
    std::printf("dma_map_test: mapped: %u of %u frames sent from external memory, %" PRIu64
                " completed by the NIC\n",
                mapped.sent, frames, mapped.completed);
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    const unsigned mapped_faults = faults.faults_in(bdf, region_iova, region_size);
    if (mapped.sent != frames || mapped.completed < frames - ring_size || mapped_faults != 0) {
        std::printf("dma_map_test: FAIL: the NIC did not send from mapped memory (%u IOMMU "
                    "faults)\n",
                    mapped_faults);
        rc = 1;
    }

    if (auto unmapped = memory->unmap_device(info.device); !unmapped) {
        std::fprintf(stderr, "dma_map_test: unmap_device: %s\n",
                     unmapped.error().to_string().c_str());
        return 1;
    }
    std::printf("dma_map_test: unmapped from %s (still registered with DPDK); sending again\n",
                name);
    std::uint64_t completed_unmapped = 0;
    std::vector<rte_mbuf_ext_shared_info> shinfo_unmapped;
    const auto t0 = std::chrono::steady_clock::now();
    const PhaseResult blocked = send_phase(port, pool, va, completed_unmapped, shinfo_unmapped,
                                           std::chrono::milliseconds(3000));
    unsigned unmapped_faults = 0;
    while (unmapped_faults == 0 &&
           std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5)) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        unmapped_faults += faults.faults_in(bdf, region_iova, region_size);
    }
    const double waited =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("dma_map_test: unmapped: %u of %u frames handed to the NIC, %" PRIu64
                " descriptors completed; %u IOMMU read fault(s) in the region reported within "
                "%.1f s\n",
                blocked.sent, frames, blocked.completed, unmapped_faults, waited);
    if (unmapped_faults > 0) {
        std::printf("dma_map_test: the IOMMU refused the NIC's reads of unmapped memory and the "
                    "kernel reported it (QEMU's virtio-net completes such descriptors and sends "
                    "nothing for them)\n");
    } else {
        std::printf("dma_map_test: FAIL: no IOMMU fault: the NIC read memory that is not mapped "
                    "for it\n");
        rc = 1;
    }

    // The device is stopped by the fault; stopping and closing the port resets it and gives back
    // the mbufs still on its ring (their callbacks count into the vectors still alive here).
    rte_eth_dev_stop(port);
    rte_eth_dev_close(port);
    if (auto released = memory->release(); !released) {
        std::fprintf(stderr, "dma_map_test: release: %s\n", released.error().to_string().c_str());
        rc = 1;
    }
    munmap(va, region_size);
    rte_eal_cleanup();
    std::printf("dma_map_test: %s\n", rc == 0 ? "PASS" : "FAIL");
    std::fflush(stdout);
    return rc;
}
