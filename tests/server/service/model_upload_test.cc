// ModelUpload without a server: a model arriving in chunks, and memory that follows the bytes
// received rather than the sizes a header declares.
#include "server/service/model_upload.h"

#include <sys/resource.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace gpucompute {
namespace {

v1::TensorChunk Chunk(int layer, v1::LayerTensor which, int64_t offset, std::string data) {
  v1::TensorChunk c;
  c.set_layer(layer);
  c.set_tensor(which);
  c.set_offset(offset);
  c.set_data(std::move(data));
  return c;
}

std::string Floats(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

TEST(ModelUpload, ChunksInOrderMakeTheModel) {
  v1::ModelHeader h;
  h.set_name("m");
  v1::LayerHeader* l = h.add_layers();
  l->mutable_weight()->set_dtype(v1::FLOAT32);
  l->mutable_weight()->add_shape(2);
  l->mutable_weight()->add_shape(3);
  auto u = ModelUpload::Start(h, DenseLimits{});
  ASSERT_TRUE(u.ok()) << u.status();
  const std::string w = Floats({1, 2, 3, 4, 5, 6});
  EXPECT_EQ((*u)->Add(Chunk(0, v1::LAYER_TENSOR_WEIGHT, 4, w)).code(),
            absl::StatusCode::kInvalidArgument);  // out of order
  ASSERT_TRUE((*u)->Add(Chunk(0, v1::LAYER_TENSOR_WEIGHT, 0, w.substr(0, 5))).ok());
  ASSERT_TRUE((*u)->Add(Chunk(0, v1::LAYER_TENSOR_WEIGHT, 5, w.substr(5))).ok());
  EXPECT_EQ((*u)->Add(Chunk(0, v1::LAYER_TENSOR_WEIGHT, 24, "x")).code(),
            absl::StatusCode::kInvalidArgument);  // past the end
  auto spec = (*u)->Finish();
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->layers[0].weight, (std::vector<float>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(spec->layers[0].bias, (std::vector<double>{0, 0, 0}));
}

// The first chunk used to reserve the whole declared tensor: a header declaring a 64 GiB
// float64 weight (32 GiB stored as float32, within the default max_model_bytes) and one byte
// made the server allocate 64 GiB at once, and die of std::bad_alloc where that fails (caught by
// tests/fuzz/model_upload_fuzzer). Under an 8 GiB address-space limit it must be fine.
// Runs in the death test's child: exits 0 when the upload takes its first bytes.
[[noreturn]] void UploadHugeUnderAddressLimit() {
  const rlimit limit{rlim_t{8} << 30, rlim_t{8} << 30};
  if (setrlimit(RLIMIT_AS, &limit) != 0) std::exit(2);
  v1::ModelHeader h;
  h.set_name("huge");
  v1::LayerHeader* l = h.add_layers();
  l->mutable_weight()->set_dtype(v1::FLOAT64);
  l->mutable_weight()->add_shape(int64_t{1} << 20);
  l->mutable_weight()->add_shape(int64_t{1} << 13);
  auto u = ModelUpload::Start(h, DenseLimits{});
  if (!u.ok()) std::exit(3);
  const bool ok = (*u)->Add(Chunk(0, v1::LAYER_TENSOR_WEIGHT, 0, "x")).ok() &&
                  (*u)->Add(Chunk(0, v1::LAYER_TENSOR_WEIGHT, 1, std::string(1000, 'y'))).ok();
  std::exit(ok ? 0 : 4);
}

TEST(ModelUpload, FirstChunkDoesNotReserveTheDeclaredSize) {
  EXPECT_EXIT(UploadHugeUnderAddressLimit(), ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace gpucompute
