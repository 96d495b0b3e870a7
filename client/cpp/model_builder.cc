// ModelBuilder, Dense request/response helpers and the float64 reference stack.
#include "client/cpp/model_builder.h"

#include <cmath>
#include <limits>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "client/cpp/tensor_util.h"
#include "math/activation.cuh"

namespace gpucompute::client {
namespace {

constexpr struct {
  const char* name;
  v1::Activation activation;
} kActivations[] = {
    {"none", v1::ACTIVATION_NONE},
    {"gelu_tanh", v1::ACTIVATION_GELU_TANH},
    {"gelu_erf", v1::ACTIVATION_GELU_ERF},
    {"relu", v1::ACTIVATION_RELU},
    {"silu", v1::ACTIVATION_SILU},
};

bool IsFloatWire(v1::DType dtype) {
  return dtype == v1::FLOAT32 || dtype == v1::FLOAT64 || dtype == v1::FLOAT16 ||
         dtype == v1::BFLOAT16;
}

absl::Status CheckSize(int layer, absl::string_view what, size_t size, int64_t expected) {
  if (static_cast<int64_t>(size) == expected) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("layers[", layer, "].", what, ": ", size,
                                                 " values, the layer's shape needs ", expected));
}

}  // namespace

absl::StatusOr<v1::Activation> ParseActivation(absl::string_view name) {
  const std::string lower = absl::AsciiStrToLower(name);
  for (const auto& a : kActivations) {
    if (lower == a.name) return a.activation;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown activation '", name, "' (none, gelu_tanh, gelu_erf, relu or silu)"));
}

absl::string_view ActivationName(v1::Activation activation) {
  for (const auto& a : kActivations) {
    if (a.activation == activation) return a.name;
  }
  return "unknown";
}

absl::StatusOr<v1::DType> ParseModelDType(absl::string_view name) {
  const std::string lower = absl::AsciiStrToLower(name);
  if (lower == "float32") return v1::FLOAT32;
  if (lower == "float16") return v1::FLOAT16;
  if (lower == "bfloat16") return v1::BFLOAT16;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown model dtype '", name, "' (float32, float16 or bfloat16)"));
}

ModelBuilder::ModelBuilder(std::string name) : name_(std::move(name)) {}

ModelBuilder& ModelBuilder::SetDType(v1::DType dtype) {
  dtype_ = dtype;
  return *this;
}

ModelBuilder& ModelBuilder::SetAllowTf32(bool allow) {
  allow_tf32_ = allow;
  return *this;
}

ModelBuilder& ModelBuilder::SetWireDType(v1::DType dtype) {
  wire_dtype_ = dtype;
  return *this;
}

ModelBuilder& ModelBuilder::AddLayer(DenseLayer layer) {
  layers_.push_back(std::move(layer));
  return *this;
}

absl::StatusOr<ModelUpload> ModelBuilder::Build() const {
  if (!IsFloatWire(wire_dtype_)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "wire dtype ", DTypeName(wire_dtype_), ": float32, float64, float16 or bfloat16 only"));
  }
  ModelUpload upload;
  v1::ModelHeader& header = upload.header;
  header.set_name(name_);
  header.set_dtype(dtype_);
  header.set_allow_tf32(allow_tf32_);
  for (int i = 0; i < static_cast<int>(layers_.size()); ++i) {
    const DenseLayer& layer = layers_[i];
    if (layer.in_features < 0 || layer.out_features < 0) {
      return absl::InvalidArgumentError(absl::StrCat("layers[", i, "]: negative features"));
    }
    if (layer.in_features > 0 &&
        layer.out_features > std::numeric_limits<int64_t>::max() / layer.in_features) {
      return absl::InvalidArgumentError(absl::StrCat("layers[", i, "]: shape too large"));
    }
    if (!layer.layernorm && (layer.eps || !layer.gamma.empty() || !layer.beta.empty())) {
      return absl::InvalidArgumentError(
          absl::StrCat("layers[", i, "]: eps, gamma or beta given without layernorm"));
    }
    if (absl::Status s = CheckSize(i, "weight", layer.weight.size(),
                                   layer.in_features * layer.out_features);
        !s.ok()) {
      return s;
    }
    v1::LayerHeader* lh = header.add_layers();
    lh->set_activation(layer.activation);
    // Adds the tensor's header and bytes.
    auto add = [&](v1::TensorHeader* th, v1::LayerTensor which, const std::vector<float>& v,
                   std::initializer_list<int64_t> shape) -> absl::Status {
      th->set_dtype(wire_dtype_);
      for (int64_t d : shape) th->add_shape(d);
      absl::StatusOr<std::string> bytes = EncodeFloats(v, wire_dtype_);
      if (!bytes.ok()) return bytes.status();
      upload.tensors.push_back({.layer = i, .tensor = which, .data = *std::move(bytes)});
      return absl::OkStatus();
    };
    if (absl::Status s = add(lh->mutable_weight(), v1::LAYER_TENSOR_WEIGHT, layer.weight,
                             {layer.in_features, layer.out_features});
        !s.ok()) {
      return s;
    }
    if (!layer.bias.empty()) {
      if (absl::Status s = CheckSize(i, "bias", layer.bias.size(), layer.out_features); !s.ok()) {
        return s;
      }
      if (absl::Status s =
              add(lh->mutable_bias(), v1::LAYER_TENSOR_BIAS, layer.bias, {layer.out_features});
          !s.ok()) {
        return s;
      }
    }
    if (layer.layernorm) {
      v1::LayerNormHeader* ln = lh->mutable_layernorm();
      if (layer.eps) ln->set_eps(*layer.eps);
      if (!layer.gamma.empty()) {
        if (absl::Status s = CheckSize(i, "gamma", layer.gamma.size(), layer.in_features);
            !s.ok()) {
          return s;
        }
        if (absl::Status s = add(ln->mutable_gamma(), v1::LAYER_TENSOR_GAMMA, layer.gamma,
                                 {layer.in_features});
            !s.ok()) {
          return s;
        }
      }
      if (!layer.beta.empty()) {
        if (absl::Status s = CheckSize(i, "beta", layer.beta.size(), layer.in_features);
            !s.ok()) {
          return s;
        }
        if (absl::Status s = add(ln->mutable_beta(), v1::LAYER_TENSOR_BETA, layer.beta,
                                 {layer.in_features});
            !s.ok()) {
          return s;
        }
      }
    }
  }
  return upload;
}

absl::StatusOr<v1::DenseRequest> MakeDenseRequest(std::string model, absl::Span<const float> x,
                                                  int64_t rows, int64_t in_features,
                                                  v1::DType dtype) {
  const int64_t shape[] = {rows, in_features};
  absl::StatusOr<v1::Tensor> input = MakeTensor(x, shape, dtype);
  if (!input.ok()) return input.status();
  v1::DenseRequest request;
  request.set_model(std::move(model));
  *request.mutable_input() = *std::move(input);
  return request;
}

absl::StatusOr<DenseOutput> DecodeDenseOutput(const v1::DenseResponse& response) {
  const v1::Tensor& t = response.output();
  if (t.shape_size() != 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("Dense output has ", t.shape_size(), " dimensions, expected 2"));
  }
  if (!IsFloatWire(t.dtype())) {
    return absl::InvalidArgumentError(
        absl::StrCat("Dense output has dtype ", DTypeName(t.dtype())));
  }
  absl::StatusOr<std::vector<float>> values = TensorToFloats(t);
  if (!values.ok()) return values.status();
  DenseOutput out;
  out.rows = t.shape(0);
  out.cols = t.shape(1);
  out.dtype = t.dtype();
  out.values = *std::move(values);
  return out;
}

absl::StatusOr<std::vector<double>> DenseReference(const std::vector<DenseLayer>& layers,
                                                   absl::Span<const double> x, int64_t rows) {
  if (layers.empty()) return absl::InvalidArgumentError("no layers");
  if (rows < 0 || static_cast<int64_t>(x.size()) != rows * layers[0].in_features) {
    return absl::InvalidArgumentError(absl::StrCat("x holds ", x.size(), " values, not ", rows,
                                                   " rows of ", layers[0].in_features));
  }
  std::vector<double> in(x.begin(), x.end()), normed, out;
  for (size_t l = 0; l < layers.size(); ++l) {
    const DenseLayer& layer = layers[l];
    const int64_t n_in = layer.in_features, n_out = layer.out_features;
    if (l > 0 && n_in != layers[l - 1].out_features) {
      return absl::InvalidArgumentError(absl::StrCat("layers[", l, "] takes ", n_in,
                                                     " features, the layer before gives ",
                                                     layers[l - 1].out_features));
    }
    if (static_cast<int64_t>(layer.weight.size()) != n_in * n_out ||
        (!layer.bias.empty() && static_cast<int64_t>(layer.bias.size()) != n_out) ||
        (!layer.gamma.empty() && static_cast<int64_t>(layer.gamma.size()) != n_in) ||
        (!layer.beta.empty() && static_cast<int64_t>(layer.beta.size()) != n_in)) {
      return absl::InvalidArgumentError(absl::StrCat("layers[", l, "]: sizes do not match"));
    }
    normed = in;
    if (layer.layernorm) {
      const double eps = layer.eps.value_or(1e-5);
      for (int64_t r = 0; r < rows; ++r) {
        double* row = normed.data() + r * n_in;
        double mean = 0;
        for (int64_t k = 0; k < n_in; ++k) mean += row[k];
        mean /= static_cast<double>(n_in);
        double var = 0;
        for (int64_t k = 0; k < n_in; ++k) var += (row[k] - mean) * (row[k] - mean);
        var /= static_cast<double>(n_in);  // biased, as LayerNorm
        const double inv = 1.0 / std::sqrt(var + eps);
        for (int64_t k = 0; k < n_in; ++k) {
          double v = (row[k] - mean) * inv;
          if (!layer.gamma.empty()) v *= layer.gamma[k];
          if (!layer.beta.empty()) v += layer.beta[k];
          row[k] = v;
        }
      }
    }
    out.assign(static_cast<size_t>(rows * n_out), 0.0);
    for (int64_t r = 0; r < rows; ++r) {
      const double* a = normed.data() + r * n_in;
      double* y = out.data() + r * n_out;
      for (int64_t k = 0; k < n_in; ++k) {
        const double ak = a[k];
        const float* w = layer.weight.data() + k * n_out;
        for (int64_t j = 0; j < n_out; ++j) y[j] += ak * w[j];
      }
      for (int64_t j = 0; j < n_out; ++j) {
        const double b = layer.bias.empty() ? 0.0 : layer.bias[j];
        y[j] = dense::Activate<double>(static_cast<dense::Activation>(layer.activation), y[j] + b);
      }
    }
    in.swap(out);
  }
  return in;
}

double RelativeL2Error(absl::Span<const double> a, absl::Span<const double> b) {
  if (a.size() != b.size()) return std::numeric_limits<double>::quiet_NaN();
  double diff = 0, norm = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) || std::isnan(b[i])) return std::numeric_limits<double>::quiet_NaN();
    diff += (a[i] - b[i]) * (a[i] - b[i]);
    norm += b[i] * b[i];
  }
  if (norm == 0) return diff == 0 ? 0.0 : std::numeric_limits<double>::infinity();
  return std::sqrt(diff / norm);
}

}  // namespace gpucompute::client
