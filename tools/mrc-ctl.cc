// mrc-ctl: the node's MRC controller over the OCP mrc_ctl.h API (docs/c-api.md, "mrc-ctl").
//   mrc-ctl apply FILE.toml        check the whole file, then configure EV format / EV / CC
//                                  profiles and bring them ONLINE; profiles already ONLINE get
//                                  the changes MODIFY_ONLINE allows (EV fields, CC
//                                  configuration), applied to live QPs
//   mrc-ctl apply --check FILE     check the file only (no device needed)
//   mrc-ctl show EV_PROFILE_ID     EV array with states
//   mrc-ctl events [--seconds N]   print EV events as they arrive
//   mrc-ctl probe --dst ADDR [--port P] [--count N]   EV probes, RTT in ns
//   mrc-ctl port P enable|disable
// Exit status: 0 done, 1 the device refused or is not configured, 2 bad arguments or a bad
// profile file (nothing applied).
#include <arpa/inet.h>
#include <fmt/core.h>
#include <mrc_ctl.h>

#include <toml++/toml.h>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <optional>
#include <set>
#include <thread>
#include <vector>

#include "api/node_state.h"
#include "api/soft_device.h"
#include "cli.h"
#include "transport/ev_profile.h"

namespace {

namespace api = mrc::api;

// Where the device's configuration comes from, for every "not configured" message.
constexpr const char* kConfigHint =
    "set MRC_SOFT_PORTS=ADDR[/PREFIX][%IFNAME],... (one per plane) or write 'ports = ...' in "
    "$MRC_SOFT_CONFIG (default /etc/mrc/mrc_soft.conf); see docs/c-api.md, \"Configuration\"";

std::string errno_text(int e) {
  switch (e) {
    case EPERM:
      return "not permitted: the controller needs CAP_NET_ADMIN (run as root)";
    case E2BIG:
      return "no room: every profile slot or EV entry of the node is taken (docs/c-api.md)";
    case EBUSY:
      return "busy: QPs use the profile";
    case EINVAL:
      return "the device refused the values (EINVAL)";
    default:
      return std::strerror(e);
  }
}

int die(const std::string& what) {
  fmt::print(stderr, "mrc-ctl: {}: {}\n", what, errno_text(errno));
  return 1;
}

struct Device {
  ibv_context* ctx = nullptr;
  mrc_context* mctx = nullptr;
  uint32_t ports = 0;
  // 0 when open, else the exit status after a one-line message.
  int open() {
    api::DeviceConfig cfg;
    std::string error;
    if (!api::load_device_config(cfg, error)) {
      fmt::print(stderr, "mrc-ctl: no MRC device configured ({}): {}\n", error, kConfigHint);
      return 1;
    }
    ports = static_cast<uint32_t>(cfg.ports.size());
    int n = 0;
    ibv_device** list = ibv_get_device_list(&n);
    if (n > 0) ctx = ibv_open_device(list[0]);
    ibv_free_device_list(list);
    if (!ctx) return die(fmt::format("open {}", api::kDeviceName));
    mrc_context_attr a{MRC_API_CURRENT_VERSION, MRC_VENDOR_API_CURRENT_VERSION};
    mctx = mrc_create_context(ctx, &a);
    if (!mctx) return die("create an MRC context");
    return 0;
  }
  ~Device() {
    if (mctx) mrc_destroy_context(mctx);
    if (ctx) ibv_close_device(ctx);
  }
};

// ---- the profile file ------------------------------------------------------------------------
// Read and checked as a whole before anything is applied: unknown tables and keys, types,
// ranges and duplicate ids are errors with file:line, like mrc-sim's scenario files.

struct EvFormat {
  uint64_t id = 0;
  mrc_ctl_ev_fmt_mode mode = MRC_CTL_EV_FMT_MODE_UDP;
  std::vector<mrc_ctl_ev_fmt_field> widths;
};
struct EvProfile {
  uint64_t id = 0;
  mrc_ctl_ev_mode mode = MRC_CTL_EV_MODE_GEN;
  uint64_t format = 0;
  uint32_t count = 0, min_active = 1;
  std::vector<mrc_ctl_ev_field> fields;
};
struct CcProfile {
  uint64_t id = 0;
  std::string algorithm = "uet-1.0-nscc";
  mrc_ctl_cc_nscc_cfg cfg{};
};
struct ProfileFile {
  std::vector<EvFormat> formats;
  std::vector<EvProfile> evs;
  std::vector<CcProfile> ccs;
};

class FileReader {
 public:
  explicit FileReader(std::string path) : path_(std::move(path)) {}
  std::vector<std::string> errors;

  std::string where(const toml::node* n) const {
    if (n && n->source().begin.line > 0) return fmt::format("{}:{}", path_, n->source().begin.line);
    return path_;
  }
  void error(const toml::node* n, const std::string& what) {
    errors.push_back(where(n) + ": " + what);
  }

  // Every key of `t` must be in `keys`.
  void known_keys(const toml::table& t, const std::string& table,
                  std::initializer_list<const char*> keys) {
    for (auto&& [k, v] : t) {
      bool ok = false;
      for (const char* key : keys)
        ok = ok || k.str() == key;
      if (ok) continue;
      std::string valid;
      for (const char* key : keys)
        valid += std::string(valid.empty() ? "" : ", ") + key;
      error(&v, fmt::format("unknown key '{}' in [[{}]] (valid keys: {})", k.str(), table, valid));
    }
  }

  // An integer in [lo, hi]; `fallback` when absent (nullopt: required).
  std::optional<int64_t> integer(const toml::table& t, const std::string& table, const char* key,
                                 int64_t lo, int64_t hi, std::optional<int64_t> fallback) {
    const toml::node* n = t.get(key);
    if (!n) {
      if (!fallback) error(&t, fmt::format("[[{}]] needs '{}'", table, key));
      return fallback;
    }
    const auto* v = n->as_integer();
    if (!v) {
      error(n, fmt::format("{}.{}: expected an integer, got {}", table, key, type_name(*n)));
      return std::nullopt;
    }
    if (v->get() < lo || v->get() > hi) {
      error(n, fmt::format("{}.{} = {}: out of range [{}, {}]", table, key, v->get(), lo, hi));
      return std::nullopt;
    }
    return v->get();
  }

  std::optional<std::string> one_of(const toml::table& t, const std::string& table, const char* key,
                                    std::initializer_list<const char*> allowed,
                                    const char* fallback) {
    const toml::node* n = t.get(key);
    if (!n) return std::string(fallback);
    const auto* v = n->as_string();
    std::string list;
    for (const char* a : allowed)
      list += std::string(list.empty() ? "" : ", ") + "\"" + a + "\"";
    if (!v) {
      error(n, fmt::format("{}.{}: expected one of {}, got {}", table, key, list, type_name(*n)));
      return std::nullopt;
    }
    for (const char* a : allowed)
      if (v->get() == a) return v->get();
    error(n, fmt::format("{}.{} = \"{}\": expected one of {}", table, key, v->get(), list));
    return std::nullopt;
  }

  static std::string type_name(const toml::node& n) {
    switch (n.type()) {
      case toml::node_type::string:
        return "a string";
      case toml::node_type::integer:
        return "an integer";
      case toml::node_type::floating_point:
        return "a number with a fraction";
      case toml::node_type::boolean:
        return "a boolean";
      case toml::node_type::array:
        return "an array";
      case toml::node_type::table:
        return "a table";
      default:
        return "a date or time";
    }
  }

  // The tables of an array of tables `[[name]]`.
  std::vector<const toml::table*> tables(const toml::table& root, const char* name) {
    std::vector<const toml::table*> out;
    const toml::node* n = root.get(name);
    if (!n) return out;
    const toml::array* arr = n->as_array();
    if (!arr) {
      error(n, fmt::format("'{}' must be an array of tables: write [[{}]]", name, name));
      return out;
    }
    for (const toml::node& e : *arr) {
      if (const toml::table* t = e.as_table())
        out.push_back(t);
      else
        error(&e, fmt::format("'{}' must be an array of tables: write [[{}]]", name, name));
    }
    return out;
  }

 private:
  std::string path_;
};

constexpr int64_t kU32 = 0xFFFFFFFFll;
// Profile ids are the caller's 64-bit keys (5.5); TOML integers are signed 64-bit.
constexpr int64_t kMaxId = INT64_MAX;

// The file as TOML; nullopt after printing why not (a directory, or a syntax error at
// file:line:column).
std::optional<toml::table> parse_profile_toml(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    fmt::print(stderr, "mrc-ctl: {}: a directory, not a profile file; nothing applied\n", path);
    return std::nullopt;
  }
  try {
    return toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    if (e.source().begin.line > 0)
      fmt::print(stderr, "mrc-ctl: {}:{}:{}: {}; nothing applied\n", path, e.source().begin.line,
                 e.source().begin.column, e.description());
    else
      fmt::print(stderr, "mrc-ctl: {}: {}; nothing applied\n", path, e.description());
    return std::nullopt;
  }
}

// A table's id, an error when another table of its kind (`ids`) has it.
uint64_t read_unique_id(FileReader& r, const toml::table& t, const char* table,
                        std::set<uint64_t>& ids) {
  const auto id =
      static_cast<uint64_t>(r.integer(t, table, "id", 0, kMaxId, std::nullopt).value_or(0));
  if (!ids.insert(id).second) r.error(&t, fmt::format("[[{}]] id {} appears twice", table, id));
  return id;
}

// ev_format.widths: 1 to kMaxProfileFields fields of 1 to 32 bits, kEvBits in all at most.
void read_format_widths(FileReader& r, const toml::table& t, EvFormat& f) {
  const toml::node* w = t.get("widths");
  if (!w) {
    r.error(&t, "[[ev_format]] needs 'widths' (bits of each field, e.g. widths = [16])");
    return;
  }
  const toml::array* a = w->as_array();
  if (!a || a->empty() || a->size() > api::kMaxProfileFields) {
    r.error(w, fmt::format("ev_format.widths: expected an array of 1 to {} integers",
                           api::kMaxProfileFields));
    return;
  }
  int64_t total = 0;
  for (const toml::node& x : *a) {
    const auto* v = x.as_integer();
    if (!v || v->get() < 1 || v->get() > 32) {
      r.error(&x, "ev_format.widths: each width is an integer of 1 to 32 bits");
      continue;
    }
    total += v->get();
    f.widths.push_back({static_cast<uint8_t>(v->get())});
  }
  if (total > static_cast<int64_t>(mrc::ev::kEvBits))
    r.error(w, fmt::format("ev_format.widths add up to {} bits, more than an EV's {}", total,
                           mrc::ev::kEvBits));
}

EvFormat read_ev_format(FileReader& r, const toml::table& t, std::set<uint64_t>& ids) {
  r.known_keys(t, "ev_format", {"id", "mode", "widths"});
  EvFormat f;
  f.id = read_unique_id(r, t, "ev_format", ids);
  const auto mode = r.one_of(t, "ev_format", "mode", {"udp", "stev", "srv6"}, "udp");
  if (mode)
    f.mode = *mode == "stev"   ? MRC_CTL_EV_FMT_MODE_STEV
             : *mode == "srv6" ? MRC_CTL_EV_FMT_MODE_SRV6
                               : MRC_CTL_EV_FMT_MODE_UDP;
  read_format_widths(r, t, f);
  return f;
}

// One of ev_profile.fields: {width, init_val, min_val, max_val, mask}.
mrc_ctl_ev_field read_ev_field(FileReader& r, const toml::table& ft) {
  const char* table = "ev_profile.fields";
  r.known_keys(ft, table, {"width", "init_val", "min_val", "max_val", "mask"});
  mrc_ctl_ev_field f{};
  f.width = static_cast<uint32_t>(r.integer(ft, table, "width", 1, 32, std::nullopt).value_or(1));
  f.init_val = static_cast<uint32_t>(r.integer(ft, table, "init_val", 0, kU32, 0).value_or(0));
  f.min_val = static_cast<uint32_t>(r.integer(ft, table, "min_val", 0, kU32, 0).value_or(0));
  f.max_val = static_cast<uint32_t>(r.integer(ft, table, "max_val", 0, kU32, 0).value_or(0));
  f.mask = static_cast<uint32_t>(r.integer(ft, table, "mask", 0, kU32, 0).value_or(0));
  if (f.min_val > f.max_val)
    r.error(&ft, fmt::format("ev_profile.fields: min_val {} is more than max_val {}", f.min_val,
                             f.max_val));
  return f;
}

// ev_profile.fields: an array of up to kMaxProfileFields field tables.
void read_ev_fields(FileReader& r, const toml::node& fs, EvProfile& p) {
  const toml::array* a = fs.as_array();
  if (!a || a->size() > api::kMaxProfileFields) {
    r.error(&fs, fmt::format("ev_profile.fields: expected an array of up to {} tables "
                             "{{width, init_val, min_val, max_val, mask}}",
                             api::kMaxProfileFields));
    return;
  }
  for (const toml::node& x : *a) {
    const toml::table* ft = x.as_table();
    if (!ft) {
      r.error(&x,
              "ev_profile.fields: each field is a table {width, init_val, min_val, "
              "max_val, mask}");
      continue;
    }
    p.fields.push_back(read_ev_field(r, *ft));
  }
}

EvProfile read_ev_profile(FileReader& r, const toml::table& t, std::set<uint64_t>& ids) {
  r.known_keys(t, "ev_profile", {"id", "mode", "format", "count", "min_active", "fields"});
  EvProfile p;
  p.id = read_unique_id(r, t, "ev_profile", ids);
  const auto mode = r.one_of(t, "ev_profile", "mode", {"gen", "exp", "auto"}, "gen");
  if (mode)
    p.mode = *mode == "auto"  ? MRC_CTL_EV_MODE_AUTO
             : *mode == "exp" ? MRC_CTL_EV_MODE_EXP
                              : MRC_CTL_EV_MODE_GEN;
  const bool auto_mode = mode && *mode == "auto";
  // AUTO profiles take the device's own EVs: format, count and fields are not theirs.
  const std::optional<int64_t> none = auto_mode ? std::optional<int64_t>(0) : std::nullopt;
  p.format =
      static_cast<uint64_t>(r.integer(t, "ev_profile", "format", 0, kMaxId, none).value_or(0));
  const std::optional<int64_t> count =
      r.integer(t, "ev_profile", "count", 1, api::kMaxEvsPerProfile, none);
  const std::optional<int64_t> min_active =
      r.integer(t, "ev_profile", "min_active", 1, api::kMaxEvsPerProfile, 1);
  p.count = static_cast<uint32_t>(count.value_or(1));
  p.min_active = static_cast<uint32_t>(min_active.value_or(1));
  // Compared only when both were read: a refused count or min_active has its own error, and
  // the stand-in value would add a second one about a number the file does not have.
  if (!auto_mode && count && min_active && p.min_active > p.count)
    r.error(&t, fmt::format("ev_profile {}: min_active {} is more than count {}", p.id,
                            p.min_active, p.count));
  if (const toml::node* fs = t.get("fields"))
    read_ev_fields(r, *fs, p);
  else if (!auto_mode)
    r.error(&t,
            fmt::format("ev_profile {} needs 'fields' (mode \"{}\")", p.id, mode.value_or("gen")));
  return p;
}

CcProfile read_cc_profile(FileReader& r, const toml::table& t, std::set<uint64_t>& ids) {
  r.known_keys(t, "cc_profile", {"id", "algorithm", "base_rtt_ns", "target_delay_ns", "max_cwnd"});
  CcProfile c;
  c.id = read_unique_id(r, t, "cc_profile", ids);
  c.algorithm = r.one_of(t, "cc_profile", "algorithm", {"uet-1.0-nscc", "none"}, "uet-1.0-nscc")
                    .value_or("uet-1.0-nscc");
  c.cfg.base_rtt =
      static_cast<uint32_t>(r.integer(t, "cc_profile", "base_rtt_ns", 1, kU32, 50'000).value_or(1));
  c.cfg.target_delay =
      static_cast<uint32_t>(r.integer(t, "cc_profile", "target_delay_ns", 0, kU32, 0).value_or(0));
  c.cfg.max_cwnd =
      static_cast<uint32_t>(r.integer(t, "cc_profile", "max_cwnd", 0, kU32, 0).value_or(0));
  if (c.algorithm == "none")
    for (const char* k : {"base_rtt_ns", "target_delay_ns", "max_cwnd"})
      if (t.get(k))
        r.error(t.get(k), fmt::format("cc_profile {}: '{}' needs an algorithm, "
                                      "not \"none\"",
                                      c.id, k));
  return c;
}

// Reads `path`; nullopt after printing every problem (file:line).
std::optional<ProfileFile> read_profile_file(const std::string& path) {
  const std::optional<toml::table> root = parse_profile_toml(path);
  if (!root) return std::nullopt;
  FileReader r(path);
  for (auto&& [k, v] : *root)
    if (k.str() != "ev_format" && k.str() != "ev_profile" && k.str() != "cc_profile")
      r.error(&v, fmt::format("unknown table or key '{}' (valid: [[ev_format]], [[ev_profile]], "
                              "[[cc_profile]])",
                              k.str()));
  ProfileFile out;
  // Ids are unique per kind of table. An EV profile's format: one of this file's, or one
  // already ONLINE on the device (checked when applying).
  std::set<uint64_t> format_ids, ev_ids, cc_ids;
  for (const toml::table* t : r.tables(*root, "ev_format"))
    out.formats.push_back(read_ev_format(r, *t, format_ids));
  for (const toml::table* t : r.tables(*root, "ev_profile"))
    out.evs.push_back(read_ev_profile(r, *t, ev_ids));
  for (const toml::table* t : r.tables(*root, "cc_profile"))
    out.ccs.push_back(read_cc_profile(r, *t, cc_ids));
  if (out.formats.empty() && out.evs.empty() && out.ccs.empty() && r.errors.empty())
    r.error(nullptr,
            "no profiles: expected [[ev_format]], [[ev_profile]] or [[cc_profile]] "
            "tables (examples/profiles.toml)");
  for (const std::string& e : r.errors)
    fmt::print(stderr, "mrc-ctl: {}\n", e);
  if (!r.errors.empty()) {
    fmt::print(stderr, "mrc-ctl: {}: {} error(s), nothing applied\n", path, r.errors.size());
    return std::nullopt;
  }
  return out;
}

// ---- applying -----------------------------------------------------------------------------
// Two passes: the first only queries the device and finds every conflict with profiles already
// ONLINE (what MODIFY_ONLINE may not change, 5.5) and every EV profile whose format is neither
// in the file nor ONLINE; only a file without any is applied.

bool format_online(Device& d, uint64_t id) {
  mrc_ctl_ev_fmt_profile_attr a{};
  return mrc_ctl_query_ev_fmt_profile(d.mctx, id, &a, MRC_CTL_EV_FMT_PROFILE_STATE) == 0 &&
         a.profile_state == MRC_CTL_PROFILE_ONLINE;
}

// The conflicts of `f` with the device (empty: it can be applied); -1 on a query failure.
int check_against_device(Device& d, const ProfileFile& f, std::vector<std::string>& conflicts) {
  const std::string online = "cannot change while ONLINE (take it OFFLINE first)";
  for (const EvFormat& e : f.formats) {
    mrc_ctl_ev_fmt_profile_attr a{};
    if (mrc_ctl_query_ev_fmt_profile(d.mctx, e.id, &a, MRC_CTL_EV_FMT_PROFILE_STATE) != 0)
      return die(fmt::format("ev_format {} query", e.id)), -1;
    if (a.profile_state != MRC_CTL_PROFILE_ONLINE) continue;
    // A format has nothing MODIFY_ONLINE may change (5.5): it must be what the file says.
    std::vector<mrc_ctl_ev_fmt_field> have(api::kMaxProfileFields);
    a.ev_fmt_op = {MRC_CTL_EV_FMT_OP_QUERY_FIELDS, have.data(), static_cast<int>(have.size())};
    if (mrc_ctl_query_ev_fmt_profile(d.mctx, e.id, &a,
                                     MRC_CTL_EV_FMT_PROFILE_MODE | MRC_CTL_EV_FMT_PROFILE_OP) != 0)
      return die(fmt::format("ev_format {} query", e.id)), -1;
    have.resize(static_cast<size_t>(a.ev_fmt_op.fmt_field_count));
    bool same = a.ev_fmt_mode == e.mode && have.size() == e.widths.size();
    for (size_t i = 0; same && i < have.size(); ++i)
      same = have[i].width == e.widths[i].width;
    if (!same) conflicts.push_back(fmt::format("ev_format {}: mode or widths {}", e.id, online));
  }
  for (const EvProfile& p : f.evs) {
    if (p.mode != MRC_CTL_EV_MODE_AUTO) {
      bool in_file = false;
      for (const EvFormat& e : f.formats)
        in_file = in_file || e.id == p.format;
      if (!in_file && !format_online(d, p.format))
        conflicts.push_back(
            fmt::format("ev_profile {}: format {} is neither in the file nor ONLINE on the device",
                        p.id, p.format));
    }
    mrc_ctl_ev_profile_attr have{};
    if (mrc_ctl_query_ev_profile(d.mctx, p.id, &have,
                                 MRC_CTL_EV_PROFILE_STATE | MRC_CTL_EV_PROFILE_MODE |
                                     MRC_CTL_EV_PROFILE_FMT_ID | MRC_CTL_EV_PROFILE_COUNT |
                                     MRC_CTL_EV_PROFILE_MIN_ACTIVE) != 0)
      return die(fmt::format("ev_profile {} query", p.id)), -1;
    if (have.profile_state != MRC_CTL_PROFILE_ONLINE) continue;
    // MODIFY_ONLINE (5.5): the fields may change (QPs using the profile follow); mode, format,
    // count and min_active must be what the file says.
    const bool auto_mode = p.mode == MRC_CTL_EV_MODE_AUTO;
    if (have.ev_mode != p.mode || have.ev_min_active != p.min_active ||
        (!auto_mode && (have.ev_fmt_profile_id != p.format || have.ev_count != p.count)))
      conflicts.push_back(
          fmt::format("ev_profile {}: mode, format, count or min_active {}", p.id, online));
  }
  for (const CcProfile& c : f.ccs) {
    mrc_ctl_cc_profile_attr have{};
    if (mrc_ctl_query_cc_profile(d.mctx, c.id, &have,
                                 MRC_CTL_CC_PROFILE_STATE | MRC_CTL_CC_PROFILE_ALGORITHM) != 0)
      return die(fmt::format("cc_profile {} query", c.id)), -1;
    if (have.profile_state != MRC_CTL_PROFILE_ONLINE) continue;
    // MODIFY_ONLINE (5.5): CONFIG may change (QPs using the profile are reconfigured in place),
    // the algorithm not.
    const std::string had = have.algorithm ? have.algorithm : "none";
    if (had != c.algorithm)
      conflicts.push_back(fmt::format("cc_profile {}: algorithm {}", c.id, online));
  }
  return 0;
}

int apply(Device& d, const ProfileFile& f) {
  for (EvFormat e : f.formats) {
    if (format_online(d, e.id)) {
      fmt::print("ev_format {} online (unchanged)\n", e.id);
      continue;
    }
    mrc_ctl_ev_fmt_profile_attr a{};
    a.profile_state = MRC_CTL_PROFILE_OFFLINE;
    a.ev_fmt_mode = e.mode;
    a.ev_fmt_op = {MRC_CTL_EV_FMT_OP_MODIFY_FIELDS, e.widths.data(),
                   static_cast<int>(e.widths.size())};
    if (mrc_ctl_modify_ev_fmt_profile(d.mctx, e.id, &a,
                                      MRC_CTL_EV_FMT_PROFILE_STATE | MRC_CTL_EV_FMT_PROFILE_MODE |
                                          MRC_CTL_EV_FMT_PROFILE_OP) != 0)
      return die(fmt::format("ev_format {} to OFFLINE", e.id));
    a.profile_state = MRC_CTL_PROFILE_ONLINE;
    if (mrc_ctl_modify_ev_fmt_profile(d.mctx, e.id, &a, MRC_CTL_EV_FMT_PROFILE_STATE) != 0)
      return die(fmt::format("ev_format {} to ONLINE", e.id));
    fmt::print("ev_format {} online\n", e.id);
  }
  for (EvProfile p : f.evs) {
    mrc_ctl_ev_profile_attr a{};
    a.profile_state = MRC_CTL_PROFILE_OFFLINE;
    a.ev_mode = p.mode;
    a.ev_fmt_profile_id = p.format;
    a.ev_count = p.count;
    a.ev_min_active = p.min_active;
    a.ev_event_mask = MRC_CTL_EV_GOOD | MRC_CTL_EV_ASSUMED_BAD;
    a.ev_fields_op = {MRC_CTL_EV_FIELDS_OP_MODIFY_FIELDS, p.fields.data(),
                      static_cast<int>(p.fields.size())};
    const bool auto_mode = p.mode == MRC_CTL_EV_MODE_AUTO;
    mrc_ctl_ev_profile_attr have{};
    if (mrc_ctl_query_ev_profile(d.mctx, p.id, &have, MRC_CTL_EV_PROFILE_STATE) != 0)
      return die(fmt::format("ev_profile {} query", p.id));
    if (have.profile_state == MRC_CTL_PROFILE_ONLINE) {
      if (!auto_mode &&
          mrc_ctl_modify_ev_profile(d.mctx, p.id, &a, MRC_CTL_EV_PROFILE_EV_FIELDS_OP) != 0)
        return die(fmt::format("ev_profile {} fields (ONLINE)", p.id));
      fmt::print("ev_profile {} updated online\n", p.id);
      continue;
    }
    int mask = MRC_CTL_EV_PROFILE_STATE | MRC_CTL_EV_PROFILE_MODE | MRC_CTL_EV_PROFILE_MIN_ACTIVE |
               MRC_CTL_EV_PROFILE_EVENT_MASK;
    if (!auto_mode)
      mask |=
          MRC_CTL_EV_PROFILE_FMT_ID | MRC_CTL_EV_PROFILE_COUNT | MRC_CTL_EV_PROFILE_EV_FIELDS_OP;
    if (mrc_ctl_modify_ev_profile(d.mctx, p.id, &a, mask) != 0)
      return die(fmt::format("ev_profile {} to OFFLINE", p.id));
    a.profile_state = MRC_CTL_PROFILE_ONLINE;
    if (mrc_ctl_modify_ev_profile(d.mctx, p.id, &a, MRC_CTL_EV_PROFILE_STATE) != 0)
      return die(fmt::format("ev_profile {} to ONLINE", p.id));
    fmt::print("ev_profile {} online\n", p.id);
  }
  for (CcProfile c : f.ccs) {
    const bool none = c.algorithm == "none";
    mrc_ctl_cc_profile_attr a{};
    a.algorithm = none ? nullptr : c.algorithm.c_str();
    a.cc_config = none ? nullptr : &c.cfg;
    mrc_ctl_cc_profile_attr have{};
    if (mrc_ctl_query_cc_profile(d.mctx, c.id, &have, MRC_CTL_CC_PROFILE_STATE) != 0)
      return die(fmt::format("cc_profile {} query", c.id));
    if (have.profile_state == MRC_CTL_PROFILE_ONLINE) {
      if (mrc_ctl_modify_cc_profile(d.mctx, c.id, &a, MRC_CTL_CC_PROFILE_CONFIG) != 0)
        return die(fmt::format("cc_profile {} config (ONLINE)", c.id));
      fmt::print("cc_profile {} updated online\n", c.id);
      continue;
    }
    a.profile_state = MRC_CTL_PROFILE_OFFLINE;
    if (mrc_ctl_modify_cc_profile(d.mctx, c.id, &a,
                                  MRC_CTL_CC_PROFILE_STATE | MRC_CTL_CC_PROFILE_ALGORITHM |
                                      MRC_CTL_CC_PROFILE_CONFIG) != 0)
      return die(fmt::format("cc_profile {} to OFFLINE", c.id));
    a.profile_state = MRC_CTL_PROFILE_ONLINE;
    if (mrc_ctl_modify_cc_profile(d.mctx, c.id, &a, MRC_CTL_CC_PROFILE_STATE) != 0)
      return die(fmt::format("cc_profile {} to ONLINE", c.id));
    fmt::print("cc_profile {} online\n", c.id);
  }
  return 0;
}

const char* state_name(int s) {
  return s == MRC_CTL_EV_GOOD          ? "good"
         : s == MRC_CTL_EV_ASSUMED_BAD ? "assumed_bad"
         : s == MRC_CTL_EV_DENIED      ? "denied"
                                       : "unknown";
}

const char* profile_state_name(int s) {
  return s == MRC_CTL_PROFILE_ONLINE ? "ONLINE" : s == MRC_CTL_PROFILE_OFFLINE ? "OFFLINE" : "INIT";
}

std::string ev_hex(const mrc_ctl_ev& ev) {
  int last = 0;
  for (int i = 0; i < MRC_CTL_EV_MAX_BYTES; ++i)
    if (ev.val[i]) last = i;
  std::string s;
  for (int i = 0; i <= std::max(last, 3); ++i)
    s += fmt::format("{:02x}", ev.val[i]);
  return s;
}

int show(Device& d, uint64_t id) {
  mrc_ctl_ev_profile_attr a{};
  if (mrc_ctl_query_ev_profile(
          d.mctx, id, &a,
          MRC_CTL_EV_PROFILE_STATE | MRC_CTL_EV_PROFILE_MODE | MRC_CTL_EV_PROFILE_COUNT) != 0)
    return die(fmt::format("ev_profile {} query", id));
  if (a.profile_state == MRC_CTL_PROFILE_INIT) {
    fmt::print(stderr,
               "mrc-ctl: ev_profile {} is not configured on this node (state INIT): "
               "'mrc-ctl apply FILE' configures profiles (examples/profiles.toml)\n",
               id);
    return 1;
  }
  if (a.ev_mode == MRC_CTL_EV_MODE_AUTO) {
    fmt::print("ev_profile {} state={} mode=auto (the device's own EVs: no array)\n", id,
               profile_state_name(a.profile_state));
    return 0;
  }
  const int mask = MRC_CTL_EV_PROFILE_STATE | MRC_CTL_EV_PROFILE_MODE | MRC_CTL_EV_PROFILE_COUNT |
                   MRC_CTL_EV_PROFILE_EV_OP;
  a.ev_op = {MRC_CTL_EV_OP_QUERY_EV_ARRAY, nullptr, 0};
  if (mrc_ctl_query_ev_profile(d.mctx, id, &a, mask) != 0 && errno != E2BIG)
    return die(fmt::format("ev_profile {} EV array", id));
  std::vector<mrc_ctl_ev_op_entry> entries(static_cast<size_t>(std::max(0, a.ev_op.entry_count)));
  a.ev_op = {MRC_CTL_EV_OP_QUERY_EV_ARRAY, entries.data(), static_cast<int>(entries.size())};
  if (mrc_ctl_query_ev_profile(d.mctx, id, &a, mask) != 0)
    return die(fmt::format("ev_profile {} EV array", id));
  fmt::print("ev_profile {} state={} count={}\n", id, profile_state_name(a.profile_state),
             a.ev_count);
  for (size_t i = 0; i < entries.size(); ++i)
    fmt::print("  {:4} port {} ev {} {}\n", i, entries[i].ev.port, ev_hex(entries[i].ev),
               state_name(entries[i].state));
  return 0;
}

int events(Device& d, double seconds) {
  mrc_cq* cq = mrc_ctl_create_ev_event_cq(d.mctx, 1024, nullptr, nullptr, 0);
  if (!cq) return die("create EV event CQ");
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  mrc_ctl_ev_event ev[64];
  while (std::chrono::steady_clock::now() < end) {
    const int n = mrc_ctl_poll_ev_event(cq, 64, ev);
    if (n < 0) break;
    for (int i = 0; i < n; ++i)
      fmt::print("profile {} port {} ev {} -> {} dropped {}\n", ev[i].profile_id, ev[i].ev.port,
                 ev_hex(ev[i].ev), state_name(ev[i].state), ev[i].drop_count);
    std::fflush(stdout);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  mrc_destroy_cq(cq);
  return 0;
}

int probe(Device& d, int port, const std::string& dst, int count) {
  in6_addr dgid{};
  if (inet_pton(AF_INET6, dst.c_str(), &dgid) != 1) {
    return mrc::tools::fail_setup("mrc-ctl",
                                  fmt::format("probe --dst {}: not an IPv6 address", dst));
  }
  std::vector<mrc_ctl_ep_req> req(static_cast<size_t>(count));
  for (int i = 0; i < count; ++i) {
    req[i].req_id = static_cast<uint16_t>(i + 1);
    if (ibv_query_gid(d.ctx, static_cast<uint8_t>(port), 0, &req[i].sgid) != 0)
      return die(fmt::format("local GID of port {}", port));
    std::memcpy(req[i].dgid.raw, &dgid, 16);
    req[i].ev_fmt_mode = MRC_CTL_EV_FMT_MODE_STEV;
    req[i].req_ev.port = static_cast<uint8_t>(port);
  }
  std::vector<mrc_ctl_ep_rsp> rsp(req.size());
  int n = 0;
  const int rc = mrc_ctl_ep_batch_send_wait(d.mctx, 0, MRC_CTL_EP_OP_EV_PROBE, req.data(), count,
                                            1'000'000'000, rsp.data(), &n);
  for (int i = 0; i < n; ++i)
    fmt::print("req {} port {} rtt_ns={}\n", rsp[i].req_id, rsp[i].port, rsp[i].rtt);
  if (rc == 0) return 0;
  fmt::print(stderr, "mrc-ctl: probe: {} of {} answered within 1 s{}\n", n, count,
             n == 0 ? " (the target answers only while a process holds its device open)" : "");
  return 1;
}

// A port number the device has (1..ports), else exit status 2 after a message.
int check_port(const Device& d, int port, const char* what) {
  if (port >= 1 && static_cast<uint32_t>(port) <= d.ports) return 0;
  return mrc::tools::fail_setup(
      "mrc-ctl", fmt::format("{}: port {} does not exist: this device has {} port{} (1..{})", what,
                             port, d.ports, d.ports == 1 ? "" : "s", d.ports));
}

}  // namespace

namespace {

// The command line: each subcommand and its options.
struct CtlArgs {
  CLI::App* apply = nullptr;
  CLI::App* show = nullptr;
  CLI::App* events = nullptr;
  CLI::App* probe = nullptr;
  CLI::App* port = nullptr;
  std::string file;
  bool check_only = false;
  uint64_t show_id = 0;
  double seconds = 10;
  int probe_port = 1, probe_count = 1;
  std::string probe_dst;
  int port_num = 0;
  std::string port_action;
};

void add_subcommands(CLI::App& app, CtlArgs& a) {
  a.apply = app.add_subcommand(
      "apply",
      "Check a TOML profile file as a whole, then configure its [[ev_format]], "
      "[[ev_profile]] and [[cc_profile]] profiles and bring them ONLINE (nothing is "
      "applied if the file has an error)");
  a.apply->add_option("file", a.file, "Profile file (TOML), e.g. examples/profiles.toml")
      ->required();
  a.apply->add_flag("--check", a.check_only, "Only check the file (no device needed)");
  a.show = app.add_subcommand("show", "EV array and states of an EV profile");
  a.show->add_option("id", a.show_id, "EV profile id")->required();
  a.events = app.add_subcommand("events", "Print EV events as they arrive");
  a.events->add_option("--seconds", a.seconds, "How long to listen (0.001 to 86400)")
      ->capture_default_str()
      ->check(CLI::Range(0.001, 86400.0));
  a.probe = app.add_subcommand("probe", "EV probes to a node, RTT in ns");
  a.probe->add_option("--port", a.probe_port, "Local port (plane) to probe from")
      ->capture_default_str()
      ->check(CLI::Range(1, 255));
  a.probe->add_option("--dst", a.probe_dst, "The target node's IPv6 address")->required();
  a.probe->add_option("--count", a.probe_count, "Probes to send (1 to 1024)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  a.port = app.add_subcommand("port", "Enable or disable a port (plane) of this node");
  a.port->add_option("port", a.port_num, "Port number (1..ports)")
      ->required()
      ->check(CLI::Range(1, 255));
  a.port->add_option("action", a.port_action, "enable or disable")
      ->required()
      ->check(CLI::IsMember({"enable", "disable"}));
}

// apply: the file checked as a whole (--check stops there), then against the profiles already
// ONLINE on the device, then applied; any problem and nothing is.
int run_apply(const CtlArgs& a) {
  const std::optional<ProfileFile> profiles = read_profile_file(a.file);
  if (!profiles) return 2;
  if (a.check_only) {
    fmt::print("{}: {} ev_format, {} ev_profile, {} cc_profile: ok\n", a.file,
               profiles->formats.size(), profiles->evs.size(), profiles->ccs.size());
    return 0;
  }
  Device d;
  if (const int rc = d.open(); rc != 0) return rc;
  std::vector<std::string> conflicts;
  if (check_against_device(d, *profiles, conflicts) != 0) return 1;
  for (const std::string& c : conflicts)
    fmt::print(stderr, "mrc-ctl: {}\n", c);
  if (!conflicts.empty()) {
    fmt::print(stderr, "mrc-ctl: {}: nothing applied\n", a.file);
    return 1;
  }
  return apply(d, *profiles);
}

// port N enable|disable.
int set_port_admin(Device& d, int port, const std::string& action) {
  if (const int rc = check_port(d, port, "port"); rc != 0) return rc;
  mrc_ctl_port_attr attr{action == "enable" ? MRC_CTL_PORT_ADMIN_ENABLED
                                            : MRC_CTL_PORT_ADMIN_DISABLED};
  if (mrc_ctl_modify_port(d.mctx, static_cast<uint8_t>(port), &attr, MRC_CTL_PORT_ADMIN_STATE) != 0)
    return die(fmt::format("port {} {}", port, action));
  fmt::print("port {} {}d\n", port, action);
  return 0;
}

// show, events, probe and port: each needs the device.
int run_device_command(const CtlArgs& a) {
  Device d;
  if (const int rc = d.open(); rc != 0) return rc;
  if (*a.show) return show(d, a.show_id);
  if (*a.events) return events(d, a.seconds);
  if (*a.probe) {
    if (const int rc = check_port(d, a.probe_port, "probe --port"); rc != 0) return rc;
    return probe(d, a.probe_port, a.probe_dst, a.probe_count);
  }
  if (*a.port) return set_port_admin(d, a.port_num, a.port_action);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "mrc-ctl: the node's MRC controller (OCP mrc_ctl.h) for the mrc_soft0 device.\n"
      "The device is configured by MRC_SOFT_PORTS or $MRC_SOFT_CONFIG "
      "(docs/c-api.md); every command except 'apply --check' needs it and "
      "CAP_NET_ADMIN.",
      "mrc-ctl"};
  mrc::tools::set_exit_codes(app, "0 done, 1 the device is not configured or refused a change");
  app.require_subcommand(1);
  CtlArgs args;
  add_subcommands(app, args);
  if (const int rc = mrc::tools::parse(app, argc, argv); rc >= 0) return rc;
  if (*args.apply) return run_apply(args);
  return run_device_command(args);
}
