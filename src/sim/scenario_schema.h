// The table of scenario keys: per section, every key's name, type, range, unit, default and a
// one-line doc. The parser (scenario.cc), the echoed configuration (mrc-sim's summary.json),
// `mrc-sim --print-default` and the key tables of docs/simulator.md all come from it; a key
// added here is parsed, echoed, printed and documented (tests/unit/scenario_schema_test.cc
// fails until the doc's table is regenerated with `mrc-sim --print-schema-markdown`).
//
// Three kinds of record carry keys: the scenario itself (the top level and the tables
// [topo], [switch], [transport], [denylist], [workload], [run]), each [[workload.flow]] entry
// and each [[fault]] entry. [workload] and [[fault]] have a `kind`: every other key of theirs
// names the kinds it is for and those that require it, and the parser refuses a key given
// for another kind and asks for a required one that is missing.
//
// Defaults are not written here: they are the values of a default-constructed record
// (SimConfig's member initialisers, and scenario_defaults() for the few the parser presets).
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "sim/scenario.h"

namespace mrc::sim {

enum class KeyType : uint8_t {
  kBool,
  kInt,       // min..max
  kReal,      // rmin..rmax
  kDuration,  // ps; `never` allows "never"
  kRate,      // bit/s, > 0
  kSize,      // bytes
  kText,      // a string
  kChoice,    // one of `choices`
  kChoices,   // a non-empty array of distinct `choices`
  kCustom,    // read by hand in scenario.cc (its value still comes from `get`)
  kTables,    // an array of tables with a section of their own ([[workload.flow]])
};

// A key's value: std::monostate is "auto" (a key with `auto_ok`).
using KeyValue =
    std::variant<std::monostate, bool, uint64_t, double, std::string, std::vector<std::string>,
                 std::map<std::string, uint64_t>, std::vector<uint64_t>>;

// One key of a record of type R (Scenario, WorkloadConfig::Flow, FaultConfig).
template <class R>
struct BasicKeySpec {
  std::string_view name;
  KeyType type = KeyType::kInt;
  uint64_t min = 0, max = UINT32_MAX;  // kInt
  double rmin = 0, rmax = 1;           // kReal
  std::vector<std::string_view> choices;
  // A section's `kind`: what each choice does, one line each (the docs' table of kinds).
  std::vector<std::string_view> choice_docs;
  bool never = false;            // kDuration: "never" is a value
  bool auto_ok = false;          // "auto" is a value (std::monostate)
  std::string_view unit;         // shown after the type ("bytes")
  std::string_view type_doc;     // replaces the generated type column
  std::string_view default_doc;  // "= <what the default means>" is appended to the default;
                                 // anything else replaces it
  std::string_view doc;          // one line (markdown); also what a missing key is asked for
  bool required = false;         // every record must give it
  // In a section with a `kind` key: the kinds the key is for (empty: every kind) and the
  // kinds that require it.
  std::vector<std::string_view> kinds;
  std::vector<std::string_view> required_for;
  KeyValue (*get)(const R&) = nullptr;
  void (*set)(R&, const KeyValue&) = nullptr;
  // Whether the key applies to this record (nullptr: always, within `kinds`). A key that does
  // not apply is not echoed and is printed commented out by --print-default.
  bool (*applies)(const R&) = nullptr;
};

template <class R>
struct BasicSectionSpec {
  std::string_view name;  // "" for the top level, else the table ("topo", "fault")
  std::vector<BasicKeySpec<R>> keys;
};

using KeySpec = BasicKeySpec<Scenario>;
using SectionSpec = BasicSectionSpec<Scenario>;
using FlowSectionSpec = BasicSectionSpec<WorkloadConfig::Flow>;
using FaultSectionSpec = BasicSectionSpec<FaultConfig>;

// Every section of the scenario record, in file order.
const std::vector<SectionSpec>& scenario_schema();
const SectionSpec* schema_section(std::string_view name);
// The keys of a [[workload.flow]] entry and of a [[fault]] entry.
const FlowSectionSpec& flow_schema();
const FaultSectionSpec& fault_schema();

// The configuration a scenario starts from before its file is read.
Scenario scenario_defaults();

// The key named `name` of a section (nullptr: none).
template <class R>
const BasicKeySpec<R>* find_key(const BasicSectionSpec<R>& s, std::string_view name) {
  for (const BasicKeySpec<R>& k : s.keys)
    if (k.name == name) return &k;
  return nullptr;
}
// The record's kind, as its section's `kind` key names it ("" in a section without one).
template <class R>
std::string record_kind(const BasicSectionSpec<R>& s, const R& r) {
  const BasicKeySpec<R>* k = find_key(s, "kind");
  if (!k) return {};
  const KeyValue v = k->get(r);
  const std::string* name = std::get_if<std::string>(&v);
  return name ? *name : std::string();
}
// Whether key `k` of section `s` applies to record `r`: its kind is one of the key's kinds,
// and its `applies` (if any) says so.
template <class R>
bool key_applies(const BasicSectionSpec<R>& s, const BasicKeySpec<R>& k, const R& r) {
  if (!k.kinds.empty()) {
    const std::string kind = record_kind(s, r);
    if (std::find(k.kinds.begin(), k.kinds.end(), kind) == k.kinds.end()) return false;
  }
  return !k.applies || k.applies(r);
}

// A value as TOML ("50us" quoted, true, 4096, ["mrc", "roce"], {roce = 8}, "auto").
template <class R>
std::string key_value_toml(const BasicKeySpec<R>& k, const KeyValue& v);
// The default column of the docs ("`\"50us\"`", "`0` = radix/2").
template <class R>
std::string key_default_doc(const BasicKeySpec<R>& k);
// The type column of the docs ("integer 0..8", "duration or `\"never\"`").
template <class R>
std::string key_type_doc(const BasicKeySpec<R>& k);

// The docs table of one section (markdown, ending in a newline): for a section with a `kind`,
// its kinds (what each does, the keys it requires and those it takes), then its keys.
template <class R>
std::string schema_markdown(const BasicSectionSpec<R>& s);
// Every section's table under a "### [section]" heading: what --print-schema-markdown prints.
std::string schema_markdown_all();

// The embedded default scenario with every key of the table written out: its value in the
// default scenario, with its doc as a comment; keys that do not apply are commented out.
// Parses to the same scenario as default_scenario().
std::string default_scenario_toml_annotated();

}  // namespace mrc::sim
