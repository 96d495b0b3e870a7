// Integration test of the C++ client and the `gpucompute` CLI against the real server binary
// (CPU backend) on a loopback port. Each test starts its own server and, at the end, stops it
// with SIGTERM and expects exit status 0.
//
// GPUCOMPUTE_SERVER_BIN and GPUCOMPUTE_CLI_BIN are compile definitions (tests/client/CMakeLists).
#include <cmath>
#include <fstream>
#include <memory>
#include <numbers>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "client/cli/npy.h"
#include "client/cpp/client.h"
#include "client/cpp/periodogram_request_builder.h"
#include "client/cpp/tensor_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/client/client_server_fixture.h"

namespace gpucompute {
namespace {

using ::testing::HasSubstr;
using test::ProcessResult;
using test::RunProcess;
using ::testing::Not;

struct Series {
  std::vector<double> t, y, dy;
};

// n uneven samples over [t0, t0 + baseline] of sin(2 pi f t) plus noise of `sigma`.
Series MakeSeries(int n, double f, double baseline, unsigned seed, double sigma = 0.3,
                  double t0 = 100.0) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> unit(0, 1);
  std::normal_distribution<double> normal(0, 1);
  Series s;
  for (int i = 0; i < n; ++i) s.t.push_back(t0 + baseline * unit(rng));
  std::sort(s.t.begin(), s.t.end());
  for (double t : s.t) {
    s.y.push_back(2.0 + std::sin(2 * std::numbers::pi * f * t) + sigma * normal(rng));
    s.dy.push_back(sigma);
  }
  return s;
}

class ClientIntegrationTest : public test::ClientServerTest {
 protected:
  void SetUp() override { StartServer("gpucompute-client-it"); }

  std::string WriteFile(const std::string& name, const std::string& contents) {
    const std::string path = PathIn(name);
    std::ofstream(path, std::ios::binary) << contents;
    return path;
  }
};

// Parses the CLI's CSV output: rows of (series, frequency, power).
struct CsvRow {
  int series;
  double frequency, power;
};
std::vector<CsvRow> ParseCsvOutput(const std::string& text) {
  std::vector<CsvRow> rows;
  bool header = true;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    if (header) {
      EXPECT_EQ(line, "series,frequency,power");
      header = false;
      continue;
    }
    std::vector<absl::string_view> f = absl::StrSplit(line, ',');
    CsvRow row{};
    EXPECT_EQ(f.size(), 3u) << line;
    if (f.size() != 3 || !absl::SimpleAtoi(f[0], &row.series) ||
        !absl::SimpleAtod(f[1], &row.frequency) || !absl::SimpleAtod(f[2], &row.power)) {
      ADD_FAILURE() << "bad CSV line: " << line;
      continue;
    }
    rows.push_back(row);
  }
  return rows;
}

TEST_F(ClientIntegrationTest, PeriodogramFindsInjectedFrequency) {
  const double kF[] = {1.7, 0.43, 3.05};
  const Series a = MakeSeries(400, kF[0], 30, 1);
  const Series b = MakeSeries(150, kF[1], 50, 2);
  const Series c = MakeSeries(1000, kF[2], 20, 3);
  for (v1::DType dtype : {v1::FLOAT64, v1::FLOAT32}) {
    client::PeriodogramRequestBuilder builder;
    builder.AddSeries(a.t, a.y, a.dy).AddSeries(b.t, b.y).AddSeries(c.t, c.y, c.dy);
    builder.SetGrid(client::AutoGrid({.samples_per_peak = 10})).SetDType(dtype);
    absl::StatusOr<v1::PeriodogramRequest> request = builder.Build();
    ASSERT_TRUE(request.ok()) << request.status();
    absl::StatusOr<client::PeriodogramResult> r = client_->PeriodogramAsync(*request).get();
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_EQ(r->response.results_size(), 3);
    for (int s = 0; s < 3; ++s) {
      const v1::SeriesResult& res = r->response.results(s);
      SCOPED_TRACE(testing::Message() << "dtype " << dtype << " series " << s);
      EXPECT_EQ(res.power().dtype(), dtype);
      ASSERT_TRUE(res.has_grid());
      absl::StatusOr<client::DecodedSeriesResult> d = client::DecodeSeriesResult(res);
      ASSERT_TRUE(d.ok()) << d.status();
      EXPECT_NEAR(res.peak_frequency(), kF[s], res.grid().df());
      ASSERT_GE(res.peak_index(), 0);
      ASSERT_LT(res.peak_index(), static_cast<int64_t>(d->power.size()));
      EXPECT_NEAR(d->frequency[res.peak_index()], res.peak_frequency(), 1e-9 * kF[s]);
      EXPECT_EQ(d->power[res.peak_index()], static_cast<double>(
                                                dtype == v1::FLOAT32
                                                    ? static_cast<float>(res.peak_power())
                                                    : res.peak_power()));
      for (double p : d->power) EXPECT_LE(p, res.peak_power() * (1 + 1e-6));
      EXPECT_GT(res.peak_power(), 0.3);  // a clear detection (standard normalisation <= 1)
      EXPECT_LE(res.peak_power(), 1.0 + 1e-6);
    }
    EXPECT_TRUE(r->timings.queue_us.has_value());
    EXPECT_TRUE(r->timings.compute_us.has_value());
    EXPECT_TRUE(r->timings.total_us.has_value());
    ASSERT_TRUE(r->timings.decode_us.has_value());
    EXPECT_LE(*r->timings.decode_us, *r->timings.total_us);
    EXPECT_TRUE(r->timings.batch_requests.has_value());
    EXPECT_GE(r->timings.batch_requests.value_or(0), 1);
  }
}

TEST_F(ClientIntegrationTest, ExplicitAndUniformGrids) {
  const Series s = MakeSeries(300, 2.0, 25, 7);
  std::vector<double> frequencies;
  for (int k = 0; k < 400; ++k) frequencies.push_back(0.5 + 0.01 * k);
  client::PeriodogramRequestBuilder builder;
  builder.AddSeries(s.t, s.y)
      .AddSeries(s.t, s.y, {}, client::UniformGrid(1.0, 0.005, 300))
      .SetGrid(client::ExplicitGrid(frequencies));
  absl::StatusOr<client::PeriodogramResult> r = client_->Periodogram(*builder.Build());
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->response.results_size(), 2);
  absl::StatusOr<client::DecodedSeriesResult> e =
      client::DecodeSeriesResult(r->response.results(0), frequencies);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->power.size(), frequencies.size());
  EXPECT_NEAR(e->peak_frequency, 2.0, 0.01);
  const v1::SeriesResult& u = r->response.results(1);
  ASSERT_TRUE(u.has_grid());
  EXPECT_EQ(u.grid().n(), 300);
  EXPECT_NEAR(u.peak_frequency(), 2.0, 0.005);
}

TEST_F(ClientIntegrationTest, ServerInfo) {
  absl::StatusOr<client::ServerInfoResult> info = client_->ServerInfo();
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->info.backend(), "cpu");
  EXPECT_FALSE(info->info.version().empty());
  EXPECT_GT(info->info.limits().max_series_per_request(), 0);
  EXPECT_GT(info->info.limits().max_samples_per_series(), 0);
  EXPECT_GT(info->info.limits().max_batch_size(), 0);
}

TEST_F(ClientIntegrationTest, InvalidRequestsAreInvalidArgument) {
  const std::vector<double> t = {0, 1, 2, 3}, y3 = {1, 2, 3};
  struct Case {
    std::string name;
    v1::PeriodogramRequest request;
    std::string field;  // the message must name it
  };
  std::vector<Case> cases;
  {
    v1::PeriodogramRequest r;  // t and y of different lengths
    v1::Series* s = r.add_series();
    *s->mutable_t() = client::MakeTensor(t);
    *s->mutable_y() = client::MakeTensor(y3);
    cases.push_back({"length mismatch", r, "series[0]"});
  }
  {
    v1::PeriodogramRequest r;  // payload shorter than the shape says
    v1::Series* s = r.add_series();
    *s->mutable_t() = client::MakeTensor(t);
    *s->mutable_y() = client::MakeTensor(t);
    s->mutable_y()->mutable_data()->resize(7);
    cases.push_back({"short payload", r, "series[0].y"});
  }
  {
    v1::PeriodogramRequest r = *client::PeriodogramRequestBuilder().AddSeries(t, t).Build();
    r.set_dtype(v1::INT32);
    cases.push_back({"dtype", r, "dtype"});
  }
  {
    v1::PeriodogramRequest r = *client::PeriodogramRequestBuilder().AddSeries(t, t).Build();
    *r.mutable_frequency() = client::UniformGrid(1.0, -0.1, 10);
    cases.push_back({"negative df", r, "df"});
  }
  for (const Case& c : cases) {
    absl::StatusOr<client::PeriodogramResult> r = client_->Periodogram(c.request);
    ASSERT_FALSE(r.ok()) << c.name;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << c.name << ": " << r.status();
    EXPECT_THAT(std::string(r.status().message()), HasSubstr(c.field)) << c.name;
  }
  // The server is still healthy.
  EXPECT_TRUE(client_->ServerInfo().ok());
}

TEST_F(ClientIntegrationTest, DeadlineIsEnforced) {
  const Series s = MakeSeries(2000, 1.0, 100, 11);
  client::CallOptions options;
  options.timeout = absl::Microseconds(1);
  absl::StatusOr<client::PeriodogramResult> r = client_->Periodogram(
      *client::PeriodogramRequestBuilder().AddSeries(s.t, s.y).Build(), options);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded) << r.status();
}

TEST_F(ClientIntegrationTest, ConcurrentAsyncCalls) {
  std::vector<Series> series;
  std::vector<std::future<absl::StatusOr<client::PeriodogramResult>>> futures;
  for (int i = 0; i < 32; ++i) {
    series.push_back(MakeSeries(200, 0.5 + 0.1 * i, 40, 100 + i));
    futures.push_back(client_->PeriodogramAsync(
        *client::PeriodogramRequestBuilder().AddSeries(series[i].t, series[i].y).Build()));
  }
  for (int i = 0; i < 32; ++i) {
    absl::StatusOr<client::PeriodogramResult> r = futures[i].get();
    ASSERT_TRUE(r.ok()) << i << ": " << r.status();
    const v1::SeriesResult& res = r->response.results(0);
    EXPECT_NEAR(res.peak_frequency(), 0.5 + 0.1 * i, res.grid().df()) << i;
  }
  absl::StatusOr<client::ServerInfoResult> info = client_->ServerInfo();
  ASSERT_TRUE(info.ok());
  EXPECT_GE(info->info.periodogram_batching().requests(), 32);
  EXPECT_GE(info->info.periodogram_batching().batches(), 1);
}

TEST_F(ClientIntegrationTest, CliPeriodogramOnCsv) {
  const Series s = MakeSeries(500, 1.3, 30, 21);
  std::string csv = "# generated\nt,y,dy\n";
  for (size_t i = 0; i < s.t.size(); ++i) {
    csv += absl::StrCat(s.t[i], ",", s.y[i], ",", s.dy[i], "\n");
  }
  const std::string path = WriteFile("series.csv", csv);

  // Uniform grid, CSV to stdout.
  ProcessResult r = Cli({"periodogram", path, "--dy-column", "--fmin", "0.5", "--fmax", "2.5",
                         "--nf", "2001"});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_THAT(r.stderr_text, HasSubstr("peak at f = 1.3"));
  std::vector<CsvRow> rows = ParseCsvOutput(r.stdout_text);
  ASSERT_EQ(rows.size(), 2001u);
  const CsvRow* best = &rows[0];
  for (const CsvRow& row : rows) {
    EXPECT_EQ(row.series, 0);
    if (row.power > best->power) best = &row;
  }
  EXPECT_NEAR(best->frequency, 1.3, 0.001);
  EXPECT_DOUBLE_EQ(rows.front().frequency, 0.5);
  EXPECT_NEAR(rows.back().frequency, 2.5, 1e-12);
  // The file's dy column is read without --dy-column, and left out with --ignore-dy.
  ProcessResult by_default = Cli({"periodogram", path, "--fmin", "0.5", "--fmax", "2.5", "--nf", "2001"});
  ASSERT_EQ(by_default.exit_code, 0) << by_default.stderr_text;
  EXPECT_EQ(by_default.stdout_text, r.stdout_text);
  ProcessResult ignored =
      Cli({"periodogram", path, "--ignore-dy", "--fmin", "0.5", "--fmax", "2.5", "--nf", "2001"});
  ASSERT_EQ(ignored.exit_code, 0) << ignored.stderr_text;
  EXPECT_NE(ignored.stdout_text, r.stdout_text);

  // Auto grid, JSON to a file, float32, another normalisation.
  const std::string out = PathIn("out.json");
  r = Cli({"periodogram", path, "--samples-per-peak", "10", "--maximum-frequency", "4", "--dtype",
           "float32", "--normalization", "model", "--output", out});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_TRUE(r.stdout_text.empty());
  nlohmann::json json = nlohmann::json::parse(test::ReadWholeFile(out), nullptr, false);
  ASSERT_FALSE(json.is_discarded());
  ASSERT_EQ(json["series"].size(), 1u);
  const nlohmann::json& j = json["series"][0];
  EXPECT_EQ(j["file"], path);
  EXPECT_NEAR(j["peak_frequency"].get<double>(), 1.3, 1.0 / (30 * 10) * 1.5);
  EXPECT_EQ(j["frequency"].size(), j["power"].size());
  // Astropy's rule n = 1 + round((f_max - f_min) / df) may overshoot f_max by up to df / 2.
  const double df = j["frequency"][1].get<double>() - j["frequency"][0].get<double>();
  EXPECT_LE(j["frequency"].back().get<double>(), 4.0 + df / 2 + 1e-9);
  EXPECT_GE(j["frequency"].back().get<double>(), 4.0 - df / 2 - 1e-9);

  // Explicit frequency list.
  const std::string freqs = WriteFile("f.txt", "1.0\n1.1\n1.2\n1.3\n1.4\n");
  r = Cli({"periodogram", path, "--frequencies", freqs, "--format", "csv"});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  rows = ParseCsvOutput(r.stdout_text);
  ASSERT_EQ(rows.size(), 5u);
  EXPECT_DOUBLE_EQ(rows[3].frequency, 1.3);

  // Analysis options: the fast method, top-k peaks, false alarm and the model at the peak.
  r = Cli({"periodogram", path, "--dy-column", "--method", "fast", "--top-k", "3",
           "--false-alarm", "baluev", "--false-alarm-level", "0.01", "--model", "--output", out});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  json = nlohmann::json::parse(test::ReadWholeFile(out), nullptr, false);
  ASSERT_FALSE(json.is_discarded());
  const nlohmann::json& a = json["series"][0];
  EXPECT_EQ(a["method"], "fast");
  ASSERT_EQ(a["peaks"].size(), 3u);
  EXPECT_EQ(a["peaks"][0]["power"].get<double>(), a["peak_power"].get<double>());
  EXPECT_LT(a["false_alarm_probability"].get<double>(), 1e-6);  // a strong injected signal
  ASSERT_EQ(a["false_alarm_levels"].size(), 1u);
  EXPECT_GT(a["false_alarm_levels"][0].get<double>(), 0.0);
  EXPECT_LT(a["false_alarm_levels"][0].get<double>(), a["peak_power"].get<double>());
  EXPECT_EQ(a["model"]["parameters"].size(), 3u);  // offset term, sin, cos
  EXPECT_EQ(a["model"]["frequency"].get<double>(), a["peak_frequency"].get<double>());

  // --no-power: the same peaks and false alarms without the power array (JSON), and each
  // series' peak as CSV.
  const nlohmann::json peaks = a["peaks"], false_alarm = a["false_alarm_probability"];
  r = Cli({"periodogram", path, "--dy-column", "--method", "fast", "--top-k", "3",
           "--false-alarm", "baluev", "--no-power", "--format", "json", "--output", out});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  json = nlohmann::json::parse(test::ReadWholeFile(out), nullptr, false);
  ASSERT_FALSE(json.is_discarded());
  const nlohmann::json& lean = json["series"][0];
  EXPECT_FALSE(lean.contains("power"));
  EXPECT_EQ(lean["peaks"], peaks);
  EXPECT_EQ(lean["false_alarm_probability"], false_alarm);
  r = Cli({"periodogram", path, "--dy-column", "--no-power"});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_THAT(r.stdout_text, HasSubstr("series,peak_frequency,peak_power\n0,"));
}

TEST_F(ClientIntegrationTest, CliPeriodogramOnNpyFilesInOneBatch) {
  const Series a = MakeSeries(800, 0.77, 40, 31);
  const Series b = MakeSeries(250, 2.2, 25, 32);
  std::vector<double> a3, b2;
  for (size_t i = 0; i < a.t.size(); ++i) a3.insert(a3.end(), {a.t[i], a.y[i], a.dy[i]});
  for (size_t i = 0; i < b.t.size(); ++i) b2.insert(b2.end(), {b.t[i], b.y[i]});
  const std::string pa = WriteFile("a.npy", cli::EncodeNpy({800, 3}, a3));
  const std::string pb = WriteFile("b.npy", cli::EncodeNpy({250, 2}, b2, /*item_size=*/4));
  ProcessResult r = Cli({"periodogram", pa, pb, "--format", "json"});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  nlohmann::json json = nlohmann::json::parse(r.stdout_text, nullptr, false);
  ASSERT_FALSE(json.is_discarded()) << r.stdout_text.substr(0, 200);
  ASSERT_EQ(json["series"].size(), 2u);
  EXPECT_EQ(json["series"][0]["file"], pa);
  EXPECT_EQ(json["series"][1]["file"], pb);
  EXPECT_NEAR(json["series"][0]["peak_frequency"].get<double>(), 0.77, 1.0 / (40 * 5));
  EXPECT_NEAR(json["series"][1]["peak_frequency"].get<double>(), 2.2, 1.0 / (25 * 5));
  EXPECT_EQ(json["series"][1]["n_samples"], 250);

  // A bad file fails before any call, naming the file.
  const std::string bad = WriteFile("bad.npy", cli::EncodeNpy({4}, {1, 2, 3, 4}));
  r = Cli({"periodogram", pa, bad});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.stderr_text, HasSubstr("bad.npy"));
}

// `gpucompute assimilate --method letkf`: with a step taper that reaches every observation the
// LETKF is the global ETKF, which the same CLI computes too; a radius <= 0 is refused naming
// the field.
TEST_F(ClientIntegrationTest, CliAssimilateLetkf) {
  std::mt19937_64 rng(41);
  std::normal_distribution<double> g(0, 1);
  const int64_t n = 12, m = 9, N = 6;
  std::vector<double> x(n * N), hx(m * N), y(m), r(m, 0.5), sc(n), oc(m);
  for (double& v : x) v = g(rng);
  for (double& v : hx) v = g(rng);
  for (double& v : y) v = g(rng);
  for (int64_t i = 0; i < n; ++i) sc[i] = static_cast<double>(i);
  const std::string px = WriteFile("x.npy", cli::EncodeNpy({n, N}, x));
  const std::string phx = WriteFile("hx.npy", cli::EncodeNpy({m, N}, hx));
  const std::string py = WriteFile("y.npy", cli::EncodeNpy({m}, y));
  const std::string pr = WriteFile("r.npy", cli::EncodeNpy({m}, r));
  const std::string ps = WriteFile("sc.npy", cli::EncodeNpy({n}, sc));
  for (int64_t j = 0; j < m; ++j) oc[j] = static_cast<double>(j) + 0.5;
  const std::string po = WriteFile("oc.npy", cli::EncodeNpy({m}, oc));
  const std::string local = PathIn("local.npy"), global = PathIn("global.npy");
  ProcessResult a = Cli({"assimilate", "--x", px, "--hx", phx, "--y", py, "--obs-error", pr, "--method", "letkf",
                         "--state-coords", ps, "--obs-coords", po, "--radius", "100", "--taper", "step",
                         "--inflation", "1.05", "-o", local});
  ASSERT_EQ(a.exit_code, 0) << a.stderr_text;
  ProcessResult b = Cli({"assimilate", "--x", px, "--hx", phx, "--y", py, "--obs-error", pr, "--inflation", "1.05",
                         "-o", global});
  ASSERT_EQ(b.exit_code, 0) << b.stderr_text;
  auto la = cli::ReadNpyFile(local);
  auto ga = cli::ReadNpyFile(global);
  ASSERT_TRUE(la.ok() && ga.ok());
  ASSERT_EQ(la->data.size(), static_cast<size_t>(n * N));
  double diff = 0, moved = 0;
  for (size_t i = 0; i < la->data.size(); ++i) {
    diff = std::max(diff, std::abs(la->data[i] - ga->data[i]));
    moved = std::max(moved, std::abs(la->data[i] - x[i]));
  }
  EXPECT_LE(diff, 1e-10);
  EXPECT_GT(moved, 1e-3);
  ProcessResult bad = Cli({"assimilate", "--x", px, "--hx", phx, "--y", py, "--obs-error", pr, "--method", "letkf",
                           "--state-coords", ps, "--obs-coords", po, "--radius", "0", "-o", local});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_THAT(bad.stderr_text, HasSubstr("localization.radius"));
  // The great circle on (longitude, latitude): the sphere's radius has no default, as in Python;
  // with one and a step reaching round the Earth it is the global ETKF again.
  std::vector<double> sll(n * 2), oll(m * 2);
  for (int64_t i = 0; i < n; ++i) {
    sll[i * 2] = -170 + 30.0 * static_cast<double>(i);
    sll[i * 2 + 1] = 5.0 * static_cast<double>(i) - 30;
  }
  for (int64_t j = 0; j < m; ++j) {
    oll[j * 2] = 40.0 * static_cast<double>(j) - 175;
    oll[j * 2 + 1] = 60 - 12.0 * static_cast<double>(j);
  }
  const std::string psll = WriteFile("sll.npy", cli::EncodeNpy({n, 2}, sll));
  const std::string poll = WriteFile("oll.npy", cli::EncodeNpy({m, 2}, oll));
  const std::vector<std::string> sphere = {"assimilate", "--x", px, "--hx", phx, "--y", py, "--obs-error", pr,
                                           "--method", "letkf", "--state-coords", psll, "--obs-coords", poll,
                                           "--metric", "great_circle", "--radius", "30000", "--taper", "step",
                                           "--inflation", "1.05", "-o", local};
  ProcessResult no_radius = Cli(sphere);
  EXPECT_EQ(no_radius.exit_code, 1);
  EXPECT_THAT(no_radius.stderr_text, HasSubstr("localization.earth_radius"));
  std::vector<std::string> with_radius = sphere;
  with_radius.insert(with_radius.end(), {"--earth-radius", "6371"});
  ProcessResult c = Cli(with_radius);
  ASSERT_EQ(c.exit_code, 0) << c.stderr_text;
  auto sa = cli::ReadNpyFile(local);
  ASSERT_TRUE(sa.ok());
  diff = 0;
  for (size_t i = 0; i < sa->data.size(); ++i) diff = std::max(diff, std::abs(sa->data[i] - ga->data[i]));
  EXPECT_LE(diff, 1e-10);
}

TEST_F(ClientIntegrationTest, CliReportsServerErrors) {
  const std::string path = WriteFile("s.csv", "0,1\n1,2\n2,1\n3,2\n");
  // fmin > fmax is caught locally; a server-side rule (uniform grid of zero width) comes back
  // as INVALID_ARGUMENT.
  ProcessResult r = Cli({"periodogram", path, "--fmin", "2", "--fmax", "1", "--nf", "10"});
  EXPECT_EQ(r.exit_code, 1);
  r = Cli({"periodogram", path, "--minimum-frequency", "5", "--maximum-frequency", "1"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.stderr_text, HasSubstr("INVALID_ARGUMENT"));
  // Usage errors.
  r = Cli({"periodogram", path, "--fmin", "1"});
  EXPECT_NE(r.exit_code, 0);
  r = Cli({"periodogram", path, "--nf", "10", "--fmin", "1", "--fmax", "2", "--samples-per-peak",
           "3"});
  EXPECT_NE(r.exit_code, 0);
}

TEST_F(ClientIntegrationTest, CliInfo) {
  ProcessResult r = Cli({"info"});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_THAT(r.stdout_text, HasSubstr("backend       cpu"));
  EXPECT_THAT(r.stdout_text, HasSubstr("periodogram"));
  r = Cli({"info", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  nlohmann::json json = nlohmann::json::parse(r.stdout_text, nullptr, false);
  ASSERT_FALSE(json.is_discarded()) << r.stdout_text;
  EXPECT_EQ(json["backend"], "cpu");
  EXPECT_TRUE(json.contains("limits"));
}

TEST_F(ClientIntegrationTest, CliDemoPasses) {
  ProcessResult r = Cli({"demo"});
  EXPECT_EQ(r.exit_code, 0) << r.stdout_text << r.stderr_text;
  EXPECT_THAT(r.stdout_text, HasSubstr("PASS"));
  EXPECT_THAT(r.stdout_text, HasSubstr("backend cpu"));
  const size_t lines = std::count(r.stdout_text.begin(), r.stdout_text.end(), '\n');
  EXPECT_LE(lines, 30u) << r.stdout_text;
}

// Global options after the subcommand, and --target from $GPUCOMPUTE_TARGET.
TEST_F(ClientIntegrationTest, CliGlobalOptionsAnywhereAndTargetFromTheEnvironment) {
  absl::StatusOr<ProcessResult> r =
      RunProcess({GPUCOMPUTE_CLI_BIN, "info", "--target", server_->target(), "--json"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exit_code, 0) << r->stderr_text;
  EXPECT_THAT(r->stdout_text, HasSubstr("\"backend\""));
  r = RunProcess({"/usr/bin/env", "GPUCOMPUTE_TARGET=" + server_->target(), GPUCOMPUTE_CLI_BIN, "info"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exit_code, 0) << r->stderr_text;
  EXPECT_THAT(r->stdout_text, HasSubstr("backend       cpu"));
}

// --version prints the project's version; the server's --help lists its own flags.
TEST(ProgramsTest, VersionAndHelp) {
  for (const auto& [binary, name] : {std::pair<std::string, std::string>{GPUCOMPUTE_SERVER_BIN, "gpucompute-server"},
                                     {GPUCOMPUTE_CLI_BIN, "gpucompute"}}) {
    absl::StatusOr<ProcessResult> r = RunProcess({binary, "--version"});
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->exit_code, 0) << name << ": " << r->stderr_text;
    EXPECT_EQ(r->stdout_text, name + " " + GPUCOMPUTE_VERSION + "\n");
  }
  absl::StatusOr<ProcessResult> help = RunProcess({GPUCOMPUTE_SERVER_BIN, "--help"});
  ASSERT_TRUE(help.ok()) << help.status();
  EXPECT_THAT(help->stdout_text, HasSubstr("Flags from server/main.cc"));
  EXPECT_THAT(help->stdout_text, HasSubstr("--pinned_tensor_bytes"));
  EXPECT_THAT(help->stdout_text, Not(HasSubstr("No flags matched")));
}

TEST(CliWithoutServerTest, UnreachableServerFails) {
  absl::StatusOr<ProcessResult> r =
      RunProcess({GPUCOMPUTE_CLI_BIN, "--target", "127.0.0.1:1", "--timeout", "5", "info"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exit_code, 1);
  EXPECT_THAT(r->stderr_text, HasSubstr("UNAVAILABLE"));
}

}  // namespace
}  // namespace gpucompute
