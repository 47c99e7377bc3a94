#include "api/node_state.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace mrc::api {

namespace {

std::string segment_name() {
  const char* env = std::getenv("MRC_SOFT_SHM");
  std::string name = env && *env ? env : "/mrc_soft0";
  if (name[0] != '/') name = "/" + name;
  return name;
}

// Field 22 of /proc/PID/stat (start time in clock ticks since boot); 0 if unreadable.
uint64_t start_time(pid_t pid) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/stat", static_cast<int>(pid));
  FILE* f = std::fopen(path, "r");
  if (!f) return 0;
  char buf[1024];
  const size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  buf[n] = 0;
  const char* p = std::strrchr(buf, ')');  // the command name may contain spaces
  if (!p) return 0;
  int field = 2;
  for (++p; *p && field < 22; ++p)
    if (*p == ' ') ++field;
  return std::strtoull(p, nullptr, 10);
}

// `start` = 0: unknown (not checked).
bool process_alive(pid_t pid, uint64_t start) {
  if (pid <= 0) return false;
  if (::kill(pid, 0) != 0 && errno != EPERM) return false;
  if (start == 0) return true;
  const uint64_t now = start_time(pid);
  return now == 0 || now == start;
}

}  // namespace

std::unique_ptr<NodeState> NodeState::open_shared() {
  const std::string name = segment_name();
  const int fd = ::shm_open(name.c_str(), O_RDWR | O_CREAT, 0666);
  if (fd < 0) return nullptr;
  // Initialisation is serialised by flock on the segment's descriptor, so two processes
  // opening a fresh segment at once do not both initialise it.
  ::flock(fd, LOCK_EX);
  struct stat st {};
  ::fstat(fd, &st);
  const bool fresh = static_cast<size_t>(st.st_size) < sizeof(NodeStateLayout);
  if (fresh && ::ftruncate(fd, sizeof(NodeStateLayout)) != 0) {
    const int err = errno;
    ::flock(fd, LOCK_UN);
    ::close(fd);
    errno = err;
    return nullptr;
  }
  void* p = ::mmap(nullptr, sizeof(NodeStateLayout), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    const int err = errno;
    ::flock(fd, LOCK_UN);
    ::close(fd);
    errno = err;
    return nullptr;
  }
  auto* layout = static_cast<NodeStateLayout*>(p);
  if (layout->magic != kNodeStateMagic || layout->size != sizeof(NodeStateLayout)) {
    std::memset(static_cast<void*>(layout), 0, sizeof(NodeStateLayout));
    pthread_mutexattr_t attr;
    pthread_mutexattr_init(&attr);
    pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
    pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST);
    pthread_mutex_init(&layout->lock, &attr);
    pthread_mutexattr_destroy(&attr);
    layout->size = sizeof(NodeStateLayout);
    layout->magic = kNodeStateMagic;
  }
  ::flock(fd, LOCK_UN);
  ::close(fd);
  std::unique_ptr<NodeState> s(new NodeState());
  s->layout_ = layout;
  return s;
}

void NodeState::lock() {
  if (pthread_mutex_lock(&layout_->lock) == EOWNERDEAD) pthread_mutex_consistent(&layout_->lock);
}

void NodeState::unlock() {
  pthread_mutex_unlock(&layout_->lock);
}

int NodeState::take_slot(pid_t pid) {
  NodeLock guard(*this);
  reclaim_dead_slots();
  for (uint32_t s = 0; s < kMaxSlots; ++s) {
    if (layout_->slot_pid[s] == 0) {
      layout_->slot_pid[s] = pid;
      layout_->slot_start[s] = start_time(pid);
      return static_cast<int>(s);
    }
  }
  return -1;
}

void NodeState::release_slot(int slot) {
  if (slot < 0 || slot >= static_cast<int>(kMaxSlots)) return;
  NodeLock guard(*this);
  layout_->slot_pid[slot] = 0;
  layout_->slot_start[slot] = 0;
}

void NodeState::reclaim_dead_slots() {
  NodeStateLayout& s = *layout_;
  for (uint32_t slot = 0; slot < kMaxSlots; ++slot) {
    if (s.slot_pid[slot] == 0 || process_alive(s.slot_pid[slot], s.slot_start[slot])) continue;
    for (auto& p : s.ev) {
      p.active_qps -= std::min<uint32_t>(p.active_qps, p.slot_qps[slot]);
      p.slot_qps[slot] = 0;
    }
    for (auto& p : s.cc) {
      p.active_qps -= std::min<uint32_t>(p.active_qps, p.slot_qps[slot]);
      p.slot_qps[slot] = 0;
    }
    s.slot_pid[slot] = 0;
    s.slot_start[slot] = 0;
  }
}

void NodeState::add_qp_ref(uint32_t& active, uint16_t* slot_qps, int slot) {
  ++active;
  if (slot >= 0 && slot < static_cast<int>(kMaxSlots)) ++slot_qps[slot];
}

void NodeState::drop_qp_ref(uint32_t& active, uint16_t* slot_qps, int slot) {
  if (active > 0) --active;
  if (slot >= 0 && slot < static_cast<int>(kMaxSlots) && slot_qps[slot] > 0) --slot_qps[slot];
}

ShmFmtProfile* NodeState::find_fmt(uint64_t id) {
  for (auto& p : layout_->fmt)
    if (p.in_use && p.id == id) return &p;
  return nullptr;
}
ShmEvProfile* NodeState::find_ev(uint64_t id) {
  for (auto& p : layout_->ev)
    if (p.in_use && p.id == id) return &p;
  return nullptr;
}
ShmCcProfile* NodeState::find_cc(uint64_t id) {
  for (auto& p : layout_->cc)
    if (p.in_use && p.id == id) return &p;
  return nullptr;
}
ShmFmtProfile* NodeState::free_fmt() {
  for (auto& p : layout_->fmt)
    if (!p.in_use) return &p;
  return nullptr;
}
ShmEvProfile* NodeState::free_ev() {
  for (auto& p : layout_->ev)
    if (!p.in_use) return &p;
  return nullptr;
}
ShmCcProfile* NodeState::free_cc() {
  for (auto& p : layout_->cc)
    if (!p.in_use) return &p;
  return nullptr;
}

uint32_t NodeState::ev_entries_used() {
  uint32_t n = 0;
  for (auto& p : layout_->ev)
    if (p.in_use) n += p.ev_count;
  return n;
}

void NodeState::push_event(const ShmEvEvent& e) {
  const uint64_t seq = layout_->event_seq++;
  ShmEvEvent& slot = layout_->events[seq % kEventRing];
  slot = e;
  slot.seq = seq;
}

}  // namespace mrc::api
