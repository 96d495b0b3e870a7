// W3C Trace Context (https://www.w3.org/TR/trace-context/) in the server's logs: a call that
// carries a `traceparent` metadata entry has its log lines (--log_calls) tagged with the trace
// it belongs to, so that a collector joins them to the caller's trace. The server makes no
// spans of its own: a line's span is the caller's (the traceparent's parent-id).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"

namespace gpucompute {

inline constexpr char kTraceParentKey[] = "traceparent";

struct TraceParent {
  std::string trace_id;   // 32 lowercase hex digits, not all zero
  std::string parent_id;  // 16 lowercase hex digits, not all zero: the caller's span
  uint8_t flags = 0;      // bit 0: sampled
};

// A traceparent value as the specification's "version-format" reads it: version 00 is exactly
// "00-<trace-id>-<parent-id>-<flags>"; a later version (not ff) may add fields after a "-",
// which are ignored. nullopt for anything else (the call is then logged without a trace).
std::optional<TraceParent> ParseTraceParent(absl::string_view value);

// The trace of the log lines this thread writes inside the scope (JsonLogFormatter adds it as
// "trace_id" and "span_id"); null: none.
const TraceParent* CurrentLogTrace();
class ScopedLogTrace {
 public:
  explicit ScopedLogTrace(const TraceParent* trace);
  ~ScopedLogTrace();
  ScopedLogTrace(const ScopedLogTrace&) = delete;
  ScopedLogTrace& operator=(const ScopedLogTrace&) = delete;

 private:
  const TraceParent* previous_;
};

}  // namespace gpucompute
