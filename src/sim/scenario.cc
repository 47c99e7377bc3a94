#include "sim/scenario.h"
#include "sim/scenario_schema.h"

#include <toml++/toml.h>
#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

namespace mrc::sim {

// ---- the embedded default ------------------------------------------------------------------

namespace {

constexpr std::string_view kDefaultScenario =
    R"toml(# mrc-sim default scenario: MRC against RoCEv2/ECMP on a small multi-plane fabric.
name = "default"
description = "128 GPUs on a 4-plane two-tier fabric, random permutation of 4 MiB per GPU, a leaf-spine link fails mid-run"
seed = 1

[topo]
hosts = 128               # GPUs, one NIC each
planes = 4                # NIC ports = independent planes
radix = 16                # 8 hosts + 8 uplinks per leaf: 16 leaves and 8 spines per plane
link_rate = "100Gbps"     # every link (one plane port = one link)
link_delay = "500ns"

[switch]
trimming = true           # MRC runs; RoCE runs never trim (they drop, or pause with PFC)

[transport]
# RoCEv2 as deployed (lossless, PFC) and without PFC (lossy, go-back-N on every drop).
kinds = ["mrc", "mrc_oblivious", "roce_pfc", "roce"]
routing_convergence = "1ms"   # ECMP only: dead next hops leave the groups after this delay

[workload]
kind = "permutation"
size = "4MiB"

[[fault]]
kind = "link_down"
link = "p0/leaf0-spine0"
at = "20us"

[run]
until = "200ms"
sample_interval = "5us"
)toml";

}  // namespace

std::string_view default_scenario_toml() {
  return kDefaultScenario;
}

// ---- names ---------------------------------------------------------------------------------

// The names are the choices of each section's `kind` key (sim/scenario_schema.h), in the
// order of the enums.
const char* workload_kind_name(WorkloadConfig::Kind k) {
  const auto& names = find_key(*schema_section("workload"), "kind")->choices;
  return k < names.size() ? names[k].data() : "unknown";
}

const char* allreduce_algorithm_name(WorkloadConfig::Algorithm a) {
  return a == WorkloadConfig::kRing2d ? "ring2d" : "ring";
}

const char* fault_kind_name(FaultConfig::Kind k) {
  const auto& names = find_key(fault_schema(), "kind")->choices;
  return k < names.size() ? names[k].data() : "unknown";
}

namespace {

std::string lower(std::string_view s) {
  std::string o(s);
  for (char& c : o)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return o;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front())))
    s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back())))
    s.remove_suffix(1);
  return s;
}

std::optional<uint32_t> parse_u32(std::string_view s) {
  uint32_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

// Splits "<number><unit>" (optional spaces between).
std::pair<std::string_view, std::string_view> split_unit(std::string_view s) {
  s = trim(s);
  size_t i = 0;
  while (i < s.size() && (std::isdigit(static_cast<unsigned char>(s[i])) || s[i] == '.'))
    ++i;
  return {s.substr(0, i), trim(s.substr(i))};
}

struct Unit {
  const char* name;
  uint64_t scale;
};

SimResult<uint64_t> parse_with_units(std::string_view s, std::initializer_list<Unit> units,
                                     const char* what, const char* example, bool case_insensitive) {
  auto [num, unit] = split_unit(s);
  if (num.empty())
    return sim_fail("expected " + std::string(what) + " (a number and a unit) like " + example +
                    ", got \"" + std::string(s) + "\"");
  const std::string u = case_insensitive ? lower(unit) : std::string(unit);
  for (const Unit& k : units) {
    const std::string name = case_insensitive ? lower(k.name) : std::string(k.name);
    if (u == name) {
      auto v = parse_scaled_decimal(num, k.scale);
      if (!v)
        return sim_fail("expected " + std::string(what) + " like " + example + ", got \"" +
                        std::string(s) + "\"");
      return *v;
    }
  }
  std::string list;
  for (const Unit& k : units)
    list += std::string(list.empty() ? "" : ", ") + k.name;
  if (unit.empty())
    return sim_fail("expected " + std::string(what) + " with a unit (" + list + ") like " +
                    example + ", got \"" + std::string(s) + "\"");
  return sim_fail("unknown unit \"" + std::string(unit) + "\" in \"" + std::string(s) +
                  "\" (expected " + list + ")");
}

}  // namespace

SimResult<Time> parse_duration(std::string_view s) {
  if (trim(s) == "0") return 0;  // zero needs no unit
  return parse_with_units(s,
                          {{"ps", 1},
                           {"ns", kPicosPerNano},
                           {"us", kPicosPerMicro},
                           {"ms", kPicosPerMilli},
                           {"s", kPicosPerSecond}},
                          "a duration", "\"1.5us\"", false);
}

SimResult<uint64_t> parse_rate(std::string_view s) {
  return parse_with_units(s,
                          {{"bps", 1},
                           {"Kbps", 1000},
                           {"Mbps", 1000'000},
                           {"Gbps", 1000'000'000},
                           {"Tbps", 1000'000'000'000}},
                          "a rate", "\"400Gbps\"", true);
}

SimResult<uint64_t> parse_size(std::string_view s) {
  return parse_with_units(s,
                          {{"B", 1},
                           {"KB", 1000},
                           {"MB", 1000'000},
                           {"GB", 1000'000'000},
                           {"KiB", 1ull << 10},
                           {"MiB", 1ull << 20},
                           {"GiB", 1ull << 30}},
                          "a size", "\"4MiB\" or 4194304", true);
}

std::string format_duration(Time t) {
  if (t == kNever) return "never";
  if (t == 0) return "0";
  struct U {
    const char* n;
    Time s;
  } units[] = {{"s", kPicosPerSecond},
               {"ms", kPicosPerMilli},
               {"us", kPicosPerMicro},
               {"ns", kPicosPerNano}};
  for (const U& u : units)
    if (t >= u.s && t % (u.s / 1000 == 0 ? 1 : u.s / 1000) == 0) {
      std::ostringstream o;
      o << static_cast<double>(t) / static_cast<double>(u.s) << u.n;
      return o.str();
    }
  return std::to_string(t) + "ps";
}

std::string format_rate(uint64_t bps) {
  std::ostringstream o;
  if (bps >= 1000'000'000 && bps % 1000'000 == 0)
    o << static_cast<double>(bps) / 1e9 << "Gbps";
  else if (bps >= 1000'000 && bps % 1000 == 0)
    o << static_cast<double>(bps) / 1e6 << "Mbps";
  else
    o << bps << "bps";
  return o.str();
}

std::string format_size(uint64_t b) {
  std::ostringstream o;
  if (b >= (1ull << 30) && b % (1ull << 20) == 0)
    o << static_cast<double>(b) / (1ull << 30) << "GiB";
  else if (b >= (1ull << 20) && b % (1ull << 10) == 0)
    o << static_cast<double>(b) / (1ull << 20) << "MiB";
  else if (b >= (1ull << 10) && b % (1ull << 10) == 0)
    o << b / 1024 << "KiB";
  else
    o << b << "B";
  return o.str();
}

std::string link_name(const LinkRef& l) {
  if (l.kind == LinkRef::kLeafAgg)
    return "pod" + std::to_string(l.pod) + "/leaf" + std::to_string(l.a) + "-agg" +
           std::to_string(l.b);
  if (l.kind == LinkRef::kAggCore)
    return "pod" + std::to_string(l.pod) + "/agg" + std::to_string(l.a) + "-core" +
           std::to_string(l.b);
  if (l.kind == LinkRef::kAggSpine)
    return "pod" + std::to_string(l.pod) + "/agg" + std::to_string(l.a) + "-spine" +
           std::to_string(l.b);
  if (l.kind == LinkRef::kSpineCore)
    return "spine" + std::to_string(l.a) + "-core" + std::to_string(l.b);
  if (l.kind == LinkRef::kHostLeaf)
    return "p" + std::to_string(l.plane) + "/host" + std::to_string(l.a);
  return "p" + std::to_string(l.plane) + "/leaf" + std::to_string(l.a) + "-spine" +
         std::to_string(l.b);
}

std::string switch_name(const SwitchRef& s) {
  if (s.kind == SwitchRef::kCore) return "core" + std::to_string(s.index);
  if (s.kind == SwitchRef::kFtSpine) return "spine" + std::to_string(s.index);
  if (s.kind == SwitchRef::kPodLeaf || s.kind == SwitchRef::kAgg)
    return "pod" + std::to_string(s.pod) + (s.kind == SwitchRef::kAgg ? "/agg" : "/leaf") +
           std::to_string(s.index);
  std::string out = "p";
  out += std::to_string(s.plane);
  out += s.kind == SwitchRef::kLeaf ? "/leaf" : "/spine";
  out += std::to_string(s.index);
  return out;
}

namespace {

// "<prefix><number>" -> number.
std::optional<uint32_t> numbered(std::string_view s, std::string_view prefix) {
  if (s.substr(0, prefix.size()) != prefix) return std::nullopt;
  return parse_u32(s.substr(prefix.size()));
}

constexpr const char* kLinkForms =
    "a link like \"p0/leaf3-spine7\" or \"p0-l3-s7\" (leaf-spine), \"p1/host5\" or \"h5-p1\" "
    "(host-leaf); in a fat tree "
    "\"pod1/leaf0-agg2\", \"pod1/agg2-core9\" or \"host5\" (four tiers: \"pod1/agg2-spine9\", "
    "\"spine9-core37\")";
constexpr const char* kSwitchForms =
    "a switch like \"p0/spine2\" or \"p1/leaf5\" (also \"p0-s2\", \"p1-l5\"); in a fat tree "
    "\"pod1/leaf0\", \"pod1/agg2\" "
    "or \"core9\" (four tiers also \"spine9\")";

// "<a>-<b>" or "<a>-><b>" -> (a, b).
std::optional<std::pair<std::string_view, std::string_view>> link_ends(std::string_view s) {
  size_t dash = s.find("->");
  size_t skip = 2;
  if (dash == std::string_view::npos) {
    dash = s.find('-');
    skip = 1;
  }
  if (dash == std::string_view::npos) return std::nullopt;
  return std::pair{s.substr(0, dash), s.substr(dash + skip)};
}

// mrc-fabric's names for the same links and switches (docs/fabric.md): "p0-l3-s7" (leaf-spine),
// "h5-p1" (host-leaf), "p0-s2" and "p1-l5" (switches), written the simulator's way; nullopt for
// anything else. Accepting both lets a fault be copied from one tool to the other.
std::optional<std::string> from_fabric_name(std::string_view s) {
  std::vector<std::string_view> parts;
  while (parts.size() < 4) {
    const size_t dash = s.find('-');
    parts.push_back(s.substr(0, dash));
    if (dash == std::string_view::npos) break;
    s.remove_prefix(dash + 1);
  }
  if (parts.size() == 3) {
    auto p = numbered(parts[0], "p"), l = numbered(parts[1], "l"), sp = numbered(parts[2], "s");
    if (p && l && sp)
      return "p" + std::to_string(*p) + "/leaf" + std::to_string(*l) + "-spine" +
             std::to_string(*sp);
  }
  if (parts.size() == 2) {
    if (auto h = numbered(parts[0], "h"), p = numbered(parts[1], "p"); h && p)
      return "p" + std::to_string(*p) + "/host" + std::to_string(*h);
    if (auto p = numbered(parts[0], "p")) {
      if (auto l = numbered(parts[1], "l"))
        return "p" + std::to_string(*p) + "/leaf" + std::to_string(*l);
      if (auto sp = numbered(parts[1], "s"))
        return "p" + std::to_string(*p) + "/spine" + std::to_string(*sp);
    }
  }
  return std::nullopt;
}

}  // namespace

SimResult<LinkRef> parse_link_name(std::string_view s) {
  if (auto ours = from_fabric_name(s)) {
    if (ours->find('-') != std::string::npos || ours->find("/host") != std::string::npos)
      return parse_link_name(*ours);
  }
  const size_t slash = s.find('/');
  auto bad = [&] {
    return sim_fail("expected " + std::string(kLinkForms) + ", got \"" + std::string(s) + "\"");
  };
  if (auto h = numbered(s, "host")) return LinkRef{LinkRef::kHostLeaf, 0, *h, 0, 0};  // fat tree
  if (slash == std::string_view::npos) {
    // Four-tier fat tree: "spine9-core37".
    auto ends = link_ends(s);
    if (!ends) return bad();
    auto spine = numbered(ends->first, "spine");
    auto core = numbered(ends->second, "core");
    if (!spine || !core) return bad();
    return LinkRef{LinkRef::kSpineCore, 0, *spine, *core, 0};
  }
  std::string_view rest = s.substr(slash + 1);
  if (auto pod = numbered(s.substr(0, slash), "pod")) {
    auto ends = link_ends(rest);
    if (!ends) return bad();
    if (auto leaf = numbered(ends->first, "leaf")) {
      auto agg = numbered(ends->second, "agg");
      if (!agg) return bad();
      return LinkRef{LinkRef::kLeafAgg, 0, *leaf, *agg, *pod};
    }
    auto agg = numbered(ends->first, "agg");
    if (!agg) return bad();
    if (auto spine = numbered(ends->second, "spine"))
      return LinkRef{LinkRef::kAggSpine, 0, *agg, *spine, *pod};
    auto core = numbered(ends->second, "core");
    if (!core) return bad();
    return LinkRef{LinkRef::kAggCore, 0, *agg, *core, *pod};
  }
  auto plane = numbered(s.substr(0, slash), "p");
  if (!plane) return bad();
  if (auto h = numbered(rest, "host")) return LinkRef{LinkRef::kHostLeaf, *plane, *h, 0};
  auto ends = link_ends(rest);
  if (!ends) return bad();
  auto leaf = numbered(ends->first, "leaf");
  auto spine = numbered(ends->second, "spine");
  if (!leaf || !spine) return bad();
  return LinkRef{LinkRef::kLeafSpine, *plane, *leaf, *spine};
}

SimResult<SwitchRef> parse_switch_name(std::string_view s) {
  if (auto ours = from_fabric_name(s);
      ours && ours->find('-') == std::string::npos && ours->find("/host") == std::string::npos)
    return parse_switch_name(*ours);
  const size_t slash = s.find('/');
  auto bad = [&] {
    return sim_fail("expected " + std::string(kSwitchForms) + ", got \"" + std::string(s) + "\"");
  };
  if (auto c = numbered(s, "core")) return SwitchRef{SwitchRef::kCore, 0, *c, 0};
  if (auto sp = numbered(s, "spine")) return SwitchRef{SwitchRef::kFtSpine, 0, *sp, 0};
  if (slash == std::string_view::npos) return bad();
  std::string_view rest = s.substr(slash + 1);
  if (auto pod = numbered(s.substr(0, slash), "pod")) {
    if (auto l = numbered(rest, "leaf")) return SwitchRef{SwitchRef::kPodLeaf, 0, *l, *pod};
    if (auto a = numbered(rest, "agg")) return SwitchRef{SwitchRef::kAgg, 0, *a, *pod};
    return bad();
  }
  auto plane = numbered(s.substr(0, slash), "p");
  if (!plane) return bad();
  if (auto l = numbered(rest, "leaf")) return SwitchRef{SwitchRef::kLeaf, *plane, *l};
  if (auto sp = numbered(rest, "spine")) return SwitchRef{SwitchRef::kSpine, *plane, *sp};
  return bad();
}

// ---- TOML reading --------------------------------------------------------------------------

namespace {

std::string describe(const toml::node& n) {
  std::ostringstream o;
  switch (n.type()) {
    case toml::node_type::string:
      o << "string \"" << n.as_string()->get() << "\"";
      break;
    case toml::node_type::integer:
      o << "integer " << n.as_integer()->get();
      break;
    case toml::node_type::floating_point:
      o << "float " << n.as_floating_point()->get();
      break;
    case toml::node_type::boolean:
      o << "boolean " << (n.as_boolean()->get() ? "true" : "false");
      break;
    case toml::node_type::table:
      o << "a table";
      break;
    case toml::node_type::array:
      o << "an array";
      break;
    default:
      o << "a date/time";
      break;
  }
  return o.str();
}

// Where values came from, for messages.
struct Origin {
  std::string file;
  std::map<std::string, std::string> overrides;  // display path -> "--set ..." argument

  std::string where(const std::string& path, const toml::node* n) const {
    for (auto it = overrides.begin(); it != overrides.end(); ++it)
      if (it->first == path || path.rfind(it->first + ".", 0) == 0 ||
          path.rfind(it->first + "[", 0) == 0)
        return "--set " + it->second;
    if (n && n->source().begin.line > 0) return file + ":" + std::to_string(n->source().begin.line);
    return file;
  }
};

class TableReader {
 public:
  TableReader(const toml::table* t, std::string path, const Origin& o)
      : t_(t), path_(std::move(path)), o_(o) {}

  const std::string& path() const { return path_; }
  const Origin& origin() const { return o_; }
  std::string key_path(std::string_view key) const {
    return path_.empty() ? std::string(key) : path_ + "." + std::string(key);
  }
  const toml::node* node(std::string_view key) {
    valid_.insert(std::string(key));
    if (!t_) return nullptr;
    return t_->get(key);
  }
  bool has(std::string_view key) const { return t_ && t_->contains(key); }
  void allow(std::string_view key) { valid_.insert(std::string(key)); }

  std::unexpected<SimError> err(std::string_view key, const toml::node* n,
                                const std::string& msg) const {
    return sim_fail(o_.where(key_path(key), n) + ": key '" + key_path(key) + "': " + msg);
  }
  std::unexpected<SimError> expected(std::string_view key, const toml::node* n,
                                     const std::string& what) const {
    return err(key, n, "expected " + what + ", got " + describe(*n));
  }
  std::unexpected<SimError> missing(std::string_view key, const std::string& what) const {
    const std::string where = t_ && t_->source().begin.line > 0
                                  ? o_.file + ":" + std::to_string(t_->source().begin.line)
                                  : o_.file;
    return sim_fail(where + ": " +
                    (path_.empty() ? std::string("the scenario") : "[" + path_ + "]") +
                    " is missing required key '" + std::string(key) + "' (" + what + ")");
  }

  // `also`: the other values the key takes (" or \"auto\""), for the message.
  SimStatus u64(std::string_view key, uint64_t& out, uint64_t min = 0, uint64_t max = UINT64_MAX,
                std::string_view also = "") {
    const toml::node* n = node(key);
    if (!n) return {};
    auto what = [&] {
      if (max >= (uint64_t{1} << 32) - 1)
        return "an integer >= " + std::to_string(min) + std::string(also);
      return "an integer in " + std::to_string(min) + ".." + std::to_string(max) +
             std::string(also);
    };
    if (!n->is_integer()) return expected(key, n, what());
    const int64_t v = n->as_integer()->get();
    if (v < 0 || static_cast<uint64_t>(v) < min || static_cast<uint64_t>(v) > max)
      return expected(key, n, what());
    out = static_cast<uint64_t>(v);
    return {};
  }
  template <typename T>
  SimStatus uint(std::string_view key, T& out, uint64_t min = 0,
                 uint64_t max = std::numeric_limits<T>::max()) {
    uint64_t v = out;
    auto st = u64(key, v, min, max);
    if (!st) return st;
    out = static_cast<T>(v);
    return {};
  }
  SimStatus boolean(std::string_view key, bool& out, std::string_view also = "") {
    const toml::node* n = node(key);
    if (!n) return {};
    if (!n->is_boolean())
      return expected(key, n, also.empty() ? "true or false" : "true, false" + std::string(also));
    out = n->as_boolean()->get();
    return {};
  }
  SimStatus real(std::string_view key, double& out, double min, double max) {
    const toml::node* n = node(key);
    if (!n) return {};
    double v = 0;
    if (n->is_floating_point())
      v = n->as_floating_point()->get();
    else if (n->is_integer())
      v = static_cast<double>(n->as_integer()->get());
    auto what = [&] {
      std::ostringstream o;
      o << "a number in [" << min << ", " << max << "]";
      return o.str();
    };
    if (!(n->is_floating_point() || n->is_integer()) || !(v >= min && v <= max))
      return expected(key, n, what());
    out = v;
    return {};
  }
  SimStatus string(std::string_view key, std::string& out) {
    const toml::node* n = node(key);
    if (!n) return {};
    if (!n->is_string()) return expected(key, n, "a string");
    out = n->as_string()->get();
    return {};
  }
  // One of `choices`; returns the index.
  SimStatus choice(std::string_view key, std::initializer_list<const char*> choices, size_t& out) {
    return choice(key, std::vector<std::string_view>(choices.begin(), choices.end()), out);
  }
  SimStatus choice(std::string_view key, const std::vector<std::string_view>& choices,
                   size_t& out) {
    const toml::node* n = node(key);
    if (!n) return {};
    std::string list;
    for (std::string_view c : choices)
      list += std::string(list.empty() ? "" : ", ") + "\"" + std::string(c) + "\"";
    if (!n->is_string()) return expected(key, n, "one of " + list);
    size_t i = 0;
    for (std::string_view c : choices) {
      if (n->as_string()->get() == c) {
        out = i;
        return {};
      }
      ++i;
    }
    return expected(key, n, "one of " + list);
  }
  SimStatus duration(std::string_view key, Time& out, bool allow_never = false) {
    const toml::node* n = node(key);
    if (!n) return {};
    const std::string what =
        std::string("a duration with a unit (ps, ns, us, ms, s) like \"10us\"") +
        (allow_never ? " or \"never\"" : "");
    if (n->is_integer() && n->as_integer()->get() == 0) {
      out = 0;
      return {};
    }
    if (!n->is_string()) return expected(key, n, what);
    const std::string& s = n->as_string()->get();
    if (allow_never && s == "never") {
      out = kNever;
      return {};
    }
    auto v = parse_duration(s);
    if (!v) return err(key, n, v.error().message);
    out = *v;
    return {};
  }
  SimStatus rate(std::string_view key, uint64_t& out) {
    const toml::node* n = node(key);
    if (!n) return {};
    if (!n->is_string())
      return expected(key, n, "a rate with a unit (bps, Kbps, Mbps, Gbps, Tbps) like \"400Gbps\"");
    auto v = parse_rate(n->as_string()->get());
    if (!v) return err(key, n, v.error().message);
    if (*v == 0) return err(key, n, "a rate must be > 0");
    out = *v;
    return {};
  }
  SimStatus size(std::string_view key, uint64_t& out) {
    const toml::node* n = node(key);
    if (!n) return {};
    if (n->is_integer()) {
      if (n->as_integer()->get() < 0) return expected(key, n, "a size >= 0");
      out = static_cast<uint64_t>(n->as_integer()->get());
      return {};
    }
    if (!n->is_string())
      return expected(key, n, "a size: bytes as an integer, or a string like \"4MiB\"");
    auto v = parse_size(n->as_string()->get());
    if (!v) return err(key, n, v.error().message);
    out = *v;
    return {};
  }

  // Unknown keys are errors.
  SimStatus finish() const {
    if (!t_) return {};
    for (auto&& [k, v] : *t_) {
      if (valid_.count(std::string(k.str()))) continue;
      std::string list;
      for (const auto& s : valid_)
        list += std::string(list.empty() ? "" : ", ") + s;
      const std::string kp = key_path(k.str());
      const std::string where = o_.where(kp, &v);
      return sim_fail(where + ": unknown key '" + kp + "'" +
                      (list.empty() ? ""
                                    : " (valid keys" +
                                          (path_.empty() ? std::string() : " in [" + path_ + "]") +
                                          ": " + list + ")"));
    }
    return {};
  }

 private:
  const toml::table* t_;
  std::string path_;
  const Origin& o_;
  std::set<std::string> valid_;
};

#define TRY(expr)                                  \
  do {                                             \
    auto _st = (expr);                             \
    if (!_st) return std::unexpected(_st.error()); \
  } while (0)

// A sub-table of `r` (absent = nullptr); error if the key holds something else.
SimResult<const toml::table*> subtable(TableReader& r, std::string_view key) {
  const toml::node* n = r.node(key);
  if (!n) return nullptr;
  if (!n->is_table()) return r.expected(key, n, "a table ([" + r.key_path(key) + "])");
  return n->as_table();
}

// One key of the schema (scenario_schema.h): absent keeps the value `sc` has.
template <class R>
SimStatus read_key(TableReader& r, const BasicKeySpec<R>& k, R& sc) {
  const toml::node* n = r.node(k.name);
  if (!n) return {};
  if (k.auto_ok && n->is_string() && n->as_string()->get() == "auto") {
    k.set(sc, std::monostate{});
    return {};
  }
  const std::string_view also = k.auto_ok ? " or \"auto\"" : "";
  const KeyValue current = k.get(sc);
  const uint64_t* cur_u = std::get_if<uint64_t>(&current);
  uint64_t u = cur_u ? *cur_u : 0;
  switch (k.type) {
    case KeyType::kBool: {
      bool b = false;
      TRY(r.boolean(k.name, b, also));
      k.set(sc, b);
      return {};
    }
    case KeyType::kInt:
      TRY(r.u64(k.name, u, k.min, k.max, also));
      break;
    case KeyType::kReal: {
      double d = 0;
      TRY(r.real(k.name, d, k.rmin, k.rmax));
      k.set(sc, d);
      return {};
    }
    case KeyType::kDuration:
      TRY(r.duration(k.name, u, k.never));
      break;
    case KeyType::kRate:
      TRY(r.rate(k.name, u));
      break;
    case KeyType::kSize:
      TRY(r.size(k.name, u));
      break;
    case KeyType::kText: {
      std::string s;
      TRY(r.string(k.name, s));
      k.set(sc, s);
      return {};
    }
    case KeyType::kChoice: {
      size_t i = 0;
      TRY(r.choice(k.name, k.choices, i));
      k.set(sc, std::string(k.choices[i]));
      return {};
    }
    case KeyType::kChoices: {
      // "array of transport kinds" -> "transport kinds", "transport kind".
      std::string noun(k.type_doc);
      if (noun.rfind("array of ", 0) == 0) noun = noun.substr(9);
      const std::string one =
          !noun.empty() && noun.back() == 's' ? noun.substr(0, noun.size() - 1) : noun;
      std::string list;
      for (std::string_view c : k.choices)
        list += std::string(list.empty() ? "" : ", ") + "\"" + std::string(c) + "\"";
      const std::string what = "a non-empty array of " + noun + " (" + list + ")";
      if (!n->is_array() || n->as_array()->empty()) return r.expected(k.name, n, what);
      std::vector<std::string> out;
      for (const toml::node& e : *n->as_array()) {
        if (!e.is_string())
          return r.err(k.name, n, "expected " + what + ", got an element " + describe(e));
        const std::string& s = e.as_string()->get();
        if (std::find(k.choices.begin(), k.choices.end(), s) == k.choices.end())
          return r.err(k.name, n, "unknown " + one + " \"" + s + "\" (expected " + list + ")");
        if (std::find(out.begin(), out.end(), s) != out.end())
          return r.err(k.name, n, one + " \"" + s + "\" listed twice");
        out.push_back(s);
      }
      k.set(sc, std::move(out));
      return {};
    }
    case KeyType::kCustom:
    case KeyType::kTables:
      return {};  // the section's reader reads it
  }
  k.set(sc, u);
  return {};
}

const KeySpec& schema_key(std::string_view section, std::string_view name) {
  for (const KeySpec& k : schema_section(section)->keys)
    if (k.name == name) return k;
  std::abort();  // a name of this file that the schema lacks: a bug
}

// Every key of `section` but those in `skip` (read by the caller).
SimStatus read_keys(TableReader& r, std::string_view section, Scenario& sc,
                    std::initializer_list<std::string_view> skip = {}) {
  for (const KeySpec& k : schema_section(section)->keys)
    if (std::find(skip.begin(), skip.end(), k.name) == skip.end()) TRY(read_key(r, k, sc));
  return {};
}

// Every key of section `s` into `rec` but those in `skip` (read by the caller).
template <class R>
SimStatus read_record_keys(TableReader& r, const BasicSectionSpec<R>& s, R& rec,
                           std::initializer_list<std::string_view> skip = {}) {
  for (const BasicKeySpec<R>& k : s.keys)
    if (std::find(skip.begin(), skip.end(), k.name) == skip.end()) TRY(read_key(r, k, rec));
  return {};
}

// The `kind` of a section that has one: required, one of its choices.
template <class R>
SimStatus read_kind(TableReader& r, const BasicSectionSpec<R>& s, R& rec) {
  const BasicKeySpec<R>& k = *find_key(s, "kind");
  if (!r.has("kind")) {
    r.allow("kind");
    std::string list;
    for (std::string_view c : k.choices)
      list += (list.empty() ? "" : ", ") + std::string(c);
    return r.missing("kind", "one of " + list);
  }
  return read_key(r, k, rec);
}

// The schema's rules on which keys a record takes (scenario_schema.h): a key given for
// another kind is refused, naming the kinds it is for (`subject`: "workload kind 'uniform'",
// "a flap fault"); a key the record or its kind requires is asked for, with its doc. `skip`:
// keys whose rules the caller checks with messages of its own.
template <class R>
SimStatus check_key_rules(TableReader& r, const BasicSectionSpec<R>& s, const R& rec,
                          const std::string& subject,
                          std::initializer_list<std::string_view> skip = {}) {
  const std::string kind = record_kind(s, rec);
  for (const BasicKeySpec<R>& k : s.keys) {
    if (std::find(skip.begin(), skip.end(), k.name) != skip.end()) continue;
    r.allow(k.name);
    const bool for_kind =
        k.kinds.empty() || std::find(k.kinds.begin(), k.kinds.end(), kind) != k.kinds.end();
    if (!for_kind && r.has(k.name)) {
      std::string list;
      for (std::string_view x : k.kinds)
        list += (list.empty() ? "" : ", ") + std::string(x);
      return r.err(k.name, r.node(k.name),
                   "does not apply to " + subject + " (it is for: " + list + ")");
    }
    const bool needed = k.required || std::find(k.required_for.begin(), k.required_for.end(),
                                                kind) != k.required_for.end();
    if (needed && !r.has(k.name)) return r.missing(k.name, std::string(k.doc));
  }
  return {};
}

SimStatus read_topo(TableReader& r, Scenario& sc) {
  TRY(read_key(r, schema_key("topo", "kind"), sc));
  TopologyConfig& t = sc.base.topo;
  if (t.kind == TopologyKind::kFatTree) {
    // The conventional baseline: one plane, k/2 hosts per leaf, the rest follows from k.
    for (const char* key : {"hosts_per_leaf", "spines"})
      if (r.has(key))
        return r.err(key, r.node(key),
                     "does not apply to a fat tree (radix k gives k/2 hosts per leaf, k/2 leaves "
                     "and k/2 aggs per pod, and (k/2)^2 cores)");
    t.planes = 1;
    if (const toml::node* n = r.node("planes"); n && !(n->is_integer() && n->value<int64_t>() == 1))
      return r.err("planes", n, "a fat tree is the single-plane baseline: planes must be 1");
  } else if (r.has("tiers")) {
    return r.err("tiers", r.node("tiers"), "applies only to kind = \"fat_tree\"");
  }
  TRY(read_keys(r, "topo", sc, {"kind"}));
  if (t.kind == TopologyKind::kFatTree && t.radix < 4)
    return r.expected("radix", r.node("radix"), "an integer >= 4");
  return r.finish();
}

SimStatus read_switch(TableReader& r, Scenario& sc) {
  TRY(read_keys(r, "switch", sc));
  return r.finish();
}

SimStatus read_transport(TableReader& r, Scenario& sc) {
  TransportConfig& t = sc.base.transport;
  TRY(read_keys(r, "transport", sc));
  if (t.nscc_min_cwnd > t.mtu)
    return r.err("nscc_min_cwnd", r.node("nscc_min_cwnd"),
                 "nscc_min_cwnd must be at most transport.mtu (" + std::to_string(t.mtu) + ")");
  // An integer for every kind, or a table per kind ({roce = 8, roce_pfc = 8}: the paper's
  // RoCE QP-scaling baseline next to MRC's one QP).
  if (const toml::node* n = r.node("qps_per_flow")) {
    const std::string what = "an integer in 1..256, or a table of transport kinds like {roce = 8}";
    auto count = [&](const toml::node& v) -> std::optional<uint32_t> {
      if (!v.is_integer() || v.as_integer()->get() < 1 || v.as_integer()->get() > 256)
        return std::nullopt;
      return static_cast<uint32_t>(v.as_integer()->get());
    };
    if (n->is_table()) {
      sc.qps_per_kind.clear();
      const std::vector<std::string_view>& kinds = schema_key("transport", "kinds").choices;
      for (auto&& [k, v] : *n->as_table()) {
        const std::string kind(k.str());
        if (std::find(kinds.begin(), kinds.end(), kind) == kinds.end())
          return r.err("qps_per_flow", n,
                       "unknown transport kind \"" + kind +
                           "\" (expected mrc, mrc_oblivious, roce, roce_pfc)");
        auto c = count(v);
        if (!c)
          return r.err("qps_per_flow", n,
                       "expected " + what + ", got " + kind + " = " + describe(v));
        sc.qps_per_kind[kind] = *c;
      }
    } else {
      auto c = count(*n);
      if (!c) return r.expected("qps_per_flow", n, what);
      t.qps_per_flow = *c;
    }
  }
  return r.finish();
}

SimResult<PathRef> parse_path_name(std::string_view s);

// One [[workload.flow]] entry.
SimStatus read_flow_entry(TableReader& r, WorkloadConfig::Flow& f) {
  const FlowSectionSpec& s = flow_schema();
  TRY(check_key_rules(r, s, f, "a flow"));
  TRY(read_record_keys(r, s, f));
  if (f.src == f.dst) return r.err("dst", r.node("dst"), "must differ from 'src'");
  if (r.has("size") && f.size == 0) return r.err("size", r.node("size"), "size must be > 0");
  if (f.size > kMaxFlowBytes)
    return r.err("size", r.node("size"), "a flow carries at most 2 GiB (one QP message)");
  // A list of pinned paths (`paths`, `backup_paths`), each named by the spine it crosses.
  // An empty `backup_paths` is none (`--set` can take a scenario's backups away); an empty
  // `paths` would say nothing that leaving the key out does not.
  auto read_paths = [&](const char* key, std::vector<PathRef>& refs,
                        std::vector<std::string>& names, bool may_be_empty) -> SimStatus {
    const toml::node* n = r.node(key);
    if (!n) return {};
    const std::string what = std::string(may_be_empty ? "an array" : "a non-empty array") +
                             " of paths, the spines their EVs name, like "
                             "[\"p0/spine0\", \"p0/spine1\", \"p1/spine0\"]";
    if (!n->is_array() || (n->as_array()->empty() && !may_be_empty))
      return r.expected(key, n, what);
    for (const toml::node& e : *n->as_array()) {
      if (!e.is_string())
        return r.err(key, n, "expected " + what + ", got an element " + describe(e));
      auto p = parse_path_name(e.as_string()->get());
      if (!p) return r.err(key, n, p.error().message);
      refs.push_back(*p);
      names.push_back(e.as_string()->get());
    }
    return {};
  };
  TRY(read_paths("paths", f.paths, f.path_names, false));
  TRY(read_paths("backup_paths", f.backup_paths, f.backup_path_names, true));
  if (!f.backup_paths.empty() && f.paths.empty())
    return r.err("backup_paths", r.node("backup_paths"),
                 "backup paths stand in for pinned `paths`; give those too");
  return r.finish();
}

SimStatus read_workload(TableReader& r, Scenario& sc, const std::string& base_dir) {
  const SectionSpec& s = *schema_section("workload");
  TRY(read_kind(r, s, sc));
  WorkloadConfig& w = sc.workload;
  using K = WorkloadConfig;
  TRY(check_key_rules(r, s, sc, std::string("workload kind '") + workload_kind_name(w.kind) + "'"));
  TRY(read_record_keys(r, s, sc, {"kind", "row"}));
  if (r.has("size") && w.size == 0) return r.err("size", r.node("size"), "size must be > 0");
  // Every flow of these kinds carries `size` bytes; collectives split theirs into steps.
  if (w.size > kMaxFlowBytes && w.kind != K::kAllReduce && w.kind != K::kTraining)
    return r.err("size", r.node("size"),
                 "a flow carries at most 2 GiB (one QP message); this workload's flows carry "
                 "`size` each");
  if (const toml::node* n = r.node("group")) {
    if (!n->is_array()) return r.expected("group", n, "an array of host numbers");
    w.group.clear();
    for (const toml::node& e : *n->as_array()) {
      if (!e.is_integer() || e.as_integer()->get() < 0 || e.as_integer()->get() > UINT32_MAX)
        return r.err("group", n,
                     "expected an array of host numbers, got an element " + describe(e));
      w.group.push_back(static_cast<HostId>(e.as_integer()->get()));
    }
  }
  // `row` is for the two-level ring only, and that one needs it.
  if (w.algorithm == K::kRing2d && !r.has("row"))
    return r.missing("row",
                     "ranks per row of algorithm = \"ring2d\": consecutive ranks of the "
                     "group, at least 2, dividing the number of ranks");
  if (w.algorithm != K::kRing2d && r.has("row"))
    return r.err("row", r.node("row"), "applies only to algorithm = \"ring2d\"");
  TRY(read_key(r, *find_key(s, "row"), sc));
  if (w.algorithm == K::kRing2d) {
    // The group size is known here unless it is every host of a fabric yet to be built.
    const uint64_t ranks = !w.group.empty() ? w.group.size() : w.ranks;
    if (ranks != 0 && ranks % w.row != 0)
      return r.err("row", r.node("row"),
                   std::to_string(w.row) + " ranks per row do not divide the " +
                       std::to_string(ranks) + " ranks of the group (workload." +
                       (w.group.empty() ? "ranks" : "group") + ")");
  }
  if (w.kind == K::kSteady && w.until <= w.start)
    return r.err("until", r.node("until"),
                 "must be later than 'start' (" + format_duration(w.start) + ")");
  if (w.kind == K::kFlows) {
    const toml::node* n = r.node("flow");
    if (!n->is_array_of_tables() || n->as_array()->empty())
      return r.expected("flow", n, "an array of tables ([[workload.flow]] sections)");
    uint32_t i = 0;
    for (const toml::node& e : *n->as_array()) {
      WorkloadConfig::Flow f;
      f.line = e.source().begin.line;
      TableReader fr(e.as_table(), r.key_path("flow") + "[" + std::to_string(i++) + "]",
                     r.origin());
      TRY(read_flow_entry(fr, f));
      w.flow_list.push_back(std::move(f));
    }
  }
  if (w.kind == K::kHtsim) {
    if (w.file.empty()) return r.err("file", r.node("file"), "must name the .cm file to run");
    if (!base_dir.empty() && std::filesystem::path(w.file).is_relative())
      w.file = (std::filesystem::path(base_dir) / w.file).lexically_normal().string();
  }
  return r.finish();
}

// A spine named as a path ("p0/spine3": the plane and the spine an EV names).
SimResult<PathRef> parse_path_name(std::string_view s) {
  auto sw = parse_switch_name(s);
  if (!sw || sw->kind != SwitchRef::kSpine)
    return sim_fail(
        "expected a path as the spine its EV names, like \"p0/spine3\" (plane 0, "
        "spine 3), got \"" +
        std::string(s) + "\"");
  return PathRef{sw->plane, sw->index};
}

// The links a fault names: "p*/..." is the same link in every plane of the fabric (all of
// a NIC's ports, as when its transceiver or the NIC itself fails).
SimResult<std::vector<LinkRef>> parse_fault_links(std::string_view s, uint32_t planes) {
  if (!s.starts_with("p*/")) {
    auto l = parse_link_name(s);
    if (!l) return std::unexpected(l.error());
    return std::vector<LinkRef>{*l};
  }
  auto l = parse_link_name("p0/" + std::string(s.substr(3)));
  if (!l) return std::unexpected(l.error());
  std::vector<LinkRef> v;
  for (uint32_t p = 0; p < planes; ++p) {
    v.push_back(*l);
    v.back().plane = p;
  }
  return v;
}

SimStatus read_fault(TableReader& r, FaultConfig& f, uint32_t planes) {
  const FaultSectionSpec& s = fault_schema();
  TRY(read_kind(r, s, f));
  using F = FaultConfig;
  const bool on_switch =
      f.kind == F::kSwitchReboot || f.kind == F::kBlackholeSwitch || f.kind == F::kBlackholeReboot;
  const bool on_path = f.kind == F::kPathLoss;
  const char* target = on_switch ? "switch" : on_path ? "path" : "link";
  // What the fault acts on, with messages of their own: keys that name another kind of target,
  // and `link` against `links`.
  for (const char* other : {"link", "links", "switch", "path"}) {
    r.allow(other);
    const bool mine = std::string_view(other) == target ||
                      (std::string_view(other) == "links" && !on_switch && !on_path);
    if (!mine && r.has(other))
      return r.err(other, r.node(other),
                   std::string("a ") + fault_kind_name(f.kind) + " fault names a " + target +
                       ", not a " + (std::string_view(other) == "links" ? "link" : other));
  }
  if (!on_switch && !on_path && r.has("link") && r.has("links"))
    return r.err("links", r.node("links"), "give 'link' (one) or 'links' (several), not both");
  if (!r.has(target) && !(!on_switch && !on_path && r.has("links"))) {
    return r.missing(target, on_switch ? std::string(kSwitchForms)
                             : on_path ? "the spine the lossy EV names, like \"p0/spine3\""
                                       : std::string(kLinkForms) +
                                             ", or 'links': an array of them (they fail together)");
  }
  TRY(check_key_rules(r, s, f, std::string("a ") + fault_kind_name(f.kind) + " fault",
                      {"link", "links", "switch", "path"}));
  if (on_switch) {
    TRY(r.string(target, f.target));
    auto sw = parse_switch_name(f.target);
    if (!sw) return r.err(target, r.node(target), sw.error().message);
    f.sw = *sw;
  } else if (on_path) {
    TRY(r.string(target, f.target));
    auto p = parse_path_name(f.target);
    if (!p) return r.err(target, r.node(target), p.error().message);
    f.path = *p;
  } else if (r.has("link")) {
    TRY(r.string("link", f.target));
    auto l = parse_fault_links(f.target, planes);
    if (!l) return r.err("link", r.node("link"), l.error().message);
    f.link = l->front();
    f.links = std::move(*l);
  } else {
    const toml::node* n = r.node("links");
    const std::string what = "a non-empty array of links (" + std::string(kLinkForms) + ")";
    if (!n->is_array() || n->as_array()->empty()) return r.expected("links", n, what);
    for (const toml::node& e : *n->as_array()) {
      if (!e.is_string())
        return r.err("links", n, "expected " + what + ", got an element " + describe(e));
      auto l = parse_fault_links(e.as_string()->get(), planes);
      if (!l) return r.err("links", n, l.error().message);
      f.links.insert(f.links.end(), l->begin(), l->end());
      f.target += (f.target.empty() ? "" : ", ") + e.as_string()->get();
    }
    f.link = f.links.front();
    f.listed = true;
  }
  TRY(read_record_keys(r, s, f, {"kind"}));
  if (on_path && f.src == f.dst) return r.err("dst", r.node("dst"), "must differ from 'src'");
  if (r.has("nic_detect")) {
    for (const LinkRef& l : f.links)
      if (l.kind != LinkRef::kHostLeaf)
        return r.err("nic_detect", r.node("nic_detect"),
                     "applies to host links (\"p0/host5\") only: it is when a NIC sees its own "
                     "link change");
  }
  if (f.kind == F::kBlackholeReboot && f.reboot_at <= f.at)
    return r.err("reboot_at", r.node("reboot_at"),
                 "must be later than 'at' (" + format_duration(f.at) + ")");
  if (f.until != kNever && f.until <= f.at)
    return r.err("until", r.node("until"),
                 "must be later than 'at' (" + format_duration(f.at) + ")");
  if (f.kind == F::kFlap && f.period == 0) return r.err("period", r.node("period"), "must be > 0");
  return r.finish();
}

// A three-tier fat tree of radix k: even k, at most k pods of (k/2)^2 hosts, and switch counts
// that fit the uSID ranges (16383 per tier). Four tiers: at most k superpods of (k/2)^3
// hosts; aggs and spines share a range (8192 each), cores 16383.
SimStatus check_fat_tree(const TopologyConfig& t, const std::string& where) {
  if (t.radix % 2 != 0)
    return sim_fail(where + "a fat tree needs an even radix (k/2 ports down, k/2 up), got " +
                    std::to_string(t.radix));
  const uint64_t half = t.radix / 2;
  const bool four = t.tiers == 4;
  auto capacity_of = [&](uint64_t k) { return four ? k * k * k * k / 8 : k * k * k / 4; };
  const uint64_t capacity = capacity_of(t.radix);
  if (t.hosts > capacity) {
    uint32_t k = 4;
    while (capacity_of(k) < t.hosts)
      k += 2;
    return sim_fail(where + std::to_string(t.hosts) + " hosts do not fit a " +
                    (four ? "four" : "three") + "-tier fat tree of radix " +
                    std::to_string(t.radix) + " (at most " + (four ? "k^4/8" : "k^3/4") + " = " +
                    std::to_string(capacity) +
                    (four ? ": k superpods of (k/2)^3 hosts" : ": k pods of (k/2)^2 hosts") +
                    "): raise radix to >= " + std::to_string(k) + ", or lower hosts");
  }
  if (four) {
    const uint64_t superpods = (t.hosts + half * half * half - 1) / (half * half * half);
    if (superpods * half * half > 0x2000 || half * half * half > 0x3FFF)
      return sim_fail(where + "radix " + std::to_string(t.radix) +
                      " is too large for the simulator's four-tier uSID plan (at most 8192 "
                      "aggs and spines each, 16383 cores): use radix <= 32");
    return {};
  }
  const uint64_t pods = (t.hosts + half * half - 1) / (half * half);
  if (pods * half > 0x3FFF || half * half > 0x3FFF)
    return sim_fail(where + "radix " + std::to_string(t.radix) +
                    " is too large for the simulator's uSID plan (at most 16383 leaves, aggs "
                    "and cores each): use radix <= 180");
  return {};
}

// ---- overrides -----------------------------------------------------------------------------

// Parses the value of a --set: a TOML value, else [a, b] of bare words, else a bare string.
toml::table parse_override_value(std::string_view value) {
  toml::table out;
  try {
    toml::table t = toml::parse("v = " + std::string(value));
    if (t.size() == 1 && t.contains("v")) {
      out.insert_or_assign("v", *t.get("v"));
      return out;
    }
  } catch (const toml::parse_error&) {
  }
  std::string_view v = trim(value);
  if (v.size() >= 2 && v.front() == '[' && v.back() == ']') {
    toml::array arr;
    std::string_view inner = v.substr(1, v.size() - 2);
    while (!trim(inner).empty()) {
      const size_t comma = inner.find(',');
      std::string_view item = trim(inner.substr(0, comma));
      if (item.size() >= 2 && (item.front() == '"' || item.front() == '\''))
        item = item.substr(1, item.size() - 2);
      arr.push_back(std::string(item));
      if (comma == std::string_view::npos) break;
      inner = inner.substr(comma + 1);
    }
    out.insert_or_assign("v", std::move(arr));
    return out;
  }
  out.insert_or_assign("v", std::string(v));
  return out;
}

SimStatus apply_override(toml::table& root, const std::string& arg, Origin& origin) {
  const size_t eq = arg.find('=');
  if (eq == std::string::npos || eq == 0)
    return sim_fail("--set " + arg + ": expected key=value (e.g. topo.hosts=256)");
  const std::string key(trim(std::string_view(arg).substr(0, eq)));
  const std::string_view value = std::string_view(arg).substr(eq + 1);
  std::vector<std::string> segs;
  for (size_t p = 0;;) {
    const size_t d = key.find('.', p);
    segs.push_back(key.substr(p, d == std::string::npos ? std::string::npos : d - p));
    if (segs.back().empty())
      return sim_fail("--set " + arg + ": empty component in key '" + key + "'");
    if (d == std::string::npos) break;
    p = d + 1;
  }
  toml::node* cur = &root;
  std::string display;
  for (size_t i = 0; i + 1 < segs.size(); ++i) {
    const std::string& s = segs[i];
    if (cur->is_table()) {
      toml::table& t = *cur->as_table();
      if (!t.contains(s)) t.insert_or_assign(s, toml::table{});
      cur = t.get(s);
      display += (display.empty() ? "" : ".") + s;
    } else if (cur->is_array()) {
      auto idx = parse_u32(s);
      toml::array& a = *cur->as_array();
      if (!idx || *idx >= a.size())
        return sim_fail("--set " + arg + ": '" + display + "' is an array of " +
                        std::to_string(a.size()) + "; expected an index 0.." +
                        std::to_string(a.size() == 0 ? 0 : a.size() - 1) + ", got '" + s + "'");
      cur = a.get(*idx);
      display += "[" + s + "]";
    } else {
      return sim_fail("--set " + arg + ": '" + display + "' is " + describe(*cur) +
                      ", not a table");
    }
  }
  if (!cur->is_table())
    return sim_fail("--set " + arg + ": '" + display + "' is " + describe(*cur) + ", not a table");
  toml::table v = parse_override_value(value);
  cur->as_table()->insert_or_assign(segs.back(), *v.get("v"));
  display += (display.empty() ? "" : ".") + segs.back();
  origin.overrides[display] = arg;
  return {};
}

}  // namespace

SimResult<Scenario> parse_scenario(std::string_view text, std::string_view filename,
                                   const std::vector<std::string>& overrides) {
  Origin origin;
  origin.file = std::string(filename);
  toml::table root;
  try {
    root = toml::parse(text, filename);
  } catch (const toml::parse_error& e) {
    return sim_fail(origin.file + ":" + std::to_string(e.source().begin.line) + ":" +
                    std::to_string(e.source().begin.column) +
                    ": TOML syntax error: " + std::string(e.description()));
  }
  for (const std::string& o : overrides)
    TRY(apply_override(root, o, origin));

  Scenario sc = scenario_defaults();
  sc.source = origin.file;
  sc.overrides = overrides;
  std::string base_dir;
  if (filename != "<default>" && filename.find('<') == std::string_view::npos) {
    base_dir = std::filesystem::path(filename).parent_path().string();
    sc.name = std::filesystem::path(filename).stem().string();
  }
  TableReader top(&root, "", origin);
  TRY(read_key(top, schema_key("", "name"), sc));
  if (sc.name.empty()) sc.name = "scenario";
  for (char c : sc.name)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.'))
      return top.err("name", top.node("name"),
                     "expected a name of letters, digits, '-', '_' and '.' (it names the output "
                     "directory), got \"" +
                         sc.name + "\"");
  TRY(read_keys(top, "", sc, {"name"}));

  SimConfig& b = sc.base;
  auto topo = subtable(top, "topo");
  if (!topo) return std::unexpected(topo.error());
  TableReader tr(*topo, "topo", origin);
  TRY(read_topo(tr, sc));
  {
    // The same rules as Simulation::create, with a message that says what to change.
    const TopologyConfig& t = b.topo;
    const std::string where = origin.file + ": [topo]: ";
    if (t.kind == TopologyKind::kFatTree) TRY(check_fat_tree(t, where));
  }
  if (b.topo.kind == TopologyKind::kClos2) {
    const TopologyConfig& t = b.topo;
    const std::string where = origin.file + ": [topo]: ";
    const uint32_t h = t.hosts_per_leaf ? t.hosts_per_leaf : t.radix / 2;
    if (h == 0 || h >= t.radix)
      return sim_fail(where + "hosts_per_leaf (" + std::to_string(h) +
                      ") must be in 1..radix-1 (radix " + std::to_string(t.radix) + ")");
    const uint32_t up = t.radix - h;
    const uint32_t spines = t.spines ? t.spines : up;
    if (spines == 0 || up % spines != 0)
      return sim_fail(where + "spines (" + std::to_string(spines) +
                      ") must divide the uplinks per leaf (radix - hosts_per_leaf = " +
                      std::to_string(up) + ")");
    const uint64_t leaves = (t.hosts + h - 1) / h;
    if (leaves * (up / spines) > t.radix) {
      std::string msg = where + std::to_string(t.hosts) + " hosts need " + std::to_string(leaves) +
                        " leaves of " + std::to_string(h) + " hosts";
      if (up / spines > 1)
        msg += ", and each spine then needs " + std::to_string(leaves) + " x " +
               std::to_string(up / spines) + " ports (parallel links per leaf)";
      msg += ", more than a spine's " + std::to_string(t.radix) + " ports: raise radix";
      if (t.hosts_per_leaf == 0 && t.spines == 0) {
        uint32_t r = 4;
        while (static_cast<uint64_t>(r) * r / 2 < t.hosts)
          r += 2;
        msg += " (a non-blocking two-tier fabric of " + std::to_string(t.hosts) +
               " hosts needs radix >= " + std::to_string(r) + ")";
      } else {
        msg += ", raise hosts_per_leaf or spines";
      }
      return sim_fail(msg + ", or lower hosts");
    }
  }

  auto sw = subtable(top, "switch");
  if (!sw) return std::unexpected(sw.error());
  TableReader sr(*sw, "switch", origin);
  TRY(read_switch(sr, sc));

  auto tp = subtable(top, "transport");
  if (!tp) return std::unexpected(tp.error());
  TableReader pr(*tp, "transport", origin);
  TRY(read_transport(pr, sc));

  auto dq = subtable(top, "dcqcn");
  if (!dq) return std::unexpected(dq.error());
  TableReader qr(*dq, "dcqcn", origin);
  TRY(read_keys(qr, "dcqcn", sc));
  TRY(qr.finish());

  auto wl = subtable(top, "workload");
  if (!wl) return std::unexpected(wl.error());
  if (!*wl) {
    top.allow("workload");
    return top.missing("workload", "a [workload] table with at least 'kind'");
  }
  TableReader wr(*wl, "workload", origin);
  TRY(read_workload(wr, sc, base_dir));

  if (const toml::node* n = top.node("fault")) {
    const bool none = n->is_array() && n->as_array()->empty();  // --set fault=[]
    if (!none && !n->is_array_of_tables())
      return top.expected("fault", n, "an array of tables ([[fault]] sections)");
    uint32_t i = 0;
    for (const toml::node& e : *n->as_array()) {
      FaultConfig f;
      f.line = e.source().begin.line;
      TableReader fr(e.as_table(), "fault[" + std::to_string(i) + "]", origin);
      TRY(read_fault(fr, f, sc.base.topo.planes));
      sc.faults.push_back(f);
      ++i;
    }
  }

  auto deny = subtable(top, "denylist");
  if (!deny) return std::unexpected(deny.error());
  TableReader dr(*deny, "denylist", origin);
  TRY(read_keys(dr, "denylist", sc));
  TRY(dr.finish());

  auto run = subtable(top, "run");
  if (!run) return std::unexpected(run.error());
  TableReader rr(*run, "run", origin);
  TRY(read_keys(rr, "run", sc));
  TRY(rr.finish());
  TRY(top.finish());

  b.seed = sc.seed;
  for (const std::string& k : sc.kinds) {
    TransportRun run_cfg{k, b};
    TransportConfig& t = run_cfg.config.transport;
    if (k == "mrc") {
      t.kind = TransportKind::kMrc;
    } else if (k == "mrc_oblivious") {
      t.kind = TransportKind::kMrcOblivious;
    } else {
      // RoCEv2: one ECMP path per QP; NICs cannot act on trimmed packets, so the fabric
      // drops (roce) or pauses (roce_pfc) instead of trimming.
      t.kind = TransportKind::kRoce;
      t.path_mode = PathMode::kEcmp;
      run_cfg.config.sw.trimming = false;
      if (k == "roce_pfc") run_cfg.config.sw.pfc = true;
    }
    if (auto q = sc.qps_per_kind.find(k); q != sc.qps_per_kind.end()) t.qps_per_flow = q->second;
    sc.runs.push_back(std::move(run_cfg));
  }
  return sc;
}

SimResult<Scenario> load_scenario(const std::string& path,
                                  const std::vector<std::string>& overrides) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return sim_fail(path + ": cannot open scenario file");
  std::ostringstream ss;
  ss << in.rdbuf();
  return parse_scenario(ss.str(), path, overrides);
}

SimResult<Scenario> default_scenario(const std::vector<std::string>& overrides) {
  auto sc = parse_scenario(kDefaultScenario, "<default>", overrides);
  if (sc) sc->source = "<default>";
  return sc;
}

}  // namespace mrc::sim
