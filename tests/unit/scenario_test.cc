// Scenario files (src/sim/scenario.h): parsing, units, --set overrides, every error path with
// its message; htsim .cm parsing and its errors; and the mrc-sim command line end to end
// (same seed twice -> identical summary.json apart from the "run" object).
#include "sim/scenario.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "sim/runner.h"
#include "sim/workloads.h"

namespace mrc::sim {
namespace {

// Expects `r` to fail with a message containing every one of `parts`.
template <typename T>
void expect_error(const SimResult<T>& r, std::initializer_list<std::string_view> parts) {
  ASSERT_FALSE(r) << "expected an error containing '" << *parts.begin() << "'";
  for (std::string_view p : parts)
    EXPECT_NE(r.error().message.find(p), std::string::npos)
        << "message: " << r.error().message << "\nmissing: " << p;
}

constexpr const char* kMinimal = R"(name = "m"
[topo]
hosts = 16
radix = 8
[workload]
kind = "permutation"
)";

// ---- units ---------------------------------------------------------------------------------

TEST(Scenario, units__durations_rates_sizes) {
  EXPECT_EQ(*parse_duration("1.5us"), ns(1500));
  EXPECT_EQ(*parse_duration("250ns"), ns(250));
  EXPECT_EQ(*parse_duration("2 ms"), ms(2));
  EXPECT_EQ(*parse_duration("1s"), kPicosPerSecond);
  EXPECT_EQ(*parse_duration("7ps"), 7u);
  EXPECT_EQ(*parse_duration(".5us"), ns(500));
  EXPECT_EQ(*parse_rate("400Gbps"), 400'000'000'000ull);
  EXPECT_EQ(*parse_rate("12.5gbps"), 12'500'000'000ull);
  EXPECT_EQ(*parse_rate("1Tbps"), 1'000'000'000'000ull);
  EXPECT_EQ(*parse_size("4MiB"), 4u << 20);
  EXPECT_EQ(*parse_size("4MB"), 4'000'000u);
  EXPECT_EQ(*parse_size("64KiB"), 64u << 10);
  EXPECT_EQ(*parse_size("100B"), 100u);
  expect_error(parse_duration("10"), {"with a unit", "ps, ns, us, ms, s", "\"10\""});
  expect_error(parse_duration("10 parsecs"), {"unknown unit \"parsecs\""});
  expect_error(parse_duration("1.2.3us"), {"expected a duration"});
  expect_error(parse_rate("fast"), {"expected a rate (a number and a unit)", "\"fast\""});
  expect_error(parse_size("-3MiB"), {"expected a size"});
  EXPECT_EQ(format_duration(ns(1500)), "1.5us");
  EXPECT_EQ(format_duration(kNever), "never");
  EXPECT_EQ(format_rate(400'000'000'000ull), "400Gbps");
  EXPECT_EQ(format_size(4u << 20), "4MiB");
}

TEST(Scenario, names__links_and_switches) {
  auto l = parse_link_name("p2/leaf3-spine7");
  ASSERT_TRUE(l);
  EXPECT_EQ(l->kind, LinkRef::kLeafSpine);
  EXPECT_EQ(l->plane, 2u);
  EXPECT_EQ(l->a, 3u);
  EXPECT_EQ(l->b, 7u);
  EXPECT_TRUE(parse_link_name("p0/leaf3->spine7")) << "the simulator's link_names() form";
  auto h = parse_link_name("p1/host5");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->kind, LinkRef::kHostLeaf);
  EXPECT_EQ(h->a, 5u);
  EXPECT_EQ(link_name(*l), "p2/leaf3-spine7");
  expect_error(parse_link_name("leaf3-spine7"), {"p0/leaf3-spine7"});
  expect_error(parse_link_name("p0/spine3-leaf7"), {"expected a link"});
  auto s = parse_switch_name("p1/spine4");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->kind, SwitchRef::kSpine);
  EXPECT_EQ(switch_name(*s), "p1/spine4");
  expect_error(parse_switch_name("p1/router4"), {"expected a switch"});
}

TEST(Scenario, names__mrc_fabric_forms_name_the_same_links_and_switches) {
  auto l = parse_link_name("p2-l3-s7");
  ASSERT_TRUE(l) << l.error().message;
  EXPECT_EQ(link_name(*l), "p2/leaf3-spine7");
  auto h = parse_link_name("h5-p1");
  ASSERT_TRUE(h) << h.error().message;
  EXPECT_EQ(h->kind, LinkRef::kHostLeaf);
  EXPECT_EQ(h->plane, 1u);
  EXPECT_EQ(h->a, 5u);
  auto sp = parse_switch_name("p1-s4");
  ASSERT_TRUE(sp) << sp.error().message;
  EXPECT_EQ(switch_name(*sp), "p1/spine4");
  auto lf = parse_switch_name("p0-l2");
  ASSERT_TRUE(lf) << lf.error().message;
  EXPECT_EQ(switch_name(*lf), "p0/leaf2");
  expect_error(parse_link_name("p0-l3"), {"expected a link", "p0-l3-s7"});
  expect_error(parse_switch_name("p0-l3-s7"), {"expected a switch"});
  expect_error(parse_link_name("p0-x3-s7"), {"expected a link"});
}

// ---- parsing -------------------------------------------------------------------------------

TEST(Scenario, default__parses_and_compares_three_transports) {
  auto sc = default_scenario();
  ASSERT_TRUE(sc) << sc.error().message;
  EXPECT_EQ(sc->name, "default");
  EXPECT_EQ(sc->source, "<default>");
  EXPECT_GE(sc->base.topo.hosts, 64u);
  EXPECT_GE(sc->base.topo.planes, 2u);
  ASSERT_EQ(sc->runs.size(), 4u);
  EXPECT_EQ(sc->runs[0].config.transport.kind, TransportKind::kMrc);
  EXPECT_EQ(sc->runs[1].config.transport.kind, TransportKind::kMrcOblivious);
  EXPECT_EQ(sc->runs[2].config.transport.kind, TransportKind::kRoce);
  EXPECT_TRUE(sc->runs[2].config.sw.pfc) << "roce_pfc: lossless";
  EXPECT_EQ(sc->runs[3].config.transport.kind, TransportKind::kRoce);
  EXPECT_FALSE(sc->runs[3].config.sw.pfc);
  EXPECT_FALSE(sc->runs[3].config.sw.trimming) << "RoCE fabrics drop, they do not trim";
  EXPECT_FALSE(sc->runs[2].config.sw.trimming);
  EXPECT_EQ(sc->runs[3].config.transport.path_mode, PathMode::kEcmp);
  EXPECT_TRUE(sc->runs[0].config.sw.trimming);
  ASSERT_EQ(sc->faults.size(), 1u);
  EXPECT_EQ(sc->faults[0].kind, FaultConfig::kLinkDown);
  EXPECT_EQ(sc->faults[0].link.kind, LinkRef::kLeafSpine);
  EXPECT_EQ(sc->workload.kind, WorkloadConfig::kPermutation);
  for (const TransportRun& r : sc->runs)
    EXPECT_EQ(r.config.seed, sc->seed);
}

TEST(Scenario, full__every_section) {
  auto sc = parse_scenario(R"(
name = "full"
description = "everything"
seed = 42
[topo]
hosts = 24
planes = 3
radix = 8
hosts_per_leaf = 4
spines = 4
link_rate = "400Gbps"
link_delay = "1us"
switch_latency = "300ns"
[switch]
queue = "256KiB"
ecn_kmin = 20000
ecn_kmax = "100KB"
ecn_pmax = 0.5
trimming = false
trim_threshold = "200KiB"
pfc = true
pfc_xoff = "128KiB"
pfc_xon = "64KiB"
[transport]
kinds = ["roce_pfc", "mrc"]
path_mode = "ecmp"
mtu = 2048
evs_per_plane = 4
cc = "dcqcn"
mpr = 16
timeout = 10
ack_every = 2
probe_interval = "50us"
ecn_cooldown = "8us"
routing_convergence = "2ms"
nscc_min_cwnd = "1KiB"
nscc_quick_adapt = false
[workload]
kind = "training"
size = "8MiB"
iterations = 4
compute = "1.5ms"
group = [0, 2, 4, 6]
[[fault]]
kind = "switch_reboot"
switch = "p1/spine0"
at = "100us"
duration = "1ms"
[[fault]]
kind = "gray_loss"
link = "p0/host3"
at = "0"
until = "2ms"
probability = 0.01
[[fault]]
kind = "flap"
link = "p2/leaf1-spine1"
at = "10us"
period = "100us"
count = 3
[[fault]]
kind = "degrade"
link = "p0/leaf0-spine1"
at = "1us"
rate = "25Gbps"
[run]
until = "50ms"
sample_interval = "20us"
)",
                           "full.toml");
  ASSERT_TRUE(sc) << sc.error().message;
  const SimConfig& b = sc->base;
  EXPECT_EQ(sc->seed, 42u);
  EXPECT_EQ(b.topo.hosts, 24u);
  EXPECT_EQ(b.topo.planes, 3u);
  EXPECT_EQ(b.topo.hosts_per_leaf, 4u);
  EXPECT_EQ(b.topo.spines, 4u);
  EXPECT_EQ(b.topo.link_bps, 400'000'000'000ull);
  EXPECT_EQ(b.topo.link_delay, us(1));
  EXPECT_EQ(b.topo.switch_latency, ns(300));
  EXPECT_EQ(b.sw.queue_bytes, 256u << 10);
  EXPECT_EQ(b.sw.ecn_kmin_bytes, 20000u);
  EXPECT_EQ(b.sw.ecn_kmax_bytes, 100000u);
  EXPECT_DOUBLE_EQ(b.sw.ecn_pmax, 0.5);
  EXPECT_FALSE(b.sw.trimming);
  EXPECT_TRUE(b.sw.pfc);
  EXPECT_EQ(b.sw.pfc_xon_bytes, 64u << 10);
  EXPECT_EQ(b.transport.path_mode, PathMode::kEcmp);
  EXPECT_EQ(b.transport.mtu, 2048u);
  EXPECT_EQ(b.transport.cc, CcAlgorithm::kDcqcn);
  EXPECT_EQ(b.transport.mpr, 16u);
  EXPECT_EQ(b.transport.timeout, 10u);
  EXPECT_EQ(b.transport.routing_convergence, ms(2));
  EXPECT_EQ(b.transport.nscc_min_cwnd, 1024u);
  EXPECT_FALSE(b.transport.nscc_quick_adapt);
  EXPECT_EQ(b.sample_interval, us(20));
  EXPECT_EQ(sc->until, ms(50));
  ASSERT_EQ(sc->runs.size(), 2u);
  EXPECT_EQ(sc->runs[0].name, "roce_pfc");
  EXPECT_TRUE(sc->runs[0].config.sw.pfc);
  EXPECT_EQ(sc->workload.kind, WorkloadConfig::kTraining);
  EXPECT_EQ(sc->workload.iterations, 4u);
  EXPECT_EQ(sc->workload.compute, ns(1500'000));
  EXPECT_EQ(sc->workload.group, (std::vector<HostId>{0, 2, 4, 6}));
  ASSERT_EQ(sc->faults.size(), 4u);
  EXPECT_EQ(sc->faults[0].kind, FaultConfig::kSwitchReboot);
  EXPECT_EQ(sc->faults[0].duration, ms(1));
  EXPECT_EQ(sc->faults[1].link.kind, LinkRef::kHostLeaf);
  EXPECT_DOUBLE_EQ(sc->faults[1].probability, 0.01);
  EXPECT_EQ(sc->faults[2].count, 3u);
  EXPECT_EQ(sc->faults[3].rate_bps, 25'000'000'000ull);
  EXPECT_EQ(sc->faults[3].until, kNever);
}

TEST(Scenario, name__defaults_to_the_file_stem) {
  auto sc = parse_scenario("[workload]\nkind = \"permutation\"\n", "dir/my-run.toml");
  ASSERT_TRUE(sc) << sc.error().message;
  EXPECT_EQ(sc->name, "my-run");
}

// ---- overrides -----------------------------------------------------------------------------

TEST(Scenario, overrides__any_key_by_dotted_path) {
  auto sc = default_scenario({"topo.hosts=256", "topo.radix=32", "transport.kinds=[\"mrc\"]",
                              "seed=9", "workload.size=1MiB", "fault.0.at=30us",
                              "switch.trimming=false", "run.until=never"});
  ASSERT_TRUE(sc) << sc.error().message;
  EXPECT_EQ(sc->base.topo.hosts, 256u);
  EXPECT_EQ(sc->base.topo.radix, 32u);
  ASSERT_EQ(sc->runs.size(), 1u);
  EXPECT_EQ(sc->runs[0].name, "mrc");
  EXPECT_EQ(sc->seed, 9u);
  EXPECT_EQ(sc->runs[0].config.seed, 9u);
  EXPECT_EQ(sc->workload.size, 1u << 20);
  EXPECT_EQ(sc->faults[0].at, us(30));
  EXPECT_FALSE(sc->base.sw.trimming);
  EXPECT_EQ(sc->until, kNever);
  auto nofault = default_scenario({"fault=[]"});
  ASSERT_TRUE(nofault) << nofault.error().message;
  EXPECT_TRUE(nofault->faults.empty()) << "fault=[] removes the default's failure";
  // Bare words in a list are strings; new tables are created on the way.
  auto sc2 =
      parse_scenario(kMinimal, "m.toml", {"transport.kinds=[mrc, roce_pfc]", "switch.pfc=true"});
  ASSERT_TRUE(sc2) << sc2.error().message;
  ASSERT_EQ(sc2->runs.size(), 2u);
  EXPECT_EQ(sc2->runs[1].name, "roce_pfc");
  EXPECT_TRUE(sc2->base.sw.pfc);
}

TEST(Scenario, overrides__errors_name_the_argument) {
  expect_error(default_scenario({"topo.hosts"}), {"--set topo.hosts", "expected key=value"});
  expect_error(default_scenario({"topo..hosts=3"}), {"empty component"});
  expect_error(
      default_scenario({"topo.hosts=abc"}),
      {"--set topo.hosts=abc", "key 'topo.hosts'", "expected an integer >= 2", "string \"abc\""});
  expect_error(default_scenario({"topo.hostz=3"}),
               {"--set topo.hostz=3", "unknown key 'topo.hostz'", "valid keys in [topo]", "hosts"});
  expect_error(default_scenario({"fault.5.at=1us"}), {"array of 1", "index 0..0", "'5'"});
  expect_error(default_scenario({"seed.x=1"}), {"'seed' is integer", "not a table"});
  expect_error(default_scenario({"transport.kinds=[mrc,foo]"}),
               {"unknown transport kind \"foo\"", "roce_pfc"});
}

// ---- errors --------------------------------------------------------------------------------

TEST(Scenario, errors__syntax_with_line_and_column) {
  expect_error(parse_scenario("name = \"x\"\n[topo\nhosts = 3\n", "bad.toml"),
               {"bad.toml:2:", "TOML syntax error"});
}

TEST(Scenario, errors__bad_type_with_file_line_and_key) {
  expect_error(
      parse_scenario(std::string(kMinimal) + "[run]\nuntil = 5\n", "s.toml"),
      {"s.toml:8:", "key 'run.until'", "expected a duration with a unit", "got integer 5"});
  expect_error(
      parse_scenario("[topo]\nhosts = \"many\"\n[workload]\nkind = \"permutation\"\n", "s.toml"),
      {"s.toml:2:", "key 'topo.hosts'", "expected an integer", "string \"many\""});
  expect_error(parse_scenario(std::string(kMinimal) + "[switch]\ntrimming = \"yes\"\n", "s.toml"),
               {"s.toml:8:", "switch.trimming", "true or false"});
  expect_error(parse_scenario(std::string(kMinimal) + "[switch]\necn_pmax = 2\n", "s.toml"),
               {"switch.ecn_pmax", "a number in [0, 1]"});
  expect_error(parse_scenario(std::string(kMinimal) + "[transport]\ncc = \"bbr\"\n", "s.toml"),
               {"transport.cc", "one of \"default\", \"nscc\", \"dcqcn\""});
  expect_error(parse_scenario(std::string(kMinimal) + "[transport]\nkinds = []\n", "s.toml"),
               {"transport.kinds", "non-empty array"});
  expect_error(parse_scenario(std::string(kMinimal) + "[topo2]\nx = 1\n", "s.toml"),
               {"s.toml:7:", "unknown key 'topo2'", "valid keys: ", "workload"});
  expect_error(parse_scenario("topo = 3\n[workload]\nkind = \"permutation\"\n", "s.toml"),
               {"s.toml:1:", "key 'topo'", "expected a table"});
  expect_error(parse_scenario(std::string(kMinimal) + "[topo.extra]\n", "s.toml"),
               {"unknown key 'topo.extra'"});
  expect_error(parse_scenario("[topo]\nhosts = 3\nhosts = 4\n", "s.toml"),
               {"s.toml:3:", "TOML syntax error"});  // duplicate key
  expect_error(parse_scenario("name = \"a b\"\n[workload]\nkind = \"permutation\"\n", "s.toml"),
               {"key 'name'", "letters, digits"});
  expect_error(parse_scenario(std::string(kMinimal) + "[run]\nuntil = \"1 fortnight\"\n", "s.toml"),
               {"s.toml:8:", "unknown unit \"fortnight\""});
}

TEST(Scenario, errors__missing_keys) {
  expect_error(parse_scenario("[topo]\nhosts = 16\n", "s.toml"),
               {"s.toml", "missing required key 'workload'"});
  expect_error(parse_scenario("[workload]\nsize = \"1MiB\"\n", "s.toml"),
               {"s.toml:1:", "[workload] is missing required key 'kind'", "permutation"});
  expect_error(
      parse_scenario(std::string(kMinimal) + "[[fault]]\nkind = \"link_down\"\nat = 0\n", "s.toml"),
      {"s.toml:7:", "[fault[0]] is missing required key 'link'", "p0/leaf3-spine7"});
  expect_error(parse_scenario(
                   std::string(kMinimal) + "[[fault]]\nkind = \"link_down\"\nlink = \"p0/host1\"\n",
                   "s.toml"),
               {"missing required key 'at'"});
  expect_error(parse_scenario(std::string(kMinimal) +
                                  "[[fault]]\nkind = \"switch_reboot\"\nswitch = \"p0/spine1\"\n"
                                  "at = \"1us\"\n",
                              "s.toml"),
               {"missing required key 'duration'"});
  expect_error(parse_scenario("[workload]\nkind = \"htsim\"\n", "s.toml"),
               {"missing required key 'file'"});
}

TEST(Scenario, errors__values_that_do_not_fit) {
  expect_error(parse_scenario(std::string(kMinimal) +
                                  "[[fault]]\nkind = \"link_down\"\nswitch = \"p0/spine1\"\n"
                                  "at = 0\n",
                              "s.toml"),
               {"key 'fault[0].switch'", "names a link, not a switch"});
  expect_error(parse_scenario(std::string(kMinimal) +
                                  "[[fault]]\nkind = \"link_down\"\nlink = \"spine1\"\nat = 0\n",
                              "s.toml"),
               {"s.toml:9:", "key 'fault[0].link'", "p0/leaf3-spine7"});
  expect_error(parse_scenario(std::string(kMinimal) +
                                  "[[fault]]\nkind = \"blackhole\"\nlink = \"p0/host1\"\n"
                                  "at = \"5us\"\nuntil = \"2us\"\n",
                              "s.toml"),
               {"fault[0].until", "later than 'at'"});
  expect_error(parse_scenario(std::string(kMinimal) +
                                  "[[fault]]\nkind = \"link_down\"\nlink = \"p0/host1\"\n"
                                  "at = 0\nuntil = \"2us\"\n",
                              "s.toml"),
               {"fault[0].until", "does not apply to a link_down fault"});
  expect_error(parse_scenario(std::string(kMinimal) + "[[fault]]\nkind = \"melt\"\n", "s.toml"),
               {"fault[0].kind", "link_down"});
  expect_error(
      parse_scenario("[workload]\nkind = \"permutation\"\nsenders = 3\n", "s.toml"),
      {"s.toml:3:", "workload.senders", "does not apply to workload kind 'permutation'", "incast"});
  expect_error(parse_scenario("[workload]\nkind = \"allreduce\"\ngroup = [1, \"x\"]\n", "s.toml"),
               {"workload.group", "host numbers"});
  expect_error(parse_scenario("[topo]\nhosts = 1000\nradix = 16\n[workload]\nkind = "
                              "\"permutation\"\n",
                              "s.toml"),
               {"1000 hosts need 125 leaves", "radix >= 46"});
  expect_error(parse_scenario("[topo]\nradix = 8\nspines = 3\n[workload]\nkind = "
                              "\"permutation\"\n",
                              "s.toml"),
               {"spines (3) must divide"});
  expect_error(parse_scenario("[topo]\nhosts = 24\nradix = 8\nhosts_per_leaf = 4\nspines = 2\n"
                              "[workload]\nkind = \"permutation\"\n",
                              "s.toml"),
               {"6 leaves of 4 hosts", "6 x 2 ports", "raise hosts_per_leaf or spines"});
  expect_error(parse_scenario("[transport]\nmtu = 2048\nnscc_min_cwnd = 4096\n", "s.toml"),
               {"s.toml:3:", "transport.nscc_min_cwnd", "at most transport.mtu (2048)"});
  expect_error(load_scenario("/nonexistent/x.toml"), {"cannot open"});
}

TEST(Scenario, allreduce_algorithm__ring_by_default_ring2d_with_row) {
  auto flat = parse_scenario("[workload]\nkind = \"allreduce\"\n", "s.toml");
  ASSERT_TRUE(flat) << flat.error().message;
  EXPECT_EQ(flat->workload.algorithm, WorkloadConfig::kRing);
  EXPECT_EQ(flat->workload.row, 0u);
  auto sc = parse_scenario(
      "[topo]\nhosts = 16\nradix = 8\n[workload]\nkind = \"training\"\nalgorithm = "
      "\"ring2d\"\nrow = 4\ngroup = [0, 4, 8, 12, 1, 5, 9, 13]\n",
      "s.toml");
  ASSERT_TRUE(sc) << sc.error().message;
  EXPECT_EQ(sc->workload.algorithm, WorkloadConfig::kRing2d);
  EXPECT_EQ(sc->workload.row, 4u);
  EXPECT_STREQ(allreduce_algorithm_name(sc->workload.algorithm), "ring2d");
  // Overrides select it too, and the runner builds a two-level AllReduce: 8 ranks in rows of
  // 4 run 2 x 3 + 2 x 1 = 8 steps per rank.
  auto set = parse_scenario("[topo]\nhosts = 16\nradix = 8\n[workload]\nkind = \"allreduce\"\n",
                            "s.toml", {"workload.algorithm=ring2d", "workload.row=8"});
  ASSERT_TRUE(set) << set.error().message;
  EXPECT_EQ(set->workload.row, 8u);
  auto wl = make_workload(sc->workload, 16, 1);
  ASSERT_TRUE(wl) << wl.error().message;
  EXPECT_EQ(static_cast<TrainingLoop&>(**wl).name(), "training");
  sc->workload.kind = WorkloadConfig::kAllReduce;
  auto ar2 = make_workload(sc->workload, 16, 1);
  ASSERT_TRUE(ar2) << ar2.error().message;
  EXPECT_EQ(static_cast<RingAllReduce&>(**ar2).steps(), 8u);
  EXPECT_EQ(static_cast<RingAllReduce&>(**ar2).stages(), 3u);
}

TEST(Scenario, allreduce_algorithm__errors_name_the_key) {
  const std::string ar = "[topo]\nhosts = 16\nradix = 8\n[workload]\nkind = \"allreduce\"\n";
  expect_error(parse_scenario(ar + "algorithm = \"tree\"\n", "s.toml"),
               {"s.toml:6:", "key 'workload.algorithm'", "\"ring\", \"ring2d\"", "\"tree\""});
  expect_error(parse_scenario(ar + "algorithm = \"ring2d\"\n", "s.toml"),
               {"s.toml:4:", "[workload] is missing required key 'row'", "ranks per row"});
  expect_error(parse_scenario(ar + "row = 4\n", "s.toml"),
               {"s.toml:6:", "key 'workload.row'", "applies only to algorithm = \"ring2d\""});
  expect_error(parse_scenario(ar + "algorithm = \"ring2d\"\nrow = 1\n", "s.toml"),
               {"s.toml:7:", "key 'workload.row'", "an integer >= 2", "integer 1"});
  expect_error(parse_scenario(ar + "algorithm = \"ring2d\"\nrow = \"4\"\n", "s.toml"),
               {"key 'workload.row'", "an integer >= 2"});
  expect_error(parse_scenario(ar + "ranks = 12\nalgorithm = \"ring2d\"\nrow = 8\n", "s.toml"),
               {"s.toml:8:", "key 'workload.row'", "8 ranks per row do not divide the 12 ranks",
                "workload.ranks"});
  expect_error(parse_scenario(ar + "group = [0, 1, 2, 3, 4, 5]\nalgorithm = \"ring2d\"\nrow = 4\n",
                              "s.toml"),
               {"key 'workload.row'", "do not divide the 6 ranks", "workload.group"});
  expect_error(parse_scenario(ar, "s.toml",
                              {"workload.algorithm=ring2d", "workload.ranks=10", "workload.row=4"}),
               {"--set workload.row=4", "do not divide the 10 ranks"});
  expect_error(
      parse_scenario("[workload]\nkind = \"permutation\"\nalgorithm = \"ring2d\"\n", "s.toml"),
      {"s.toml:3:", "workload.algorithm", "does not apply to workload kind 'permutation'",
       "allreduce, training"});
  expect_error(parse_scenario("[workload]\nkind = \"all_to_all\"\nrow = 4\n", "s.toml"),
               {"workload.row", "does not apply to workload kind 'all_to_all'"});
  // Every host of the fabric (no ranks, no group): known when the fabric is built.
  auto sc = parse_scenario(ar + "algorithm = \"ring2d\"\nrow = 5\n", "s.toml");
  ASSERT_TRUE(sc) << sc.error().message;
  expect_error(make_workload(sc->workload, 16, 1),
               {"workload.row: 5 ranks per row do not divide the 16 ranks of the group"});
}

TEST(Scenario, htsim_file__is_resolved_relative_to_the_scenario) {
  auto sc = parse_scenario("[workload]\nkind = \"htsim\"\nfile = \"m.cm\"\n", "/a/b/s.toml");
  ASSERT_TRUE(sc) << sc.error().message;
  EXPECT_EQ(sc->workload.file, "/a/b/m.cm");
}

// ---- htsim .cm -----------------------------------------------------------------------------

TEST(HtsimCm, parse_htsim_cm__flows_triggers_failures) {
  auto m = parse_htsim_cm(R"(# a comment
Nodes 16
Connections 3
Triggers 1
Failures 2

0->5 start 0 size 4096 id 1 send_done_trigger 1
5->9 id 2 trigger 1 size 1024 prio 3 addon
9->0 start 12.25 size 100
trigger id 1 oneshot
failure switch_type TOR switch_id 1 link_id 2
failure switch_type CORE switch_id 3 plane 1 at 50
)",
                          "m.cm");
  ASSERT_TRUE(m) << m.error().message;
  EXPECT_EQ(m->nodes, 16u);
  ASSERT_EQ(m->connections.size(), 3u);
  EXPECT_EQ(m->connections[0].dst, 5u);
  EXPECT_EQ(m->connections[0].bytes, 4096u);
  EXPECT_EQ(*m->connections[0].start, 0u);
  EXPECT_EQ(m->connections[0].send_done_trigger, 1u);
  EXPECT_FALSE(m->connections[1].start);
  EXPECT_EQ(m->connections[1].trigger, 1u);
  EXPECT_EQ(*m->connections[2].start, ns(12250));
  EXPECT_EQ(m->connections[2].line, 9u);
  ASSERT_EQ(m->triggers.size(), 1u);
  EXPECT_EQ(m->triggers[0].type, HtsimTrigger::kOneshot);
  ASSERT_EQ(m->failures.size(), 2u);
  EXPECT_EQ(*m->failures[0].link_id, 2u);
  EXPECT_FALSE(m->failures[1].link_id);
  EXPECT_EQ(m->failures[1].plane, 1u);
  EXPECT_EQ(m->failures[1].at, us(50));
}

TEST(HtsimCm, parse_htsim_cm__errors_name_the_line_and_what_was_expected) {
  auto err = [](const std::string& body, std::initializer_list<std::string_view> parts) {
    expect_error(parse_htsim_cm(body, "e.cm"), parts);
  };
  err("Connections 1\n0->1 start 0 size 10\n", {"e.cm:2:", "before the 'Nodes N' header"});
  err("Nodes 4\n0->1 start 0 size 10\n", {"missing 'Connections C' header"});
  err("Nodes 4\nConnections 2\n0->1 start 0 size 10\n",
      {"'Connections 2'", "has 1 connection lines"});
  err("Nodes 4\nConnections 1\n0->9 start 0 size 10\n", {"e.cm:3:", "node out of range", "0..3"});
  err("Nodes 4\nConnections 1\n2->2 start 0 size 10\n", {"e.cm:3:", "the same node 2"});
  err("Nodes 4\nConnections 1\n0->x start 0 size 10\n", {"e.cm:3:", "'<src>-><dst>'"});
  err("Nodes 4\nConnections 1\n0->1 start 0\n", {"e.cm:3:", "without 'size <bytes>'"});
  err("Nodes 4\nConnections 1\n0->1 size 10\n", {"neither 'start <us>' nor 'trigger <id>'"});
  err("Nodes 4\nConnections 1\n0->1 start abc size 10\n",
      {"e.cm:3:", "start time in microseconds", "'abc'"});
  err("Nodes 4\nConnections 1\n0->1 start 0 size\n", {"e.cm:3:", "expected a value after 'size'"});
  err("Nodes 4\nConnections 1\n0->1 start 0 size -5\n", {"a size in bytes", "'-5'"});
  err("Nodes 4\nConnections 1\n0->1 start 0 size 10 colour blue\n",
      {"e.cm:3:", "unknown connection field 'colour'"});
  err("Nodes 4\nConnections 1\nTriggers 1\n0->1 start 0 size 10 trigger 1\ntrigger id 1 oneshot\n",
      {"both 'start' and 'trigger'"});
  err("Nodes 4\nConnections 2\n0->1 id 3 start 0 size 10\n1->2 id 3 start 0 size 10\n",
      {"e.cm:4:", "duplicate flow id 3", "line 3"});
  err("Nodes 4\nConnections 1\n0->1 start 0 size 10 send_done_trigger 7\n",
      {"e.cm:3:", "trigger 7 is referenced but never defined"});
  err("Nodes 4\nConnections 0\nTriggers 1\ntrigger id 2\n", {"e.cm:4:", "has no type"});
  err("Nodes 4\nConnections 0\nTriggers 1\ntrigger oneshot\n", {"without 'id <n>'"});
  err("Nodes 4\nConnections 0\nTriggers 1\ntrigger id 2 barrier\n", {"needs 'count <n>'"});
  err("Nodes 4\nConnections 0\nTriggers 2\ntrigger id 2 oneshot\ntrigger id 2 multishot\n",
      {"e.cm:5:", "defined twice", "line 4"});
  err("Nodes 4\nConnections 0\ntrigger id 2 oneshot\n", {"'Triggers 0' (header absent)"});
  err("Nodes 4\nConnections 0\nFailures 1\nfailure switch_type SPINE switch_id 1\n",
      {"e.cm:4:", "unknown switch_type 'SPINE'", "TOR, AGG or CORE"});
  err("Nodes 4\nConnections 0\nFailures 1\nfailure switch_type TOR\n", {"without 'switch_id <n>'"});
  err("Nodes 4\nConnections 0\nFailures 1\nfailure switch_id 1\n", {"without 'switch_type"});
  err("Nodes 4\nConnections 0\nbogus 3\n", {"e.cm:3:", "got 'bogus'"});
  err("Nodes 4 5\nConnections 0\n", {"e.cm:1:", "one integer"});
  err("Nodes 4\nNodes 5\n", {"e.cm:2:", "duplicate 'Nodes'"});
  err("Nodes 4\nConnections 1\n0->1 start 0 size 10\nTriggers 0\n",
      {"e.cm:4:", "after the first connection"});
  expect_error(load_htsim_cm("/nonexistent.cm"), {"/nonexistent.cm", "cannot open"});
}

// ---- the command line ------------------------------------------------------------------------

std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The mrc-sim tests skip in a tree configured without the tools (-DMRC_BUILD_TOOLS=OFF, e.g.
// the CI's clang tree); where the tools are built, a missing mrc-sim is a failure.
#define SKIP_WITHOUT_TOOLS() \
  if (!MRC_TOOLS_BUILT) GTEST_SKIP() << "built without the tools (-DMRC_BUILD_TOOLS=OFF)"

TEST(MrcSimCli, same_seed_twice__identical_summary_and_all_files) {
  SKIP_WITHOUT_TOOLS();
  const std::filesystem::path bin = std::filesystem::path(MRC_BINARY_DIR) / "bin" / "mrc-sim";
  if (!std::filesystem::exists(bin))
    FAIL() << "build mrc-sim first (the tools are part of the default build): " << bin;
  const auto dir =
      std::filesystem::temp_directory_path() / ("mrc_sim_cli_test_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  {
    std::ofstream f(dir / "tiny.toml");
    f << R"(name = "tiny"
[topo]
hosts = 16
radix = 8
[transport]
kinds = ["mrc", "roce"]
routing_convergence = "200us"
[workload]
kind = "permutation"
size = "256KiB"
[[fault]]
kind = "link_down"
link = "p0/leaf0-spine1"
at = "5us"
[run]
until = "50ms"
)";
  }
  const std::filesystem::path cm = dir / "chain.cm";
  {
    std::ofstream f(cm);
    f << "Nodes 8\nConnections 2\nTriggers 1\n0->7 id 1 start 0 size 100000 send_done_trigger 1\n"
         "7->3 id 2 trigger 1 size 100000\ntrigger id 1 oneshot\n";
  }
  auto run = [&](const std::string& out, const std::string& extra) {
    const std::string cmd = bin.string() + " " + extra + " --quiet --seed 3 --out " +
                            (dir / out).string() + " > " + (dir / (out + ".log")).string() +
                            " 2>&1";
    return std::system(cmd.c_str());
  };
  ASSERT_EQ(run("a", (dir / "tiny.toml").string()), 0) << slurp(dir / "a.log");
  ASSERT_EQ(run("b", (dir / "tiny.toml").string()), 0) << slurp(dir / "b.log");
  for (const char* f : {"summary.json", "flows.csv", "links.csv", "ev_events.jsonl"}) {
    EXPECT_TRUE(std::filesystem::exists(dir / "a" / f)) << f;
  }
  auto a = nlohmann::json::parse(slurp(dir / "a" / "summary.json"));
  auto b = nlohmann::json::parse(slurp(dir / "b" / "summary.json"));
  ASSERT_TRUE(a.contains("run"));
  EXPECT_TRUE(a["run"].contains("wall_seconds"));
  EXPECT_TRUE(a["run"].contains("peak_rss_bytes"));
  a.erase("run");
  b.erase("run");
  EXPECT_EQ(a, b) << "same scenario and seed, same summary";
  EXPECT_EQ(slurp(dir / "a" / "flows.csv"), slurp(dir / "b" / "flows.csv"));
  EXPECT_EQ(a["seed"], 3);
  EXPECT_EQ(a["scenario"]["name"], "tiny");
  ASSERT_EQ(a["transports"].size(), 2u);
  EXPECT_EQ(a["transports"][0]["name"], "mrc");
  EXPECT_EQ(a["transports"][0]["flows"]["count"], 16);
  EXPECT_TRUE(a["transports"][0]["fct_us"].contains("p99"));
  EXPECT_TRUE(a["transports"][0]["counters"].contains("qp_errors"));
  // flows.csv: a header and one row per flow per transport.
  std::istringstream rows(slurp(dir / "a" / "flows.csv"));
  std::string line;
  std::getline(rows, line);
  EXPECT_EQ(line.rfind("flow_id,transport,src,dst,size_bytes,start_ns,end_ns,fct_ns,"
                       "ideal_fct_ns,slowdown,retx_pkts,paths_used",
                       0),
            0u);
  int n = 0;
  while (std::getline(rows, line))
    ++n;
  EXPECT_EQ(n, 32);

  // An htsim matrix, and a bad scenario (exit 2, message on stderr).
  ASSERT_EQ(run("h", "--htsim " + cm.string()), 0) << slurp(dir / "h.log");
  auto h = nlohmann::json::parse(slurp(dir / "h" / "summary.json"));
  EXPECT_EQ(h["transports"][0]["flows"]["completed"], 2);
  EXPECT_EQ(run("bad", "--set topo.hostz=3"), 2 << 8);
  EXPECT_NE(slurp(dir / "bad.log").find("unknown key 'topo.hostz'"), std::string::npos);
  std::filesystem::remove_all(dir);
}

// ---- fat trees -------------------------------------------------------------------------------

TEST(Scenario, names__fat_tree_links_and_switches) {
  auto la = parse_link_name("pod1/leaf0-agg2");
  ASSERT_TRUE(la);
  EXPECT_EQ(la->kind, LinkRef::kLeafAgg);
  EXPECT_EQ(la->pod, 1u);
  EXPECT_EQ(la->a, 0u);
  EXPECT_EQ(la->b, 2u);
  EXPECT_EQ(link_name(*la), "pod1/leaf0-agg2");
  auto ac = parse_link_name("pod3/agg1->core5");
  ASSERT_TRUE(ac);
  EXPECT_EQ(ac->kind, LinkRef::kAggCore);
  EXPECT_EQ(link_name(*ac), "pod3/agg1-core5");
  auto h = parse_link_name("host7");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->kind, LinkRef::kHostLeaf);
  EXPECT_EQ(h->a, 7u);
  expect_error(parse_link_name("pod1/agg2-leaf0"), {"pod1/leaf0-agg2"});
  expect_error(parse_link_name("pod1/leaf0-core2"), {"expected a link"});
  auto core = parse_switch_name("core9");
  ASSERT_TRUE(core);
  EXPECT_EQ(core->kind, SwitchRef::kCore);
  EXPECT_EQ(switch_name(*core), "core9");
  auto agg = parse_switch_name("pod2/agg3");
  ASSERT_TRUE(agg);
  EXPECT_EQ(agg->kind, SwitchRef::kAgg);
  EXPECT_EQ(switch_name(*agg), "pod2/agg3");
  EXPECT_EQ(switch_name(*parse_switch_name("pod2/leaf1")), "pod2/leaf1");
  expect_error(parse_switch_name("pod2/spine1"), {"core9"});
}

TEST(Scenario, names__four_tier_fat_tree_links_and_switches) {
  auto as = parse_link_name("pod3/agg1-spine7");
  ASSERT_TRUE(as);
  EXPECT_EQ(as->kind, LinkRef::kAggSpine);
  EXPECT_EQ(as->pod, 3u);
  EXPECT_EQ(as->a, 1u);
  EXPECT_EQ(as->b, 7u);
  EXPECT_EQ(link_name(*as), "pod3/agg1-spine7");
  auto sc = parse_link_name("spine6->core5");
  ASSERT_TRUE(sc);
  EXPECT_EQ(sc->kind, LinkRef::kSpineCore);
  EXPECT_EQ(sc->a, 6u);
  EXPECT_EQ(sc->b, 5u);
  EXPECT_EQ(link_name(*sc), "spine6-core5");
  auto sp = parse_switch_name("spine6");
  ASSERT_TRUE(sp);
  EXPECT_EQ(sp->kind, SwitchRef::kFtSpine);
  EXPECT_EQ(switch_name(*sp), "spine6");
  expect_error(parse_link_name("core5-spine6"), {"spine9-core37"});
}

TEST(Scenario, fat_tree__parses_and_checks_the_shape) {
  auto sc = parse_scenario(
      "[topo]\nkind = \"fat_tree\"\nhosts = 96\nradix = 8\n"
      "[workload]\nkind = \"permutation\"\n"
      "[[fault]]\nkind = \"switch_reboot\"\nswitch = \"core3\"\n"
      "at = \"1us\"\nduration = \"5us\"\n",
      "f.toml");
  ASSERT_TRUE(sc) << sc.error().message;
  EXPECT_EQ(sc->base.topo.kind, TopologyKind::kFatTree);
  EXPECT_EQ(sc->base.topo.tiers, 3u);
  EXPECT_EQ(sc->base.topo.planes, 1u) << "a fat tree is single-plane by default";
  EXPECT_EQ(sc->faults[0].sw.kind, SwitchRef::kCore);
  const std::string ft = "[topo]\nkind = \"fat_tree\"\n";
  const std::string wl = "[workload]\nkind = \"permutation\"\n";
  expect_error(parse_scenario(ft + "hosts = 200\nradix = 8\n" + wl, "f.toml"),
               {"200 hosts do not fit", "k^3/4 = 128", "raise radix to >= 10"});
  expect_error(parse_scenario(ft + "radix = 7\n" + wl, "f.toml"), {"even radix"});
  auto four = parse_scenario(ft + "tiers = 4\nhosts = 32\nradix = 4\n" + wl +
                                 "[[fault]]\nkind = \"link_down\"\nlink = \"spine6-core5\"\n"
                                 "at = \"1us\"\n",
                             "f.toml");
  ASSERT_TRUE(four) << four.error().message;
  EXPECT_EQ(four->base.topo.tiers, 4u);
  EXPECT_EQ(four->faults[0].link.kind, LinkRef::kSpineCore);
  expect_error(parse_scenario(ft + "tiers = 4\nhosts = 33\nradix = 4\n" + wl, "f.toml"),
               {"33 hosts do not fit a four-tier", "k^4/8 = 32", "raise radix to >= 6"});
  expect_error(parse_scenario(ft + "tiers = 5\n" + wl, "f.toml"), {"f.toml:3:", "topo.tiers"});
  expect_error(parse_scenario(ft + "planes = 2\n" + wl, "f.toml"),
               {"topo.planes", "planes must be 1"});
  expect_error(parse_scenario(ft + "spines = 4\n" + wl, "f.toml"),
               {"topo.spines", "does not apply to a fat tree"});
  expect_error(parse_scenario("[topo]\ntiers = 3\n" + wl, "f.toml"),
               {"topo.tiers", "only to kind = \"fat_tree\""});
  expect_error(parse_scenario("[topo]\nkind = \"torus\"\n" + wl, "f.toml"),
               {"topo.kind", "\"clos2\", \"fat_tree\""});
}

TEST(Scenario, fat_tree__committed_scenario_parses) {
  auto sc = load_scenario(std::string(MRC_SOURCE_DIR) + "/scenarios/fat_tree_800g.toml");
  ASSERT_TRUE(sc) << sc.error().message;
  EXPECT_EQ(sc->base.topo.kind, TopologyKind::kFatTree);
  EXPECT_EQ(sc->base.topo.link_bps, 800'000'000'000ull);
  EXPECT_EQ(sc->faults[0].link.kind, LinkRef::kAggCore);
}

// Every scenario the repository ships (scenarios/, with claims/, paper/, bench/) parses: a key
// renamed in the parser cannot leave a committed file behind.
TEST(Scenario, load_scenario__every_committed_scenario_parses) {
  size_t n = 0;
  for (const auto& e :
       std::filesystem::recursive_directory_iterator(std::string(MRC_SOURCE_DIR) + "/scenarios")) {
    if (e.path().extension() != ".toml") continue;
    auto sc = load_scenario(e.path().string());
    EXPECT_TRUE(sc) << e.path() << ": " << (sc ? "" : sc.error().message);
    ++n;
  }
  EXPECT_GE(n, 20u);
}

TEST(Scenario, fat_tree__committed_four_tier_scenario_parses) {
  auto sc = load_scenario(std::string(MRC_SOURCE_DIR) + "/scenarios/fat_tree_4tier_800g.toml");
  ASSERT_TRUE(sc) << sc.error().message;
  EXPECT_EQ(sc->base.topo.tiers, 4u);
  EXPECT_EQ(sc->base.topo.hosts, 512u);
  EXPECT_EQ(sc->faults[0].link.kind, LinkRef::kSpineCore);
}

TEST(MrcSimCli, fat_tree__runs_twice_identically_and_names_its_links) {
  SKIP_WITHOUT_TOOLS();
  const std::filesystem::path bin = std::filesystem::path(MRC_BINARY_DIR) / "bin" / "mrc-sim";
  if (!std::filesystem::exists(bin)) FAIL() << "build mrc-sim first: " << bin;
  const auto dir =
      std::filesystem::temp_directory_path() / ("mrc_sim_ft_test_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  {
    std::ofstream f(dir / "ft.toml");
    f << R"(name = "ft"
[topo]
kind = "fat_tree"
hosts = 16
radix = 4
[transport]
kinds = ["mrc", "roce"]
routing_convergence = "100us"
[workload]
kind = "permutation"
size = "256KiB"
[[fault]]
kind = "link_down"
link = "pod0/agg1-core2"
at = "3us"
[run]
until = "50ms"
sample_interval = "2us"
)";
    std::ofstream g(dir / "bad.toml");
    g << "[topo]\nkind = \"fat_tree\"\nhosts = 16\nradix = 4\n[workload]\nkind = \"permutation\"\n"
         "[[fault]]\nkind = \"link_down\"\nlink = \"pod0/agg1-core0\"\nat = 0\n";
  }
  auto run = [&](const std::string& out, const std::string& toml) {
    const std::string cmd = bin.string() + " " + (dir / toml).string() + " --quiet --out " +
                            (dir / out).string() + " > " + (dir / (out + ".log")).string() +
                            " 2>&1";
    return std::system(cmd.c_str());
  };
  ASSERT_EQ(run("a", "ft.toml"), 0) << slurp(dir / "a.log");
  ASSERT_EQ(run("b", "ft.toml"), 0) << slurp(dir / "b.log");
  auto a = nlohmann::json::parse(slurp(dir / "a" / "summary.json"));
  auto b = nlohmann::json::parse(slurp(dir / "b" / "summary.json"));
  a.erase("run");
  b.erase("run");
  EXPECT_EQ(a, b);
  EXPECT_EQ(slurp(dir / "a" / "links.csv"), slurp(dir / "b" / "links.csv"));
  EXPECT_EQ(a["config"]["topo"]["kind"], "fat_tree");
  EXPECT_EQ(a["transports"][0]["fabric"]["pods"], 4);
  EXPECT_EQ(a["transports"][0]["fabric"]["cores"], 4);
  EXPECT_EQ(a["transports"][0]["flows"]["completed"], 16);
  EXPECT_EQ(a["transports"][0]["counters"]["qp_errors"], 0);
  const std::string links = slurp(dir / "a" / "links.csv");
  for (const char* name :
       {"pod0/leaf0->agg1", "pod0/agg1->leaf0", "pod0/agg1->core2", "core2->pod0/agg1"})
    EXPECT_NE(links.find(name), std::string::npos) << name;
  // A link the fabric does not have: a bad scenario, exit 2 with one line naming the line of
  // the file and what exists.
  EXPECT_EQ(run("bad", "bad.toml"), 2 << 8);
  const std::string bad = slurp(dir / "bad.log");
  EXPECT_NE(bad.find("bad.toml:7: fault 'link_down' on pod0/agg1-core0: agg 1 "
                     "of a pod is wired to cores 2..3"),
            std::string::npos)
      << bad;
  EXPECT_EQ(std::count(bad.begin(), bad.end(), '\n'), 1) << bad;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace mrc::sim

// ---- paper experiments: switch, transport, workload and fault keys -----------------------------

namespace mrc::sim {
namespace {

TEST(Scenario, ecn_last_hop__auto_resolves_per_transport_and_explicit_values_apply_to_all) {
  using Lh = SwitchConfig::EcnLastHop;
  auto sc = parse_scenario(std::string(kMinimal) + "[transport]\nkinds = [\"mrc\", \"roce_pfc\"]\n",
                           "s.toml");
  ASSERT_TRUE(sc) << sc.error().message;
  EXPECT_EQ(sc->base.sw.ecn_last_hop, Lh::kAuto);
  // Simulation::create resolves "auto": off for MRC (paper 2.1), on for RoCE (DCQCN).
  auto mrc = Simulation::create(sc->runs[0].config);
  auto roce = Simulation::create(sc->runs[1].config);
  ASSERT_TRUE(mrc && roce);
  EXPECT_EQ((*mrc)->config().sw.ecn_last_hop, Lh::kOff);
  EXPECT_EQ((*roce)->config().sw.ecn_last_hop, Lh::kOn);
  auto on = parse_scenario(kMinimal, "s.toml", {"switch.ecn_last_hop=true"});
  ASSERT_TRUE(on) << on.error().message;
  EXPECT_EQ((*Simulation::create(on->runs[0].config))->config().sw.ecn_last_hop, Lh::kOn);
  auto off = parse_scenario(kMinimal, "s.toml", {"switch.ecn_last_hop=false"});
  ASSERT_TRUE(off) << off.error().message;
  EXPECT_EQ((*Simulation::create(off->runs[1].config))->config().sw.ecn_last_hop, Lh::kOff);
  EXPECT_TRUE(parse_scenario(kMinimal, "s.toml", {"switch.ecn_last_hop=auto"}));
  expect_error(
      parse_scenario(std::string(kMinimal) + "[switch]\necn_last_hop = \"yes\"\n", "s.toml"),
      {"s.toml:8:", "key 'switch.ecn_last_hop'", "true, false or \"auto\"", "\"yes\""});
}

TEST(Scenario, qps_per_flow__an_integer_for_every_kind_or_a_table_per_kind) {
  auto all = parse_scenario(kMinimal, "s.toml", {"transport.qps_per_flow=4"});
  ASSERT_TRUE(all) << all.error().message;
  for (const TransportRun& r : all->runs)
    EXPECT_EQ(r.config.transport.qps_per_flow, 4u) << r.name;
  auto per = parse_scenario(std::string(kMinimal) +
                                "[transport]\nkinds = [\"mrc\", \"roce\", \"roce_pfc\"]\n"
                                "qps_per_flow = {roce = 8, roce_pfc = 16}\n",
                            "s.toml");
  ASSERT_TRUE(per) << per.error().message;
  EXPECT_EQ(per->runs[0].config.transport.qps_per_flow, 1u);
  EXPECT_EQ(per->runs[1].config.transport.qps_per_flow, 8u);
  EXPECT_EQ(per->runs[2].config.transport.qps_per_flow, 16u);
  auto set = parse_scenario(kMinimal, "s.toml", {"transport.qps_per_flow.roce=2"});
  ASSERT_TRUE(set) << set.error().message;
  EXPECT_EQ(set->runs[1].config.transport.qps_per_flow, 2u);
  expect_error(parse_scenario(kMinimal, "s.toml", {"transport.qps_per_flow=0"}),
               {"--set transport.qps_per_flow=0", "an integer in 1..256, or a table"});
  expect_error(
      parse_scenario(std::string(kMinimal) + "[transport]\nqps_per_flow = {rocky = 2}\n", "s.toml"),
      {"s.toml:8:", "unknown transport kind \"rocky\""});
  expect_error(parse_scenario(std::string(kMinimal) + "[transport]\nqps_per_flow = {roce = 999}\n",
                              "s.toml"),
               {"s.toml:8:", "roce = integer 999"});
}

constexpr const char* kTwoFlows = R"(name = "f"
[topo]
hosts = 16
radix = 8
[workload]
kind = "flows"
depth = 3
[[workload.flow]]
src = 0
dst = 8
size = "64KiB"
until = "2ms"
paths = ["p0/spine0", "p1/spine1"]
[[workload.flow]]
src = 1
dst = 9
start = "1ms"
)";

TEST(Scenario, flows_workload__entries_streams_and_pinned_paths) {
  auto sc = parse_scenario(kTwoFlows, "f.toml");
  ASSERT_TRUE(sc) << sc.error().message;
  const WorkloadConfig& w = sc->workload;
  EXPECT_EQ(w.kind, WorkloadConfig::kFlows);
  EXPECT_EQ(w.depth, 3u);
  ASSERT_EQ(w.flow_list.size(), 2u);
  EXPECT_EQ(w.flow_list[0].src, 0u);
  EXPECT_EQ(w.flow_list[0].dst, 8u);
  EXPECT_EQ(w.flow_list[0].size, 64u << 10);
  EXPECT_EQ(w.flow_list[0].until, ms(2));
  ASSERT_EQ(w.flow_list[0].paths.size(), 2u);
  EXPECT_EQ(w.flow_list[0].paths[1].plane, 1u);
  EXPECT_EQ(w.flow_list[0].paths[1].spine, 1u);
  EXPECT_EQ(w.flow_list[0].line, 8u);
  EXPECT_EQ(w.flow_list[1].size, 1u << 20);  // default
  EXPECT_EQ(w.flow_list[1].start, ms(1));
  EXPECT_TRUE(w.flow_list[1].paths.empty());
  const std::string base = R"(name = "f"
[topo]
hosts = 16
radix = 8
[workload]
kind = "flows"
)";
  expect_error(parse_scenario(base, "f.toml"),
               {"f.toml:5:", "[workload] is missing required key 'flow'"});
  expect_error(parse_scenario(base + "[[workload.flow]]\nsrc = 1\n", "f.toml"),
               {"f.toml:7:", "[workload.flow[0]] is missing required key 'dst'"});
  expect_error(parse_scenario(base + "[[workload.flow]]\nsrc = 1\ndst = 1\n", "f.toml"),
               {"f.toml:9:", "key 'workload.flow[0].dst': must differ from 'src'"});
  expect_error(parse_scenario(base + "[[workload.flow]]\nsrc = 1\ndst = 2\nsink = 3\n", "f.toml"),
               {"f.toml:10:", "unknown key 'workload.flow[0].sink'", "valid keys", "paths"});
  expect_error(
      parse_scenario(base + "[[workload.flow]]\nsrc = 1\ndst = 2\npaths = [\"p0/leaf1\"]\n",
                     "f.toml"),
      {"f.toml:10:", "key 'workload.flow[0].paths'", "like \"p0/spine3\"", "\"p0/leaf1\""});
  expect_error(parse_scenario(base + "[[workload.flow]]\nsrc = 1\ndst = 2\npaths = []\n", "f.toml"),
               {"key 'workload.flow[0].paths': expected a non-empty array of paths"});
  // Backup EVs stand in for pinned paths; an empty list is none.
  auto backups = parse_scenario(base +
                                    "[[workload.flow]]\nsrc = 1\ndst = 2\npaths = [\"p0/spine0\"]\n"
                                    "backup_paths = [\"p0/spine1\", \"p0/spine2\"]\n",
                                "f.toml");
  ASSERT_TRUE(backups) << backups.error().message;
  ASSERT_EQ(backups->workload.flow_list[0].backup_paths.size(), 2u);
  EXPECT_EQ(backups->workload.flow_list[0].backup_paths[1].spine, 2u);
  auto none = parse_scenario(
      base + "[[workload.flow]]\nsrc = 1\ndst = 2\npaths = [\"p0/spine0\"]\nbackup_paths = []\n",
      "f.toml");
  ASSERT_TRUE(none) << none.error().message;
  EXPECT_TRUE(none->workload.flow_list[0].backup_paths.empty());
  expect_error(
      parse_scenario(base + "[[workload.flow]]\nsrc = 1\ndst = 2\nbackup_paths = [\"p0/spine1\"]\n",
                     "f.toml"),
      {"f.toml:10:", "key 'workload.flow[0].backup_paths'", "give those too"});
  expect_error(
      parse_scenario(std::string(kMinimal) + "depth = 2\n", "s.toml"),
      {"key 'workload.depth'", "does not apply to workload kind 'permutation'", "steady, flows"});
}

TEST(Scenario, flows_workload__a_spine_the_fabric_lacks_fails_when_the_run_starts) {
  auto sc = parse_scenario(kTwoFlows, "f.toml", {"workload.flow.0.paths=[p0/spine9]"});
  ASSERT_TRUE(sc) << sc.error().message;
  auto r = run_transport(*sc, sc->runs[0]);
  expect_error(r, {"f.toml:8: workload.flow[0].paths: p0/spine9: spine 9 does not exist"});
  auto ecmp = parse_scenario(kTwoFlows, "f.toml", {"transport.path_mode=ecmp"});
  ASSERT_TRUE(ecmp);
  expect_error(run_transport(*ecmp, ecmp->runs[0]), {"pinned paths need path_mode = \"srv6\""});
  auto backup = parse_scenario(kTwoFlows, "f.toml", {"workload.flow.0.backup_paths=[p1/spine9]"});
  ASSERT_TRUE(backup) << backup.error().message;
  expect_error(run_transport(*backup, backup->runs[0]),
               {"f.toml:8: workload.flow[0].backup_paths: p1/spine9: spine 9 does not exist"});
  auto uneven = parse_scenario(kTwoFlows, "f.toml",
                               {"workload.flow.0.backup_paths=[p0/spine2]",
                                "workload.flow.0.paths=[p0/spine0,p0/spine1,p1/spine1]"});
  ASSERT_TRUE(uneven) << uneven.error().message;
  expect_error(run_transport(*uneven, uneven->runs[0]),
               {"f.toml:8: workload.flow[0].paths: transport mrc: ",
                "every plane needs the same number of active paths"});
  // RoCE ignores the pinning (one ECMP hash per QP).
  auto roce = run_transport(*ecmp, ecmp->runs[1]);
  ASSERT_TRUE(roce) << roce.error().message;
}

TEST(Scenario, steady_workload__until_is_required_and_later_than_start) {
  const std::string base =
      std::string(kMinimal).substr(0, std::string(kMinimal).find("kind")) + "kind = \"steady\"\n";
  auto sc = parse_scenario(base + "size = \"256KiB\"\nuntil = \"1ms\"\nranks = 8\n", "s.toml");
  ASSERT_TRUE(sc) << sc.error().message;
  EXPECT_EQ(sc->workload.kind, WorkloadConfig::kSteady);
  EXPECT_EQ(sc->workload.until, ms(1));
  EXPECT_EQ(sc->workload.depth, 2u);
  EXPECT_EQ(sc->workload.ranks, 8u);
  expect_error(parse_scenario(base, "s.toml"),
               {"s.toml:5:", "[workload] is missing required key 'until'", "\"100ms\""});
  expect_error(parse_scenario(base + "start = \"2ms\"\nuntil = \"1ms\"\n", "s.toml"),
               {"s.toml:8:", "key 'workload.until': must be later than 'start' (2ms)"});
  expect_error(parse_scenario(base + "until = \"1ms\"\ndepth = 0\n", "s.toml"),
               {"s.toml:8:", "key 'workload.depth': expected an integer in 1..64"});
  expect_error(parse_scenario(std::string(kMinimal) + "until = \"1ms\"\n", "s.toml"),
               {"key 'workload.until'", "does not apply to workload kind 'permutation'"});
}

TEST(Scenario, faults__several_links_path_loss_and_blackhole_reboot) {
  auto sc = parse_scenario(std::string(kMinimal) + R"(
[[fault]]
kind = "flap"
links = ["p0/leaf0-spine1", "p0/leaf1-spine1", "p1/host3"]
at = "10us"
period = "20us"
count = 2
[[fault]]
kind = "path_loss"
path = "p1/spine2"
src = 0
dst = 9
probability = 0.2
at = "5us"
until = "1ms"
[[fault]]
kind = "blackhole_reboot"
switch = "p0/spine3"
at = "50us"
reboot_at = "150us"
duration = "100us"
)",
                           "s.toml");
  ASSERT_TRUE(sc) << sc.error().message;
  ASSERT_EQ(sc->faults.size(), 3u);
  const FaultConfig& flap = sc->faults[0];
  ASSERT_EQ(flap.links.size(), 3u);
  EXPECT_EQ(flap.links[2].kind, LinkRef::kHostLeaf);
  EXPECT_EQ(flap.target, "p0/leaf0-spine1, p0/leaf1-spine1, p1/host3");
  const FaultConfig& loss = sc->faults[1];
  EXPECT_EQ(loss.kind, FaultConfig::kPathLoss);
  EXPECT_EQ(loss.path.plane, 1u);
  EXPECT_EQ(loss.path.spine, 2u);
  EXPECT_EQ(loss.dst, 9u);
  EXPECT_DOUBLE_EQ(loss.probability, 0.2);
  EXPECT_EQ(loss.until, ms(1));
  const FaultConfig& hang = sc->faults[2];
  EXPECT_EQ(hang.kind, FaultConfig::kBlackholeReboot);
  EXPECT_EQ(hang.reboot_at, us(150));
  EXPECT_EQ(hang.duration, us(100));

  const std::string f = std::string(kMinimal) + "[[fault]]\n";
  expect_error(parse_scenario(f + "kind = \"flap\"\nlink = \"p0/host1\"\nlinks = [\"p0/host2\"]\n"
                                  "at = 0\nperiod = \"1us\"\ncount = 1\n",
                              "s.toml"),
               {"s.toml:10:", "key 'fault[0].links': give 'link' (one) or 'links' (several)"});
  expect_error(
      parse_scenario(f + "kind = \"link_down\"\nlinks = [\"p0/leaf1\"]\nat = 0\n", "s.toml"),
      {"s.toml:9:", "key 'fault[0].links'", "\"p0/leaf1\""});
  expect_error(parse_scenario(f + "kind = \"link_down\"\nat = 0\n", "s.toml"),
               {"s.toml:7:", "missing required key 'link'", "or 'links'"});
  expect_error(parse_scenario(f + "kind = \"switch_reboot\"\nswitch = \"p0/spine1\"\n"
                                  "links = [\"p0/host2\"]\nat = 0\nduration = \"1us\"\n",
                              "s.toml"),
               {"key 'fault[0].links': a switch_reboot fault names a switch, not a link"});
  expect_error(parse_scenario(f + "kind = \"path_loss\"\npath = \"p0/spine1\"\nsrc = 0\n"
                                  "probability = 0.1\nat = 0\n",
                              "s.toml"),
               {"s.toml:7:", "missing required key 'dst'"});
  expect_error(parse_scenario(f + "kind = \"path_loss\"\npath = \"p0/leaf1\"\nsrc = 0\ndst = 1\n"
                                  "probability = 0.1\nat = 0\n",
                              "s.toml"),
               {"s.toml:9:", "key 'fault[0].path'", "like \"p0/spine3\""});
  expect_error(parse_scenario(f + "kind = \"path_loss\"\nlink = \"p0/host1\"\nat = 0\n", "s.toml"),
               {"key 'fault[0].link': a path_loss fault names a path, not a link"});
  expect_error(
      parse_scenario(f + "kind = \"link_down\"\nlink = \"p0/host1\"\nsrc = 2\nat = 0\n", "s.toml"),
      {"s.toml:10:", "key 'fault[0].src': does not apply to a link_down fault"});
  expect_error(
      parse_scenario(f + "kind = \"blackhole_reboot\"\nswitch = \"p0/spine1\"\nat = \"2us\"\n"
                         "duration = \"1us\"\n",
                     "s.toml"),
      {"missing required key 'reboot_at'"});
  expect_error(
      parse_scenario(f + "kind = \"blackhole_reboot\"\nswitch = \"p0/spine1\"\nat = \"2us\"\n"
                         "reboot_at = \"1us\"\nduration = \"1us\"\n",
                     "s.toml"),
      {"s.toml:11:", "key 'fault[0].reboot_at': must be later than 'at' (2us)"});
}

TEST(Scenario, faults__every_plane_names_and_nic_detect) {
  auto sc = parse_scenario(std::string(kMinimal) + R"(
[[fault]]
kind = "flap"
link = "p*/host3"
at = "10us"
period = "20us"
count = 2
nic_detect = "3us"
[[fault]]
kind = "link_down"
links = ["p0/host1", "p*/leaf0-spine1"]
at = "5us"
)",
                           "s.toml");
  ASSERT_TRUE(sc) << sc.error().message;
  ASSERT_EQ(sc->faults.size(), 2u);
  const FaultConfig& nic = sc->faults[0];
  ASSERT_EQ(nic.links.size(), 2u);  // the default fabric's 2 planes
  for (uint32_t p = 0; p < 2; ++p) {
    EXPECT_EQ(nic.links[p].kind, LinkRef::kHostLeaf);
    EXPECT_EQ(nic.links[p].plane, p);
    EXPECT_EQ(nic.links[p].a, 3u);
  }
  EXPECT_EQ(nic.nic_detect, us(3));
  EXPECT_EQ(nic.target, "p*/host3");
  ASSERT_EQ(sc->faults[1].links.size(), 3u);
  EXPECT_EQ(sc->faults[1].links[2].plane, 1u);
  EXPECT_EQ(sc->faults[1].nic_detect, 0u);

  const std::string f = std::string(kMinimal) + "[[fault]]\n";
  expect_error(parse_scenario(f + "kind = \"link_down\"\nlink = \"p0/leaf0-spine1\"\nat = 0\n"
                                  "nic_detect = \"1us\"\n",
                              "s.toml"),
               {"s.toml:11:", "key 'fault[0].nic_detect': applies to host links"});
  expect_error(parse_scenario(f + "kind = \"blackhole\"\nlink = \"p0/host1\"\nat = 0\n"
                                  "nic_detect = \"1us\"\n",
                              "s.toml"),
               {"key 'fault[0].nic_detect': does not apply to a blackhole fault"});
  expect_error(parse_scenario(f + "kind = \"link_down\"\nlink = \"p*/leaf9\"\nat = 0\n", "s.toml"),
               {"key 'fault[0].link'", "\"p0/leaf9\""});
}

TEST(Scenario, denylist__keys_defaults_and_errors) {
  auto off = parse_scenario(kMinimal, "s.toml");
  ASSERT_TRUE(off) << off.error().message;
  EXPECT_EQ(off->base.denylist.interval, 0u);
  auto on = parse_scenario(std::string(kMinimal) + R"(
[denylist]
interval = "50us"
probes = 400
loss = 0.1
clear_rounds = 3
)",
                           "s.toml");
  ASSERT_TRUE(on) << on.error().message;
  EXPECT_EQ(on->base.denylist.interval, us(50));
  EXPECT_EQ(on->base.denylist.probes, 400u);
  EXPECT_DOUBLE_EQ(on->base.denylist.deny_loss, 0.1);
  EXPECT_EQ(on->base.denylist.clear_rounds, 3u);
  for (const TransportRun& r : on->runs)
    EXPECT_EQ(r.config.denylist.interval, us(50));
  expect_error(parse_scenario(std::string(kMinimal) + "[denylist]\nloss = 2\n", "s.toml"),
               {"s.toml:8:", "key 'denylist.loss'"});
  expect_error(parse_scenario(std::string(kMinimal) + "[denylist]\nprobes = 0\n", "s.toml"),
               {"key 'denylist.probes'"});
  expect_error(parse_scenario(std::string(kMinimal) + "[denylist]\nrounds = 3\n", "s.toml"),
               {"unknown key 'denylist.rounds'", "clear_rounds"});
}

// [dcqcn]: every key reaches each run's DcqcnConfig; the defaults are Zhu et al.'s 55-us timers.
TEST(Scenario, dcqcn__keys_defaults_and_errors) {
  auto def = parse_scenario(std::string(kMinimal), "s.toml");
  ASSERT_TRUE(def) << def.error().message;
  EXPECT_EQ(def->base.transport.dcqcn.alpha_update_period, us(55));
  EXPECT_EQ(def->base.transport.dcqcn.rate_increase_period, us(55));
  EXPECT_EQ(def->base.transport.dcqcn.cnp_interval, us(50));
  auto sc = parse_scenario(std::string(kMinimal) + R"(
[dcqcn]
g = 0.0625
alpha_period = "10us"
timer = "300us"
byte_counter = "32KiB"
fast_recovery = 3
ai = "20Gbps"
hai = "100Gbps"
min_rate = "1Gbps"
cnp_interval = "4us"
)",
                           "s.toml");
  ASSERT_TRUE(sc) << sc.error().message;
  ASSERT_FALSE(sc->runs.empty());
  for (const TransportRun& r : sc->runs) {
    const cc::DcqcnConfig& d = r.config.transport.dcqcn;
    EXPECT_DOUBLE_EQ(d.g, 0.0625);
    EXPECT_EQ(d.alpha_update_period, us(10));
    EXPECT_EQ(d.rate_increase_period, us(300));
    EXPECT_EQ(d.byte_counter, 32u * 1024);
    EXPECT_EQ(d.fast_recovery_steps, 3u);
    EXPECT_EQ(d.additive_increase_bps, 20'000'000'000ull);
    EXPECT_EQ(d.hyper_increase_bps, 100'000'000'000ull);
    EXPECT_EQ(d.min_rate_bps, 1'000'000'000ull);
    EXPECT_EQ(d.cnp_interval, us(4));
  }
  expect_error(parse_scenario(std::string(kMinimal) + "[dcqcn]\ng = 0\n", "s.toml"),
               {"s.toml:8:", "key 'dcqcn.g'"});
  expect_error(parse_scenario(std::string(kMinimal) + "[dcqcn]\nai = \"0Gbps\"\n", "s.toml"),
               {"key 'dcqcn.ai'", "> 0"});
  expect_error(parse_scenario(std::string(kMinimal) + "[dcqcn]\nrai = \"5Gbps\"\n", "s.toml"),
               {"unknown key 'dcqcn.rai'"});
}

TEST(Scenario, faults__several_links_and_path_loss_are_checked_when_the_run_starts) {
  auto sc = parse_scenario(std::string(kMinimal) +
                               "[[fault]]\nkind = \"link_down\"\nlinks = [\"p0/leaf1-spine1\", "
                               "\"p0/leaf9-spine1\"]\nat = 0\n",
                           "s.toml");
  ASSERT_TRUE(sc) << sc.error().message;
  expect_error(run_transport(*sc, sc->runs[0]),
               {"s.toml:7: fault 'link_down'", "p0/leaf9-spine1: no such link"});
  auto loss = parse_scenario(std::string(kMinimal) +
                                 "[[fault]]\nkind = \"path_loss\"\npath = \"p0/spine1\"\nsrc = 0\n"
                                 "dst = 99\nprobability = 0.5\nat = 0\n",
                             "s.toml");
  ASSERT_TRUE(loss) << loss.error().message;
  expect_error(run_transport(*loss, loss->runs[0]), {"host 99 does not exist (16 hosts)"});
}

TEST(Scenario, run__host_link_samples_and_throughput_interval) {
  auto sc = parse_scenario(
      std::string(kMinimal) + "[run]\nthroughput_interval = \"5us\"\nsample_host_links = false\n",
      "s.toml");
  ASSERT_TRUE(sc) << sc.error().message;
  EXPECT_EQ(sc->base.throughput_interval, us(5));
  EXPECT_FALSE(sc->base.sample_host_links);
  auto d = parse_scenario(kMinimal, "s.toml");
  EXPECT_EQ(d->base.throughput_interval, 0u);
  EXPECT_TRUE(d->base.sample_host_links);
}

TEST(Scenario, blackhole_reboot__drops_silently_then_reboots_and_mrc_finishes) {
  auto sc = parse_scenario(std::string(kMinimal) + R"(
[transport]
kinds = ["mrc"]
[[fault]]
kind = "blackhole_reboot"
switch = "p0/spine1"
at = "5us"
reboot_at = "40us"
duration = "50us"
)",
                           "s.toml", {"workload.size=2MiB"});
  ASSERT_TRUE(sc) << sc.error().message;
  auto r = run_transport(*sc, sc->runs[0]);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->summary.completed, 16u);
  EXPECT_GT(r->stats.fault_drops, 0u);
  EXPECT_EQ(r->stats.qp_errors, 0u);
}

TEST(Scenario, paper__committed_scenarios_parse) {
  for (const char* f : {"steady_faults.toml", "paper/fig08-t1-blackhole-reboot.toml",
                        "paper/fig12-13-lossy-ev.toml", "paper/fig14-two-flows-one-ev.toml"}) {
    auto sc = load_scenario(std::string(MRC_SOURCE_DIR) + "/scenarios/" + f);
    EXPECT_TRUE(sc) << f << ": " << (sc ? "" : sc.error().message);
  }
}

TEST(MrcSimCli, paper_keys__steady_streams_write_throughput_series_and_state_last_hop_ecn) {
  SKIP_WITHOUT_TOOLS();
  const std::filesystem::path bin = std::filesystem::path(MRC_BINARY_DIR) / "bin" / "mrc-sim";
  if (!std::filesystem::exists(bin))
    FAIL() << "build mrc-sim first (the tools are part of the default build): " << bin;
  const auto dir =
      std::filesystem::temp_directory_path() / ("mrc_sim_paper_test_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  {
    std::ofstream f(dir / "steady.toml");
    f << R"(name = "steady"
[topo]
hosts = 16
radix = 8
[transport]
kinds = ["mrc", "roce"]
qps_per_flow = {roce = 4}
[workload]
kind = "steady"
size = "128KiB"
until = "200us"
[[fault]]
kind = "flap"
links = ["p0/leaf0-spine1", "p0/leaf1-spine1"]
at = "50us"
period = "20us"
count = 2
[run]
until = "20ms"
throughput_interval = "10us"
)";
  }
  const std::string cmd = bin.string() + " " + (dir / "steady.toml").string() + " --out " +
                          (dir / "o").string() + " > " + (dir / "o.log").string() + " 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << slurp(dir / "o.log");
  const std::string log = slurp(dir / "o.log");
  EXPECT_NE(log.find("ECN on the last hop (leaf->host) (auto): on for roce; off for mrc"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("qps/flow: roce 4"), std::string::npos) << log;
  auto j = nlohmann::json::parse(slurp(dir / "o" / "summary.json"));
  EXPECT_EQ(j["config"]["switch"]["ecn_last_hop"], "auto");
  EXPECT_EQ(j["transports"][0]["switch"]["ecn_last_hop"], false);
  EXPECT_EQ(j["transports"][1]["switch"]["ecn_last_hop"], true);
  EXPECT_EQ(j["transports"][1]["qps_per_flow"], 4);
  EXPECT_EQ(j["config"]["workload"]["until"], "200us");
  // Streams: more messages than hosts, throughput rows per flow and host, last-hop queues.
  EXPECT_GT(j["transports"][0]["flows"]["count"].get<int>(), 16);
  const std::string ts = slurp(dir / "o" / "flows_ts.csv");
  EXPECT_EQ(ts.rfind("transport,time_ns,kind,src,dst,gbps\n", 0), 0u);
  EXPECT_NE(ts.find(",flow,"), std::string::npos);
  EXPECT_NE(ts.find(",host_rx,"), std::string::npos);
  EXPECT_NE(slurp(dir / "o" / "links.csv").find("->host"), std::string::npos);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace mrc::sim
