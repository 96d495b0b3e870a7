// NaN and infinity search (see non_finite.h).
#include "common/non_finite.h"

#include <algorithm>
#include <atomic>
#include <cstring>

#include "common/parallel_for.h"

namespace gpucompute {
namespace {

// True when elements [begin, end) hold a value whose exponent bits are all set (an infinity or
// a NaN). Branch-free over the block, so the compiler vectorises it.
template <typename Bits>
bool BlockHasNonFinite(const char* data, int64_t begin, int64_t end, Bits exponent) {
  bool bad = false;
  for (int64_t i = begin; i < end; ++i) {
    Bits v;
    std::memcpy(&v, data + sizeof(Bits) * i, sizeof(Bits));
    bad |= (v & exponent) == exponent;
  }
  return bad;
}

// Blocks of kBlock checked on several threads for large arrays (216 MB took ~40 ms on one
// thread), then the first bad block searched element by element.
template <typename Bits>
int64_t FirstNonFiniteBits(const char* data, int64_t n, Bits exponent) {
  constexpr int64_t kBlock = 4096;
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  std::atomic<int64_t> first_bad_block{blocks};
  ParallelFor(blocks, n * static_cast<int64_t>(sizeof(Bits)), [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1 && b < first_bad_block.load(std::memory_order_relaxed); ++b) {
      if (BlockHasNonFinite<Bits>(data, b * kBlock, std::min(n, (b + 1) * kBlock), exponent)) {
        int64_t seen = first_bad_block.load();
        while (b < seen && !first_bad_block.compare_exchange_weak(seen, b)) {
        }
        return;
      }
    }
  }, /*min_cost_per_thread=*/int64_t{4} << 20);
  const int64_t b = first_bad_block.load();
  if (b == blocks) return -1;
  for (int64_t i = b * kBlock; i < n; ++i) {
    Bits v;
    std::memcpy(&v, data + sizeof(Bits) * i, sizeof(Bits));
    if ((v & exponent) == exponent) return i;
  }
  return -1;
}

}  // namespace

int64_t FirstNonFinite(ElementType type, absl::string_view bytes) {
  const int64_t n = static_cast<int64_t>(bytes.size()) / ElementSize(type);
  switch (type) {
    case ElementType::kFloat64:
      return FirstNonFiniteBits<uint64_t>(bytes.data(), n, uint64_t{0x7FF0000000000000});
    case ElementType::kFloat32:
      return FirstNonFiniteBits<uint32_t>(bytes.data(), n, uint32_t{0x7F800000});
    case ElementType::kFloat16:
      return FirstNonFiniteBits<uint16_t>(bytes.data(), n, uint16_t{0x7C00});
    case ElementType::kBFloat16:
      return FirstNonFiniteBits<uint16_t>(bytes.data(), n, uint16_t{0x7F80});
  }
  return -1;
}

}  // namespace gpucompute
