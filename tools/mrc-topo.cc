// mrc-topo: topology economics of a multi-plane two-tier fabric against a conventional
// single-plane fat tree, closed form (src/sim/topo_math.h; formulas and sources in
// docs/topology.md).
//
//   mrc-topo --gpus 131072                    the MRC claim setting: 8 x 100G planes of radix
//                                             512 against one 800G plane of radix 64
//   mrc-topo --gpus 8192 32768 131072         one block per size and a summary table
//   mrc-topo --gpus 65536 --oversub 3 --host-link-m 1 --packaging per-port --json
//
// Exit status: 0 when every design fits; 1 when some size does not fit a design (reported);
// 2 on bad arguments.
#include <fmt/core.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "cli.h"
#include "common/types.h"
#include "sim/topo_math.h"

namespace {

using namespace mrc;
using namespace mrc::sim;
using nlohmann::ordered_json;

struct Options {
  std::vector<uint64_t> gpus;
  DesignParams mp = multi_plane_params(0);
  DesignParams cv = conventional_params(0);
  double oversub = 1.0;
  bool min_switches = false;
  std::string packaging = "breakout";
  Assumptions a;
  bool json = false;
};

// One design at one size: the report, or why it does not fit.
struct Outcome {
  std::optional<DesignReport> report;
  std::optional<SimError> problem;
};

Outcome evaluate(const DesignParams& p, const Assumptions& a) {
  if (auto problem = check(p, a)) return Outcome{std::nullopt, problem};
  auto r = size_design(p, a);
  if (!r) return Outcome{std::nullopt, r.error()};
  return Outcome{*r, std::nullopt};
}

std::string grouped(uint64_t v) {
  std::string digits = std::to_string(v);
  std::string out;
  const size_t n = digits.size();
  for (size_t i = 0; i < n; ++i) {
    if (i != 0 && (n - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string per_tier(const ClosSizing& s) {
  std::string out;
  for (size_t i = 0; i < s.switches_per_tier.size(); ++i) {
    if (i != 0) out += '+';
    out += grouped(s.switches_per_tier[i]);
  }
  return out;
}

std::string ratio(double mp, double cv) {
  if (cv == 0) return "-";
  return fmt::format("{:.2f}", mp / cv);
}

std::string megawatts(double w) {
  return fmt::format("{:.2f} MW", w / 1e6);
}

std::string design_name(const DesignParams& p) {
  return fmt::format("{} x {}G, radix {}", p.planes, p.link_gbps, p.radix);
}

// ---- text ------------------------------------------------------------------------------

struct Row {
  std::string label, mp, cv, ratio;
};

void print_block(uint64_t gpus, const Options& o, const Outcome& mp, const Outcome& cv) {
  std::vector<Row> rows;
  rows.push_back({"GPUs " + grouped(gpus), "multi-plane", "conventional", "MP/CV"});
  rows.push_back({"design", design_name(o.mp), design_name(o.cv), ""});
  const auto cell = [](const Outcome& x, auto f) -> std::string {
    return x.report ? f(*x.report) : std::string("does not fit");
  };
  const auto both = [&](const Outcome& x, const Outcome& y, auto f) -> std::string {
    return x.report && y.report ? f(*x.report, *y.report) : std::string("-");
  };
  const auto count_row = [&](std::string label, auto get) {
    rows.push_back({std::move(label), cell(mp, [&](auto& r) { return grouped(get(r)); }),
                    cell(cv, [&](auto& r) { return grouped(get(r)); }),
                    both(mp, cv, [&](auto& x, auto& y) {
                      return ratio(static_cast<double>(get(x)), static_cast<double>(get(y)));
                    })});
  };
  const auto power_row = [&](std::string label, auto get) {
    rows.push_back({std::move(label), cell(mp, [&](auto& r) { return megawatts(get(r)); }),
                    cell(cv, [&](auto& r) { return megawatts(get(r)); }),
                    both(mp, cv, [&](auto& x, auto& y) { return ratio(get(x), get(y)); })});
  };
  count_row("tiers", [](const DesignReport& r) { return r.tiers; });
  count_row("worst-case switch hops", [](const DesignReport& r) { return r.worst_case_hops; });
  rows.push_back({"switches per plane, by tier",
                  cell(mp, [](auto& r) { return per_tier(r.plane); }),
                  cell(cv, [](auto& r) { return per_tier(r.plane); }), ""});
  count_row("switches", [](const DesignReport& r) { return r.switches; });
  count_row("host links", [](const DesignReport& r) { return r.host_links; });
  count_row("switch-switch links", [](const DesignReport& r) { return r.switch_links; });
  count_row("links", [](const DesignReport& r) { return r.links; });
  count_row("transceivers (optical ends)", [](const DesignReport& r) { return r.transceivers; });
  count_row(fmt::format("optical lanes ({}G)", o.a.lane_gbps),
            [](const DesignReport& r) { return r.optical_lanes; });
  count_row(fmt::format("optical modules ({})", o.packaging),
            [](const DesignReport& r) { return r.optical_modules; });
  count_row("800G-module equivalents", [](const DesignReport& r) { return r.modules_800g_equiv; });
  power_row("switch power", [](const DesignReport& r) { return r.switch_power_w; });
  power_row("optics power", [](const DesignReport& r) { return r.optics_power_w; });
  power_row("total power", [](const DesignReport& r) { return r.power_w; });
  count_row("two-tier capacity (GPUs)", [](const DesignReport& r) { return r.two_tier_capacity; });

  size_t w0 = 0, w1 = 0, w2 = 0;
  for (const Row& r : rows) {
    w0 = std::max(w0, r.label.size());
    w1 = std::max(w1, r.mp.size());
    w2 = std::max(w2, r.cv.size());
  }
  for (const Row& r : rows)
    fmt::print("{:<{}}  {:>{}}  {:>{}}  {:>6}\n", r.label, w0, r.mp, w1, r.cv, w2, r.ratio);
  if (mp.problem) fmt::print("  multi-plane: {}\n", mp.problem->message);
  if (cv.problem) fmt::print("  conventional: {}\n", cv.problem->message);
  fmt::print("\n");
}

void print_summary(const Options& o, const std::vector<std::pair<Outcome, Outcome>>& out) {
  fmt::print("summary (multi-plane / conventional, ratio):\n");
  fmt::print("| GPUs | tiers | hops | switches | transceivers | 800G-eq. optics | power |\n");
  fmt::print("|---:|---:|---:|---:|---:|---:|---:|\n");
  for (size_t i = 0; i < out.size(); ++i) {
    const auto& [mp, cv] = out[i];
    if (!mp.report || !cv.report) {
      fmt::print("| {} | does not fit | | | | | |\n", grouped(o.gpus[i]));
      continue;
    }
    const DesignReport& x = *mp.report;
    const DesignReport& y = *cv.report;
    const auto pair = [](uint64_t a, uint64_t b) {
      return fmt::format("{} / {} ({})", grouped(a), grouped(b),
                         ratio(static_cast<double>(a), static_cast<double>(b)));
    };
    fmt::print("| {} | {} / {} | {} / {} | {} | {} | {} | {} / {} ({}) |\n", grouped(o.gpus[i]),
               x.tiers, y.tiers, x.worst_case_hops, y.worst_case_hops, pair(x.switches, y.switches),
               pair(x.transceivers, y.transceivers),
               pair(x.modules_800g_equiv, y.modules_800g_equiv), megawatts(x.power_w),
               megawatts(y.power_w), ratio(x.power_w, y.power_w));
  }
  fmt::print("\n");
}

void print_assumptions(const Options& o) {
  const Assumptions& a = o.a;
  const bool optical = a.host_link_m > a.copper_reach_m;
  fmt::print("assumptions (docs/topology.md):\n");
  fmt::print("  leaves {}:1 (host ports : uplinks), tiers above non-blocking\n", o.oversub);
  fmt::print("  partial pods: {}\n", o.min_switches
                                         ? "fewest switches (uneven parallel links)"
                                         : "equal parallel links to every switch of a pod");
  fmt::print("  host links {} m, copper (DAC) reach {} m: {}\n", a.host_link_m, a.copper_reach_m,
             optical ? "optical, 2 transceivers per link" : "copper, no transceivers");
  fmt::print("  switch-switch links: optical, 2 transceivers per link\n");
  if (a.packaging == OpticsPackaging::kBreakout)
    fmt::print("  optics packaging: breakout, {} x {}G lanes per module, per device\n",
               a.module_lanes, a.lane_gbps);
  else
    fmt::print("  optics packaging: one pluggable per optical link end at the link speed\n");
  fmt::print("  switch: {} W without optics (51.2T class)\n", a.switch_w);
  fmt::print("  transceiver W: 100G {}, 200G {}, 400G {}, 800G {}, 1.6T {}; copper end {} W\n",
             a.xcvr_100g_w, a.xcvr_200g_w, a.xcvr_400g_w, a.xcvr_800g_w, a.xcvr_1600g_w,
             a.copper_end_w);
  fmt::print("  not counted: NICs and servers (same in both designs), cooling/PUE, cables\n");
}

// ---- JSON ------------------------------------------------------------------------------

ordered_json params_json(const DesignParams& p) {
  return ordered_json{{"planes", p.planes},       {"link_gbps", p.link_gbps},
                      {"radix", p.radix},         {"oversub", p.oversub},
                      {"max_tiers", p.max_tiers}, {"uniform_links", p.uniform_links}};
}

ordered_json outcome_json(const Outcome& x) {
  if (!x.report)
    return ordered_json{{"error", std::string(error_name(x.problem->code))},
                        {"message", x.problem->message}};
  const DesignReport& r = *x.report;
  return ordered_json{{"tiers", r.tiers},
                      {"worst_case_hops", r.worst_case_hops},
                      {"leaf_host_ports", r.plane.leaf_down},
                      {"leaf_uplinks", r.plane.leaf_up},
                      {"switches_per_tier_per_plane", r.plane.switches_per_tier},
                      {"switches", r.switches},
                      {"host_links", r.host_links},
                      {"switch_links", r.switch_links},
                      {"links", r.links},
                      {"host_links_optical", r.host_links_optical},
                      {"transceivers", r.transceivers},
                      {"optical_lanes", r.optical_lanes},
                      {"optical_modules", r.optical_modules},
                      {"modules_800g_equiv", r.modules_800g_equiv},
                      {"capacity_per_plane", r.plane.capacity},
                      {"two_tier_capacity", r.two_tier_capacity},
                      {"switch_power_w", r.switch_power_w},
                      {"optics_power_w", r.optics_power_w},
                      {"power_w", r.power_w}};
}

ordered_json ratios_json(const Outcome& mp, const Outcome& cv) {
  if (!mp.report || !cv.report) return nullptr;
  const DesignReport& x = *mp.report;
  const DesignReport& y = *cv.report;
  const auto q = [](double a, double b) { return b == 0 ? 0.0 : a / b; };
  const auto d = [](uint64_t v) { return static_cast<double>(v); };
  return ordered_json{{"switches", q(d(x.switches), d(y.switches))},
                      {"links", q(d(x.links), d(y.links))},
                      {"transceivers", q(d(x.transceivers), d(y.transceivers))},
                      {"optical_modules", q(d(x.optical_modules), d(y.optical_modules))},
                      {"modules_800g_equiv", q(d(x.modules_800g_equiv), d(y.modules_800g_equiv))},
                      {"worst_case_hops", q(x.worst_case_hops, y.worst_case_hops)},
                      {"power", q(x.power_w, y.power_w)}};
}

ordered_json assumptions_json(const Options& o) {
  const Assumptions& a = o.a;
  return ordered_json{{"host_link_m", a.host_link_m},
                      {"copper_reach_m", a.copper_reach_m},
                      {"host_links_optical", a.host_link_m > a.copper_reach_m},
                      {"switch_links_optical", true},
                      {"packaging", packaging_name(a.packaging)},
                      {"lane_gbps", a.lane_gbps},
                      {"module_lanes", a.module_lanes},
                      {"switch_w", a.switch_w},
                      {"transceiver_w", ordered_json{{"100", a.xcvr_100g_w},
                                                     {"200", a.xcvr_200g_w},
                                                     {"400", a.xcvr_400g_w},
                                                     {"800", a.xcvr_800g_w},
                                                     {"1600", a.xcvr_1600g_w}}},
                      {"copper_end_w", a.copper_end_w},
                      {"not_counted", "NICs, servers, cooling/PUE, cables, patch panels"}};
}

}  // namespace

namespace {

// The two designs compared: GPU counts, planes, speeds, radix, tiers, oversubscription.
void add_design_options(CLI::App& app, Options& o) {
  app.add_option("--gpus", o.gpus, "GPU counts (one NIC each); several give a table")
      ->required()
      ->expected(1, -1)
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 40));
  app.add_option("--planes", o.mp.planes, "multi-plane: NIC ports = planes (1 to 64)")
      ->capture_default_str()
      ->check(CLI::Range(1u, 64u));
  app.add_option("--link-gbps", o.mp.link_gbps, "multi-plane: port and link speed (Gb/s)")
      ->capture_default_str()
      ->check(CLI::Range(1u, 100000u));
  app.add_option("--radix", o.mp.radix, "multi-plane: switch ports at --link-gbps (4 to 65536)")
      ->capture_default_str()
      ->check(CLI::Range(4u, 65536u));
  app.add_option("--max-tiers", o.mp.max_tiers,
                 "multi-plane: refuse sizes that need more tiers than this (1 to 8)")
      ->capture_default_str()
      ->check(CLI::Range(1u, 8u));
  app.add_option("--conventional-gbps", o.cv.link_gbps, "conventional: NIC and link speed (Gb/s)")
      ->capture_default_str()
      ->check(CLI::Range(1u, 100000u));
  app.add_option("--conventional-radix", o.cv.radix, "conventional: switch ports (4 to 65536)")
      ->capture_default_str()
      ->check(CLI::Range(4u, 65536u));
  app.add_option("--conventional-max-tiers", o.cv.max_tiers, "conventional: most tiers (1 to 8)")
      ->capture_default_str()
      ->check(CLI::Range(1u, 8u));
  app.add_option("--oversub", o.oversub,
                 "leaf oversubscription (host ports : uplinks), both designs (1 to 1000)")
      ->capture_default_str()
      ->check(CLI::Range(1.0, 1000.0));
  app.add_flag("--min-switches", o.min_switches,
               "partial pods with the fewest switches (uneven parallel links) instead of equal "
               "parallel links to every switch");
}

// Optics, copper and power assumptions.
void add_assumption_options(CLI::App& app, Options& o) {
  app.add_option("--host-link-m", o.a.host_link_m, "NIC-leaf cable length (m)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1e6));
  app.add_option("--copper-reach-m", o.a.copper_reach_m,
                 "host links up to this length are passive copper (no transceivers)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1e6));
  app.add_option("--packaging", o.packaging,
                 "optics: 'breakout' (lanes packed into modules per device) or 'per-port' (one "
                 "pluggable per link end)")
      ->check(CLI::IsMember({"breakout", "per-port"}))
      ->capture_default_str();
  app.add_option("--lane-gbps", o.a.lane_gbps, "SerDes/optical lane speed")
      ->capture_default_str()
      ->check(CLI::Range(1.0, 100000.0));
  app.add_option("--module-lanes", o.a.module_lanes, "lanes per optical module")
      ->capture_default_str()
      ->check(CLI::Range(1u, 64u));
  app.add_option("--switch-w", o.a.switch_w, "W per switch without optics")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1e6));
  app.add_option("--xcvr-100g-w", o.a.xcvr_100g_w, "W per 100G transceiver")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1e6));
  app.add_option("--xcvr-200g-w", o.a.xcvr_200g_w, "W per 200G transceiver")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1e6));
  app.add_option("--xcvr-400g-w", o.a.xcvr_400g_w, "W per 400G transceiver")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1e6));
  app.add_option("--xcvr-800g-w", o.a.xcvr_800g_w, "W per 800G transceiver")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1e6));
  app.add_option("--xcvr-1600g-w", o.a.xcvr_1600g_w, "W per 1.6T transceiver")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1e6));
  app.add_option("--copper-end-w", o.a.copper_end_w, "W per end of a copper host link")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1e6));
}

// Bad parameters (anything but a size that does not fit): a message, and the exit status;
// nullopt when both designs are sound.
std::optional<int> check_designs(const Options& o) {
  for (const DesignParams* p : {&o.mp, &o.cv}) {
    DesignParams probe = *p;
    probe.gpus = 1;
    if (auto problem = check(probe, o.a)) {
      return tools::fail_setup(
          "mrc-topo", fmt::format("{} design: {}", p == &o.mp ? "multi-plane" : "conventional",
                                  problem->message));
    }
  }
  return std::nullopt;
}

using Outcomes = std::vector<std::pair<Outcome, Outcome>>;

// Both designs at every size; a size refused for anything but needing more tiers stops it
// (a message, and the exit status).
std::optional<int> evaluate_sizes(const Options& o, Outcomes& out, bool& all_fit) {
  all_fit = true;
  for (uint64_t n : o.gpus) {
    DesignParams mp = o.mp, cv = o.cv;
    mp.gpus = cv.gpus = n;
    out.emplace_back(evaluate(mp, o.a), evaluate(cv, o.a));
    for (const Outcome* x : {&out.back().first, &out.back().second}) {
      if (x->problem && x->problem->code != Error::kTooBig) {
        return tools::fail_setup("mrc-topo", fmt::format("{} GPUs: {}", n, x->problem->message));
      }
      all_fit = all_fit && x->report.has_value();
    }
  }
  return std::nullopt;
}

void print_json(const Options& o, const Outcomes& out) {
  ordered_json sizes = ordered_json::array();
  for (size_t i = 0; i < out.size(); ++i)
    sizes.push_back(ordered_json{{"gpus", o.gpus[i]},
                                 {"multi_plane", outcome_json(out[i].first)},
                                 {"conventional", outcome_json(out[i].second)},
                                 {"ratios", ratios_json(out[i].first, out[i].second)}});
  const ordered_json doc{{"tool", "mrc-topo"},
                         {"schema", 1},
                         {"assumptions", assumptions_json(o)},
                         {"multi_plane", params_json(o.mp)},
                         {"conventional", params_json(o.cv)},
                         {"sizes", sizes}};
  fmt::print("{}\n", doc.dump(2));
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{
      "mrc-topo: switches, links, optics, hops and power of a multi-plane two-tier fabric "
      "against a conventional single-plane fat tree (closed form; see docs/topology.md)",
      "mrc-topo"};
  mrc::tools::set_exit_codes(app, "0 every size fits, 1 a size needs more tiers than allowed");
  add_design_options(app, o);
  add_assumption_options(app, o);
  app.add_flag("--json", o.json, "one JSON object instead of the tables");
  if (const int rc = mrc::tools::parse(app, argc, argv); rc >= 0) return rc;
  o.a.packaging =
      o.packaging == "per-port" ? OpticsPackaging::kPerPort : OpticsPackaging::kBreakout;
  for (DesignParams* p : {&o.mp, &o.cv}) {
    p->oversub = o.oversub;
    p->uniform_links = !o.min_switches;
  }

  if (const std::optional<int> rc = check_designs(o)) return *rc;
  Outcomes out;
  bool all_fit = true;
  if (const std::optional<int> rc = evaluate_sizes(o, out, all_fit)) return *rc;
  if (o.json) {
    print_json(o, out);
    return all_fit ? 0 : 1;
  }
  for (size_t i = 0; i < out.size(); ++i)
    print_block(o.gpus[i], o, out[i].first, out[i].second);
  if (out.size() > 1) print_summary(o, out);
  print_assumptions(o);
  return all_fit ? 0 : 1;
}
