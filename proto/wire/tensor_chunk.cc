// Chunk messages in their wire form (see tensor_chunk.h).
#include "wire/tensor_chunk.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace gpucompute::wire {
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

void AppendVarint(uint64_t v, std::string* out) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

void AppendKey(int field, int type, std::string* out) {
  AppendVarint(static_cast<uint64_t>(field) << 3 | static_cast<uint64_t>(type), out);
}

}  // namespace

int64_t ChunkView::data_bytes() const {
  int64_t n = 0;
  for (absl::string_view d : data) n += static_cast<int64_t>(d.size());
  return n;
}

absl::StatusOr<ChunkView> ParseChunk(const grpc::ByteBuffer& buffer, const ChunkFields& fields) {
  auto malformed = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("the message is not a ", fields.name, " (", why, ")"));
  };
  ChunkView view;
  if (!buffer.Dump(&view.slices).ok()) return malformed("unreadable");
  SliceReader in(view.slices);
  while (!in.AtEnd()) {
    uint64_t key = 0;
    if (!in.ReadVarint(&key)) return malformed("truncated field key");
    const uint64_t field = key >> 3;
    const int type = static_cast<int>(key & 7);
    if (field == 0) return malformed("field number 0");
    uint64_t value = 0;
    std::vector<absl::string_view> pieces;
    switch (type) {
      case kVarint:
        if (!in.ReadVarint(&value)) return malformed("truncated varint");
        break;
      case kFixed64:
        if (!in.Take(8, nullptr)) return malformed("truncated fixed64");
        break;
      case kFixed32:
        if (!in.Take(4, nullptr)) return malformed("truncated fixed32");
        break;
      case kLengthDelimited:
        if (!in.ReadVarint(&value) || !in.Take(value, &pieces)) return malformed("truncated bytes");
        break;
      default: return malformed(absl::StrCat("wire type ", type));
    }
    const bool known = field == static_cast<uint64_t>(fields.submessage) ||
                       field == static_cast<uint64_t>(fields.offset) ||
                       field == static_cast<uint64_t>(fields.data);
    if (field == static_cast<uint64_t>(fields.submessage) && type == kLengthDelimited) {
      std::string bytes;
      for (absl::string_view p : pieces) bytes.append(p.data(), p.size());
      view.submessage = std::move(bytes);
    } else if (field == static_cast<uint64_t>(fields.offset) && type == kVarint) {
      view.offset = static_cast<int64_t>(value);  // int64: two's complement
    } else if (field == static_cast<uint64_t>(fields.data) && type == kLengthDelimited) {
      view.data = std::move(pieces);
    } else if (known) {
      return malformed(absl::StrCat("field ", field, " has wire type ", type));
    }
  }
  return view;
}

grpc::ByteBuffer ChunkMessage(const ChunkFields& fields, const std::string* submessage, int64_t offset,
                              absl::string_view data, std::shared_ptr<const void> owner) {
  std::string head;
  if (submessage != nullptr) {
    AppendKey(fields.submessage, kLengthDelimited, &head);
    AppendVarint(submessage->size(), &head);
    head += *submessage;
  }
  AppendKey(fields.offset, kVarint, &head);
  AppendVarint(static_cast<uint64_t>(offset), &head);
  AppendKey(fields.data, kLengthDelimited, &head);
  AppendVarint(data.size(), &head);
  grpc::Slice slices[2] = {grpc::Slice(head), grpc::Slice()};
  if (data.empty()) return grpc::ByteBuffer(slices, 1);
  // The slice borrows the bytes; it holds `owner` (when given) until gRPC drops it.
  using Holder = std::shared_ptr<const void>;
  auto* holder = new Holder(std::move(owner));
  slices[1] = grpc::Slice(const_cast<char*>(data.data()), data.size(),
                          [](void* h) { delete static_cast<Holder*>(h); }, holder);
  return grpc::ByteBuffer(slices, 2);
}

}  // namespace gpucompute::wire
