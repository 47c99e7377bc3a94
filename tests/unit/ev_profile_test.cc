// Entropy values: validation (OCP 5.5 / 6 rules), expansion (OCP 6 and both worked examples),
// generation (5.7), profile constructors and the packet envelope.
#include "transport/ev_profile.h"

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <bit>
#include <set>
#include <vector>

namespace mrc::ev {
namespace {

// ----- test support
// --------------------------------------------------------------------------------

FormatProfile fmt(FormatMode mode, std::vector<uint8_t> widths) {
  FormatProfile f{mode, {}};
  for (uint8_t w : widths)
    f.fields.push_back({w});
  return f;
}

EvValue bytes(std::initializer_list<uint8_t> b) {
  EvValue v{};
  std::copy(b.begin(), b.end(), v.begin());
  return v;
}

// Worked example 1 (OCP 6).
FormatProfile example1_format() {
  return fmt(FormatMode::kStev, {16, 16});
}
std::vector<Field> example1_fields() {
  return {{16, 0x1000, 0, 0xFF, 0x0F0F}, {16, 0x2000, 0, 0xFF, 0x0F0F}};
}

// Worked example 2 (OCP 6).
FormatProfile example2_format() {
  return fmt(FormatMode::kSrv6, {32, 16, 16, 16, 16});
}
std::vector<Field> example2_fields() {
  return {{32, 0x42424242, 0, 0, 0},
          {4, 0, 0, 0xF, 0xF},
          {4, 0, 0, 0xF, 0xF},
          {4, 0, 0, 0xF, 0xF},
          {4, 0, 0, 0xF, 0xF}};
}

// A field that passes every rule on its own, in a 16-bit slot.
Field good16() {
  return {16, 0x1000, 0, 0xFF, 0x0F0F};
}

Error err(const Status& s) {
  return s ? Error::kOk : s.error();
}
template <typename T>
Error err(const Result<T>& r) {
  return r ? Error::kOk : r.error();
}

// ----- names ----------------------------------------------------------------------------------

TEST(EvNames, EvStateName__all_states) {
  EXPECT_STREQ(ev_state_name(EvState::kGood), "good");
  EXPECT_STREQ(ev_state_name(EvState::kAssumedBad), "assumed_bad");
  EXPECT_STREQ(ev_state_name(EvState::kDenied), "denied");
  EXPECT_STREQ(ev_state_name(static_cast<EvState>(9)), "unknown");
}

TEST(EvNames, ModeNames__match_ocp_bits) {
  EXPECT_EQ(static_cast<int>(FormatMode::kStev), 1);
  EXPECT_EQ(static_cast<int>(FormatMode::kSrv6), 2);
  EXPECT_EQ(static_cast<int>(FormatMode::kUdp), 4);
  EXPECT_EQ(static_cast<int>(EvMode::kAuto), 1);
  EXPECT_EQ(static_cast<int>(EvMode::kExplicit), 2);
  EXPECT_EQ(static_cast<int>(EvMode::kGenerated), 4);
  EXPECT_STREQ(format_mode_name(FormatMode::kSrv6), "srv6");
  EXPECT_STREQ(ev_mode_name(EvMode::kGenerated), "generated");
  EXPECT_STREQ(format_mode_name(static_cast<FormatMode>(3)), "unknown");
}

// ----- validate_format ------------------------------------------------------------------------

TEST(ValidateFormat, ValidateFormat__accepts_each_mode_at_its_limit) {
  EXPECT_TRUE(validate_format(fmt(FormatMode::kStev, {20, 12})));
  EXPECT_TRUE(validate_format(fmt(FormatMode::kUdp, {16})));
  EXPECT_TRUE(validate_format(fmt(FormatMode::kSrv6, {128, 128})));
  EXPECT_EQ(format_width(fmt(FormatMode::kSrv6, {32, 16, 16})), 64u);
}

TEST(ValidateFormat, ValidateFormat__stev_too_wide) {
  EXPECT_EQ(err(validate_format(fmt(FormatMode::kStev, {17, 16}))), Error::kTooBig);
}

TEST(ValidateFormat, ValidateFormat__udp_too_wide) {
  EXPECT_EQ(err(validate_format(fmt(FormatMode::kUdp, {8, 9}))), Error::kTooBig);
}

TEST(ValidateFormat, ValidateFormat__srv6_too_wide) {
  EXPECT_EQ(err(validate_format(fmt(FormatMode::kSrv6, {128, 128, 1}))), Error::kTooBig);
}

TEST(ValidateFormat, ValidateFormat__too_many_fields) {
  FormatProfile f{FormatMode::kSrv6, std::vector<FormatField>(kMaxFields + 1, {1})};
  EXPECT_EQ(err(validate_format(f)), Error::kTooBig);
  f.fields.pop_back();
  EXPECT_TRUE(validate_format(f));
}

TEST(ValidateFormat, ValidateFormat__no_fields) {
  EXPECT_EQ(err(validate_format(fmt(FormatMode::kStev, {}))), Error::kBadEvProfile);
}

TEST(ValidateFormat, ValidateFormat__zero_width_field) {
  EXPECT_EQ(err(validate_format(fmt(FormatMode::kStev, {16, 0}))), Error::kBadEvProfile);
}

TEST(ValidateFormat, ValidateFormat__unknown_mode) {
  EXPECT_EQ(err(validate_format(fmt(static_cast<FormatMode>(3), {16}))), Error::kBadEvProfile);
}

// ----- validate_fields: one test per rule, each violating only that rule ------------------------

TEST(ValidateFields, ValidateFields__worked_examples_are_valid) {
  EXPECT_TRUE(validate_fields(example1_format(), example1_fields()));
  EXPECT_TRUE(validate_fields(example2_format(), example2_fields()));
  EXPECT_EQ(ev_bits_used(example1_fields()), 16u);
  EXPECT_EQ(ev_bits_used(example2_fields()), 16u);
}

TEST(ValidateFields, ValidateFields__invalid_format_reported_first) {
  EXPECT_EQ(err(validate_fields(fmt(FormatMode::kStev, {40}), std::vector<Field>{good16()})),
            Error::kTooBig);
}

TEST(ValidateFields, ValidateFields__no_fields) {
  EXPECT_EQ(err(validate_fields(example1_format(), {})), Error::kBadEvProfile);
}

TEST(ValidateFields, ValidateFields__more_fields_than_format_slots) {
  // Rule 1 (k <= m). Widths sum to 3 <= 32, every field alone is fine.
  std::vector<Field> f = {{1, 0, 0, 0, 0}, {1, 0, 0, 0, 0}, {1, 0, 0, 0, 0}};
  EXPECT_EQ(err(validate_fields(example1_format(), f)), Error::kTooBig);
}

TEST(ValidateFields, ValidateFields__total_width_exceeds_format) {
  // Rule 2. It is implied by "each field fits its slot", so it cannot be broken alone: this
  // profile also overflows slot 1. Either way the answer is EINVAL.
  std::vector<Field> f = {{8, 0, 0, 0, 0}, {16, 0, 0, 0, 0}};
  EXPECT_EQ(err(validate_fields(fmt(FormatMode::kStev, {8, 8}), f)), Error::kBadEvProfile);
}

TEST(ValidateFields, ValidateFields__init_val_too_wide) {
  // Rule 3.
  std::vector<Field> f = {{8, 0x100, 0, 0, 0}};
  EXPECT_EQ(err(validate_fields(fmt(FormatMode::kStev, {16}), f)), Error::kBadEvProfile);
  f[0].init_val = 0xFF;
  EXPECT_TRUE(validate_fields(fmt(FormatMode::kStev, {16}), f));
}

TEST(ValidateFields, ValidateFields__mask_above_width) {
  // Rule 4.
  std::vector<Field> f = {{8, 0, 0, 0, 0x100}};
  EXPECT_EQ(err(validate_fields(fmt(FormatMode::kStev, {16}), f)), Error::kBadEvProfile);
}

TEST(ValidateFields, ValidateFields__max_val_exceeds_mask_bits) {
  // Rule 5: popcount(0x0F0F) = 8, so max_val must be < 256.
  std::vector<Field> f = {good16()};
  f[0].max_val = 0x100;
  EXPECT_EQ(err(validate_fields(fmt(FormatMode::kStev, {16}), f)), Error::kBadEvProfile);
  f[0].max_val = 0xFF;
  EXPECT_TRUE(validate_fields(fmt(FormatMode::kStev, {16}), f));
}

TEST(ValidateFields, ValidateFields__max_val_on_fixed_field) {
  // Rule 5 with an empty mask: 2^0 = 1, so a fixed field needs max_val = 0.
  std::vector<Field> f = {{16, 7, 0, 1, 0}};
  EXPECT_EQ(err(validate_fields(fmt(FormatMode::kStev, {16}), f)), Error::kBadEvProfile);
}

TEST(ValidateFields, ValidateFields__min_val_above_max_val) {
  std::vector<Field> f = {good16()};
  f[0].min_val = 5;
  f[0].max_val = 4;
  EXPECT_EQ(err(validate_fields(fmt(FormatMode::kStev, {16}), f)), Error::kBadEvProfile);
}

TEST(ValidateFields, ValidateFields__width_above_32) {
  // OCP 5.3: width <= 32. A 40-bit slot so that only this rule is broken.
  std::vector<Field> f = {{33, 0, 0, 0, 0}};
  EXPECT_EQ(err(validate_fields(fmt(FormatMode::kSrv6, {40}), f)), Error::kBadEvProfile);
  f[0].width = 32;
  EXPECT_TRUE(validate_fields(fmt(FormatMode::kSrv6, {40}), f));
}

TEST(ValidateFields, ValidateFields__field_wider_than_its_slot) {
  // OCP 6 step 3 interpretation. Total width 16 = format width 16, so rule 2 holds.
  std::vector<Field> f = {{12, 0, 0, 0, 0}, {4, 0, 0, 0, 0}};
  EXPECT_EQ(err(validate_fields(fmt(FormatMode::kStev, {8, 8}), f)), Error::kBadEvProfile);
}

TEST(ValidateFields, ValidateFields__ev_bits_exceed_device_width) {
  // Rule 6. 9 EV bits against a device limit of 8.
  std::vector<Field> f = {{16, 0, 0, 0, 0x1FF}};
  EXPECT_EQ(err(validate_fields(fmt(FormatMode::kStev, {16}), f, 8)), Error::kBadEvProfile);
  EXPECT_TRUE(validate_fields(fmt(FormatMode::kStev, {16}), f, 9));
}

TEST(ValidateFields, ValidateFields__zero_width_field_is_allowed) {
  std::vector<Field> f = {{0, 0, 0, 0, 0}, good16()};
  EXPECT_TRUE(validate_fields(fmt(FormatMode::kStev, {16, 16}), f));
}

// ----- expand -----------------------------------------------------------------------------------

TEST(Expand, Expand__worked_example_1) {
  auto x = expand(example1_format(), example1_fields(), bytes({0x33, 0x12}));
  ASSERT_TRUE(x);
  EXPECT_EQ(*x, bytes({0x13, 0x03, 0x21, 0x02}));  // 0x13032102, then zeros
}

TEST(Expand, Expand__worked_example_2) {
  auto x = expand(example2_format(), example2_fields(), bytes({0x78, 0xBA}));
  ASSERT_TRUE(x);
  // 4242:4242:0007:0008:000b:000a:: and nothing in the SRH half.
  EXPECT_EQ(*x, bytes({0x42, 0x42, 0x42, 0x42, 0x00, 0x07, 0x00, 0x08, 0x00, 0x0b, 0x00, 0x0a}));
}

TEST(Expand, Expand__non_contiguous_mask) {
  // Mask bits 15, 9, 8 and 0: first EV bit -> bit 15, ... last -> bit 0. EV 1011 -> 0x8101.
  std::vector<Field> f = {{16, 0x0000, 0, 0xF, 0x8301}};
  auto x = expand(fmt(FormatMode::kUdp, {16}), f, bytes({0xB0}));
  ASSERT_TRUE(x);
  EXPECT_EQ(*x, bytes({0x81, 0x01}));
  // init_val bits under the mask are replaced, the others kept: init 0xFFFF, EV 0000.
  f[0].init_val = 0xFFFF;
  x = expand(fmt(FormatMode::kUdp, {16}), f, bytes({0x00}));
  ASSERT_TRUE(x);
  EXPECT_EQ(*x, bytes({0x7C, 0xFE}));
}

TEST(Expand, Expand__field_narrower_than_slot_is_right_aligned) {
  // A 4-bit field in a 12-bit slot, then an 8-bit fixed field: 0000 0000 0101 | 1010 1010.
  std::vector<Field> f = {{4, 0, 0, 0xF, 0xF}, {8, 0xAA, 0, 0, 0}};
  auto x = expand(fmt(FormatMode::kStev, {12, 8}), f, bytes({0x50}));
  ASSERT_TRUE(x);
  EXPECT_EQ(*x, bytes({0x00, 0x5A, 0xA0}));
}

TEST(Expand, Expand__slots_after_last_field_stay_zero) {
  std::vector<Field> f = {{8, 0xFF, 0, 0, 0}};
  auto x = expand(fmt(FormatMode::kStev, {8, 8, 8, 8}), f, EvValue{});
  ASSERT_TRUE(x);
  EXPECT_EQ(*x, bytes({0xFF}));
}

TEST(Expand, Expand__fixed_field_consumes_no_bits) {
  // Field 0 is fixed, so field 1 reads the first EV bits.
  std::vector<Field> f = {{8, 0x11, 0, 0, 0}, {8, 0, 0, 0xFF, 0xFF}};
  auto x = expand(fmt(FormatMode::kUdp, {8, 8}), f, bytes({0xAB}));
  ASSERT_TRUE(x);
  EXPECT_EQ(*x, bytes({0x11, 0xAB}));
}

TEST(Expand, Expand__full_32_bit_field) {
  std::vector<Field> f = {{32, 0, 0, 0xFFFFFFFF, 0xFFFFFFFF}};
  auto x = expand(fmt(FormatMode::kStev, {32}), f, bytes({0xDE, 0xAD, 0xBE, 0xEF}));
  ASSERT_TRUE(x);
  EXPECT_EQ(*x, bytes({0xDE, 0xAD, 0xBE, 0xEF}));
}

TEST(Expand, Expand__fields_straddle_byte_boundaries_and_srh_half) {
  // OCP 5.7 SRv6+SRH layout: locator + 6 uSIDs, then locator + 4 uSIDs (224 bits); the uSIDs
  // are 3-bit values read from unaligned EV bit positions.
  FormatProfile f6 = fmt(FormatMode::kSrv6, {32, 16, 16, 16, 16, 16, 16, 32, 16, 16, 16, 16});
  std::vector<Field> f;
  f.push_back({32, 0xFC000000, 0, 0, 0});
  for (int i = 0; i < 6; ++i)
    f.push_back({3, 0, 0, 7, 7});
  f.push_back({32, 0xFC000001, 0, 0, 0});
  for (int i = 0; i < 4; ++i)
    f.push_back({3, 0, 0, 7, 7});
  // uSID values 1..7,0,1,2 as 3-bit groups: 001 010 011 100 101 110 111 000 001 010.
  std::vector<uint32_t> vals = {0, 1, 2, 3, 4, 5, 6, 0, 7, 0, 1, 2};
  auto ev = pack(f, vals);
  ASSERT_TRUE(ev);
  EXPECT_EQ(*ev, ev_from_bits(0b001'010'011'100'101'110'111'000'001'010, 30));
  auto x = expand(f6, f, *ev);
  ASSERT_TRUE(x);
  EXPECT_EQ(*x, bytes({0xFC, 0, 0, 0, 0, 1, 0, 2, 0, 3, 0, 4, 0, 5, 0, 6,  //
                       0xFC, 0, 0, 1, 0, 7, 0, 0, 0, 1, 0, 2, 0, 0, 0, 0}));
}

TEST(Expand, Expand__stray_bits_after_consumed_count_rejected) {
  // Example 1 consumes 16 bits; bit 16 (the first of byte 2) set is stray.
  EXPECT_EQ(err(expand(example1_format(), example1_fields(), bytes({0x33, 0x12, 0x80}))),
            Error::kBadEvProfile);
  // The very last bit of the 256-bit string.
  EvValue last = bytes({0x33, 0x12});
  last[31] = 0x01;
  EXPECT_EQ(err(expand(example1_format(), example1_fields(), last)), Error::kBadEvProfile);
  // Mid-byte: a profile consuming 4 bits, with bit 4 set.
  std::vector<Field> f = {{4, 0, 0, 0xF, 0xF}};
  EXPECT_EQ(err(expand(fmt(FormatMode::kUdp, {16}), f, bytes({0x58}))), Error::kBadEvProfile);
  EXPECT_TRUE(expand(fmt(FormatMode::kUdp, {16}), f, bytes({0x50})));
}

TEST(Expand, Expand__invalid_profile_rejected) {
  std::vector<Field> f = example1_fields();
  f[1].mask = 0x10000;
  EXPECT_EQ(err(expand(example1_format(), f, bytes({0x33, 0x12}))), Error::kBadEvProfile);
}

// ----- ev_from_bits / pack ----------------------------------------------------------------------

TEST(EvBits, EvFromBits__msb_first) {
  EXPECT_EQ(ev_from_bits(0x3312, 16), bytes({0x33, 0x12}));
  EXPECT_EQ(ev_from_bits(0x5, 4), bytes({0x50}));
  EXPECT_EQ(ev_from_bits(0x123456789ABCDEF0ull, 64),
            bytes({0x12, 0x34, 0x56, 0x78, 0x9A, 0xBC, 0xDE, 0xF0}));
  EXPECT_EQ(ev_from_bits(0xFFFF, 0), EvValue{});
}

TEST(EvBits, Pack__worked_example_2_values) {
  auto ev = pack(example2_fields(), std::vector<uint32_t>{0, 7, 8, 0xB, 0xA});
  ASSERT_TRUE(ev);
  EXPECT_EQ(*ev, bytes({0x78, 0xBA}));
}

TEST(EvBits, Pack__rejects_bad_arguments) {
  EXPECT_EQ(err(pack(example2_fields(), std::vector<uint32_t>{0, 1})), Error::kInvalidArgument);
  EXPECT_EQ(err(pack(example2_fields(), std::vector<uint32_t>{0, 16, 0, 0, 0})),
            Error::kInvalidArgument);
  EXPECT_EQ(err(pack(example2_fields(), std::vector<uint32_t>{1, 0, 0, 0, 0})),
            Error::kInvalidArgument);
}

// ----- generate ---------------------------------------------------------------------------------

TEST(Generate, Generate__last_field_fastest) {
  std::vector<Field> f = {{4, 0, 0, 1, 0xF}, {4, 0, 0, 2, 0xF}};
  auto g = generate(f, 6);
  ASSERT_TRUE(g);
  ASSERT_EQ(g->size(), 6u);
  // (0,0) (0,1) (0,2) (1,0) (1,1) (1,2), 4 bits each.
  const uint8_t expect[] = {0x00, 0x01, 0x02, 0x10, 0x11, 0x12};
  for (int i = 0; i < 6; ++i)
    EXPECT_EQ((*g)[i], bytes({expect[i]})) << i;
}

TEST(Generate, Generate__respects_min_val_and_skips_fixed_fields) {
  // The fixed field contributes no bits; the generated one runs 5, 6, 7.
  std::vector<Field> f = {{16, 0xABCD, 0, 0, 0}, {8, 0, 5, 7, 0xFF}};
  auto g = generate(f, 3);
  ASSERT_TRUE(g);
  EXPECT_EQ((*g)[0], bytes({5}));
  EXPECT_EQ((*g)[1], bytes({6}));
  EXPECT_EQ((*g)[2], bytes({7}));
  EXPECT_EQ(count_combinations(f), 3u);
}

TEST(Generate, Generate__wraps_when_count_exceeds_combinations) {
  std::vector<Field> f = {{2, 0, 0, 2, 3}};  // 3 combinations: 0, 1, 2
  auto g = generate(f, 7);
  ASSERT_TRUE(g);
  const uint8_t expect[] = {0x00, 0x40, 0x80, 0x00, 0x40, 0x80, 0x00};
  for (int i = 0; i < 7; ++i)
    EXPECT_EQ((*g)[i], bytes({expect[i]})) << i;
}

TEST(Generate, Generate__distinct_up_to_combination_count) {
  auto g = generate(example2_fields(), 65536);
  ASSERT_TRUE(g);
  std::set<EvValue> seen(g->begin(), g->end());
  EXPECT_EQ(seen.size(), 65536u);
  EXPECT_EQ(count_combinations(example2_fields()), 65536u);
  // Ascending as big-endian numbers: EV j is j.
  EXPECT_EQ((*g)[0x78BA], bytes({0x78, 0xBA}));
  for (const EvValue& v : *g)
    ASSERT_TRUE(expand(example2_format(), example2_fields(), v));
}

TEST(Generate, Generate__count_combinations_saturates) {
  std::vector<Field> f(3, Field{32, 0, 0, 0xFFFFFFFF, 0xFFFFFFFF});
  EXPECT_EQ(count_combinations(f), UINT64_MAX);
  auto g = generate(f, 2);
  ASSERT_TRUE(g);
  EvValue one{};
  one[11] = 1;  // fields 0 and 1 at 0, field 2 (bits 64-95) at 1
  EXPECT_EQ((*g)[1], one);
}

TEST(Generate, Generate__no_combinations) {
  std::vector<Field> f = {{4, 0, 3, 2, 0xF}};
  EXPECT_EQ(count_combinations(f), 0u);
  EXPECT_EQ(err(generate(f, 1)), Error::kBadEvProfile);
}

TEST(Generate, Generate__zero_count) {
  EXPECT_EQ(err(generate(example2_fields(), 0)), Error::kInvalidArgument);
}

TEST(Generate, Generate__invalid_fields) {
  EXPECT_EQ(err(generate({}, 1)), Error::kBadEvProfile);
  std::vector<Field> f = {{4, 0, 0, 16, 0xF}};
  EXPECT_EQ(err(generate(f, 1)), Error::kBadEvProfile);
  std::vector<Field> many(kMaxFields + 1, Field{1, 0, 0, 0, 0});
  EXPECT_EQ(err(generate(many, 1)), Error::kTooBig);
  std::vector<Field> wide(9, Field{32, 0, 0, 0, 0xFFFFFFFF});  // 288 EV bits
  EXPECT_EQ(err(generate(wide, 1)), Error::kBadEvProfile);
}

// ----- profiles ---------------------------------------------------------------------------------

EvProfile explicit_example1() {
  EvProfile p;
  p.mode = EvMode::kExplicit;
  p.format = example1_format();
  p.fields = example1_fields();
  p.entries = {{bytes({0x33, 0x12}), 0}, {bytes({0x00, 0x00}), 1, EvState::kDenied}};
  p.ev_min_active = 1;
  return p;
}

TEST(EvProfile, ExpandAll__index_aligned_including_denied) {
  auto x = expand_all(explicit_example1());
  ASSERT_TRUE(x);
  ASSERT_EQ(x->size(), 2u);
  EXPECT_EQ((*x)[0], bytes({0x13, 0x03, 0x21, 0x02}));
  EXPECT_EQ((*x)[1], bytes({0x10, 0x00, 0x20, 0x00}));
  EXPECT_EQ(count_usable(explicit_example1().entries), 1u);
}

TEST(EvProfile, ExpandAll__stray_bits_in_an_entry) {
  EvProfile p = explicit_example1();
  p.entries[1].value[5] = 1;
  EXPECT_EQ(err(expand_all(p)), Error::kBadEvProfile);
  EXPECT_EQ(err(validate_profile(p)), Error::kBadEvProfile);
}

TEST(EvProfile, ValidateProfile__min_active_above_count) {
  EvProfile p = explicit_example1();
  p.ev_min_active = 3;
  EXPECT_EQ(err(validate_profile(p)), Error::kBadEvProfile);
  p.ev_min_active = 2;
  EXPECT_TRUE(validate_profile(p));
}

TEST(EvProfile, ValidateProfile__no_entries) {
  EvProfile p = explicit_example1();
  p.entries.clear();
  p.ev_min_active = 0;
  EXPECT_EQ(err(validate_profile(p)), Error::kBadEvProfile);
}

TEST(EvProfile, ValidateProfile__device_ev_width) {
  EXPECT_EQ(err(validate_profile(explicit_example1(), 15)), Error::kBadEvProfile);
  EXPECT_TRUE(validate_profile(explicit_example1(), 16));
}

TEST(EvProfile, ValidateProfile__bad_fields_or_mode) {
  EvProfile p = explicit_example1();
  p.fields[0].init_val = 0x10000;
  EXPECT_EQ(err(validate_profile(p)), Error::kBadEvProfile);
  p = explicit_example1();
  p.mode = static_cast<EvMode>(3);
  EXPECT_EQ(err(validate_profile(p)), Error::kBadEvProfile);
}

TEST(EvProfile, ExpandAll__auto_has_no_evs) {
  EvProfile p;  // AUTO, no format, no fields
  auto x = expand_all(p);
  ASSERT_TRUE(x);
  EXPECT_TRUE(x->empty());
  p.entries.push_back({});
  EXPECT_EQ(err(validate_profile(p)), Error::kBadEvProfile);
}

TEST(EvProfile, MakeSrv6Profile__worked_example_2_layout) {
  auto p = make_srv6_profile(0x42424242, 4, 4, 16, 1, 8);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->mode, EvMode::kGenerated);
  EXPECT_EQ(p->format.mode, FormatMode::kSrv6);
  ASSERT_EQ(p->format.fields.size(), example2_format().fields.size());
  for (size_t i = 0; i < p->format.fields.size(); ++i) {
    EXPECT_EQ(p->format.fields[i].width, example2_format().fields[i].width);
  }
  // Example 2's fields, except that generated uSIDs start at 1 (0 ends a uSID carrier).
  std::vector<Field> want = example2_fields();
  for (size_t i = 1; i < want.size(); ++i)
    want[i].min_val = 1;
  EXPECT_EQ(p->fields, want);
  EXPECT_EQ(p->entries.size(), 16u);
  EXPECT_EQ(p->ev_min_active, 8u);
  auto x = expand_all(*p);
  ASSERT_TRUE(x);
  // Last field fastest: entry 11 is uSIDs 1,1,1,12; entry 15 wraps into the third uSID.
  EXPECT_EQ((*x)[11], bytes({0x42, 0x42, 0x42, 0x42, 0, 1, 0, 1, 0, 1, 0, 12}));
  EXPECT_EQ((*x)[15], bytes({0x42, 0x42, 0x42, 0x42, 0, 1, 0, 1, 0, 2, 0, 1}));
}

TEST(EvProfile, MakeSrv6Profile__ports_interleaved_each_plane_sees_every_spine) {
  // Two-tier Clos, 8 planes, 15 spines per plane (uSIDs 1-15): the EV picks the spine uSID
  // (slot 0).
  auto p = make_srv6_profile(0xFC000000, 1, 4, 120, 8, 64);
  ASSERT_TRUE(p);
  auto x = expand_all(*p);
  ASSERT_TRUE(x);
  std::set<std::pair<int, uint16_t>> pairs;
  for (size_t i = 0; i < p->entries.size(); ++i) {
    EXPECT_EQ(p->entries[i].port, i % 8);
    EXPECT_EQ(usid_at((*x)[i], 0), i / 8 + 1);
    pairs.insert({p->entries[i].port, usid_at((*x)[i], 0)});
  }
  EXPECT_EQ(pairs.size(), 120u);
  // Per destination: leaf and host uSIDs after the spine.
  auto d = with_usid((*x)[37], 1, 0x0123);
  ASSERT_TRUE(d);
  d = with_usid(*d, 2, 0x0045);
  ASSERT_TRUE(d);
  const uint16_t usids[] = {5, 0x0123, 0x0045};
  EXPECT_EQ(*d, *srv6_carrier(0xFC000000, usids));
}

TEST(EvProfile, MakeSrv6Profile__bad_arguments) {
  EXPECT_EQ(err(make_srv6_profile(1, 0, 4, 8, 1, 1)), Error::kInvalidArgument);
  EXPECT_EQ(err(make_srv6_profile(1, 7, 4, 8, 1, 1)), Error::kInvalidArgument);
  EXPECT_EQ(err(make_srv6_profile(1, 1, 17, 8, 1, 1)), Error::kInvalidArgument);
  EXPECT_EQ(err(make_srv6_profile(1, 1, 0, 8, 1, 1)), Error::kInvalidArgument);
  EXPECT_EQ(err(make_srv6_profile(1, 1, 4, 0, 1, 0)), Error::kInvalidArgument);
  EXPECT_EQ(err(make_srv6_profile(1, 1, 4, 8, 0, 1)), Error::kInvalidArgument);
  EXPECT_EQ(err(make_srv6_profile(1, 1, 4, 8, 257, 1)), Error::kInvalidArgument);
  EXPECT_EQ(err(make_srv6_profile(1, 1, 4, 8, 1, 9)), Error::kInvalidArgument);
  EXPECT_TRUE(make_srv6_profile(1, 6, 16, 8, 256, 8));
}

TEST(EvProfile, MakeStevProfile__values_per_plane) {
  auto p = make_stev_profile(12, 4, 6);
  ASSERT_TRUE(p);
  auto x = expand_all(*p);
  ASSERT_TRUE(x);
  for (uint32_t i = 0; i < 12; ++i) {
    EXPECT_EQ(p->entries[i].port, i % 4);
    EXPECT_EQ((*x)[i], ev_from_bits(i / 4, 32));
  }
}

TEST(EvProfile, MakeUdpProfile__dynamic_source_ports) {
  auto p = make_udp_profile(4, 2, 2);
  ASSERT_TRUE(p);
  auto x = expand_all(*p);
  ASSERT_TRUE(x);
  EXPECT_EQ((*x)[0], bytes({0xC0, 0x00}));
  EXPECT_EQ((*x)[1], bytes({0xC0, 0x00}));
  EXPECT_EQ((*x)[3], bytes({0xC0, 0x01}));
  EXPECT_EQ(err(make_udp_profile(4, 2, 5)), Error::kInvalidArgument);
}

TEST(EvProfile, CountUsable__only_good) {
  std::vector<EvEntry> e(5);
  e[1].state = EvState::kAssumedBad;
  e[3].state = EvState::kDenied;
  EXPECT_EQ(count_usable(e), 3u);
}

// ----- uSID carriers ----------------------------------------------------------------------------

TEST(Usid, Srv6Carrier__second_carrier_gets_locator) {
  const uint16_t u[] = {1, 2, 3, 4, 5, 6, 7, 8};
  auto c = srv6_carrier(0xFC00ABCD, u);
  ASSERT_TRUE(c);
  EXPECT_EQ(*c, bytes({0xFC, 0x00, 0xAB, 0xCD, 0, 1, 0, 2, 0, 3, 0, 4, 0, 5, 0, 6,  //
                       0xFC, 0x00, 0xAB, 0xCD, 0, 7, 0, 8}));
  for (int s = 0; s < 8; ++s)
    EXPECT_EQ(usid_at(*c, s), s + 1);
  EXPECT_EQ(usid_at(*c, 8), 0);
  EXPECT_EQ(usid_at(*c, kMaxUsidSlots), 0);
  EXPECT_EQ(usid_at(*c, -1), 0);
}

TEST(Usid, Srv6Carrier__too_many_usids) {
  std::vector<uint16_t> u(kMaxUsidSlots + 1, 1);
  EXPECT_EQ(err(srv6_carrier(0, u)), Error::kInvalidArgument);
  u.pop_back();
  EXPECT_TRUE(srv6_carrier(0, u));
}

TEST(Usid, Srv6Carrier__zero_usid_rejected) {
  const uint16_t u[] = {1, 0, 3};
  EXPECT_EQ(err(srv6_carrier(0xFC000000, u)), Error::kInvalidArgument);
  EXPECT_TRUE(srv6_carrier(0xFC000000, std::span<const uint16_t>{}));
}

TEST(Usid, WithUsid__bounds_and_bytes) {
  auto e = with_usid(ExpandedEv{}, 11, 0xBEEF);
  ASSERT_TRUE(e);
  EXPECT_EQ((*e)[30], 0xBE);
  EXPECT_EQ((*e)[31], 0xEF);
  EXPECT_EQ(err(with_usid(ExpandedEv{}, 12, 1)), Error::kInvalidArgument);
  EXPECT_EQ(err(with_usid(ExpandedEv{}, -1, 1)), Error::kInvalidArgument);
}

// ----- envelope ---------------------------------------------------------------------------------

struct Envelope {
  wire::Ipv6Header ip;
  wire::UdpHeader udp;
  wire::SrhHeader srh;
  bool has_srh = true;
};

TEST(Envelope, ApplyToEnvelope__stev_split) {
  Envelope e;
  e.ip.next_header = wire::kIpProtoRouting;
  const ExpandedEv x = ev_from_bits(0x13032102, 32);
  apply_to_envelope(FormatMode::kStev, x, e.ip, e.udp, e.srh, e.has_srh);
  EXPECT_EQ(e.ip.flow_label, 0x13032u);
  EXPECT_EQ(e.udp.src_port, 0xC102);
  EXPECT_FALSE(e.has_srh);
  EXPECT_EQ(e.ip.next_header, wire::kIpProtoUdp);
  EXPECT_EQ(e.udp.dst_port, wire::kRoceV2Port);
  EXPECT_EQ(e.ip.dst, wire::Ipv6Addr{});
  auto back = envelope_to_ev(FormatMode::kStev, e.ip, e.udp, e.srh, e.has_srh);
  ASSERT_TRUE(back);
  EXPECT_EQ(*back, x);
}

TEST(Envelope, ApplyToEnvelope__udp_source_port) {
  Envelope e;
  e.ip.flow_label = 0x12345;
  apply_to_envelope(FormatMode::kUdp, bytes({0xC1, 0x23}), e.ip, e.udp, e.srh, e.has_srh);
  EXPECT_EQ(e.udp.src_port, 0xC123);
  EXPECT_EQ(e.ip.flow_label, 0x12345u);  // not the EV's
  EXPECT_FALSE(e.has_srh);
  auto back = envelope_to_ev(FormatMode::kUdp, e.ip, e.udp, e.srh, e.has_srh);
  ASSERT_TRUE(back);
  EXPECT_EQ(*back, bytes({0xC1, 0x23}));
}

TEST(Envelope, ApplyToEnvelope__srv6_destination_only) {
  Envelope e;
  e.udp.src_port = 0xC777;
  auto x = expand(example2_format(), example2_fields(), bytes({0x78, 0xBA}));
  ASSERT_TRUE(x);
  apply_to_envelope(FormatMode::kSrv6, *x, e.ip, e.udp, e.srh, e.has_srh);
  EXPECT_FALSE(e.has_srh);
  EXPECT_EQ(e.ip.next_header, wire::kIpProtoUdp);
  const wire::Ipv6Addr want = {0x42, 0x42, 0x42, 0x42, 0, 7, 0, 8, 0, 0xb, 0, 0xa, 0, 0, 0, 0};
  EXPECT_EQ(e.ip.dst, want);
  EXPECT_EQ(e.udp.src_port, 0xC777);  // not the EV's
  auto back = envelope_to_ev(FormatMode::kSrv6, e.ip, e.udp, e.srh, e.has_srh);
  ASSERT_TRUE(back);
  EXPECT_EQ(*back, *x);
}

TEST(Envelope, ApplyToEnvelope__srv6_with_srh_reverse_order) {
  Envelope e;
  e.has_srh = false;
  const uint16_t u[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  auto x = srv6_carrier(0xFC000000, u);
  ASSERT_TRUE(x);
  apply_to_envelope(FormatMode::kSrv6, *x, e.ip, e.udp, e.srh, e.has_srh);
  ASSERT_TRUE(e.has_srh);
  EXPECT_EQ(e.ip.next_header, wire::kIpProtoRouting);
  EXPECT_EQ(e.srh.next_header, wire::kIpProtoUdp);
  EXPECT_EQ(e.srh.num_segments, 2);
  EXPECT_EQ(e.srh.last_entry, 1);
  EXPECT_EQ(e.srh.segments_left, 1);
  wire::Ipv6Addr first{}, final{};
  std::copy_n(x->begin(), 16, first.begin());
  std::copy_n(x->begin() + 16, 16, final.begin());
  EXPECT_EQ(e.ip.dst, first);
  EXPECT_EQ(e.srh.segments[1], first);  // active segment = DA
  EXPECT_EQ(e.srh.segments[0], final);  // final segment
  auto back = envelope_to_ev(FormatMode::kSrv6, e.ip, e.udp, e.srh, e.has_srh);
  ASSERT_TRUE(back);
  EXPECT_EQ(*back, *x);
  // A later SRv6 EV without a segment removes the SRH again.
  apply_to_envelope(FormatMode::kSrv6, ExpandedEv{0xFC}, e.ip, e.udp, e.srh, e.has_srh);
  EXPECT_FALSE(e.has_srh);
  EXPECT_EQ(e.ip.next_header, wire::kIpProtoUdp);
}

TEST(Envelope, PathFlowLabel__stev_bits_otherwise_a_nonzero_hash_of_the_ev) {
  // STEV: exactly the label apply_to_envelope writes.
  const ExpandedEv stev = ev_from_bits(0x13032102, 32);
  EXPECT_EQ(path_flow_label(FormatMode::kStev, stev), 0x13032u);
  EXPECT_EQ(path_flow_label(FormatMode::kStev, ev_from_bits(0x00000FFF, 32)), 0u);
  // UDP and SRV6: 20 bits, never 0 (not even for the all-zero EV), stable, and different EVs
  // spread: 256 SRV6 spines' carriers give (almost) 256 labels, every byte counts.
  EXPECT_NE(path_flow_label(FormatMode::kSrv6, ExpandedEv{}), 0u);
  std::set<uint32_t> labels;
  for (uint16_t spine = 1; spine <= 256; ++spine) {
    const uint16_t u[] = {spine, 0x0A01};
    auto x = srv6_carrier(0xFCBB0000, u);
    ASSERT_TRUE(x);
    const uint32_t l = path_flow_label(FormatMode::kSrv6, *x);
    EXPECT_LE(l, 0xFFFFFu);
    EXPECT_NE(l, 0u);
    EXPECT_EQ(l, path_flow_label(FormatMode::kSrv6, *x));
    labels.insert(l);
  }
  EXPECT_GE(labels.size(), 250u);
  for (size_t byte = 0; byte < kEvBytes; ++byte) {
    ExpandedEv a{}, b{};
    b[byte] = 1;
    EXPECT_NE(path_flow_label(FormatMode::kUdp, a), path_flow_label(FormatMode::kUdp, b))
        << "byte " << byte;
  }
  EXPECT_EQ(path_flow_label(static_cast<FormatMode>(3), stev), 0u);
}

TEST(Envelope, EnvelopeToEv__bad_srh_and_mode) {
  Envelope e;
  e.srh.num_segments = 3;
  e.srh.last_entry = 2;
  EXPECT_EQ(err(envelope_to_ev(FormatMode::kSrv6, e.ip, e.udp, e.srh, true)), Error::kBadSrh);
  EXPECT_EQ(err(envelope_to_ev(static_cast<FormatMode>(3), e.ip, e.udp, e.srh, false)),
            Error::kInvalidArgument);
}

// ----- properties -------------------------------------------------------------------------------

struct Case {
  FormatProfile format;
  std::vector<Field> fields;
};

uint32_t low(uint32_t n) {
  return n >= 32 ? 0xFFFFFFFFu : (1u << n) - 1;
}

// A random valid SRv6 profile: 1-6 fields of width 0-32, each in a slot up to 8 bits wider,
// plus up to two unused trailing slots (at most 6 * 40 + 8 = 248 bits).
Case gen_case() {
  Case c{{FormatMode::kSrv6, {}}, {}};
  const int k = *rc::gen::inRange(1, 7);
  for (int i = 0; i < k; ++i) {
    const uint32_t w = *rc::gen::inRange<uint32_t>(0, 33);
    const uint32_t slot = std::max<uint32_t>(1, w + *rc::gen::inRange<uint32_t>(0, 9));
    const uint32_t mask = *rc::gen::arbitrary<uint32_t>() & low(w);
    const uint32_t n = std::popcount(mask);
    const uint32_t max = *rc::gen::arbitrary<uint32_t>() & low(n);
    const uint32_t min =
        static_cast<uint32_t>(*rc::gen::arbitrary<uint64_t>() % (uint64_t{max} + 1));
    c.format.fields.push_back({static_cast<uint8_t>(slot)});
    c.fields.push_back({w, *rc::gen::arbitrary<uint32_t>() & low(w), min, max, mask});
  }
  const int extra = *rc::gen::inRange(0, 3);
  for (int i = 0; i < extra; ++i) {
    c.format.fields.push_back({static_cast<uint8_t>(*rc::gen::inRange(1, 5))});
  }
  return c;
}

// A random EV using exactly the first `used` bits.
EvValue gen_ev(uint32_t used) {
  EvValue v{};
  for (auto& b : v)
    b = *rc::gen::arbitrary<uint8_t>();
  for (uint32_t bit = used; bit < kEvBits; ++bit)
    v[bit / 8] &= ~(0x80 >> (bit % 8));
  return v;
}

bool bit_at(const std::array<uint8_t, kEvBytes>& s, uint32_t pos) {
  return (s[pos / 8] >> (7 - pos % 8)) & 1;
}

// OCP 6, read literally: walk the mask from its most significant set bit down, writing the
// next EV bit; then write the value bit by bit, right-aligned in its slot.
ExpandedEv reference_expand(const Case& c, const EvValue& ev) {
  ExpandedEv out{};
  uint32_t cur = 0, d = 0;
  for (size_t i = 0; i < c.fields.size(); ++i) {
    const Field& f = c.fields[i];
    uint32_t v = f.init_val;
    for (int b = 31; b >= 0; --b) {
      if (!((f.mask >> b) & 1)) continue;
      v = (v & ~(1u << b)) | (uint32_t{bit_at(ev, cur++)} << b);
    }
    const uint32_t slot = c.format.fields[i].width;
    for (uint32_t b = 0; b < f.width; ++b) {
      if ((v >> (f.width - 1 - b)) & 1) {
        const uint32_t pos = d + slot - f.width + b;
        out[pos / 8] |= static_cast<uint8_t>(0x80 >> (pos % 8));
      }
    }
    d += slot;
  }
  return out;
}

// The value of field i as written in the expanded EV, and whether its slot's extra high bits
// are zero.
uint32_t slot_value(const Case& c, const ExpandedEv& x, size_t i, bool& high_zero) {
  uint32_t d = 0;
  for (size_t j = 0; j < i; ++j)
    d += c.format.fields[j].width;
  const uint32_t slot = c.format.fields[i].width, w = c.fields[i].width;
  high_zero = true;
  for (uint32_t b = 0; b < slot - w; ++b)
    high_zero = high_zero && !bit_at(x, d + b);
  uint32_t v = 0;
  for (uint32_t b = 0; b < w; ++b)
    v = (v << 1) | bit_at(x, d + slot - w + b);
  return v;
}

RC_GTEST_PROP(ExpandProperty, Expand__matches_literal_algorithm, ()) {
  const Case c = gen_case();
  RC_ASSERT(validate_fields(c.format, c.fields).has_value());
  const EvValue ev = gen_ev(ev_bits_used(c.fields));
  auto x = expand(c.format, c.fields, ev);
  RC_ASSERT(x.has_value());
  RC_ASSERT(*x == reference_expand(c, ev));
}

RC_GTEST_PROP(ExpandProperty, Expand__only_masked_bits_change, ()) {
  const Case c = gen_case();
  const EvValue ev = gen_ev(ev_bits_used(c.fields));
  auto x = expand(c.format, c.fields, ev);
  RC_ASSERT(x.has_value());
  uint32_t used = 0;
  for (size_t i = 0; i < c.fields.size(); ++i) {
    bool high_zero = false;
    const uint32_t v = slot_value(c, *x, i, high_zero);
    RC_ASSERT(high_zero);
    RC_ASSERT((v & ~c.fields[i].mask) == (c.fields[i].init_val & ~c.fields[i].mask));
    used += c.format.fields[i].width;
  }
  // Unused trailing slots are zero.
  for (uint32_t b = used; b < kEvBits; ++b)
    RC_ASSERT(!bit_at(*x, b));
}

RC_GTEST_PROP(ExpandProperty, Expand__injective_on_consumed_bits, ()) {
  const Case c = gen_case();
  const uint32_t used = ev_bits_used(c.fields);
  RC_PRE(used > 0u);
  const EvValue a = gen_ev(used);
  EvValue b = a;
  const uint32_t flip = *rc::gen::inRange<uint32_t>(0, used);
  b[flip / 8] ^= static_cast<uint8_t>(0x80 >> (flip % 8));
  auto xa = expand(c.format, c.fields, a);
  auto xb = expand(c.format, c.fields, b);
  RC_ASSERT(xa.has_value() && xb.has_value());
  RC_ASSERT(*xa != *xb);
}

RC_GTEST_PROP(ExpandProperty, Expand__stray_bit_rejected, ()) {
  const Case c = gen_case();
  const uint32_t used = ev_bits_used(c.fields);
  EvValue ev = gen_ev(used);
  const uint32_t stray = *rc::gen::inRange<uint32_t>(used, kEvBits);
  ev[stray / 8] |= static_cast<uint8_t>(0x80 >> (stray % 8));
  RC_ASSERT(err(expand(c.format, c.fields, ev)) == Error::kBadEvProfile);
}

RC_GTEST_PROP(GenerateProperty, Generate__values_in_range_distinct_and_expandable, ()) {
  const Case c = gen_case();
  const uint64_t combos = count_combinations(c.fields);
  const uint32_t count = *rc::gen::inRange<uint32_t>(1, 200);
  auto g = generate(c.fields, count);
  RC_ASSERT(g.has_value());
  RC_ASSERT(g->size() == count);
  std::set<EvValue> seen;
  for (const EvValue& v : *g) {
    RC_ASSERT(expand(c.format, c.fields, v).has_value());
    // Every field's generated number lies in [min_val, max_val].
    uint32_t cur = 0;
    for (const Field& f : c.fields) {
      const uint32_t n = std::popcount(f.mask);
      uint32_t x = 0;
      for (uint32_t b = 0; b < n; ++b)
        x = (x << 1) | bit_at(v, cur + b);
      cur += n;
      RC_ASSERT(x >= f.min_val && x <= f.max_val);
    }
    seen.insert(v);
  }
  RC_ASSERT(seen.size() == std::min<uint64_t>(count, combos));
}

}  // namespace
}  // namespace mrc::ev
