// compose_eal_args is pure: these tests never start EAL. The fake sysfs trees decide the
// hugepage fallback deterministically, whatever this machine has reserved.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>

#include <gtest/gtest.h>

#include <prdma/eal.hpp>

namespace prdma {
namespace {

namespace fs = std::filesystem;

class FakeSysfs {
public:
    explicit FakeSysfs(std::size_t free_2m_pages) {
        root_ = fs::temp_directory_path() /
                ("prdma-sysfs-" + std::to_string(::getpid()) + "-" + std::to_string(counter_++));
        const fs::path dir = root_ / "kernel/mm/hugepages/hugepages-2048kB";
        fs::create_directories(dir);
        std::ofstream(dir / "free_hugepages") << free_2m_pages << "\n";
        fs::create_directories(root_ / "kernel/mm/hugepages/hugepages-1048576kB");
        std::ofstream(root_ / "kernel/mm/hugepages/hugepages-1048576kB/free_hugepages") << "0\n";
    }
    ~FakeSysfs() { fs::remove_all(root_); }
    FakeSysfs(const FakeSysfs&) = delete;
    FakeSysfs& operator=(const FakeSysfs&) = delete;
    [[nodiscard]] std::string path() const { return root_.string(); }

private:
    static inline int counter_ = 0;
    fs::path root_;
};

EalOptions with_sysfs(EalOptions options, const FakeSysfs& sysfs) {
    options.sysfs_root = sysfs.path();
    return options;
}

bool contains(const std::vector<std::string>& args, const std::string& arg) {
    return std::find(args.begin(), args.end(), arg) != args.end();
}

TEST(EalArgs, DefaultsAreAddedWhenTheCallerGivesNone) {
    FakeSysfs sysfs(16);
    EalOptions options;
    options.program_name = "app";
    const auto args = compose_eal_args(with_sysfs(options, sysfs));
    ASSERT_FALSE(args.empty());
    EXPECT_EQ(args.front(), "app");
    EXPECT_TRUE(contains(args, "--in-memory"));
    EXPECT_TRUE(contains(args, "--no-pci"));
    EXPECT_TRUE(contains(args, "--iova-mode=va"));
    EXPECT_TRUE(contains(args, "--file-prefix=prdma_" + std::to_string(::getpid())));
    EXPECT_FALSE(contains(args, "--no-huge"));
}

TEST(EalArgs, CallerChoicesOverrideDefaults) {
    FakeSysfs sysfs(16);
    EalOptions options;
    options.args = {"-a", "0000:3b:00.0", "--iova-mode=pa", "--file-prefix=mine",
                    "--proc-type=primary"};
    const auto args = compose_eal_args(with_sysfs(options, sysfs));
    EXPECT_FALSE(contains(args, "--no-pci"));
    EXPECT_FALSE(contains(args, "--iova-mode=va"));
    EXPECT_FALSE(contains(args, "--in-memory"));
    EXPECT_TRUE(contains(args, "--file-prefix=mine"));
    EXPECT_EQ(std::count_if(args.begin(), args.end(),
                            [](const std::string& a) { return a.starts_with("--file-prefix"); }),
              1);
}

TEST(EalArgs, AllowOptionInAttachedFormAlsoKeepsPciScan) {
    FakeSysfs sysfs(16);
    EalOptions options;
    options.args = {"-a0000:3b:00.0"};
    EXPECT_FALSE(contains(compose_eal_args(with_sysfs(options, sysfs)), "--no-pci"));
}

TEST(EalArgs, NoFreeHugepagesFallsBackToNoHuge) {
    FakeSysfs sysfs(0);
    EalOptions options;
    options.no_huge_memory_mb = 256;
    const auto args = compose_eal_args(with_sysfs(options, sysfs));
    EXPECT_TRUE(contains(args, "--no-huge"));
    // DPDK refuses --no-huge (legacy memory) with --in-memory.
    EXPECT_FALSE(contains(args, "--in-memory"));
    EXPECT_TRUE(contains(args, "--no-shconf"));
    const auto m = std::find(args.begin(), args.end(), "-m");
    ASSERT_NE(m, args.end());
    ASSERT_NE(m + 1, args.end());
    EXPECT_EQ(*(m + 1), "256");
}

TEST(EalArgs, FallbackCanBeRefused) {
    FakeSysfs sysfs(0);
    EalOptions options;
    options.allow_no_huge_fallback = false;
    EXPECT_FALSE(contains(compose_eal_args(with_sysfs(options, sysfs)), "--no-huge"));
}

TEST(EalArgs, FreeHugepageBytesSumsSizes) {
    FakeSysfs sysfs(3);
    EXPECT_EQ(free_hugepage_bytes(sysfs.path()), 3U * 2 * 1024 * 1024);
    EXPECT_EQ(free_hugepage_bytes("/nonexistent-prdma-sysfs"), 0U);
}

} // namespace
} // namespace prdma
