// External memory on a real EAL with one probed vdev (net_ring0): application pages become DPDK
// memory with IOVAs (translator, page lists), are DMA-mapped into the device, and stop being DPDK
// memory when released; misuse is refused with the rule it breaks.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <linux/mman.h>
#include <optional>
#include <string>
#include <sys/mman.h>
#include <utility>

#include <gtest/gtest.h>
#include <rte_bus.h>
#include <rte_dev.h>
#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_memory.h>

#include <prdma/eal.hpp>
#include <prdma/mem/dma_memory.hpp>
#include <prdma/mem/external_memory.hpp>

#include "eal_environment.hpp"

namespace prdma::mem {
namespace {

constexpr std::size_t kib4 = 4096;
constexpr std::size_t mib = std::size_t{1} << 20;
constexpr std::size_t hugepage_size = 2 * mib;

const auto* const g_environment =
    prdma::test_support::add_eal_environment("external_memory_test", {"--vdev=net_ring0"}, [] {
        ASSERT_EQ(rte_eth_dev_count_avail(), 1U) << "--vdev=net_ring0 was not probed";
    });

std::uintptr_t address(const void* pointer) {
    return reinterpret_cast<std::uintptr_t>(pointer);
}

void* pointer_at(std::uintptr_t va) {
    return reinterpret_cast<void*>(va); // NOLINT(performance-no-int-to-ptr)
}

// An application mapping, unmapped when the test ends whatever happens.
class Mapping {
public:
    Mapping(std::size_t length, int extra_flags) : length_(length) {
        void* data = ::mmap(nullptr, length, PROT_READ | PROT_WRITE,
                            MAP_PRIVATE | MAP_ANONYMOUS | extra_flags, -1, 0);
        data_ = data == MAP_FAILED ? nullptr : data;
        if (data_ != nullptr) {
            std::memset(data_, 0x5a, length_);
        }
    }
    Mapping(const Mapping&) = delete;
    Mapping& operator=(const Mapping&) = delete;
    Mapping(Mapping&&) = delete;
    Mapping& operator=(Mapping&&) = delete;
    ~Mapping() {
        if (data_ != nullptr) {
            ::munmap(data_, length_);
        }
    }

    [[nodiscard]] void* data() const { return data_; }
    [[nodiscard]] std::uintptr_t va() const { return address(data_); }
    [[nodiscard]] std::size_t length() const { return length_; }

private:
    void* data_ = nullptr;
    std::size_t length_;
};

rte_device* ring_device() {
    std::uint16_t port = 0;
    if (rte_eth_dev_get_port_by_name("net_ring0", &port) != 0) {
        return nullptr;
    }
    rte_eth_dev_info info{};
    if (rte_eth_dev_info_get(port, &info) != 0) {
        return nullptr;
    }
    return info.device;
}

TEST(ExternalMemory, NetRingIsTheOneProbedDevice) {
    rte_device* ring = ring_device();
    ASSERT_NE(ring, nullptr);
    EXPECT_NE(rte_dev_is_probed(ring), 0);
    EXPECT_STREQ(rte_bus_name(rte_dev_bus(ring)), "vdev");
}

TEST(ExternalMemory, RegistersAnonymous4KiBPages) {
    // One page more than registered, so that the byte after the region is mapped but not DPDK's.
    Mapping mapping(mib + kib4, 0);
    ASSERT_NE(mapping.data(), nullptr);
    auto memory = ExternalMemory::register_memory(mapping.data(), mib, kib4);
    ASSERT_TRUE(memory.ok()) << memory.error().to_string();
    EXPECT_EQ(memory->data(), mapping.data());
    EXPECT_EQ(memory->length(), mib);
    EXPECT_EQ(memory->page_size(), kib4);

    const rte_memseg_list* list = rte_mem_virt2memseg_list(mapping.data());
    ASSERT_NE(list, nullptr);
    EXPECT_NE(list->external, 0U);
    EXPECT_EQ(list->page_sz, kib4);

    const AddressTranslator translator = dpdk_translator();
    for (std::size_t offset = 0; offset < mib; offset += 4099) {
        const std::uintptr_t va = mapping.va() + offset;
        ASSERT_EQ(translator.to_iova(va), rte_mem_virt2iova(pointer_at(va))) << offset;
        ASSERT_EQ(translator.to_va(translator.to_iova(va)), va) << offset;
    }
    EXPECT_EQ(translator.to_iova(mapping.va() + mib), bad_iova) << "mapped, not registered";
    EXPECT_TRUE(is_dma_memory(mapping.data(), mib));
    EXPECT_FALSE(is_dma_memory(mapping.data(), mib + 1));

    PageList pages;
    ASSERT_EQ(build_dma_page_list(mapping.data(), mib, pages), PageListError::ok);
    EXPECT_EQ(pages.page_shift, 12U);
    EXPECT_EQ(pages.page_count(), 256U);
    EXPECT_EQ(pages.first_byte_offset, 0U);
    for (std::size_t i = 0; i < pages.page_count(); ++i) {
        ASSERT_EQ(pages.page_va[i], mapping.va() + i * kib4) << i;
        ASSERT_EQ(pages.page_iova[i], translator.to_iova(pages.page_va[i])) << i;
    }
    PageList inner;
    ASSERT_EQ(build_dma_page_list(static_cast<char*>(mapping.data()) + 100, 5000, inner),
              PageListError::ok);
    EXPECT_EQ(inner.page_count(), 2U);
    EXPECT_EQ(inner.first_byte_offset, 100U);

    if (rte_eal_iova_mode() == RTE_IOVA_VA) {
        EXPECT_EQ(translator.to_iova(mapping.va()), mapping.va());
        EXPECT_EQ(memory->runs(), 1U) << "IOVA = VA: the whole region is one run";
    }
    // The vdev bus forwards dma_map to the driver and succeeds when the driver has no hook
    // (net_ring has none), so net_ring0 counts as mapped rather than skipped.
    EXPECT_EQ(memory->mapped_devices(), 1U);
    EXPECT_EQ(memory->skipped_devices(), 0U);
}

TEST(ExternalMemory, RegistersApplicationHugepages) {
    Mapping mapping(2 * hugepage_size, MAP_HUGETLB | MAP_HUGE_2MB);
    if (mapping.data() == nullptr) {
        GTEST_SKIP() << "no free 2 MiB hugepage for an application mapping";
    }
    auto memory = ExternalMemory::register_memory(mapping.data(), mapping.length(), hugepage_size);
    ASSERT_TRUE(memory.ok()) << memory.error().to_string();
    PageList pages;
    ASSERT_EQ(build_dma_page_list(mapping.data(), mapping.length(), pages), PageListError::ok);
    EXPECT_EQ(pages.page_shift, 21U);
    EXPECT_EQ(pages.page_count(), 2U);
    EXPECT_EQ(pages.page_iova[1], rte_mem_virt2iova(pointer_at(pages.page_va[1])));
    if (rte_eal_iova_mode() == RTE_IOVA_VA) {
        EXPECT_EQ(memory->runs(), 1U);
    }
}

TEST(ExternalMemory, SecondRegistrationOfTheSameMemoryIsBusy) {
    Mapping mapping(64 * kib4, 0);
    ASSERT_NE(mapping.data(), nullptr);
    auto first = ExternalMemory::register_memory(mapping.data(), mapping.length(), kib4);
    ASSERT_TRUE(first.ok()) << first.error().to_string();

    auto again = ExternalMemory::register_memory(mapping.data(), mapping.length(), kib4);
    ASSERT_FALSE(again.ok());
    EXPECT_EQ(again.code(), StatusCode::busy);
    EXPECT_NE(again.error().message().find("already registered"), std::string::npos)
        << again.error().message();
    // DPDK alone would accept an overlapping, non-identical range.
    auto overlap = ExternalMemory::register_memory(pointer_at(mapping.va() + kib4), 2 * kib4, kib4);
    EXPECT_EQ(overlap.code(), StatusCode::busy);
    // The failed attempts undid only their own work: the first registration is intact.
    EXPECT_NE(dpdk_translator().to_iova(mapping.va()), bad_iova);

    // DPDK's own memory is not external memory.
    auto buffer = DmaBuffer::allocate(2 * kib4, kib4);
    ASSERT_TRUE(buffer.ok()) << buffer.error().to_string();
    auto own = ExternalMemory::register_memory(buffer->data(), 2 * kib4, kib4);
    EXPECT_EQ(own.code(), StatusCode::busy);
}

TEST(ExternalMemory, RejectsRangesThatBreakTheRules) {
    Mapping mapping(4 * kib4, 0);
    ASSERT_NE(mapping.data(), nullptr);
    const auto expect_invalid = [](void* va, std::size_t length, std::size_t page_size,
                                   const char* rule) {
        auto memory = ExternalMemory::register_memory(va, length, page_size);
        ASSERT_FALSE(memory.ok()) << rule;
        EXPECT_EQ(memory.code(), StatusCode::invalid_parameter) << rule;
        EXPECT_NE(memory.error().message().find(rule), std::string::npos)
            << memory.error().message();
    };
    expect_invalid(pointer_at(mapping.va() + 1), kib4, kib4, "not a multiple of the page size");
    expect_invalid(mapping.data(), kib4 + 1, kib4, "not a multiple of the page size");
    expect_invalid(mapping.data(), 0, kib4, "at least one page");
    expect_invalid(mapping.data(), kib4, 2048, "power of two of at least 4096");
    expect_invalid(mapping.data(), 3 * kib4, 3 * kib4, "power of two");
    expect_invalid(nullptr, kib4, kib4, "null");
    expect_invalid(pointer_at(UINTPTR_MAX - kib4 + 1), 2 * kib4, kib4, "wraps");
    EXPECT_EQ(rte_mem_virt2memseg_list(mapping.data()), nullptr) << "nothing was registered";
}

TEST(ExternalMemory, UnmappedRangeCannotBeLocked) {
#if defined(__SANITIZE_ADDRESS__)
    GTEST_SKIP() << "AddressSanitizer intercepts mlock and makes it a no-op";
#endif
    // Above the 47-bit user address space mmap uses without a hint: never mapped, unlike a range
    // just unmapped, which another thread (or a sanitizer's allocator) may take at once.
    void* const hole = pointer_at(std::uintptr_t{1} << 47);
    auto memory = ExternalMemory::register_memory(hole, 4 * kib4, kib4);
    ASSERT_FALSE(memory.ok());
    EXPECT_EQ(memory.code(), StatusCode::no_resources);
    EXPECT_NE(memory.error().message().find("RLIMIT_MEMLOCK"), std::string::npos)
        << memory.error().message();
}

TEST(ExternalMemory, ReleaseUnregisters) {
    Mapping mapping(16 * kib4, 0);
    ASSERT_NE(mapping.data(), nullptr);
    const AddressTranslator translator = dpdk_translator();
    {
        auto memory = ExternalMemory::register_memory(mapping.data(), mapping.length(), kib4);
        ASSERT_TRUE(memory.ok()) << memory.error().to_string();
        ExternalMemory moved = std::move(memory).value();
        EXPECT_NE(translator.to_iova(mapping.va()), bad_iova);
        EXPECT_TRUE(moved.release().ok());
        EXPECT_EQ(moved.runs(), 0U);
        EXPECT_EQ(moved.mapped_devices(), 0U);
        EXPECT_TRUE(moved.release().ok()) << "second release does nothing";
        EXPECT_EQ(moved.map_new_device(ring_device()).code(), StatusCode::invalid_parameter);
    }
    // rte_mem_virt2iova is no witness here: with IOVA = VA it returns any address unchanged.
    EXPECT_EQ(rte_mem_virt2memseg_list(mapping.data()), nullptr);
    EXPECT_EQ(translator.to_iova(mapping.va()), bad_iova);
    EXPECT_FALSE(is_dma_memory(mapping.data(), mapping.length()));

    // Released memory can be registered again; destruction unregisters too.
    {
        auto again = ExternalMemory::register_memory(mapping.data(), mapping.length(), kib4);
        ASSERT_TRUE(again.ok()) << again.error().to_string();
        EXPECT_TRUE(is_dma_memory(mapping.data(), mapping.length()));
    }
    EXPECT_EQ(rte_mem_virt2memseg_list(mapping.data()), nullptr);
}

TEST(ExternalMemory, DevicesCanBeMappedAndUnmappedOneByOne) {
    Mapping mapping(8 * kib4, 0);
    ASSERT_NE(mapping.data(), nullptr);
    rte_device* ring = ring_device();
    ASSERT_NE(ring, nullptr);
    auto memory = ExternalMemory::register_memory(mapping.data(), mapping.length(), kib4);
    ASSERT_TRUE(memory.ok()) << memory.error().to_string();
    ASSERT_EQ(memory->mapped_devices(), 1U);

    EXPECT_TRUE(memory->map_new_device(ring).ok());
    EXPECT_EQ(memory->mapped_devices(), 1U) << "a known device is not mapped twice";
    EXPECT_TRUE(memory->unmap_device(ring).ok());
    EXPECT_EQ(memory->mapped_devices(), 0U);
    EXPECT_TRUE(memory->unmap_device(ring).ok()) << "unknown device: no-op";
    EXPECT_TRUE(memory->map_new_device(ring).ok());
    EXPECT_EQ(memory->mapped_devices(), 1U);
    EXPECT_EQ(memory->map_new_device(nullptr).code(), StatusCode::invalid_parameter);
}

} // namespace
} // namespace prdma::mem
