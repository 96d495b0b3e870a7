// The one place where wire Tensors are decoded and encoded. Every check names the field path
// it was given (e.g. "series[2].t") and the rule broken.
//
// A Tensor's bytes are inline (`data`), in a resident tensor (`handle`) or in a registered
// shared-memory region (`shared_memory`). TensorResolver turns any of them into a TensorView
// (dtype, shape, bytes). Inline and resident bytes are read in place; shared-memory bytes are
// copied once (GuardedCopy) into memory the resolver owns, so that a client shrinking its
// object can fail only that copy, never a later reader; large copies go into the backend's host
// memory while it has room (TensorStoreOptions::host_memory: page-locked with CUDA, which a GPU
// copies by DMA where it is, as it does a resident tensor's bytes). Resident tensors and copies are pinned
// by the resolver (TakePins) so that the views stay valid while a job reads them, even when
// the tensor is deleted meanwhile.
//
// Outputs are filled inline by each operation; PlaceOutputs then moves them where the request's
// OutputPlacement asks (kept on the server, or written into a shared-memory region).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "gpucompute/v1/dtype.h"
#include "gpucompute/v1/tensor.pb.h"
#include "common/element_type.h"
#include "server/runtime/memory_budget.h"
#include "server/runtime/shared_memory.h"
#include "server/runtime/tensor_store.h"

namespace gpucompute {

using v1::DTypeName;
using v1::DTypeSize;

// What resolving and placing tensors needs: the store of resident tensors, the registered
// shared-memory regions (either may be null: then that kind of Tensor is refused) and the caller,
// who owns both.
struct TensorContext {
  TensorStore* store = nullptr;
  SharedMemoryRegistry* shared_memory = nullptr;
  std::string client;
  MemoryBudget* memory = nullptr;  // the server's host-memory budget; null: unbounded
};

// A resolved tensor: checked dtype and shape, and exactly product(shape) * sizeof(dtype) bytes,
// wherever they live.
struct TensorView {
  v1::DType dtype = v1::DTYPE_UNSPECIFIED;
  std::vector<int64_t> shape;
  absl::string_view bytes;
  int64_t count = 0;  // elements
  // Every value is known to be finite: a resident tensor whose bytes were checked as they
  // arrived (ResidentTensor::values_finite), so decoders need not check them again.
  bool known_finite = false;

  int rank() const { return static_cast<int>(shape.size()); }
};

// Keeps the resident tensors and shared-memory regions that views point into alive; hold it
// (by value, it is a shared_ptr) until nothing reads them any more.
using TensorPins = std::shared_ptr<const void>;

// Resolves the input Tensors of one call. Not thread-safe (one per call).
class TensorResolver {
 public:
  // Inline tensors only (handles and shared-memory refs are FAILED_PRECONDITION).
  TensorResolver() = default;
  explicit TensorResolver(TensorContext context) : context_(std::move(context)) {}

  // Checks dtype, shape (non-negative dims) and payload. Inline: `data` must hold exactly
  // product(shape) * sizeof(dtype) bytes. Handle: the caller's complete resident tensor
  // (NOT_FOUND naming `<field>.handle`, FAILED_PRECONDITION while incomplete); dtype and shape
  // may be unset (taken from it) or must match it. Shared memory: dtype and shape required,
  // `length` must equal their byte count and [offset, offset + length) lie in the region.
  absl::StatusOr<TensorView> Resolve(const v1::Tensor& tensor, absl::string_view field);

  // What the views resolved so far point into (null when all were inline). The resolver keeps
  // its own reference too.
  TensorPins pins() const;
  // The same, handed over: the resolver keeps none, so that whoever takes them decides when the
  // bytes (and the memory-budget leases of shared-memory copies) go.
  TensorPins TakePins();

  const TensorContext& context() const { return context_; }

 private:
  TensorContext context_;
  std::vector<std::shared_ptr<const void>> pins_;
};

// `s` with "<field>: " before its message, for an error about that field (OK stays OK).
absl::Status Prefixed(absl::string_view field, const absl::Status& s);

// A 1-D float32/float64 tensor as doubles. With `require_finite`, NaN and infinities are
// INVALID_ARGUMENT naming the first bad index.
absl::StatusOr<std::vector<double>> DecodeVector(const TensorView& view, absl::string_view field,
                                                 bool require_finite = true);
// The index of the first NaN or infinity of a float32/float64 view, -1 when there is none
// (at once when the view is known_finite).
int64_t FirstNonFinite(const TensorView& view);
// The error for that value: "<field>: values must be finite (index <shown_index> is <value>)".
absl::Status NonFiniteError(absl::string_view field, const TensorView& view, int64_t index,
                            int64_t shown_index);
// What one call may decode into host vectors. Inline data is bounded by the message size, but
// resident tensors and shared memory are not, and many fields of one request may name the same
// one: a request of 100,000 series naming one 16M-sample tensor would decode 25 TB.
// With a server budget (`shared`), each decoded vector also takes a lease of twice its bytes
// (the vector and the working copy an operation makes of it) before it is allocated; the leases
// are the caller's to hold until the request is done.
struct DecodeBudget {
  explicit DecodeBudget(int64_t limit_bytes, MemoryBudget* shared_budget = nullptr,
                        std::string caller_id = "")
      : limit(limit_bytes), left(limit_bytes), shared(shared_budget), caller(std::move(caller_id)) {}
  int64_t limit;
  int64_t left;
  MemoryBudget* shared;
  std::string caller;  // whose share of `shared` the leases take
  std::vector<MemoryLease> leases;
};

// A Tensor, wherever its bytes are, resolved and decoded as above; the rank and dtype the
// message states are checked before its bytes. With a budget, the decoded doubles are charged
// to it once resolved and before the vector is allocated (resolving a shared-memory range
// copies that one range first): RESOURCE_EXHAUSTED naming the field when they do not fit.
absl::StatusOr<std::vector<double>> DecodeVector(TensorResolver& resolver, const v1::Tensor& tensor,
                                                 absl::string_view field, bool require_finite = true,
                                                 DecodeBudget* budget = nullptr);
// The checks and the charge of DecodeVector without the decoding: the view of a 1-D float32
// or float64 tensor, for a caller that decodes parts of it (DecodeVectorRange) while the
// resolver holds it.
absl::StatusOr<TensorView> ResolveVector(TensorResolver& resolver, const v1::Tensor& tensor,
                                         absl::string_view field, DecodeBudget* budget = nullptr);
// Elements [begin, end) of such a view, as doubles (no finiteness check).
std::vector<double> DecodeVectorRange(const TensorView& view, int64_t begin, int64_t end);
// The same for an inline Tensor (tests, clients of the codec).
absl::StatusOr<std::vector<double>> DecodeVector(const v1::Tensor& tensor, absl::string_view field,
                                                 bool require_finite = true);

// A 1-D tensor of `dtype` that takes ownership of `bytes` (no copy).
void EncodeVector(v1::DType dtype, int64_t n, std::string&& bytes, v1::Tensor* out);

// The element type of a float dtype (float32, float64, float16, bfloat16); INVALID_ARGUMENT
// naming `field` ("<field> is int32 but must be float32, float64, float16 or bfloat16").
absl::StatusOr<ElementType> FloatElementType(v1::DType dtype, absl::string_view field);

// The wire dtype of an element type.
v1::DType ToWireDType(ElementType type);
// The TensorSpec of a resident tensor of `dtype` (a known one) and `shape`, float types marked
// for the finiteness check of its writes.
TensorSpec ResidentSpec(v1::DType dtype, const google::protobuf::RepeatedField<int64_t>& shape);

// ---------------------------------------------------------------- output placement

// True when `placement` asks for outputs inline in the response (unset, or keep = false).
bool OutputsInline(const v1::OutputPlacement& placement);
// True when `placement` discards the outputs (discard = true).
bool DiscardsOutputs(const v1::OutputPlacement& placement);

// How many of an output's `bytes` the response carries inline under `placement`: all of them
// inline, those of an output at or under the threshold with keep_above_bytes, none otherwise.
// Operations bound their inline response with it before any work is done.
int64_t InlineOutputBytes(const v1::OutputPlacement& placement, int64_t bytes);

// A requested idle expiry in milliseconds as a Duration (0: infinite, i.e. the store's own);
// INVALID_ARGUMENT naming `field` when negative.
absl::StatusOr<absl::Duration> IdleExpiry(int64_t milliseconds, absl::string_view field);

// Checks, before any work is done, that outputs of `bytes` in all can be held where
// `placement` puts them: kept (keep, keep_above_bytes), within the caller's free tensor quota;
// discarded, within the quota's size (the server holds them while they are computed); in
// shared memory, within the placement's range. RESOURCE_EXHAUSTED naming the limit. Inline
// outputs are bounded by the response size, which each operation checks.
absl::Status CheckOutputBytes(const TensorContext& context, const v1::OutputPlacement& placement,
                              int64_t bytes);

// A lease of `bytes` of the server's memory budget (context.memory, the caller's share) for
// outputs an operation is about to compute: RESOURCE_EXHAUSTED naming `what` when they do not
// fit beside the work in progress. An empty lease without a budget.
absl::StatusOr<MemoryLease> LeaseOutputs(const TensorContext& context, int64_t bytes,
                                         absl::string_view what);

// Checks, before any work is done, that `placement` can be honoured: a store for `keep` and
// `keep_above_bytes` (>= 0); a registered region, and offset/length within it, for
// `shared_memory`; idle_expiry_ms >= 0. Errors name `output_placement...`.
absl::Status CheckOutputPlacement(const TensorContext& context,
                                  const v1::OutputPlacement& placement);

// One output of a response: its Tensor, with dtype and shape set, and its bytes, which are
// either the Tensor's inline `data` (when `source` is null) or `*source` (a view elsewhere, e.g.
// Echo's input, copied once to wherever the output goes).
struct OutputTensor {
  v1::Tensor* tensor = nullptr;
  const absl::string_view* source = nullptr;
};

// Places `outputs` as `placement` asks:
//   inline: the bytes stay in (or are copied into) `data`;
//   keep: each becomes a resident tensor of the caller (inline bytes are moved, not copied), all
//     or none within the quota (RESOURCE_EXHAUSTED naming the limit); the Tensor keeps dtype and
//     shape and carries the handle;
//   keep_above_bytes: those over the threshold as with keep, the others inline;
//   shared_memory: written one after another into the region, each at the next multiple of 64
//     bytes from the placement's offset, within its length (RESOURCE_EXHAUSTED naming the bytes
//     needed when they do not fit); the Tensor carries the SharedMemoryRef;
//   discard: no payload; the Tensor keeps dtype and shape.
absl::Status PlaceOutputs(const TensorContext& context, const v1::OutputPlacement& placement,
                          absl::Span<const OutputTensor> outputs);

// The same for outputs that all hold their bytes inline.
absl::Status PlaceOutputs(const TensorContext& context, const v1::OutputPlacement& placement,
                          absl::Span<v1::Tensor* const> outputs);

}  // namespace gpucompute
