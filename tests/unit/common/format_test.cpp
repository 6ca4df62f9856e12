#include <string>

#include <gtest/gtest.h>

#include <prdma/format.hpp>

namespace prdma {
namespace {

TEST(Format, FormatsLikePrintf) {
    EXPECT_EQ(strformat("%s=%d", "qpn", 17), "qpn=17");
    EXPECT_EQ(strformat("%s", ""), "");
}

TEST(Format, LongOutputIsNotTruncated) {
    const std::string long_text(5000, 'x');
    EXPECT_EQ(strformat("<%s>", long_text.c_str()).size(), 5002U);
}

} // namespace
} // namespace prdma
