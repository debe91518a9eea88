// median(): the figure every bench reports from its repeated measurements.
#include "core/median.h"

#include <gtest/gtest.h>

#include <vector>

namespace coli {
namespace {

TEST(Median, MiddleOfAnOddCountMeanOfTheTwoMiddlesOfAnEvenOne) {
    EXPECT_EQ(median(std::vector<double>{5, 1, 3}), 3.0);
    EXPECT_EQ(median(std::vector<double>{4, 1, 8, 2}), 3.0);
    EXPECT_EQ(median(std::vector<float>{7}), 7.0f);
    EXPECT_THROW(median(std::vector<double>{}), Error);
}

}  // namespace
}  // namespace coli
