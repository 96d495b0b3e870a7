// Writes the fuzz targets' seed corpus: a few valid requests per operation (inline, by handle,
// in shared memory; every output placement), valid LoadModel streams, and PutTensor and Submit
// message sequences (good and bad), and shared-memory registrations by their owner and by
// others, one file each under <dir>/request_fuzzer/, <dir>/model_upload_fuzzer/,
// <dir>/tensor_stream_fuzzer/ and <dir>/shared_memory_fuzzer/. Handles and the region are the names
// fuzz_env.h gives them ("h0".., "r"). Run by `scripts/fuzz.sh --seeds`.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "fuzz_input.pb.h"
#include "gpucompute/v1/compute.pb.h"

namespace gpucompute::fuzz {
namespace {

template <typename T>
void Fill(v1::Tensor* t, v1::DType dtype, std::vector<int64_t> shape, const std::vector<T>& v) {
  t->set_dtype(dtype);
  for (int64_t d : shape) t->add_shape(d);
  t->set_data(std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T)));
}

void Handle(v1::Tensor* t, const char* h) { t->set_handle(h); }

void Shared(v1::Tensor* t, v1::DType dtype, std::vector<int64_t> shape, int64_t offset,
            int64_t length) {
  t->set_dtype(dtype);
  for (int64_t d : shape) t->add_shape(d);
  t->mutable_shared_memory()->set_region("r");
  t->mutable_shared_memory()->set_offset(offset);
  t->mutable_shared_memory()->set_length(length);
}

std::vector<double> Times(int n) {
  std::vector<double> t(n);
  for (int i = 0; i < n; ++i) t[i] = i + 0.3 * std::sin(1.7 * i);
  return t;
}
std::vector<double> Values(int n) {
  std::vector<double> y(n);
  for (int i = 0; i < n; ++i) y[i] = std::sin(0.9 * i) + 0.1 * (i % 3);
  return y;
}

bool Write(const std::string& dir, const std::string& name, const google::protobuf::Message& m) {
  std::ofstream f(dir + "/" + name, std::ios::binary);
  f << m.SerializeAsString();
  return static_cast<bool>(f);
}

std::vector<std::pair<std::string, v1::SubmitRequest>> Requests() {
  std::vector<std::pair<std::string, v1::SubmitRequest>> all;
  auto add = [&](const std::string& name) -> v1::SubmitRequest& {
    all.emplace_back(name, v1::SubmitRequest());
    all.back().second.set_id(name);
    return all.back().second;
  };
  {  // float64 inline, automatic grid
    v1::Series* s = add("periodogram_inline").mutable_periodogram()->add_series();
    Fill(s->mutable_t(), v1::FLOAT64, {16}, Times(16));
    Fill(s->mutable_y(), v1::FLOAT64, {16}, Values(16));
  }
  {  // float32 with dy, uniform grid, PSD, two series
    v1::PeriodogramRequest* p = add("periodogram_uniform_dy").mutable_periodogram();
    p->set_dtype(v1::FLOAT32);
    p->set_normalization(v1::NORMALIZATION_PSD);
    p->set_fit_mean(false);
    p->mutable_frequency()->mutable_uniform()->set_f0(0.05);
    p->mutable_frequency()->mutable_uniform()->set_df(0.01);
    p->mutable_frequency()->mutable_uniform()->set_n(50);
    for (int k = 0; k < 2; ++k) {
      v1::Series* s = p->add_series();
      std::vector<float> t, y, dy;
      for (double v : Times(9 + k)) t.push_back(static_cast<float>(v));
      for (double v : Values(9 + k)) y.push_back(static_cast<float>(v));
      dy.assign(t.size(), 0.5f);
      Fill(s->mutable_t(), v1::FLOAT32, {9 + k}, t);
      Fill(s->mutable_y(), v1::FLOAT32, {9 + k}, y);
      Fill(s->mutable_dy(), v1::FLOAT32, {9 + k}, dy);
    }
  }
  {  // resident inputs, explicit frequencies, kept outputs
    v1::PeriodogramRequest* p = add("periodogram_handles_explicit").mutable_periodogram();
    v1::Series* s = p->add_series();
    Handle(s->mutable_t(), "h0");
    Handle(s->mutable_y(), "h6");
    Fill(s->mutable_frequency()->mutable_explicit_frequencies(), v1::FLOAT64, {4},
         std::vector<double>{0.1, 0.2, 0.3, 0.4});
    p->mutable_output_placement()->set_keep(true);
  }
  {  // shared-memory input, automatic grid with every parameter, outputs to shared memory
    v1::PeriodogramRequest* p = add("periodogram_shared_memory").mutable_periodogram();
    v1::Series* s = p->add_series();
    Handle(s->mutable_t(), "h0");
    Shared(s->mutable_y(), v1::FLOAT32, {16}, 128, 64);
    v1::AutoGrid* a = s->mutable_frequency()->mutable_auto_();
    a->set_samples_per_peak(3);
    a->set_nyquist_factor(2);
    a->set_minimum_frequency(0.01);
    a->set_maximum_frequency(1.5);
    p->mutable_output_placement()->mutable_shared_memory()->set_region("r");
    p->mutable_output_placement()->mutable_shared_memory()->set_offset(4096);
  }
  {  // dense, inline float32 into model "m" (3 -> 5 -> 2)
    v1::DenseRequest* d = add("dense_inline").mutable_dense();
    d->set_model("m");
    Fill(d->mutable_input(), v1::FLOAT32, {2, 3}, std::vector<float>{1, 2, 3, 4, 5, 6});
  }
  {  // dense, resident float32 input [4, 3] into "m", outputs to shared memory
    v1::DenseRequest* d = add("dense_handle_shared_out").mutable_dense();
    d->set_model("m");
    Handle(d->mutable_input(), "h2");
    d->mutable_output_placement()->mutable_shared_memory()->set_region("r");
    d->mutable_output_placement()->mutable_shared_memory()->set_length(1024);
  }
  {  // dense, float16 resident input into model "f16" (8 -> 4)
    v1::DenseRequest* d = add("dense_f16").mutable_dense();
    d->set_model("f16");
    Handle(d->mutable_input(), "h4");
  }
  {  // dense, zero rows of bfloat16
    v1::DenseRequest* d = add("dense_zero_rows").mutable_dense();
    d->set_model("f16");
    d->mutable_input()->set_dtype(v1::BFLOAT16);
    d->mutable_input()->add_shape(0);
    d->mutable_input()->add_shape(8);
    d->mutable_input()->set_data("");
  }
  {  // assimilate: ETKF, float64, variances
    v1::AssimilationProblem* p = add("assimilate_etkf").mutable_assimilate()->add_problems();
    Fill(p->mutable_x(), v1::FLOAT64, {3, 4}, std::vector<double>{1, 2, 3, 4, 2, 3, 4, 5, 0, 1, 0, 1});
    Fill(p->mutable_hx(), v1::FLOAT64, {2, 4}, std::vector<double>{1, 2, 3, 4, 0, 1, 0, 1});
    Fill(p->mutable_y(), v1::FLOAT64, {2}, std::vector<double>{2.5, 0.4});
    Fill(p->mutable_obs_error_variance(), v1::FLOAT64, {2}, std::vector<double>{0.5, 0.25});
    p->set_inflation(1.05);
  }
  {  // assimilate: stochastic EnKF, float32, full covariance, perturbations, RTPS, obs form
    v1::AssimilateRequest* a = add("assimilate_enkf_covariance").mutable_assimilate();
    a->set_dtype(v1::FLOAT32);
    v1::AssimilationProblem* p = a->add_problems();
    Fill(p->mutable_x(), v1::FLOAT32, {2, 3}, std::vector<float>{1, 2, 3, 0, 1, 0});
    Fill(p->mutable_hx(), v1::FLOAT32, {2, 3}, std::vector<float>{1, 2, 3, 0, 1, 0});
    Fill(p->mutable_y(), v1::FLOAT32, {2}, std::vector<float>{2, 0.5});
    Fill(p->mutable_obs_error_covariance(), v1::FLOAT32, {2, 2}, std::vector<float>{1, 0.1, 0.1, 1});
    Fill(p->mutable_perturbations(), v1::FLOAT32, {2, 3}, std::vector<float>{0.1, -0.1, 0, 0, 0.2, -0.2});
    p->set_method(v1::ASSIMILATION_METHOD_ENKF);
    p->set_relaxation(v1::RELAXATION_RTPS);
    p->set_relaxation_factor(0.5);
    p->set_form(v1::ANALYSIS_FORM_OBSERVATION_SPACE);
  }
  {  // assimilate: resident ensemble (h3 is [3, 4]), seeded EnKF, RTPP, ensemble form, kept
    v1::AssimilateRequest* a = add("assimilate_handles_seed").mutable_assimilate();
    v1::AssimilationProblem* p = a->add_problems();
    Handle(p->mutable_x(), "h3");
    Handle(p->mutable_hx(), "h3");
    Fill(p->mutable_y(), v1::FLOAT64, {3}, std::vector<double>{1, 2, 3});
    Shared(p->mutable_obs_error_variance(), v1::FLOAT32, {3}, 0, 12);
    p->set_method(v1::ASSIMILATION_METHOD_ENKF);
    p->set_seed(42);
    p->set_relaxation(v1::RELAXATION_RTPP);
    p->set_relaxation_factor(0.3);
    p->set_form(v1::ANALYSIS_FORM_ENSEMBLE_SPACE);
    a->mutable_output_placement()->set_keep(true);
  }
  {  // periodogram: top-k and false alarms with the powers discarded
    v1::PeriodogramRequest* p = add("periodogram_discard").mutable_periodogram();
    v1::Series* s = p->add_series();
    Fill(s->mutable_t(), v1::FLOAT64, {16}, Times(16));
    Fill(s->mutable_y(), v1::FLOAT64, {16}, Values(16));
    p->set_top_k(3);
    p->mutable_false_alarm()->set_method(v1::FALSE_ALARM_METHOD_BALUEV);
    p->mutable_output_placement()->set_discard(true);
  }
  {  // periodogram: packed series (one of them also a Series), results as columns
    v1::PeriodogramRequest* p = add("periodogram_packed_columns").mutable_periodogram();
    v1::Series* s = p->add_series();
    Fill(s->mutable_t(), v1::FLOAT64, {16}, Times(16));
    Fill(s->mutable_y(), v1::FLOAT64, {16}, Values(16));
    v1::PackedSeries* packed = p->mutable_packed_series();
    Fill(packed->mutable_t(), v1::FLOAT64, {16}, Times(16));
    Fill(packed->mutable_y(), v1::FLOAT32, {16}, std::vector<float>(16, 0.5f));
    packed->add_lengths(6);
    packed->add_lengths(10);
    p->set_top_k(2);
    p->mutable_false_alarm()->add_probabilities(0.1);
    p->set_result_columns(true);
  }
  {  // echo: kept above a size, with an idle expiry of its own
    v1::EchoRequest* e = add("echo_keep_above").mutable_echo();
    Fill(e->mutable_tensor(), v1::UINT8, {6}, std::vector<uint8_t>{1, 2, 3, 4, 5, 6});
    e->mutable_output_placement()->set_keep_above_bytes(4);
    e->mutable_output_placement()->set_idle_expiry_ms(1000);
  }
  {  // echo: inline bytes
    v1::EchoRequest* e = add("echo_inline").mutable_echo();
    Fill(e->mutable_tensor(), v1::UINT8, {2, 3}, std::vector<uint8_t>{1, 2, 3, 4, 5, 6});
  }
  {  // echo: shared memory in and out
    v1::EchoRequest* e = add("echo_shared_memory").mutable_echo();
    Shared(e->mutable_tensor(), v1::INT32, {4, 4}, 256, 64);
    e->mutable_output_placement()->mutable_shared_memory()->set_region("r");
    e->mutable_output_placement()->mutable_shared_memory()->set_offset(8192);
    e->mutable_output_placement()->mutable_shared_memory()->set_length(4096);
  }
  {  // echo: a resident tensor, kept again
    v1::EchoRequest* e = add("echo_handle_keep").mutable_echo();
    Handle(e->mutable_tensor(), "h1");
    e->mutable_output_placement()->set_keep(true);
  }
  {  // echo: discarded
    v1::EchoRequest* e = add("echo_discard").mutable_echo();
    Fill(e->mutable_tensor(), v1::FLOAT16, {2}, std::vector<uint16_t>{0x3c00, 0x4000});
    e->set_discard(true);
  }
  {  // regression: a placement length near INT64_MAX (offset + length overflowed)
    v1::EchoRequest* e = add("echo_placement_huge_length").mutable_echo();
    Fill(e->mutable_tensor(), v1::UINT8, {1}, std::vector<uint8_t>{7});
    e->mutable_output_placement()->mutable_shared_memory()->set_region("r");
    e->mutable_output_placement()->mutable_shared_memory()->set_offset(10);
    e->mutable_output_placement()->mutable_shared_memory()->set_length(INT64_MAX);
  }
  return all;
}

void Chunk(LoadModelStream& s, int layer, v1::LayerTensor which, int64_t offset, std::string data) {
  v1::TensorChunk* c = s.add_chunks()->mutable_chunk();
  c->set_layer(layer);
  c->set_tensor(which);
  c->set_offset(offset);
  c->set_data(std::move(data));
}

template <typename T>
std::string Bytes(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

std::vector<std::pair<std::string, LoadModelStream>> Uploads() {
  std::vector<std::pair<std::string, LoadModelStream>> all;
  {  // one float32 layer with a bias, the weight in two chunks
    LoadModelStream s;
    v1::ModelHeader* h = s.add_chunks()->mutable_header();
    h->set_name("one_layer");
    v1::LayerHeader* l = h->add_layers();
    l->mutable_weight()->set_dtype(v1::FLOAT32);
    l->mutable_weight()->add_shape(3);
    l->mutable_weight()->add_shape(2);
    l->mutable_bias()->set_dtype(v1::FLOAT32);
    l->mutable_bias()->add_shape(2);
    l->set_activation(v1::ACTIVATION_RELU);
    const std::string w = Bytes(std::vector<float>{1, 2, 3, 4, 5, 6});
    Chunk(s, 0, v1::LAYER_TENSOR_WEIGHT, 0, w.substr(0, 8));
    Chunk(s, 0, v1::LAYER_TENSOR_WEIGHT, 8, w.substr(8));
    Chunk(s, 0, v1::LAYER_TENSOR_BIAS, 0, Bytes(std::vector<float>{0.5, -0.5}));
    all.emplace_back("upload_one_layer", s);
  }
  {  // a float16 model of two layers, layernorm with gamma and beta, float64 and bfloat16 wires
    LoadModelStream s;
    v1::ModelHeader* h = s.add_chunks()->mutable_header();
    h->set_name("two.layers-f16");
    h->set_dtype(v1::FLOAT16);
    v1::LayerHeader* l0 = h->add_layers();
    l0->mutable_weight()->set_dtype(v1::FLOAT64);
    l0->mutable_weight()->add_shape(2);
    l0->mutable_weight()->add_shape(2);
    v1::LayerNormHeader* ln = l0->mutable_layernorm();
    ln->set_eps(1e-3);
    ln->mutable_gamma()->set_dtype(v1::FLOAT32);
    ln->mutable_gamma()->add_shape(2);
    ln->mutable_beta()->set_dtype(v1::FLOAT16);
    ln->mutable_beta()->add_shape(2);
    l0->set_activation(v1::ACTIVATION_GELU_TANH);
    v1::LayerHeader* l1 = h->add_layers();
    l1->mutable_weight()->set_dtype(v1::BFLOAT16);
    l1->mutable_weight()->add_shape(2);
    l1->mutable_weight()->add_shape(1);
    l1->set_activation(v1::ACTIVATION_SILU);
    Chunk(s, 0, v1::LAYER_TENSOR_WEIGHT, 0, Bytes(std::vector<double>{1, 0, 0, 1}));
    Chunk(s, 0, v1::LAYER_TENSOR_GAMMA, 0, Bytes(std::vector<float>{1, 2}));
    Chunk(s, 0, v1::LAYER_TENSOR_BETA, 0, Bytes(std::vector<uint16_t>{0x3c00, 0xbc00}));
    Chunk(s, 1, v1::LAYER_TENSOR_WEIGHT, 0, Bytes(std::vector<uint16_t>{0x3f80, 0x4000}));
    all.emplace_back("upload_two_layers_f16", s);
  }
  {  // float32 with TF32 allowed, layernorm without affine terms, GELU (erf)
    LoadModelStream s;
    v1::ModelHeader* h = s.add_chunks()->mutable_header();
    h->set_name("tf32");
    h->set_allow_tf32(true);
    v1::LayerHeader* l = h->add_layers();
    l->mutable_weight()->set_dtype(v1::FLOAT16);
    l->mutable_weight()->add_shape(1);
    l->mutable_weight()->add_shape(3);
    l->mutable_layernorm();
    l->set_activation(v1::ACTIVATION_GELU_ERF);
    Chunk(s, 0, v1::LAYER_TENSOR_WEIGHT, 0, Bytes(std::vector<uint16_t>{0x3c00, 0x4000, 0x4200}));
    all.emplace_back("upload_tf32", s);
  }
  {  // regression: a 64 GiB float64 weight declared, one byte sent (was reserved at once)
    LoadModelStream s;
    v1::ModelHeader* h = s.add_chunks()->mutable_header();
    h->set_name("huge");
    v1::LayerHeader* l = h->add_layers();
    l->mutable_weight()->set_dtype(v1::FLOAT64);
    l->mutable_weight()->add_shape(int64_t{1} << 20);
    l->mutable_weight()->add_shape(int64_t{1} << 13);
    Chunk(s, 0, v1::LAYER_TENSOR_WEIGHT, 0, "x");
    all.emplace_back("upload_huge_declared_weight", s);
  }
  return all;
}

// tensor_stream_fuzzer's input: messages, each a 2-byte little-endian length and its bytes.
std::string Framed(const std::vector<std::string>& messages) {
  std::string out;
  for (const std::string& m : messages) {
    out.push_back(static_cast<char>(m.size() & 0xFF));
    out.push_back(static_cast<char>((m.size() >> 8) & 0xFF));
    out += m;
  }
  return out;
}

std::string PutMessage(bool header, int64_t offset, const std::string& data, int64_t elements = 4) {
  v1::PutTensorChunk c;
  if (header) {
    c.mutable_header()->set_dtype(v1::FLOAT64);
    c.mutable_header()->add_shape(elements);
  }
  c.set_offset(offset);
  c.set_data(data);
  return c.SerializeAsString();
}

std::vector<std::pair<std::string, std::string>> Streams() {
  const std::string eight(8, '\x11');
  v1::SubmitRequest echo;
  echo.set_id("e");
  echo.mutable_echo()->mutable_tensor()->set_dtype(v1::FLOAT64);
  echo.mutable_echo()->mutable_tensor()->add_shape(1);
  echo.mutable_echo()->mutable_tensor()->set_data(eight);
  return {
      {"put_in_three_chunks", Framed({PutMessage(true, 0, eight + eight), PutMessage(false, 16, eight),
                                      PutMessage(false, 24, eight)})},
      {"put_overlapping", Framed({PutMessage(true, 4, eight), PutMessage(false, 0, eight + eight)})},
      {"put_outside", Framed({PutMessage(true, 0, eight), PutMessage(false, 30, eight)})},
      {"put_header_twice", Framed({PutMessage(true, 0, eight), PutMessage(true, 8, eight)})},
      {"put_no_header", Framed({PutMessage(false, 0, eight)})},
      {"put_then_corrupt", Framed({PutMessage(true, 0, eight), std::string("\x1a\xc8\x01" "abc", 6)})},
      {"submit_jobs", Framed({echo.SerializeAsString(), echo.SerializeAsString()})},
  };
}

// shared_memory_fuzzer's input: calls of several owners on "k0" and "k1" (the fuzzer's two
// objects): the owner's own registration, and the ways another caller might try.
SharedMemoryStep Step(const std::string& owner) {
  SharedMemoryStep s;
  s.set_owner(owner);
  return s;
}
SharedMemoryStep ProofStep(const std::string& owner, const std::string& key, int64_t offset) {
  SharedMemoryStep s = Step(owner);
  s.mutable_proof()->set_key(key);
  s.mutable_proof()->set_offset(offset);
  return s;
}
SharedMemoryStep RegisterStep(const std::string& owner, const std::string& name, const std::string& key,
                              int64_t offset, int64_t bytes, bool write, bool use_issued) {
  SharedMemoryStep s = Step(owner);
  v1::RegisterSharedMemoryRequest* r = s.mutable_register_();
  r->set_name(name);
  r->set_key(key);
  r->set_offset(offset);
  r->set_byte_size(bytes);
  s.set_write_proof(write);
  s.set_use_issued_proof(use_issued);
  return s;
}

std::vector<std::pair<std::string, SharedMemorySteps>> Registrations() {
  std::vector<std::pair<std::string, SharedMemorySteps>> all;
  auto add = [&](const char* name, std::vector<SharedMemoryStep> steps) {
    SharedMemorySteps s;
    for (SharedMemoryStep& step : steps) *s.add_steps() = std::move(step);
    all.emplace_back(name, std::move(s));
  };
  add("owner_registers", {ProofStep("a", "k0", 0), RegisterStep("a", "r", "k0", 0, 4096, true, true)});
  add("owner_registers_at_an_offset",
      {ProofStep("a", "k1", 1024), RegisterStep("a", "r", "k1", 1024, 2048, true, true)});
  add("other_caller_unwritten", {ProofStep("a", "k0", 0), RegisterStep("a", "r", "k0", 0, 4096, true, true),
                                 ProofStep("b", "k0", 0), RegisterStep("b", "s", "k0", 0, 4096, false, true)});
  add("no_proof", {RegisterStep("b", "s", "k0", 0, 4096, false, false)});
  {
    SharedMemoryStep steal = RegisterStep("b", "s", "k0", 0, 4096, true, true);
    steal.set_any_proof(true);  // another caller's proof, written where it belongs
    add("another_callers_proof", {ProofStep("a", "k0", 0), steal});
  }
  add("register_twice_then_unregister",
      {ProofStep("a", "k0", 0), RegisterStep("a", "r", "k0", 0, 4096, true, true),
       RegisterStep("a", "r", "k0", 0, 4096, true, true), Step("a")});
  all.back().second.mutable_steps(3)->mutable_unregister()->set_name("r");
  return all;
}

bool WriteBytes(const std::string& dir, const std::string& name, const std::string& bytes) {
  std::ofstream f(dir + "/" + name, std::ios::binary);
  f << bytes;
  return static_cast<bool>(f);
}

}  // namespace
}  // namespace gpucompute::fuzz

int main(int argc, char** argv) {
  using namespace gpucompute::fuzz;
  if (argc != 2) {
    std::fprintf(stderr,
                 "usage: %s CORPUS_DIR (holding request_fuzzer/, model_upload_fuzzer/, "
                 "tensor_stream_fuzzer/, shared_memory_fuzzer/)\n",
                 argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  for (const auto& [name, m] : Requests()) {
    if (!Write(dir + "/request_fuzzer", name, m)) return 1;
  }
  for (const auto& [name, m] : Uploads()) {
    if (!Write(dir + "/model_upload_fuzzer", name, m)) return 1;
  }
  for (const auto& [name, bytes] : Streams()) {
    if (!WriteBytes(dir + "/tensor_stream_fuzzer", name, bytes)) return 1;
  }
  for (const auto& [name, steps] : Registrations()) {
    if (!WriteBytes(dir + "/shared_memory_fuzzer", name, steps.SerializeAsString())) return 1;
  }
  return 0;
}
