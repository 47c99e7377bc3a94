// The scenario schema (sim/scenario_schema.h): docs/simulator.md's key tables are the ones it
// generates, every key's default and printed value parses back to itself, and the annotated
// default scenario (`mrc-sim --print-default`) is the embedded default.
#include "sim/scenario_schema.h"

#include <gtest/gtest.h>
#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

namespace mrc::sim {
namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

constexpr const char* kMinimal = "[workload]\nkind = \"permutation\"\n";

std::string section_header(const SectionSpec& s) {
  return s.name.empty() ? std::string() : "[" + std::string(s.name) + "]\n";
}

// A scenario with one key set to `value` (TOML text), the others at their defaults.
SimResult<Scenario> with_key(const SectionSpec& s, const KeySpec& k, const std::string& value) {
  std::string text;
  if (s.name.empty()) text = std::string(k.name) + " = " + value + "\n";
  if (s.name == "workload") {
    // A kind the key is for, and what that kind needs besides.
    const std::string kind = k.kinds.empty() ? "permutation" : std::string(k.kinds.front());
    text += "[workload]\n";
    if (k.name != "kind") text += "kind = \"" + kind + "\"\n";
    if (k.name == "row") text += "algorithm = \"ring2d\"\n";
    if (kind == "steady" && k.name != "until") text += "until = \"1ms\"\n";
    return parse_scenario(text + std::string(k.name) + " = " + value + "\n", "k.toml");
  }
  if (s.name == "topo" && k.applies && !k.applies(scenario_defaults()))
    text += "[topo]\nkind = \"fat_tree\"\n" + std::string(k.name) + " = " + value + "\n";
  else if (!s.name.empty())
    text += section_header(s) + std::string(k.name) + " = " + value + "\n";
  return parse_scenario(text + kMinimal, "k.toml");
}

// Keys with a default that parses: not read by hand, not required, and with a default value
// (a "none" default has none).
template <class R>
bool has_printable_default(const BasicKeySpec<R>& k) {
  return k.type != KeyType::kCustom && k.type != KeyType::kTables && !k.required &&
         k.required_for.empty() && k.default_doc != "none";
}

// A value for each [[fault]] key a kind may require (the keys read by hand included).
const std::map<std::string_view, std::string> kFaultSamples = {{"link", "\"p1/host1\""},
                                                               {"switch", "\"p0/spine0\""},
                                                               {"path", "\"p0/spine1\""},
                                                               {"src", "0"},
                                                               {"dst", "1"},
                                                               {"at", "\"1us\""},
                                                               {"duration", "\"1us\""},
                                                               {"reboot_at", "\"2us\""},
                                                               {"period", "\"1us\""},
                                                               {"count", "1"},
                                                               {"probability", "0.5"},
                                                               {"rate", "\"1Gbps\""}};

// A scenario with one fault of `kind`: its required keys from kFaultSamples, then `key` =
// `value` (unless key is empty).
SimResult<Scenario> with_fault(std::string_view kind, std::string_view key,
                               const std::string& value) {
  std::string text = std::string(kMinimal) + "[[fault]]\nkind = \"" + std::string(kind) + "\"\n";
  for (const auto& k : fault_schema().keys) {
    const bool needed = k.required || std::find(k.required_for.begin(), k.required_for.end(),
                                                kind) != k.required_for.end();
    const bool link_fault = find_key(fault_schema(), "link")->kinds.end() !=
                            std::find(find_key(fault_schema(), "link")->kinds.begin(),
                                      find_key(fault_schema(), "link")->kinds.end(), kind);
    if (k.name == key || k.name == "kind") continue;
    if (needed || (k.name == "link" && link_fault))
      text += std::string(k.name) + " = " + kFaultSamples.at(k.name) + "\n";
  }
  if (!key.empty()) text += std::string(key) + " = " + value + "\n";
  return parse_scenario(text, "f.toml");
}

TEST(ScenarioSchema, docs_tables_are_the_generated_ones) {
  const std::string doc = slurp(std::string(MRC_SOURCE_DIR) + "/docs/simulator.md");
  ASSERT_FALSE(doc.empty()) << "cannot read docs/simulator.md";
  std::vector<std::pair<std::string, std::string>> tables;
  for (const SectionSpec& s : scenario_schema())
    tables.emplace_back(s.name, schema_markdown(s));
  tables.emplace_back(flow_schema().name, schema_markdown(flow_schema()));
  tables.emplace_back(fault_schema().name, schema_markdown(fault_schema()));
  for (const auto& [name, table] : tables)
    EXPECT_NE(doc.find(table), std::string::npos)
        << "docs/simulator.md lacks the generated table of section '" << name
        << "' (regenerate it with `mrc-sim --print-schema-markdown`); expected:\n"
        << table;
}

template <class R>
void expect_complete(const BasicSectionSpec<R>& s) {
  const BasicKeySpec<R>* kind = find_key(s, "kind");
  if (kind && !kind->choice_docs.empty()) {
    EXPECT_EQ(kind->choice_docs.size(), kind->choices.size()) << s.name;
  }
  for (const BasicKeySpec<R>& k : s.keys) {
    EXPECT_FALSE(k.doc.empty()) << s.name << "." << k.name;
    EXPECT_FALSE(key_type_doc(k).empty()) << s.name << "." << k.name;
    EXPECT_TRUE(k.get && k.set) << s.name << "." << k.name;
    EXPECT_EQ(k.doc.find('|'), std::string_view::npos) << "breaks the docs table";
    if (k.type == KeyType::kChoice || k.type == KeyType::kChoices) {
      EXPECT_FALSE(k.choices.empty()) << s.name << "." << k.name;
    }
    // The kinds a key names are the section's kinds.
    for (const auto* list : {&k.kinds, &k.required_for})
      for (std::string_view x : *list) {
        ASSERT_TRUE(kind) << s.name << "." << k.name << " names kinds in a section without any";
        EXPECT_NE(std::find(kind->choices.begin(), kind->choices.end(), x), kind->choices.end())
            << s.name << "." << k.name << ": unknown kind " << x;
      }
  }
}

TEST(ScenarioSchema, every_key_has_a_doc_a_type_and_accessors) {
  for (const SectionSpec& s : scenario_schema())
    expect_complete(s);
  expect_complete(flow_schema());
  expect_complete(fault_schema());
}

TEST(ScenarioSchema, every_default_as_printed_parses_back_to_itself) {
  const Scenario d = scenario_defaults();
  for (const SectionSpec& s : scenario_schema())
    for (const KeySpec& k : s.keys) {
      if (s.name.empty() && k.name == "name") continue;  // "" names the scenario after its file
      if (!has_printable_default(k)) continue;
      const std::string text = key_value_toml(k, k.get(d));
      auto sc = with_key(s, k, text);
      ASSERT_TRUE(sc) << s.name << "." << k.name << " = " << text << ": " << sc.error().message;
      EXPECT_EQ(k.get(*sc), k.get(d)) << s.name << "." << k.name << " = " << text;
    }
}

TEST(ScenarioSchema, every_fault_key_is_read_into_its_field) {
  const FaultConfig d;
  for (const auto& k : fault_schema().keys) {
    if (k.name == "kind" || k.name == "links") continue;
    for (std::string_view kind :
         k.kinds.empty() ? find_key(fault_schema(), "kind")->choices : k.kinds) {
      const std::string value =
          kFaultSamples.count(k.name) ? kFaultSamples.at(k.name) : key_value_toml(k, k.get(d));
      auto sc = with_fault(kind, k.name, value);
      ASSERT_TRUE(sc) << kind << " " << k.name << " = " << value << ": " << sc.error().message;
      ASSERT_EQ(sc->faults.size(), 1u);
      EXPECT_EQ(key_value_toml(k, k.get(sc->faults[0])), value) << kind << " " << k.name;
    }
  }
  // `links`: several links, echoed by name.
  auto sc = with_fault("link_down", "", "");
  ASSERT_TRUE(sc) << sc.error().message;
  auto listed = parse_scenario(std::string(kMinimal) +
                                   "[[fault]]\nkind = \"flap\"\nlinks = [\"p0/host1\", "
                                   "\"p1/host1\"]\nat = 0\nperiod = \"1us\"\ncount = 2\n",
                               "f.toml");
  ASSERT_TRUE(listed) << listed.error().message;
  const FaultConfig& f = listed->faults.at(0);
  EXPECT_TRUE(key_applies(fault_schema(), *find_key(fault_schema(), "links"), f));
  EXPECT_FALSE(key_applies(fault_schema(), *find_key(fault_schema(), "link"), f));
  EXPECT_EQ(find_key(fault_schema(), "links")->get(f),
            KeyValue(std::vector<std::string>{"p0/host1", "p1/host1"}));
}

TEST(ScenarioSchema, a_key_given_for_another_kind_names_the_kinds_it_is_for) {
  for (const auto& k : fault_schema().keys) {
    if (k.kinds.empty() || k.type == KeyType::kCustom) continue;
    const auto& all = find_key(fault_schema(), "kind")->choices;
    for (std::string_view kind : all) {
      if (std::find(k.kinds.begin(), k.kinds.end(), kind) != k.kinds.end()) continue;
      const std::string value = kFaultSamples.count(k.name) ? kFaultSamples.at(k.name) : "\"1us\"";
      auto sc = with_fault(kind, k.name, value);
      ASSERT_FALSE(sc) << kind << " " << k.name;
      EXPECT_NE(sc.error().message.find("key 'fault[0]." + std::string(k.name) +
                                        "': does not apply to a " + std::string(kind) +
                                        " fault (it is for: " + std::string(k.kinds.front())),
                std::string::npos)
          << sc.error().message;
    }
  }
}

TEST(ScenarioSchema, a_value_is_read_into_its_field) {
  auto sc = parse_scenario(std::string("[transport]\ntrim_hold = \"7us\"\npacket_auth = true\n"
                                       "reverse_evs_per_plane = 3\ntimeout = \"auto\"\n"
                                       "backup_evs_per_plane = 2\n[run]\nuntil = \"never\"\n") +
                               kMinimal,
                           "s.toml");
  ASSERT_TRUE(sc) << sc.error().message;
  EXPECT_EQ(sc->base.transport.trim_hold, 7 * kPicosPerMicro);
  EXPECT_TRUE(sc->base.transport.packet_auth);
  EXPECT_EQ(sc->base.transport.reverse_evs_per_plane, 3u);
  EXPECT_EQ(sc->base.transport.timeout, TransportConfig::kTimeoutAuto);
  EXPECT_EQ(sc->base.transport.backup_evs_per_plane, 2u);
  EXPECT_EQ(sc->until, kNever);
  for (const TransportRun& r : sc->runs)
    EXPECT_EQ(r.config.transport.trim_hold, 7 * kPicosPerMicro) << r.name;
}

TEST(ScenarioSchema, errors_name_the_key_and_what_it_takes) {
  auto bad = parse_scenario(std::string("[transport]\ntimeout = 30\n") + kMinimal, "s.toml");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("s.toml:2: key 'transport.timeout': expected an integer in "
                                     "0..24 or \"auto\", got integer 30"),
            std::string::npos)
      << bad.error().message;
  auto unknown = parse_scenario(std::string("[transport]\ntrim_holdd = 0\n") + kMinimal, "s.toml");
  ASSERT_FALSE(unknown);
  for (const KeySpec& k : schema_section("transport")->keys)
    EXPECT_NE(unknown.error().message.find(std::string(k.name)), std::string::npos)
        << "valid keys lack " << k.name << ": " << unknown.error().message;
}

TEST(ScenarioSchema, annotated_default_is_the_embedded_default) {
  const std::string text = default_scenario_toml_annotated();
  auto printed = parse_scenario(text, "printed.toml");
  ASSERT_TRUE(printed) << printed.error().message << "\n" << text;
  auto embedded = default_scenario();
  ASSERT_TRUE(embedded) << embedded.error().message;
  for (const SectionSpec& s : scenario_schema())
    for (const KeySpec& k : s.keys) {
      EXPECT_EQ(k.get(*printed), k.get(*embedded)) << s.name << "." << k.name;
      if (k.type == KeyType::kTables) continue;  // its entries follow the section
      // Every key is written out, the ones that do not apply commented out.
      const bool applies = key_applies(s, k, *embedded);
      std::string line = "\n";
      line.append(applies ? "" : "# ").append(k.name).append(" = ");
      EXPECT_NE(text.find(line), std::string::npos) << s.name << "." << k.name;
    }
  ASSERT_EQ(printed->faults.size(), embedded->faults.size());
  for (size_t i = 0; i < printed->faults.size(); ++i)
    for (const auto& k : fault_schema().keys)
      EXPECT_EQ(k.get(printed->faults[i]), k.get(embedded->faults[i])) << "fault." << k.name;
}

}  // namespace
}  // namespace mrc::sim
