// A GoogleTest fixture whose tests share one DeviceContext (two streams) for the suite: created
// once in SetUpTestSuite when a device is visible; every test skips (GTEST_SKIP, with the
// reason) without one. Derive an op's GPU test suite from it and use device().
#pragma once

#include "gtest/gtest.h"
#include "server/device/device_context.h"
#include "tests/server/device/cuda_test_util.h"

namespace gpucompute::testing {

class SharedDeviceTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!NoDeviceReason().empty()) return;
    DeviceContext::Options o;
    o.streams = 2;
    auto ctx = DeviceContext::Create(o);
    ASSERT_TRUE(ctx.ok()) << ctx.status();
    device_ = ctx->release();
  }
  static void TearDownTestSuite() {
    delete device_;
    device_ = nullptr;
  }
  void SetUp() override { SKIP_WITHOUT_CUDA_DEVICE(); }

  static DeviceContext& device() { return *device_; }

 private:
  // One at a time: GoogleTest runs suites one after another.
  static inline DeviceContext* device_ = nullptr;
};

}  // namespace gpucompute::testing
