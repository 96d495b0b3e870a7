// The health-only port (--health_port) and Server::SetServing: both health services follow it.
#include <chrono>
#include <future>
#include <string>
#include <vector>

#include <grpcpp/generic/generic_stub.h>

#include "gtest/gtest.h"
#include "tests/integration/loopback_server.h"

namespace gpucompute::testing {
namespace {

// grpc.health.v1 Check of `service` on 127.0.0.1:port: "SERVING", "NOT_SERVING", or the error
// code's number.
std::string Check(int port, const std::string& service = "") {
  grpc::GenericStub stub(grpc::CreateChannel(absl::StrCat("127.0.0.1:", port),
                                             grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  std::string request;
  if (!service.empty()) request = absl::StrCat("\x0a", std::string(1, static_cast<char>(service.size())), service);
  grpc::Slice slice(request);
  grpc::ByteBuffer in(&slice, 1), out;
  std::promise<grpc::Status> done;
  stub.UnaryCall(&context, "/grpc.health.v1.Health/Check", grpc::StubOptions(), &in, &out,
                 [&done](grpc::Status s) { done.set_value(std::move(s)); });
  const grpc::Status status = done.get_future().get();
  if (!status.ok()) return absl::StrCat("error ", status.error_code());
  std::vector<grpc::Slice> slices;
  EXPECT_TRUE(out.Dump(&slices).ok());
  std::string bytes;
  for (const auto& s : slices) bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  if (bytes == std::string("\x08\x01", 2)) return "SERVING";
  if (bytes == std::string("\x08\x02", 2)) return "NOT_SERVING";
  return "unexpected " + bytes;
}

TEST(HealthPort, FollowsTheServiceAndServesNothingElse) {
  ServerConfig config = LoopbackConfig();
  config.health_port = 0;
  LoopbackServer s;
  s.Start(config);
  ASSERT_NE(s.server, nullptr);
  const int main_port = s.server->port();
  const int health_port = s.server->health_port();
  ASSERT_GT(health_port, 0);
  ASSERT_NE(health_port, main_port);
  for (int port : {main_port, health_port}) {
    EXPECT_EQ(Check(port), "SERVING") << port;
    EXPECT_EQ(Check(port, "gpucompute.v1.Compute"), "SERVING") << port;
  }
  s.server->SetServing(false);
  for (int port : {main_port, health_port}) {
    EXPECT_EQ(Check(port), "NOT_SERVING") << port;
    EXPECT_EQ(Check(port, "gpucompute.v1.Compute"), "NOT_SERVING") << port;
  }
  s.server->SetServing(true);
  for (int port : {main_port, health_port}) EXPECT_EQ(Check(port), "SERVING") << port;
  // Unknown services are NOT_FOUND, as on any default health service.
  EXPECT_EQ(Check(health_port, "no.such.Service"),
            absl::StrCat("error ", grpc::StatusCode::NOT_FOUND));

  // The health port has no Compute service.
  auto stub = v1::Compute::NewStub(grpc::CreateChannel(absl::StrCat("127.0.0.1:", health_port),
                                                       grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  v1::ServerInfoResponse info;
  EXPECT_EQ(stub->ServerInfo(&context, v1::ServerInfoRequest(), &info).error_code(),
            grpc::StatusCode::UNIMPLEMENTED);

  s.server->Shutdown(absl::Seconds(1));
  s.server->SetServing(true);  // no effect, no crash, after shutdown
  EXPECT_EQ(Check(health_port), absl::StrCat("error ", grpc::StatusCode::UNAVAILABLE));
}

TEST(HealthPort, OffByDefault) {
  LoopbackServer s;
  s.Start(LoopbackConfig());
  ASSERT_NE(s.server, nullptr);
  EXPECT_EQ(s.server->health_port(), 0);
  s.server->SetServing(false);
  EXPECT_EQ(Check(s.server->port()), "NOT_SERVING");
}

}  // namespace
}  // namespace gpucompute::testing
