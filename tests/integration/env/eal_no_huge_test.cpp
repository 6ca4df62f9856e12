// The --no-huge fallback really starts EAL: a fake sysfs with no free hugepage makes prdma::Eal
// fall back, and DMA memory still comes with a known IOVA.
#include <filesystem>
#include <fstream>
#include <unistd.h>

#include <gtest/gtest.h>
#include <rte_memzone.h>

#include <prdma/eal.hpp>

namespace prdma {
namespace {

namespace fs = std::filesystem;

TEST(EalFallback, StartsWithoutHugepages) {
    const fs::path sysfs =
        fs::temp_directory_path() / ("prdma-nohuge-" + std::to_string(::getpid()));
    fs::create_directories(sysfs / "kernel/mm/hugepages/hugepages-2048kB");
    std::ofstream(sysfs / "kernel/mm/hugepages/hugepages-2048kB/free_hugepages") << "0\n";

    EalOptions options;
    options.program_name = "eal_no_huge_test";
    options.args = {"-l", "0", "--log-level=lib.eal:error"};
    options.sysfs_root = sysfs.string();
    options.no_huge_memory_mb = 64;
    auto eal = Eal::start(options);
    fs::remove_all(sysfs);
    ASSERT_TRUE(eal.ok()) << eal.error().to_string();
    EXPECT_FALSE(eal->hugepage_backed());

    const rte_memzone* zone = rte_memzone_reserve("no_huge_zone", 1 << 20, SOCKET_ID_ANY, 0);
    ASSERT_NE(zone, nullptr);
    EXPECT_NE(zone->iova, RTE_BAD_IOVA);
    EXPECT_EQ(rte_memzone_free(zone), 0);
}

} // namespace
} // namespace prdma
