// Parsers of gpucompute-load's flag syntaxes.
#include "client/load/config.h"

#include <cmath>
#include <limits>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

namespace gpucompute::load {
namespace {

absl::Status Invalid(absl::string_view what, absl::string_view text, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(what, " \"", text, "\": ", why));
}

}  // namespace

absl::string_view OpName(Op op) {
  switch (op) {
    case Op::kPeriodogram: return "periodogram";
    case Op::kDense: return "dense";
    case Op::kAssimilate: return "assimilate";
    case Op::kEcho: return "echo";
  }
  return "?";
}

absl::StatusOr<Op> ParseOp(absl::string_view name) {
  for (Op op : kAllOps) {
    if (name == OpName(op)) return op;
  }
  return Invalid("operation", name, "expected periodogram, dense, assimilate or echo");
}

absl::string_view ModeName(Mode mode) { return mode == Mode::kUnary ? "unary" : "stream"; }

absl::string_view InputPlacementName(InputPlacement input) {
  switch (input) {
    case InputPlacement::kInline: return "inline";
    case InputPlacement::kHandle: return "handle";
    case InputPlacement::kShm: return "shm";
  }
  return "?";
}

absl::string_view OutputPlacementName(OutputPlacement output) {
  switch (output) {
    case OutputPlacement::kInline: return "inline";
    case OutputPlacement::kShm: return "shm";
    case OutputPlacement::kDiscard: return "discard";
  }
  return "?";
}

absl::string_view ArrivalName(Arrival arrival) {
  return arrival == Arrival::kConstant ? "constant" : "poisson";
}

bool IsOpenLoop(const RunConfig& run) { return !run.rates.empty(); }

absl::StatusOr<int64_t> ParseByteSize(absl::string_view text) {
  absl::string_view s = absl::StripAsciiWhitespace(text);
  if (absl::ConsumeSuffix(&s, "B") || absl::ConsumeSuffix(&s, "b")) {
    // "4KiB", "64MB", "512B"
  }
  struct Suffix {
    absl::string_view name;
    double factor;
  };
  static constexpr Suffix kSuffixes[] = {
      {"Ki", 1024.0}, {"Mi", 1048576.0}, {"Gi", 1073741824.0}, {"Ti", 1099511627776.0},
      {"k", 1e3},     {"K", 1e3},        {"M", 1e6},           {"G", 1e9},
      {"T", 1e12}};
  double factor = 1;
  for (const Suffix& suffix : kSuffixes) {
    if (absl::ConsumeSuffix(&s, suffix.name)) {
      factor = suffix.factor;
      break;
    }
  }
  s = absl::StripAsciiWhitespace(s);
  double value = 0;
  if (s.empty() || !absl::SimpleAtod(s, &value) || !std::isfinite(value)) {
    return Invalid("size", text, "expected a number with an optional suffix (4Ki, 64Mi, 1Gi, 10k)");
  }
  const double bytes = std::round(value * factor);
  if (bytes < 0) return Invalid("size", text, "negative");
  if (bytes >= 9.2e18) return Invalid("size", text, "too large");
  return static_cast<int64_t>(bytes);
}

std::string FormatBytes(double bytes) {
  if (bytes >= 1073741824.0) return absl::StrFormat("%.2f GiB", bytes / 1073741824.0);
  if (bytes >= 1048576.0) return absl::StrFormat("%.2f MiB", bytes / 1048576.0);
  if (bytes >= 1024.0) return absl::StrFormat("%.2f KiB", bytes / 1024.0);
  return absl::StrFormat("%.0f B", bytes);
}

absl::StatusOr<absl::Duration> ParseDurationFlag(absl::string_view text) {
  absl::string_view s = absl::StripAsciiWhitespace(text);
  double seconds = 0;
  absl::Duration d;
  if (absl::SimpleAtod(s, &seconds) && std::isfinite(seconds)) {
    d = absl::Seconds(seconds);
  } else if (!absl::ParseDuration(s, &d)) {
    return Invalid("duration", text, "expected e.g. 10s, 500ms, 2m or a number of seconds");
  }
  if (d < absl::ZeroDuration() || d == absl::InfiniteDuration()) {
    return Invalid("duration", text, "must be finite and not negative");
  }
  return d;
}

absl::StatusOr<std::vector<int>> ParseIntList(absl::string_view text) {
  std::vector<int> out;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    part = absl::StripAsciiWhitespace(part);
    int v = 0;
    if (!absl::SimpleAtoi(part, &v) || v <= 0) {
      return Invalid("list", text, absl::StrCat("\"", part, "\" is not a positive integer"));
    }
    out.push_back(v);
  }
  return out;
}

absl::StatusOr<std::vector<double>> ParseRateList(absl::string_view text) {
  std::vector<double> out;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    part = absl::StripAsciiWhitespace(part);
    double v = 0;
    if (!absl::SimpleAtod(part, &v) || !std::isfinite(v) || v <= 0) {
      return Invalid("rate list", text, absl::StrCat("\"", part, "\" is not a positive number"));
    }
    out.push_back(v);
  }
  return out;
}

absl::StatusOr<std::vector<MixEntry>> ParseMix(absl::string_view text) {
  std::vector<MixEntry> mix;
  double total = 0;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    part = absl::StripAsciiWhitespace(part);
    std::pair<absl::string_view, absl::string_view> kv =
        absl::StrSplit(part, absl::MaxSplits(':', 1));
    absl::StatusOr<Op> op = ParseOp(absl::StripAsciiWhitespace(kv.first));
    if (!op.ok()) return Invalid("mix", text, op.status().message());
    MixEntry entry{*op, 1.0};
    if (part.find(':') != absl::string_view::npos) {
      if (!absl::SimpleAtod(absl::StripAsciiWhitespace(kv.second), &entry.weight) ||
          !std::isfinite(entry.weight) || entry.weight < 0) {
        return Invalid("mix", text,
                       absl::StrCat("weight \"", kv.second, "\" is not a number >= 0"));
      }
    }
    for (const MixEntry& e : mix) {
      if (e.op == entry.op) {
        return Invalid("mix", text, absl::StrCat(OpName(entry.op), " given twice"));
      }
    }
    total += entry.weight;
    mix.push_back(entry);
  }
  if (total <= 0) return Invalid("mix", text, "weights sum to 0");
  return mix;
}

absl::StatusOr<std::vector<std::string>> ParseTargets(absl::string_view text) {
  std::vector<std::string> targets;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    part = absl::StripAsciiWhitespace(part);
    if (part.empty()) return Invalid("target list", text, "empty entry");
    targets.emplace_back(part);
  }
  return targets;
}

absl::StatusOr<std::pair<std::string, std::string>> ParseChannelArg(absl::string_view text) {
  const size_t eq = text.find('=');
  if (eq == absl::string_view::npos || eq == 0) {
    return Invalid("channel argument", text, "expected key=value");
  }
  return std::pair<std::string, std::string>(std::string(text.substr(0, eq)),
                                             std::string(text.substr(eq + 1)));
}

}  // namespace gpucompute::load
