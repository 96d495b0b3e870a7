// Model assembly from a LoadModel stream (see model_upload.h).
#include "server/service/model_upload.h"

#include <algorithm>
#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "server/service/tensor_codec.h"

namespace gpucompute {
namespace {

// The proto's activations are dense::Activation's codes (math/activation.cuh).
static_assert(static_cast<int>(dense::Activation::kNone) == v1::ACTIVATION_NONE);
static_assert(static_cast<int>(dense::Activation::kGeluTanh) == v1::ACTIVATION_GELU_TANH);
static_assert(static_cast<int>(dense::Activation::kGeluErf) == v1::ACTIVATION_GELU_ERF);
static_assert(static_cast<int>(dense::Activation::kRelu) == v1::ACTIVATION_RELU);
static_assert(static_cast<int>(dense::Activation::kSilu) == v1::ACTIVATION_SILU);

bool ValidModelName(const std::string& name) {
  if (name.empty() || name.size() > 128) return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '.' || c == '-';
    if (!ok) return false;
  }
  return true;
}

const char* TensorName(int which) {
  switch (which) {
    case v1::LAYER_TENSOR_WEIGHT: return "weight";
    case v1::LAYER_TENSOR_BIAS: return "bias";
    case v1::LAYER_TENSOR_GAMMA: return "layernorm.gamma";
    case v1::LAYER_TENSOR_BETA: return "layernorm.beta";
  }
  return "unknown";
}

// Checks a declared tensor's dtype and shape against `expected` dims.
absl::Status CheckHeader(const v1::TensorHeader& t, const std::string& field,
                         const std::vector<int64_t>& expected) {
  RETURN_IF_ERROR(FloatElementType(t.dtype(), field + ".dtype").status());
  std::vector<int64_t> shape(t.shape().begin(), t.shape().end());
  if (shape != expected) {
    return absl::InvalidArgumentError(absl::StrCat(field, ".shape is [", absl::StrJoin(shape, ", "),
                                                   "] but must be [", absl::StrJoin(expected, ", "), "]"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<ModelUpload>> ModelUpload::Start(const v1::ModelHeader& header,
                                                               const DenseLimits& limits) {
  std::unique_ptr<ModelUpload> u(new ModelUpload());
  if (!ValidModelName(header.name())) {
    return absl::InvalidArgumentError(
        "header.name must be 1-128 characters of letters, digits, '_', '.' and '-'");
  }
  u->name_ = header.name();
  switch (header.dtype()) {
    case v1::DTYPE_UNSPECIFIED:
    case v1::FLOAT32: u->dtype_ = ElementType::kFloat32; break;
    case v1::FLOAT16: u->dtype_ = ElementType::kFloat16; break;
    case v1::BFLOAT16: u->dtype_ = ElementType::kBFloat16; break;
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          "header.dtype is ", DTypeName(header.dtype()), " but must be float32, float16 or bfloat16"));
  }
  u->allow_tf32_ = header.allow_tf32();
  if (u->allow_tf32_ && u->dtype_ != ElementType::kFloat32) {
    return absl::InvalidArgumentError(
        absl::StrCat("header.allow_tf32 applies to float32 models only (this one is ", ElementName(u->dtype_), ")"));
  }
  const int n = header.layers_size();
  if (n == 0) return absl::InvalidArgumentError("header.layers must hold at least one layer");
  if (n > limits.max_layers) {
    return absl::ResourceExhaustedError(
        absl::StrCat("header.layers has ", n, " layers; the limit is ", limits.max_layers, " (--max_layers)"));
  }
  std::vector<std::pair<int64_t, int64_t>> shapes;
  for (int i = 0; i < n; ++i) {
    const v1::LayerHeader& l = header.layers(i);
    const std::string f = absl::StrCat("header.layers[", i, "]");
    if (l.weight().shape_size() != 2) {
      return absl::InvalidArgumentError(absl::StrCat(f, ".weight.shape must have 2 dimensions (in_features, out_features), not ",
                                                     l.weight().shape_size()));
    }
    const int64_t in = l.weight().shape(0);
    const int64_t out = l.weight().shape(1);
    for (int64_t d : {in, out}) {
      if (d < 1) return absl::InvalidArgumentError(absl::StrCat(f, ".weight.shape must be positive, not [", in, ", ", out, "]"));
      if (d > limits.max_features) {
        return absl::ResourceExhaustedError(absl::StrCat(f, ".weight.shape [", in, ", ", out, "] exceeds the limit of ",
                                                         limits.max_features, " features (--max_features)"));
      }
    }
    if (i > 0 && in != shapes.back().second) {
      return absl::InvalidArgumentError(absl::StrCat(f, ".weight.shape[0] is ", in, " but layers[", i - 1, "] has ",
                                                     shapes.back().second, " output features"));
    }
    PendingLayer pl;
    pl.in = in;
    pl.out = out;
    if (!v1::Activation_IsValid(l.activation())) {
      return absl::InvalidArgumentError(absl::StrCat(f, ".activation ", l.activation(), " is not a known activation"));
    }
    pl.activation = static_cast<dense::Activation>(l.activation());
    std::vector<std::pair<int, const v1::TensorHeader*>> declared = {{v1::LAYER_TENSOR_WEIGHT, &l.weight()}};
    if (l.has_bias()) {
      RETURN_IF_ERROR(CheckHeader(l.bias(), f + ".bias", {out}));
      declared.emplace_back(v1::LAYER_TENSOR_BIAS, &l.bias());
    }
    RETURN_IF_ERROR(CheckHeader(l.weight(), f + ".weight", {in, out}));
    if (l.has_layernorm()) {
      pl.layernorm = true;
      const v1::LayerNormHeader& ln = l.layernorm();
      if (ln.has_eps()) {
        if (!std::isfinite(ln.eps()) || ln.eps() <= 0) {
          return absl::InvalidArgumentError(absl::StrCat(f, ".layernorm.eps must be finite and > 0, not ", ln.eps()));
        }
        pl.eps = ln.eps();
      }
      if (ln.has_gamma()) {
        RETURN_IF_ERROR(CheckHeader(ln.gamma(), f + ".layernorm.gamma", {in}));
        declared.emplace_back(v1::LAYER_TENSOR_GAMMA, &ln.gamma());
      }
      if (ln.has_beta()) {
        RETURN_IF_ERROR(CheckHeader(ln.beta(), f + ".layernorm.beta", {in}));
        declared.emplace_back(v1::LAYER_TENSOR_BETA, &ln.beta());
      }
    }
    for (const auto& [which, t] : declared) {
      Pending& p = pl.tensors[which];
      p.declared = true;
      p.field = absl::StrCat("layers[", i, "].", TensorName(which));
      p.wire = *FloatElementType(t->dtype(), "");
      p.elements = 1;
      for (int64_t d : t->shape()) p.elements *= d;
    }
    shapes.emplace_back(in, out);
    u->layers_.push_back(std::move(pl));
  }
  u->stored_bytes_ = dense::StoredBytes(u->dtype_, shapes);
  if (u->stored_bytes_ > limits.max_model_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat("model '", u->name_, "' needs ", u->stored_bytes_,
                                                     " bytes stored as ", ElementName(u->dtype_),
                                                     "; the limit is ", limits.max_model_bytes,
                                                     " (--max_model_bytes)"));
  }
  return u;
}

absl::Status ModelUpload::Add(const v1::TensorChunk& chunk) {
  const int n = static_cast<int>(layers_.size());
  if (chunk.layer() < 0 || chunk.layer() >= n) {
    return absl::InvalidArgumentError(
        absl::StrCat("chunk.layer ", chunk.layer(), " is out of range (the model has ", n, " layers)"));
  }
  if (!v1::LayerTensor_IsValid(chunk.tensor())) {
    return absl::InvalidArgumentError(absl::StrCat("chunk.tensor ", chunk.tensor(), " is not a known layer tensor"));
  }
  Pending& p = layers_[chunk.layer()].tensors[chunk.tensor()];
  if (!p.declared) {
    return absl::InvalidArgumentError(absl::StrCat("chunk for layers[", chunk.layer(), "].",
                                                   TensorName(chunk.tensor()), ", which the header does not declare"));
  }
  const int64_t total = p.elements * ElementSize(p.wire);
  const int64_t received = static_cast<int64_t>(p.bytes.size());
  if (chunk.offset() != received) {
    return absl::InvalidArgumentError(absl::StrCat("chunk.offset for ", p.field, " is ", chunk.offset(), " but ",
                                                   received, " bytes were received so far (a tensor's chunks must arrive in order)"));
  }
  if (received + static_cast<int64_t>(chunk.data().size()) > total) {
    return absl::InvalidArgumentError(absl::StrCat("chunk for ", p.field, " goes past the tensor's ", total,
                                                   " bytes (", received, " + ", chunk.data().size(), ")"));
  }
  // Memory follows the bytes that arrived, not the header's word: reserving the declared size
  // at the first chunk let a few bytes of stream claim up to max_model_bytes (times 4 for a
  // float64 wire into a float16 model) at once. Doubling, capped at the declared size.
  const int64_t needed = received + static_cast<int64_t>(chunk.data().size());
  if (needed > static_cast<int64_t>(p.bytes.capacity())) {
    p.bytes.reserve(static_cast<size_t>(
        std::min(total, std::max(needed, 2 * static_cast<int64_t>(p.bytes.capacity())))));
  }
  p.bytes.append(chunk.data());
  return absl::OkStatus();
}

absl::Status ModelUpload::CheckComplete(const Pending& p) {
  const int64_t total = p.elements * ElementSize(p.wire);
  if (static_cast<int64_t>(p.bytes.size()) != total) {
    return absl::InvalidArgumentError(
        absl::StrCat(p.field, ": received ", p.bytes.size(), " of its ", total, " bytes"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<double>> ModelUpload::TakeDoubles(Pending& p) {
  std::vector<double> values;
  if (!p.declared) return values;
  RETURN_IF_ERROR(CheckComplete(p));
  values.resize(static_cast<size_t>(p.elements));
  ToDouble(p.wire, p.bytes.data(), p.elements, values.data());
  std::string().swap(p.bytes);
  for (size_t i = 0; i < values.size(); ++i) {
    if (!std::isfinite(values[i])) {
      return absl::InvalidArgumentError(absl::StrCat(p.field, "[", i, "] is ", values[i], "; values must be finite"));
    }
  }
  return values;
}

absl::StatusOr<dense::ModelSpec> ModelUpload::Finish() {
  dense::ModelSpec spec;
  spec.name = name_;
  spec.dtype = dtype_;
  spec.allow_tf32 = allow_tf32_;
  for (PendingLayer& pl : layers_) {
    dense::LayerSpec l;
    l.in = pl.in;
    l.out = pl.out;
    l.layernorm = pl.layernorm;
    l.eps = pl.eps;
    l.activation = pl.activation;
    // The weight straight to float32 (a multi-GiB tensor is never widened to double).
    Pending& w = pl.tensors[v1::LAYER_TENSOR_WEIGHT];
    RETURN_IF_ERROR(CheckComplete(w));
    l.weight.resize(static_cast<size_t>(w.elements));
    ToFloat(w.wire, w.bytes.data(), w.elements, l.weight.data());
    std::string().swap(w.bytes);
    for (size_t i = 0; i < l.weight.size(); ++i) {
      if (!std::isfinite(l.weight[i])) {
        return absl::InvalidArgumentError(absl::StrCat(w.field, "[", i / l.out, ", ", i % l.out, "] is ",
                                                       l.weight[i], "; values must be finite"));
      }
    }
    ASSIGN_OR_RETURN(std::vector<double> bias, TakeDoubles(pl.tensors[v1::LAYER_TENSOR_BIAS]));
    ASSIGN_OR_RETURN(std::vector<double> gamma, TakeDoubles(pl.tensors[v1::LAYER_TENSOR_GAMMA]));
    ASSIGN_OR_RETURN(std::vector<double> beta, TakeDoubles(pl.tensors[v1::LAYER_TENSOR_BETA]));
    l.bias = bias.empty() ? std::vector<double>(static_cast<size_t>(l.out), 0.0) : std::move(bias);
    dense::FoldLayerNorm(gamma, beta, &l);
    spec.layers.push_back(std::move(l));
  }
  return spec;
}

}  // namespace gpucompute
