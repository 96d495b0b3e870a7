// The wire form of PutTensorChunk and TensorData (see tensor_wire.h).
#include "server/service/tensor_wire.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"

namespace gpucompute {
namespace {

// Protobuf wire types.
constexpr int kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5;

// Reads bytes across a message's slices.
class SliceReader {
 public:
  explicit SliceReader(const std::vector<grpc::Slice>& slices) {
    for (const grpc::Slice& s : slices) {
      if (s.size() > 0) parts_.emplace_back(reinterpret_cast<const char*>(s.begin()), s.size());
    }
  }

  bool AtEnd() const { return part_ == parts_.size(); }

  bool ReadVarint(uint64_t* value) {
    *value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (AtEnd()) return false;
      const auto byte = static_cast<uint8_t>(parts_[part_][pos_]);
      Advance(1);
      *value |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) return true;
    }
    return false;  // longer than ten bytes
  }

  // The next `n` bytes as pieces of the slices (appended to `out`, or dropped when null).
  bool Take(uint64_t n, std::vector<absl::string_view>* out) {
    while (n > 0) {
      if (AtEnd()) return false;
      const absl::string_view rest = parts_[part_].substr(pos_);
      const size_t k = static_cast<size_t>(std::min<uint64_t>(n, rest.size()));
      if (out != nullptr) out->push_back(rest.substr(0, k));
      Advance(k);
      n -= k;
    }
    return true;
  }

 private:
  void Advance(size_t k) {
    pos_ += k;
    if (pos_ == parts_[part_].size()) {
      ++part_;
      pos_ = 0;
    }
  }

  std::vector<absl::string_view> parts_;
  size_t part_ = 0;  // current slice
  size_t pos_ = 0;   // within it
};

absl::Status Malformed(absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("PutTensor: the message is not a PutTensorChunk (", why, ")"));
}

void AppendVarint(uint64_t v, std::string* out) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

}  // namespace

int64_t PutTensorChunkView::data_bytes() const {
  int64_t n = 0;
  for (absl::string_view d : data) n += static_cast<int64_t>(d.size());
  return n;
}

absl::StatusOr<PutTensorChunkView> ParsePutTensorChunk(const grpc::ByteBuffer& buffer) {
  PutTensorChunkView view;
  if (!buffer.Dump(&view.slices).ok()) return Malformed("unreadable");
  SliceReader in(view.slices);
  while (!in.AtEnd()) {
    uint64_t key = 0;
    if (!in.ReadVarint(&key)) return Malformed("truncated field key");
    const uint64_t field = key >> 3;
    const int type = static_cast<int>(key & 7);
    if (field == 0) return Malformed("field number 0");
    uint64_t value = 0;
    std::vector<absl::string_view> pieces;
    switch (type) {
      case kVarint:
        if (!in.ReadVarint(&value)) return Malformed("truncated varint");
        break;
      case kFixed64:
        if (!in.Take(8, nullptr)) return Malformed("truncated fixed64");
        break;
      case kFixed32:
        if (!in.Take(4, nullptr)) return Malformed("truncated fixed32");
        break;
      case kLengthDelimited:
        if (!in.ReadVarint(&value) || !in.Take(value, &pieces)) return Malformed("truncated bytes");
        break;
      default: return Malformed(absl::StrCat("wire type ", type));
    }
    if (field == 1 && type == kLengthDelimited) {  // header
      std::string bytes;
      for (absl::string_view p : pieces) bytes.append(p.data(), p.size());
      v1::PutTensorHeader header;
      if (!header.ParseFromString(bytes)) return Malformed("header");
      view.header = std::move(header);
    } else if (field == 2 && type == kVarint) {  // offset (int64: two's complement)
      view.offset = static_cast<int64_t>(value);
    } else if (field == 3 && type == kLengthDelimited) {  // data
      view.data = std::move(pieces);
    } else if (field <= 3) {
      return Malformed(absl::StrCat("field ", field, " has wire type ", type));
    }
  }
  return view;
}

grpc::ByteBuffer TensorDataMessage(const v1::TensorInfo* info,
                                   std::shared_ptr<const ResidentTensor> tensor, int64_t offset,
                                   int64_t n) {
  std::string head;
  if (info != nullptr) {
    const std::string bytes = info->SerializeAsString();
    head.push_back(static_cast<char>(3 << 3 | kLengthDelimited));
    AppendVarint(bytes.size(), &head);
    head += bytes;
  }
  head.push_back(static_cast<char>(1 << 3 | kVarint));
  AppendVarint(static_cast<uint64_t>(offset), &head);
  head.push_back(static_cast<char>(2 << 3 | kLengthDelimited));
  AppendVarint(static_cast<uint64_t>(n), &head);
  grpc::Slice slices[2] = {grpc::Slice(head), grpc::Slice()};
  if (n > 0) {
    // The slice borrows the tensor's bytes and keeps the tensor alive until gRPC drops it.
    using Holder = std::shared_ptr<const ResidentTensor>;
    auto* holder = new Holder(std::move(tensor));
    char* bytes = const_cast<char*>((*holder)->data().data()) + offset;
    slices[1] = grpc::Slice(bytes, static_cast<size_t>(n), [](void* h) { delete static_cast<Holder*>(h); },
                            holder);
  }
  return grpc::ByteBuffer(slices, n > 0 ? 2 : 1);
}

}  // namespace gpucompute
