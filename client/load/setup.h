// Everything made before the timed run and undone after it: the dense model on every server,
// the random requests (and their Echo twins for --compare-echo), inputs uploaded as resident
// tensors or copied into a shared-memory region, all serialized into Workloads.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/cpp/client.h"
#include "client/load/channels.h"
#include "client/load/config.h"
#include "client/load/placement.h"
#include "client/load/workload.h"
#include "nlohmann/json.hpp"

namespace gpucompute::load {

class PreparedRun {
 public:
  // `info` is the ServerInfo of the first channel's server.
  static absl::StatusOr<std::unique_ptr<PreparedRun>> Create(
      const LoadConfig& config, const std::vector<LoadChannel>& channels,
      const v1::ServerInfoResponse& info);
  PreparedRun(const PreparedRun&) = delete;
  PreparedRun& operator=(const PreparedRun&) = delete;
  // Frees the region and resident tensors, unloads the model (errors are printed).
  ~PreparedRun();

  const Workload& service() const { return service_; }
  const Workload* echo() const { return echo_ ? &*echo_ : nullptr; }
  // What was prepared, for the reports: model, variants, bytes.
  const nlohmann::json& description() const { return description_; }

 private:
  PreparedRun() = default;

  absl::Status LoadModel(const LoadConfig& config, const std::vector<LoadChannel>& channels);

  std::string model_name_;
  std::vector<std::unique_ptr<client::Client>> model_servers_;  // where the model is loaded
  std::unique_ptr<ResidentInputs> resident_;
  std::unique_ptr<SharedMemoryRegion> region_;
  Workload service_;
  std::optional<Workload> echo_;
  nlohmann::json description_;
};

}  // namespace gpucompute::load
