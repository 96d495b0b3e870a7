// Log lines as JSON objects, one per line (--log_format=json), for collectors that parse
// structured logs (Loki, Elasticsearch, Cloud Logging, Kubernetes' log pipelines):
//
//   {"time":"2026-11-28T00:41:02.123Z","level":"info","thread":1234,"msg":"..."}
//   {"time":"...","level":"warning","thread":1240,"worker":1,"msg":"..."}   (worker mode)
//   {"time":"...","level":"info","thread":1240,"trace_id":"4bf9...","span_id":"00f0...",
//    "trace_flags":"01","msg":"call periodogram OK ..."}   (--log_calls, a call with traceparent)
//
// "time" is UTC with milliseconds; "level" is spdlog's name (trace, debug, info, warning,
// error, critical); "msg" is the text line of the plain format, escaped as JSON (bytes that
// are not UTF-8 replaced by U+FFFD).
#pragma once

#include <memory>

#include "spdlog/formatter.h"

namespace gpucompute {

class JsonLogFormatter final : public spdlog::formatter {
 public:
  // `worker`: the worker index of worker mode, written as "worker"; -1: none.
  explicit JsonLogFormatter(int worker = -1) : worker_(worker) {}
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override;
  std::unique_ptr<spdlog::formatter> clone() const override {
    return std::make_unique<JsonLogFormatter>(worker_);
  }

 private:
  int worker_;
};

}  // namespace gpucompute
