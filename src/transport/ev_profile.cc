// Entropy values: validation, expansion, generation, envelope. OCP MRC 1.0 controller API
// sections 5.5, 5.7 and 6; decisions in docs/entropy-values.md.
#include "transport/ev_profile.h"

#include <algorithm>
#include <bit>

namespace mrc::ev {

namespace {

// The low n bits set (n <= 32).
constexpr uint32_t low_mask(uint32_t n) {
  return n >= 32 ? 0xFFFFFFFFu : (1u << n) - 1;
}

// Bits [pos, pos + n) of a 256-bit MSB-first string as an n-bit number (n <= 32,
// pos + n <= 256). At most 5 bytes are touched, so a 64-bit accumulator suffices.
uint32_t read_bits(const std::array<uint8_t, kEvBytes>& s, uint32_t pos, uint32_t n) {
  if (n == 0) return 0;
  const uint32_t first = pos / 8, last = (pos + n - 1) / 8;
  uint64_t acc = 0;
  for (uint32_t b = first; b <= last; ++b)
    acc = (acc << 8) | s[b];
  const uint32_t shift = (last + 1) * 8 - (pos + n);
  return static_cast<uint32_t>(acc >> shift) & low_mask(n);
}

// ORs the low n bits of `value` into bits [pos, pos + n) of a 256-bit MSB-first string. The
// callers write disjoint ranges of a zeroed string, so OR is a store.
void or_bits(std::array<uint8_t, kEvBytes>& s, uint32_t pos, uint32_t n, uint32_t value) {
  if (n == 0) return;
  const uint32_t first = pos / 8, last = (pos + n - 1) / 8;
  uint64_t acc = static_cast<uint64_t>(value & low_mask(n)) << ((last + 1) * 8 - (pos + n));
  for (uint32_t b = last + 1; b-- > first;) {
    s[b] |= static_cast<uint8_t>(acc);
    acc >>= 8;
  }
}

// Are bits [pos, 256) all zero?
bool tail_is_zero(const EvValue& s, uint32_t pos) {
  if (pos >= kEvBits) return true;
  const uint32_t byte = pos / 8, bit = pos % 8;
  if (bit != 0 && (s[byte] & (0xFFu >> bit)) != 0) return false;
  for (uint32_t b = bit != 0 ? byte + 1 : byte; b < kEvBytes; ++b) {
    if (s[b] != 0) return false;
  }
  return true;
}

// Software PDEP: bit j of x (from the LSB) goes to the j-th lowest set bit of mask. This is
// the OCP 6 "equivalently" form of "first EV bit into the highest mask bit".
uint32_t deposit(uint32_t x, uint32_t mask) {
  uint32_t r = 0;
  for (uint32_t j = 1; mask != 0; j <<= 1) {
    const uint32_t lowest = mask & (~mask + 1);
    if (x & j) r |= lowest;
    mask &= mask - 1;
  }
  return r;
}

constexpr bool valid_mode(FormatMode m) {
  return m == FormatMode::kStev || m == FormatMode::kSrv6 || m == FormatMode::kUdp;
}
constexpr bool valid_mode(EvMode m) {
  return m == EvMode::kAuto || m == EvMode::kExplicit || m == EvMode::kGenerated;
}

// The rules of one field that need no format (OCP 6 rules 3-5, 5.3 "width <= 32", and our
// min <= max which makes the GEN range non-empty).
Status validate_field_local(const Field& f) {
  if (f.width > kMaxFieldWidth) return fail(Error::kBadEvProfile);
  if ((f.init_val & ~low_mask(f.width)) != 0) return fail(Error::kBadEvProfile);
  if ((f.mask & ~low_mask(f.width)) != 0) return fail(Error::kBadEvProfile);
  if ((f.max_val & ~low_mask(std::popcount(f.mask))) != 0) return fail(Error::kBadEvProfile);
  if (f.min_val > f.max_val) return fail(Error::kBadEvProfile);
  return {};
}

// Expansion proper, on fields already validated against the format.
Result<ExpandedEv> expand_unchecked(const FormatProfile& fmt, std::span<const Field> fields,
                                    const EvValue& ev) {
  ExpandedEv out{};
  uint32_t c = 0;  // read cursor into the EV bit string
  uint32_t d = 0;  // write cursor into the output
  for (size_t i = 0; i < fields.size(); ++i) {
    const Field& f = fields[i];
    const uint32_t n = std::popcount(f.mask);
    const uint32_t x = read_bits(ev, c, n);
    c += n;
    const uint32_t v = (f.init_val & ~f.mask) | deposit(x, f.mask);
    const uint32_t slot = fmt.fields[i].width;
    or_bits(out, d + slot - f.width, f.width, v);  // right-aligned: the high slot bits stay 0
    d += slot;
  }
  // OCP 6 recommendation: EV bits beyond the consumed count must be zero.
  if (!tail_is_zero(ev, c)) return fail(Error::kBadEvProfile);
  return out;
}

// Packs values (already checked to fit) into an EV bit string.
EvValue pack_unchecked(std::span<const Field> fields, std::span<const uint32_t> values) {
  EvValue out{};
  uint32_t c = 0;
  for (size_t i = 0; i < fields.size(); ++i) {
    const uint32_t n = std::popcount(fields[i].mask);
    or_bits(out, c, n, values[i]);
    c += n;
  }
  return out;
}

Status check_profile_args(uint32_t ev_count, int num_ports, uint32_t ev_min_active) {
  if (num_ports < 1 || num_ports > 256 || ev_count == 0 || ev_min_active > ev_count) {
    return fail(Error::kInvalidArgument);
  }
  return {};
}

// Fills p.entries as the profile constructors document: entry i on port i % num_ports with
// generated combination i / num_ports.
Status fill_entries(EvProfile& p, uint32_t ev_count, int num_ports) {
  const uint32_t ports = static_cast<uint32_t>(num_ports);
  auto values = generate(p.fields, (ev_count + ports - 1) / ports);
  if (!values) return fail(values.error());
  p.entries.resize(ev_count);
  for (uint32_t i = 0; i < ev_count; ++i) {
    p.entries[i].value = (*values)[i / ports];
    p.entries[i].port = static_cast<uint8_t>(i % ports);
  }
  return validate_profile(p);
}

uint32_t load_be32(const uint8_t* b) {
  return (uint32_t{b[0]} << 24) | (uint32_t{b[1]} << 16) | (uint32_t{b[2]} << 8) | b[3];
}
void store_be32(uint8_t* b, uint32_t v) {
  b[0] = static_cast<uint8_t>(v >> 24);
  b[1] = static_cast<uint8_t>(v >> 16);
  b[2] = static_cast<uint8_t>(v >> 8);
  b[3] = static_cast<uint8_t>(v);
}

// Byte offset of uSID slot s (F3216 layout, see the header).
constexpr uint32_t usid_offset(int s) {
  return 16u * static_cast<uint32_t>(s / kUsidsPerCarrier) + 4u +
         2u * static_cast<uint32_t>(s % kUsidsPerCarrier);
}

}  // namespace

const char* ev_state_name(EvState s) {
  switch (s) {
    case EvState::kGood:
      return "good";
    case EvState::kAssumedBad:
      return "assumed_bad";
    case EvState::kDenied:
      return "denied";
  }
  return "unknown";
}

const char* format_mode_name(FormatMode m) {
  switch (m) {
    case FormatMode::kStev:
      return "stev";
    case FormatMode::kSrv6:
      return "srv6";
    case FormatMode::kUdp:
      return "udp";
  }
  return "unknown";
}

const char* ev_mode_name(EvMode m) {
  switch (m) {
    case EvMode::kAuto:
      return "auto";
    case EvMode::kExplicit:
      return "explicit";
    case EvMode::kGenerated:
      return "generated";
  }
  return "unknown";
}

uint32_t format_max_bits(FormatMode mode) {
  switch (mode) {
    case FormatMode::kStev:
      return kStevMaxBits;
    case FormatMode::kSrv6:
      return kSrv6MaxBits;
    case FormatMode::kUdp:
      return kUdpMaxBits;
  }
  return 0;
}

uint32_t format_width(const FormatProfile& fmt) {
  uint32_t total = 0;
  for (const FormatField& f : fmt.fields)
    total += f.width;
  return total;
}

Status validate_format(const FormatProfile& fmt) {
  if (!valid_mode(fmt.mode)) return fail(Error::kBadEvProfile);
  if (fmt.fields.empty()) return fail(Error::kBadEvProfile);
  // OCP 5.5: "too many fields, or a total width beyond the format" is E2BIG.
  if (fmt.fields.size() > kMaxFields) return fail(Error::kTooBig);
  for (const FormatField& f : fmt.fields) {
    if (f.width == 0) return fail(Error::kBadEvProfile);
  }
  if (format_width(fmt) > format_max_bits(fmt.mode)) return fail(Error::kTooBig);
  return {};
}

Status validate_fields(const FormatProfile& fmt, std::span<const Field> fields,
                       uint32_t ev_max_width) {
  if (auto s = validate_format(fmt); !s) return s;
  if (fields.empty()) return fail(Error::kBadEvProfile);
  // Rule 1, k <= m: a size failure (E2BIG), like an over-long array in OCP 5.5.
  if (fields.size() > fmt.fields.size()) return fail(Error::kTooBig);
  // Rule 2. Sum in 64 bits: 64 fields of up to 2^32 - 1 each.
  uint64_t field_bits = 0;
  for (const Field& f : fields)
    field_bits += f.width;
  if (field_bits > format_width(fmt)) return fail(Error::kBadEvProfile);
  for (size_t i = 0; i < fields.size(); ++i) {
    if (auto s = validate_field_local(fields[i]); !s) return s;
    // OCP 6 step 3 interpretation: a field wider than its slot is EINVAL.
    if (fields[i].width > fmt.fields[i].width) return fail(Error::kBadEvProfile);
  }
  // Rule 6 (device rule): ev_max_width consecutive valid EV bits.
  if (ev_bits_used(fields) > ev_max_width) return fail(Error::kBadEvProfile);
  return {};
}

uint32_t ev_bits_used(std::span<const Field> fields) {
  uint32_t n = 0;
  for (const Field& f : fields)
    n += std::popcount(f.mask);
  return n;
}

Result<ExpandedEv> expand(const FormatProfile& fmt, std::span<const Field> fields,
                          const EvValue& ev) {
  if (auto s = validate_fields(fmt, fields); !s) return fail(s.error());
  return expand_unchecked(fmt, fields, ev);
}

EvValue ev_from_bits(uint64_t bits, uint32_t nbits) {
  nbits = std::min<uint32_t>(nbits, 64);
  EvValue out{};
  if (nbits > 32) {
    or_bits(out, 0, nbits - 32, static_cast<uint32_t>(bits >> 32));
    or_bits(out, nbits - 32, 32, static_cast<uint32_t>(bits));
  } else {
    or_bits(out, 0, nbits, static_cast<uint32_t>(bits));
  }
  return out;
}

Result<EvValue> pack(std::span<const Field> fields, std::span<const uint32_t> values) {
  if (fields.size() != values.size()) return fail(Error::kInvalidArgument);
  for (size_t i = 0; i < fields.size(); ++i) {
    if ((values[i] & ~low_mask(std::popcount(fields[i].mask))) != 0) {
      return fail(Error::kInvalidArgument);
    }
  }
  if (ev_bits_used(fields) > kEvBits) return fail(Error::kBadEvProfile);
  return pack_unchecked(fields, values);
}

uint64_t count_combinations(std::span<const Field> fields) {
  uint64_t total = 1;
  for (const Field& f : fields) {
    if (f.min_val > f.max_val) return 0;
    const uint64_t range = uint64_t{f.max_val} - f.min_val + 1;
    if (__builtin_mul_overflow(total, range, &total)) total = UINT64_MAX;
  }
  return total;
}

Result<std::vector<EvValue>> generate(std::span<const Field> fields, uint32_t ev_count) {
  if (fields.empty()) return fail(Error::kBadEvProfile);
  if (fields.size() > kMaxFields) return fail(Error::kTooBig);
  for (const Field& f : fields) {
    if (auto s = validate_field_local(f); !s) return fail(s.error());
  }
  if (ev_bits_used(fields) > kEvBits) return fail(Error::kBadEvProfile);
  if (count_combinations(fields) == 0) return fail(Error::kBadEvProfile);
  if (ev_count == 0) return fail(Error::kInvalidArgument);

  std::vector<uint32_t> x(fields.size());
  for (size_t i = 0; i < fields.size(); ++i)
    x[i] = fields[i].min_val;
  std::vector<EvValue> out;
  out.reserve(ev_count);
  for (uint32_t j = 0; j < ev_count; ++j) {
    out.push_back(pack_unchecked(fields, x));
    // Advance the odometer, last field fastest. After the last combination every digit rolls
    // over to min_val, which is the wrap-around.
    for (size_t i = fields.size(); i-- > 0;) {
      if (x[i] < fields[i].max_val) {
        ++x[i];
        break;
      }
      x[i] = fields[i].min_val;
    }
  }
  return out;
}

namespace {

// validate_profile and expand_all share this: validate once, then expand every entry into
// `out` (when non-null).
Status check_profile(const EvProfile& p, uint32_t ev_max_width, std::vector<ExpandedEv>* out) {
  if (!valid_mode(p.mode)) return fail(Error::kBadEvProfile);
  if (p.mode == EvMode::kAuto) {
    return p.entries.empty() ? Status{} : fail(Error::kBadEvProfile);
  }
  if (auto s = validate_fields(p.format, p.fields, ev_max_width); !s) return s;
  if (p.entries.empty()) return fail(Error::kBadEvProfile);
  // OCP 5.5 "Counts": ev_min_active > ev_count is EINVAL.
  if (p.ev_min_active > p.entries.size()) return fail(Error::kBadEvProfile);
  if (out != nullptr) out->reserve(p.entries.size());
  for (const EvEntry& e : p.entries) {
    auto x = expand_unchecked(p.format, p.fields, e.value);
    if (!x) return fail(x.error());
    if (out != nullptr) out->push_back(*x);
  }
  return {};
}

}  // namespace

Status validate_profile(const EvProfile& p, uint32_t ev_max_width) {
  return check_profile(p, ev_max_width, nullptr);
}

Result<std::vector<ExpandedEv>> expand_all(const EvProfile& p) {
  std::vector<ExpandedEv> out;
  if (auto s = check_profile(p, kEvBits, &out); !s) return fail(s.error());
  return out;
}

uint32_t count_usable(std::span<const EvEntry> entries) {
  return static_cast<uint32_t>(
      std::ranges::count_if(entries, [](const EvEntry& e) { return e.state == EvState::kGood; }));
}

Result<EvProfile> make_srv6_profile(uint32_t locator_block, int num_usids, int bits_per_usid,
                                    uint32_t ev_count, int num_ports, uint32_t ev_min_active) {
  if (auto s = check_profile_args(ev_count, num_ports, ev_min_active); !s) return fail(s.error());
  if (num_usids < 1 || num_usids > kUsidsPerCarrier || bits_per_usid < 1 || bits_per_usid > 16) {
    return fail(Error::kInvalidArgument);
  }
  EvProfile p;
  p.mode = EvMode::kGenerated;
  p.format.mode = FormatMode::kSrv6;
  p.format.fields.push_back({32});
  p.fields.push_back({32, locator_block, 0, 0, 0});
  const uint32_t bits = static_cast<uint32_t>(bits_per_usid);
  for (int i = 0; i < num_usids; ++i) {
    p.format.fields.push_back({16});
    // min_val 1: a generated uSID of 0 would be the end-of-carrier marker (wire/usid.h).
    p.fields.push_back({bits, 0, 1, low_mask(bits), low_mask(bits)});
  }
  p.ev_min_active = ev_min_active;
  if (auto s = fill_entries(p, ev_count, num_ports); !s) return fail(s.error());
  return p;
}

Result<EvProfile> make_stev_profile(uint32_t ev_count, int num_ports, uint32_t ev_min_active) {
  if (auto s = check_profile_args(ev_count, num_ports, ev_min_active); !s) return fail(s.error());
  EvProfile p;
  p.mode = EvMode::kGenerated;
  p.format = {FormatMode::kStev, {{32}}};
  p.fields = {{32, 0, 0, 0xFFFFFFFFu, 0xFFFFFFFFu}};
  p.ev_min_active = ev_min_active;
  if (auto s = fill_entries(p, ev_count, num_ports); !s) return fail(s.error());
  return p;
}

Result<EvProfile> make_udp_profile(uint32_t ev_count, int num_ports, uint32_t ev_min_active) {
  if (auto s = check_profile_args(ev_count, num_ports, ev_min_active); !s) return fail(s.error());
  EvProfile p;
  p.mode = EvMode::kGenerated;
  p.format = {FormatMode::kUdp, {{16}}};
  p.fields = {{16, 0xC000, 0, 0x3FFF, 0x3FFF}};
  p.ev_min_active = ev_min_active;
  if (auto s = fill_entries(p, ev_count, num_ports); !s) return fail(s.error());
  return p;
}

Result<ExpandedEv> with_usid(ExpandedEv base, int usid_slot, uint16_t value) {
  if (usid_slot < 0 || usid_slot >= kMaxUsidSlots) return fail(Error::kInvalidArgument);
  const uint32_t off = usid_offset(usid_slot);
  base[off] = static_cast<uint8_t>(value >> 8);
  base[off + 1] = static_cast<uint8_t>(value);
  return base;
}

uint16_t usid_at(const ExpandedEv& ev, int usid_slot) {
  if (usid_slot < 0 || usid_slot >= kMaxUsidSlots) return 0;
  const uint32_t off = usid_offset(usid_slot);
  return static_cast<uint16_t>((ev[off] << 8) | ev[off + 1]);
}

Result<ExpandedEv> srv6_carrier(uint32_t locator_block, std::span<const uint16_t> usids) {
  if (usids.size() > static_cast<size_t>(kMaxUsidSlots)) return fail(Error::kInvalidArgument);
  if (std::ranges::find(usids, uint16_t{0}) != usids.end()) return fail(Error::kInvalidArgument);
  ExpandedEv out{};
  const size_t first = std::min(usids.size(), static_cast<size_t>(kUsidsPerCarrier));
  const wire::Ipv6Addr da = wire::usid_carrier(locator_block, usids.first(first));
  std::copy(da.begin(), da.end(), out.begin());
  if (usids.size() > first) {
    const wire::Ipv6Addr seg = wire::usid_carrier(locator_block, usids.subspan(first));
    std::copy(seg.begin(), seg.end(), out.begin() + 16);
  }
  return out;
}

void apply_to_envelope(FormatMode mode, const ExpandedEv& ev, wire::Ipv6Header& ip,
                       wire::UdpHeader& udp, wire::SrhHeader& srh, bool& has_srh) {
  switch (mode) {
    case FormatMode::kStev: {
      // Our split (OCP 5.7 does not give one): the high 20 bits fill the flow label, the low
      // 12 ride in the UDP source port under a fixed 0xC000, so the port stays in the IANA
      // dynamic range and the 4791 destination port keeps the packet RoCEv2.
      const uint32_t v = load_be32(&ev[0]);
      ip.flow_label = v >> 12;
      udp.src_port = static_cast<uint16_t>(0xC000u | (v & 0xFFFu));
      has_srh = false;
      ip.next_header = wire::kIpProtoUdp;
      return;
    }
    case FormatMode::kUdp:
      udp.src_port = static_cast<uint16_t>((ev[0] << 8) | ev[1]);
      has_srh = false;
      ip.next_header = wire::kIpProtoUdp;
      return;
    case FormatMode::kSrv6: {
      std::copy_n(ev.begin(), 16, ip.dst.begin());
      const bool second = std::any_of(ev.begin() + 16, ev.end(), [](uint8_t b) { return b; });
      has_srh = second;
      if (!second) {
        ip.next_header = wire::kIpProtoUdp;
        return;
      }
      // RFC 8754 section 2: the segment list is encoded in reverse order; segments[0] is the
      // last segment of the path, and DA = segments[segments_left].
      srh = wire::SrhHeader{};
      srh.next_header = wire::kIpProtoUdp;
      std::copy_n(ev.begin() + 16, 16, srh.segments[0].begin());
      std::copy_n(ev.begin(), 16, srh.segments[1].begin());
      srh.segments_left = 1;
      srh.last_entry = 1;
      srh.num_segments = 2;
      ip.next_header = wire::kIpProtoRouting;
      return;
    }
  }
}

uint32_t path_flow_label(FormatMode mode, const ExpandedEv& ev) {
  switch (mode) {
    case FormatMode::kStev:
      return load_be32(&ev[0]) >> 12;
    case FormatMode::kUdp:
    case FormatMode::kSrv6: {
      // Four 64-bit words, each multiplied into the running value (odd constants from the
      // golden ratio and splitmix64), the top 20 bits kept: every EV byte moves them.
      uint64_t h = 0;
      for (size_t i = 0; i < ev.size(); i += 8) {
        uint64_t w = 0;
        for (size_t k = 0; k < 8; ++k)
          w = w << 8 | ev[i + k];
        h = (h ^ w) * 0x9E3779B97F4A7C15ull;
        h ^= h >> 29;
      }
      h *= 0xBF58476D1CE4E5B9ull;
      const auto label = static_cast<uint32_t>(h >> 44);
      return label != 0 ? label : 1;  // 0 would mean "unlabelled" (RFC 6437 section 2)
    }
  }
  return 0;
}

Result<ExpandedEv> envelope_to_ev(FormatMode mode, const wire::Ipv6Header& ip,
                                  const wire::UdpHeader& udp, const wire::SrhHeader& srh,
                                  bool has_srh) {
  ExpandedEv out{};
  switch (mode) {
    case FormatMode::kStev:
      store_be32(&out[0], ((ip.flow_label & 0xFFFFFu) << 12) | (udp.src_port & 0xFFFu));
      return out;
    case FormatMode::kUdp:
      out[0] = static_cast<uint8_t>(udp.src_port >> 8);
      out[1] = static_cast<uint8_t>(udp.src_port);
      return out;
    case FormatMode::kSrv6:
      if (!has_srh) {
        std::copy_n(ip.dst.begin(), 16, out.begin());
        return out;
      }
      if (srh.num_segments != 2 || srh.last_entry != 1) return fail(Error::kBadSrh);
      std::copy_n(srh.segments[1].begin(), 16, out.begin());
      std::copy_n(srh.segments[0].begin(), 16, out.begin() + 16);
      return out;
  }
  return fail(Error::kInvalidArgument);
}

}  // namespace mrc::ev
