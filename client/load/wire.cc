// Pre-serialized requests and the SubmitResponse head reader.
#include "client/load/wire.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/wire_format_lite.h"
#include "grpc/slice.h"
#include "grpcpp/support/proto_buffer_reader.h"

namespace gpucompute::load {
namespace {

using google::protobuf::internal::WireFormatLite;

// Field numbers of SubmitRequest / SubmitResponse (compute.proto).
constexpr int kIdField = 1;
constexpr int kTimeoutUsField = 6;
constexpr int kCodeField = 2;
constexpr int kMessageField = 3;
constexpr int kTimingField = 8;

void AppendVarint(uint64_t v, std::string* out) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>(v | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

}  // namespace

grpc::Slice SerializeToSlice(const google::protobuf::Message& message) {
  const size_t n = message.ByteSizeLong();
  grpc_slice slice = grpc_slice_malloc(n);
  message.SerializeWithCachedSizesToArray(GRPC_SLICE_START_PTR(slice));
  return grpc::Slice(slice, grpc::Slice::STEAL_REF);
}

grpc::ByteBuffer BufferOf(const grpc::Slice& slice) { return grpc::ByteBuffer(&slice, 1); }

std::string SubmitPrefix(uint64_t token, int64_t timeout_us) {
  const std::string id = absl::StrCat(token);
  std::string out;
  AppendVarint(WireFormatLite::MakeTag(kIdField, WireFormatLite::WIRETYPE_LENGTH_DELIMITED), &out);
  AppendVarint(id.size(), &out);
  out += id;
  if (timeout_us > 0) {
    AppendVarint(WireFormatLite::MakeTag(kTimeoutUsField, WireFormatLite::WIRETYPE_VARINT), &out);
    AppendVarint(static_cast<uint64_t>(timeout_us), &out);
  }
  return out;
}

grpc::ByteBuffer SubmitBuffer(uint64_t token, int64_t timeout_us, const grpc::Slice& job) {
  const std::string prefix = SubmitPrefix(token, timeout_us);
  const grpc::Slice slices[2] = {grpc::Slice(prefix), job};
  return grpc::ByteBuffer(slices, 2);
}

absl::StatusOr<SubmitResponseHead> ParseSubmitResponseHead(grpc::ByteBuffer& buffer) {
  grpc::ProtoBufferReader reader(&buffer);
  google::protobuf::io::CodedInputStream in(&reader);
  in.SetTotalBytesLimit(INT32_MAX);
  SubmitResponseHead head;
  auto malformed = [] { return absl::InvalidArgumentError("malformed SubmitResponse"); };
  while (true) {
    const uint32_t tag = in.ReadTag();
    if (tag == 0) break;
    const int field = WireFormatLite::GetTagFieldNumber(tag);
    const auto type = WireFormatLite::GetTagWireType(tag);
    if (field == kIdField && type == WireFormatLite::WIRETYPE_LENGTH_DELIMITED) {
      std::string id;
      if (!WireFormatLite::ReadString(&in, &id)) return malformed();
      uint64_t token = 0;
      head.token = absl::SimpleAtoi(id, &token) ? std::optional<uint64_t>(token) : std::nullopt;
    } else if (field == kCodeField && type == WireFormatLite::WIRETYPE_VARINT) {
      uint32_t code = 0;
      if (!in.ReadVarint32(&code)) return malformed();
      head.code = static_cast<int>(code);
    } else if (field == kMessageField && type == WireFormatLite::WIRETYPE_LENGTH_DELIMITED) {
      if (!WireFormatLite::ReadString(&in, &head.message)) return malformed();
    } else if (field == kTimingField && type == WireFormatLite::WIRETYPE_LENGTH_DELIMITED) {
      if (!WireFormatLite::ReadMessage(&in, &head.timing)) return malformed();
      head.has_timing = true;
    } else if (!WireFormatLite::SkipField(&in, tag)) {  // the result: skipped, not copied
      return malformed();
    }
  }
  if (!in.ConsumedEntireMessage()) return malformed();
  return head;
}

}  // namespace gpucompute::load
