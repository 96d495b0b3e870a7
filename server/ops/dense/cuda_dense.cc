// CUDA dense-layer host code (see cuda_dense.h).
#include "server/ops/dense/cuda_dense.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <random>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/align.h"
#include "kernels/dense/dense_kernels.cuh"
#include "common/nvtx.h"
#include "common/parallel_for.h"
#include "common/status_macros.h"
#include "server/device/cuda_resources.h"
#include "server/device/stream_buffers.h"
#include "server/ops/dense/tuning.h"
#include "spdlog/spdlog.h"

namespace gpucompute::dense {

struct GemmPlan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};
  bool post_activation = false;  // the activation runs as a separate kernel after the product

  GemmPlan() = default;
  GemmPlan(const GemmPlan&) = delete;
  GemmPlan& operator=(const GemmPlan&) = delete;
  ~GemmPlan() {
    if (d) cublasLtMatrixLayoutDestroy(d);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (desc) cublasLtMatmulDescDestroy(desc);
  }
};

namespace {


cudaDataType_t CudaType(ElementType t) {
  switch (t) {
    case ElementType::kFloat16: return CUDA_R_16F;
    case ElementType::kBFloat16: return CUDA_R_16BF;
    case ElementType::kFloat64: return CUDA_R_64F;
    default: return CUDA_R_32F;
  }
}

absl::Status ValidateSpec(const ModelSpec& spec) {
  if (spec.dtype != ElementType::kFloat32 && spec.dtype != ElementType::kFloat16 &&
      spec.dtype != ElementType::kBFloat16) {
    return absl::InvalidArgumentError(
        absl::StrCat("model dtype ", ElementName(spec.dtype), " is not float32, float16 or bfloat16"));
  }
  if (spec.layers.empty()) return absl::InvalidArgumentError("model has no layers");
  for (size_t l = 0; l < spec.layers.size(); ++l) {
    const LayerSpec& L = spec.layers[l];
    if (L.in < 1 || L.out < 1 || L.in > (int64_t{1} << 30) || L.out > (int64_t{1} << 30)) {
      return absl::InvalidArgumentError(absl::StrCat("layers[", l, "]: bad shape ", L.in, " x ", L.out));
    }
    if (static_cast<int64_t>(L.weight.size()) != L.in * L.out) {
      return absl::InvalidArgumentError(absl::StrCat("layers[", l, "].weight: ", L.weight.size(),
                                                     " values for ", L.in, " x ", L.out));
    }
    if (!L.bias.empty() && static_cast<int64_t>(L.bias.size()) != L.out) {
      return absl::InvalidArgumentError(
          absl::StrCat("layers[", l, "].bias: ", L.bias.size(), " values for ", L.out, " outputs"));
    }
    if (l > 0 && L.in != spec.layers[l - 1].out) {
      return absl::InvalidArgumentError(absl::StrCat("layers[", l, "]: in ", L.in,
                                                     " != previous layer's out ", spec.layers[l - 1].out));
    }
  }
  return absl::OkStatus();
}

// Byte offsets of one layer's arrays inside the model's allocation.
struct LayerOffsets {
  size_t weight = 0, bias = 0, bias_model = 0, colsum = 0;
};

absl::StatusOr<std::unique_ptr<GemmPlan>> MakePlan(cublasLtHandle_t handle, const CudaLayer& L,
                                                   ElementType dtype, bool tf32, int64_t rows,
                                                   int64_t ldb, bool f32_bias) {
  auto plan = std::make_unique<GemmPlan>();
  const cudaDataType_t dt = CudaType(dtype);
  const cublasComputeType_t compute = dtype == ElementType::kFloat32 && tf32
                                          ? CUBLAS_COMPUTE_32F_FAST_TF32
                                          : CUBLAS_COMPUTE_32F;
  CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescCreate(&plan->desc, compute, CUDA_R_32F));
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
  // cuBLASLt's GELU is the tanh approximation (checked against a float64 reference in
  // dense_cuda_test at float32 precision); erf-GELU and SiLU run as a separate kernel.
  if (L.activation == Activation::kGeluTanh) epilogue = CUBLASLT_EPILOGUE_GELU_BIAS;
  if (L.activation == Activation::kRelu) epilogue = CUBLASLT_EPILOGUE_RELU_BIAS;
  plan->post_activation = L.activation == Activation::kGeluErf || L.activation == Activation::kSilu;
  CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_EPILOGUE,
                                                        &epilogue, sizeof(epilogue)));
  const void* bias = f32_bias ? static_cast<const void*>(L.bias) : L.bias_model;
  CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(
      plan->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
  if (f32_bias && dt != CUDA_R_32F) {
    const int32_t bias_type = CUDA_R_32F;
    CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(
        plan->desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof(bias_type)));
  }
  // Row-major y (rows x out) = x (rows x in) . W (in x out) is column-major
  // D (out x rows) = op_T(A) . B with A the stored W^T read column-major (in x out, lda = ldw)
  // and B = x (in x rows, ldb); the bias runs along D's rows.
  const cublasOperation_t transpose = CUBLAS_OP_T;
  CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSA,
                                                        &transpose, sizeof(transpose)));
  CUBLAS_RETURN_IF_ERROR(cublasLtMatrixLayoutCreate(&plan->a, dt, L.in, L.out, L.ldw));
  CUBLAS_RETURN_IF_ERROR(cublasLtMatrixLayoutCreate(&plan->b, dt, L.in, rows, ldb));
  CUBLAS_RETURN_IF_ERROR(cublasLtMatrixLayoutCreate(&plan->d, dt, L.out, rows, L.ldy));
  cublasLtMatmulPreference_t pref = nullptr;
  CUBLAS_RETURN_IF_ERROR(cublasLtMatmulPreferenceCreate(&pref));
  struct PrefGuard {
    cublasLtMatmulPreference_t p;
    ~PrefGuard() { cublasLtMatmulPreferenceDestroy(p); }
  } guard{pref};
  const uint64_t workspace = kCublasLtWorkspaceBytes;
  CUBLAS_RETURN_IF_ERROR(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof(workspace)));
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  CUBLAS_RETURN_IF_ERROR(cublasLtMatmulAlgoGetHeuristic(handle, plan->desc, plan->a, plan->b,
                                                        plan->d, plan->d, pref, 1, &result, &found));
  if (found < 1) {
    return absl::NotFoundError(absl::StrCat("cuBLASLt has no algorithm for ", L.out, " x ", L.in,
                                            " x ", rows, " ", ElementName(dtype)));
  }
  plan->algo = result.algo;
  return plan;
}


// The tensor-core kernel's arguments for layer L over `rows` rows of `in` (null pointers:
// filled in at launch; pool and model allocations are 256-byte aligned).
kernels::TensorCoreArgs TensorCoreLayer(const CudaLayer& L, ElementType dtype, int64_t rows,
                                        int64_t ldx, bool layernorm) {
  kernels::TensorCoreArgs a;
  a.ldx = ldx;
  a.w = L.weight;
  a.ldw = L.ldw;
  a.bias = L.bias;
  a.colsum = L.colsum;
  a.ldy = L.ldy;
  a.type = dtype;
  a.rows = rows;
  a.k = L.in;
  a.n = L.out;
  a.layernorm = layernorm;
  a.eps = L.eps;
  a.act = L.activation;
  return a;
}

}  // namespace

// --- CudaDenseModel ---------------------------------------------------------------------------

CudaDenseModel::~CudaDenseModel() = default;

absl::StatusOr<const GemmPlan*> CudaDenseModel::Plan(cublasLtHandle_t handle, int layer,
                                                     int64_t rows, int64_t ldb) const {
  const auto key = std::make_tuple(layer, rows, ldb);
  absl::MutexLock lock(&mu_);
  auto it = plans_.find(key);
  if (it != plans_.end()) return it->second.get();
  const CudaLayer& L = layers_[static_cast<size_t>(layer)];
  // A float32 bias for every dtype when cuBLASLt takes it (more exact); else the rounded copy.
  auto plan = MakePlan(handle, L, dtype_, allow_tf32_, rows, ldb, /*f32_bias=*/true);
  if (!plan.ok() && dtype_ != ElementType::kFloat32) {
    plan = MakePlan(handle, L, dtype_, allow_tf32_, rows, ldb, /*f32_bias=*/false);
  }
  if (!plan.ok()) return plan.status();
  const GemmPlan* p = plan->get();
  plans_.emplace(key, *std::move(plan));
  return p;
}

int64_t CudaDenseModel::cached_plans() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(plans_.size());
}

// --- Upload -----------------------------------------------------------------------------------

absl::StatusOr<std::unique_ptr<CudaDenseModel>> UploadModel(DeviceContext& device,
                                                            const ModelSpec& spec) {
  RETURN_IF_ERROR(ValidateSpec(spec));
  RETURN_IF_ERROR(device.MakeCurrent());
  const int elem = ElementSize(spec.dtype);
  std::unique_ptr<CudaDenseModel> model(new CudaDenseModel());
  model->dtype_ = spec.dtype;
  model->allow_tf32_ = spec.allow_tf32;

  std::vector<LayerOffsets> offsets;
  size_t total = 0;
  for (const LayerSpec& L : spec.layers) {
    const size_t ldw = static_cast<size_t>(PaddedCols(L.in));
    const size_t ldy = static_cast<size_t>(PaddedCols(L.out));
    LayerOffsets o;
    o.weight = total;
    total = AlignUp(total + static_cast<size_t>(L.out) * ldw * elem);
    o.bias = total;
    total = AlignUp(total + ldy * sizeof(float));
    o.bias_model = total;
    total = AlignUp(total + ldy * elem);
    o.colsum = total;
    total = AlignUp(total + ldy * sizeof(float));
    offsets.push_back(o);
  }

  auto memory = DeviceMemory::Allocate(device.device(), total);
  if (!memory.ok() && absl::IsResourceExhausted(memory.status())) {
    // The stream pool may hold idle memory that cudaMalloc cannot use: hand it back, retry once.
    CUDA_RETURN_IF_ERROR(cudaMemPoolTrimTo(device.memory_pool(), 0));
    memory = DeviceMemory::Allocate(device.device(), total);
  }
  if (!memory.ok()) {
    return absl::Status(memory.status().code(),
                        absl::StrCat("model '", spec.name, "' needs ", total, " bytes on device ",
                                     device.device(), ": ", memory.status().message()));
  }
  model->memory_ = *std::move(memory);
  char* base = static_cast<char*>(model->memory_.get());

  std::vector<char> host;
  for (size_t l = 0; l < spec.layers.size(); ++l) {
    const LayerSpec& L = spec.layers[l];
    const int64_t ldw = PaddedCols(L.in);
    const int64_t ldy = PaddedCols(L.out);
    const LayerOffsets& o = offsets[l];
    // Weights transposed: for each output, its `in` weights rounded to the dtype, then zero
    // padding to ldw. Transposed in blocks of outputs (contiguous reads of the in x out spec).
    const size_t row_bytes = static_cast<size_t>(ldw) * elem;
    host.assign(static_cast<size_t>(L.out) * row_bytes, 0);
    constexpr int64_t kBlock = 32;
    const int64_t blocks = (L.out + kBlock - 1) / kBlock;
    ParallelFor(blocks, L.in * L.out, [&](int64_t begin, int64_t end) {
      std::vector<float> tile(static_cast<size_t>(kBlock * L.in));
      for (int64_t b = begin; b < end; ++b) {
        const int64_t j0 = b * kBlock, width = std::min(kBlock, L.out - j0);
        for (int64_t k = 0; k < L.in; ++k) {
          const float* src = L.weight.data() + k * L.out + j0;
          for (int64_t jj = 0; jj < width; ++jj) tile[static_cast<size_t>(jj * L.in + k)] = src[jj];
        }
        for (int64_t jj = 0; jj < width; ++jj) {
          FromFloat(tile.data() + jj * L.in, L.in, spec.dtype,
                    host.data() + static_cast<size_t>(j0 + jj) * row_bytes);
        }
      }
    });
    CUDA_RETURN_IF_ERROR(cudaMemcpy(base + o.weight, host.data(), host.size(), cudaMemcpyHostToDevice));
    // Column sums of the stored (rounded) weights, in double: the tensor-core kernel's
    // LayerNorm fold subtracts mean_i x colsum_j from the raw product.
    std::vector<float> colsum(static_cast<size_t>(ldy), 0.f);
    ParallelFor(L.out, L.in * L.out, [&](int64_t begin, int64_t end) {
      std::vector<double> w(static_cast<size_t>(L.in));
      for (int64_t j = begin; j < end; ++j) {
        ToDouble(spec.dtype, host.data() + static_cast<size_t>(j) * row_bytes, L.in, w.data());
        double sum = 0;
        for (double v : w) sum += v;
        colsum[static_cast<size_t>(j)] = static_cast<float>(sum);
      }
    });
    CUDA_RETURN_IF_ERROR(cudaMemcpy(base + o.colsum, colsum.data(), colsum.size() * sizeof(float),
                                    cudaMemcpyHostToDevice));
    // Bias: float32 and the dtype's rounding, both zero-padded.
    std::vector<float> bias(static_cast<size_t>(ldy), 0.f);
    for (int64_t j = 0; j < L.out && !L.bias.empty(); ++j) bias[j] = static_cast<float>(L.bias[j]);
    CUDA_RETURN_IF_ERROR(cudaMemcpy(base + o.bias, bias.data(), bias.size() * sizeof(float),
                                    cudaMemcpyHostToDevice));
    host.assign(static_cast<size_t>(ldy) * elem, 0);
    FromFloat(bias.data(), ldy, spec.dtype, host.data());
    CUDA_RETURN_IF_ERROR(cudaMemcpy(base + o.bias_model, host.data(), host.size(), cudaMemcpyHostToDevice));

    CudaLayer c;
    c.in = L.in;
    c.out = L.out;
    c.ldw = ldw;
    c.ldy = ldy;
    c.layernorm = L.layernorm;
    c.eps = static_cast<float>(L.eps);
    c.activation = L.activation;
    c.weight = base + o.weight;
    c.bias = reinterpret_cast<const float*>(base + o.bias);
    c.bias_model = base + o.bias_model;
    c.colsum = reinterpret_cast<const float*>(base + o.colsum);
    model->layers_.push_back(c);
  }
  return model;
}

absl::StatusOr<std::shared_ptr<const LoadedModel>> LoadModelOnDevices(
    const std::vector<DeviceContext*>& devices, const ModelSpec& spec) {
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::unique_ptr<CudaDenseModel>> per_device;
  for (DeviceContext* d : devices) {
    ASSIGN_OR_RETURN(auto m, UploadModel(*d, spec));
    const size_t index = static_cast<size_t>(d->device());
    if (per_device.size() <= index) per_device.resize(index + 1);
    per_device[index] = std::move(m);
  }
  ModelInfo info = DescribeModel(spec);
  for (const DeviceContext* d : devices) info.devices.push_back(d->device());
  auto loaded = std::make_shared<CudaLoadedModel>(std::move(info), std::move(per_device));
  loaded->set_load_ms(
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  return std::shared_ptr<const LoadedModel>(std::move(loaded));
}

absl::Status CheckFitsOnDevice(DeviceContext& device, int64_t bytes) {
  constexpr int64_t kMargin = int64_t{256} << 20;
  RETURN_IF_ERROR(device.MakeCurrent());
  size_t free = 0, total = 0;
  CUDA_RETURN_IF_ERROR(cudaMemGetInfo(&free, &total));
  // Memory the stream pool keeps idle is free for our purposes: an upload trims it first.
  uint64_t reserved = 0, used = 0;
  CUDA_RETURN_IF_ERROR(cudaMemPoolGetAttribute(device.memory_pool(),
                                               cudaMemPoolAttrReservedMemCurrent, &reserved));
  CUDA_RETURN_IF_ERROR(
      cudaMemPoolGetAttribute(device.memory_pool(), cudaMemPoolAttrUsedMemCurrent, &used));
  const int64_t available = static_cast<int64_t>(free) +
                            static_cast<int64_t>(reserved > used ? reserved - used : 0);
  // Row padding adds at most 7 columns per row: bound it by 1/8 of the bytes.
  const int64_t needed = bytes + bytes / 8 + kMargin;
  if (needed > available) {
    return absl::ResourceExhaustedError(absl::StrCat("model needs ", needed, " bytes on device ",
                                                     device.device(), " but only ", available,
                                                     " are free"));
  }
  return absl::OkStatus();
}

// --- Run --------------------------------------------------------------------------------------

namespace {

// The scratch of one batch on its stream (StreamScratch frees it in stream order).
struct DenseScratch {
  void* in = nullptr;
  void* act[2] = {nullptr, nullptr};
  void* xhat = nullptr;
  void* row_stats = nullptr;
};

// What a layer reads: its input rows, their element type and row stride (elements).
struct LayerInput {
  const void* data = nullptr;
  ElementType type = ElementType::kFloat32;
  int64_t ld = 0;
};

// Every request's row count checked against its bytes; fills pending.row_offsets and returns
// the batch's rows.
absl::StatusOr<int64_t> CountRows(const Batch& batch, int64_t k0, PendingDense& pending) {
  const int in_elem = ElementSize(batch.input_dtype);
  int64_t rows = 0;
  for (const auto& r : batch.requests) {
    if (r->rows < 0 || static_cast<int64_t>(r->input.size()) != r->rows * k0 * in_elem) {
      return absl::InvalidArgumentError(
          absl::StrCat("dense request: ", r->input.size(), " input bytes for ", r->rows, " rows of ",
                       k0, " ", ElementName(batch.input_dtype)));
    }
    pending.row_offsets.push_back(rows);
    rows += r->rows;
  }
  if (rows > 0x7fffffff) return absl::InvalidArgumentError("dense batch: too many rows");
  return rows;
}

// The kernel library's answers about each layer of `rows` rows through `model` on its device
// (batch_plan.h's LayerKernels): the first layer reads the batch's input, the others the
// previous layer's padded output in the model's dtype.
std::vector<LayerKernels> AskKernels(int device, const CudaDenseModel& model,
                                     ElementType input_dtype, int64_t rows, DensePath forced) {
  const ElementType dtype = model.dtype();
  const int r = static_cast<int>(std::min<int64_t>(rows, 1 << 20));
  std::vector<LayerKernels> answers;
  answers.reserve(model.layers().size());
  ElementType in_type = input_dtype;
  int64_t in_ld = model.in_features();
  for (const CudaLayer& L : model.layers()) {
    LayerKernels k;
    k.few_rows_raw = kernels::FewRowsFits(r, L.in, L.out, in_type, dtype);
    k.few_rows_converted = kernels::FewRowsFits(r, L.in, L.out, dtype, dtype);
    if (forced == DensePath::kAuto) {
      k.tensor_core_pays = kernels::TensorCorePays(device, TensorCoreLayer(L, dtype, rows, in_ld, true));
    }
    if (forced == DensePath::kTensorCore) {
      k.tensor_core_raw =
          kernels::TensorCoreFits(device, TensorCoreLayer(L, dtype, rows, in_ld, L.layernorm));
      k.tensor_core_converted =
          kernels::TensorCoreFits(device, TensorCoreLayer(L, dtype, rows, PaddedCols(L.in), false));
    }
    answers.push_back(k);
    in_type = dtype;
    in_ld = L.ldy;
  }
  return answers;
}

// Every request's raw rows back to back into `dst` (pieces of at most 4 MiB, several threads
// for large batches).
void PackRows(const Batch& batch, size_t in_bytes, char* dst) {
  NVTX_RANGE("dense.pack");
  struct Piece {
    const char* src;
    size_t dst, bytes;
  };
  std::vector<Piece> pieces;
  constexpr size_t kPiece = size_t{4} << 20;
  size_t at = 0;
  for (const auto& r : batch.requests) {
    for (size_t off = 0; off < r->input.size(); off += kPiece) {
      pieces.push_back({r->input.data() + off, at + off, std::min(kPiece, r->input.size() - off)});
    }
    at += r->input.size();
  }
  ParallelFor(static_cast<int64_t>(pieces.size()), static_cast<int64_t>(in_bytes),
              [&](int64_t begin, int64_t end) {
                for (int64_t i = begin; i < end; ++i) {
                  std::memcpy(dst + pieces[i].dst, pieces[i].src, pieces[i].bytes);
                }
              }, /*min_cost_per_thread=*/int64_t{8} << 20);
}

// The plan's workspace in one allocation from the stream's pool, cut into its sections.
absl::StatusOr<DenseScratch> AllocateScratch(StreamScratch& buffers, const DenseBatchPlan& plan) {
  ASSIGN_OR_RETURN(void* base, buffers.Get(plan.workspace.bytes));
  char* at = static_cast<char*>(base);
  const DenseWorkspace& w = plan.workspace;
  DenseScratch s;
  s.in = at + w.in;
  s.act[0] = at + w.act0;
  if (plan.steps.size() > 1) s.act[1] = at + w.act1;
  if (plan.xhat_bytes > 0) s.xhat = at + w.xhat;
  if (plan.row_stats_bytes > 0) s.row_stats = at + w.row_stats;
  return s;
}

absl::Status LaunchFewRowsLayer(const CudaLayer& L, ElementType dtype, LayerInput x,
                                bool layernorm, void* y, int64_t rows, cudaStream_t stream) {
  kernels::FewRowsArgs a;
  a.x = x.data;
  a.x_type = x.type;
  a.ldx = x.ld;
  a.w = L.weight;
  a.w_type = dtype;
  a.ldw = L.ldw;
  a.bias = L.bias;
  a.y = y;
  a.ldy = L.ldy;
  a.rows = static_cast<int>(rows);
  a.k = static_cast<int>(L.in);
  a.n = static_cast<int>(L.out);
  a.layernorm = layernorm;
  a.eps = L.eps;
  a.act = L.activation;
  CUDA_RETURN_IF_ERROR(kernels::LaunchFewRows(a, stream));
  return absl::OkStatus();
}

absl::Status LaunchTensorCoreLayer(int device, const CudaLayer& L, ElementType dtype, LayerInput x,
                                   bool layernorm, void* y, void* row_stats, int64_t rows,
                                   const EnqueueOptions* options, cudaStream_t stream) {
  kernels::TensorCoreArgs a = TensorCoreLayer(L, dtype, rows, x.ld, layernorm);
  a.x = x.data;
  a.y = y;
  a.row_stats = row_stats;
  if (options && options->tensor_core_cluster > 0) a.cluster = options->tensor_core_cluster;
  if (!kernels::TensorCoreFits(device, a)) {
    return absl::InternalError("dense batch: tensor-core layer arguments are misaligned");
  }
  CUDA_RETURN_IF_ERROR(kernels::LaunchTensorCore(a, stream));
  return absl::OkStatus();
}

absl::Status LaunchGemmLayer(const CudaDenseModel& model, StreamSlot& slot, int layer, LayerInput x,
                             void* y, int64_t rows, bool debug_sync) {
  const CudaLayer& L = model.layers()[static_cast<size_t>(layer)];
  const cudaStream_t stream = slot.stream.get();
  ASSIGN_OR_RETURN(const GemmPlan* plan, model.Plan(slot.cublaslt.get(), layer, rows, x.ld));
  const float one = 1.f, zero = 0.f;
  CUBLAS_RETURN_IF_ERROR(cublasLtMatmul(slot.cublaslt.get(), plan->desc, &one, L.weight, plan->a,
                                        x.data, plan->b, &zero, y, plan->d, y, plan->d, &plan->algo,
                                        slot.cublaslt_workspace.get(), kCublasLtWorkspaceBytes,
                                        stream));
  if (plan->post_activation) {
    CUDA_RETURN_IF_LAUNCH_ERROR(stream, debug_sync);  // the product's, before the next launch
    CUDA_RETURN_IF_ERROR(kernels::LaunchActivation(y, model.dtype(), L.ldy, rows, L.out,
                                                   L.activation, stream));
  }
  return absl::OkStatus();
}

// Layer `layer` from `x` into `y`: its input normalised and converted first if its step says
// so, then its kernel.
absl::Status LaunchLayer(DeviceContext& device, StreamSlot& slot, const CudaDenseModel& model,
                         int layer, const LayerStep& step, LayerInput x, void* y,
                         const DenseScratch& scratch, int64_t rows, const EnqueueOptions* options) {
  const CudaLayer& L = model.layers()[static_cast<size_t>(layer)];
  const ElementType dtype = model.dtype();
  const cudaStream_t stream = slot.stream.get();
  bool layernorm = L.layernorm;
  if (step.convert) {
    CUDA_RETURN_IF_ERROR(kernels::LaunchNormalizeRows(x.data, x.type, x.ld, scratch.xhat,
                                                      dtype, PaddedCols(L.in), rows,
                                                      L.in, L.layernorm, L.eps, stream));
    CUDA_RETURN_IF_LAUNCH_ERROR(stream, device.debug_sync());
    x = {scratch.xhat, dtype, PaddedCols(L.in)};
    layernorm = false;
  }
  switch (step.kernel) {
    case LayerKernel::kFewRows:
      RETURN_IF_ERROR(LaunchFewRowsLayer(L, dtype, x, layernorm, y, rows, stream));
      break;
    case LayerKernel::kTensorCore:
      RETURN_IF_ERROR(LaunchTensorCoreLayer(device.device(), L, dtype, x, layernorm, y,
                                            scratch.row_stats, rows, options, stream));
      break;
    case LayerKernel::kGemm:
      RETURN_IF_ERROR(LaunchGemmLayer(model, slot, layer, x, y, rows, device.debug_sync()));
      break;
  }
  CUDA_RETURN_IF_LAUNCH_ERROR(stream, device.debug_sync());
  return absl::OkStatus();
}

// The last layer's rows (stride `last.ld`) into the slot's output staging, unpadded.
absl::Status CopyOut(StreamSlot& slot, LayerInput last, int64_t n_out, int64_t rows,
                     size_t out_bytes) {
  NVTX_RANGE("dense.copy_out");
  const cudaStream_t stream = slot.stream.get();
  const int elem = ElementSize(last.type);
  if (last.ld == n_out) {
    CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(slot.staging_out.data(), last.data, out_bytes,
                                         cudaMemcpyDeviceToHost, stream));
  } else {
    CUDA_RETURN_IF_ERROR(cudaMemcpy2DAsync(slot.staging_out.data(), n_out * elem, last.data,
                                           last.ld * elem, n_out * elem, rows,
                                           cudaMemcpyDeviceToHost, stream));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<PendingDense> EnqueueDense(DeviceContext& device, StreamSlot& slot,
                                          const Batch& batch, const EnqueueOptions* options) {
  const auto* loaded = dynamic_cast<const CudaLoadedModel*>(batch.model.get());
  if (loaded == nullptr) {
    return absl::FailedPreconditionError("dense batch: the model was not loaded by the CUDA backend");
  }
  const CudaDenseModel* model = loaded->on_device(device.device());
  if (model == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("dense batch: model '", loaded->info().name, "' is not resident on device ",
                     device.device()));
  }
  RETURN_IF_ERROR(device.MakeCurrent());
  PendingDense pending;
  pending.dtype = model->dtype();
  pending.out_features = model->out_features();
  ASSIGN_OR_RETURN(const int64_t rows, CountRows(batch, model->in_features(), pending));
  if (rows == 0) return pending;
  const DensePath forced = options ? options->path : DensePath::kAuto;
  ASSIGN_OR_RETURN(const DenseBatchPlan plan,
                   PlanDenseBatch(loaded->info(), batch.input_dtype, rows, forced,
                                  AskKernels(device.device(), *model, batch.input_dtype, rows, forced)));

  RETURN_IF_ERROR(slot.staging_in.Reserve(plan.in_bytes));
  RETURN_IF_ERROR(slot.staging_out.Reserve(plan.out_bytes));
  PackRows(batch, plan.in_bytes, static_cast<char*>(slot.staging_in.data()));

  const cudaStream_t stream = slot.stream.get();
  StreamScratch buffers(device.memory_pool(), stream);
  ASSIGN_OR_RETURN(const DenseScratch scratch, AllocateScratch(buffers, plan));
  {
    NVTX_RANGE("dense.copy_in");
    CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(scratch.in, slot.staging_in.data(), plan.in_bytes,
                                         cudaMemcpyHostToDevice, stream));
  }

  NVTX_RANGE("dense.layers");
  if (options && options->before_layers) options->before_layers(stream, options->before_layers_arg);
  if (options && options->before) CUDA_RETURN_IF_ERROR(cudaEventRecord(options->before, stream));
  LayerInput x{scratch.in, batch.input_dtype, model->in_features()};
  for (size_t l = 0; l < plan.steps.size(); ++l) {
    void* y = scratch.act[l % 2];
    RETURN_IF_ERROR(LaunchLayer(device, slot, *model, static_cast<int>(l), plan.steps[l], x, y,
                                scratch, rows, options));
    x = {y, model->dtype(), model->layers()[l].ldy};
  }
  if (options && options->after) CUDA_RETURN_IF_ERROR(cudaEventRecord(options->after, stream));
  RETURN_IF_ERROR(CopyOut(slot, x, model->out_features(), rows, plan.out_bytes));
  return pending;  // `buffers` frees the scratch after the copy out, in stream order
}

std::vector<Output> UnpackDense(const PendingDense& pending, const StreamSlot& slot,
                                const Batch& batch) {
  NVTX_RANGE("dense.unpack");
  const size_t row_bytes = static_cast<size_t>(pending.out_features * ElementSize(pending.dtype));
  const char* base = static_cast<const char*>(slot.staging_out.data());
  std::vector<Output> out(batch.requests.size());
  const int64_t total = pending.row_offsets.empty()
                            ? 0
                            : static_cast<int64_t>(batch.rows() * row_bytes);
  ParallelFor(static_cast<int64_t>(out.size()), total, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const int64_t r = batch.requests[i]->rows;
      if (r <= 0) continue;
      out[i].assign(base + pending.row_offsets[i] * row_bytes, static_cast<size_t>(r) * row_bytes);
    }
  }, /*min_cost_per_thread=*/int64_t{1} << 21);
  return out;
}

// --- Warm-up ----------------------------------------------------------------------------------

namespace {

ModelSpec WarmUpModel(ElementType dtype, bool tf32) {
  std::mt19937 rng(7);
  std::normal_distribution<float> g(0.f, 0.2f);
  ModelSpec spec;
  spec.name = "warm-up";
  spec.dtype = dtype;
  spec.allow_tf32 = tf32;
  const struct {
    int64_t in, out;
    bool ln;
    Activation act;
  } shapes[] = {{64, 96, true, Activation::kGeluTanh},
                {96, 40, false, Activation::kGeluErf},
                {40, 48, true, Activation::kRelu},
                {48, 24, false, Activation::kNone}};
  for (const auto& s : shapes) {
    LayerSpec L;
    L.in = s.in;
    L.out = s.out;
    L.layernorm = s.ln;
    L.activation = s.act;
    L.weight.resize(static_cast<size_t>(s.in * s.out));
    for (float& w : L.weight) w = g(rng);
    L.bias.assign(static_cast<size_t>(s.out), 0.1);
    spec.layers.push_back(std::move(L));
  }
  return spec;
}

}  // namespace

absl::Status WarmUpDense(DeviceContext& device) {
  std::vector<StreamSlot*> slots;
  for (int i = 0; i < device.num_streams(); ++i) slots.push_back(device.AcquireSlot());
  absl::Status status;
  auto sync = [&](StreamSlot* slot) {
    const cudaError_t err = cudaStreamSynchronize(slot->stream.get());
    if (err != cudaSuccess && status.ok()) status = CudaErrorStatus(err, "dense warm-up", __FILE__, __LINE__);
  };
  const struct {
    ElementType dtype;
    bool tf32;
  } variants[] = {{ElementType::kFloat32, false},
                  {ElementType::kFloat32, true},
                  {ElementType::kFloat16, false},
                  {ElementType::kBFloat16, false}};
  for (const auto& v : variants) {
    if (!status.ok()) break;
    auto uploaded = UploadModel(device, WarmUpModel(v.dtype, v.tf32));
    if (!uploaded.ok()) {
      status = uploaded.status();
      break;
    }
    std::vector<std::unique_ptr<CudaDenseModel>> per_device(static_cast<size_t>(device.device()) + 1);
    per_device.back() = *std::move(uploaded);
    auto model = std::make_shared<CudaLoadedModel>(DescribeModel(WarmUpModel(v.dtype, v.tf32)),
                                                   std::move(per_device));
    auto run = [&](StreamSlot* slot, ElementType input, int64_t rows, DensePath path) {
      std::string bytes(static_cast<size_t>(rows * 64 * ElementSize(input)), '\0');
      std::vector<float> values(static_cast<size_t>(rows * 64));
      for (size_t i = 0; i < values.size(); ++i) values[i] = std::sin(0.37f * static_cast<float>(i));
      FromFloat(values.data(), rows * 64, input, bytes.data());
      auto request = std::make_shared<Request>();
      request->model = model;
      request->input_dtype = input;
      request->rows = rows;
      request->input = bytes;
      Batch batch;
      batch.model = model;
      batch.input_dtype = input;
      batch.requests.push_back(request);
      EnqueueOptions options;
      options.path = path;
      if (status.ok()) status = EnqueueDense(device, *slot, batch, &options).status();
      sync(slot);  // the next run reuses the slot's staging buffers (and `bytes` goes away)
    };
    // Every stream once, then (on the first) every few-rows variant, the small products
    // cuBLASLt takes for few rows, and every input type through both paths.
    for (StreamSlot* slot : slots) run(slot, ElementType::kFloat32, 1, DensePath::kFewRows);
    for (int64_t rows = 1; rows <= kernels::kFewRowsMax; ++rows) {
      run(slots[0], ElementType::kFloat32, rows, DensePath::kFewRows);
      run(slots[0], ElementType::kFloat32, rows, DensePath::kGemm);
    }
    for (ElementType input : {ElementType::kFloat32, ElementType::kFloat64, ElementType::kFloat16,
                              ElementType::kBFloat16}) {
      run(slots[0], input, 1, DensePath::kFewRows);
      run(slots[0], input, 64, DensePath::kGemm);
    }
  }
  for (StreamSlot* slot : slots) device.ReleaseSlot(slot);
  return status;
}

}  // namespace gpucompute::dense
