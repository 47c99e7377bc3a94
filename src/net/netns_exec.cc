// Commands and sockets inside network namespaces (net/netns_exec.h): fork + setns + exec,
// never a shell.
#include "net/netns_exec.h"

#include <fcntl.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <sstream>

namespace mrc::net {

namespace fs = std::filesystem;

namespace {

std::unexpected<NetError> exec_error(std::string msg) {
  return net_fail(NetErrc::kSystem, std::move(msg));
}

}  // namespace

namespace {

// `ip`, `tc` and `nft` live in /usr/sbin, which a non-login root shell's PATH may lack.
std::string resolve_tool(const std::string& name) {
  if (name.find('/') != std::string::npos) return name;
  std::string path = getenv("PATH") ? getenv("PATH") : "";
  path += ":/usr/sbin:/sbin:/usr/bin:/bin";
  std::stringstream ss(path);
  std::string dir;
  while (std::getline(ss, dir, ':')) {
    if (dir.empty()) continue;
    const std::string candidate = dir + "/" + name;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return name;
}

// Writes a child's complaint to its stderr without allocating (after fork).
void child_complain(const char* what, const char* detail) {
  const char* err = strerror(errno);
  for (const char* s : {what, " ", detail, ": ", err, "\n"}) {
    if (write(2, s, strlen(s)) < 0) break;
  }
}

int enter_netns(const std::string& netns) {
  const std::string path = "/run/netns/" + netns;
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  const int rc = setns(fd, CLONE_NEWNET);
  close(fd);
  return rc;
}

// A child's stdin, stdout and stderr are anonymous memory files, not pipes: the parent writes
// the whole input before the fork and reads the output after the exit, so children can run
// side by side without a poll loop and none can block on a full pipe.
int memfd_with(std::string_view data) {
  const int fd = memfd_create("mrc-fabric", MFD_CLOEXEC);
  if (fd < 0) return -1;
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t w = write(fd, data.data() + done, data.size() - done);
    if (w <= 0) {
      close(fd);
      return -1;
    }
    done += size_t(w);
  }
  lseek(fd, 0, SEEK_SET);
  return fd;
}

std::string read_memfd(int fd) {
  std::string out;
  char buf[8192];
  off_t off = 0;
  while (true) {
    const ssize_t r = pread(fd, buf, sizeof buf, off);
    if (r <= 0) break;
    out.append(buf, size_t(r));
    off += r;
  }
  return out;
}

struct Spawned {
  pid_t pid = -1;
  int out_fd = -1;
  int err_fd = -1;
};

// fork and run `child` (which returns an exit code or execs) with `input` on its stdin.
template <typename ChildFn>
NetResult<Spawned> spawn_child(ChildFn child, std::string_view input, const std::string& what) {
  const int in = memfd_with(input);
  const int out = memfd_with({});
  const int err = memfd_with({});
  if (in < 0 || out < 0 || err < 0) {
    for (int fd : {in, out, err})
      if (fd >= 0) close(fd);
    return exec_error(what + ": memfd: " + strerror(errno));
  }
  const pid_t pid = fork();
  if (pid < 0) {
    for (int fd : {in, out, err})
      close(fd);
    return exec_error(what + ": fork: " + strerror(errno));
  }
  if (pid == 0) {
    dup2(in, 0);
    dup2(out, 1);
    dup2(err, 2);
    _exit(child());
  }
  close(in);
  return Spawned{pid, out, err};
}

CommandOutput wait_child(const Spawned& s) {
  int status = 0;
  while (waitpid(s.pid, &status, 0) < 0 && errno == EINTR) {
  }
  CommandOutput result;
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  result.out = read_memfd(s.out_fd);
  result.err = read_memfd(s.err_fd);
  close(s.out_fd);
  close(s.err_fd);
  return result;
}

template <typename ChildFn>
NetResult<CommandOutput> run_child(ChildFn child, std::string_view input, const std::string& what) {
  auto s = spawn_child(child, input, what);
  if (!s) return std::unexpected(s.error());
  return wait_child(*s);
}

// Everything a job's child needs, allocated before the fork.
struct PreparedJob {
  const Job* job = nullptr;
  std::string tool;
  std::vector<char*> cargv;
  std::vector<std::string> paths;  // /proc/sys/... for each sysctl

  explicit PreparedJob(const Job& j) : job(&j) {
    if (!j.argv.empty()) {
      tool = resolve_tool(j.argv[0]);
      for (const auto& a : j.argv)
        cargv.push_back(const_cast<char*>(a.c_str()));
      cargv.push_back(nullptr);
    }
    for (const auto& s : j.sysctls) {
      // /proc/sys/net shows the network namespace of the task that opens it: the child
      // writes after entering `netns`.
      std::string path = "/proc/sys/" + s.key;
      std::replace(path.begin() + 10, path.end(), '.', '/');
      paths.push_back(std::move(path));
    }
  }

  int run_in_child() {
    if (!job->netns.empty() && enter_netns(job->netns) != 0) {
      child_complain("setns", job->netns.c_str());
      return 126;
    }
    if (!cargv.empty()) {
      execv(tool.c_str(), cargv.data());
      child_complain("exec", tool.c_str());
      return 127;
    }
    for (size_t i = 0; i < paths.size(); ++i) {
      const Sysctl& s = job->sysctls[i];
      const int fd = open(paths[i].c_str(), O_WRONLY | O_CLOEXEC);
      if (fd < 0) {
        if (s.optional && errno == ENOENT) continue;
        child_complain("open", paths[i].c_str());
        return 1;
      }
      const bool ok = write(fd, s.value.data(), s.value.size()) == ssize_t(s.value.size());
      close(fd);
      if (!ok && !s.optional) {
        child_complain("write", paths[i].c_str());
        return 1;
      }
    }
    return 0;
  }
};

}  // namespace

std::string join_args(const std::vector<std::string>& parts, std::string_view sep) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i) out += sep;
    out += parts[i];
  }
  return out;
}

std::string joined_lines(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) {
    out += l;
    out += '\n';
  }
  return out;
}

std::string trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' '))
    s.pop_back();
  return s;
}

std::string Job::what() const {
  std::string w = argv.empty() ? "sysctl" : join_args(argv);
  if (!netns.empty()) w += " (in " + netns + ")";
  return w;
}

std::vector<NetResult<CommandOutput>> run_jobs_collect(const std::vector<Job>& jobs,
                                                       bool stop_on_failure, size_t parallel) {
  std::vector<PreparedJob> prepared;
  prepared.reserve(jobs.size());
  for (const auto& j : jobs)
    prepared.emplace_back(j);
  std::vector<NetResult<CommandOutput>> results(jobs.size(),
                                                exec_error("not run (an earlier job failed)"));
  std::vector<std::pair<size_t, Spawned>> running;
  bool failed = false;
  const auto reap_one = [&] {
    const auto [index, spawned] = running.front();
    running.erase(running.begin());
    results[index] = wait_child(spawned);
    failed = failed || results[index]->exit_code != 0;
  };
  for (size_t i = 0; i < prepared.size(); ++i) {
    if (running.size() >= parallel) reap_one();
    if (stop_on_failure && failed) break;
    auto s = spawn_child([&] { return prepared[i].run_in_child(); }, jobs[i].input, jobs[i].what());
    if (!s) {
      results[i] = std::unexpected(s.error());
      failed = true;
      continue;
    }
    running.emplace_back(i, *s);
  }
  while (!running.empty())
    reap_one();
  return results;
}

NetStatus run_jobs(const std::vector<Job>& jobs) {
  const auto results = run_jobs_collect(jobs, /*stop_on_failure=*/true);
  for (size_t i = 0; i < jobs.size(); ++i) {
    if (!results[i]) {
      if (results[i].error().message.starts_with("not run")) continue;
      return std::unexpected(results[i].error());
    }
    if (results[i]->exit_code != 0)
      return exec_error(jobs[i].what() + " exited with " + std::to_string(results[i]->exit_code) +
                        ": " + trimmed(results[i]->err + results[i]->out));
  }
  return {};
}

NetResult<CommandOutput> run_command(const std::vector<std::string>& argv, std::string_view input,
                                     std::string_view netns) {
  if (argv.empty()) return exec_error("run_command: empty argv");
  const Job job{std::string(netns), argv, {}, {}};
  PreparedJob prepared(job);
  return run_child([&] { return prepared.run_in_child(); }, input, job.what());
}

NetStatus run_checked(const std::vector<std::string>& argv, std::string_view input,
                      std::string_view netns) {
  auto r = run_command(argv, input, netns);
  if (!r) return std::unexpected(r.error());
  if (r->exit_code != 0) {
    std::string msg = join_args(argv);
    if (!netns.empty()) msg += " (in " + std::string(netns) + ")";
    msg += " exited with " + std::to_string(r->exit_code) + ": " + trimmed(r->err + r->out);
    return exec_error(msg);
  }
  return {};
}

NetStatus ip_batch(const std::string& ns, const std::vector<std::string>& lines, bool force) {
  std::vector<std::string> argv{"ip"};
  if (force) argv.push_back("-force");
  argv.insert(argv.end(), {"-batch", "-"});
  return run_checked(argv, joined_lines(lines), ns);
}

std::vector<std::string> list_netns() {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/run/netns", ec))
    out.push_back(e.path().filename());
  std::sort(out.begin(), out.end());
  return out;
}

NetStatus in_netns(const std::string& ns, const std::function<NetStatus()>& work) {
  const int self = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
  if (self < 0) return exec_error(std::string("open own netns: ") + strerror(errno));
  const std::string path = "/run/netns/" + ns;
  const int target = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (target < 0) {
    close(self);
    return exec_error("open " + path + ": " + strerror(errno));
  }
  NetStatus result;
  if (setns(target, CLONE_NEWNET) != 0) {
    result = exec_error("setns " + ns + ": " + strerror(errno));
  } else {
    result = work();
    if (setns(self, CLONE_NEWNET) != 0) {
      // Stuck in the wrong namespace: nothing after this could be trusted.
      std::perror("setns back to the original network namespace");
      std::abort();
    }
  }
  close(self);
  close(target);
  return result;
}

NetResult<int> socket_in_netns(const std::string& ns,
                               const std::function<NetResult<int>()>& open_socket) {
  int fd = -1;
  auto ok = in_netns(ns, [&]() -> NetStatus {
    auto opened = open_socket();
    if (!opened) return std::unexpected(opened.error());
    fd = *opened;
    return {};
  });
  if (!ok) return exec_error(ok.error().message);
  return fd;
}

NetResult<int> udp_socket_in_netns(const std::string& ns) {
  return socket_in_netns(ns, []() -> NetResult<int> {
    const int fd = socket(AF_INET6, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return exec_error(std::string("socket: ") + strerror(errno));
    return fd;
  });
}

NetResult<int> interface_index(int sock, const std::string& ifname) {
  ifreq ifr{};
  std::snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "%s", ifname.c_str());
  if (ioctl(sock, SIOCGIFINDEX, &ifr) != 0)
    return exec_error("interface " + ifname + ": " + strerror(errno));
  return ifr.ifr_ifindex;
}

static NetResult<short> interface_flags(int sock, const std::string& ifname) {
  ifreq ifr{};
  std::snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "%s", ifname.c_str());
  if (ioctl(sock, SIOCGIFFLAGS, &ifr) != 0)
    return exec_error("interface " + ifname + ": " + strerror(errno));
  return ifr.ifr_flags;
}

NetResult<bool> interface_is_up(int sock, const std::string& ifname) {
  auto flags = interface_flags(sock, ifname);
  if (!flags) return std::unexpected(flags.error());
  return (*flags & IFF_UP) != 0;
}

NetResult<bool> interface_is_running(int sock, const std::string& ifname) {
  auto flags = interface_flags(sock, ifname);
  if (!flags) return std::unexpected(flags.error());
  return (*flags & IFF_RUNNING) != 0;
}

NetStatus set_interface_up(int sock, const std::string& ifname, bool up) {
  auto flags = interface_flags(sock, ifname);
  if (!flags) return std::unexpected(flags.error());
  ifreq ifr{};
  std::snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "%s", ifname.c_str());
  ifr.ifr_flags = *flags;
  if (up)
    ifr.ifr_flags = short(ifr.ifr_flags | IFF_UP);
  else
    ifr.ifr_flags = short(ifr.ifr_flags & ~IFF_UP);
  if (ioctl(sock, SIOCSIFFLAGS, &ifr) != 0)
    return exec_error("set " + ifname + (up ? " up: " : " down: ") + strerror(errno));
  return {};
}

}  // namespace mrc::net
