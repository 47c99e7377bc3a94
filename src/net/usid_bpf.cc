// The eBPF uN data plane's loader (net/usid_bpf.h).
#include "net/usid_bpf.h"

#include <net/if.h>
#include <unistd.h>

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>

#include "net/netns_exec.h"

#if MRC_HAVE_BPF
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

// The compiled program (cmake/embed_file.cmake).
extern const unsigned char mrc_usid_end_bpf_object[];
extern const std::size_t mrc_usid_end_bpf_object_size;
#endif

namespace mrc::net {

namespace {

std::unexpected<NetError> bpf_error(std::string msg) {
  return net_fail(NetErrc::kSystem, std::move(msg));
}

}  // namespace

#if MRC_HAVE_BPF

namespace {

// Must match src/net/bpf/usid_end.bpf.c.
constexpr int kSidBytes = 6;
struct UsidConfig {
  uint8_t sid[kSidBytes];
  uint8_t valid;
  uint8_t pad;
};
constexpr int kCounters = 3;
// The tc filter's handle and priority: one filter of ours per interface.
constexpr uint32_t kTcHandle = 1;
constexpr uint32_t kTcPriority = 1;

// libbpf's messages go to this thread's buffer while one of our calls runs, so that an error
// can say what the verifier or the kernel said; the rest of the time they are dropped.
thread_local std::string* t_libbpf_log = nullptr;

int collect_libbpf_message(enum libbpf_print_level level, const char* format, va_list args) {
  if (!t_libbpf_log || level == LIBBPF_DEBUG) return 0;
  char line[512];
  const int n = std::vsnprintf(line, sizeof line, format, args);
  if (n > 0 && t_libbpf_log->size() < 4096) *t_libbpf_log += line;
  return 0;
}

class LibbpfLog {
 public:
  LibbpfLog() {
    libbpf_set_print(collect_libbpf_message);
    t_libbpf_log = &text_;
  }
  ~LibbpfLog() { t_libbpf_log = nullptr; }
  LibbpfLog(const LibbpfLog&) = delete;
  LibbpfLog& operator=(const LibbpfLog&) = delete;
  // "(libbpf: ...)" or empty.
  std::string said() const {
    std::string t = text_;
    while (!t.empty() && (t.back() == '\n' || t.back() == ' '))
      t.pop_back();
    return t.empty() ? "" : " (" + t + ")";
  }

 private:
  std::string text_;
};

std::string errno_text(int err) {
  return std::strerror(err < 0 ? -err : err);
}

// What to do when the kernel refuses the BPF syscall.
std::string privilege_hint(int err) {
  if (err == -EPERM || err == EPERM)
    return ": loading eBPF programs needs root (CAP_BPF and CAP_NET_ADMIN)";
  if (err == -ENOSYS || err == ENOSYS)
    return ": the kernel has no bpf() system call (CONFIG_BPF_SYSCALL)";
  return "";
}

NetResult<UsidBpfCounters> read_counters(int stats_fd) {
  const int cpus = libbpf_num_possible_cpus();
  if (cpus <= 0) return bpf_error("cannot count the possible CPUs: " + errno_text(cpus));
  std::vector<uint64_t> values(static_cast<size_t>(cpus));
  uint64_t sums[kCounters] = {};
  for (uint32_t key = 0; key < uint32_t(kCounters); ++key) {
    if (bpf_map_lookup_elem(stats_fd, &key, values.data()) != 0)
      return bpf_error("reading the uN counters: " + errno_text(errno));
    for (uint64_t v : values)
      sums[key] += v;
  }
  return UsidBpfCounters{sums[0], sums[1], sums[2]};
}

// Fills `hook` with the clsact ingress hook of `ifname` in the current namespace (`ns` names
// it in errors). In place, zeroed byte by byte: libbpf refuses options whose padding is not
// zero, and a copy of the struct need not keep it so.
NetStatus ingress_hook(bpf_tc_hook& hook, const std::string& ns, const std::string& ifname) {
  const unsigned index = if_nametoindex(ifname.c_str());
  if (index == 0) return bpf_error(ns + ": interface " + ifname + ": " + errno_text(errno));
  std::memset(&hook, 0, sizeof hook);
  hook.sz = sizeof hook;
  hook.ifindex = int(index);
  hook.attach_point = BPF_TC_INGRESS;
  return {};
}

}  // namespace

struct UsidEndProgram::Impl {
  bpf_object* object = nullptr;
  int prog_fd = -1;
  int stats_fd = -1;
  ~Impl() {
    if (object) bpf_object__close(object);
  }
};

bool usid_bpf_built() {
  return true;
}

NetResult<UsidEndProgram> UsidEndProgram::load(const wire::Ipv6Addr& sid) {
  LibbpfLog log;
  auto impl = std::make_unique<Impl>();
  bpf_object_open_opts opts;
  std::memset(&opts, 0, sizeof opts);  // libbpf checks the padding
  opts.sz = sizeof opts;
  opts.object_name = "mrc_usid_end";
  impl->object = bpf_object__open_mem(mrc_usid_end_bpf_object, mrc_usid_end_bpf_object_size, &opts);
  if (!impl->object)
    return bpf_error("cannot open the uN eBPF object: " + errno_text(errno) + log.said());
  if (const int err = bpf_object__load(impl->object); err != 0)
    return bpf_error("the kernel refused the uN eBPF program: " + errno_text(err) +
                     privilege_hint(err) + log.said());
  bpf_program* prog = bpf_object__find_program_by_name(impl->object, "usid_end");
  bpf_map* config = bpf_object__find_map_by_name(impl->object, "usid_config");
  bpf_map* stats = bpf_object__find_map_by_name(impl->object, "usid_stats");
  if (!prog || !config || !stats)
    return bpf_error("the uN eBPF object lacks its program or maps (a build problem)");
  impl->prog_fd = bpf_program__fd(prog);
  impl->stats_fd = bpf_map__fd(stats);
  UsidConfig value{};
  std::memcpy(value.sid, sid.data(), kSidBytes);
  value.valid = 1;
  const uint32_t key = 0;
  if (bpf_map_update_elem(bpf_map__fd(config), &key, &value, BPF_ANY) != 0)
    return bpf_error("cannot write the switch's SID into the uN program: " + errno_text(errno));
  return UsidEndProgram(std::move(impl));
}

NetStatus UsidEndProgram::attach(const std::string& ns,
                                 const std::vector<std::string>& interfaces) const {
  return in_netns(ns, [&]() -> NetStatus {
    LibbpfLog log;
    for (const auto& ifname : interfaces) {
      bpf_tc_hook hook;
      if (auto ok = ingress_hook(hook, ns, ifname); !ok) return ok;
      if (const int err = bpf_tc_hook_create(&hook); err != 0 && err != -EEXIST)
        return bpf_error(ns + ": clsact qdisc on " + ifname + ": " + errno_text(err) +
                         " (the kernel needs CONFIG_NET_SCH_INGRESS)" + log.said());
      bpf_tc_opts tc;
      std::memset(&tc, 0, sizeof tc);  // libbpf checks the padding
      tc.sz = sizeof tc;
      tc.prog_fd = impl_->prog_fd;
      tc.handle = kTcHandle;
      tc.priority = kTcPriority;
      tc.flags = BPF_TC_F_REPLACE;
      if (const int err = bpf_tc_attach(&hook, &tc); err != 0)
        return bpf_error(ns + ": attaching the uN program to " + ifname + ": " + errno_text(err) +
                         " (the kernel needs CONFIG_NET_CLS_BPF)" + log.said());
    }
    return {};
  });
}

NetResult<UsidBpfRun> UsidEndProgram::run(const std::vector<uint8_t>& frame) const {
  UsidBpfRun out;
  out.frame.resize(frame.size() + 256);
  bpf_test_run_opts opts;
  std::memset(&opts, 0, sizeof opts);  // libbpf checks the padding
  opts.sz = sizeof opts;
  opts.data_in = frame.data();
  opts.data_size_in = uint32_t(frame.size());
  opts.data_out = out.frame.data();
  opts.data_size_out = uint32_t(out.frame.size());
  opts.repeat = 1;
  if (const int err = bpf_prog_test_run_opts(impl_->prog_fd, &opts); err != 0)
    return bpf_error("BPF_PROG_TEST_RUN: " + errno_text(err));
  out.verdict = int(opts.retval);
  out.frame.resize(opts.data_size_out);
  return out;
}

NetResult<UsidBpfCounters> UsidEndProgram::counters() const {
  return read_counters(impl_->stats_fd);
}

NetResult<UsidBpfCounters> attached_usid_counters(const std::string& ns,
                                                  const std::string& interface) {
  UsidBpfCounters result;
  auto ok = in_netns(ns, [&]() -> NetStatus {
    bpf_tc_hook hook;
    if (auto ok = ingress_hook(hook, ns, interface); !ok) return ok;
    bpf_tc_opts tc;
    std::memset(&tc, 0, sizeof tc);  // libbpf checks the padding
    tc.sz = sizeof tc;
    tc.handle = kTcHandle;
    tc.priority = kTcPriority;
    if (const int err = bpf_tc_query(&hook, &tc); err != 0)
      return bpf_error(ns + ": no uN program on " + interface + ": " + errno_text(err));
    const int prog = bpf_prog_get_fd_by_id(tc.prog_id);
    if (prog < 0)
      return bpf_error("uN program " + std::to_string(tc.prog_id) + ": " + errno_text(errno));
    uint32_t map_ids[8] = {};
    bpf_prog_info info;
    std::memset(&info, 0, sizeof info);  // libbpf checks the padding
    info.nr_map_ids = 8;
    info.map_ids = reinterpret_cast<uint64_t>(map_ids);
    uint32_t len = sizeof info;
    const int got = bpf_obj_get_info_by_fd(prog, &info, &len);
    close(prog);
    if (got != 0) return bpf_error("uN program info: " + errno_text(errno));
    for (uint32_t i = 0; i < info.nr_map_ids && i < 8; ++i) {
      const int map = bpf_map_get_fd_by_id(map_ids[i]);
      if (map < 0) continue;
      bpf_map_info minfo;
      std::memset(&minfo, 0, sizeof minfo);  // libbpf checks the padding
      uint32_t mlen = sizeof minfo;
      if (bpf_obj_get_info_by_fd(map, &minfo, &mlen) == 0 &&
          std::strcmp(minfo.name, "usid_stats") == 0) {
        auto c = read_counters(map);
        close(map);
        if (!c) return std::unexpected(c.error());
        result = *c;
        return {};
      }
      close(map);
    }
    return bpf_error(ns + ": the program on " + interface + " is not mrc-fabric's uN program");
  });
  if (!ok) return std::unexpected(ok.error());
  return result;
}

#else  // built without clang's BPF target or libbpf

struct UsidEndProgram::Impl {};

bool usid_bpf_built() {
  return false;
}

namespace {
std::unexpected<NetError> not_built() {
  return bpf_error(
      "this build has no eBPF data plane (clang or libbpf-dev were missing at build time: "
      "run scripts/setup.sh)");
}
}  // namespace

NetResult<UsidEndProgram> UsidEndProgram::load(const wire::Ipv6Addr&) {
  return not_built();
}
NetStatus UsidEndProgram::attach(const std::string&, const std::vector<std::string>&) const {
  return not_built();
}
NetResult<UsidBpfRun> UsidEndProgram::run(const std::vector<uint8_t>&) const {
  return not_built();
}
NetResult<UsidBpfCounters> UsidEndProgram::counters() const {
  return not_built();
}
NetResult<UsidBpfCounters> attached_usid_counters(const std::string&, const std::string&) {
  return not_built();
}

#endif

UsidEndProgram::UsidEndProgram(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
UsidEndProgram::UsidEndProgram(UsidEndProgram&&) noexcept = default;
UsidEndProgram& UsidEndProgram::operator=(UsidEndProgram&&) noexcept = default;
UsidEndProgram::~UsidEndProgram() = default;

}  // namespace mrc::net
