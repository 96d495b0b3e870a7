// The `gpucompute` CLI's subcommands. Each returns the process exit code: 0 on success, 1 when
// a call or a file fails (the reason is printed to stderr).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gpucompute::cli {

struct GlobalOptions {
  std::string target = "localhost:50051";
  double timeout_s = 60;  // deadline of every call, seconds
  // Security (docs/security.md "Clients"): TLS when a file is given, mutual TLS with cert and key.
  std::string tls_ca_file, tls_cert_file, tls_key_file, tls_server_name;
  std::string token_file;  // the bearer token alone; empty: $GPUCOMPUTE_TOKEN, if set
};

// `gpucompute health`: grpc.health.v1 Check; exit 0 iff SERVING.
struct HealthOptions {
  std::string address;  // empty: --target
  std::string service;  // empty: the server as a whole
  int timeout_ms = 3000;
};

struct PeriodogramOptions {
  std::vector<std::string> files;
  bool dy_column = false;  // a third column is required (it is read whenever there)
  bool ignore_dy = false;  // a third column is left out
  // Uniform grid from a range: all three or none.
  std::optional<double> fmin, fmax;
  std::optional<int64_t> nf;
  // Explicit grid.
  std::string frequencies_file;
  // Automatic grid (the default).
  std::optional<double> samples_per_peak, nyquist_factor, minimum_frequency, maximum_frequency;
  std::string normalization = "standard";
  std::string dtype = "float64";
  bool no_fit_mean = false;
  bool no_center_data = false;
  std::string method = "auto";            // auto | direct | fast
  int nterms = 1;
  int top_k = 0;
  std::string false_alarm;                // empty: none; baluev | davies | naive | bootstrap
  std::vector<double> false_alarm_levels;  // probabilities whose levels are wanted
  int bootstraps = 0;                     // 0: the server's default (1000)
  uint64_t seed = 0;
  bool model = false;                     // best-fit model parameters at each peak
  bool no_power = false;                  // output_placement.discard: peaks and analyses only
  std::string output;  // empty: stdout
  std::string format;  // csv | json; empty: json when output ends in .json, else csv
};

struct InfoOptions {
  bool json = false;
};

struct DemoOptions {
  int burst = 32;  // concurrent requests of the burst
  unsigned seed = 20240611;
  bool skip_dense = false;  // leave out the dense-model section
  bool skip_assimilate = false;  // leave out the assimilation section
};

// `gpucompute model load NAME --manifest FILE`.
struct ModelLoadOptions {
  std::string name;
  std::string manifest;
  std::string dtype;        // bfloat16 | float16 | float32; empty: the manifest's, else bfloat16
  bool allow_tf32 = false;  // float32 models: TF32 tensor cores (or the manifest's allow_tf32)
  std::string wire_dtype = "float32";  // dtype the weights travel in (float16/bfloat16 halve it)
  double chunk_mib = 4;     // MiB of tensor bytes per streamed message (at most; see client.h)
};

struct ModelUnloadOptions {
  std::string name;
};

struct ModelListOptions {
  bool json = false;
};

// `gpucompute dense NAME --input x.npy [--output y.npy]`.
struct DenseOptions {
  std::string model;
  std::string input;   // .npy, [rows, in_features] or 1-D (one row); float16/32/64
  std::string output;  // .npy; empty: CSV on stdout
};

// `gpucompute assimilate --x X.npy --hx HX.npy --y y.npy --obs-error r.npy -o Xa.npy`.
struct AssimilateOptions {
  std::string x, hx, y, obs_error;  // .npy: [n, N], [m, N], [m], [m] variances or [m, m]
  std::string perturbations;        // enkf: .npy [m, N], used as given
  std::optional<uint64_t> seed;     // enkf without perturbations (default: random)
  std::string method = "etkf";
  double inflation = 1.0;
  std::optional<double> rtpp, rtps;
  std::string form = "auto";
  std::string dtype = "float64";
  std::string output;
  // letkf: coordinates .npy [n, d] (or [n]) and [m, d] (or [m]), the localisation.
  std::string state_coords, obs_coords;
  double radius = 0;
  std::string taper = "gaspari_cohn", metric = "euclidean";
  std::vector<double> domain;
  double earth_radius = 0;  // required by the great circle (no unit is assumed), as in Python
};

int RunAssimilate(const GlobalOptions& global, const AssimilateOptions& options);

int RunModelLoad(const GlobalOptions& global, const ModelLoadOptions& options);
int RunModelUnload(const GlobalOptions& global, const ModelUnloadOptions& options);
int RunModelList(const GlobalOptions& global, const ModelListOptions& options);
int RunDense(const GlobalOptions& global, const DenseOptions& options);

int RunPeriodogram(const GlobalOptions& global, const PeriodogramOptions& options);
int RunInfo(const GlobalOptions& global, const InfoOptions& options);
int RunHealth(const GlobalOptions& global, const HealthOptions& options);
int RunDemo(const GlobalOptions& global, const DemoOptions& options);

}  // namespace gpucompute::cli
