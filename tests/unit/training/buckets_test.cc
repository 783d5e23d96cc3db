// assign_buckets against cases worked out by hand from torch's rule (reducer.cpp); the torch
// suite (bindings/torch/tests/test_training.py) compares it with torch's own function.
#include "ccl/training/buckets.hpp"

#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

namespace {

using ccl::training::assign_buckets;
using ccl::training::TensorSpec;
using Buckets = std::vector<std::vector<size_t>>;

// Floats of 4 bytes, doubles of 8; limits 8 then 16 bytes.
const std::vector<TensorSpec> kMixed = {{1, cclFloat32}, {1, cclFloat32}, {1, cclFloat64},
                                        {3, cclFloat32}, {1, cclFloat32}, {2, cclFloat64},
                                        {5, cclFloat32}};
const std::vector<size_t> kLimits = {8, 16};

TEST(AssignBuckets, ClosesABucketOnceItReachesItsLimitPerDtype) {
  // torch: ([[0, 1], [2], [3, 4], [5], [6]], [8, 8, 16, 16, 16])
  EXPECT_EQ(assign_buckets(kMixed, kLimits), (Buckets{{0, 1}, {2}, {3, 4}, {5}, {6}}));
}

TEST(AssignBuckets, TheLastLimitAppliesFromThenOn) {
  const std::vector<TensorSpec> t(6, TensorSpec{2, cclFloat32});  // 8 bytes each
  const std::vector<size_t> limits = {8, 16};
  EXPECT_EQ(assign_buckets(t, limits), (Buckets{{0}, {1, 2}, {3, 4}, {5}}));
}

TEST(AssignBuckets, OpenBucketsCloseAtTheEndAndSortBySmallestIndex) {
  const std::vector<TensorSpec> t = {{1, cclFloat64}, {1, cclFloat32}, {1, cclFloat16}};
  const std::vector<size_t> limits = {1024};
  EXPECT_EQ(assign_buckets(t, limits), (Buckets{{0}, {1}, {2}}));
}

TEST(AssignBuckets, AGivenOrderKeepsTheClosingOrder) {
  const std::vector<TensorSpec> t(4, TensorSpec{1, cclFloat32});
  const std::vector<size_t> limits = {8};
  const std::vector<size_t> order = {3, 2, 1, 0};
  EXPECT_EQ(assign_buckets(t, limits, order), (Buckets{{3, 2}, {1, 0}}));
}

TEST(AssignBuckets, RefusesEmptyLimitsAndOrdersThatAreNotPermutations) {
  const std::vector<size_t> none;
  EXPECT_THROW(assign_buckets(kMixed, none), std::invalid_argument);
  const std::vector<size_t> repeated = {0, 0, 1, 2, 3, 4, 5};
  EXPECT_THROW(assign_buckets(kMixed, kLimits, repeated), std::invalid_argument);
  const std::vector<size_t> short_order = {0, 1};
  EXPECT_THROW(assign_buckets(kMixed, kLimits, short_order), std::invalid_argument);
}

TEST(AssignBuckets, NoTensorsNoBuckets) {
  const std::vector<TensorSpec> none;
  EXPECT_TRUE(assign_buckets(none, kLimits).empty());
}

TEST(DtypeSize, KnowsEveryDatatype) {
  EXPECT_EQ(ccl::training::dtype_size(cclBfloat16), 2u);
  EXPECT_EQ(ccl::training::dtype_size(cclFloat8e5m2), 1u);
  EXPECT_EQ(ccl::training::dtype_size(cclUint64), 8u);
  EXPECT_THROW(ccl::training::dtype_size(static_cast<cclDataType_t>(99)), std::invalid_argument);
}

}  // namespace
