// The table of scenario keys: per section, every key's name, type, range, unit, default and a
// one-line doc. The parser (scenario.cc), the echoed configuration (mrc-sim's summary.json),
// `mrc-sim --print-default` and the key tables of docs/simulator.md all come from it; a key
// added here is parsed, echoed, printed and documented (tests/unit/scenario_schema_test.cc
// fails until the doc's table is regenerated with `mrc-sim --print-schema-markdown`).
//
// Defaults are not written here: they are the values of a default-constructed configuration
// (SimConfig's member initialisers, and scenario_defaults() for the few the parser presets).
#pragma once

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
};

// A key's value: std::monostate is "auto" (a key with `auto_ok`).
using KeyValue = std::variant<std::monostate, bool, uint64_t, double, std::string,
                              std::vector<std::string>, std::map<std::string, uint64_t>>;

struct KeySpec {
  std::string_view name;
  KeyType type = KeyType::kInt;
  uint64_t min = 0, max = UINT32_MAX;  // kInt
  double rmin = 0, rmax = 1;           // kReal
  std::vector<std::string_view> choices;
  bool never = false;            // kDuration: "never" is a value
  bool auto_ok = false;          // "auto" is a value (std::monostate)
  std::string_view unit;         // shown after the type ("bytes")
  std::string_view type_doc;     // replaces the generated type column
  std::string_view default_doc;  // "= <what the default means>" is appended to the default;
                                 // anything else replaces it
  std::string_view doc;          // one line (markdown)
  KeyValue (*get)(const Scenario&) = nullptr;
  void (*set)(Scenario&, const KeyValue&) = nullptr;
  // Whether the key applies to this scenario (nullptr: always). A key that does not apply is
  // not echoed and is printed commented out by --print-default.
  bool (*applies)(const Scenario&) = nullptr;
};

struct SectionSpec {
  std::string_view name;  // "" for the top level, else the table ("topo", "transport")
  std::vector<KeySpec> keys;
};

// Every section the table covers, in file order.
const std::vector<SectionSpec>& scenario_schema();
const SectionSpec* schema_section(std::string_view name);

// The configuration a scenario starts from before its file is read.
Scenario scenario_defaults();

// A value as TOML ("50us" quoted, true, 4096, ["mrc", "roce"], {roce = 8}, "auto").
std::string key_value_toml(const KeySpec& k, const KeyValue& v);
// The default column of the docs ("`\"50us\"`", "`0` = radix/2").
std::string key_default_doc(const KeySpec& k);
// The type column of the docs ("integer 0..8", "duration or `\"never\"`").
std::string key_type_doc(const KeySpec& k);

// The docs table of one section (markdown, ending in a newline).
std::string schema_markdown(const SectionSpec& s);
// Every section's table under a "### [section]" heading: what --print-schema-markdown prints.
std::string schema_markdown_all();

// The embedded default scenario with every key of the table written out: its value in the
// default scenario, with its doc as a comment; keys that do not apply are commented out.
// Parses to the same scenario as default_scenario().
std::string default_scenario_toml_annotated();

}  // namespace mrc::sim
