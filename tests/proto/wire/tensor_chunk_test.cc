// Chunk messages in their wire form, checked against protobuf's own serialiser and parser:
// PutTensorChunk and TensorData cut into slices at every kind of boundary, fields in any
// order, unknown fields, malformed bytes; messages that borrow their data, or hold its owner.
#include "wire/tensor_chunk.h"

#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/proto/wire/slices.h"
#include "absl/strings/escaping.h"
#include "gpucompute/v1/compute.pb.h"
#include "grpcpp/impl/codegen/proto_utils.h"

namespace gpucompute::wire {
namespace {

using ::testing::HasSubstr;

using testing_wire::Joined;
using testing_wire::RandomBytes;
using testing_wire::SampleChunk;
using testing_wire::Sliced;

TEST(TensorWire, ParsesWhatProtobufWritesAcrossAnySlicing) {
  const v1::PutTensorChunk chunk = SampleChunk();
  const std::string wire = chunk.SerializeAsString();
  std::mt19937 rng(2);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<size_t> cuts;
    const int n = trial % 12;  // 0: one slice
    for (int i = 0; i < n; ++i) cuts.push_back(rng() % wire.size());
    if (trial < 40) cuts.push_back(static_cast<size_t>(trial));  // inside the key and header
    std::sort(cuts.begin(), cuts.end());
    auto view = ParseChunk(Sliced(wire, cuts), kPutTensorChunk);
    ASSERT_TRUE(view.ok()) << view.status();
    ASSERT_TRUE(view->submessage.has_value());
    EXPECT_EQ(*view->submessage, chunk.header().SerializeAsString());
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
  auto view = ParseChunk(Sliced(wire, {1, 4}), kPutTensorChunk);
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_FALSE(view->submessage.has_value());
  EXPECT_EQ(reference.offset(), 7);
  EXPECT_EQ(reference.data(), "new bytes");
  EXPECT_EQ(view->offset, reference.offset());
  EXPECT_EQ(Joined(view->data), reference.data());
}

TEST(TensorWire, NegativeOffsetsAndEmptyMessages) {
  v1::PutTensorChunk chunk;
  chunk.set_offset(-3);
  auto view = ParseChunk(Sliced(chunk.SerializeAsString(), {}), kPutTensorChunk);
  ASSERT_TRUE(view.ok());
  EXPECT_EQ(view->offset, -3);  // the tensor's Write refuses it with the field's name
  auto empty = ParseChunk(Sliced("", {}), kPutTensorChunk);
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
                                 std::string("\x1d\x00\x00\x00\x00", 5)}) {  // data as fixed32
    auto view = ParseChunk(Sliced(bad, {}), kPutTensorChunk);
    ASSERT_FALSE(view.ok()) << absl::CEscape(bad);
    EXPECT_EQ(view.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(view.status().message(), HasSubstr("PutTensorChunk"));
  }
}

TEST(TensorWire, TensorDataParsesWithItsOwnFieldNumbers) {
  v1::TensorData data;
  data.set_offset(4096);
  data.set_data(RandomBytes(70000, 5));
  data.mutable_info()->set_handle("h");
  const std::string wire = data.SerializeAsString();
  auto view = ParseChunk(Sliced(wire, {3, 100, 40000}), kTensorData);
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_EQ(view->offset, 4096);
  EXPECT_EQ(Joined(view->data), data.data());
  ASSERT_TRUE(view->submessage.has_value());
  v1::TensorInfo info;
  ASSERT_TRUE(info.ParseFromString(*view->submessage));
  EXPECT_EQ(info.handle(), "h");
}

TEST(TensorWire, MessagesAreWhatProtobufReadsAndHoldTheirOwner) {
  // A PutTensorChunk borrowing its data (no owner), as a client sends it.
  const std::string bytes = RandomBytes(9000, 6);
  v1::PutTensorHeader header;
  header.set_handle("abc");
  const std::string header_bytes = header.SerializeAsString();
  grpc::ByteBuffer put = ChunkMessage(kPutTensorChunk, &header_bytes, 17, bytes, nullptr);
  v1::PutTensorChunk chunk;
  ASSERT_TRUE(grpc::SerializationTraits<v1::PutTensorChunk>::Deserialize(&put, &chunk).ok());
  EXPECT_EQ(chunk.header().handle(), "abc");
  EXPECT_EQ(chunk.offset(), 17);
  EXPECT_EQ(chunk.data(), bytes);

  // A TensorData holding the owner of its bytes until the message is gone.
  auto owner = std::make_shared<std::string>(RandomBytes(5000, 4));
  std::weak_ptr<std::string> watch = owner;
  const absl::string_view part = absl::string_view(*owner).substr(1000, 2500);
  grpc::ByteBuffer message = ChunkMessage(kTensorData, nullptr, 1000, part, std::move(owner));
  EXPECT_FALSE(watch.expired());
  v1::TensorData parsed;
  grpc::ByteBuffer copy(message);
  ASSERT_TRUE(grpc::SerializationTraits<v1::TensorData>::Deserialize(&copy, &parsed).ok());
  EXPECT_EQ(parsed.offset(), 1000);
  EXPECT_EQ(parsed.data(), std::string(part));
  EXPECT_FALSE(parsed.has_info());
  message.Clear();
  EXPECT_TRUE(watch.expired());

  // No data: one slice, nothing held.
  grpc::ByteBuffer none = ChunkMessage(kTensorData, nullptr, 5000, absl::string_view(), nullptr);
  ASSERT_TRUE(grpc::SerializationTraits<v1::TensorData>::Deserialize(&none, &parsed).ok());
  EXPECT_EQ(parsed.offset(), 5000);
  EXPECT_TRUE(parsed.data().empty());
}

}  // namespace
}  // namespace gpucompute::wire
