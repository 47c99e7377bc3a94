// Node-local MRC state shared by the controller and every application process of one node
// (docs/c-api.md, "Node-local state"): EV format / EV / CC profiles (OCP mrc_ctl.h 5.5), EV
// entry arrays and states, port admin states (5.6 mrc_ctl_modify_port), QP references per
// profile (EBUSY), the EV event ring (5.6 EV events) and the UDP port slots of the processes
// that have the device open.
//
// One POSIX shared-memory segment per device (/dev/shm/mrc_soft0 by default, or
// $MRC_SOFT_SHM), a fixed-size POD layout guarded by one process-shared robust mutex: a
// process that dies holding it does not wedge the node (EOWNERDEAD -> consistent). No
// pointers inside: every reference is an index.
#pragma once

#include <pthread.h>
#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>

#include "transport/ev_profile.h"

namespace mrc::api {

inline constexpr uint64_t kNodeStateMagic = 0x4d52435f4e4f4435ull;  // "MRC_NOD5"
inline constexpr uint32_t kMaxFmtProfiles = 64;
inline constexpr uint32_t kMaxEvProfiles = 64;
inline constexpr uint32_t kMaxCcProfiles = 64;
inline constexpr uint32_t kMaxEvsPerProfile = 1024;  // ev_max_count_profile
inline constexpr uint32_t kMaxProfileFields = 16;    // fields per format / EV profile
inline constexpr uint32_t kMaxPorts = 32;
inline constexpr uint32_t kMaxSlots = 256;  // processes with the device open
inline constexpr uint32_t kEventRing = 4096;

enum class ProfileState : uint8_t { kInit = 0, kOffline = 1, kOnline = 2 };  // OCP values

struct ShmFmtProfile {
  uint64_t id;
  uint8_t in_use;  // slot leaves INIT (OCP 5.5: leaving INIT consumes a slot)
  uint8_t state;   // ProfileState
  uint8_t mode;    // OCP enum mrc_ctl_ev_fmt_mode bits; 0 = not set
  uint8_t fields_set;
  uint32_t field_count;
  uint8_t widths[kMaxProfileFields];
  uint32_t generation;
};

struct ShmEvEntry {
  uint8_t val[ev::kEvBytes];
  uint8_t port;   // 1-based; 0 = MRC_CTL_EV_UNPOPULATED
  uint8_t state;  // ev::EvState
};

struct ShmEvProfile {
  uint64_t id;
  uint8_t in_use;
  uint8_t state;
  uint8_t mode;  // OCP enum mrc_ctl_ev_mode bits; 0 = not set
  uint8_t fields_set;
  uint8_t fmt_id_set;
  uint8_t count_set;
  uint8_t min_active_set;
  uint8_t event_mask_set;
  uint64_t fmt_id;
  uint32_t ev_count;
  uint32_t ev_min_active;
  int32_t ev_event_mask;
  uint32_t field_count;
  ev::Field fields[kMaxProfileFields];
  uint32_t active_qps;           // QPs past RESET that use it (EBUSY): the sum of slot_qps
  uint32_t generation;           // bumped on every entry/field/state change (applications re-sync)
  uint16_t slot_qps[kMaxSlots];  // per process slot: reclaimed when that process is gone
  pid_t owner_pid;               // the controller process that configured it (EV events go there)
  ShmEvEntry entries[kMaxEvsPerProfile];
};

struct ShmCcProfile {
  uint64_t id;
  uint8_t in_use;
  uint8_t state;
  uint8_t algorithm_set;
  uint8_t config_set;
  int32_t algorithm;    // index into the device's algorithm list; -1 = NULL (CC disabled)
  uint8_t config[64];   // struct mrc_ctl_cc_nscc_cfg (52 bytes), copied
  uint32_t generation;  // bumped on every CONFIG change (applications reconfigure their QPs)
  uint32_t active_qps;  // the sum of slot_qps
  uint16_t slot_qps[kMaxSlots];
};

struct ShmEvEvent {
  uint64_t seq;
  uint64_t profile_id;
  uint8_t val[ev::kEvBytes];
  uint8_t port;   // 1-based
  uint8_t state;  // ev::EvState
  pid_t owner_pid;
};

struct NodeStateLayout {
  uint64_t magic;
  uint32_t size;
  pthread_mutex_t lock;
  uint32_t port_admin_generation;
  uint8_t port_disabled[kMaxPorts + 1];  // index = 1-based port
  pid_t slot_pid[kMaxSlots];             // 0 = free
  uint64_t slot_start[kMaxSlots];        // the owner's start time (/proc/PID/stat), vs pid reuse
  ShmFmtProfile fmt[kMaxFmtProfiles];
  ShmEvProfile ev[kMaxEvProfiles];
  ShmCcProfile cc[kMaxCcProfiles];
  uint64_t event_seq;  // next sequence number; events seq in [event_seq - kEventRing, event_seq)
  ShmEvEvent events[kEventRing];
};

// A mapping of the segment; lock() / unlock() around every access.
class NodeState {
 public:
  // Opens (creating and initialising if needed) the segment named by $MRC_SOFT_SHM or
  // "/mrc_soft0". Returns nullptr with errno set on failure.
  static std::unique_ptr<NodeState> open_shared();
  NodeStateLayout* operator->() { return layout_; }
  NodeStateLayout& get() { return *layout_; }
  void lock();
  void unlock();

  // Slot of a UDP port for this process (ports base + slot); -1 if all taken. Slots of
  // processes that no longer exist are reclaimed.
  int take_slot(pid_t pid);
  void release_slot(int slot);
  // Frees the slots of processes that died without ibv_close_device (crash, kill -9) and
  // takes their QPs out of the profiles' active_qps (EBUSY). The lock must be held. A process
  // is gone when kill(pid, 0) says ESRCH or its start time differs (the pid was reused).
  void reclaim_dead_slots();
  // A QP of `slot` starts / stops using a profile (the lock must be held).
  static void add_qp_ref(uint32_t& active, uint16_t* slot_qps, int slot);
  static void drop_qp_ref(uint32_t& active, uint16_t* slot_qps, int slot);

  // Lookup by id among slots in use; nullptr if the id is in INIT.
  ShmFmtProfile* find_fmt(uint64_t id);
  ShmEvProfile* find_ev(uint64_t id);
  ShmCcProfile* find_cc(uint64_t id);
  // A free slot (in_use = 0), or nullptr (E2BIG: no profile slot left).
  ShmFmtProfile* free_fmt();
  ShmEvProfile* free_ev();
  ShmCcProfile* free_cc();
  uint32_t ev_entries_used();  // sum of ev_count over EV profiles past INIT

  void push_event(const ShmEvEvent& e);  // seq is assigned here

 private:
  NodeStateLayout* layout_ = nullptr;
};

class NodeLock {
 public:
  explicit NodeLock(NodeState& s) : s_(s) { s_.lock(); }
  ~NodeLock() { s_.unlock(); }
  NodeLock(const NodeLock&) = delete;
  NodeLock& operator=(const NodeLock&) = delete;

 private:
  NodeState& s_;
};

}  // namespace mrc::api
