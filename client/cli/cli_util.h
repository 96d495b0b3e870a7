// Small helpers shared by the CLI's subcommands.
#pragma once

#include <charconv>
#include <cstdio>
#include <memory>
#include <string>

#include <google/protobuf/message.h>
#include <google/protobuf/util/json_util.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "client/cli/commands.h"
#include "client/cpp/client.h"

namespace gpucompute::cli {

// Shortest text that reads back as the same value (float32 values as floats).
template <typename T>
std::string FormatShortest(T value) {
  char buffer[64];
  auto [end, ec] = std::to_chars(buffer, buffer + sizeof(buffer), value);
  return ec == std::errc() ? std::string(buffer, end) : std::string("nan");
}

// "12.3 ms"
inline std::string FormatMs(absl::Duration d) {
  return absl::StrFormat("%.1f ms", absl::ToDoubleMilliseconds(d));
}

// "1.5 MiB"
inline std::string FormatBytes(int64_t bytes) {
  if (bytes >= (int64_t{1} << 30)) return absl::StrFormat("%.1f GiB", bytes / double(1 << 30));
  if (bytes >= (int64_t{1} << 20)) return absl::StrFormat("%.1f MiB", bytes / double(1 << 20));
  if (bytes >= (int64_t{1} << 10)) return absl::StrFormat("%.1f KiB", bytes / double(1 << 10));
  return absl::StrFormat("%d B", bytes);
}

// Prints "gpucompute: <context>: CODE: message" to stderr and returns exit code 1.
inline int Fail(absl::string_view context, const absl::Status& status) {
  std::fprintf(stderr, "gpucompute: %.*s: %s\n", static_cast<int>(context.size()), context.data(),
               status.ToString().c_str());
  return 1;
}

// Prints `message` as indented JSON with proto field names and every field; 0, or Fail(what).
inline int PrintJson(const google::protobuf::Message& message, absl::string_view what) {
  std::string json;
  google::protobuf::util::JsonPrintOptions print;
  print.add_whitespace = true;
  print.always_print_primitive_fields = true;
  print.preserve_proto_field_names = true;
  auto status = google::protobuf::util::MessageToJsonString(message, &json, print);
  if (!status.ok()) return Fail(what, absl::InternalError(std::string(status.message())));
  std::fputs(json.c_str(), stdout);
  if (json.empty() || json.back() != '\n') std::fputc('\n', stdout);
  return 0;
}

// The TLS options of the global flags.
inline client::TlsOptions TlsFromFlags(const GlobalOptions& global) {
  client::TlsOptions tls;
  tls.ca_file = global.tls_ca_file;
  tls.cert_file = global.tls_cert_file;
  tls.key_file = global.tls_key_file;
  tls.server_name = global.tls_server_name;
  return tls;
}

inline absl::StatusOr<std::unique_ptr<client::Client>> ConnectFromFlags(
    const GlobalOptions& global) {
  client::ClientOptions options;
  options.default_timeout = absl::Seconds(global.timeout_s);
  options.tls = TlsFromFlags(global);
  absl::StatusOr<std::string> token = client::ResolveToken(global.token_file);
  if (!token.ok()) return token.status();
  options.token = *std::move(token);
  return client::Client::Connect(global.target, options);
}

// "queue 12 us, compute 340 us, total 400 us, batch 3" (fields the server did not send: "?").
inline std::string FormatTimings(const client::ServerTimings& t) {
  auto field = [](const std::optional<int64_t>& v) {
    return v ? absl::StrCat(*v) : std::string("?");
  };
  return absl::StrCat("queue ", field(t.queue_us), " us, compute ", field(t.compute_us),
                      " us, total ", field(t.total_us), " us, batch of ",
                      field(t.batch_requests));
}

}  // namespace gpucompute::cli
