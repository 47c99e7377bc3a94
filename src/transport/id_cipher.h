// Keyed permutations of QPNs (24 bits) and memory keys (32 bits): an identifier a peer or an
// attacker on the network must guess is useless to them unless it was handed over at setup.
//
// A QPN and an rkey are, besides the PSN window, all a datagram needs to be accepted: on a
// network that is not closed, counting them up from small numbers (as the simulator does, and
// as RoCE NICs do) lets a host that is not the peer name them (docs/linux-driver.md,
// "Security"). So the engine keeps its tables indexed by slot, and the identifier it hands out
// is the slot under a 4-round balanced Feistel network keyed by EngineConfig::identifier_key.
// Decrypting a received identifier gives its slot back in a few nanoseconds, with no hash
// table. Key 0 is the identity: the simulator and tests keep their readable identifiers and
// their results.
//
// Not a cipher against an attacker who sees many identifiers (4 rounds of a 12/16-bit
// Feistel): identifiers are secret only from hosts off the path, which never see one.
#pragma once

#include <cstdint>

namespace mrc {

class IdCipher {
 public:
  // A permutation of [0, 2^bits); `bits` even, 2..32. key 0: the identity.
  IdCipher(uint64_t key, int bits);
  uint32_t encrypt(uint32_t x) const;
  uint32_t decrypt(uint32_t y) const;
  bool identity() const { return key_ == 0; }
  uint32_t mask() const { return mask_; }

 private:
  uint32_t round(int r, uint32_t half) const;
  uint64_t key_;
  int half_bits_;
  uint32_t half_mask_, mask_;
};

}  // namespace mrc
