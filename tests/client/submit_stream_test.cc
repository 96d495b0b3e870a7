// The C++ client's SubmitStream and Echo against the real server binary (CPU backend).
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "client/cpp/periodogram_request_builder.h"
#include "client/cpp/submit_stream.h"
#include "gtest/gtest.h"
#include "tests/client/client_server_fixture.h"

namespace gpucompute {
namespace {

class SubmitStreamTest : public test::ClientServerTest {
 protected:
  void SetUp() override { StartServer("gpucompute-submit-it"); }

  // One series of n samples on `frequencies` uniform frequencies.
  static v1::PeriodogramRequest Periodogram(int n, int64_t frequencies) {
    std::vector<double> t(n), y(n);
    for (int i = 0; i < n; ++i) {
      t[i] = 0.37 * i + 0.01 * (i % 7);
      y[i] = std::sin(0.9 * t[i]);
    }
    v1::FrequencyGrid grid;
    grid.mutable_uniform()->set_f0(0.01);
    grid.mutable_uniform()->set_df(0.001);
    grid.mutable_uniform()->set_n(frequencies);
    absl::StatusOr<v1::PeriodogramRequest> r =
        client::PeriodogramRequestBuilder().AddSeries(t, y).SetGrid(grid).Build();
    EXPECT_TRUE(r.ok()) << r.status();
    return r.value_or(v1::PeriodogramRequest{});
  }

  static v1::EchoRequest Echo(std::string bytes) {
    v1::EchoRequest r;
    r.mutable_tensor()->set_dtype(v1::UINT8);
    r.mutable_tensor()->add_shape(static_cast<int64_t>(bytes.size()));
    r.mutable_tensor()->set_data(std::move(bytes));
    return r;
  }

  struct Collected {
    absl::Mutex mu;
    std::vector<v1::SubmitResponse> results ABSL_GUARDED_BY(mu);
  };
};

TEST_F(SubmitStreamTest, ResultsArriveAsTheyFinishWithTheirOwnErrors) {
  Collected got;
  auto stream = client_->OpenSubmitStream([&](v1::SubmitResponse&& r) {
    absl::MutexLock lock(&got.mu);
    got.results.push_back(std::move(r));
  });
  v1::SubmitRequest slow;
  slow.set_id("slow");
  *slow.mutable_periodogram() = Periodogram(1000, 60000);
  EXPECT_TRUE(stream->Submit(slow).ok());
  v1::SubmitRequest fast;
  fast.set_id("fast");
  *fast.mutable_echo() = Echo("hello");
  EXPECT_TRUE(stream->Submit(fast).ok());
  v1::SubmitRequest bad;
  bad.set_id("bad");
  *bad.mutable_echo() = Echo("abc");
  bad.mutable_echo()->mutable_tensor()->set_dtype(v1::FLOAT32);  // 3 bytes are not a float32
  EXPECT_TRUE(stream->Submit(bad).ok());
  stream->Close();
  ASSERT_TRUE(stream->Wait().ok());

  absl::MutexLock lock(&got.mu);
  ASSERT_EQ(got.results.size(), 3u);
  EXPECT_EQ(got.results.back().id(), "slow");  // the others finish first
  for (const v1::SubmitResponse& r : got.results) {
    if (r.id() == "fast") {
      EXPECT_EQ(r.code(), 0);
      EXPECT_EQ(r.echo().tensor().data(), "hello");
    } else if (r.id() == "bad") {
      EXPECT_EQ(r.code(), static_cast<int>(grpc::StatusCode::INVALID_ARGUMENT));
      EXPECT_NE(r.message().find("tensor"), std::string::npos) << r.message();
      EXPECT_EQ(r.result_case(), v1::SubmitResponse::RESULT_NOT_SET);
    } else {
      EXPECT_EQ(r.code(), 0) << r.message();
      ASSERT_EQ(r.periodogram().results_size(), 1);
      EXPECT_EQ(r.periodogram().results(0).power().shape(0), 60000);
      EXPECT_GE(r.timing().compute_us(), 0);
      EXPECT_GE(r.timing().batch_requests(), 1);
    }
  }
  EXPECT_EQ(stream->results_received(), 3);
}

TEST_F(SubmitStreamTest, CancelEndsTheStream) {
  auto stream = client_->OpenSubmitStream([](v1::SubmitResponse&&) {});
  for (int i = 0; i < 8; ++i) {
    v1::SubmitRequest job;
    job.set_id(std::to_string(i));
    *job.mutable_periodogram() = Periodogram(1000, 60000);
    EXPECT_TRUE(stream->Submit(job).ok());
  }
  stream->Cancel();
  EXPECT_EQ(stream->Wait().code(), absl::StatusCode::kCancelled);
  // The server goes on serving.
  absl::StatusOr<client::EchoResult> echo = client_->Echo(Echo("after"));
  ASSERT_TRUE(echo.ok()) << echo.status();
  EXPECT_EQ(echo->response.tensor().data(), "after");
}

TEST_F(SubmitStreamTest, EchoReturnsTheBytesOrOnlyTheirReceipt) {
  std::string payload(5 << 20, '\0');
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<char>(i * 131 + 7);
  absl::StatusOr<client::EchoResult> r = client_->Echo(Echo(payload));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->response.tensor().data(), payload);
  EXPECT_TRUE(r->timings.total_us.has_value());
  v1::EchoRequest discard = Echo(payload);
  discard.set_discard(true);
  r = client_->Echo(discard);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->response.has_tensor());
}

TEST_F(SubmitStreamTest, SubmitAfterCloseIsRefused) {
  auto stream = client_->OpenSubmitStream([](v1::SubmitResponse&&) {});
  stream->Close();
  v1::SubmitRequest job;
  job.set_id("late");
  *job.mutable_echo() = Echo("x");
  EXPECT_EQ(stream->Submit(job).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(stream->Wait().ok());
  EXPECT_EQ(stream->results_received(), 0);
}

// SIGTERM with a Submit stream open: the jobs the server has read finish and are written back,
// the stream ends UNAVAILABLE "server shutting down" long before the grace period (300 s), the jobs
// the server never read are answered by the client with that status, and the server exits 0.
class SubmitStreamShutdownTest : public SubmitStreamTest {
 protected:
  static constexpr int kInFlight = 8;
  static constexpr int64_t kSlowFrequencies = 3000000;  // x 1000 samples, on one CPU thread
  // The first job runs ~3 s on one CPU thread. A batch waits for company up to
  // max_queue_delay (here longer than the test) unless nothing runs, so the next jobs stay
  // queued while it runs: the server holds exactly kInFlight jobs (and reads no more) when
  // the test, having seen them queued, sends the signal.
  void SetUp() override {
    StartServer("gpucompute-submit-shutdown", "cpu",
                {"--max_queue_delay_us=600000000", "--max_batch_size=64", "--cpu_threads=1",
                 absl::StrCat("--stream_max_jobs_in_flight=", kInFlight),
                 "--shutdown_grace_s=300"});
  }
  void TearDown() override {
    client_.reset();
    server_.reset();  // stopped by the test
  }
};

TEST_F(SubmitStreamShutdownTest, RunningJobsFinishAndTheStreamEndsUnavailable) {
  constexpr int kJobs = 20;
  Collected got;
  auto stream = client_->OpenSubmitStream([&](v1::SubmitResponse&& r) {
    absl::MutexLock lock(&got.mu);
    got.results.push_back(std::move(r));
  });
  for (int i = 0; i < kJobs; ++i) {
    v1::SubmitRequest job;
    job.set_id(std::to_string(i));
    *job.mutable_periodogram() = i == 0 ? Periodogram(1000, kSlowFrequencies) : Periodogram(200 + i, 500);
    ASSERT_TRUE(stream->Submit(job).ok());
    if (i == 0) {  // job 0 reaches the idle server and runs at once
      ASSERT_TRUE(WaitForServerInfo([](const v1::ServerInfoResponse& info) {
        return info.periodogram_batching().requests() == 1;
      })) << "job 0 never ran";
    }
  }
  ASSERT_TRUE(WaitForServerInfo([](const v1::ServerInfoResponse& info) {
    return info.periodogram_batching().queued() == kInFlight - 1;
  })) << "the server never read " << kInFlight << " jobs";
  {
    absl::MutexLock lock(&got.mu);
    ASSERT_TRUE(got.results.empty()) << "job 0 finished before the signal: too short here";
  }
  const absl::Time signalled = absl::Now();
  absl::StatusOr<int> exit_code = server_->Stop(absl::Seconds(150));
  ASSERT_TRUE(exit_code.ok()) << exit_code.status();
  EXPECT_EQ(*exit_code, 0) << server_->log();
  EXPECT_LT(absl::Now() - signalled, absl::Seconds(120)) << "the stream held the drain";
  EXPECT_NE(server_->log().find("1 open Submit stream(s)"), std::string::npos) << server_->log();

  const absl::Status end = stream->Wait();
  EXPECT_EQ(end.code(), absl::StatusCode::kUnavailable) << end;
  EXPECT_EQ(end.message(), "server shutting down");
  absl::MutexLock lock(&got.mu);
  ASSERT_EQ(got.results.size(), static_cast<size_t>(kJobs));
  std::vector<int> seen(kJobs, 0);
  int ok = 0;
  for (const v1::SubmitResponse& r : got.results) {
    const int id = std::stoi(r.id());
    ASSERT_TRUE(id >= 0 && id < kJobs) << r.id();
    ++seen[id];
    if (r.code() == 0) {
      ++ok;
      ASSERT_EQ(r.periodogram().results_size(), 1) << r.id();
      EXPECT_EQ(r.periodogram().results(0).power().shape(0), id == 0 ? kSlowFrequencies : 500);
      EXPECT_LT(id, kInFlight) << "the server read a job after the signal and ran it";
    } else {
      EXPECT_EQ(r.code(), static_cast<int>(grpc::StatusCode::UNAVAILABLE)) << r.message();
      EXPECT_NE(r.message().find("server shutting down"), std::string::npos) << r.message();
      EXPECT_EQ(r.result_case(), v1::SubmitResponse::RESULT_NOT_SET);
    }
  }
  EXPECT_EQ(seen, std::vector<int>(kJobs, 1));  // one result each, nothing lost
  EXPECT_EQ(ok, kInFlight);
  EXPECT_EQ(stream->results_received(), kInFlight);
  // The stream is over: a late job is refused with its status (and gets no callback).
  v1::SubmitRequest late;
  late.set_id("late");
  *late.mutable_echo() = Echo("x");
  EXPECT_EQ(stream->Submit(late).code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(got.results.size(), static_cast<size_t>(kJobs));
}

}  // namespace
}  // namespace gpucompute
