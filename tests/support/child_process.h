// A program run by a test as a child process, its stdout and stderr in one file, optionally
// inside a named network namespace (/run/netns/<name>): the tests that run tools end to end.
#pragma once

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace mrc::test {

struct ChildProcess {
  using Clock = std::chrono::steady_clock;
  pid_t pid = -1;
  std::string out_path;
  std::optional<int> exit_code;  // set once reaped (128 + signal when killed)

  bool running() {
    if (exit_code) return false;
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) != pid) return true;
    exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return false;
  }
  // Waits up to `timeout`; then kills it. Returns the exit code.
  int wait(Clock::duration timeout) {
    const auto deadline = Clock::now() + timeout;
    while (running() && Clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (running()) {
      kill(pid, SIGKILL);
      int status = 0;
      waitpid(pid, &status, 0);
      exit_code = 128 + SIGKILL;
    }
    return *exit_code;
  }
  std::string output() const {
    std::ifstream in(out_path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  // Waits until the output contains `text`; false if the process ended or time ran out.
  bool wait_for_output(const std::string& text, Clock::duration timeout) {
    const auto deadline = Clock::now() + timeout;
    while (Clock::now() < deadline) {
      if (output().find(text) != std::string::npos) return true;
      if (!running()) return output().find(text) != std::string::npos;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return false;
  }
};

// Starts argv[0] (a path) with argv, output to `out_path`, in namespace `netns` unless empty.
// Exit code 126: the namespace or the output file could not be opened; 127: exec failed.
inline ChildProcess spawn(const std::vector<std::string>& argv, const std::string& out_path,
                          const std::string& netns = "") {
  ChildProcess c;
  c.out_path = out_path;
  c.pid = fork();
  if (c.pid == 0) {
    if (!netns.empty()) {
      const int nsfd = open(("/run/netns/" + netns).c_str(), O_RDONLY | O_CLOEXEC);
      if (nsfd < 0 || setns(nsfd, CLONE_NEWNET) != 0) _exit(126);
    }
    const int out = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (out < 0) _exit(126);
    dup2(out, 1);
    dup2(out, 2);
    std::vector<char*> args;
    for (const auto& a : argv)
      args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  return c;
}

}  // namespace mrc::test
