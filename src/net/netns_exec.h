// Commands and sockets inside network namespaces (root), for mrc-fabric and its tests.
//
// A command runs in a child: fork, setns into the namespace's /run/netns file, execv; never a
// shell (every argument is a name or address mrc-fabric made). Input and output go through
// anonymous memory files, so many children run side by side without a poll loop and none can
// block on a full pipe. Sockets are created inside a namespace by entering it on the calling
// thread and coming back (a socket stays in the namespace it was created in).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "net/fabric.h"
#include "net/sockets.h"

namespace mrc::net {

struct CommandOutput {
  int exit_code = 0;
  std::string out;
  std::string err;
};

// fork + (setns into `netns` when not empty) + execv; stdin from `input`, output captured.
// `ip`, `tc` and `nft` are also looked up in /usr/sbin and /sbin.
NetResult<CommandOutput> run_command(const std::vector<std::string>& argv,
                                     std::string_view input = {}, std::string_view netns = {});
// The same, but a non-zero exit is an error carrying the command and its stderr.
NetStatus run_checked(const std::vector<std::string>& argv, std::string_view input = {},
                      std::string_view netns = {});

// One unit of work run in a child process: a command (argv), or when argv is empty, sysctl
// writes. Both inside `netns` when it is set.
struct Job {
  std::string netns;
  std::vector<std::string> argv;
  std::string input;
  std::vector<Sysctl> sysctls;

  std::string what() const;  // "ip -batch - (in f-h0)"
};

// Runs jobs side by side, at most `parallel` at a time (namespaces are independent; on a
// loaded machine a process start costs 10-30 ms, so a serial `up` would take seconds).
// Every job's output, in job order; a job that could not be started has an error. With
// `stop_on_failure`, no job is started after one has failed (those say "not run").
std::vector<NetResult<CommandOutput>> run_jobs_collect(const std::vector<Job>& jobs,
                                                       bool stop_on_failure, size_t parallel = 8);
// The same, stopping at the first failure, which it returns.
NetStatus run_jobs(const std::vector<Job>& jobs);

// `ip -batch` inside `ns` (entered by setns in the child: `ip -n` would also build a private
// mount namespace and remount /sys, about 10 ms per call that link flapping cannot afford).
// `force`: go on after a failing line.
NetStatus ip_batch(const std::string& ns, const std::vector<std::string>& lines,
                   bool force = false);

// The names under /run/netns, sorted.
std::vector<std::string> list_netns();

// Runs `work` inside `ns` on the calling thread (setns there and back): sockets, netlink and
// tc attachments it makes belong to `ns`.
NetStatus in_netns(const std::string& ns, const std::function<NetStatus()>& work);
// A socket that lives in `ns`: enter the namespace on this thread, open, come back.
NetResult<int> socket_in_netns(const std::string& ns,
                               const std::function<NetResult<int>()>& open_socket);
// A non-blocking UDP/IPv6 socket in `ns`.
NetResult<int> udp_socket_in_netns(const std::string& ns);

// Interface state by ioctl on a socket of the interface's namespace.
NetResult<int> interface_index(int sock, const std::string& ifname);
NetResult<bool> interface_is_up(int sock, const std::string& ifname);       // IFF_UP
NetResult<bool> interface_is_running(int sock, const std::string& ifname);  // IFF_RUNNING
NetStatus set_interface_up(int sock, const std::string& ifname, bool up);

// Text functions for command lines and tool output.
std::string join_args(const std::vector<std::string>& parts, std::string_view sep = " ");
std::string joined_lines(const std::vector<std::string>& lines);  // each line + '\n'
std::string trimmed(std::string s);                               // trailing blanks, newlines

}  // namespace mrc::net
