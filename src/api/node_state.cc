#include "api/node_state.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
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

bool process_alive(pid_t pid) {
  return pid > 0 && (::kill(pid, 0) == 0 || errno == EPERM);
}

}  // namespace

NodeState* NodeState::open_shared() {
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
  auto* s = new NodeState();
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
  for (uint32_t s = 0; s < kMaxSlots; ++s) {
    pid_t& owner = layout_->slot_pid[s];
    if (owner == 0 || !process_alive(owner)) {
      owner = pid;
      return static_cast<int>(s);
    }
  }
  return -1;
}

void NodeState::release_slot(int slot) {
  if (slot < 0 || slot >= static_cast<int>(kMaxSlots)) return;
  NodeLock guard(*this);
  layout_->slot_pid[slot] = 0;
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
