// The server's PutTensorChunk and TensorData (tests/proto/wire checks the wire form itself):
// the header parsed, errors naming PutTensor, a TensorData that borrows the tensor's bytes and
// keeps the tensor alive.
#include "server/service/tensor_wire.h"

#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/proto/wire/slices.h"
#include "absl/strings/escaping.h"
#include "grpcpp/impl/codegen/proto_utils.h"

namespace gpucompute {
namespace {

using ::testing::HasSubstr;

using testing_wire::Joined;
using testing_wire::RandomBytes;
using testing_wire::SampleChunk;
using testing_wire::Sliced;

TEST(TensorWire, PutTensorChunkHeaderAndData) {
  const v1::PutTensorChunk chunk = SampleChunk();
  auto view = ParsePutTensorChunk(Sliced(chunk.SerializeAsString(), {2, 7, 50000}));
  ASSERT_TRUE(view.ok()) << view.status();
  ASSERT_TRUE(view->header.has_value());
  EXPECT_EQ(view->header->dtype(), v1::FLOAT64);
  EXPECT_EQ(view->header->shape_size(), 2);
  EXPECT_EQ(view->chunk.offset, 123456789012);
  EXPECT_EQ(Joined(view->chunk.data), chunk.data());
}

TEST(TensorWire, MalformedChunksAreInvalidArgumentNamingPutTensor) {
  for (const std::string& bad : {std::string("\x0a\x02\xff\xff", 4),   // header not a message
                                 std::string("\x1a\x05" "ab", 4)}) {    // data cut short
    auto view = ParsePutTensorChunk(Sliced(bad, {}));
    ASSERT_FALSE(view.ok()) << absl::CEscape(bad);
    EXPECT_EQ(view.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(view.status().message(), HasSubstr("PutTensor"));
    EXPECT_THAT(view.status().message(), HasSubstr("PutTensorChunk"));
  }
}

TEST(TensorWire, TensorDataIsWhatProtobufReadsAndHoldsTheTensor) {
  TensorStore store(TensorStoreOptions{});
  TensorSpec spec;
  spec.dtype = v1::UINT8;
  spec.element_size = 1;
  spec.shape = {5000};
  auto created = store.Create("me", spec);
  ASSERT_TRUE(created.ok()) << created.status();
  std::shared_ptr<const ResidentTensor> tensor = *created;
  const std::string bytes = RandomBytes(5000, 4);
  ASSERT_TRUE((*created)->Write(0, bytes).ok());
  created->reset();
  ASSERT_TRUE(store.Delete("me", tensor->handle()).ok());  // only the message holds it now
  v1::TensorInfo info;
  info.set_handle("h");
  info.set_bytes(5000);
  std::weak_ptr<const ResidentTensor> watch = tensor;
  grpc::ByteBuffer message = TensorDataMessage(&info, std::move(tensor), 1000, 2500);
  EXPECT_FALSE(watch.expired());  // the message holds it
  v1::TensorData parsed;
  grpc::ByteBuffer copy(message);
  ASSERT_TRUE(grpc::SerializationTraits<v1::TensorData>::Deserialize(&copy, &parsed).ok());
  EXPECT_EQ(parsed.offset(), 1000);
  EXPECT_EQ(parsed.data(), bytes.substr(1000, 2500));
  EXPECT_EQ(parsed.info().handle(), "h");
  ASSERT_TRUE(watch.expired() == false);
  EXPECT_EQ(parsed.info().bytes(), 5000);
  message.Clear();
  EXPECT_TRUE(watch.expired());  // released with the last slice

  // No info, no bytes.
  auto empty = store.Create("me", spec);
  ASSERT_TRUE(empty.ok());
  grpc::ByteBuffer none = TensorDataMessage(nullptr, *empty, 5000, 0);
  ASSERT_TRUE(grpc::SerializationTraits<v1::TensorData>::Deserialize(&none, &parsed).ok());
  EXPECT_EQ(parsed.offset(), 5000);
  EXPECT_TRUE(parsed.data().empty());
  EXPECT_FALSE(parsed.has_info());
}

}  // namespace
}  // namespace gpucompute
