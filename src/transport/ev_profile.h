// Entropy values (EVs): the names of paths. This module validates EV format profiles and EV
// profiles, expands a compact EV bit string onto its wire format (OCP MRC 1.0 controller API,
// section 6), generates EVs from field rules (GEN mode, 5.7), and writes an expanded EV into
// a packet envelope (IPv6 flow label / destination / SRH, UDP source port). It is pure: no
// state, no clock, no allocation outside the returned vectors. Path *state* bookkeeping
// (GOOD -> ASSUMED_BAD -> GOOD, probing) belongs to the engine. See docs/entropy-values.md.
//
// Error mapping (OCP 5.5 "MODIFY_FIELDS": size failures are E2BIG, other validation failures
// are EINVAL): E2BIG -> Error::kTooBig, EINVAL -> Error::kBadEvProfile.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "common/types.h"
#include "wire/headers.h"
#include "wire/usid.h"

namespace mrc::ev {

// enum mrc_ctl_ev_fmt_mode (OCP 5.2): how an expanded EV is carried. Values are the OCP bits.
enum class FormatMode : uint8_t { kStev = 1, kSrv6 = 2, kUdp = 4 };

// enum mrc_ctl_ev_mode (OCP 5.2): where a profile's EVs come from. Values are the OCP bits.
enum class EvMode : uint8_t { kAuto = 1, kExplicit = 2, kGenerated = 4 };

// Per-entry path state (OCP 5.2 enum mrc_ctl_ev_state, minus UNKNOWN which is only a query
// answer). Not the OCP bit values: the API layer converts.
enum class EvState : uint8_t { kGood, kAssumedBad, kDenied };

// Stable lower-case names ("good", "assumed_bad", "denied"; "stev", "srv6", "udp"; "auto",
// "explicit", "generated"); "unknown" for values outside the enums.
const char* ev_state_name(EvState s);
const char* format_mode_name(FormatMode m);
const char* ev_mode_name(EvMode m);

inline constexpr uint32_t kEvBytes = 32;  // MRC_CTL_EV_MAX_BYTES
inline constexpr uint32_t kEvBits = 8 * kEvBytes;
// Widest expanded EV each format can carry (OCP 5.5 / 5.7): STEV 32 bits (flow label + UDP
// source port), UDP 16 bits (source port), SRV6 256 bits (destination + one SRH segment).
inline constexpr uint32_t kStevMaxBits = 32;
inline constexpr uint32_t kUdpMaxBits = 16;
inline constexpr uint32_t kSrv6MaxBits = 256;
// Our implementation limit on format fields and on EV-profile fields (E2BIG beyond it).
inline constexpr uint32_t kMaxFields = 64;
// mrc_ctl_ev_field.width is at most 32 bits (OCP 5.3).
inline constexpr uint32_t kMaxFieldWidth = 32;

// The EV bit string (mrc_ctl_ev_t): bit 7 of byte 0 is the first EV bit (OCP 6). A number
// held in an integer must be stored big-endian (OCP 8, item 12); see ev_from_bits().
using EvValue = std::array<uint8_t, kEvBytes>;
// An expanded EV, in mrc_ctl_ev_t form: STEV bytes 0-3 big-endian, UDP bytes 0-1 big-endian,
// SRV6 bytes 0-15 = IPv6 destination address and bytes 16-31 = the one SRH segment.
using ExpandedEv = std::array<uint8_t, kEvBytes>;

// ---------------------------------------------------------------------------------------------
// EV format profiles (struct mrc_ctl_ev_fmt_profile_attr, OCP 5.3 / 5.5).

struct FormatField {  // struct mrc_ctl_ev_fmt_field
  uint8_t width;      // slot width in bits
};

struct FormatProfile {
  FormatMode mode;
  std::vector<FormatField> fields;  // ordered slots, laid out MSB-first from bit 0
};

// Largest total width `mode` can carry (kStevMaxBits, ...); 0 for a value outside the enum.
uint32_t format_max_bits(FormatMode mode);
// Sum of the slot widths.
uint32_t format_width(const FormatProfile& fmt);

// OCP 5.5 EV format profile rules. kBadEvProfile (EINVAL): mode outside the enum, no field,
// a zero-width field. kTooBig (E2BIG): more than kMaxFields fields, or a total width beyond
// format_max_bits(mode).
Status validate_format(const FormatProfile& fmt);

// ---------------------------------------------------------------------------------------------
// EV-profile fields (struct mrc_ctl_ev_field) and expansion (OCP 6).

// Mirrors struct mrc_ctl_ev_field. A fixed field is {width, constant, 0, 0, 0}.
struct Field {
  uint32_t width;     // bits, <= 32, <= the width of its format slot
  uint32_t init_val;  // value before EV bits are overlaid; fits in `width`
  uint32_t min_val;   // GEN mode: lowest value of the popcount(mask)-bit number
  uint32_t max_val;   // GEN mode: highest value; < 2^popcount(mask)
  uint32_t mask;      // field bits taken from the EV; none at or above `width`
  friend bool operator==(const Field&, const Field&) = default;
};

// Every configuration rule of OCP 6 plus the 5.5 interpretations, checked in this order:
//   the format itself (validate_format, its own errors);
//   at least one field                         (kBadEvProfile: no EVs could be named);
//   k <= m, fields <= format slots             (kTooBig: the array is too long);
//   sum of field widths <= sum of slot widths  (kBadEvProfile; rule 2);
//   per field i: width <= 32, width <= slot i, init_val fits in width, mask below width,
//   max_val < 2^popcount(mask), min_val <= max_val   (kBadEvProfile; rules 3-5, 5.5);
//   sum of popcount(mask) <= ev_max_width      (kBadEvProfile; rule 6, device limit).
// Rule 2 is implied by "width <= slot" but is checked on its own because OCP lists it.
// A zero-width field is allowed: it leaves its slot zero, like a fixed field of value 0.
Status validate_fields(const FormatProfile& fmt, std::span<const Field> fields,
                       uint32_t ev_max_width = kEvBits);

// EV bits a profile consumes: the sum of popcount(mask).
uint32_t ev_bits_used(std::span<const Field> fields);

// OCP 6 expansion. For each field i: v = init_val; take the next popcount(mask) EV bits
// (MSB-first) and write them into the mask's set bits from the highest to the lowest; write v
// right-aligned into slot i; slots after the last field stay zero. Validates first
// (validate_fields, default ev_max_width), then rejects EV bits set beyond the consumed count
// with kBadEvProfile (OCP 6 recommendation). Cost: O(k) word operations, no allocation.
Result<ExpandedEv> expand(const FormatProfile& fmt, std::span<const Field> fields,
                          const EvValue& ev);

// The EV bit string whose first `nbits` bits are the low `nbits` bits of `bits`, most
// significant first; the rest zero. ev_from_bits(0x3312, 16) is bytes 33 12 00 ...
// nbits is clamped to 64.
EvValue ev_from_bits(uint64_t bits, uint32_t nbits);

// The EV bit string that makes field i take the popcount(mask_i)-bit value values[i]: the
// values concatenated MSB-first, fields with an empty mask contributing nothing. The inverse of
// what expand() reads. kInvalidArgument if the counts differ or a value does not fit in its
// mask's bit count; kBadEvProfile if the fields consume more than kEvBits.
Result<EvValue> pack(std::span<const Field> fields, std::span<const uint32_t> values);

// ---------------------------------------------------------------------------------------------
// Generated mode (OCP 5.7 "GEN").

// Number of distinct generated EVs: the product over fields of (max_val - min_val + 1),
// saturating at UINT64_MAX. Fields with an empty mask contribute 1. 0 if some min > max.
uint64_t count_combinations(std::span<const Field> fields);

// `ev_count` EV bit strings, in a deterministic order (OCP leaves the order unspecified):
// an odometer over the fields' values in [min_val, max_val], LAST field fastest, starting
// from all-min. Since field 0 occupies the most significant EV bits, the sequence is ascending
// as a big-endian number: with one field, EV j is min_val + j. When ev_count exceeds
// count_combinations() the sequence wraps from the start, so combination c appears
// ceil((ev_count - c) / combos) times: repetition weights the first ones by at most one extra
// copy (OCP 5.5: "an EV may occur several times in an array, which weights it").
// Errors: the field-local rules of validate_fields (kBadEvProfile; kTooBig beyond kMaxFields),
// fields consuming more than kEvBits (kBadEvProfile), zero combinations (kBadEvProfile),
// ev_count == 0 (kInvalidArgument).
Result<std::vector<EvValue>> generate(std::span<const Field> fields, uint32_t ev_count);

// ---------------------------------------------------------------------------------------------
// EV profiles (struct mrc_ctl_ev_profile_attr).

struct EvEntry {  // struct mrc_ctl_ev plus its state
  EvValue value{};
  uint8_t port = 0;  // 0-based NIC port (plane); the OCP API is 1-based, the API layer converts
  EvState state = EvState::kGood;
  friend bool operator==(const EvEntry&, const EvEntry&) = default;
};

struct EvProfile {
  EvMode mode = EvMode::kAuto;
  FormatProfile format{FormatMode::kStev, {}};  // unused in AUTO mode
  std::vector<Field> fields;                    // unused in AUTO mode
  std::vector<EvEntry> entries;                 // ev_count entries (EXP, GEN); empty in AUTO
  uint32_t ev_min_active = 0;                   // <= entries.size()
};

// OCP 5.5 EV profile rules that do not depend on device state. AUTO: no entries allowed
// (kBadEvProfile), nothing else checked (AUTO has no format and no fields). EXP/GEN:
// validate_fields; at least one entry; ev_min_active <= entries.size(); every entry's value
// expands (no stray bits). Mode outside the enum: kBadEvProfile.
Status validate_profile(const EvProfile& p, uint32_t ev_max_width = kEvBits);

// The expanded EV of every entry, index-aligned with p.entries (DENIED entries included, so
// an entry's index is its path index). Validates as validate_profile with the default
// ev_max_width. AUTO: an empty vector (the controller supplies no EVs; the caller chooses
// paths itself). Validation runs once, then each entry costs O(k).
Result<std::vector<ExpandedEv>> expand_all(const EvProfile& p);

// Entries in state kGood, i.e. usable for traffic.
uint32_t count_usable(std::span<const EvEntry> entries);

// ---------------------------------------------------------------------------------------------
// Profiles the simulator and tests use. All are GEN mode. Entry i goes to port
// i % num_ports and takes generated combination i / num_ports, so every plane cycles through
// the same EVs in the same order and (EV, port) pairs are distinct up to num_ports * combos
// entries. Errors: num_ports outside [1, 256], ev_count == 0, ev_min_active > ev_count
// (kInvalidArgument), plus the ones each constructor lists below.

// SRv6 uSID profile (OCP 6 worked example 2's layout is make_srv6_profile(0x42424242, 4, 4,
// ...), except that the example also generates uSID 0).
// Format: one 32-bit locator-block slot + num_usids 16-bit uSID slots. Fields: the fixed
// locator, then num_usids generated fields of bits_per_usid bits with values 1 .. 2^bits - 1
// (min_val 1: uSID 0 is the end-of-carrier marker, wire/usid.h), each right-aligned in its
// uSID slot. num_usids in [1, 6] (one carrier: they must fit in the
// destination address), bits_per_usid in [1, 16]. In a two-tier Clos the EV selects only the
// spine, so use num_usids = 1 and add the per-destination uSIDs with with_usid().
Result<EvProfile> make_srv6_profile(uint32_t locator_block, int num_usids, int bits_per_usid,
                                    uint32_t ev_count, int num_ports, uint32_t ev_min_active);

// STEV profile: one 32-bit slot, one 32-bit field with a full mask; per plane the EVs are
// 0, 1, 2, ... (flow label / UDP source port as apply_to_envelope splits them).
Result<EvProfile> make_stev_profile(uint32_t ev_count, int num_ports, uint32_t ev_min_active);

// UDP profile: one 16-bit slot, field {16, init 0xC000, 0, 0x3FFF, mask 0x3FFF}: per plane the
// source ports are 49152, 49153, ... (the IANA dynamic range); wraps after 16384 per plane.
Result<EvProfile> make_udp_profile(uint32_t ev_count, int num_ports, uint32_t ev_min_active);

// ---------------------------------------------------------------------------------------------
// SRv6 uSID carriers (F3216: 32-bit locator block, then 16-bit uSIDs; OCP 5.7).

inline constexpr int kUsidsPerCarrier = wire::kUsidsPerCarrier;  // (128 - 32) / 16 = 6
inline constexpr int kMaxUsidSlots = 2 * kUsidsPerCarrier;       // DA + one SRH segment

// uSID slot s (0-based) is in carrier s / 6 (0 = destination address, bytes 0-15; 1 = SRH
// segment, bytes 16-31) at bytes 4 + 2 * (s % 6) of that carrier. Slots 0-5 line up with the
// uSID slots of make_srv6_profile's format.

// `base` with uSID slot `usid_slot` set to `value` (big-endian). Writes only those two bytes:
// for slots 6-11 the caller provides the second carrier's locator block (srv6_carrier does).
// kInvalidArgument if usid_slot is outside [0, kMaxUsidSlots).
Result<ExpandedEv> with_usid(ExpandedEv base, int usid_slot, uint16_t value);

// The uSID in slot `usid_slot` (0 when outside [0, kMaxUsidSlots)).
uint16_t usid_at(const ExpandedEv& ev, int usid_slot);

// An SRv6 expanded EV from a locator block and up to 12 uSIDs: the first 6 go into the
// destination address, the rest into the SRH segment, which then also starts with the locator
// block (OCP 5.7: "locator + 6 uSIDs, then locator + 4 uSIDs"). Unused slots are zero (the
// uSID end-of-carrier). kInvalidArgument for more than kMaxUsidSlots uSIDs or a zero uSID
// (it would end the carrier early).
Result<ExpandedEv> srv6_carrier(uint32_t locator_block, std::span<const uint16_t> usids);

// ---------------------------------------------------------------------------------------------
// Packet envelope.

// Writes an expanded EV into the headers. Only the fields the EV owns in `mode` are written,
// plus the shape of the routing headers (has_srh, next_header):
//   STEV (our split, OCP 5.7 leaves it open): v = bytes 0-3 big-endian; flow label = v >> 12
//        (20 bits), UDP source port = 0xC000 | (v & 0xFFF) (12 bits in the dynamic range).
//        has_srh = false.
//   UDP: UDP source port = bytes 0-1 big-endian. has_srh = false.
//   SRV6: destination = bytes 0-15. If bytes 16-31 are not all zero (an all-zero segment is
//        the unspecified address, never a valid one) an SRH follows (RFC 8754, segment list
//        in reverse order): segments[0] = bytes 16-31 (final), segments[1] = bytes 0-15
//        (active, = DA), segments_left = last_entry = 1, num_segments = 2; ip.next_header =
//        routing, srh.next_header = UDP. Otherwise has_srh = false.
// When has_srh ends up false, ip.next_header is set to UDP. A mode outside the enum writes
// nothing.
void apply_to_envelope(FormatMode mode, const ExpandedEv& ev, wire::Ipv6Header& ip,
                       wire::UdpHeader& udp, wire::SrhHeader& srh, bool& has_srh);

// The IPv6 flow label a sender puts on a path's packets. STEV: the EV's 20 label bits (as
// apply_to_envelope writes them). UDP and SRV6, whose EVs route by source port or destination:
// a nonzero 20-bit hash of the EV, so each path is one flow (RFC 6437 section 3: a source may
// derive the label statelessly from the flow's identifiers, uniformly distributed) for any hop
// that balances on the label; and a Linux sender does not hash every datagram for an automatic
// label itself (net.ipv6.auto_flowlabels: siphash per datagram, ~4% of a sending core on
// mrc-fabric, docs/performance.md). 0 for a mode outside the enum.
uint32_t path_flow_label(FormatMode mode, const ExpandedEv& ev);

// The inverse, for tests and dissectors. STEV: bytes 0-3 = (flow_label << 12) |
// (src_port & 0xFFF) (the 0xC000 marker is not checked). UDP: bytes 0-1 = source port. SRV6
// without SRH: bytes 0-15 = destination (only the sender's view: transit uSID shifts change
// it); with SRH: bytes 0-15 = segments[1], bytes 16-31 = segments[0], kBadSrh unless
// num_segments == 2 and last_entry == 1. kInvalidArgument for a mode outside the enum.
Result<ExpandedEv> envelope_to_ev(FormatMode mode, const wire::Ipv6Header& ip,
                                  const wire::UdpHeader& udp, const wire::SrhHeader& srh,
                                  bool has_srh);

}  // namespace mrc::ev
