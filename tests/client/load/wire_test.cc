// Tests of gpucompute-load's pre-serialized Submit framing and SubmitResponse reader
// (client/load/wire.h).
#include "client/load/wire.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpucompute::load {
namespace {

std::string Flatten(const grpc::ByteBuffer& buffer) {
  grpc::Slice slice;
  EXPECT_TRUE(buffer.DumpToSingleSlice(&slice).ok());
  return std::string(reinterpret_cast<const char*>(slice.begin()), slice.size());
}

TEST(SubmitBufferTest, PrefixAddsIdAndTimeoutToTheJob) {
  v1::SubmitRequest job;
  job.mutable_echo()->mutable_tensor()->set_dtype(v1::UINT8);
  job.mutable_echo()->mutable_tensor()->add_shape(3);
  job.mutable_echo()->mutable_tensor()->set_data("abc");
  const grpc::Slice bytes = SerializeToSlice(job);

  for (uint64_t token : {uint64_t{0}, uint64_t{42}, (uint64_t{255} << 32) | 7, ~uint64_t{0}}) {
    v1::SubmitRequest parsed;
    ASSERT_TRUE(parsed.ParseFromString(Flatten(SubmitBuffer(token, 250000, bytes))));
    EXPECT_EQ(parsed.id(), std::to_string(token));
    EXPECT_EQ(parsed.timeout_us(), 250000);
    EXPECT_EQ(parsed.echo().tensor().data(), "abc");
  }
  v1::SubmitRequest no_timeout;
  ASSERT_TRUE(no_timeout.ParseFromString(Flatten(SubmitBuffer(9, 0, bytes))));
  EXPECT_EQ(no_timeout.id(), "9");
  EXPECT_EQ(no_timeout.timeout_us(), 0);
}

TEST(SubmitResponseHeadTest, ReadsIdCodeMessageTimingAndSkipsTheResult) {
  v1::SubmitResponse response;
  response.set_id("123456789012");
  response.set_code(0);
  response.mutable_echo()->mutable_tensor()->set_data(std::string(100000, 'x'));
  response.mutable_timing()->set_queue_us(12);
  response.mutable_timing()->set_compute_us(345);
  response.mutable_timing()->set_total_us(400);
  response.mutable_timing()->set_batch_requests(3);
  grpc::ByteBuffer buffer = BufferOf(SerializeToSlice(response));
  absl::StatusOr<SubmitResponseHead> head = ParseSubmitResponseHead(buffer);
  ASSERT_TRUE(head.ok()) << head.status();
  EXPECT_EQ(head->token, 123456789012u);
  EXPECT_EQ(head->code, 0);
  ASSERT_TRUE(head->has_timing);
  EXPECT_EQ(head->timing.queue_us(), 12);
  EXPECT_EQ(head->timing.compute_us(), 345);
  EXPECT_EQ(head->timing.total_us(), 400);
  EXPECT_EQ(head->timing.batch_requests(), 3);
}

TEST(SubmitResponseHeadTest, ErrorResultAndOddIds) {
  v1::SubmitResponse response;
  response.set_id("not-a-number");
  response.set_code(3);
  response.set_message("problems[0].x: bad");
  grpc::ByteBuffer buffer = BufferOf(SerializeToSlice(response));
  absl::StatusOr<SubmitResponseHead> head = ParseSubmitResponseHead(buffer);
  ASSERT_TRUE(head.ok()) << head.status();
  EXPECT_FALSE(head->token.has_value());
  EXPECT_EQ(head->code, 3);
  EXPECT_EQ(head->message, "problems[0].x: bad");
  EXPECT_FALSE(head->has_timing);
}

TEST(SubmitResponseHeadTest, SplitAcrossSlices) {
  v1::SubmitResponse response;
  response.set_id("77");
  response.mutable_periodogram()->add_results()->set_peak_power(1.5);
  response.mutable_timing()->set_total_us(9);
  const std::string bytes = response.SerializeAsString();
  const grpc::Slice parts[3] = {grpc::Slice(bytes.substr(0, 3)), grpc::Slice(bytes.substr(3, 5)),
                                grpc::Slice(bytes.substr(8))};
  grpc::ByteBuffer buffer(parts, 3);
  absl::StatusOr<SubmitResponseHead> head = ParseSubmitResponseHead(buffer);
  ASSERT_TRUE(head.ok()) << head.status();
  EXPECT_EQ(head->token, 77u);
  EXPECT_EQ(head->timing.total_us(), 9);
}

TEST(SubmitResponseHeadTest, Malformed) {
  const std::string truncated = std::string("\x0a\x05", 2) + "12";  // id of 5 bytes, 2 given
  grpc::ByteBuffer buffer = BufferOf(grpc::Slice(truncated));
  EXPECT_FALSE(ParseSubmitResponseHead(buffer).ok());
}

}  // namespace
}  // namespace gpucompute::load
