#include "client/cpp/balance.h"

#include <netdb.h>
#include <sys/socket.h>
#include <arpa/inet.h>

#include <algorithm>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace gpucompute::client {
namespace {

constexpr const char* kOneEndpointSchemes[] = {"unix:", "unix-abstract:", "vsock:"};

bool NamesOneEndpoint(absl::string_view target) {
  return std::any_of(std::begin(kOneEndpointSchemes), std::end(kOneEndpointSchemes),
                     [&](const char* s) { return absl::StartsWith(target, s); });
}

// "host:port" of a dns: target or a bare one; nullopt for address lists and socket paths.
std::optional<std::string> HostPort(absl::string_view target) {
  if (absl::StartsWith(target, "ipv4:") || absl::StartsWith(target, "ipv6:") ||
      NamesOneEndpoint(target)) {
    return std::nullopt;
  }
  if (absl::ConsumePrefix(&target, "dns:") && absl::ConsumePrefix(&target, "//")) {
    const size_t slash = target.find('/');  // dns://[authority]/host:port
    target = slash == absl::string_view::npos ? absl::string_view() : target.substr(slash + 1);
  }
  return std::string(target);
}

// "host:port" or "[v6]:port" -> (host, port); port empty when absent.
std::pair<std::string, std::string> SplitHostPort(absl::string_view hostport) {
  if (absl::ConsumePrefix(&hostport, "[")) {
    const size_t close = hostport.find(']');
    if (close == absl::string_view::npos) return {std::string(hostport), ""};
    absl::string_view rest = hostport.substr(close + 1);
    return {std::string(hostport.substr(0, close)),
            absl::ConsumePrefix(&rest, ":") ? std::string(rest) : ""};
  }
  if (std::count(hostport.begin(), hostport.end(), ':') == 1) {
    const size_t colon = hostport.find(':');
    return {std::string(hostport.substr(0, colon)), std::string(hostport.substr(colon + 1))};
  }
  return {std::string(hostport), ""};
}

}  // namespace

std::vector<std::string> TargetAddresses(const std::string& target) {
  for (absl::string_view scheme : {"ipv4:", "ipv6:"}) {
    if (!absl::StartsWith(target, scheme)) continue;
    std::vector<std::string> found;
    for (absl::string_view item : absl::StrSplit(target.substr(scheme.size()), ',', absl::SkipWhitespace())) {
      found.push_back(absl::StrCat(scheme, absl::StripAsciiWhitespace(item)));
    }
    return found.empty() ? std::vector<std::string>{target} : found;
  }
  const std::optional<std::string> hostport = HostPort(target);
  if (!hostport.has_value()) return {target};
  const auto [host, port] = SplitHostPort(*hostport);
  if (host.empty() || port.empty()) return {target};
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* infos = nullptr;
  if (getaddrinfo(host.c_str(), port.c_str(), &hints, &infos) != 0) return {target};
  bool any_v4 = false;
  for (const addrinfo* i = infos; i != nullptr; i = i->ai_next) any_v4 |= i->ai_family == AF_INET;
  std::vector<std::string> found;
  for (const addrinfo* i = infos; i != nullptr; i = i->ai_next) {
    char ip[INET6_ADDRSTRLEN] = {};
    std::string address;
    if (i->ai_family == AF_INET) {
      const auto* a = reinterpret_cast<const sockaddr_in*>(i->ai_addr);
      inet_ntop(AF_INET, &a->sin_addr, ip, sizeof(ip));
      address = absl::StrCat("ipv4:", ip, ":", ntohs(a->sin_port));
    } else if (i->ai_family == AF_INET6 && !any_v4) {
      const auto* a = reinterpret_cast<const sockaddr_in6*>(i->ai_addr);
      inet_ntop(AF_INET6, &a->sin6_addr, ip, sizeof(ip));
      address = absl::StrCat("ipv6:[", ip, "]:", ntohs(a->sin6_port));
    }
    if (!address.empty() && std::find(found.begin(), found.end(), address) == found.end()) {
      found.push_back(std::move(address));
    }
  }
  freeaddrinfo(infos);
  return found.empty() ? std::vector<std::string>{target} : found;
}

std::optional<std::string> TargetHost(const std::string& target) {
  const std::optional<std::string> hostport = HostPort(target);
  if (!hostport.has_value()) return std::nullopt;
  std::string host = SplitHostPort(*hostport).first;
  if (host.empty()) return std::nullopt;
  return host;
}

}  // namespace gpucompute::client
