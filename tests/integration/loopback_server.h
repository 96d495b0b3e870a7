// A real server on a loopback port (in-process) and a channel to it, for integration tests.
// The backend is $GPUCOMPUTE_TEST_BACKEND (default cpu; the GPU machine runs the same tests
// with cuda).
#pragma once

#include <memory>
#include <string>

#include <grpcpp/create_channel.h>

#include "absl/strings/str_cat.h"
#include "gpucompute/v1/compute.grpc.pb.h"
#include "gtest/gtest.h"
#include "server/server.h"
#include "tests/client/server_process.h"

namespace gpucompute::testing {

using test::TestBackend;

// A ServerConfig on 127.0.0.1:0 with the test backend.
inline ServerConfig LoopbackConfig() {
  ServerConfig c;
  c.address = "127.0.0.1:0";
  c.backend.kind = TestBackend();
  return c;
}

struct LoopbackServer {
  std::unique_ptr<Server> server;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::Compute::Stub> stub;

  // Starts the server (ADD_FAILURE and leaves `server` null on error) and connects to it.
  void Start(const ServerConfig& config) {
    auto s = Server::Start(config);
    if (!s.ok()) {
      ADD_FAILURE() << s.status();
      return;
    }
    server = *std::move(s);
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(256 << 20);
    channel = grpc::CreateCustomChannel(absl::StrCat("127.0.0.1:", server->port()),
                                        grpc::InsecureChannelCredentials(), args);
    stub = v1::Compute::NewStub(channel);
  }
};

}  // namespace gpucompute::testing
