// The fuzz targets' shared environment (see fuzz_env.h).
#include "tests/fuzz/fuzz_env.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "tests/server/runtime/register_own_region.h"
#include "google/protobuf/stubs/logging.h"
#include "gpucompute/v1/tensor.pb.h"
#include "server/ops/dense/cpu_dense.h"

namespace gpucompute::fuzz {
namespace {

[[noreturn]] void Die(absl::string_view what, const absl::Status& status) {
  std::fprintf(stderr, "fuzz environment: %.*s: %s\n", static_cast<int>(what.size()), what.data(),
               status.ToString().c_str());
  std::abort();
}

std::string Floats(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}
std::string Doubles(const std::vector<double>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(double));
}

std::string Resident(TensorStore& store, v1::DType dtype, std::vector<int64_t> shape,
                     const std::string& bytes) {
  auto t = store.Create(kClient, TensorSpec{dtype, DTypeSize(dtype), std::move(shape)});
  if (!t.ok()) Die("resident tensor", t.status());
  if (!bytes.empty()) {
    if (absl::Status s = (*t)->Write(0, bytes); !s.ok()) Die("resident tensor", s);
  }
  return (*t)->handle();
}

void AddModel(ModelRegistry& models, const std::string& name, ElementType dtype,
              std::vector<std::pair<int64_t, int64_t>> shapes) {
  dense::ModelSpec spec;
  spec.name = name;
  spec.dtype = dtype;
  for (const auto& [in, out] : shapes) {
    dense::LayerSpec l;
    l.in = in;
    l.out = out;
    l.weight.assign(static_cast<size_t>(in * out), 0.25f);
    l.bias.assign(static_cast<size_t>(out), 0.0);
    spec.layers.push_back(std::move(l));
  }
  if (absl::Status s = models.Reserve(name); !s.ok()) Die("model", s);
  models.Publish(dense::CpuModel::Make(std::move(spec)));
}

Env* MakeEnv() {
  auto* env = new Env();
  env->memory = std::make_unique<MemoryBudget>(env->limits.memory_budget_bytes, "--memory_budget_bytes",
                                               env->limits.memory_budget_share, "--memory_budget_share");
  TensorStoreOptions o;
  o.max_bytes_per_client = 64 << 20;
  o.idle_expiry = absl::ZeroDuration();  // never: the handles must stay valid all run
  o.sweep_interval = absl::ZeroDuration();
  env->store = std::make_unique<TensorStore>(o);
  std::vector<float> t(16), y(16);
  std::vector<double> y64(16);
  for (int i = 0; i < 16; ++i) {
    t[i] = 0.37f * static_cast<float>(i * i % 23) + static_cast<float>(i);
    y[i] = static_cast<float>(i % 5) - 2.0f;
    y64[i] = 0.5 * (i % 3);
  }
  TensorStore& s = *env->store;
  env->handles = {
      Resident(s, v1::FLOAT32, {16}, Floats(t)),                                    // h0: times
      Resident(s, v1::FLOAT64, {16}, Doubles(y64)),                                 // h1
      Resident(s, v1::FLOAT32, {4, 3}, Floats(std::vector<float>(12, 1.5f))),       // h2: m's input
      Resident(s, v1::FLOAT64, {3, 4}, Doubles(std::vector<double>(12, 2.0))),      // h3: x / hx
      Resident(s, v1::FLOAT16, {2, 8}, std::string(32, '\x3c')),                    // h4: f16's input
      Resident(s, v1::UINT8, {0}, ""),                                              // h5: empty
      Resident(s, v1::FLOAT32, {16}, Floats(y)),                                    // h6: values
  };
  // h7: reserved but never written (incomplete: FAILED_PRECONDITION).
  auto incomplete = s.Create(kClient, TensorSpec{v1::FLOAT32, 4, {8}});
  if (!incomplete.ok()) Die("incomplete tensor", incomplete.status());
  env->handles.push_back((*incomplete)->handle());

  // A region of our own object, unlinked at once: the mapping and descriptor keep it.
  env->shared_memory = std::make_unique<SharedMemoryRegistry>(true);
  const std::string key = absl::StrCat("/gpucompute-fuzz-", getpid());
  const int fd = shm_open(key.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0 || ftruncate(fd, kRegionBytes) != 0) {
    Die("shm_open", absl::InternalError(std::strerror(errno)));
  }
  close(fd);
  // Registered as a client registers (the proof written into the object first), then filled
  // with ones over the proof.
  absl::Status registered =
      testing::RegisterOwnRegion(*env->shared_memory, kClient, kRegion, key, 0, kRegionBytes);
  shm_unlink(key.c_str());
  if (!registered.ok()) Die("shared memory", registered);
  std::vector<float> ones(kRegionBytes / sizeof(float), 1.0f);
  std::memcpy((*env->shared_memory->Find(kClient, kRegion))->data(), ones.data(), kRegionBytes);

  env->models = std::make_unique<ModelRegistry>(env->limits.dense.max_models);
  AddModel(*env->models, "m", ElementType::kFloat32, {{3, 5}, {5, 2}});
  AddModel(*env->models, "f16", ElementType::kFloat16, {{8, 4}});
  return env;
}

}  // namespace

// libFuzzer's start-up hook: protobuf's log of each unparsable input would drown the output.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  google::protobuf::SetLogHandler(nullptr);
  GetEnv();
  return 0;
}

Env& GetEnv() {
  static Env* env = MakeEnv();
  return *env;
}

void MapHandles(const Env& env, google::protobuf::Message* message) {
  const google::protobuf::Descriptor* d = message->GetDescriptor();
  const google::protobuf::Reflection* r = message->GetReflection();
  if (d == v1::Tensor::descriptor()) {
    auto* t = static_cast<v1::Tensor*>(message);
    const std::string& h = t->handle();
    if (t->has_handle() && h.size() == 2 && h[0] == 'h' && h[1] >= '0' && h[1] <= '9') {
      t->set_handle(env.handles[static_cast<size_t>(h[1] - '0') % env.handles.size()]);
    }
    return;
  }
  std::vector<const google::protobuf::FieldDescriptor*> fields;
  r->ListFields(*message, &fields);
  for (const auto* f : fields) {
    if (f->cpp_type() != google::protobuf::FieldDescriptor::CPPTYPE_MESSAGE) continue;
    if (f->is_repeated()) {
      for (int i = 0; i < r->FieldSize(*message, f); ++i) {
        MapHandles(env, r->MutableRepeatedMessage(message, f, i));
      }
    } else {
      MapHandles(env, r->MutableMessage(message, f));
    }
  }
}

void CheckNoLeaseLeft(const Env& env) {
  if (env.memory->in_use() != 0) {  // a call that failed or finished left a lease behind
    std::fprintf(stderr, "FINDING: %lld bytes of the memory budget still leased\n",
                 static_cast<long long>(env.memory->in_use()));
    std::abort();
  }
}

int FuzzSubmitRequest(const uint8_t* data, size_t size, const SubmitHandlers& handlers) {
  Env& env = GetEnv();
  v1::SubmitRequest request;
  if (!request.ParseFromArray(data, static_cast<int>(size))) return -1;
  MapHandles(env, &request);
  switch (request.job_case()) {
    case v1::SubmitRequest::kPeriodogram: handlers.periodogram(request.periodogram()); break;
    case v1::SubmitRequest::kDense: handlers.dense(request.dense()); break;
    case v1::SubmitRequest::kAssimilate: handlers.assimilate(request.assimilate()); break;
    case v1::SubmitRequest::kEcho: handlers.echo(request.echo()); break;
    case v1::SubmitRequest::JOB_NOT_SET: break;
  }
  CheckNoLeaseLeft(env);
  return 0;
}

void CheckStatus(const absl::Status& status, const google::protobuf::Message& what) {
  static const bool verbose = std::getenv("GPUCOMPUTE_FUZZ_VERBOSE") != nullptr;
  if (verbose) std::fprintf(stderr, "status: %s\n", status.ToString().c_str());
  switch (status.code()) {
    case absl::StatusCode::kOk:
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kResourceExhausted:
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kFailedPrecondition:
      return;
    default:
      break;
  }
  std::string text = what.ShortDebugString();
  if (text.size() > 4000) text.resize(4000);
  std::fprintf(stderr, "FINDING: unexpected status %s\nfor %s\n", status.ToString().c_str(),
               text.c_str());
  std::abort();
}

}  // namespace gpucompute::fuzz
