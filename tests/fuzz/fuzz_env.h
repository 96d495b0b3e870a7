// What the fuzz targets decode against, built once per process: the server's default limits, a
// tensor store holding a few resident tensors of the fuzzing client, a registered shared-memory
// region and a model registry with two small CPU models.
//
// Resident handles are random (unguessable by design), so a request names them as "h0".."h9":
// MapHandles rewrites those to the real handles of resident tensor (digit mod count) before
// decoding; any other handle stays as it is and is NOT_FOUND.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "google/protobuf/message.h"
#include "gpucompute/v1/compute.pb.h"
#include "server/runtime/memory_budget.h"
#include "server/runtime/model_registry.h"
#include "server/runtime/shared_memory.h"
#include "server/runtime/tensor_store.h"
#include "server/service/limits.h"
#include "server/service/tensor_codec.h"

namespace gpucompute::fuzz {

inline constexpr char kClient[] = "fuzz";
inline constexpr char kRegion[] = "r";            // the registered region's name
inline constexpr int64_t kRegionBytes = 64 << 10;

struct Env {
  ServiceLimits limits;  // the server's defaults (limits.h, main.cc's flags)
  std::unique_ptr<TensorStore> store;
  std::unique_ptr<SharedMemoryRegistry> shared_memory;
  std::unique_ptr<ModelRegistry> models;
  std::unique_ptr<MemoryBudget> memory;  // the server's default budget; every lease given back
  std::vector<std::string> handles;  // h0, h1, ... in order

  TensorContext Context() const {
    return TensorContext{store.get(), shared_memory.get(), kClient, memory.get()};
  }
};

// The process's environment (created on first use; aborts if it cannot be built).
Env& GetEnv();

// Rewrites every gpucompute.v1.Tensor.handle "h<digit>" in `message` (recursively).
void MapHandles(const Env& env, google::protobuf::Message* message);

// Aborts with "FINDING: <what>" and the request (a protobuf message named `request` in scope)
// unless `cond` holds: a handled request that broke its own contract.
#define FUZZ_CHECK(cond, what)                                                        \
  do {                                                                                \
    if (!(cond)) {                                                                    \
      std::fprintf(stderr, "FINDING: %s (%s) for %s\n", what, #cond,                  \
                   request.ShortDebugString().substr(0, 4000).c_str());               \
      std::abort();                                                                   \
    }                                                                                 \
  } while (0)

// Aborts unless every lease of the memory budget came back once an input was handled.
void CheckNoLeaseLeft(const Env& env);

// What a target does with each operation's request of a SubmitRequest.
struct SubmitHandlers {
  std::function<void(const v1::PeriodogramRequest&)> periodogram;
  std::function<void(const v1::DenseRequest&)> dense;
  std::function<void(const v1::AssimilateRequest&)> assimilate;
  std::function<void(const v1::EchoRequest&)> echo;
};

// The entry of a target whose input is a SubmitRequest: parses `data` (-1, not kept in the
// corpus, when it does not parse), maps its handles, hands the job to its handler, then checks
// that no lease is left.
int FuzzSubmitRequest(const uint8_t* data, size_t size, const SubmitHandlers& handlers);

// Aborts, printing `status` and `what`, unless `status` is OK or one of the codes bad input may
// get: INVALID_ARGUMENT, RESOURCE_EXHAUSTED, NOT_FOUND, FAILED_PRECONDITION. Anything else
// (INTERNAL, UNKNOWN, ...) means the server blamed itself for a client's bytes. With
// GPUCOMPUTE_FUZZ_VERBOSE set, prints every status (to check seeds, or replay a finding).
void CheckStatus(const absl::Status& status, const google::protobuf::Message& what);

}  // namespace gpucompute::fuzz
