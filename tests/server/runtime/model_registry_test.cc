// Model registry: reservations make loads exclusive and failures leave nothing behind.
#include "server/runtime/model_registry.h"

#include "gtest/gtest.h"
#include "server/ops/dense/cpu_dense.h"

namespace gpucompute {
namespace {

std::shared_ptr<const dense::LoadedModel> TinyModel(const std::string& name) {
  dense::ModelSpec spec;
  spec.name = name;
  dense::LayerSpec l;
  l.in = 2;
  l.out = 3;
  l.weight.assign(6, 1.0f);
  l.bias.assign(3, 0.0);
  spec.layers.push_back(l);
  return dense::CpuModel::Make(std::move(spec));
}

TEST(ModelRegistry, ReserveLoadFindUnload) {
  ModelRegistry r(2);
  ASSERT_TRUE(r.Reserve("a").ok());
  EXPECT_EQ(r.Reserve("a").code(), absl::StatusCode::kAlreadyExists);  // being loaded
  EXPECT_EQ(r.Find("a").status().code(), absl::StatusCode::kNotFound);  // not yet visible
  r.Publish(TinyModel("a"));
  ASSERT_TRUE(r.Find("a").ok());
  EXPECT_EQ(r.Reserve("a").code(), absl::StatusCode::kAlreadyExists);
  ASSERT_TRUE(r.Reserve("b").ok());
  EXPECT_EQ(r.Reserve("c").code(), absl::StatusCode::kResourceExhausted);  // max 2
  r.Release("b");
  EXPECT_TRUE(r.Reserve("c").ok());
  r.Release("c");
  ASSERT_EQ(r.List().size(), 1u);
  EXPECT_EQ(r.List()[0].name, "a");
  auto held = *r.Find("a");
  ASSERT_TRUE(r.Unload("a").ok());
  EXPECT_EQ(r.Unload("a").code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(held->info().name, "a");  // a request holding it keeps it alive
}

}  // namespace
}  // namespace gpucompute
