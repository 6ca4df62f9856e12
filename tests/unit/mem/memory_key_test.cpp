// Key encoding, allocation, every distinct result of the key check, and keys nobody can guess.
#include <cstdlib>
#include <fstream>
#include <set>
#include <spawn.h>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

#include <gtest/gtest.h>

#include <prdma/mem/memory_key.hpp>

namespace prdma::mem {
namespace {

TEST(MemoryKey, IndexAndVariant) {
    const MemoryKey key = make_key(0xabcdef, 0x42);
    EXPECT_EQ(key, 0xabcdef42U);
    EXPECT_EQ(key_index(key), 0xabcdefU);
    EXPECT_EQ(key_variant(key), 0x42);
    EXPECT_EQ(next_key(make_key(7, 0xff)), make_key(7, 0)) << "variant wraps, index stays";
}

TEST(KeyTable, CapacityLimitsAndIndexZeroIsNeverHandedOut) {
    EXPECT_EQ(KeyTable::create(1).code(), StatusCode::invalid_parameter);
    EXPECT_EQ(KeyTable::create((1U << 24) + 1).code(), StatusCode::invalid_parameter);
    auto table = KeyTable::create(4);
    ASSERT_TRUE(table.ok());
    std::set<std::uint32_t> indices;
    for (int i = 0; i < 3; ++i) {
        auto index = table->allocate();
        ASSERT_TRUE(index.ok());
        EXPECT_NE(index.value(), 0U);
        indices.insert(index.value());
    }
    EXPECT_EQ(indices.size(), 3U);
    EXPECT_EQ(table->in_use(), 3U);
    auto full = table->allocate();
    EXPECT_EQ(full.code(), StatusCode::no_resources);
    table->release(2);
    EXPECT_EQ(table->allocate().value(), 2U);
}

MemoryKey first_key(KeyTable& table) {
    return table.validate(table.allocate().value());
}

TEST(KeyTable, TablesCreatedAlikeHandOutDifferentFirstKeys) {
    std::set<MemoryKey> first;
    for (int i = 0; i < 16; ++i) {
        auto table = KeyTable::create(1U << 16);
        ASSERT_TRUE(table.ok());
        first.insert(first_key(table.value()));
    }
    // 65535 indices x 256 variants: two equal first keys among 16 is a 1-in-140,000 event.
    EXPECT_GE(first.size(), 15U);
}

TEST(KeyTable, SuccessorKeyCannotBeComputedFromTheOldOne) {
    std::set<unsigned> steps;
    for (int i = 0; i < 32; ++i) {
        auto table = KeyTable::create(1U << 16);
        ASSERT_TRUE(table.ok());
        const MemoryKey old = first_key(table.value());
        table->release(key_index(old));
        const MemoryKey successor = first_key(table.value());
        ASSERT_EQ(key_index(successor), key_index(old)) << "the freed index is reused first";
        EXPECT_NE(successor, old);
        steps.insert((key_variant(successor) - key_variant(old)) & 0xffU);
    }
    // Counting up gave one step for every table; a secret permutation gives ~30 of 255.
    EXPECT_GE(steps.size(), 12U);
}

// Not a test on its own: the probe the next test starts twice, as two processes started alike.
TEST(KeyTable, FirstKeyProbe) {
    const char* out = std::getenv("PRDMA_KEY_PROBE");
    if (out == nullptr) {
        GTEST_SKIP() << "run by TwoProcessesStartedAlikeHandOutDifferentFirstKeys";
    }
    auto table = KeyTable::create(1U << 16);
    ASSERT_TRUE(table.ok());
    std::ofstream(out) << first_key(table.value()) << '\n';
}

MemoryKey probe_first_key(const std::string& out) {
    const std::string env = "PRDMA_KEY_PROBE=" + out;
    std::string self = "/proc/self/exe";
    std::string filter = "--gtest_filter=KeyTable.FirstKeyProbe";
    char* argv[] = {self.data(), filter.data(), nullptr};
    // The parent's environment (sanitizer options too) and the probe's file.
    std::vector<char*> envp{const_cast<char*>(env.c_str())};
    for (char** e = environ; *e != nullptr; ++e) {
        envp.push_back(*e);
    }
    envp.push_back(nullptr);
    pid_t pid = 0;
    EXPECT_EQ(posix_spawn(&pid, self.c_str(), nullptr, nullptr, argv, envp.data()), 0);
    int status = 0;
    EXPECT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
    MemoryKey key = 0;
    std::ifstream(out) >> key;
    std::remove(out.c_str());
    return key;
}

TEST(KeyTable, TwoProcessesStartedAlikeHandOutDifferentFirstKeys) {
    const std::string base = ::testing::TempDir() + "prdma-key-probe-" + std::to_string(getpid());
    const MemoryKey a = probe_first_key(base + "-a");
    const MemoryKey b = probe_first_key(base + "-b");
    ASSERT_NE(a, 0U);
    ASSERT_NE(b, 0U);
    EXPECT_NE(a, b);
}

class KeyCheckTest : public ::testing::Test {
protected:
    void SetUp() override {
        table_ = std::make_unique<KeyTable>(std::move(KeyTable::create(16).value()));
        index_ = table_->allocate().value();
        KeyEntry& e = table_->entry(index_);
        e.access = access_local_read | access_local_write | access_remote_read;
        e.pd = 3;
        e.start = 0x1000;
        e.length = 0x100;
        e.identity = true; // host() = address; nothing is dereferenced here
        key_ = table_->validate(index_);
    }
    KeyCheck check(MemoryKey key, std::uint32_t pd, AccessFlags access, std::uint64_t addr,
                   std::uint64_t len, ConnectionId connection = 9) {
        const KeyEntry* found = nullptr;
        const KeyCheck result = table_->check({key, pd, connection, access, addr, len}, &found);
        if (result == KeyCheck::ok) {
            EXPECT_EQ(found, &table_->entry(index_));
        }
        return result;
    }
    std::unique_ptr<KeyTable> table_;
    std::uint32_t index_ = 0;
    MemoryKey key_ = 0;
};

TEST_F(KeyCheckTest, ValidAccessAtTheEdges) {
    EXPECT_EQ(check(key_, 3, access_remote_read, 0x1000, 0x100), KeyCheck::ok);
    EXPECT_EQ(check(key_, 3, access_local_write, 0x10ff, 1), KeyCheck::ok) << "last valid byte";
    EXPECT_EQ(check(key_, 3, access_local_write, 0x1100, 1), KeyCheck::out_of_bounds)
        << "first invalid byte";
    EXPECT_EQ(check(key_, 3, access_local_write, 0xfff, 1), KeyCheck::out_of_bounds);
    EXPECT_EQ(check(key_, 3, access_local_write, 0x1001, 0x100), KeyCheck::out_of_bounds);
    EXPECT_EQ(check(key_, 3, access_local_write, 0x1010, ~std::uint64_t{0}),
              KeyCheck::out_of_bounds);
    EXPECT_EQ(check(key_, 3, access_local_read, 0x10ff, 0), KeyCheck::ok);
    EXPECT_EQ(check(key_, 3, access_local_read, 0x1100, 0), KeyCheck::out_of_bounds)
        << "a zero-length access at the end would translate one past the region";
}

TEST_F(KeyCheckTest, EachFailureIsDistinct) {
    EXPECT_EQ(check(make_key(16, 0), 3, access_local_read, 0x1000, 1), KeyCheck::bad_index);
    EXPECT_EQ(check(make_key(index_ % 15 + 1, 1), 3, access_local_read, 0x1000, 1),
              KeyCheck::free_entry);
    EXPECT_EQ(check(next_key(key_), 3, access_local_read, 0x1000, 1), KeyCheck::stale_variant);
    EXPECT_EQ(check(key_, 4, access_local_read, 0x1000, 1), KeyCheck::wrong_pd);
    EXPECT_EQ(check(key_, 3, access_remote_write, 0x1000, 1), KeyCheck::access_denied);
    EXPECT_EQ(check(key_, 3, access_remote_atomic, 0x1000, 8), KeyCheck::access_denied);
    EXPECT_EQ(check(0, 3, access_local_read, 0x1000, 1), KeyCheck::free_entry)
        << "key 0 is never valid";

    table_->entry(index_).bound_connection = 9;
    EXPECT_EQ(check(key_, 3, access_remote_read, 0x1000, 1, 9), KeyCheck::ok);
    EXPECT_EQ(check(key_, 3, access_remote_read, 0x1000, 1, 10), KeyCheck::wrong_connection);
    EXPECT_EQ(check(key_, 3, access_local_read, 0x1000, 1, 10), KeyCheck::wrong_connection)
        << "seed 002: only that connection, locally too";

    table_->entry(index_).lkey_only = true;
    EXPECT_EQ(check(key_, 3, access_remote_read, 0x1000, 1, 9), KeyCheck::lkey_only);
    table_->entry(index_).any_pd = true;
    EXPECT_EQ(check(key_, 77, access_local_write, 0x1000, 1), KeyCheck::ok);
}

TEST_F(KeyCheckTest, InvalidateMakesTheOldKeyStaleAndTheNewOneInvalid) {
    table_->invalidate(index_);
    EXPECT_EQ(check(key_, 3, access_local_read, 0x1000, 1), KeyCheck::stale_variant);
    EXPECT_EQ(check(table_->key_of(index_), 3, access_local_read, 0x1000, 1),
              KeyCheck::invalidated);
    const MemoryKey again = table_->validate(index_);
    EXPECT_NE(again, key_);
    EXPECT_EQ(check(again, 3, access_local_read, 0x1000, 1), KeyCheck::ok);
    EXPECT_EQ(check(key_, 3, access_local_read, 0x1000, 1), KeyCheck::stale_variant);
}

TEST_F(KeyCheckTest, VariantWrapsAroundAndOnlyTheCurrentKeyWorks) {
    std::set<MemoryKey> seen{key_};
    MemoryKey current = key_;
    for (int i = 0; i < 300; ++i) {
        current = table_->validate(index_);
        EXPECT_EQ(key_index(current), index_);
    }
    // 300 validations wrap the 8-bit variant: every key of the index was handed out.
    EXPECT_EQ(check(current, 3, access_local_read, 0x1000, 1), KeyCheck::ok);
    for (unsigned v = 0; v < 256; ++v) {
        const MemoryKey key = make_key(index_, static_cast<std::uint8_t>(v));
        if (key != current) {
            EXPECT_EQ(check(key, 3, access_local_read, 0x1000, 1), KeyCheck::stale_variant) << v;
        }
    }
}

TEST_F(KeyCheckTest, DrawsAfterAChosenVariantRepeatNoneOfTheOnesBefore) {
    for (const std::uint8_t chosen : {0x00, 0x5a, 0xff}) {
        const std::uint8_t before = key_variant(table_->key_of(index_));
        table_->set_variant(index_, chosen); // what a FAST_REG with the consumer's key does
        const MemoryKey first = table_->validate(index_);
        EXPECT_NE(key_variant(first), before) << "nor the variant before the chosen one";
        std::set<std::uint8_t> variants{chosen, key_variant(first)};
        // 254 draws: one may have been skipped (the one before), so the 255th may be the chosen.
        for (int i = 1; i < 254; ++i) {
            variants.insert(key_variant(table_->validate(index_)));
        }
        EXPECT_EQ(variants.size(), 255U) << "after 0x" << std::hex << unsigned{chosen};
    }
}

TEST_F(KeyCheckTest, InvalidateThenNextKeyNeverRepeatsTheFastRegVariant) {
    // ib_inc_rkey after LOCAL_INV: the consumer's next key is the invalidated one plus one, which
    // must differ from the variant the last FAST_REG set, or the registry refuses it.
    for (unsigned chosen = 0; chosen < 256; ++chosen) {
        table_->set_variant(index_, static_cast<std::uint8_t>(chosen));
        table_->invalidate(index_);
        EXPECT_NE(key_variant(next_key(table_->key_of(index_))), chosen);
    }
}

TEST_F(KeyCheckTest, ReleaseFreesAndRollsTheVariant) {
    table_->release(index_);
    EXPECT_EQ(check(key_, 3, access_local_read, 0x1000, 1), KeyCheck::free_entry);
    const std::uint32_t again = table_->allocate().value();
    EXPECT_EQ(again, index_);
    EXPECT_NE(table_->validate(again), key_) << "a re-registered index never reuses the old key";
}

TEST(KeyCheckNames, AreDistinct) {
    std::set<std::string_view> names;
    for (int c = 0; c <= static_cast<int>(KeyCheck::wrong_connection); ++c) {
        EXPECT_TRUE(names.insert(key_check_name(static_cast<KeyCheck>(c))).second);
    }
}

} // namespace
} // namespace prdma::mem
