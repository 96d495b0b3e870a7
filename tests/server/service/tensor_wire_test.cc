// PutTensorChunk parsing and TensorData building on the wire form, checked against protobuf's
// own serialiser and parser: messages cut into slices at every kind of boundary, fields in any
// order, unknown fields, malformed bytes; a TensorData that borrows the tensor's bytes and
// keeps the tensor alive.
#include "server/service/tensor_wire.h"

#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "absl/strings/escaping.h"
#include "grpcpp/impl/codegen/proto_utils.h"

namespace gpucompute {
namespace {

using ::testing::HasSubstr;

// `bytes` as a ByteBuffer of slices cut at `cuts` (offsets into bytes).
grpc::ByteBuffer Sliced(const std::string& bytes, std::vector<size_t> cuts) {
  std::vector<grpc::Slice> slices;
  size_t at = 0;
  cuts.push_back(bytes.size());
  for (size_t c : cuts) {
    slices.emplace_back(bytes.data() + at, c - at);
    at = c;
  }
  return grpc::ByteBuffer(slices.data(), slices.size());
}

std::string Joined(const std::vector<absl::string_view>& pieces) {
  std::string out;
  for (absl::string_view p : pieces) out.append(p.data(), p.size());
  return out;
}

std::string RandomBytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

TEST(TensorWire, ParsesWhatProtobufWritesAcrossAnySlicing) {
  v1::PutTensorChunk chunk;
  chunk.mutable_header()->set_dtype(v1::FLOAT64);
  chunk.mutable_header()->add_shape(3);
  chunk.mutable_header()->add_shape(5000);
  chunk.set_offset(123456789012);
  chunk.set_data(RandomBytes(120000, 1));
  const std::string wire = chunk.SerializeAsString();
  std::mt19937 rng(2);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<size_t> cuts;
    const int n = trial % 12;  // 0: one slice
    for (int i = 0; i < n; ++i) cuts.push_back(rng() % wire.size());
    if (trial < 40) cuts.push_back(static_cast<size_t>(trial));  // inside the key and header
    std::sort(cuts.begin(), cuts.end());
    auto view = ParsePutTensorChunk(Sliced(wire, cuts));
    ASSERT_TRUE(view.ok()) << view.status();
    ASSERT_TRUE(view->header.has_value());
    EXPECT_EQ(view->header->dtype(), v1::FLOAT64);
    EXPECT_EQ(view->header->shape_size(), 2);
    EXPECT_EQ(view->offset, 123456789012);
    EXPECT_EQ(view->data_bytes(), 120000);
    EXPECT_EQ(Joined(view->data), chunk.data());
  }
}

TEST(TensorWire, FieldsInAnyOrderUnknownFieldsSkippedLastValueWins) {
  // data, an unknown varint and bytes field, offset twice, no header.
  v1::PutTensorChunk first;
  first.set_data("old");
  v1::PutTensorChunk second;
  second.set_offset(7);
  second.set_data("new bytes");
  std::string wire = first.SerializeAsString();
  wire += std::string("\xa0\x06\x2a", 3);         // field 100, varint 42
  wire += std::string("\xaa\x06\x03xyz", 6);      // field 101, bytes "xyz"
  wire += std::string("\x10\x05", 2);             // offset 5 ...
  wire += second.SerializeAsString();             // ... then offset 7 and data "new bytes"
  v1::PutTensorChunk reference;
  ASSERT_TRUE(reference.ParseFromString(wire)) << absl::CEscape(wire);
  auto view = ParsePutTensorChunk(Sliced(wire, {1, 4}));
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_FALSE(view->header.has_value());
  EXPECT_EQ(reference.offset(), 7);
  EXPECT_EQ(reference.data(), "new bytes");
  EXPECT_EQ(view->offset, reference.offset());
  EXPECT_EQ(Joined(view->data), reference.data());
}

TEST(TensorWire, NegativeOffsetsAndEmptyMessages) {
  v1::PutTensorChunk chunk;
  chunk.set_offset(-3);
  auto view = ParsePutTensorChunk(Sliced(chunk.SerializeAsString(), {}));
  ASSERT_TRUE(view.ok());
  EXPECT_EQ(view->offset, -3);  // the tensor's Write refuses it with the field's name
  auto empty = ParsePutTensorChunk(Sliced("", {}));
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->data_bytes(), 0);
}

TEST(TensorWire, MalformedMessagesAreInvalidArgument) {
  v1::PutTensorChunk chunk;
  chunk.set_data(RandomBytes(1000, 3));
  const std::string wire = chunk.SerializeAsString();
  for (const std::string& bad : {wire.substr(0, wire.size() - 1),      // data cut short
                                 std::string("\x1a\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff", 11),  // length varint too long
                                 std::string("\x00\x01", 2),           // field 0
                                 std::string("\x0b", 1),               // group start (wire type 3)
                                 std::string("\x10", 1),               // offset without its value
                                 std::string("\x1d\x00\x00\x00\x00", 5),  // data as fixed32
                                 std::string("\x0a\x02\xff\xff", 4)}) {    // header not a message
    auto view = ParsePutTensorChunk(Sliced(bad, {}));
    ASSERT_FALSE(view.ok()) << absl::CEscape(bad);
    EXPECT_EQ(view.status().code(), absl::StatusCode::kInvalidArgument);
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
