// Tensor decoding, resolution and output placement (see tensor_codec.h).
#include "server/service/tensor_codec.h"

#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/byte_range.h"
#include "common/guarded_copy.h"
#include "common/non_finite.h"
#include "common/status_macros.h"

namespace gpucompute {
namespace {

constexpr int64_t kOutputAlignment = 64;
// Shared-memory inputs are copied and checked in blocks of this many bytes (cache-sized, and a
// multiple of every element size).
constexpr int64_t kCheckBlockBytes = int64_t{1} << 20;

// A copy of client memory (out of a shared-memory region) and the budget lease that pays for
// it, released together: a block of the backend's host memory (page-locked, so that a GPU
// copies it by DMA where it is, like a resident tensor's) when it has room, else plain memory.
struct LeasedBytes {
  MemoryLease lease;
  std::unique_ptr<char[]> plain;
  std::shared_ptr<HostMemory> block_owner;  // where `block` goes back to
  HostMemory::Block block;

  explicit LeasedBytes(MemoryLease l, const std::shared_ptr<HostMemory>& host_memory,
                       int64_t bytes)
      : lease(std::move(l)) {
    if (host_memory != nullptr) block = host_memory->Allocate(static_cast<size_t>(bytes));
    if (block.data != nullptr) {
      block_owner = host_memory;
    } else {
      plain.reset(new char[std::max<int64_t>(1, bytes)]);
    }
  }
  ~LeasedBytes() {
    if (block_owner != nullptr) block_owner->Free(block);
  }
  LeasedBytes(const LeasedBytes&) = delete;
  LeasedBytes& operator=(const LeasedBytes&) = delete;

  char* data() { return block.data != nullptr ? static_cast<char*>(block.data) : plain.get(); }
};

std::string ShapeString(absl::Span<const int64_t> shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ","), "]");
}

// Element count of `shape` for elements of `size` bytes: INVALID_ARGUMENT naming `field` for a
// negative dimension or an overflow.
absl::StatusOr<int64_t> CountElements(absl::Span<const int64_t> shape, int size,
                                      absl::string_view field) {
  int64_t count = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    const int64_t d = shape[i];
    if (d < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ".shape[", i, "]: must be >= 0 (got ", d, ")"));
    }
    if (d > 0 && count > std::numeric_limits<int64_t>::max() / d / size) {
      return absl::InvalidArgumentError(absl::StrCat(field, ".shape: too many elements"));
    }
    count *= d;
  }
  return count;
}

absl::Status CheckDType(v1::DType dtype, absl::string_view field) {
  if (DTypeSize(dtype) == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ".dtype: must be set to a known dtype (got ", static_cast<int>(dtype), ")"));
  }
  return absl::OkStatus();
}

int64_t AlignUp(int64_t v, int64_t a) { return (v + a - 1) / a * a; }

// The region and byte range [begin, end) within it that a SharedMemoryRef names. `length` 0
// means to the end of the region when `zero_length_is_rest` (output placements).
struct RegionRange {
  std::shared_ptr<SharedMemoryRegion> region;
  int64_t begin = 0;
  int64_t end = 0;
};

absl::StatusOr<RegionRange> ResolveRegionRange(const TensorContext& context,
                                               const v1::SharedMemoryRef& ref,
                                               absl::string_view field, bool zero_length_is_rest) {
  if (context.shared_memory == nullptr || !context.shared_memory->enabled()) {
    return absl::FailedPreconditionError(
        absl::StrCat(field, ": ", SharedMemoryDisabledError().message()));
  }
  auto region = context.shared_memory->Find(context.client, ref.region());
  if (!region.ok()) {
    return absl::Status(region.status().code(),
                        absl::StrCat(field, ".region: ", region.status().message()));
  }
  if (absl::Status s = (*region)->CheckStillMapped(); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat(field, ": ", s.message()));
  }
  const int64_t size = (*region)->size();
  if (ref.offset() < 0 || ref.offset() > size) {
    return absl::InvalidArgumentError(absl::StrCat(field, ".offset: ", ref.offset(),
                                                   " is outside region \"", ref.region(), "\" of ",
                                                   size, " bytes"));
  }
  int64_t length = ref.length();
  if (length == 0 && zero_length_is_rest) length = size - ref.offset();
  if (length < 0 || length > size - ref.offset()) {
    return absl::InvalidArgumentError(absl::StrCat(field, ".length: bytes ",
                                                   ByteRange(ref.offset(), length),
                                                   " are outside region \"", ref.region(),
                                                   "\" of ", size, " bytes"));
  }
  return RegionRange{*std::move(region), ref.offset(), ref.offset() + length};
}

}  // namespace

// ---------------------------------------------------------------- input resolution

absl::StatusOr<TensorView> TensorResolver::Resolve(const v1::Tensor& tensor,
                                                   absl::string_view field) {
  TensorView view;
  switch (tensor.payload_case()) {
    case v1::Tensor::kData:
    case v1::Tensor::PAYLOAD_NOT_SET: {
      RETURN_IF_ERROR(CheckDType(tensor.dtype(), field));
      view.dtype = tensor.dtype();
      view.shape.assign(tensor.shape().begin(), tensor.shape().end());
      ASSIGN_OR_RETURN(view.count, CountElements(view.shape, DTypeSize(view.dtype), field));
      if (tensor.payload_case() == v1::Tensor::PAYLOAD_NOT_SET && view.count > 0) {
        return absl::InvalidArgumentError(
            absl::StrCat(field, ".data: missing (give data, a handle or a shared_memory ref)"));
      }
      const uint64_t expected = static_cast<uint64_t>(view.count) * DTypeSize(view.dtype);
      if (tensor.data().size() != expected) {
        return absl::InvalidArgumentError(absl::StrCat(
            field, ".data: holds ", tensor.data().size(), " bytes but shape ",
            ShapeString(view.shape), " of ", DTypeName(view.dtype), " needs ", expected));
      }
      view.bytes = tensor.data();
      return view;
    }
    case v1::Tensor::kHandle: {
      const std::string f = absl::StrCat(field, ".handle");
      if (context_.store == nullptr) {
        return absl::FailedPreconditionError(
            absl::StrCat(f, ": resident tensors cannot be used here"));
      }
      auto resident = context_.store->Acquire(context_.client, tensor.handle());
      if (!resident.ok()) {
        return absl::Status(resident.status().code(),
                            absl::StrCat(f, ": ", resident.status().message()));
      }
      const TensorSpec& spec = (*resident)->spec();
      const auto resident_dtype = static_cast<v1::DType>(spec.dtype);
      if (tensor.dtype() != v1::DTYPE_UNSPECIFIED && tensor.dtype() != resident_dtype) {
        return absl::InvalidArgumentError(absl::StrCat(
            field, ".dtype: is ", DTypeName(tensor.dtype()), " but resident tensor \"",
            tensor.handle(), "\" is ", DTypeName(resident_dtype), " (or leave it unset)"));
      }
      if (tensor.shape_size() > 0 &&
          !std::equal(tensor.shape().begin(), tensor.shape().end(), spec.shape.begin(),
                      spec.shape.end())) {
        return absl::InvalidArgumentError(absl::StrCat(
            field, ".shape: is ", ShapeString(tensor.shape()), " but resident tensor \"",
            tensor.handle(), "\" has shape ", ShapeString(spec.shape), " (or leave it unset)"));
      }
      view.dtype = resident_dtype;
      view.shape = spec.shape;
      view.count = (*resident)->bytes() / std::max(1, spec.element_size);
      view.bytes = (*resident)->data();
      view.known_finite = (*resident)->values_finite();
      pins_.push_back(*std::move(resident));
      return view;
    }
    case v1::Tensor::kSharedMemory: {
      const std::string f = absl::StrCat(field, ".shared_memory");
      RETURN_IF_ERROR(CheckDType(tensor.dtype(), field));
      view.dtype = tensor.dtype();
      view.shape.assign(tensor.shape().begin(), tensor.shape().end());
      ASSIGN_OR_RETURN(view.count, CountElements(view.shape, DTypeSize(view.dtype), field));
      const int64_t expected = view.count * DTypeSize(view.dtype);
      if (tensor.shared_memory().length() != expected) {
        return absl::InvalidArgumentError(absl::StrCat(
            f, ".length: is ", tensor.shared_memory().length(), " but shape ",
            ShapeString(view.shape), " of ", DTypeName(view.dtype), " needs ", expected));
      }
      ASSIGN_OR_RETURN(RegionRange range,
                       ResolveRegionRange(context_, tensor.shared_memory(), f,
                                          /*zero_length_is_rest=*/false));
      // One guarded copy into memory of our own: read in place, the client could shrink the
      // object under any later reader (the backends), and a bus error there would take the
      // server down. The copy is the only read of the client's memory. Float values are
      // checked for NaN and infinities block by block as they are copied (in cache), so
      // that the operation need not read them again. The copy is leased from the server's
      // memory budget first and held with it: a request naming a large region many times is
      // refused, not allocated.
      MemoryLease lease;
      if (context_.memory != nullptr) {
        ASSIGN_OR_RETURN(lease,
                         context_.memory->Acquire(expected, absl::StrCat(f, " (copied out of the region)"),
                                                  context_.client));
      }
      auto copy = std::make_shared<LeasedBytes>(
          std::move(lease),
          context_.store != nullptr ? context_.store->options().host_memory : nullptr, expected);
      char* const owned = copy->data();
      const absl::StatusOr<ElementType> type = FloatElementType(view.dtype, f);
      std::atomic<bool> finite{type.ok()};
      RETURN_IF_ERROR(GuardedCopyInBlocks(
          owned, range.region->data() + range.begin, expected, f, kCheckBlockBytes,
          [&](int64_t begin, int64_t end) {
            if (finite.load(std::memory_order_relaxed) &&
                FirstNonFinite(*type, absl::string_view(owned + begin, end - begin)) >= 0) {
              finite.store(false, std::memory_order_relaxed);
            }
          }));
      view.bytes = absl::string_view(owned, static_cast<size_t>(expected));
      view.known_finite = finite.load();
      pins_.push_back(std::move(copy));
      return view;
    }
  }
  return absl::InvalidArgumentError(absl::StrCat(field, ": unknown payload"));
}

absl::StatusOr<MemoryLease> LeaseOutputs(const TensorContext& context, int64_t bytes,
                                         absl::string_view what) {
  if (context.memory == nullptr) return MemoryLease();
  return context.memory->Acquire(bytes, what, context.client);
}

TensorPins TensorResolver::TakePins() {
  TensorPins pins = this->pins();
  pins_.clear();
  return pins;
}

TensorPins TensorResolver::pins() const {
  if (pins_.empty()) return nullptr;
  return std::make_shared<const std::vector<std::shared_ptr<const void>>>(pins_);
}

// ---------------------------------------------------------------- decoding and encoding

namespace {

absl::Status CheckFloatVector(const TensorView& view, absl::string_view field) {
  if (view.rank() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ".shape: must be 1-D (got ", view.rank(), " dimensions)"));
  }
  if (view.dtype != v1::FLOAT32 && view.dtype != v1::FLOAT64) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ".dtype: must be float32 or float64 (got ", DTypeName(view.dtype), ")"));
  }
  return absl::OkStatus();
}

}  // namespace

std::vector<double> DecodeVectorRange(const TensorView& view, int64_t begin, int64_t end) {
  std::vector<double> out(static_cast<size_t>(end - begin));
  if (view.dtype == v1::FLOAT64) {
    if (!out.empty()) std::memcpy(out.data(), view.bytes.data() + 8 * begin, out.size() * 8);
  } else {
    const char* data = view.bytes.data() + 4 * begin;
    for (size_t i = 0; i < out.size(); ++i) {
      float v;
      std::memcpy(&v, data + 4 * i, 4);
      out[i] = v;
    }
  }
  return out;
}

absl::StatusOr<std::vector<double>> DecodeVector(const TensorView& view, absl::string_view field,
                                                 bool require_finite) {
  RETURN_IF_ERROR(CheckFloatVector(view, field));
  if (require_finite) {
    const int64_t k = FirstNonFinite(view);
    if (k >= 0) return NonFiniteError(field, view, k, k);
  }
  return DecodeVectorRange(view, 0, view.count);
}

int64_t FirstNonFinite(const TensorView& view) {
  if (view.known_finite) return -1;
  return FirstNonFinite(view.dtype == v1::FLOAT32 ? ElementType::kFloat32 : ElementType::kFloat64,
                        view.bytes);
}

absl::Status NonFiniteError(absl::string_view field, const TensorView& view, int64_t index,
                            int64_t shown_index) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": values must be finite (index ", shown_index,
                                                 " is ", DecodeVectorRange(view, index, index + 1)[0],
                                                 ")"));
}

absl::Status Prefixed(absl::string_view field, const absl::Status& s) {
  if (s.ok()) return s;
  return absl::Status(s.code(), absl::StrCat(field, ": ", s.message()));
}

absl::StatusOr<TensorView> ResolveVector(TensorResolver& resolver, const v1::Tensor& tensor,
                                         absl::string_view field, DecodeBudget* budget) {
  // What the message states is checked first, so that a wrong rank or dtype is reported as such
  // rather than as a byte count that does not match (a handle may leave both unset).
  const bool by_handle = tensor.payload_case() == v1::Tensor::kHandle;
  if ((!by_handle || tensor.shape_size() > 0) && tensor.shape_size() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ".shape: must be 1-D (got ", tensor.shape_size(), " dimensions)"));
  }
  if ((!by_handle || tensor.dtype() != v1::DTYPE_UNSPECIFIED) && tensor.dtype() != v1::FLOAT32 &&
      tensor.dtype() != v1::FLOAT64) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ".dtype: must be float32 or float64 (got ", DTypeName(tensor.dtype()), ")"));
  }
  ASSIGN_OR_RETURN(const TensorView view, resolver.Resolve(tensor, field));
  RETURN_IF_ERROR(CheckFloatVector(view, field));
  if (budget != nullptr) {
    const int64_t bytes = view.count * static_cast<int64_t>(sizeof(double));
    if (bytes > budget->left) {
      return absl::ResourceExhaustedError(absl::StrCat(
          field, ": ", view.count, " values would take the request's decoded inputs past ",
          budget->limit, " bytes (twice --max_request_bytes; fields naming one resident tensor "
          "or shared-memory range count once each)"));
    }
    budget->left -= bytes;
    if (budget->shared != nullptr) {
      ASSIGN_OR_RETURN(MemoryLease lease, budget->shared->Acquire(2 * bytes, absl::StrCat(field, " (decoded)"),
                                                                  budget->caller));
      budget->leases.push_back(std::move(lease));
    }
  }
  return view;
}

absl::StatusOr<std::vector<double>> DecodeVector(TensorResolver& resolver, const v1::Tensor& tensor,
                                                 absl::string_view field, bool require_finite,
                                                 DecodeBudget* budget) {
  ASSIGN_OR_RETURN(const TensorView view, ResolveVector(resolver, tensor, field, budget));
  return DecodeVector(view, field, require_finite);
}

absl::StatusOr<std::vector<double>> DecodeVector(const v1::Tensor& tensor, absl::string_view field,
                                                 bool require_finite) {
  TensorResolver inline_only;
  return DecodeVector(inline_only, tensor, field, require_finite);
}

void EncodeVector(v1::DType dtype, int64_t n, std::string&& bytes, v1::Tensor* out) {
  out->set_dtype(dtype);
  out->clear_shape();
  out->add_shape(n);
  out->set_data(std::move(bytes));
}

absl::StatusOr<ElementType> FloatElementType(v1::DType dtype, absl::string_view field) {
  switch (dtype) {
    case v1::FLOAT32: return ElementType::kFloat32;
    case v1::FLOAT64: return ElementType::kFloat64;
    case v1::FLOAT16: return ElementType::kFloat16;
    case v1::BFLOAT16: return ElementType::kBFloat16;
    default:
      return absl::InvalidArgumentError(absl::StrCat(field, " is ", DTypeName(dtype),
                                                     " but must be float32, float64, float16 or bfloat16"));
  }
}

TensorSpec ResidentSpec(v1::DType dtype, const google::protobuf::RepeatedField<int64_t>& shape) {
  TensorSpec spec;
  spec.dtype = dtype;
  spec.element_size = DTypeSize(dtype);
  spec.shape.assign(shape.begin(), shape.end());
  if (auto type = FloatElementType(dtype, "dtype"); type.ok()) spec.values = *type;
  return spec;
}

v1::DType ToWireDType(ElementType type) {
  switch (type) {
    case ElementType::kFloat32: return v1::FLOAT32;
    case ElementType::kFloat64: return v1::FLOAT64;
    case ElementType::kFloat16: return v1::FLOAT16;
    case ElementType::kBFloat16: return v1::BFLOAT16;
  }
  return v1::DTYPE_UNSPECIFIED;
}

// ---------------------------------------------------------------- output placement

bool OutputsInline(const v1::OutputPlacement& placement) {
  return placement.target_case() == v1::OutputPlacement::TARGET_NOT_SET ||
         (placement.target_case() == v1::OutputPlacement::kKeep && !placement.keep());
}

bool DiscardsOutputs(const v1::OutputPlacement& placement) {
  return placement.target_case() == v1::OutputPlacement::kDiscard && placement.discard();
}

namespace {

// True when `placement` keeps an output of `bytes` on the server.
bool KeepsOutput(const v1::OutputPlacement& placement, int64_t bytes) {
  switch (placement.target_case()) {
    case v1::OutputPlacement::kKeep: return placement.keep();
    case v1::OutputPlacement::kKeepAboveBytes: return bytes > placement.keep_above_bytes();
    default: return false;
  }
}

// True when `placement` may keep outputs on the server.
bool MayKeep(const v1::OutputPlacement& placement) {
  return (placement.target_case() == v1::OutputPlacement::kKeep && placement.keep()) ||
         placement.target_case() == v1::OutputPlacement::kKeepAboveBytes;
}

absl::string_view BytesOf(const OutputTensor& o) {
  return o.source != nullptr ? *o.source : absl::string_view(o.tensor->data());
}

// Makes `outputs` resident tensors of the caller, all or none; each Tensor then carries its
// handle (and keeps dtype and shape).
absl::Status KeepOutputs(const TensorContext& context, absl::Span<const OutputTensor> outputs,
                         absl::Duration idle_expiry) {
  std::vector<NewTensor> kept;
  kept.reserve(outputs.size());
  for (const OutputTensor& o : outputs) {
    NewTensor t;
    t.spec.dtype = o.tensor->dtype();
    t.spec.element_size = DTypeSize(o.tensor->dtype());
    t.spec.shape.assign(o.tensor->shape().begin(), o.tensor->shape().end());
    // The operation's own output buffer becomes the resident tensor: no copy.
    t.bytes = o.source != nullptr ? std::string(*o.source) : std::move(*o.tensor->mutable_data());
    kept.push_back(std::move(t));
  }
  auto added = context.store->AddComplete(context.client, std::move(kept), idle_expiry);
  if (!added.ok()) {
    return absl::Status(added.status().code(),
                        absl::StrCat("output_placement.keep: ", added.status().message()));
  }
  for (size_t i = 0; i < outputs.size(); ++i) outputs[i].tensor->set_handle((*added)[i]->handle());
  return absl::OkStatus();
}

// Writes `outputs` one after another into the placement's region (see PlaceOutputs).
absl::Status WriteOutputsToRegion(const TensorContext& context, const v1::SharedMemoryRef& ref,
                                  absl::Span<const OutputTensor> outputs) {
  ASSIGN_OR_RETURN(RegionRange range,
                   ResolveRegionRange(context, ref, "output_placement.shared_memory",
                                      /*zero_length_is_rest=*/true));
  std::vector<int64_t> offsets;  // from range.begin
  offsets.reserve(outputs.size());
  int64_t end = 0;
  for (const OutputTensor& o : outputs) {
    const int64_t at = AlignUp(end, kOutputAlignment);
    offsets.push_back(at);
    end = at + static_cast<int64_t>(BytesOf(o).size());
  }
  const int64_t length = range.end - range.begin;
  if (end > length) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "output_placement.shared_memory.length: the ", outputs.size(), " output tensor",
        outputs.size() == 1 ? "" : "s", " need ", end, " bytes (each at a multiple of ",
        kOutputAlignment, " bytes) but the placement has ", length));
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    const absl::string_view bytes = BytesOf(outputs[i]);
    const int64_t at = range.begin + offsets[i];
    RETURN_IF_ERROR(GuardedCopy(range.region->data() + at, bytes.data(),
                                static_cast<int64_t>(bytes.size()), "output_placement.shared_memory"));
    v1::SharedMemoryRef* out = outputs[i].tensor->mutable_shared_memory();  // clears `data`
    out->set_region(ref.region());
    out->set_offset(at);
    out->set_length(static_cast<int64_t>(bytes.size()));
  }
  return absl::OkStatus();
}

}  // namespace

int64_t InlineOutputBytes(const v1::OutputPlacement& placement, int64_t bytes) {
  if (OutputsInline(placement)) return bytes;
  if (placement.target_case() == v1::OutputPlacement::kKeepAboveBytes) {
    return KeepsOutput(placement, bytes) ? 0 : bytes;
  }
  return 0;
}

absl::StatusOr<absl::Duration> IdleExpiry(int64_t milliseconds, absl::string_view field) {
  if (milliseconds < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": must be >= 0 milliseconds (0: the server's expiry), got ", milliseconds));
  }
  return milliseconds == 0 ? absl::InfiniteDuration() : absl::Milliseconds(milliseconds);
}

absl::Status CheckOutputPlacement(const TensorContext& context,
                                  const v1::OutputPlacement& placement) {
  RETURN_IF_ERROR(IdleExpiry(placement.idle_expiry_ms(), "output_placement.idle_expiry_ms").status());
  if (placement.target_case() == v1::OutputPlacement::kKeepAboveBytes &&
      placement.keep_above_bytes() < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "output_placement.keep_above_bytes: must be >= 0, got ", placement.keep_above_bytes()));
  }
  if (MayKeep(placement)) {
    if (context.store == nullptr) {
      return absl::FailedPreconditionError(
          "output_placement.keep: resident tensors cannot be used here");
    }
    return absl::OkStatus();
  }
  if (placement.target_case() != v1::OutputPlacement::kSharedMemory) return absl::OkStatus();
  return ResolveRegionRange(context, placement.shared_memory(), "output_placement.shared_memory",
                            /*zero_length_is_rest=*/true)
      .status();
}

absl::Status CheckOutputBytes(const TensorContext& context, const v1::OutputPlacement& placement,
                              int64_t bytes) {
  if (OutputsInline(placement)) return absl::OkStatus();
  if (placement.target_case() == v1::OutputPlacement::kSharedMemory) {
    ASSIGN_OR_RETURN(const RegionRange range,
                     ResolveRegionRange(context, placement.shared_memory(),
                                        "output_placement.shared_memory", /*zero_length_is_rest=*/true));
    if (bytes > range.end - range.begin) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "output_placement.shared_memory.length: the outputs need ", bytes,
          " bytes but the placement has ", range.end - range.begin));
    }
    return absl::OkStatus();
  }
  if (context.store == nullptr) return absl::OkStatus();  // CheckOutputPlacement refuses keep
  if (MayKeep(placement)) {
    absl::Status room = context.store->CheckRoom(context.client, bytes);
    if (room.ok()) return room;
    return absl::Status(room.code(), absl::StrCat("output_placement: the outputs would take ", bytes,
                                                  " bytes to keep: ", room.message()));
  }
  const int64_t quota = context.store->options().max_bytes_per_client;
  if (bytes > quota) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "output_placement.discard: the outputs would take ", bytes,
        " bytes while computed; the limit is the tensor quota, ", quota,
        " bytes per client (--tensor_quota_bytes)"));
  }
  return absl::OkStatus();
}

absl::Status PlaceOutputs(const TensorContext& context, const v1::OutputPlacement& placement,
                          absl::Span<v1::Tensor* const> outputs) {
  std::vector<OutputTensor> all;
  all.reserve(outputs.size());
  for (v1::Tensor* t : outputs) all.push_back(OutputTensor{t, nullptr});
  return PlaceOutputs(context, placement, all);
}

absl::Status PlaceOutputs(const TensorContext& context, const v1::OutputPlacement& placement,
                          absl::Span<const OutputTensor> outputs) {
  RETURN_IF_ERROR(CheckOutputPlacement(context, placement));
  if (placement.target_case() == v1::OutputPlacement::kSharedMemory) {
    return WriteOutputsToRegion(context, placement.shared_memory(), outputs);
  }
  if (DiscardsOutputs(placement)) {
    for (const OutputTensor& o : outputs) o.tensor->clear_payload();
    return absl::OkStatus();
  }
  std::vector<OutputTensor> kept;
  for (const OutputTensor& o : outputs) {
    if (KeepsOutput(placement, static_cast<int64_t>(BytesOf(o).size()))) {
      kept.push_back(o);
    } else if (o.source != nullptr) {
      o.tensor->set_data(o.source->data(), o.source->size());
    }
  }
  if (kept.empty()) return absl::OkStatus();
  ASSIGN_OR_RETURN(absl::Duration expiry,
                   IdleExpiry(placement.idle_expiry_ms(), "output_placement.idle_expiry_ms"));
  return KeepOutputs(context, kept, expiry);
}

}  // namespace gpucompute
