// CUDA dense layers against a naive float64 reference written here (label gpu; skipped without
// a device): every dtype, activation, LayerNorm on/off, both paths (few rows, cuBLASLt), odd
// sizes, every input dtype, multi-layer stacks, and the backend's RunDense end to end.
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"
#include "kernels/dense/dense_kernels.cuh"
#include "server/ops/dense/cuda_dense.h"
#include "server/runtime/backend.h"
#include "server/runtime/completion_queue.h"
#include "server/device/device_context.h"
#include "tests/server/device/cuda_test_util.h"
#include "tests/server/device/device_test_fixture.h"

namespace gpucompute::dense {
namespace {

struct Shape {
  int64_t in, out;
  bool ln;
  Activation act;
};

// Random model: W ~ N(0, 1/in) so that pre-activations are O(1) (where GELU's forms differ),
// non-trivial bias, LayerNorm gamma/beta folded as the service does.
ModelSpec MakeSpec(ElementType dtype, bool tf32, const std::vector<Shape>& shapes, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> g(0, 1);
  ModelSpec spec;
  spec.name = "test";
  spec.dtype = dtype;
  spec.allow_tf32 = tf32;
  for (const Shape& s : shapes) {
    LayerSpec L;
    L.in = s.in;
    L.out = s.out;
    L.layernorm = s.ln;
    L.activation = s.act;
    L.weight.resize(static_cast<size_t>(s.in * s.out));
    const double scale = 1.0 / std::sqrt(static_cast<double>(s.in));
    for (float& w : L.weight) w = static_cast<float>(g(rng) * scale);
    L.bias.resize(static_cast<size_t>(s.out));
    for (double& b : L.bias) b = 0.3 * g(rng);
    if (s.ln) {
      std::vector<double> gamma(static_cast<size_t>(s.in)), beta(static_cast<size_t>(s.in));
      for (double& v : gamma) v = 1.0 + 0.2 * g(rng);
      for (double& v : beta) v = 0.1 * g(rng);
      FoldLayerNorm(gamma, beta, &L);
    }
    spec.layers.push_back(std::move(L));
  }
  return spec;
}

double ActivateRef(Activation act, double x) { return Activate<double>(act, x); }

// The stored model applied in float64: weights rounded to the dtype, bias float32,
// intermediates unrounded.
std::vector<double> Reference(const ModelSpec& spec, std::vector<double> x, int64_t rows) {
  for (const LayerSpec& L : spec.layers) {
    std::vector<double> w(L.weight.size());
    for (size_t i = 0; i < w.size(); ++i) w[i] = RoundTo(spec.dtype, L.weight[i]);
    std::vector<double> y(static_cast<size_t>(rows * L.out));
    for (int64_t r = 0; r < rows; ++r) {
      const double* xi = x.data() + r * L.in;
      double mean = 0, var = 0;
      if (L.layernorm) {
        for (int64_t k = 0; k < L.in; ++k) mean += xi[k];
        mean /= static_cast<double>(L.in);
        for (int64_t k = 0; k < L.in; ++k) var += (xi[k] - mean) * (xi[k] - mean);
        var /= static_cast<double>(L.in);
      }
      const double rstd = L.layernorm ? 1.0 / std::sqrt(var + L.eps) : 1.0;
      double* yi = y.data() + r * L.out;
      for (int64_t j = 0; j < L.out; ++j) yi[j] = static_cast<float>(L.bias[j]);
      for (int64_t k = 0; k < L.in; ++k) {
        const double xv = L.layernorm ? (xi[k] - mean) * rstd : xi[k];
        const double* wk = w.data() + k * L.out;
        for (int64_t j = 0; j < L.out; ++j) yi[j] += xv * wk[j];
      }
      for (int64_t j = 0; j < L.out; ++j) yi[j] = ActivateRef(L.activation, yi[j]);
    }
    x = std::move(y);
  }
  return x;
}

// ||got - ref|| / ||ref||; NaN (or Inf) anywhere makes it NaN, which fails every check.
double RelL2(const std::vector<double>& got, const std::vector<double>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (!std::isfinite(got[i])) return std::nan("");
    num += (got[i] - ref[i]) * (got[i] - ref[i]);
    den += ref[i] * ref[i];
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

bool WithinTolerance(double rel, double tol) { return rel <= tol; }  // false for NaN

double Tolerance(ElementType dtype, bool tf32) {
  if (dtype == ElementType::kFloat32) return tf32 ? 1e-3 : 1e-5;
  return 1e-2;
}

// Input rows: values with an offset (LayerNorm must remove it), exactly representable in
// the input dtype.
std::vector<double> MakeInput(ElementType type, int64_t rows, int64_t in, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> g(0, 1);
  std::vector<double> x(static_cast<size_t>(rows * in));
  for (double& v : x) v = RoundTo(type, 0.5 + 1.5 * g(rng));
  return x;
}

std::string ToBytes(ElementType type, const std::vector<double>& x) {
  std::string bytes(x.size() * ElementSize(type), '\0');
  FromDouble(x.data(), static_cast<int64_t>(x.size()), type, bytes.data());
  return bytes;
}

std::vector<double> FromBytes(ElementType type, const std::string& bytes) {
  std::vector<double> v(bytes.size() / ElementSize(type));
  ToDouble(type, bytes.data(), static_cast<int64_t>(v.size()), v.data());
  return v;
}

class DenseCuda : public ::gpucompute::testing::SharedDeviceTest {
 protected:
  std::shared_ptr<const LoadedModel> Load(const ModelSpec& spec) {
    auto m = LoadModelOnDevices({&device()}, spec);
    EXPECT_TRUE(m.ok()) << m.status();
    return m.ok() ? *m : nullptr;
  }

  // Runs requests of `rows_each` rows through `model` as one batch; returns the outputs.
  absl::StatusOr<std::vector<Output>> Run(std::shared_ptr<const LoadedModel> model,
                                          ElementType input, const std::vector<std::string>& inputs,
                                          const std::vector<int64_t>& rows_each,
                                          DensePath path = DensePath::kAuto, int cluster = 0) {
    Batch batch;
    batch.model = model;
    batch.input_dtype = input;
    for (size_t i = 0; i < inputs.size(); ++i) {
      auto r = std::make_shared<Request>();
      r->model = model;
      r->input_dtype = input;
      r->rows = rows_each[i];
      r->input = inputs[i];
      batch.requests.push_back(r);
    }
    StreamSlot* slot = device().AcquireSlot();
    // Poison the output staging with NaNs: every element must be written by the copy out.
    std::memset(slot->staging_out.data(), 0xff, slot->staging_out.capacity());
    EnqueueOptions options;
    options.path = path;
    options.tensor_core_cluster = cluster;
    auto pending = EnqueueDense(device(), *slot, batch, &options);
    const cudaError_t err = cudaStreamSynchronize(slot->stream.get());
    absl::StatusOr<std::vector<Output>> out;
    if (!pending.ok()) {
      out = pending.status();
    } else if (err != cudaSuccess) {
      out = absl::InternalError(cudaGetErrorName(err));
    } else {
      out = UnpackDense(*pending, *slot, batch);
    }
    device().ReleaseSlot(slot);
    return out;
  }

  // One request of `rows` rows; checks against the reference; returns the relative error.
  double Check(const ModelSpec& spec, ElementType input, int64_t rows, DensePath path,
               uint64_t seed = 1, int cluster = 0) {
    auto model = Load(spec);
    if (!model) return std::nan("");
    const std::vector<double> x = MakeInput(input, rows, spec.in_features(), seed);
    auto out = Run(model, input, {ToBytes(input, x)}, {rows}, path, cluster);
    EXPECT_TRUE(out.ok()) << out.status();
    if (!out.ok()) return std::nan("");
    EXPECT_EQ(out->size(), 1u);
    EXPECT_EQ((*out)[0].size(),
              static_cast<size_t>(rows * spec.out_features() * ElementSize(spec.dtype)));
    const std::vector<double> got = FromBytes(spec.dtype, (*out)[0]);
    const std::vector<double> ref = Reference(spec, x, rows);
    if (got.size() != ref.size()) return std::nan("");
    return RelL2(got, ref);
  }

};

struct DtypeCase {
  ElementType dtype;
  bool tf32;
  const char* name;
};
const DtypeCase kDtypes[] = {{ElementType::kFloat32, false, "float32"},
                             {ElementType::kFloat32, true, "tf32"},
                             {ElementType::kFloat16, false, "float16"},
                             {ElementType::kBFloat16, false, "bfloat16"}};
const Activation kActs[] = {Activation::kNone, Activation::kGeluTanh, Activation::kGeluErf,
                            Activation::kRelu, Activation::kSilu};

TEST(DenseCudaHost, NanFailsTheCheck) {
  std::vector<double> ref = {1, 2, 3};
  std::vector<double> got = {1, std::nan(""), 3};
  EXPECT_FALSE(WithinTolerance(RelL2(got, ref), 1.0));
  got[1] = INFINITY;
  EXPECT_FALSE(WithinTolerance(RelL2(got, ref), 1.0));
  got[1] = 2;
  EXPECT_TRUE(WithinTolerance(RelL2(got, ref), 0.0));
}

TEST_F(DenseCuda, WarmUp) { ASSERT_TRUE(WarmUpDense(device()).ok()); }

// Every dtype x activation x LayerNorm x path, on odd sizes (in 37, out 45).
TEST_F(DenseCuda, DtypesActivationsPathsOddSizes) {
  uint64_t seed = 10;
  for (const DtypeCase& d : kDtypes) {
    for (Activation act : kActs) {
      for (bool ln : {false, true}) {
        const ModelSpec spec = MakeSpec(d.dtype, d.tf32, {{37, 45, ln, act}}, ++seed);
        for (int64_t rows : {1, 2, 3, 4, 8, 67}) {
          for (DensePath path : {DensePath::kFewRows, DensePath::kGemm}) {
            if (rows > kernels::kFewRowsMax && path == DensePath::kFewRows) continue;
            const double rel = Check(spec, ElementType::kFloat32, rows, path, seed);
            EXPECT_TRUE(WithinTolerance(rel, Tolerance(d.dtype, d.tf32)))
                << d.name << " " << ActivationName(act) << " ln=" << ln << " rows=" << rows
                << " path=" << (path == DensePath::kGemm ? "gemm" : "few") << ": rel l2 " << rel;
          }
        }
      }
    }
  }
}

// Every input dtype into every model dtype (with LayerNorm and without: the convert path).
TEST_F(DenseCuda, InputDtypes) {
  uint64_t seed = 100;
  for (const DtypeCase& d : kDtypes) {
    for (ElementType input : {ElementType::kFloat32, ElementType::kFloat64, ElementType::kFloat16,
                              ElementType::kBFloat16}) {
      for (bool ln : {false, true}) {
        // in = 64: the vector path of the normaliser; in = 50: its scalar path.
        for (int64_t in : {64, 50}) {
          const ModelSpec spec = MakeSpec(d.dtype, d.tf32, {{in, 72, ln, Activation::kGeluTanh}}, ++seed);
          for (int64_t rows : {2, 40}) {
            const double rel = Check(spec, input, rows, DensePath::kAuto, seed);
            EXPECT_TRUE(WithinTolerance(rel, Tolerance(d.dtype, d.tf32)))
                << d.name << " input " << ElementName(input) << " ln=" << ln << " in=" << in
                << " rows=" << rows << ": rel l2 " << rel;
          }
        }
      }
    }
  }
}

// Multi-layer stacks through both paths, mixed activations and LayerNorm.
TEST_F(DenseCuda, Stacks) {
  uint64_t seed = 200;
  const std::vector<Shape> shapes = {{256, 512, true, Activation::kGeluTanh},
                                     {512, 131, false, Activation::kSilu},
                                     {131, 64, true, Activation::kRelu},
                                     {64, 33, true, Activation::kGeluErf}};
  for (const DtypeCase& d : kDtypes) {
    const ModelSpec spec = MakeSpec(d.dtype, d.tf32, shapes, ++seed);
    for (int64_t rows : {1, 5, 300}) {
      for (ElementType input : {ElementType::kFloat32, ElementType::kBFloat16}) {
        const double rel = Check(spec, input, rows, DensePath::kAuto, seed + rows);
        EXPECT_TRUE(WithinTolerance(rel, Tolerance(d.dtype, d.tf32)))
            << d.name << " rows=" << rows << " input " << ElementName(input) << ": rel l2 " << rel;
      }
    }
  }
}

// The benchmark's shapes at realistic sizes: vector loads, > 48 KiB of shared memory (k 4096,
// float32), a k too large for the few-rows kernel's shared memory (falls back to cuBLASLt).
TEST_F(DenseCuda, LargeShapes) {
  struct Case {
    ElementType dtype;
    int64_t in, out, rows;
  } cases[] = {{ElementType::kBFloat16, 1024, 4096, 1},  {ElementType::kBFloat16, 1024, 4096, 8},
               {ElementType::kBFloat16, 1024, 4096, 200}, {ElementType::kFloat16, 1024, 4096, 3},
               {ElementType::kFloat32, 4096, 1000, 1},    {ElementType::kFloat32, 4096, 1000, 6},
               {ElementType::kBFloat16, 8192, 256, 8},    {ElementType::kFloat32, 1024, 4096, 100}};
  uint64_t seed = 300;
  for (const Case& c : cases) {
    const ModelSpec spec = MakeSpec(c.dtype, false, {{c.in, c.out, true, Activation::kGeluTanh}}, ++seed);
    const double rel = Check(spec, ElementType::kFloat32, c.rows, DensePath::kAuto, seed);
    EXPECT_TRUE(WithinTolerance(rel, Tolerance(c.dtype, false)))
        << ElementName(c.dtype) << " " << c.in << "->" << c.out << " rows=" << c.rows
        << ": rel l2 " << rel;
  }
}

// The few-rows kernel's splits of k over 1..8 warps per output and 1..8 chunks per lane, k
// not a multiple of the vector width, 1..4 rows, every model dtype, float32 and model-typed
// inputs (vector and scalar loads), and rows with a large common offset (LayerNorm's shift).
TEST_F(DenseCuda, FewRowsSplits) {
  struct Shape {
    int64_t in, out;
  } shapes[] = {{1024, 4096}, {4096, 1024}, {16384, 64}, {8192, 24}, {3000, 500}, {13, 7}, {250, 9000}};
  uint64_t seed = 400;
  for (const DtypeCase& d : kDtypes) {
    if (d.tf32) continue;
    for (const Shape& sh : shapes) {
      const ModelSpec spec = MakeSpec(d.dtype, false, {{sh.in, sh.out, true, Activation::kGeluTanh}}, ++seed);
      for (int rows = 1; rows <= kernels::kFewRowsMax; ++rows) {
        if (!kernels::FewRowsFits(rows, sh.in, sh.out, ElementType::kFloat32,
                                  d.dtype)) {
          continue;
        }
        for (ElementType input : {ElementType::kFloat32, d.dtype}) {
          const double rel = Check(spec, input, rows, DensePath::kFewRows, seed + rows);
          EXPECT_TRUE(WithinTolerance(rel, Tolerance(d.dtype, false)))
              << d.name << " " << sh.in << "->" << sh.out << " rows=" << rows << " input "
              << ElementName(input) << ": rel l2 " << rel;
        }
      }
    }
  }
  // Offsets 100x the spread: bf16/fp16 models from float32 input.
  for (ElementType dtype : {ElementType::kBFloat16, ElementType::kFloat16}) {
    const ModelSpec spec = MakeSpec(dtype, false, {{1024, 512, true, Activation::kNone}}, ++seed);
    auto model = Load(spec);
    ASSERT_NE(model, nullptr);
    std::vector<double> x = MakeInput(ElementType::kFloat32, 2, 1024, seed);
    for (double& v : x) v = RoundTo(ElementType::kFloat32, 150.0 + v);
    auto out = Run(model, ElementType::kFloat32, {ToBytes(ElementType::kFloat32, x)}, {2},
                   DensePath::kFewRows);
    ASSERT_TRUE(out.ok()) << out.status();
    const double rel = RelL2(FromBytes(spec.dtype, (*out)[0]), Reference(spec, x, 2));
    EXPECT_TRUE(WithinTolerance(rel, 1e-2)) << ElementName(dtype) << " offset rows: rel l2 " << rel;
  }
}

// The tensor-core kernel (compute capability 9.0, 16-bit models): tile edges in every
// dimension (rows, k and outputs not multiples of 128 / 64 / 256), one and two CTAs per
// cluster, raw model-typed input (LayerNorm folded into the epilogue) and float32 input
// (normalised and converted first), every activation, stacks, and rows whose mean is 100x
// their spread (the fold's cancellation).
TEST_F(DenseCuda, TensorCore) {
  kernels::TensorCoreArgs probe;
  probe.type = ElementType::kBFloat16;
  probe.rows = probe.k = probe.n = probe.ldx = probe.ldw = probe.ldy = 8;
  if (!kernels::TensorCoreFits(device().device(), probe)) {
    GTEST_SKIP() << "the tensor-core kernel needs a compute capability 9.0 GPU";
  }
  // TMA writes y: its rows must be whole 16 bytes and its base 16-byte aligned.
  kernels::TensorCoreArgs unaligned = probe;
  unaligned.ldy = 12;
  EXPECT_FALSE(kernels::TensorCoreFits(device().device(), unaligned));
  unaligned = probe;
  unaligned.y = reinterpret_cast<void*>(uintptr_t{8});
  EXPECT_FALSE(kernels::TensorCoreFits(device().device(), unaligned));
  struct Case {
    int64_t in, out, rows;
    bool ln;
    Activation act;
  } cases[] = {{1024, 4096, 1024, true, Activation::kGeluTanh}, {64, 256, 128, true, Activation::kNone},
               {100, 300, 129, true, Activation::kGeluErf},     {1000, 520, 300, false, Activation::kRelu},
               {4096, 1024, 257, true, Activation::kSilu},      {8, 8, 3, true, Activation::kGeluTanh},
               {136, 1000, 1, false, Activation::kNone},        {520, 24, 700, true, Activation::kGeluTanh}};
  uint64_t seed = 500;
  for (ElementType dtype : {ElementType::kBFloat16, ElementType::kFloat16}) {
    for (const Case& c : cases) {
      const ModelSpec spec = MakeSpec(dtype, false, {{c.in, c.out, c.ln, c.act}}, ++seed);
      for (ElementType input : {dtype, ElementType::kFloat32}) {
        // Each case with the kernel's own choice of cluster (one CTA on these shapes) and
        // with pairs of CTAs sharing the W tile by multicast.
        for (int cluster : {0, 2}) {
          const double rel = Check(spec, input, c.rows, DensePath::kTensorCore, seed, cluster);
          EXPECT_TRUE(WithinTolerance(rel, Tolerance(dtype, false)))
              << ElementName(dtype) << " " << c.in << "->" << c.out << " rows=" << c.rows << " ln=" << c.ln
              << " " << ActivationName(c.act) << " input " << ElementName(input) << " cluster " << cluster
              << ": rel l2 " << rel;
        }
      }
    }
    // A stack: the later layers read the previous layer's padded output raw.
    const ModelSpec stack = MakeSpec(dtype, false,
                                     {{256, 520, true, Activation::kGeluTanh},
                                      {520, 131, true, Activation::kSilu},
                                      {131, 72, true, Activation::kNone}},
                                     ++seed);
    const double rel = Check(stack, dtype, 333, DensePath::kTensorCore, seed);
    EXPECT_TRUE(WithinTolerance(rel, Tolerance(dtype, false))) << ElementName(dtype) << " stack: rel l2 " << rel;
    // Rows with a common offset 100x their spread, model-typed input.
    const ModelSpec offset_spec = MakeSpec(dtype, false, {{1024, 512, true, Activation::kNone}}, ++seed);
    auto model = Load(offset_spec);
    ASSERT_NE(model, nullptr);
    std::vector<double> x = MakeInput(dtype, 200, 1024, seed);
    for (double& v : x) v = RoundTo(dtype, 100.0 + v);
    auto out = Run(model, dtype, {ToBytes(dtype, x)}, {200}, DensePath::kTensorCore);
    ASSERT_TRUE(out.ok()) << out.status();
    const double off_rel = RelL2(FromBytes(dtype, (*out)[0]), Reference(offset_spec, x, 200));
    EXPECT_TRUE(WithinTolerance(off_rel, 1e-2)) << ElementName(dtype) << " offset rows: rel l2 " << off_rel;
  }
  // kAuto takes the kernel on one nearly full wave of at least 8 column tiles with LayerNorm
  // folded in (on the H200, 1000 x 1024 -> 4096: 8 x 16 = 128 tiles), and nowhere else.
  int sms = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device().device()), cudaSuccess);
  kernels::TensorCoreArgs wave = probe;
  wave.layernorm = true;
  static const float kColsum[1] = {0.f};
  wave.colsum = kColsum;  // checked for presence only
  wave.k = wave.ldx = wave.ldw = 1024;
  wave.n = wave.ldy = 256 * 16;
  wave.rows = 128 * (sms / 16);  // 16 x (sms / 16) tiles: more than 3/4 of the SMs
  EXPECT_EQ(kernels::TensorCorePays(device().device(), wave), sms >= 64);
  kernels::TensorCoreArgs other = wave;
  other.layernorm = false;
  EXPECT_FALSE(kernels::TensorCorePays(device().device(), other));
  other = wave;
  other.rows = 64;
  EXPECT_FALSE(kernels::TensorCorePays(device().device(), other));
  other = wave;
  other.rows = 16384;
  EXPECT_FALSE(kernels::TensorCorePays(device().device(), other));
  other = wave;
  other.n = other.ldy = 256 * 4;
  other.rows = 128 * 32;
  EXPECT_FALSE(kernels::TensorCorePays(device().device(), other));
  for (ElementType dtype : {ElementType::kBFloat16, ElementType::kFloat16}) {
    const ModelSpec spec = MakeSpec(dtype, false, {{1024, 4096, true, Activation::kGeluTanh}}, ++seed);
    const double rel = Check(spec, dtype, 1000, DensePath::kAuto, seed);
    EXPECT_TRUE(WithinTolerance(rel, Tolerance(dtype, false))) << ElementName(dtype) << " auto: rel l2 " << rel;
  }
  // Float32 models are not the kernel's: a forced path says so.
  const ModelSpec f32 = MakeSpec(ElementType::kFloat32, false, {{64, 64, true, Activation::kNone}}, ++seed);
  auto model = Load(f32);
  ASSERT_NE(model, nullptr);
  auto out = Run(model, ElementType::kFloat32, {std::string(64 * 8 * 4, '\0')}, {8}, DensePath::kTensorCore);
  EXPECT_TRUE(absl::IsInvalidArgument(out.status())) << out.status();
}

// cuBLASLt's GELU epilogue must be the tanh form: at float32 without TF32 the erf form would
// miss the reference by ~1e-4 on O(1) pre-activations.
TEST_F(DenseCuda, GemmGeluIsTanhForm) {
  ModelSpec spec = MakeSpec(ElementType::kFloat32, false, {{128, 256, true, Activation::kGeluTanh}}, 7);
  const double rel = Check(spec, ElementType::kFloat32, 64, DensePath::kGemm, 7);
  EXPECT_LE(rel, 1e-5);
  // ...and the reference tells the two forms apart at this tolerance.
  std::vector<double> a, b;
  for (double x = -4; x <= 4; x += 0.01) {
    a.push_back(ActivateRef(Activation::kGeluTanh, x));
    b.push_back(ActivateRef(Activation::kGeluErf, x));
  }
  EXPECT_GT(RelL2(a, b), 1e-4);
}

// Several requests in one batch (one of them empty) come back split in order.
TEST_F(DenseCuda, BatchOfRequests) {
  const ModelSpec spec = MakeSpec(ElementType::kBFloat16, false,
                                  {{96, 80, true, Activation::kGeluTanh}, {80, 20, false, Activation::kNone}}, 5);
  auto model = Load(spec);
  ASSERT_NE(model, nullptr);
  for (const std::vector<int64_t>& rows_each :
       std::vector<std::vector<int64_t>>{{3, 0, 4}, {1, 17, 0, 30}}) {
    std::vector<std::string> inputs;
    std::vector<std::vector<double>> xs;
    for (size_t i = 0; i < rows_each.size(); ++i) {
      xs.push_back(MakeInput(ElementType::kFloat16, rows_each[i], 96, 50 + i));
      inputs.push_back(ToBytes(ElementType::kFloat16, xs.back()));
    }
    auto out = Run(model, ElementType::kFloat16, inputs, rows_each);
    ASSERT_TRUE(out.ok()) << out.status();
    ASSERT_EQ(out->size(), rows_each.size());
    for (size_t i = 0; i < rows_each.size(); ++i) {
      ASSERT_EQ((*out)[i].size(), static_cast<size_t>(rows_each[i] * 20 * 2));
      if (rows_each[i] == 0) continue;
      const double rel = RelL2(FromBytes(spec.dtype, (*out)[i]), Reference(spec, xs[i], rows_each[i]));
      EXPECT_TRUE(WithinTolerance(rel, 1e-2)) << "request " << i << ": rel l2 " << rel;
    }
  }
}

TEST_F(DenseCuda, WrongInputSizeIsInvalidArgument) {
  auto model = Load(MakeSpec(ElementType::kFloat32, false, {{16, 8, false, Activation::kNone}}, 3));
  ASSERT_NE(model, nullptr);
  auto out = Run(model, ElementType::kFloat32, {std::string(16 * 4 * 2 - 1, '\0')}, {2});
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument) << out.status();
}

TEST_F(DenseCuda, TooLargeModelIsResourceExhausted) {
  const absl::Status s = CheckFitsOnDevice(device(), int64_t{1} << 50);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_NE(s.message().find("bytes on device 0 but only"), std::string::npos) << s;
  EXPECT_TRUE(CheckFitsOnDevice(device(), 1 << 20).ok());
}

// Through the backend: load, check fits, run a batch, unload by dropping the model.
TEST(DenseCudaBackend, LoadAndRun) {
  SKIP_WITHOUT_CUDA_DEVICE();
  CompletionQueue completions;
  BackendOptions o;
  o.kind = "cuda";
  o.streams_per_device = 2;
  auto backend = CreateBackend(o, &completions);
  ASSERT_TRUE(backend.ok()) << backend.status();
  EXPECT_TRUE((*backend)->CheckModelFits(1 << 20).ok());
  EXPECT_EQ((*backend)->CheckModelFits(int64_t{1} << 50).code(), absl::StatusCode::kResourceExhausted);
  const ModelSpec spec = MakeSpec(ElementType::kBFloat16, false,
                                  {{1024, 4096, true, Activation::kGeluTanh}, {4096, 1024, false, Activation::kNone}}, 9);
  auto model = (*backend)->LoadDenseModel(spec);
  ASSERT_TRUE(model.ok()) << model.status();
  for (int64_t rows : {1, 100}) {
    const std::vector<double> x = MakeInput(ElementType::kFloat32, rows, 1024, 60 + rows);
    const std::string bytes = ToBytes(ElementType::kFloat32, x);
    auto request = std::make_shared<Request>();
    request->model = *model;
    request->input_dtype = ElementType::kFloat32;
    request->rows = rows;
    request->input = bytes;
    auto batch = std::make_shared<Batch>();
    batch->model = *model;
    batch->input_dtype = ElementType::kFloat32;
    batch->requests.push_back(request);
    absl::Notification done;
    std::vector<Output> out;
    (*backend)->RunDense(batch, [&](absl::StatusOr<std::vector<Output>> r) {
      EXPECT_TRUE(r.ok()) << r.status();
      if (r.ok()) out = *std::move(r);
      done.Notify();
    });
    done.WaitForNotification();
    ASSERT_EQ(out.size(), 1u);
    const double rel = RelL2(FromBytes(spec.dtype, out[0]), Reference(spec, x, rows));
    EXPECT_TRUE(WithinTolerance(rel, 1e-2)) << "rows=" << rows << ": rel l2 " << rel;
  }
}

}  // namespace
}  // namespace gpucompute::dense
