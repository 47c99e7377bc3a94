// The engine's structured event log (transport/event_log.h): what a verified transfer through
// a dropped packet and a blackholed path records, and the JSON line of each kind of record.
#include "transport/event_log.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "support/pair.h"

namespace mrc {
namespace {

using testnet::FaultAction;
using testnet::PairConfig;
using testnet::PairNet;
using testnet::ScriptedFault;
using testnet::Workload;

struct Collect : EventLog {
  std::vector<LogRecord> records;
  void record(const LogRecord& r) override { records.push_back(r); }
  size_t count(LogKind k) const {
    return static_cast<size_t>(std::count_if(records.begin(), records.end(),
                                             [k](const LogRecord& r) { return r.kind == k; }));
  }
};

Workload writes(int count, uint64_t size) {
  Workload w;
  for (int i = 0; i < count; ++i)
    w.messages.push_back({WrOpcode::kWrite, size});
  return w;
}

// Four 16-packet writes, the fourth data packet dropped once, the 21st trimmed once, and a path
// blackholed: the log has every packet the engines sent and received, the loss with its PSN,
// the window cut of the trimmed packet's resend and the path's state change, in time order.
TEST(EventLog, engine__records_sends_receives_the_loss_and_the_path_event_of_a_transfer) {
  const Workload w = writes(4, 16 * 4096);
  PairConfig c;
  c.region_bytes = testnet::region_bytes_for(w);
  // A trim holds loss marking on every path for a while (PathPolicy::trim_hold): off, so that
  // the blackholed path is marked while the trimmed packet's window cut is also in the run.
  c.path_policy.trim_hold = 0;
  auto pn = testnet::make_pair_net(testnet::NetConfig{}, c);
  ASSERT_TRUE(pn);
  const uint32_t victim = psn_add(c.psn_a, 3);
  ScriptedFault drop;
  drop.match.from_host = 0;
  drop.match.kind = testnet::PacketKind::kData;
  drop.action = FaultAction::kDrop;
  drop.psns = {victim};
  pn->net->add_scripted(drop);
  ScriptedFault trim = drop;  // a trimmed packet's resend cuts the window
  trim.action = FaultAction::kTrim;
  trim.psns = {psn_add(c.psn_a, 20)};
  pn->net->add_scripted(trim);
  pn->net->blackhole(1, 5);
  Collect a, b;
  pn->net->engine(0).set_event_log(&a);
  pn->net->engine(1).set_event_log(&b);
  const auto r = testnet::run_workload(*pn->net, pn->pair, w, ms(50));
  for (const std::string& f : r.failures)
    ADD_FAILURE() << f;
  ASSERT_TRUE(r.all_completed);

  // Every packet an engine sent is a record, each data packet's first transmission once.
  EXPECT_EQ(a.count(LogKind::kPacketSent), r.a.data_sent + r.a.retransmits + r.a.acks_sent +
                                               r.a.probes_sent + r.a.probe_replies_sent +
                                               r.a.nacks_sent + r.a.cnps_sent);
  EXPECT_GT(b.count(LogKind::kPacketReceived), 0u);
  EXPECT_GT(a.count(LogKind::kCcUpdate), 0u);
  // The dropped PSN was declared lost once and resent.
  size_t lost_victim = 0, resent_victim = 0;
  for (const LogRecord& x : a.records) {
    if (x.kind == LogKind::kPacketLost && x.psn == victim) ++lost_victim;
    if (x.kind == LogKind::kPacketSent && x.psn == victim && x.retransmit) ++resent_victim;
  }
  EXPECT_EQ(lost_victim, 1u);
  EXPECT_GE(resent_victim, 1u);
  EXPECT_EQ(a.count(LogKind::kPacketLost), r.a.losses_detected);
  // The blackholed path went out of use: an event naming it.
  EXPECT_TRUE(std::any_of(a.records.begin(), a.records.end(), [](const LogRecord& x) {
    return x.kind == LogKind::kEvent && x.event.type == EventType::kEvStateChange &&
           x.event.ev_index == 5 && x.event.to != ev::EvState::kGood;
  }));
  // Received packets name their verdict; those the responder used are "ok".
  EXPECT_TRUE(std::any_of(b.records.begin(), b.records.end(), [](const LogRecord& x) {
    return x.kind == LogKind::kPacketReceived && x.verdict == Error::kOk &&
           x.opcode == wire::Opcode::kWriteOnly;
  }));
  for (const Collect* log : {&a, &b})
    EXPECT_TRUE(
        std::is_sorted(log->records.begin(), log->records.end(),
                       [](const LogRecord& x, const LogRecord& y) { return x.time < y.time; }));

  // Logging changes nothing: the same run without logs sends and loses exactly the same.
  auto again = testnet::make_pair_net(testnet::NetConfig{}, c);
  ASSERT_TRUE(again);
  again->net->add_scripted(drop);
  again->net->add_scripted(trim);
  again->net->blackhole(1, 5);
  EXPECT_EQ(again->net->engine(0).event_log(), nullptr);
  const auto quiet = testnet::run_workload(*again->net, again->pair, w, ms(50));
  ASSERT_TRUE(quiet.all_completed);
  EXPECT_EQ(quiet.a.data_sent, r.a.data_sent);
  EXPECT_EQ(quiet.a.retransmits, r.a.retransmits);
  EXPECT_EQ(quiet.a.losses_detected, r.a.losses_detected);
  EXPECT_EQ(quiet.a.ev_state_changes, r.a.ev_state_changes);
  EXPECT_EQ(quiet.b.acks_sent, r.b.acks_sent);
}

// Each kind of record is one JSON object on one line, with the keys docs/engine.md lists.
TEST(EventLog, append_log_json__writes_one_line_of_json_per_record_with_its_keys) {
  std::vector<LogRecord> rs(7);
  rs[0].kind = LogKind::kPacketSent;
  rs[0].opcode = wire::Opcode::kWriteOnly;
  rs[0].psn = 7;
  rs[0].retransmit = true;
  rs[1].kind = LogKind::kPacketReceived;
  rs[1].opcode = wire::Opcode::kAck;
  rs[1].verdict = Error::kUnknownQp;
  rs[2].kind = LogKind::kPacketLost;
  rs[2].cause = LossCause::kRack;
  rs[3].kind = LogKind::kTimeout;
  rs[4].kind = LogKind::kCcUpdate;
  rs[4].cwnd = 65536;
  rs[5].kind = LogKind::kEvent;
  rs[5].event.type = EventType::kEvSwap;
  rs[5].event.to = ev::EvState::kAssumedBad;
  rs[6].kind = LogKind::kEvent;
  rs[6].event.type = EventType::kPortChange;
  const std::vector<std::pair<std::string, std::vector<std::string>>> want = {
      {"packet_sent", {"packet", "psn", "ev", "port", "bytes", "retransmit"}},
      {"packet_received", {"packet", "psn", "ev", "port", "bytes", "ecn_ce", "trimmed", "verdict"}},
      {"packet_lost", {"psn", "ev", "port", "bytes", "cause"}},
      {"timeout", {"psn", "inflight"}},
      {"cc_update", {"cwnd", "inflight"}},
      {"path_swap", {"ev", "port", "from", "to", "replaced"}},
      {"port_change", {"port", "up"}},
  };
  for (size_t i = 0; i < rs.size(); ++i) {
    rs[i].time = 1000 + i;
    rs[i].qpn = 9;
    std::string line;
    append_log_json(line, rs[i], i == 0 ? 3 : -1);
    ASSERT_EQ(line.back(), '\n');
    ASSERT_EQ(std::count(line.begin(), line.end(), '\n'), 1) << line;
    const auto j = nlohmann::json::parse(line, nullptr, false);
    ASSERT_TRUE(j.is_object()) << line;
    EXPECT_EQ(j.value("event", ""), want[i].first) << line;
    EXPECT_EQ(j.value("time_ps", 0u), 1000 + i);
    EXPECT_EQ(j.value("qpn", 0u), 9u);
    for (const std::string& key : want[i].second)
      EXPECT_TRUE(j.contains(key)) << want[i].first << " lacks " << key << ": " << line;
    EXPECT_EQ(j.contains("node"), i == 0) << line;
  }
  std::string line;
  append_log_json(line, rs[1]);
  EXPECT_NE(line.find("\"verdict\":\"unknown_qp\""), std::string::npos) << line;
  line.clear();
  append_log_json(line, rs[2]);
  EXPECT_NE(line.find("\"cause\":\"rack\""), std::string::npos) << line;
}

}  // namespace
}  // namespace mrc
