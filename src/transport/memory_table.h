// Registered memory regions: the only memory a remote peer can write, named by rkey.
// Every incoming data packet is checked here before a byte is placed (rkey exists, the
// region allows remote write, [va, va + len) lies inside it). A region may be "phantom"
// (no backing bytes): the simulator registers terabytes of GPU memory that way and the
// engine then counts placement without copying.
#pragma once

#include <cstdint>
#include <vector>

#include "common/types.h"
#include "transport/id_cipher.h"

namespace mrc {

enum Access : uint32_t {
  kLocalWrite = 1 << 0,
  kRemoteWrite = 1 << 1,
};

struct MemoryKeys {
  uint32_t lkey = 0;
  uint32_t rkey = 0;
};

struct MemoryRegion {
  uint8_t* base = nullptr;  // host address of iova; nullptr for a phantom region
  uint64_t iova = 0;        // address peers use in RETH.va
  uint64_t length = 0;
  uint32_t access = 0;
  uint32_t key = 0;  // lkey == rkey == key (as soft-RoCE does), as handed out
  bool valid = false;
};

class MemoryTable {
 public:
  // `key` 0: a region's key is its slot and generation as they are (below); otherwise they
  // pass through a keyed permutation (IdCipher) so that a key cannot be guessed from the
  // order of registration (EngineConfig::identifier_key).
  explicit MemoryTable(uint64_t key = 0) : cipher_(key, 32) {}

  // Registers [iova, iova + length) backed by `base` (nullptr: phantom). Keys encode the
  // slot index in the high 24 bits and a generation byte in the low 8 bits, so a stale key
  // of a deregistered region does not name its successor. Errors: kInvalidArgument
  // (length 0 or iova + length overflows), kNoResources (table full).
  Result<MemoryKeys> register_region(void* base, uint64_t length, uint64_t iova, uint32_t access);
  // Errors: kNotFound (no such key).
  Status deregister(uint32_t key);
  // Changes a live region's access flags; its keys stay (ibv_rereg_mr with
  // IBV_REREG_MR_CHANGE_ACCESS). A region may be handed to a peer before it accepts remote
  // writes: a server that does not want a client's writes yet. Errors: kNotFound.
  Status set_access(uint32_t key, uint32_t access);

  // The region a remote write of `len` bytes at `va` with `rkey` may target, or an error:
  // kBadRkey (no such key / no remote write access), kBadAddress (range outside region).
  Result<const MemoryRegion*> check_remote_write(uint32_t rkey, uint64_t va, uint64_t len) const;
  // The region a local buffer [addr, addr + len) under `lkey` lies in. kBadRkey/kBadAddress.
  Result<const MemoryRegion*> check_local(uint32_t lkey, uint64_t addr, uint64_t len) const;

  size_t size() const { return live_; }

 private:
  const MemoryRegion* find(uint32_t key) const;
  IdCipher cipher_;
  std::vector<MemoryRegion> regions_;
  std::vector<uint32_t> free_slots_;
  size_t live_ = 0;
};

}  // namespace mrc
