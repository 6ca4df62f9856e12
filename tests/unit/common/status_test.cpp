#include <set>
#include <string>

#include <gtest/gtest.h>

#include <prdma/status.hpp>

namespace prdma {
namespace {

TEST(Status, EveryCodeHasADistinctName) {
    std::set<std::string_view> names;
    for (int code = 0; code <= static_cast<int>(StatusCode::internal); ++code) {
        const auto name = status_name(static_cast<StatusCode>(code));
        EXPECT_NE(name, "unknown") << "code " << code;
        EXPECT_TRUE(names.insert(name).second) << "duplicate name " << name;
    }
    EXPECT_EQ(status_name(StatusCode::buffer_overflow), "buffer_overflow");
}

TEST(Status, ErrorCarriesCodeAndMessage) {
    const Error error(StatusCode::busy, "context still holds 2 PDs");
    EXPECT_EQ(error.code(), StatusCode::busy);
    EXPECT_EQ(error.to_string(), "busy: context still holds 2 PDs");
}

TEST(Status, ResultHoldsValueOrError) {
    Result<int> good = 42;
    ASSERT_TRUE(good.ok());
    EXPECT_EQ(good.value(), 42);
    EXPECT_EQ(good.code(), StatusCode::ok);

    Result<int> bad = Error(StatusCode::no_resources, "key table full");
    ASSERT_FALSE(bad.ok());
    EXPECT_EQ(bad.code(), StatusCode::no_resources);
    EXPECT_EQ(bad.error().message(), "key table full");
}

TEST(Status, VoidResult) {
    Status fine;
    EXPECT_TRUE(fine.ok());
    EXPECT_EQ(fine.code(), StatusCode::ok);
    Status failed = Error(StatusCode::device_removed, "gone");
    EXPECT_FALSE(failed.ok());
    EXPECT_EQ(failed.code(), StatusCode::device_removed);
}

} // namespace
} // namespace prdma
