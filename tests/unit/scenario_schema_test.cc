// The scenario schema (sim/scenario_schema.h): docs/simulator.md's key tables are the ones it
// generates, every key's default and printed value parses back to itself, and the annotated
// default scenario (`mrc-sim --print-default`) is the embedded default.
#include "sim/scenario_schema.h"

#include <gtest/gtest.h>
#include <fstream>
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
  if (s.name == "topo" && k.applies && !k.applies(scenario_defaults()))
    text += "[topo]\nkind = \"fat_tree\"\n" + std::string(k.name) + " = " + value + "\n";
  else if (!s.name.empty())
    text += section_header(s) + std::string(k.name) + " = " + value + "\n";
  return parse_scenario(text + kMinimal, "k.toml");
}

TEST(ScenarioSchema, docs_tables_are_the_generated_ones) {
  const std::string doc = slurp(std::string(MRC_SOURCE_DIR) + "/docs/simulator.md");
  ASSERT_FALSE(doc.empty()) << "cannot read docs/simulator.md";
  for (const SectionSpec& s : scenario_schema()) {
    const std::string table = schema_markdown(s);
    EXPECT_NE(doc.find(table), std::string::npos)
        << "docs/simulator.md lacks the generated table of section '" << s.name
        << "' (regenerate it with `mrc-sim --print-schema-markdown`); expected:\n"
        << table;
  }
}

TEST(ScenarioSchema, every_key_has_a_doc_a_type_and_accessors) {
  for (const SectionSpec& s : scenario_schema())
    for (const KeySpec& k : s.keys) {
      EXPECT_FALSE(k.doc.empty()) << s.name << "." << k.name;
      EXPECT_FALSE(key_type_doc(k).empty()) << s.name << "." << k.name;
      EXPECT_TRUE(k.get && k.set) << s.name << "." << k.name;
      EXPECT_EQ(k.doc.find('|'), std::string_view::npos) << "breaks the docs table";
      if (k.type == KeyType::kChoice || k.type == KeyType::kChoices) {
        EXPECT_FALSE(k.choices.empty()) << s.name << "." << k.name;
      }
    }
}

TEST(ScenarioSchema, every_default_as_printed_parses_back_to_itself) {
  const Scenario d = scenario_defaults();
  for (const SectionSpec& s : scenario_schema())
    for (const KeySpec& k : s.keys) {
      if (s.name.empty() && k.name == "name") continue;  // "" names the scenario after its file
      const std::string text = key_value_toml(k, k.get(d));
      auto sc = with_key(s, k, text);
      ASSERT_TRUE(sc) << s.name << "." << k.name << " = " << text << ": " << sc.error().message;
      EXPECT_EQ(k.get(*sc), k.get(d)) << s.name << "." << k.name << " = " << text;
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
      // Every key is written out, the ones that do not apply commented out.
      const bool applies = !k.applies || k.applies(*embedded);
      std::string line = "\n";
      line.append(applies ? "" : "# ").append(k.name).append(" = ");
      EXPECT_NE(text.find(line), std::string::npos) << s.name << "." << k.name;
    }
  EXPECT_EQ(printed->workload.kind, embedded->workload.kind);
  EXPECT_EQ(printed->workload.size, embedded->workload.size);
  ASSERT_EQ(printed->faults.size(), embedded->faults.size());
  for (size_t i = 0; i < printed->faults.size(); ++i) {
    EXPECT_EQ(printed->faults[i].kind, embedded->faults[i].kind);
    EXPECT_EQ(printed->faults[i].target, embedded->faults[i].target);
    EXPECT_EQ(printed->faults[i].at, embedded->faults[i].at);
  }
}

}  // namespace
}  // namespace mrc::sim
