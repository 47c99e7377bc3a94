// Every program in build/bin (tools/, examples/) on bad arguments and bad files: exit status 2
// with one line on stderr, never a crash; --help exits 0, names the exit statuses and shows
// no absolute path; each program is in the README's table. mrc-ctl's profile files are checked
// as a whole (file:line) before anything is applied; without a device every command says how to
// configure one. (README "Tools and commands", tools/cli.h.)
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

const fs::path kBin = fs::path(MRC_BINARY_DIR) / "bin";
const fs::path kSource = MRC_SOURCE_DIR;

struct Ran {
  int status = -1;  // exit status; -1: killed by a signal or timed out
  std::string out, err;
};

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) {
    if (c == '\'')
      q += "'\\''";
    else
      q += c;
  }
  q += '\'';
  return q;
}

// Runs `args` (args[0] a program of build/bin) with `env` prefixed (VAR=value ...) and a
// 30 s limit; no network, no device unless the environment gives one.
Ran run(const std::vector<std::string>& args, const std::string& env = "") {
  static int n = 0;
  const fs::path dir = fs::temp_directory_path() /
                       ("mrc_tools_test_" + std::to_string(::getpid()) + "_" + std::to_string(n++));
  fs::create_directories(dir);
  std::string cmd = "cd ";
  cmd += quote(dir.string());
  cmd += " && env -u MRC_SOFT_PORTS MRC_SOFT_CONFIG=";
  cmd += quote((dir / "none.conf").string());
  cmd += ' ';
  cmd += env;
  cmd += " timeout 30 ";
  cmd += quote((kBin / args[0]).string());
  for (size_t i = 1; i < args.size(); ++i) {
    cmd += ' ';
    cmd += quote(args[i]);
  }
  cmd += " >out 2>err </dev/null";
  std::ofstream(dir / "none.conf") << "# no ports\n";
  const int raw = std::system(cmd.c_str());
  Ran r;
  // A shell reports a child killed by signal s as 128 + s; timeout(1) as 124.
  if (WIFEXITED(raw) && WEXITSTATUS(raw) < 124) r.status = WEXITSTATUS(raw);
  r.out = slurp(dir / "out");
  r.err = slurp(dir / "err");
  fs::remove_all(dir);
  return r;
}

size_t lines(const std::string& s) {
  size_t n = 0;
  for (char c : s)
    n += c == '\n';
  return n + (!s.empty() && s.back() != '\n');
}

std::string joined(const std::vector<std::string>& a) {
  std::string s;
  for (const auto& x : a)
    s += x + " ";
  return s;
}

// Bad command lines of each program, each to be refused with status 2 and one line.
const std::map<std::string, std::vector<std::vector<std::string>>>& bad_arguments() {
  static const std::map<std::string, std::vector<std::vector<std::string>>> cases = {
      {"mrc-sim",
       {{"--seed", "-1"},
        {"--bogus"},
        {"no-such-scenario.toml"},
        {"--set", "topo.hosts=many"},
        {"--set", "topo.hostz=4"},
        {"--pcap-hosts", "x"},
        {"--qlog-hosts", "0,x"},
        {"--quiet", "--out"},
        {"--seed", "99999999999999999999"},
        {"--set", "workload.size=3GiB"},
        {"--set", "workload.size=-1"},
        {"--measure-rank", "0"},
        {"--ranks-plan", "2", "--measure-rank", "2", "--set", "transport.kinds=[mrc]"},
        {"--ranks-plan", "2", "--measure-rank", "0"},
        {"--ranks-plan", "2", "--measure-rank", "-1"}}},
      {"mrc-pair",
       {{"--size", "-5"},
        {"--size", "99999999999"},
        {"--size", "0"},
        {"--planes", "2", "--port", "5"},
        {"--count", "0"},
        {"--size", "1073741824", "--count", "100"},
        {"--loss", "2"},
        {"--loss", "nan"},
        {"--rate", "inf"},
        {"--seed", "-1"},
        {"--bogus"}}},
      {"mrc-topo",
       {{},
        {"--gpus", "0"},
        {"--gpus", "1024", "--radix", "0"},
        {"--gpus", "1024", "--planes", "0"},
        {"--gpus", "1024", "--oversub", "0.5"},
        {"--gpus", "1024", "--oversub", "nan"},
        {"--gpus", "x"}}},
      {"mrc-perf",
       {{"--size", "-1"},
        {"--size", "0"},
        {""},             // an empty SERVER is no server: not a server started by mistake
        {"--host", "3"},  // without --fabric
        {"--qp", "0"},
        {"-p", "70000"},
        {"--ev-mode", "tcp"},
        {"--mtu", "10"},
        {"--seed", "-1"},
        {"--duration", "nan"},
        {"--ack-repeat-us", "-1"},
        // This host's configuration is checked before a server waits for a client.
        {"--local", "x"},
        {"--fabric", "."},
        {"--fabric", "no-such-fabric.json"},
        {"--ifname", "no-such-if0"},
        {"--json", "no-such-dir/out.json"},
        {"--qlog", "no-such-dir/log.jsonl"},
        {"--psk", "no-such-file"},
        {"--packet-auth", "sign"},
        {"::1", "--packet-auth", "encrypt"},  // keys come from the --psk handshake
        {"--bogus"}}},
      {"mrc-tcp-stall",
       {{}, {"send"}, {"send", "::1", "-D", "-1"}, {"--port", "0", "recv"}, {"fly"}}},
      {"mrc-ctl",
       {{},
        {"show", "abc"},
        {"show", "-1"},
        {"show", "99999999999999999999"},
        {"apply", "--check", "."},
        {"events", "--seconds", "-1"},
        {"port", "9", "sideways"},
        {"port", "0", "enable"},
        {"apply"},
        {"apply", "--check", "no-such-file.toml"},
        {"probe", "--dst", "::1", "--count", "0"}}},
      {"mrc_write_bw",
       {{"--size", "-5"},
        {"--size", "99999999999"},
        {"--iters", "0"},
        {"--ib-port", "0"},
        {"--bogus"},
        {"a", "b"},
        {"--timeout", "-1"}}},
      {"mrc_ocp_sequence", {{"--iters", "0"}, {"--max-size", "x"}, {"--bogus"}}},
      {"mrc-plot", {{}, {"--format", "gif", "."}, {"no-such-directory"}}},
      {"mrc-mpi-perf",
       {{"--bogus"},
        {"--window", "0"},
        {"--min-size", "0"},
        {"--max-size", "x"},
        {"--min-size", "9", "--max-size", "8"},
        {"--allreduce-count", "-1"}}},
      // Refused before any namespace is touched (no root needed).
      {"mrc-fabric",
       {{},
        {"--bogus"},
        {"up", "--hosts", "x"},
        {"up", "--hosts", "-1"},
        {"up", "--hosts", "99999999999"},
        {"up", "--planes"},
        {"up", "--leaves", "9", "--hosts", "4"},
        {"up", "--mtu", "100"},
        {"up", "--rate", "fast"},
        {"--name", "a/b", "status"},
        {"exec"},
        {"exec", "h0"},
        {"exec", "--name"},
        {"loss", "p0-l0-s1", "700"},
        {"rate", "p0-l0-s1", "-5"},
        {"flap", "p0-l0-s1", "--period", "1us"},
        {"check", "--count", "0"},
        {"link", "sideways", "p0-l0-s1"}}},
  };
  return cases;
}

bool is_program(const fs::directory_entry& e) {
  const std::string name = e.path().filename().string();
  if (!e.is_regular_file() || name.rfind("test_", 0) == 0 || name.rfind("bench_", 0) == 0 ||
      name.rfind("fuzz_", 0) == 0 || name.ends_with("_bench"))  // benchmarks: bench/
    return false;
  return (e.status().permissions() & fs::perms::owner_exec) != fs::perms::none;
}

std::vector<std::string> programs() {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(kBin))
    if (is_program(e)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

TEST(Tools, every_program__bad_arguments_exit_2_with_one_line_and_no_crash) {
  const auto& cases = bad_arguments();
  for (const std::string& prog : programs()) {
    auto it = cases.find(prog);
    ASSERT_NE(it, cases.end()) << prog << " has no bad-argument cases in this test";
    for (const auto& args : it->second) {
      std::vector<std::string> argv{prog};
      argv.insert(argv.end(), args.begin(), args.end());
      const Ran r = run(argv);
      SCOPED_TRACE(joined(argv));
      ASSERT_NE(r.status, -1) << "crashed or hung; stderr: " << r.err;
      EXPECT_EQ(r.status, 2) << "stderr: " << r.err << "stdout: " << r.out;
      EXPECT_EQ(lines(r.err), 1u) << r.err;
      EXPECT_NE(r.err.find(prog), std::string::npos) << "names the program: " << r.err;
    }
  }
}

TEST(Tools, every_program__help_names_exit_statuses_without_absolute_paths) {
  const std::string readme = slurp(kSource / "README.md");
  for (const std::string& prog : programs()) {
    SCOPED_TRACE(prog);
    EXPECT_NE(readme.find("`build/bin/" + prog), std::string::npos)
        << "missing from README.md's table";
    const Ran r = run({prog, "--help"});
    ASSERT_EQ(r.status, 0) << r.err;
    const std::string text = r.out + r.err;
    EXPECT_NE(text.find("Exit status"), std::string::npos) << text;
    const size_t usage = text.find("sage:");
    ASSERT_NE(usage, std::string::npos) << text;
    const std::string line = text.substr(usage, text.find('\n', usage) - usage);
    EXPECT_EQ(line.find('/'), std::string::npos) << "absolute path in: " << line;
  }
}

TEST(Tools, every_benchmark__is_in_the_readme_table) {
  // Google Benchmark programs (bench/, -DMRC_BUILD_BENCH=ON) take its flags, not tools/cli.h's,
  // so they are left out of the checks above; they are listed like every other program.
  const std::string readme = slurp(kSource / "README.md");
  for (const auto& e : fs::directory_iterator(kBin)) {
    const std::string name = e.path().filename().string();
    if (!e.is_regular_file() || !name.ends_with("_bench")) continue;
    EXPECT_NE(readme.find("| `build/bin/" + name), std::string::npos)
        << name << " missing from README.md's table";
  }
}

TEST(Tools, subcommand_help__prints_help_and_exit_statuses) {
  for (const std::vector<std::string>& argv :
       std::vector<std::vector<std::string>>{{"mrc-fabric", "exec", "--help"},
                                             {"mrc-fabric", "up", "--help"},
                                             {"mrc-fabric", "flap", "--help"},
                                             {"mrc-ctl", "apply", "--help"},
                                             {"mrc-ctl", "events", "--help"}}) {
    SCOPED_TRACE(joined(argv));
    const Ran r = run(argv);
    EXPECT_EQ(r.status, 0) << r.err;
    const size_t usage = r.out.find("Usage: " + argv[0] + " " + argv[1]);
    ASSERT_NE(usage, std::string::npos) << r.out;
    EXPECT_EQ(r.out.substr(usage, r.out.find('\n', usage) - usage).find('/'), std::string::npos)
        << r.out;
    EXPECT_NE(r.out.find("Exit status"), std::string::npos) << r.out;
    // The layout every other --help has (CLI11's, tools/cli.h): options listed under
    // "Options:", the exit statuses ending with the shared bad-argument status.
    EXPECT_NE(r.out.find("\nOptions:\n"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("2 bad arguments (one line on stderr)."), std::string::npos) << r.out;
  }
}

TEST(Tools, no_short_flag__means_two_things) {
  // -q is mrc-perf's --qp (as in perftest's ib_write_bw); no other program may give it
  // another meaning.
  for (const std::string prog : {"mrc-sim", "mrc_write_bw", "mrc-pair", "mrc-topo"}) {
    // The option after -q is refused either way; the message names -q only if -q is too.
    const Ran r = prog == "mrc-topo" ? run({prog, "--gpus", "8", "-q", "--no-such-option"})
                                     : run({prog, "-q", "--no-such-option"});
    EXPECT_EQ(r.status, 2) << prog << ": " << r.err;
    EXPECT_NE(r.err.find("-q"), std::string::npos) << prog << " accepts -q: " << r.err;
  }
}

// ---- mrc-plot ---------------------------------------------------------------------------------

TEST(Tools, mrc_plot__bad_run_directories_exit_2_with_one_line_and_no_traceback) {
  const fs::path dir = fs::temp_directory_path() / ("mrc_plot_dirs_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const fs::path good = dir / "good";
  const Ran sim = run({"mrc-sim", "--quiet", "--set", "topo.hosts=8", "--set",
                       "workload.size=64KiB", "--out", good.string()});
  ASSERT_EQ(sim.status, 0) << sim.err;
  const std::string summary = slurp(good / "summary.json");
  const std::string flows = slurp(good / "flows.csv");
  ASSERT_GT(flows.size(), 300u);
  // A copy of the run directory with one file replaced: a directory where the file should be
  // (unreadable, even by root), or `text`.
  int n = 0;
  const auto variant = [&](const std::string& file, const std::string* text) {
    // Appended rather than "v" + to_string(): GCC 12 -O3 misreads that as an overlapping copy.
    std::string name = "v";
    name += std::to_string(n++);
    const fs::path d = dir / name;
    fs::copy(good, d);
    fs::remove(d / file);
    if (text)
      std::ofstream(d / file) << *text;
    else
      fs::create_directory(d / file);
    return d;
  };
  const std::string cut_summary = summary.substr(0, summary.size() / 2);
  const std::string cut_flows = flows.substr(0, flows.find('\n', 200) + 10);
  const std::string empty;
  const std::vector<std::pair<const char*, std::vector<std::string>>> cases = {
      {"summary.json cut short", {variant("summary.json", &cut_summary).string()}},
      {"summary.json unreadable", {variant("summary.json", nullptr).string()}},
      {"flows.csv cut short", {variant("flows.csv", &cut_flows).string()}},
      {"flows.csv unreadable", {variant("flows.csv", nullptr).string()}},
      {"flows.csv empty", {variant("flows.csv", &empty).string()}},
      {"output directory under a file",
       {good.string(), "--out", (good / "summary.json" / "figures").string()}},
  };
  for (const auto& [what, args] : cases) {
    SCOPED_TRACE(what);
    std::vector<std::string> argv{"mrc-plot"};
    argv.insert(argv.end(), args.begin(), args.end());
    for (const char* jobs : {"1", "3"}) {
      std::vector<std::string> with_jobs = argv;
      with_jobs.insert(with_jobs.end(), {"--jobs", jobs});
      const Ran r = run(with_jobs);
      EXPECT_EQ(r.status, 2) << "stderr: " << r.err;
      EXPECT_EQ(lines(r.err), 1u) << r.err;
      EXPECT_EQ(r.err.rfind("mrc-plot: ", 0), 0u) << r.err;
      EXPECT_EQ(r.err.find("Traceback"), std::string::npos) << r.err;
    }
  }
  // A run without flows (a header line alone) is not an error, and says what it leaves out.
  const std::string header = flows.substr(0, flows.find('\n') + 1);
  const Ran none = run({"mrc-plot", variant("flows.csv", &header).string()});
  EXPECT_EQ(none.status, 0) << none.err;
  EXPECT_NE(none.err.find("no flows"), std::string::npos) << none.err;
  // The whole directory still draws.
  const Ran ok = run({"mrc-plot", good.string()});
  EXPECT_EQ(ok.status, 0) << ok.err;
  EXPECT_TRUE(fs::exists(good / "fct_cdf.png")) << ok.out << ok.err;
  fs::remove_all(dir);
}

// ---- mrc-pair ---------------------------------------------------------------------------------

// mrc-sim --qlog-hosts writes each transport's event log (docs/engine.md, "Event log");
// scripts/qlog-summary.py reads it back per engine and QP; a file that is no log exits 2.
TEST(Tools, qlog_summary__reads_the_event_log_mrc_sim_writes) {
  const fs::path out = fs::temp_directory_path() / ("mrc_qlog_" + std::to_string(::getpid()));
  const Ran sim = run({"mrc-sim", "--quiet", "--out", out.string(), "--qlog-hosts", "0,1"});
  ASSERT_EQ(sim.status, 0) << sim.err;
  const fs::path log = out / "mrc.qlog.jsonl";
  ASSERT_TRUE(fs::exists(log));
  const std::string summary = (kSource / "scripts" / "qlog-summary.py").string();
  const Ran r = run({summary, log.string(), "--node", "0"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("node 0 QP"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("  sent "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("  received "), std::string::npos) << r.out;
  const Ran bad = run({summary, (out / "summary.json").string()});
  EXPECT_EQ(bad.status, 2);
  EXPECT_EQ(lines(bad.err), 1u) << bad.err;
  fs::remove_all(out);
}

TEST(Tools, mrc_pair__a_capture_that_cannot_be_written_fails_the_run) {
  // /dev/full opens, then refuses every record: the run completes, its capture does not.
  const Ran r = run({"mrc-pair", "--count", "20", "--pcap", "/dev/full"});
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_EQ(lines(r.err), 1u) << r.err;
  EXPECT_NE(r.err.find("/dev/full"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("all data and guard bytes correct"), std::string::npos) << r.out;
}

TEST(Tools, mrc_pair__one_plane_says_it_has_no_port_failure) {
  // The default failing port, 1, does not exist with one plane: the summary says so.
  const Ran r = run({"mrc-pair", "--count", "20", "--planes", "1"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("no port failure"), std::string::npos) << r.out;
  const Ran j = run({"mrc-pair", "--count", "20", "--planes", "1", "--json"});
  EXPECT_EQ(j.status, 0) << j.err;
  EXPECT_NE(j.out.find("\"port_fails\": false"), std::string::npos) << j.out;
  // With two planes port 1 fails as usual.
  const Ran two = run({"mrc-pair", "--count", "20"});
  EXPECT_EQ(two.status, 0) << two.err;
  EXPECT_NE(two.out.find("port 1 down at"), std::string::npos) << two.out;
}

// ---- mrc-ctl ----------------------------------------------------------------------------------

struct CtlCase {
  const char* name;
  const char* toml;
  std::vector<std::string> expect;  // in the message
};

TEST(Tools, mrc_ctl_apply__refuses_a_bad_file_whole_with_file_and_line) {
  const std::string good = slurp(kSource / "examples/profiles.toml");
  const std::vector<CtlCase> cases = {
      {"typo",
       "[[ev_format]]\nid = 1\nmdoe = \"udp\"\nwidths = [16]\n",
       {"bad.toml:3", "unknown key 'mdoe'", "valid keys: id, mode, widths"}},
      {"string id", "[[cc_profile]]\nid = \"one\"\n", {"bad.toml:2", "expected an integer"}},
      {"unknown table", "[[ev_formats]]\nid = 1\n", {"bad.toml:1", "'ev_formats'"}},
      // One error: min_active is not compared with a count that was refused.
      {"negative count",
       "[[ev_profile]]\nid = 2\nformat = 1\ncount = -16\nmin_active = 2\nfields = [{width = "
       "4}]\n",
       {"bad.toml:4", "count = -16", "out of range [1, 1024]", "1 error(s)"}},
      {"algorithm",
       "[[cc_profile]]\nid = 3\nalgorithm = \"cubic\"\n",
       {"bad.toml:3", "\"cubic\"", "\"uet-1.0-nscc\""}},
      {"syntax", "[[cc_profile]]\nid = = 3\n", {"bad.toml:2:"}},
      {"duplicate", "[[cc_profile]]\nid = 3\n[[cc_profile]]\nid = 3\n", {"id 3 appears twice"}},
      {"min_active",
       "[[ev_profile]]\nid = 2\nformat = 1\ncount = 2\nmin_active = 3\nfields = [{width = 4}]\n",
       {"min_active 3 is more than count 2"}},
      {"width", "[[ev_format]]\nid = 1\nwidths = [0]\n", {"bad.toml:3", "1 to 32 bits"}},
      {"empty", "# nothing\n", {"no profiles"}},
  };
  const fs::path dir = fs::temp_directory_path() / ("mrc_ctl_files_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  for (const CtlCase& c : cases) {
    SCOPED_TRACE(c.name);
    std::ofstream(dir / "bad.toml") << c.toml;
    // Without --check as well: the file is refused before any device is looked for.
    for (bool check : {true, false}) {
      std::vector<std::string> argv{"mrc-ctl", "apply"};
      if (check) argv.push_back("--check");
      argv.push_back((dir / "bad.toml").string());
      const Ran r = run(argv);
      EXPECT_EQ(r.status, 2) << r.err;
      for (const std::string& e : c.expect)
        EXPECT_NE(r.err.find(e), std::string::npos) << "'" << e << "' not in: " << r.err;
      EXPECT_NE(r.err.find("nothing applied"), std::string::npos) << r.err;
    }
  }
  std::ofstream(dir / "good.toml") << good;
  const Ran ok = run({"mrc-ctl", "apply", "--check", (dir / "good.toml").string()});
  EXPECT_EQ(ok.status, 0) << ok.err;
  EXPECT_NE(ok.out.find("ok"), std::string::npos) << ok.out;
  fs::remove_all(dir);
}

TEST(Tools, mrc_ctl__without_a_device_names_the_configuration_and_the_docs) {
  for (const std::vector<std::string>& argv : std::vector<std::vector<std::string>>{
           {"mrc-ctl", "show", "1"},
           {"mrc-ctl", "events", "--seconds", "0.01"},
           {"mrc-ctl", "port", "1", "enable"},
           {"mrc-ctl", "probe", "--dst", "::1"},
           {"mrc-ctl", "apply", (kSource / "examples/profiles.toml").string()}}) {
    const Ran r = run(argv);
    SCOPED_TRACE(joined(argv));
    EXPECT_EQ(r.status, 1) << r.err;
    for (const char* e : {"MRC_SOFT_PORTS", "MRC_SOFT_CONFIG", "docs/c-api.md"})
      EXPECT_NE(r.err.find(e), std::string::npos) << "'" << e << "' not in: " << r.err;
    EXPECT_EQ(lines(r.err), 1u) << r.err;
  }
}

}  // namespace
