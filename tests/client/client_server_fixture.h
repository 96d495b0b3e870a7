// A gpucompute-server process with a Client connected to it, for tests that go through the real
// binaries. GPUCOMPUTE_SERVER_BIN and GPUCOMPUTE_CLI_BIN are compile definitions
// (tests/client/CMakeLists.txt, gpucompute_client_server_test).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/cpp/client.h"
#include "gtest/gtest.h"
#include "tests/client/server_process.h"

namespace gpucompute::test {

class ClientServerTest : public ::testing::Test {
 protected:
  // Starts the server (`backend`, kernel cache in a fresh temporary directory named after
  // `dir_prefix`, then `extra_args`) and connects client_.
  void StartServer(const std::string& dir_prefix, const std::string& backend = "cpu",
                   std::vector<std::string> extra_args = {}) {
    absl::StatusOr<std::string> dir = MakeTempDir(dir_prefix);
    ASSERT_TRUE(dir.ok()) << dir.status();
    dir_ = *dir;
    extra_args.insert(extra_args.begin(), "--kernel_cache_dir=" + dir_ + "/kc");
    absl::StatusOr<std::unique_ptr<ServerProcess>> server = ServerProcess::Start(
        {.binary = GPUCOMPUTE_SERVER_BIN, .backend = backend, .extra_args = extra_args, .work_dir = dir_});
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    client::ClientOptions options;
    options.default_timeout = absl::Seconds(60);
    absl::StatusOr<std::unique_ptr<client::Client>> c =
        client::Client::Connect(server_->target(), options);
    ASSERT_TRUE(c.ok()) << c.status();
    client_ = *std::move(c);
  }

  // Stops the server with SIGTERM: it must exit 0.
  void TearDown() override {
    client_.reset();
    if (server_ == nullptr) return;
    absl::StatusOr<int> code = server_->Stop(absl::Seconds(30));
    ASSERT_TRUE(code.ok()) << code.status();
    EXPECT_EQ(*code, 0) << "server log:\n" << server_->log();
  }

  // Runs the CLI with --target of this test's server; `args` follow the global flags.
  ProcessResult Cli(std::vector<std::string> args) {
    std::vector<std::string> argv = {GPUCOMPUTE_CLI_BIN, "--target", server_->target(),
                                     "--timeout", "60"};
    argv.insert(argv.end(), args.begin(), args.end());
    absl::StatusOr<ProcessResult> r = RunProcess(argv, absl::Seconds(300));
    EXPECT_TRUE(r.ok()) << r.status();
    return r.value_or(ProcessResult{});
  }

  // Polls ServerInfo until `condition` holds on it (true) or `timeout` passes (false): tests
  // wait on what the server shows instead of sleeping and assuming it got there.
  bool WaitForServerInfo(const std::function<bool(const v1::ServerInfoResponse&)>& condition,
                         absl::Duration timeout = absl::Seconds(60)) {
    const absl::Time deadline = absl::Now() + timeout;
    while (absl::Now() < deadline) {
      absl::StatusOr<client::ServerInfoResult> r = client_->ServerInfo();
      if (r.ok() && condition(r->info)) return true;
      absl::SleepFor(absl::Milliseconds(10));
    }
    return false;
  }

  // A path in this test's temporary directory.
  std::string PathIn(const std::string& name) const { return dir_ + "/" + name; }

  std::string dir_;
  std::unique_ptr<ServerProcess> server_;
  std::unique_ptr<client::Client> client_;
};

}  // namespace gpucompute::test
