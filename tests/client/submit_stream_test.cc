// The C++ client's SubmitStream and Echo against the real server binary (CPU backend).
#include <cmath>
#include <string>
#include <vector>

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
  stream->Submit(slow);
  v1::SubmitRequest fast;
  fast.set_id("fast");
  *fast.mutable_echo() = Echo("hello");
  stream->Submit(fast);
  v1::SubmitRequest bad;
  bad.set_id("bad");
  *bad.mutable_echo() = Echo("abc");
  bad.mutable_echo()->mutable_tensor()->set_dtype(v1::FLOAT32);  // 3 bytes are not a float32
  stream->Submit(bad);
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
    stream->Submit(job);
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

}  // namespace
}  // namespace gpucompute
