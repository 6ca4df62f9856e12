// One EAL per test binary (DPDK cannot start it twice in a process), started before the first
// test and cleaned up after the last. PRDMA_REQUIRE_HUGEPAGES=1 (set by usertools/prdma-setup
// once it has reserved pages) makes a --no-huge fallback a failure, so CI proves hugepages.
#pragma once

#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include <prdma/eal.hpp>

namespace prdma::test_support {

class EalEnvironment : public ::testing::Environment {
public:
    // `check` runs right after EAL is up (e.g. that a --vdev was probed).
    EalEnvironment(std::string program, std::vector<std::string> extra_args,
                   std::function<void()> check = {})
        : program_(std::move(program)), extra_args_(std::move(extra_args)),
          check_(std::move(check)) {}

    void SetUp() override {
        EalOptions options;
        options.program_name = program_;
        options.args = {"-l", "0", "--log-level=lib.eal:error"};
        options.args.insert(options.args.end(), extra_args_.begin(), extra_args_.end());
        auto eal = Eal::start(options);
        ASSERT_TRUE(eal.ok()) << eal.error().to_string();
        instance().emplace(std::move(eal.value()));
        const char* required = std::getenv("PRDMA_REQUIRE_HUGEPAGES");
        if (required != nullptr && std::strcmp(required, "1") == 0) {
            ASSERT_TRUE(instance()->hugepage_backed()) << "PRDMA_REQUIRE_HUGEPAGES=1 but --no-huge";
        }
        if (check_) {
            check_();
        }
    }
    void TearDown() override { instance().reset(); }

    static bool hugepage_backed() {
        return instance().has_value() && instance()->hugepage_backed();
    }

private:
    static std::optional<Eal>& instance() {
        static std::optional<Eal> eal;
        return eal;
    }
    std::string program_;
    std::vector<std::string> extra_args_;
    std::function<void()> check_;
};

// gtest owns environments and deletes them after TearDown.
inline ::testing::Environment* add_eal_environment(std::string program,
                                                   std::vector<std::string> extra_args = {},
                                                   std::function<void()> check = {}) {
    return ::testing::AddGlobalTestEnvironment(
        new EalEnvironment(std::move(program), std::move(extra_args), std::move(check)));
}

} // namespace prdma::test_support
