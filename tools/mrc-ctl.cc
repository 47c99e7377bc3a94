// mrc-ctl: the node's MRC controller over the OCP mrc_ctl.h API (docs/c-api.md).
//   mrc-ctl apply FILE.toml        configure EV format / EV / CC profiles and bring them ONLINE;
//                                  profiles already ONLINE get the changes MODIFY_ONLINE allows
//                                  (EV fields, CC configuration), applied to live QPs
//   mrc-ctl show EV_PROFILE_ID     EV array with states
//   mrc-ctl events [--seconds N]   print EV events as they arrive
//   mrc-ctl probe --port P --dst ADDR [--count N]   EV probes, RTT in ns
//   mrc-ctl port P enable|disable
#include <arpa/inet.h>
#include <fmt/core.h>
#include <mrc_ctl.h>

#include <toml++/toml.h>
#include <CLI/CLI.hpp>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

namespace {

int die(const std::string& what) {
  fmt::print(stderr, "mrc-ctl: {}: {}\n", what, std::strerror(errno));
  return 1;
}

struct Session {
  ibv_context* ctx = nullptr;
  mrc_context* mctx = nullptr;
  bool open() {
    int n = 0;
    ibv_device** list = ibv_get_device_list(&n);
    if (n > 0) ctx = ibv_open_device(list[0]);
    ibv_free_device_list(list);
    if (!ctx) return false;
    mrc_context_attr a{MRC_API_CURRENT_VERSION, MRC_VENDOR_API_CURRENT_VERSION};
    mctx = mrc_create_context(ctx, &a);
    return mctx != nullptr;
  }
  ~Session() {
    if (mctx) mrc_destroy_context(mctx);
    if (ctx) ibv_close_device(ctx);
  }
};

uint32_t mode_bits(const std::string& s, bool fmt) {
  if (fmt)
    return s == "stev"   ? MRC_CTL_EV_FMT_MODE_STEV
           : s == "srv6" ? MRC_CTL_EV_FMT_MODE_SRV6
                         : MRC_CTL_EV_FMT_MODE_UDP;
  return s == "auto"  ? MRC_CTL_EV_MODE_AUTO
         : s == "exp" ? MRC_CTL_EV_MODE_EXP
                      : MRC_CTL_EV_MODE_GEN;
}

int fail_online(const std::string& what) {
  fmt::print(stderr, "mrc-ctl: {}: cannot change while ONLINE (take it OFFLINE first)\n", what);
  return 1;
}

int apply_file(Session& s, const std::string& path) {
  toml::table t;
  try {
    t = toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    fmt::print(stderr, "mrc-ctl: {}: {}\n", path, e.description());
    return 1;
  }
  if (auto* arr = t["ev_format"].as_array())
    for (auto& node : *arr) {
      auto& p = *node.as_table();
      const uint64_t id = p["id"].value_or<int64_t>(0);
      std::vector<mrc_ctl_ev_fmt_field> fields;
      if (auto* w = p["widths"].as_array())
        for (auto& x : *w)
          fields.push_back({static_cast<uint8_t>(x.value_or<int64_t>(0))});
      mrc_ctl_ev_fmt_profile_attr a{};
      const auto mode =
          static_cast<mrc_ctl_ev_fmt_mode>(mode_bits(p["mode"].value_or<std::string>("udp"), true));
      if (mrc_ctl_query_ev_fmt_profile(s.mctx, id, &a, MRC_CTL_EV_FMT_PROFILE_STATE) != 0)
        return die(fmt::format("ev_format {} query", id));
      if (a.profile_state == MRC_CTL_PROFILE_ONLINE) {
        // A format has nothing MODIFY_ONLINE may change (5.5): it must be what the file says.
        std::vector<mrc_ctl_ev_fmt_field> have(16);
        a.ev_fmt_op = {MRC_CTL_EV_FMT_OP_QUERY_FIELDS, have.data(), static_cast<int>(have.size())};
        if (mrc_ctl_query_ev_fmt_profile(
                s.mctx, id, &a, MRC_CTL_EV_FMT_PROFILE_MODE | MRC_CTL_EV_FMT_PROFILE_OP) != 0)
          return die(fmt::format("ev_format {} query", id));
        have.resize(static_cast<size_t>(a.ev_fmt_op.fmt_field_count));
        bool same = a.ev_fmt_mode == mode && have.size() == fields.size();
        for (size_t i = 0; same && i < have.size(); ++i)
          same = have[i].width == fields[i].width;
        if (!same) return fail_online(fmt::format("ev_format {}", id));
        fmt::print("ev_format {} online (unchanged)\n", id);
        continue;
      }
      a.profile_state = MRC_CTL_PROFILE_OFFLINE;
      a.ev_fmt_mode = mode;
      a.ev_fmt_op = {MRC_CTL_EV_FMT_OP_MODIFY_FIELDS, fields.data(),
                     static_cast<int>(fields.size())};
      if (mrc_ctl_modify_ev_fmt_profile(s.mctx, id, &a,
                                        MRC_CTL_EV_FMT_PROFILE_STATE | MRC_CTL_EV_FMT_PROFILE_MODE |
                                            MRC_CTL_EV_FMT_PROFILE_OP) != 0)
        return die(fmt::format("ev_format {} to OFFLINE", id));
      a.profile_state = MRC_CTL_PROFILE_ONLINE;
      if (mrc_ctl_modify_ev_fmt_profile(s.mctx, id, &a, MRC_CTL_EV_FMT_PROFILE_STATE) != 0)
        return die(fmt::format("ev_format {} to ONLINE", id));
      fmt::print("ev_format {} online\n", id);
    }
  if (auto* arr = t["ev_profile"].as_array())
    for (auto& node : *arr) {
      auto& p = *node.as_table();
      const uint64_t id = p["id"].value_or<int64_t>(0);
      std::vector<mrc_ctl_ev_field> fields;
      if (auto* fa = p["fields"].as_array())
        for (auto& f : *fa) {
          auto& ft = *f.as_table();
          fields.push_back({static_cast<uint32_t>(ft["width"].value_or<int64_t>(0)),
                            static_cast<uint32_t>(ft["init_val"].value_or<int64_t>(0)),
                            static_cast<uint32_t>(ft["min_val"].value_or<int64_t>(0)),
                            static_cast<uint32_t>(ft["max_val"].value_or<int64_t>(0)),
                            static_cast<uint32_t>(ft["mask"].value_or<int64_t>(0))});
        }
      mrc_ctl_ev_profile_attr a{};
      a.profile_state = MRC_CTL_PROFILE_OFFLINE;
      a.ev_mode =
          static_cast<mrc_ctl_ev_mode>(mode_bits(p["mode"].value_or<std::string>("gen"), false));
      a.ev_fmt_profile_id = p["format"].value_or<int64_t>(0);
      a.ev_count = static_cast<uint32_t>(p["count"].value_or<int64_t>(0));
      a.ev_min_active = static_cast<uint32_t>(p["min_active"].value_or<int64_t>(1));
      a.ev_event_mask = MRC_CTL_EV_GOOD | MRC_CTL_EV_ASSUMED_BAD;
      a.ev_fields_op = {MRC_CTL_EV_FIELDS_OP_MODIFY_FIELDS, fields.data(),
                        static_cast<int>(fields.size())};
      mrc_ctl_ev_profile_attr have{};
      if (mrc_ctl_query_ev_profile(s.mctx, id, &have,
                                   MRC_CTL_EV_PROFILE_STATE | MRC_CTL_EV_PROFILE_MODE |
                                       MRC_CTL_EV_PROFILE_FMT_ID | MRC_CTL_EV_PROFILE_COUNT |
                                       MRC_CTL_EV_PROFILE_MIN_ACTIVE) != 0)
        return die(fmt::format("ev_profile {} query", id));
      if (have.profile_state == MRC_CTL_PROFILE_ONLINE) {
        // MODIFY_ONLINE (5.5): the fields may change (QPs using the profile follow); mode,
        // format, count and min_active must be what the file says.
        const bool auto_mode = a.ev_mode == MRC_CTL_EV_MODE_AUTO;
        if (have.ev_mode != a.ev_mode || have.ev_min_active != a.ev_min_active ||
            (!auto_mode &&
             (have.ev_fmt_profile_id != a.ev_fmt_profile_id || have.ev_count != a.ev_count)))
          return fail_online(fmt::format("ev_profile {} mode, format, count or min_active", id));
        if (!auto_mode &&
            mrc_ctl_modify_ev_profile(s.mctx, id, &a, MRC_CTL_EV_PROFILE_EV_FIELDS_OP) != 0)
          return die(fmt::format("ev_profile {} fields (ONLINE)", id));
        fmt::print("ev_profile {} updated online\n", id);
        continue;
      }
      int mask = MRC_CTL_EV_PROFILE_STATE | MRC_CTL_EV_PROFILE_MODE |
                 MRC_CTL_EV_PROFILE_MIN_ACTIVE | MRC_CTL_EV_PROFILE_EVENT_MASK;
      if (a.ev_mode != MRC_CTL_EV_MODE_AUTO)
        mask |=
            MRC_CTL_EV_PROFILE_FMT_ID | MRC_CTL_EV_PROFILE_COUNT | MRC_CTL_EV_PROFILE_EV_FIELDS_OP;
      if (mrc_ctl_modify_ev_profile(s.mctx, id, &a, mask) != 0)
        return die(fmt::format("ev_profile {} to OFFLINE", id));
      a.profile_state = MRC_CTL_PROFILE_ONLINE;
      if (mrc_ctl_modify_ev_profile(s.mctx, id, &a, MRC_CTL_EV_PROFILE_STATE) != 0)
        return die(fmt::format("ev_profile {} to ONLINE", id));
      fmt::print("ev_profile {} online\n", id);
    }
  if (auto* arr = t["cc_profile"].as_array())
    for (auto& node : *arr) {
      auto& p = *node.as_table();
      const uint64_t id = p["id"].value_or<int64_t>(0);
      const std::string algo = p["algorithm"].value_or<std::string>("uet-1.0-nscc");
      mrc_ctl_cc_nscc_cfg cfg{};
      cfg.base_rtt = static_cast<uint32_t>(p["base_rtt_ns"].value_or<int64_t>(50'000));
      cfg.target_delay = static_cast<uint32_t>(p["target_delay_ns"].value_or<int64_t>(0));
      cfg.max_cwnd = static_cast<uint32_t>(p["max_cwnd"].value_or<int64_t>(0));
      mrc_ctl_cc_profile_attr a{};
      a.algorithm = algo == "none" ? nullptr : algo.c_str();
      a.cc_config = algo == "none" ? nullptr : &cfg;
      mrc_ctl_cc_profile_attr have{};
      if (mrc_ctl_query_cc_profile(s.mctx, id, &have,
                                   MRC_CTL_CC_PROFILE_STATE | MRC_CTL_CC_PROFILE_ALGORITHM) != 0)
        return die(fmt::format("cc_profile {} query", id));
      if (have.profile_state == MRC_CTL_PROFILE_ONLINE) {
        // MODIFY_ONLINE (5.5): CONFIG may change (QPs using the profile are reconfigured in
        // place), the algorithm not.
        const std::string had = have.algorithm ? have.algorithm : "none";
        if (had != algo) return fail_online(fmt::format("cc_profile {} algorithm", id));
        if (mrc_ctl_modify_cc_profile(s.mctx, id, &a, MRC_CTL_CC_PROFILE_CONFIG) != 0)
          return die(fmt::format("cc_profile {} config (ONLINE)", id));
        fmt::print("cc_profile {} updated online\n", id);
        continue;
      }
      a.profile_state = MRC_CTL_PROFILE_OFFLINE;
      if (mrc_ctl_modify_cc_profile(s.mctx, id, &a,
                                    MRC_CTL_CC_PROFILE_STATE | MRC_CTL_CC_PROFILE_ALGORITHM |
                                        MRC_CTL_CC_PROFILE_CONFIG) != 0)
        return die(fmt::format("cc_profile {} to OFFLINE", id));
      a.profile_state = MRC_CTL_PROFILE_ONLINE;
      if (mrc_ctl_modify_cc_profile(s.mctx, id, &a, MRC_CTL_CC_PROFILE_STATE) != 0)
        return die(fmt::format("cc_profile {} to ONLINE", id));
      fmt::print("cc_profile {} online\n", id);
    }
  return 0;
}

const char* state_name(int s) {
  return s == MRC_CTL_EV_GOOD          ? "good"
         : s == MRC_CTL_EV_ASSUMED_BAD ? "assumed_bad"
         : s == MRC_CTL_EV_DENIED      ? "denied"
                                       : "unknown";
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

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"mrc-ctl: MRC controller (OCP mrc_ctl.h) for the mrc_soft0 device"};
  app.require_subcommand(1);
  std::string file;
  auto* apply_cmd = app.add_subcommand("apply", "configure profiles from a TOML file");
  apply_cmd->add_option("file", file)->required();
  uint64_t show_id = 0;
  auto* show_cmd = app.add_subcommand("show", "EV array and states of an EV profile");
  show_cmd->add_option("id", show_id)->required();
  double seconds = 10;
  auto* events_cmd = app.add_subcommand("events", "print EV events");
  events_cmd->add_option("--seconds", seconds);
  int probe_port = 1, probe_count = 1;
  std::string probe_dst;
  auto* probe_cmd = app.add_subcommand("probe", "EV probes to a node, RTT in ns");
  probe_cmd->add_option("--port", probe_port);
  probe_cmd->add_option("--dst", probe_dst)->required();
  probe_cmd->add_option("--count", probe_count);
  int port_num = 0;
  std::string port_action;
  auto* port_cmd = app.add_subcommand("port", "enable or disable a port (plane)");
  port_cmd->add_option("port", port_num)->required();
  port_cmd->add_option("action", port_action)
      ->required()
      ->check(CLI::IsMember({"enable", "disable"}));
  CLI11_PARSE(app, argc, argv);

  Session s;
  if (!s.open()) return die("open mrc_soft0");
  if (*apply_cmd) return apply_file(s, file);
  if (*show_cmd) {
    mrc_ctl_ev_profile_attr a{};
    a.ev_op = {MRC_CTL_EV_OP_QUERY_EV_ARRAY, nullptr, 0};
    const int mask = MRC_CTL_EV_PROFILE_STATE | MRC_CTL_EV_PROFILE_MODE | MRC_CTL_EV_PROFILE_COUNT |
                     MRC_CTL_EV_PROFILE_EV_OP;
    if (mrc_ctl_query_ev_profile(s.mctx, show_id, &a, mask) != 0 && errno != E2BIG)
      return die("query");
    std::vector<mrc_ctl_ev_op_entry> entries(static_cast<size_t>(a.ev_op.entry_count));
    a.ev_op = {MRC_CTL_EV_OP_QUERY_EV_ARRAY, entries.data(), static_cast<int>(entries.size())};
    if (mrc_ctl_query_ev_profile(s.mctx, show_id, &a, mask) != 0) return die("query");
    fmt::print("ev_profile {} state={} count={}\n", show_id, static_cast<int>(a.profile_state),
               a.ev_count);
    for (size_t i = 0; i < entries.size(); ++i)
      fmt::print("  {:4} port {} ev {} {}\n", i, entries[i].ev.port, ev_hex(entries[i].ev),
                 state_name(entries[i].state));
    return 0;
  }
  if (*events_cmd) {
    mrc_cq* cq = mrc_ctl_create_ev_event_cq(s.mctx, 1024, nullptr, nullptr, 0);
    if (!cq) return die("create EV event CQ");
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    mrc_ctl_ev_event ev[64];
    while (std::chrono::steady_clock::now() < end) {
      const int n = mrc_ctl_poll_ev_event(cq, 64, ev);
      if (n < 0) break;
      for (int i = 0; i < n; ++i)
        fmt::print("profile {} port {} ev {} -> {} dropped {}\n", ev[i].profile_id, ev[i].ev.port,
                   ev_hex(ev[i].ev), state_name(ev[i].state), ev[i].drop_count);
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    mrc_destroy_cq(cq);
    return 0;
  }
  if (*probe_cmd) {
    std::vector<mrc_ctl_ep_req> req(static_cast<size_t>(probe_count));
    for (int i = 0; i < probe_count; ++i) {
      req[i].req_id = static_cast<uint16_t>(i + 1);
      if (ibv_query_gid(s.ctx, static_cast<uint8_t>(probe_port), 0, &req[i].sgid) != 0)
        return die("local GID");
      if (inet_pton(AF_INET6, probe_dst.c_str(), req[i].dgid.raw) != 1) {
        fmt::print(stderr, "mrc-ctl: bad address {}\n", probe_dst);
        return 1;
      }
      req[i].ev_fmt_mode = MRC_CTL_EV_FMT_MODE_STEV;
      req[i].req_ev.port = static_cast<uint8_t>(probe_port);
    }
    std::vector<mrc_ctl_ep_rsp> rsp(req.size());
    int n = 0;
    const int rc = mrc_ctl_ep_batch_send_wait(s.mctx, 0, MRC_CTL_EP_OP_EV_PROBE, req.data(),
                                              probe_count, 1'000'000'000, rsp.data(), &n);
    for (int i = 0; i < n; ++i)
      fmt::print("req {} port {} rtt_ns={}\n", rsp[i].req_id, rsp[i].port, rsp[i].rtt);
    return rc == 0 ? 0 : die(fmt::format("{} of {} answered", n, probe_count));
  }
  if (*port_cmd) {
    mrc_ctl_port_attr a{port_action == "enable" ? MRC_CTL_PORT_ADMIN_ENABLED
                                                : MRC_CTL_PORT_ADMIN_DISABLED};
    if (mrc_ctl_modify_port(s.mctx, static_cast<uint8_t>(port_num), &a, MRC_CTL_PORT_ADMIN_STATE) !=
        0)
      return die("modify port");
    fmt::print("port {} {}d\n", port_num, port_action);
    return 0;
  }
  return 0;
}
