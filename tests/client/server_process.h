// Test helpers that run real binaries: ServerProcess starts `gpucompute-server` on a free
// loopback port and stops it with SIGTERM; RunProcess runs a command to completion and captures
// its output. Header-only, POSIX, usable from any test (no GoogleTest dependency).
//
//   ASSERT_OK_AND_ASSIGN-style:
//     auto server = ServerProcess::Start({.binary = GPUCOMPUTE_SERVER_BIN});
//     ... (*server)->target() ...
//     absl::StatusOr<int> code = (*server)->Stop();   // exit code after SIGTERM
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

extern char** environ;

namespace gpucompute::test {

// A fresh directory under $TEST_TMPDIR, $TMPDIR or /tmp (left in place for post-mortems).
// The backend tests ask servers for: $GPUCOMPUTE_TEST_BACKEND, default cpu (the GPU machine
// runs the same tests with cuda).
inline std::string TestBackend() {
  const char* b = std::getenv("GPUCOMPUTE_TEST_BACKEND");
  return b != nullptr && *b != '\0' ? b : "cpu";
}

inline absl::StatusOr<std::string> MakeTempDir(const std::string& prefix = "gpucompute") {
  const char* base = std::getenv("TEST_TMPDIR");
  if (base == nullptr || *base == '\0') base = std::getenv("TMPDIR");
  if (base == nullptr || *base == '\0') base = "/tmp";
  std::string templ = absl::StrCat(base, "/", prefix, "-XXXXXX");
  if (mkdtemp(templ.data()) == nullptr) {
    return absl::InternalError(absl::StrCat("mkdtemp ", templ, ": ", std::strerror(errno)));
  }
  return templ;
}

inline std::string ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

namespace internal {

// posix_spawn of argv[0] (a path) with stdout and stderr sent to the given files.
inline absl::StatusOr<pid_t> Spawn(const std::vector<std::string>& argv,
                                   const std::string& stdout_path,
                                   const std::string& stderr_path) {
  if (argv.empty()) return absl::InvalidArgumentError("empty argv");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, stdout_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, stderr_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, argv[0].c_str(), &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    return absl::InternalError(absl::StrCat("spawn ", argv[0], ": ", std::strerror(rc)));
  }
  return pid;
}

// Waits for `pid` until `deadline`; returns its wait status, or DEADLINE_EXCEEDED (the process
// is left running).
inline absl::StatusOr<int> WaitUntil(pid_t pid, absl::Time deadline) {
  while (true) {
    int status = 0;
    const pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) return status;
    if (r < 0 && errno != EINTR) {
      return absl::InternalError(absl::StrCat("waitpid: ", std::strerror(errno)));
    }
    if (absl::Now() >= deadline) return absl::DeadlineExceededError("process still running");
    absl::SleepFor(absl::Milliseconds(10));
  }
}

inline std::string DescribeWaitStatus(int status) {
  if (WIFEXITED(status)) return absl::StrCat("exit code ", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return absl::StrCat("killed by signal ", WTERMSIG(status));
  return absl::StrCat("wait status ", status);
}

}  // namespace internal

struct ProcessResult {
  int exit_code = -1;    // -1 when killed by a signal
  int term_signal = 0;   // the signal, when killed by one
  std::string stdout_text;
  std::string stderr_text;
};

// Runs `argv` (argv[0] a path) to completion. DEADLINE_EXCEEDED, after SIGKILL, when it runs
// longer than `timeout`.
inline absl::StatusOr<ProcessResult> RunProcess(const std::vector<std::string>& argv,
                                                absl::Duration timeout = absl::Seconds(120)) {
  absl::StatusOr<std::string> dir = MakeTempDir("gpucompute-run");
  if (!dir.ok()) return dir.status();
  const std::string out_path = *dir + "/stdout", err_path = *dir + "/stderr";
  absl::StatusOr<pid_t> pid = internal::Spawn(argv, out_path, err_path);
  if (!pid.ok()) return pid.status();
  absl::StatusOr<int> status = internal::WaitUntil(*pid, absl::Now() + timeout);
  if (!status.ok()) {
    kill(*pid, SIGKILL);
    waitpid(*pid, nullptr, 0);
    return absl::DeadlineExceededError(absl::StrCat(
        absl::StrJoin(argv, " "), " ran longer than ", absl::FormatDuration(timeout),
        "; stderr:\n", ReadWholeFile(err_path)));
  }
  ProcessResult result;
  if (WIFEXITED(*status)) result.exit_code = WEXITSTATUS(*status);
  if (WIFSIGNALED(*status)) result.term_signal = WTERMSIG(*status);
  result.stdout_text = ReadWholeFile(out_path);
  result.stderr_text = ReadWholeFile(err_path);
  return result;
}

// A gpucompute-server child process listening on a free loopback port.
class ServerProcess {
 public:
  struct Options {
    std::string binary;                   // path of gpucompute-server
    std::string backend = "cpu";          // --backend
    std::vector<std::string> extra_args;  // more flags, e.g. "--kernel_cache_dir=..."
    std::string work_dir;                 // port file and log; empty: a fresh temp dir
    absl::Duration startup_timeout = absl::Seconds(60);
  };

  // Starts the server with --address=127.0.0.1:0 --port_file=<work_dir>/port and waits until
  // the port file holds a port. On failure the server is killed and the error carries its log.
  static absl::StatusOr<std::unique_ptr<ServerProcess>> Start(Options options) {
    if (options.work_dir.empty()) {
      absl::StatusOr<std::string> dir = MakeTempDir("gpucompute-server");
      if (!dir.ok()) return dir.status();
      options.work_dir = *dir;
    }
    const std::string port_file = options.work_dir + "/port";
    const std::string log_file = options.work_dir + "/server.log";
    ::unlink(port_file.c_str());
    std::vector<std::string> argv = {options.binary, "--address=127.0.0.1:0",
                                     "--port_file=" + port_file, "--backend=" + options.backend};
    argv.insert(argv.end(), options.extra_args.begin(), options.extra_args.end());
    absl::StatusOr<pid_t> pid = internal::Spawn(argv, log_file, log_file + ".stderr");
    if (!pid.ok()) return pid.status();
    std::unique_ptr<ServerProcess> server(new ServerProcess(*pid, log_file));

    const absl::Time deadline = absl::Now() + options.startup_timeout;
    long previous = -1;  // a port read without a trailing newline, confirmed by a second read
    while (true) {
      const std::string text = ReadWholeFile(port_file);
      char* end = nullptr;
      const long port = std::strtol(text.c_str(), &end, 10);
      if (end != text.c_str() && port > 0 && port < 65536) {
        if (*end == '\n' || *end == '\r' || (*end == '\0' && port == previous)) {
          server->port_ = static_cast<int>(port);
          return server;
        }
        previous = *end == '\0' ? port : -1;
      }
      int status = 0;
      if (waitpid(*pid, &status, WNOHANG) == *pid) {
        server->pid_ = -1;
        return absl::InternalError(absl::StrCat(
            "gpucompute-server exited during start-up (", internal::DescribeWaitStatus(status),
            "); log:\n", server->log()));
      }
      if (absl::Now() >= deadline) {
        return absl::DeadlineExceededError(absl::StrCat(
            "gpucompute-server wrote no port to ", port_file, " within ",
            absl::FormatDuration(options.startup_timeout), "; log:\n", server->log()));
      }
      absl::SleepFor(absl::Milliseconds(20));
    }
  }

  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  // Kills the server (SIGKILL) if Stop() was not called.
  ~ServerProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }

  int port() const { return port_; }
  std::string target() const { return absl::StrCat("127.0.0.1:", port_); }
  pid_t pid() const { return pid_; }
  // stdout and stderr of the server so far.
  std::string log() const {
    return absl::StrCat(ReadWholeFile(log_file_), ReadWholeFile(log_file_ + ".stderr"));
  }

  // Sends SIGTERM and waits for the exit. Returns the exit code; INTERNAL when the server died
  // of a signal, DEADLINE_EXCEEDED (after SIGKILL) when it did not stop within `timeout`.
  absl::StatusOr<int> Stop(absl::Duration timeout = absl::Seconds(30)) {
    if (pid_ <= 0) return absl::FailedPreconditionError("server not running");
    kill(pid_, SIGTERM);
    absl::StatusOr<int> status = internal::WaitUntil(pid_, absl::Now() + timeout);
    if (!status.ok()) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
      pid_ = -1;
      return absl::DeadlineExceededError(absl::StrCat("server did not stop within ",
                                                      absl::FormatDuration(timeout),
                                                      " of SIGTERM; log:\n", log()));
    }
    pid_ = -1;
    if (!WIFEXITED(*status)) {
      return absl::InternalError(absl::StrCat("server ", internal::DescribeWaitStatus(*status),
                                              " after SIGTERM; log:\n", log()));
    }
    return WEXITSTATUS(*status);
  }

 private:
  ServerProcess(pid_t pid, std::string log_file) : pid_(pid), log_file_(std::move(log_file)) {}

  pid_t pid_;
  int port_ = 0;
  std::string log_file_;
};

}  // namespace gpucompute::test
