#include "transport/memory_table.h"

namespace mrc {

namespace {
constexpr uint32_t kMaxRegions = 1u << 24;

bool range_inside(const MemoryRegion& r, uint64_t va, uint64_t len) {
  if (va < r.iova) return false;
  const uint64_t off = va - r.iova;
  return off <= r.length && len <= r.length - off;
}
}  // namespace

Result<MemoryKeys> MemoryTable::register_region(void* base, uint64_t length, uint64_t iova,
                                                uint32_t access) {
  if (length == 0 || iova + length < iova) return fail(Error::kInvalidArgument);
  uint32_t slot;
  if (!free_slots_.empty()) {
    slot = free_slots_.back();
    free_slots_.pop_back();
  } else {
    if (regions_.size() >= kMaxRegions) return fail(Error::kNoResources);
    slot = static_cast<uint32_t>(regions_.size());
    regions_.emplace_back();
  }
  MemoryRegion& r = regions_[slot];
  const uint32_t generation = ((cipher_.decrypt(r.key) & 0xFF) + 1) & 0xFF;
  r.base = static_cast<uint8_t*>(base);
  r.iova = iova;
  r.length = length;
  r.access = access;
  r.key = cipher_.encrypt((slot << 8) | generation);
  r.valid = true;
  ++live_;
  return MemoryKeys{r.key, r.key};
}

Status MemoryTable::deregister(uint32_t key) {
  const MemoryRegion* r = find(key);
  if (!r) return fail(Error::kNotFound);
  const uint32_t slot = cipher_.decrypt(key) >> 8;
  regions_[slot].valid = false;
  free_slots_.push_back(slot);
  --live_;
  return {};
}

Status MemoryTable::set_access(uint32_t key, uint32_t access) {
  const MemoryRegion* r = find(key);
  if (!r) return fail(Error::kNotFound);
  regions_[cipher_.decrypt(key) >> 8].access = access;
  return {};
}

const MemoryRegion* MemoryTable::find(uint32_t key) const {
  const uint32_t slot = cipher_.decrypt(key) >> 8;
  if (slot >= regions_.size()) return nullptr;
  const MemoryRegion& r = regions_[slot];
  return (r.valid && r.key == key) ? &r : nullptr;
}

Result<const MemoryRegion*> MemoryTable::check_remote_write(uint32_t rkey, uint64_t va,
                                                            uint64_t len) const {
  const MemoryRegion* r = find(rkey);
  if (!r || !(r->access & kRemoteWrite)) return fail(Error::kBadRkey);
  if (!range_inside(*r, va, len)) return fail(Error::kBadAddress);
  return r;
}

Result<const MemoryRegion*> MemoryTable::check_local(uint32_t lkey, uint64_t addr,
                                                     uint64_t len) const {
  const MemoryRegion* r = find(lkey);
  if (!r) return fail(Error::kBadRkey);
  if (!range_inside(*r, addr, len)) return fail(Error::kBadAddress);
  return r;
}

}  // namespace mrc
