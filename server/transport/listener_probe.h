// Watches that the service port still accepts connections. gRPC stops accepting for good when
// accept() fails with EMFILE (every descriptor taken, e.g. by many idle connections): the
// kernel still completes connections into the listen backlog, the process looks alive, and
// health on connections already open says SERVING, while no new client is ever served. A
// thread connects to the port every `period` and sends the HTTP/2 client preface: a server that
// accepted the connection answers (its SETTINGS, a TLS alert, or a close) within `period`. After
// three probes in a row without an answer (or refused), `on_lost` is called once (the server
// turns health NOT_SERVING, so that the orchestrator restarts it). A probe that cannot even make
// its socket (no descriptor left) proves nothing and does not count.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace gpucompute {

class ListenerProbe {
 public:
  // The probe of the port bound for `address` (as the server was given it), or null when
  // there is nothing to probe: a Unix-socket address, or a zero `period`. When the port is
  // lost it logs so, naming `what` ("the service port", "the front's port"), then calls
  // `on_lost`.
  static std::unique_ptr<ListenerProbe> Watch(const std::string& address, int port,
                                              absl::Duration period, const std::string& what,
                                              std::function<void()> on_lost);

  // `host` as the server was given it ("0.0.0.0", "[::]" and "" probe the loopback address);
  // nothing is probed for Unix-socket addresses.
  ListenerProbe(std::string host, int port, absl::Duration period, std::function<void()> on_lost);
  ~ListenerProbe();  // stops the thread
  ListenerProbe(const ListenerProbe&) = delete;
  ListenerProbe& operator=(const ListenerProbe&) = delete;

 private:
  void Run();

  const std::string host_;
  const int port_;
  const absl::Duration period_;
  const std::function<void()> on_lost_;
  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

// What one probe of `host`:`port` found.
enum class ProbeResult { kAccepting, kUnanswered, kUnknown };
ProbeResult ProbePort(const std::string& host, int port, absl::Duration timeout);

}  // namespace gpucompute
