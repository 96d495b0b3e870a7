// .npy reader/writer; see npy.h for the format.
#include "client/cli/npy.h"

#include <bit>
#include <cctype>
#include <cstring>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/cpp/float_convert.h"

namespace gpucompute::cli {
namespace {

constexpr absl::string_view kMagic("\x93NUMPY", 6);

uint32_t LoadU32(const unsigned char* p) {
  return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
}

// A cursor over the header's Python literal. Only what NumPy writes is accepted: string
// literals, True/False, integers and tuples of integers.
class HeaderParser {
 public:
  explicit HeaderParser(absl::string_view text) : text_(text) {}

  absl::StatusOr<NpyHeader> Parse() {
    NpyHeader header;
    bool have_descr = false, have_order = false, have_shape = false;
    SkipSpace();
    if (!Consume('{')) return Error("expected '{'");
    while (true) {
      SkipSpace();
      if (Consume('}')) break;
      absl::StatusOr<std::string> key = ParseString();
      if (!key.ok()) return key.status();
      SkipSpace();
      if (!Consume(':')) return Error("expected ':' after key");
      SkipSpace();
      if (*key == "descr") {
        if (Peek() == '[') return Error("structured dtypes are not supported");
        absl::StatusOr<std::string> descr = ParseString();
        if (!descr.ok()) return descr.status();
        header.descr = *descr;
        have_descr = true;
      } else if (*key == "fortran_order") {
        absl::StatusOr<bool> value = ParseBool();
        if (!value.ok()) return value.status();
        header.fortran_order = *value;
        have_order = true;
      } else if (*key == "shape") {
        absl::StatusOr<std::vector<int64_t>> shape = ParseTuple();
        if (!shape.ok()) return shape.status();
        header.shape = *shape;
        have_shape = true;
      } else {
        return Error(absl::StrCat("unexpected key '", *key, "'"));
      }
      SkipSpace();
      if (Consume(',')) continue;
      SkipSpace();
      if (Consume('}')) break;
      return Error("expected ',' or '}'");
    }
    SkipSpace();
    if (pos_ != text_.size()) return Error("trailing characters after the header dict");
    if (!have_descr || !have_order || !have_shape) {
      return absl::InvalidArgumentError(
          "npy header must have the keys 'descr', 'fortran_order' and 'shape'");
    }
    return header;
  }

 private:
  char Peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  bool Consume(char c) {
    if (Peek() != c) return false;
    ++pos_;
    return true;
  }
  void SkipSpace() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  absl::Status Error(absl::string_view what) const {
    return absl::InvalidArgumentError(
        absl::StrCat("malformed npy header at offset ", pos_, ": ", what));
  }

  absl::StatusOr<std::string> ParseString() {
    const char quote = Peek();
    if (quote != '\'' && quote != '"') return Error("expected a quoted string");
    ++pos_;
    const size_t end = text_.find(quote, pos_);
    if (end == absl::string_view::npos) return Error("unterminated string");
    std::string out(text_.substr(pos_, end - pos_));
    pos_ = end + 1;
    return out;
  }

  absl::StatusOr<bool> ParseBool() {
    if (text_.substr(pos_, 4) == "True") {
      pos_ += 4;
      return true;
    }
    if (text_.substr(pos_, 5) == "False") {
      pos_ += 5;
      return false;
    }
    return Error("expected True or False");
  }

  absl::StatusOr<int64_t> ParseInt() {
    const size_t start = pos_;
    int64_t value = 0;
    while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) {
      const int digit = text_[pos_] - '0';
      if (value > (std::numeric_limits<int64_t>::max() - digit) / 10) {
        return Error("dimension too large");
      }
      value = value * 10 + digit;
      ++pos_;
    }
    if (pos_ == start) return Error("expected a non-negative integer");
    // Python 2 era files may write long integers as "3L".
    if (Peek() == 'L') ++pos_;
    return value;
  }

  absl::StatusOr<std::vector<int64_t>> ParseTuple() {
    if (!Consume('(')) return Error("expected '(' for the shape");
    std::vector<int64_t> dims;
    while (true) {
      SkipSpace();
      if (Consume(')')) break;
      absl::StatusOr<int64_t> dim = ParseInt();
      if (!dim.ok()) return dim.status();
      dims.push_back(*dim);
      SkipSpace();
      if (Consume(',')) continue;
      SkipSpace();
      if (Consume(')')) break;
      return Error("expected ',' or ')' in the shape");
    }
    return dims;
  }

  absl::string_view text_;
  size_t pos_ = 0;
};

template <typename T>
T LoadElement(const char* p, bool swap) {
  char raw[sizeof(T)];
  std::memcpy(raw, p, sizeof(T));
  if (swap) {
    for (size_t i = 0; i < sizeof(T) / 2; ++i) std::swap(raw[i], raw[sizeof(T) - 1 - i]);
  }
  T value;
  std::memcpy(&value, raw, sizeof(T));
  return value;
}

}  // namespace

absl::StatusOr<NpyHeader> ParseNpyHeader(absl::string_view header) {
  return HeaderParser(header).Parse();
}

absl::StatusOr<NpyArray> ParseNpy(absl::string_view bytes) {
  if (bytes.size() < 10 || bytes.substr(0, 6) != kMagic) {
    return absl::InvalidArgumentError("not a .npy file (bad magic)");
  }
  const auto* u = reinterpret_cast<const unsigned char*>(bytes.data());
  const int major = u[6];
  size_t header_len, header_start;
  if (major == 1) {
    header_len = uint32_t{u[8]} | uint32_t{u[9]} << 8;
    header_start = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) return absl::InvalidArgumentError("truncated .npy header");
    header_len = LoadU32(u + 8);
    header_start = 12;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("unsupported .npy format version ", major, ".", int{u[7]}));
  }
  if (bytes.size() - header_start < header_len) {
    return absl::InvalidArgumentError("truncated .npy header");
  }
  absl::StatusOr<NpyHeader> header = ParseNpyHeader(bytes.substr(header_start, header_len));
  if (!header.ok()) return header.status();

  // descr: byte order, kind, size; e.g. "<f8".
  const std::string& d = header->descr;
  if (d.size() < 3 || absl::string_view("<>=|").find(d[0]) == absl::string_view::npos ||
      d[1] != 'f' || (d.substr(2) != "2" && d.substr(2) != "4" && d.substr(2) != "8")) {
    return absl::InvalidArgumentError(
        absl::StrCat("unsupported .npy dtype '", d, "' (float16, float32 or float64 only)"));
  }
  const int item_size = d[2] - '0';
  const bool file_little = d[0] != '>' && !(d[0] == '=' && std::endian::native == std::endian::big);
  const bool swap = file_little != (std::endian::native == std::endian::little);

  int64_t count = 1;
  for (int64_t dim : header->shape) {
    if (dim != 0 && count > std::numeric_limits<int64_t>::max() / item_size / dim) {
      return absl::InvalidArgumentError("npy shape too large");
    }
    count *= dim;
  }
  const absl::string_view data = bytes.substr(header_start + header_len);
  const uint64_t need = static_cast<uint64_t>(count) * item_size;
  if (data.size() != need) {
    return absl::InvalidArgumentError(absl::StrCat(
        ".npy data holds ", data.size(), " bytes but shape (",
        absl::StrJoin(header->shape, ", "), ") of ", d, " needs ", need));
  }

  NpyArray array;
  array.shape = header->shape;
  array.item_size = item_size;
  array.data.resize(static_cast<size_t>(count));
  // Element i of the file lands at C-order position dst(i); identity unless Fortran order.
  const size_t rank = array.shape.size();
  std::vector<int64_t> index(rank, 0);  // Fortran-order multi-index of element i
  std::vector<int64_t> c_stride(rank, 1);
  for (size_t k = rank; k-- > 1;) c_stride[k - 1] = c_stride[k] * array.shape[k];
  for (int64_t i = 0; i < count; ++i) {
    const char* p = data.data() + i * item_size;
    const double value = item_size == 8   ? LoadElement<double>(p, swap)
                         : item_size == 4 ? LoadElement<float>(p, swap)
                                          : client::HalfToFloat(LoadElement<uint16_t>(p, swap));
    if (!header->fortran_order || rank < 2) {
      array.data[i] = value;
      continue;
    }
    int64_t dst = 0;
    for (size_t k = 0; k < rank; ++k) dst += index[k] * c_stride[k];
    array.data[dst] = value;
    for (size_t k = 0; k < rank; ++k) {  // first axis varies fastest
      if (++index[k] < array.shape[k]) break;
      index[k] = 0;
    }
  }
  return array;
}

absl::StatusOr<NpyArray> ReadNpyFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  std::ostringstream buffer;
  buffer << in.rdbuf();
  absl::StatusOr<NpyArray> array = ParseNpy(buffer.str());
  if (!array.ok()) {
    return absl::Status(array.status().code(),
                        absl::StrCat(path, ": ", array.status().message()));
  }
  return array;
}

std::string EncodeNpy(absl::Span<const int64_t> shape, absl::Span<const double> data,
                      int item_size) {
  std::string dict = absl::StrCat("{'descr': '<f", item_size, "', 'fortran_order': False, 'shape': (",
                                  absl::StrJoin(shape, ", "), shape.size() == 1 ? ",), }" : "), }");
  // magic(6) + version(2) + length(2) + dict + padding + '\n' is a multiple of 64.
  size_t total = 10 + dict.size() + 1;
  dict.append((64 - total % 64) % 64, ' ');
  dict.push_back('\n');
  std::string out(kMagic);
  out.push_back('\x01');
  out.push_back('\x00');
  out.push_back(static_cast<char>(dict.size() & 0xff));
  out.push_back(static_cast<char>((dict.size() >> 8) & 0xff));
  out += dict;
  const bool swap = std::endian::native != std::endian::little;
  for (double v : data) {
    char raw[8];
    if (item_size == 4) {
      const float f = static_cast<float>(v);
      std::memcpy(raw, &f, 4);
    } else if (item_size == 2) {
      // Through float (rare double rounding of float64 ties; float16/32 values are exact).
      const uint16_t h = client::FloatToHalf(static_cast<float>(v));
      std::memcpy(raw, &h, 2);
    } else {
      std::memcpy(raw, &v, 8);
    }
    if (swap) {
      for (int i = 0; i < item_size / 2; ++i) std::swap(raw[i], raw[item_size - 1 - i]);
    }
    out.append(raw, item_size);
  }
  return out;
}

}  // namespace gpucompute::cli
