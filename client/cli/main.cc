// gpucompute: command-line client of the gpucompute service (periodogram, model, dense,
// assimilate, info, health, demo).
#include <cstdint>
#include <string>

#include "CLI/CLI.hpp"
#include "client/cli/commands.h"

namespace gpucompute::cli {
namespace {

// Options every command takes, before or after its name.
void AddGlobalOptions(CLI::App& app, GlobalOptions& global) {
  app.add_option("--target", global.target, "server address host:port")
      ->capture_default_str()
      ->envname("GPUCOMPUTE_TARGET");
  app.add_option("--timeout", global.timeout_s, "deadline of each call, seconds")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--tls_ca_file,--tls-ca-file", global.tls_ca_file,
                 "CA certificates (PEM) the server's certificate must chain to: TLS")
      ->check(CLI::ExistingFile);
  auto* client_cert = app.add_option("--tls_cert_file,--tls-cert-file", global.tls_cert_file,
                                     "client certificate (PEM) for mutual TLS")
                          ->check(CLI::ExistingFile);
  auto* client_key = app.add_option("--tls_key_file,--tls-key-file", global.tls_key_file,
                                    "private key (PEM) of --tls_cert_file")
                         ->check(CLI::ExistingFile);
  client_cert->needs(client_key);
  client_key->needs(client_cert);
  app.add_option("--tls_server_name,--tls-server-name", global.tls_server_name,
                 "name the server's certificate must have (default: --target's host)");
  app.add_option("--token_file,--token-file", global.token_file,
                 "file holding the bearer token (default: $GPUCOMPUTE_TOKEN)")
      ->check(CLI::ExistingFile);
}

CLI::App* AddPeriodogramCommand(CLI::App& app, PeriodogramOptions& p) {
  CLI::App* periodogram = app.add_subcommand(
      "periodogram",
      "Lomb-Scargle periodograms of time series files (CSV t,y[,dy] or .npy (N,2|3)), all in "
      "one batched request");
  periodogram->add_option("files", p.files, "input files")->required()->check(CLI::ExistingFile);
  auto* dy_required = periodogram->add_flag(
      "--dy-column", p.dy_column,
      "require a third column (measurement errors dy; it is read whenever a file has one)");
  periodogram->add_flag("--ignore-dy", p.ignore_dy, "leave out a third column: unweighted")
      ->excludes(dy_required);
  auto* grid_group = periodogram->add_option_group("uniform grid", "f_k = fmin .. fmax, nf values");
  auto* fmin = grid_group->add_option("--fmin", p.fmin, "lowest frequency (cycles per unit t)");
  auto* fmax = grid_group->add_option("--fmax", p.fmax, "highest frequency");
  auto* nf = grid_group->add_option("--nf", p.nf, "number of frequencies")->check(CLI::PositiveNumber);
  fmin->needs(fmax)->needs(nf);
  fmax->needs(fmin)->needs(nf);
  nf->needs(fmin)->needs(fmax);
  auto* freq_file = periodogram
                        ->add_option("--frequencies", p.frequencies_file,
                                     "explicit frequency list (text or 1-D .npy)")
                        ->check(CLI::ExistingFile);
  auto* auto_group = periodogram->add_option_group(
      "automatic grid", "Astropy autofrequency (the default grid)");
  auto* spp = auto_group->add_option("--samples-per-peak", p.samples_per_peak, "default 5");
  auto* nyq = auto_group->add_option("--nyquist-factor", p.nyquist_factor, "default 5");
  auto* minf = auto_group->add_option("--minimum-frequency", p.minimum_frequency);
  auto* maxf = auto_group->add_option("--maximum-frequency", p.maximum_frequency);
  for (CLI::Option* uniform : {fmin, fmax, nf}) {
    uniform->excludes(freq_file);
    for (CLI::Option* a : {spp, nyq, minf, maxf}) uniform->excludes(a);
  }
  for (CLI::Option* a : {spp, nyq, minf, maxf}) freq_file->excludes(a);
  periodogram->add_option("--normalization", p.normalization)
      ->check(CLI::IsMember({"standard", "model", "log", "psd"}))
      ->capture_default_str();
  periodogram->add_option("--dtype", p.dtype, "compute and output precision")
      ->check(CLI::IsMember({"float32", "float64"}))
      ->capture_default_str();
  periodogram->add_flag("--no-fit-mean", p.no_fit_mean, "do not fit a floating mean");
  periodogram->add_flag("--no-center-data", p.no_center_data, "do not centre y first");
  periodogram->add_option("--method", p.method, "direct sum, fast (NUFFT, uniform grids) or auto")
      ->check(CLI::IsMember({"auto", "direct", "fast"}))
      ->capture_default_str();
  periodogram->add_option("--nterms", p.nterms, "Fourier terms of the model (Astropy's nterms)")
      ->check(CLI::Range(1, 8))
      ->capture_default_str();
  periodogram->add_option("--top-k", p.top_k, "report the k highest local maxima per series")
      ->check(CLI::Range(0, 10000));
  periodogram->add_flag("--no-power", p.no_power,
                        "the server returns no power arrays: peaks, false alarms and models only "
                        "(CSV then lists each series' peak)");
  periodogram->add_option("--false-alarm", p.false_alarm,
                          "false-alarm probability of each peak by this method")
      ->check(CLI::IsMember({"baluev", "davies", "naive", "bootstrap"}));
  periodogram->add_option("--false-alarm-level", p.false_alarm_levels,
                          "power level at this false-alarm probability (repeatable)");
  periodogram->add_option("--bootstraps", p.bootstraps, "bootstrap resamplings (default 1000)")
      ->check(CLI::Range(1, 1 << 20));
  periodogram->add_option("--seed", p.seed, "bootstrap random seed");
  periodogram->add_flag("--model", p.model, "best-fit model parameters at each peak");
  periodogram->add_option("-o,--output", p.output, "write here instead of stdout");
  periodogram->add_option("--format", p.format, "csv or json (default: from --output's suffix)")
      ->check(CLI::IsMember({"csv", "json"}));
  return periodogram;
}

struct ModelCommands {
  CLI::App* load;
  CLI::App* unload;
  CLI::App* list;
};

ModelCommands AddModelCommands(CLI::App& app, ModelLoadOptions& load, ModelUnloadOptions& unload,
                               ModelListOptions& list) {
  CLI::App* model = app.add_subcommand("model", "resident dense models: load, unload, list");
  model->require_subcommand(1);
  CLI::App* load_cmd = model->add_subcommand(
      "load", "upload a dense model described by a JSON manifest of .npy files");
  load_cmd->add_option("name", load.name, "model name (1-128 of [A-Za-z0-9_.-])")->required();
  load_cmd
      ->add_option("--manifest", load.manifest,
                   "JSON: {\"layers\": [{\"weight\": \"w0.npy\", \"bias\": \"b0.npy\", "
                   "\"layernorm\": true, \"activation\": \"gelu_tanh\"}, ...]}; paths relative "
                   "to it")
      ->required()
      ->check(CLI::ExistingFile);
  load_cmd
      ->add_option("--dtype", load.dtype,
                   "storage and compute dtype (default: the manifest's \"dtype\", else bfloat16)")
      ->check(CLI::IsMember({"bfloat16", "float16", "float32"}));
  load_cmd->add_flag("--allow_tf32,--allow-tf32", load.allow_tf32,
                     "float32 models: allow TF32 tensor cores in the matrix products");
  load_cmd
      ->add_option("--wire-dtype,--wire_dtype", load.wire_dtype,
                   "dtype the weights are uploaded in; float16/bfloat16 halve the bytes")
      ->check(CLI::IsMember({"float32", "float16", "bfloat16"}))
      ->capture_default_str();
  load_cmd
      ->add_option("--chunk-mib,--chunk_mib", load.chunk_mib,
                   "MiB of weights per streamed message (4: just under gRPC's 4 MiB limit)")
      ->capture_default_str();
  CLI::App* unload_cmd = model->add_subcommand("unload", "remove a resident model");
  unload_cmd->add_option("name", unload.name, "model name")->required();
  CLI::App* list_cmd = model->add_subcommand("list", "list resident models");
  list_cmd->add_flag("--json", list.json, "print as JSON");
  return {load_cmd, unload_cmd, list_cmd};
}

CLI::App* AddDenseCommand(CLI::App& app, DenseOptions& dense) {
  CLI::App* dense_cmd = app.add_subcommand(
      "dense", "run rows of a .npy file through a resident model");
  dense_cmd->add_option("model", dense.model, "model name")->required();
  dense_cmd
      ->add_option("-i,--input", dense.input,
                   ".npy of [rows, in_features] (or 1-D: one row), float16/32/64")
      ->required()
      ->check(CLI::ExistingFile);
  dense_cmd->add_option("-o,--output", dense.output,
                        ".npy to write (bfloat16 results as float32); default: CSV on stdout");
  return dense_cmd;
}

CLI::App* AddAssimilateCommand(CLI::App& app, AssimilateOptions& as) {
  CLI::App* assimilate_cmd = app.add_subcommand(
      "assimilate", "one ensemble Kalman analysis (ETKF, stochastic EnKF or LETKF) from .npy files");
  assimilate_cmd->add_option("--x", as.x, "forecast ensemble [n, N] (state x members)")
      ->required()->check(CLI::ExistingFile);
  assimilate_cmd->add_option("--hx", as.hx, "ensemble in observation space [m, N]")
      ->required()->check(CLI::ExistingFile);
  assimilate_cmd->add_option("--y", as.y, "observations [m]")->required()->check(CLI::ExistingFile);
  assimilate_cmd->add_option("--obs-error,--obs_error", as.obs_error,
                             "observation-error variances [m] or covariance [m, m]")
      ->required()->check(CLI::ExistingFile);
  assimilate_cmd->add_option("--method", as.method, "etkf, enkf (perturbed observations) or letkf (local)")
      ->check(CLI::IsMember({"etkf", "enkf", "letkf"}))->capture_default_str();
  assimilate_cmd->add_option("--state-coords,--state_coords", as.state_coords,
                             "letkf: coordinates of the state variables [n, d] (or [n])")
      ->check(CLI::ExistingFile);
  assimilate_cmd->add_option("--obs-coords,--obs_coords", as.obs_coords,
                             "letkf: coordinates of the observations [m, d] (or [m])")
      ->check(CLI::ExistingFile);
  assimilate_cmd->add_option("--radius", as.radius, "letkf: localisation radius (DAPPER's loc_rad)");
  assimilate_cmd->add_option("--taper", as.taper, "letkf: gaspari_cohn, gaussian or step")
      ->check(CLI::IsMember({"gaspari_cohn", "gaussian", "step"}))->capture_default_str();
  assimilate_cmd->add_option("--metric", as.metric, "letkf: euclidean, periodic or great_circle")
      ->check(CLI::IsMember({"euclidean", "periodic", "great_circle"}))->capture_default_str();
  assimilate_cmd->add_option("--domain", as.domain, "letkf, periodic: the length of each axis")
      ->delimiter(',');
  assimilate_cmd->add_option("--earth-radius,--earth_radius", as.earth_radius,
                             "letkf, great_circle (required): the sphere's radius, in radius's unit (6371 for km)");
  auto* pert = assimilate_cmd->add_option("--perturbations", as.perturbations,
                                          "enkf: observation perturbations [m, N], used as given")
                   ->check(CLI::ExistingFile);
  auto* seed = assimilate_cmd->add_option("--seed", as.seed,
                                          "enkf: the server draws the perturbations from this seed");
  pert->excludes(seed);
  assimilate_cmd->add_option("--inflation", as.inflation,
                             "multiplicative inflation of the forecast anomalies")
      ->capture_default_str();
  auto* rtpp = assimilate_cmd->add_option("--rtpp", as.rtpp, "relaxation to prior perturbations");
  auto* rtps = assimilate_cmd->add_option("--rtps", as.rtps, "relaxation to prior spread");
  rtpp->excludes(rtps);
  assimilate_cmd->add_option("--form", as.form)
      ->check(CLI::IsMember({"auto", "observation_space", "ensemble_space"}))->capture_default_str();
  assimilate_cmd->add_option("--dtype", as.dtype, "compute and output precision")
      ->check(CLI::IsMember({"float32", "float64"}))->capture_default_str();
  assimilate_cmd->add_option("-o,--output", as.output, "analysis ensemble .npy [n, N]")->required();
  return assimilate_cmd;
}

CLI::App* AddInfoCommand(CLI::App& app, InfoOptions& info) {
  CLI::App* info_cmd = app.add_subcommand("info", "print the server's ServerInfo");
  info_cmd->add_flag("--json", info.json, "print as JSON");
  return info_cmd;
}

CLI::App* AddHealthCommand(CLI::App& app, HealthOptions& health) {
  CLI::App* health_cmd = app.add_subcommand(
      "health", "grpc.health.v1 Check (no token needed); prints the status, exit 0 iff SERVING");
  health_cmd->add_option("--address", health.address,
                         "host:port to check, e.g. the server's --health_port (default: --target)");
  health_cmd->add_option("--service", health.service,
                         "service to ask about, e.g. gpucompute.v1.Compute (default: the server)");
  health_cmd->add_option("--timeout_ms,--timeout-ms", health.timeout_ms, "deadline of the check")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  return health_cmd;
}

CLI::App* AddDemoCommand(CLI::App& app, DemoOptions& demo) {
  CLI::App* demo_cmd = app.add_subcommand(
      "demo", "run every operation on generated data with known answers; exit 0 iff all pass");
  demo_cmd->add_option("--burst", demo.burst, "concurrent requests in the burst")
      ->capture_default_str()
      ->check(CLI::Range(1, 4096));
  demo_cmd->add_option("--seed", demo.seed, "random seed")->capture_default_str();
  demo_cmd->add_flag("--skip-dense", demo.skip_dense, "leave out the dense-model section");
  demo_cmd->add_flag("--skip-assimilate", demo.skip_assimilate, "leave out the assimilation section");
  return demo_cmd;
}

}  // namespace

// Registers every command, parses, runs the one given.
int Main(int argc, char** argv) {
  CLI::App app{"gpucompute: client of the gpucompute GPU compute service"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "gpucompute " GPUCOMPUTE_VERSION);
  // The options below are accepted after the subcommand too (`gpucompute info --target HOST`).
  app.fallthrough();
  GlobalOptions global;
  AddGlobalOptions(app, global);
  PeriodogramOptions p;
  CLI::App* periodogram = AddPeriodogramCommand(app, p);
  ModelLoadOptions load;
  ModelUnloadOptions unload;
  ModelListOptions list;
  const ModelCommands model = AddModelCommands(app, load, unload, list);
  DenseOptions dense;
  CLI::App* dense_cmd = AddDenseCommand(app, dense);
  AssimilateOptions as;
  CLI::App* assimilate_cmd = AddAssimilateCommand(app, as);
  InfoOptions info;
  CLI::App* info_cmd = AddInfoCommand(app, info);
  HealthOptions health;
  CLI::App* health_cmd = AddHealthCommand(app, health);
  DemoOptions demo;
  CLI::App* demo_cmd = AddDemoCommand(app, demo);

  CLI11_PARSE(app, argc, argv);

  if (periodogram->parsed()) return RunPeriodogram(global, p);
  if (model.load->parsed()) return RunModelLoad(global, load);
  if (model.unload->parsed()) return RunModelUnload(global, unload);
  if (model.list->parsed()) return RunModelList(global, list);
  if (dense_cmd->parsed()) return RunDense(global, dense);
  if (assimilate_cmd->parsed()) return RunAssimilate(global, as);
  if (info_cmd->parsed()) return RunInfo(global, info);
  if (health_cmd->parsed()) return RunHealth(global, health);
  if (demo_cmd->parsed()) return RunDemo(global, demo);
  return 2;
}

}  // namespace gpucompute::cli

int main(int argc, char** argv) { return gpucompute::cli::Main(argc, argv); }
