// Preparing a run: model, random requests, input placement, serialization.
#include "client/load/setup.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "client/cpp/tensor_util.h"
#include "common/status_macros.h"

namespace gpucompute::load {
namespace {

// "gpucompute-load-<host>-<pid>", in the model-name alphabet [A-Za-z0-9_.-].
std::string ModelName() {
  char host[64] = {};
  gethostname(host, sizeof(host) - 1);
  std::string name = absl::StrCat("gpucompute-load-", host, "-", getpid());
  for (char& c : name) {
    if (!absl::ascii_isalnum(c) && c != '_' && c != '.' && c != '-') c = '_';
  }
  return name.substr(0, 128);
}

// Input tensor bytes of a request once placed in a region (each tensor 64-byte aligned).
int64_t RegionBytes(v1::SubmitRequest& request) {
  int64_t bytes = 0;
  ForEachInputTensor(request, [&](v1::Tensor& t) {
    bytes += Align64(static_cast<int64_t>(t.data().size()));
  });
  return bytes;
}

// The requests of one mix entry.
struct Entry {
  Op op = Op::kEcho;
  double weight = 0;
  std::vector<v1::SubmitRequest> requests;
  std::vector<int64_t> payload_bytes;        // input tensor bytes of each
  std::vector<v1::SubmitRequest> echo_twins;  // --compare-echo, non-echo ops
};

}  // namespace

absl::Status PreparedRun::LoadModel(const LoadConfig& config,
                                    const std::vector<LoadChannel>& channels) {
  model_name_ = ModelName();
  ASSIGN_OR_RETURN(client::ModelUpload upload,
                   MakeDenseModel(config.workload.dense, model_name_, config.workload.seed));
  description_["dense_model"] = {{"name", model_name_}, {"bytes", upload.tensor_bytes()}};
  const std::vector<std::string> servers = ServerAddresses(config.transport.targets);
  (void)channels;
  for (const std::string& address : servers) {
    client::ClientOptions options;
    options.default_timeout = std::max(config.run.timeout, absl::Minutes(10));
    options.connect_timeout = config.connect_timeout;
    options.tls = config.transport.tls;
    options.token = config.transport.token;
    absl::StatusOr<std::unique_ptr<client::Client>> connected =
        client::Client::Connect(address, options);
    if (!connected.ok()) {
      // A name may resolve to addresses nothing listens on (::1 of a server on 127.0.0.1):
      // round-robin skips those too.
      std::fprintf(stderr, "gpucompute-load: no model on %s: %s\n", address.c_str(),
                   connected.status().ToString().c_str());
      continue;
    }
    std::unique_ptr<client::Client> c = *std::move(connected);
    client::CallOptions call;
    if (!config.workload.client_id.empty()) {
      call.metadata.emplace_back("x-gpucompute-client", config.workload.client_id);
    }
    absl::StatusOr<client::LoadModelResult> loaded =
        c->LoadModel(upload, call, config.workload.chunk_bytes);
    if (!loaded.ok()) {
      return absl::Status(loaded.status().code(), absl::StrCat("LoadModel on ", address, ": ",
                                                               loaded.status().message()));
    }
    model_servers_.push_back(std::move(c));
  }
  if (model_servers_.empty()) {
    return absl::UnavailableError("no server to load the dense model on");
  }
  return absl::OkStatus();
}

PreparedRun::~PreparedRun() {
  region_.reset();
  resident_.reset();
  for (const auto& c : model_servers_) {
    absl::StatusOr<client::UnloadModelResult> r = c->UnloadModel(model_name_);
    if (!r.ok()) {
      std::fprintf(stderr, "gpucompute-load: UnloadModel %s on %s: %s\n", model_name_.c_str(),
                   c->target().c_str(), r.status().ToString().c_str());
    }
  }
}

absl::StatusOr<std::unique_ptr<PreparedRun>> PreparedRun::Create(
    const LoadConfig& config, const std::vector<LoadChannel>& channels,
    const v1::ServerInfoResponse& info) {
  const WorkloadConfig& w = config.workload;
  std::unique_ptr<PreparedRun> run(new PreparedRun());
  run->description_ = nlohmann::json::object();

  const bool placed = w.input != InputPlacement::kInline || w.output == OutputPlacement::kShm;
  if (placed) {
    const std::vector<std::string> servers = ServerAddresses(config.transport.targets);
    if (servers.size() != 1) {
      return absl::FailedPreconditionError(
          "--input handle|shm and --output shm need exactly one server: resident tensors and "
          "shared-memory regions belong to the server that received them");
    }
  }
  const bool uses_shm = w.input == InputPlacement::kShm || w.output == OutputPlacement::kShm;
  if (uses_shm && !info.shared_memory_enabled()) {
    return absl::FailedPreconditionError(
        "the server does not allow shared memory (run it with --allow_shared_memory, on this "
        "node)");
  }

  std::vector<Entry> entries;
  for (const MixEntry& m : w.mix) {
    if (m.weight <= 0) continue;
    Entry e;
    e.op = m.op;
    e.weight = m.weight;
    entries.push_back(std::move(e));
  }
  if (entries.empty()) return absl::InvalidArgumentError("nothing to send");

  for (const Entry& e : entries) {
    if (e.op != Op::kDense) continue;
    if (w.dense.model.empty()) {
      RETURN_IF_ERROR(run->LoadModel(config, channels));
    } else {
      run->model_name_ = w.dense.model;
      run->description_["dense_model"] = {{"name", w.dense.model}, {"loaded_by", "server"}};
    }
    break;
  }

  // Random requests: --variants of each op, fewer when they would pass the byte budget.
  const int64_t budget = kMaxPreparedBytes / static_cast<int64_t>(entries.size());
  nlohmann::json variants = nlohmann::json::object();
  for (size_t k = 0; k < entries.size(); ++k) {
    Entry& e = entries[k];
    for (int v = 0; v < w.variants; ++v) {
      const uint64_t seed = w.seed * 1000003ULL + k * 7919ULL + static_cast<uint64_t>(v);
      ASSIGN_OR_RETURN(v1::SubmitRequest request, MakeRequest(e.op, w, run->model_name_, seed));
      const int64_t bytes = InputTensorBytes(request);
      e.requests.push_back(std::move(request));
      e.payload_bytes.push_back(bytes);
      if (config.run.compare_echo && e.op != Op::kEcho) {
        e.echo_twins.push_back(MakeEchoRequest(bytes, false, seed ^ 0xec40ULL));
      }
      if (bytes * static_cast<int64_t>(e.requests.size()) >= budget) break;
    }
    variants[std::string(OpName(e.op))] = e.requests.size();
  }
  run->description_["variants"] = variants;

  // Every request that goes out, service and echo twins.
  std::vector<v1::SubmitRequest*> all;
  for (Entry& e : entries) {
    for (auto& r : e.requests) all.push_back(&r);
    for (auto& r : e.echo_twins) all.push_back(&r);
  }

  if (w.input == InputPlacement::kHandle) {
    run->resident_ = std::make_unique<ResidentInputs>(channels[0].channel, w.chunk_bytes,
                                                      w.client_id, config.run.timeout);
    for (v1::SubmitRequest* r : all) {
      absl::Status status;
      ForEachInputTensor(*r, [&](v1::Tensor& t) {
        if (status.ok()) status = run->resident_->Place(t);
      });
      RETURN_IF_ERROR(status);
    }
    run->description_["resident_tensors"] = run->resident_->tensors();
    run->description_["resident_bytes"] = run->resident_->bytes();
  }
  if (uses_shm) {
    const int64_t dense_row_bytes =
        w.dense.out_features * client::DTypeSize(w.dense.model_dtype);
    int64_t inputs = 0, outputs = 0;
    for (v1::SubmitRequest* r : all) {
      if (w.input == InputPlacement::kShm) inputs += RegionBytes(*r);
      outputs = std::max(outputs, OutputBytesBound(*r, dense_row_bytes));
    }
    if (w.output != OutputPlacement::kShm) outputs = 0;
    ASSIGN_OR_RETURN(run->region_,
                     SharedMemoryRegion::Create(channels[0].channel, inputs + outputs + 64,
                                                w.client_id, config.run.timeout));
    if (w.input == InputPlacement::kShm) {
      for (v1::SubmitRequest* r : all) {
        absl::Status status;
        ForEachInputTensor(*r, [&](v1::Tensor& t) {
          if (status.ok()) status = run->region_->Place(t);
        });
        RETURN_IF_ERROR(status);
      }
    }
    if (w.output == OutputPlacement::kShm) {
      // One output area that every request writes into: the load tester never reads outputs,
      // so concurrent requests may overwrite each other's.
      ASSIGN_OR_RETURN(v1::SharedMemoryRef area, run->region_->Allocate(outputs));
      v1::OutputPlacement placement;
      *placement.mutable_shared_memory() = area;
      for (v1::SubmitRequest* r : all) SetOutputPlacement(*r, placement);
    }
    run->description_["shm_region_bytes"] = run->region_->size();
  }
  if (w.output == OutputPlacement::kDiscard) {
    v1::OutputPlacement placement;
    placement.set_discard(true);
    for (v1::SubmitRequest* r : all) SetOutputPlacement(*r, placement);
  }

  // Serialize, freeing each typed request as it goes.
  std::vector<double> weights;
  std::vector<std::vector<int>> service_jobs, echo_jobs;
  Workload echo;
  for (Entry& e : entries) {
    weights.push_back(e.weight);
    std::vector<int> mine, twins;
    for (size_t v = 0; v < e.requests.size(); ++v) {
      mine.push_back(static_cast<int>(run->service_.jobs.size()));
      run->service_.jobs.push_back(Serialize(e.op, e.requests[v], e.payload_bytes[v]));
      v1::SubmitRequest().Swap(&e.requests[v]);
      if (!config.run.compare_echo) continue;
      twins.push_back(static_cast<int>(echo.jobs.size()));
      if (e.op == Op::kEcho) {
        echo.jobs.push_back(run->service_.jobs.back());  // shares the serialized bytes
      } else {
        echo.jobs.push_back(Serialize(Op::kEcho, e.echo_twins[v], e.payload_bytes[v]));
        v1::SubmitRequest().Swap(&e.echo_twins[v]);
      }
    }
    service_jobs.push_back(std::move(mine));
    echo_jobs.push_back(std::move(twins));
    run->service_.entry_ops.push_back(e.op);
    echo.entry_ops.push_back(Op::kEcho);
  }
  run->service_.name = entries.size() == 1 ? std::string(OpName(entries[0].op)) : "mix";
  if (entries.size() == 1 && entries[0].op == Op::kEcho) {
    run->service_.split = std::max(1, w.echo.split);
    echo.split = run->service_.split;  // its twin is itself
  }
  run->service_.picker = JobPicker(weights, std::move(service_jobs));
  if (config.run.compare_echo) {
    echo.name = "echo";
    echo.picker = JobPicker(weights, std::move(echo_jobs));
    run->echo_ = std::move(echo);
  }
  int64_t prepared = 0;
  for (const Job& j : run->service_.jobs) prepared += j.size.request_bytes;
  run->description_["prepared_request_bytes"] = prepared;
  return run;
}

}  // namespace gpucompute::load
