#include "transport/control.h"

#include <gtest/gtest.h>

#include <array>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "support/path_descs.h"

namespace mrc {
namespace {

using testpaths::paths;

// An owner of control packets for the emit step: which kinds are pending, the path each
// finds, and what the step did.
struct FakeOwner {
  std::array<bool, kControlKinds> pending{};
  std::array<ControlChoice, kControlKinds> choice{};
  std::vector<ControlKind> chosen, filled, after;
};

template <ControlKind K, class After>
auto fake_row(uint64_t EngineCounters::*sent, After after) {
  return control_row(
      K, sent, [](const FakeOwner& o) { return o.pending[static_cast<size_t>(K)]; },
      [](FakeOwner& o, Time, uint32_t) {
        o.chosen.push_back(K);
        return o.choice[static_cast<size_t>(K)];
      },
      [](FakeOwner& o, Time, const ControlChoice& c, TxPacket& out) {
        o.filled.push_back(K);
        out.pkt.bth.psn = static_cast<uint32_t>(c.probe_id);
      },
      after);
}

template <ControlKind K>
void note_after(FakeOwner& o, Time) {
  o.after.push_back(K);
}

auto fake_rows() {
  return std::tuple{
      fake_row<ControlKind::kTrimNack>(&EngineCounters::nacks_sent,
                                       note_after<ControlKind::kTrimNack>),
      fake_row<ControlKind::kAck>(&EngineCounters::acks_sent, note_after<ControlKind::kAck>),
      fake_row<ControlKind::kProbe>(&EngineCounters::probes_sent, NothingAfter{})};
}

void fake_header(FakeOwner&, TxPacket& out, int path) {
  out.ev_index = static_cast<uint16_t>(path);
}

TEST(Control, emit_control__serves_the_first_pending_row_that_finds_a_path) {
  FakeOwner o;
  o.pending[static_cast<size_t>(ControlKind::kAck)] = true;
  o.pending[static_cast<size_t>(ControlKind::kProbe)] = true;
  o.choice[static_cast<size_t>(ControlKind::kAck)] = ControlChoice{3};
  o.choice[static_cast<size_t>(ControlKind::kProbe)] = ControlChoice{1};
  const auto rows = fake_rows();
  EngineCounters c;
  TxPacket out;
  ASSERT_TRUE(emit_control(o, rows, fake_header, c, 0, 0xF, out));
  EXPECT_EQ(o.chosen, std::vector<ControlKind>{ControlKind::kAck});  // the NACK was not pending
  EXPECT_EQ(o.filled, std::vector<ControlKind>{ControlKind::kAck});
  EXPECT_EQ(o.after, std::vector<ControlKind>{ControlKind::kAck});
  EXPECT_EQ(out.ev_index, 3);
  EXPECT_EQ(out.transport_bytes, kAckWireBytes);
  EXPECT_EQ(c.acks_sent, 1u);
  EXPECT_EQ(c.probes_sent, 0u);
}

TEST(Control, emit_control__a_row_without_a_path_leaves_the_next_its_turn) {
  FakeOwner o;
  o.pending.fill(true);
  o.choice[static_cast<size_t>(ControlKind::kProbe)] = ControlChoice{2, false, 77};
  const auto rows = fake_rows();
  EngineCounters c;
  TxPacket out;
  ASSERT_TRUE(emit_control(o, rows, fake_header, c, 0, 0xF, out));
  EXPECT_EQ(o.chosen, (std::vector<ControlKind>{ControlKind::kTrimNack, ControlKind::kAck,
                                                ControlKind::kProbe}));
  EXPECT_EQ(o.filled, std::vector<ControlKind>{ControlKind::kProbe});
  EXPECT_TRUE(o.after.empty());  // the probe's row has none
  EXPECT_EQ(out.pkt.bth.psn, 77u);
  EXPECT_EQ(out.transport_bytes, kProbeWireBytes);
  EXPECT_EQ(c.probes_sent, 1u);
  EXPECT_EQ(c.nacks_sent + c.acks_sent, 0u);
}

TEST(Control, emit_control__a_stop_ends_the_step_and_nothing_pending_sends_nothing) {
  FakeOwner o;
  o.pending.fill(true);
  o.choice[static_cast<size_t>(ControlKind::kAck)] = ControlChoice{PathSet::kNone, true};
  o.choice[static_cast<size_t>(ControlKind::kProbe)] = ControlChoice{1};
  const auto rows = fake_rows();
  EngineCounters c;
  TxPacket out;
  EXPECT_FALSE(emit_control(o, rows, fake_header, c, 0, 0xF, out));
  EXPECT_EQ(o.chosen, (std::vector<ControlKind>{ControlKind::kTrimNack, ControlKind::kAck}));
  EXPECT_TRUE(o.filled.empty());
  FakeOwner idle;
  EXPECT_FALSE(emit_control(idle, rows, fake_header, c, 0, 0xF, out));
  EXPECT_TRUE(idle.chosen.empty());
  EXPECT_EQ(c.probes_sent, 0u);
}

TEST(Control, control_wire_bytes__acks_nacks_cnps_and_probes_have_their_sizes) {
  EXPECT_EQ(control_wire_bytes(ControlKind::kAck), kAckWireBytes);
  EXPECT_EQ(control_wire_bytes(ControlKind::kAckRepeat), kAckWireBytes);
  EXPECT_EQ(control_wire_bytes(ControlKind::kTrimNack), kTrimNackWireBytes);
  EXPECT_EQ(control_wire_bytes(ControlKind::kCnp), kCnpWireBytes);
  EXPECT_EQ(control_wire_bytes(ControlKind::kProbe), kProbeWireBytes);
  EXPECT_EQ(control_wire_bytes(ControlKind::kProbeReply), kProbeWireBytes);
  EXPECT_EQ(control_wire_bytes(ControlKind::kReverseProbe), kProbeWireBytes);
}

TEST(Control, control_kind_name__gives_each_kind_a_distinct_name) {
  std::set<std::string> names;
  for (int k = 0; k < kControlKinds; ++k)
    names.insert(control_kind_name(static_cast<ControlKind>(k)));
  EXPECT_EQ(names.size(), static_cast<size_t>(kControlKinds));
  EXPECT_EQ(names.count("?"), 0u);
}

TEST(Control, control_path__takes_the_answered_packets_path_when_it_can) {
  PathSet s;
  s.init(paths(8, 4), 1, 4, PathPolicy{}, 1);
  EXPECT_EQ(control_path(s, 0, 1, 5, 0xF, false), 5);
  // Its port outside the mask: a path of the preferred port if that one is in the mask.
  const int other = control_path(s, 0, 2, 5, 0xD, false);
  ASSERT_NE(other, PathSet::kNone);
  EXPECT_EQ(s.port_of(other), 2);
  // A bad path only for a probe reply (the probe tests that path).
  s.on_loss(5, 0);
  ASSERT_EQ(s.state_of(5), ev::EvState::kAssumedBad);
  EXPECT_EQ(control_path(s, 0, 1, 5, 0xF, true), 5);
  EXPECT_NE(control_path(s, 0, 1, 5, 0xF, false), 5);
}

TEST(Control, probe_reply_path__answers_on_the_port_the_probe_came_in_on) {
  PathSet s;
  s.init(paths(8, 4), 1, 4, PathPolicy{}, 1);  // path i on port i % 4
  EXPECT_EQ(probe_reply_path(s, 0, 1, 5, 0xF), 5);
  // A bad path still answers: the probe tests it.
  s.on_loss(5, 0);
  EXPECT_EQ(probe_reply_path(s, 0, 1, 5, 0xF), 5);
  // The probed index lies on another port here than the one the probe came by: another
  // path of the probe's port, never a free port of another plane.
  const int other = probe_reply_path(s, 0, 3, 5, 0xF);
  ASSERT_NE(other, PathSet::kNone);
  EXPECT_EQ(s.port_of(other), 3);
  // The probe's port busy: wait for it, even with other ports free.
  EXPECT_EQ(probe_reply_path(s, 0, 1, 5, 0xD), PathSet::kNone);
  EXPECT_EQ(probe_reply_path(s, 0, 3, 5, 0x7), PathSet::kNone);
  // The probe's port down here: any port will do.
  s.set_port_up(3, false, 0);
  const int elsewhere = probe_reply_path(s, 0, 3, 7, 0xF);
  ASSERT_NE(elsewhere, PathSet::kNone);
  EXPECT_NE(s.port_of(elsewhere), 3);
}

TEST(Control, ack_repeat_path__avoids_the_last_acks_port_then_its_path) {
  PathSet s;
  s.init(paths(4, 2), 1, 2, PathPolicy{}, 1);  // paths 0, 2 on port 0; 1, 3 on port 1
  const LastAck last{0, 0};
  const int other_port = ack_repeat_path(s, last, 0x3);
  ASSERT_NE(other_port, PathSet::kNone);
  EXPECT_EQ(s.port_of(other_port), 1);
  // Another port exists but is outside the mask: wait for it.
  EXPECT_EQ(ack_repeat_path(s, last, 0x1), PathSet::kNone);
  // The other port down: another path of the same port.
  s.set_port_up(1, false, 0);
  EXPECT_EQ(ack_repeat_path(s, last, 0x3), 2);
  // Only the last ACK's path is left: it again.
  PathSet one;
  one.init(paths(1, 1), 1, 1, PathPolicy{}, 1);
  EXPECT_EQ(ack_repeat_path(one, LastAck{0, 0}, 0x1), 0);
}

TEST(Control, ack_path__without_a_reverse_set_goes_back_the_way_data_came) {
  PathSet s;
  s.init(paths(4, 2), 1, 2, PathPolicy{}, 1);
  ReversePathSet off;
  off.configure(0, 2);
  EXPECT_EQ(ack_path(s, off, nullptr, true, 0, 1, 3, LastAck{}, 0x3, false), 3);
  // Its port busy: wait for it (EngineConfig::ack_waits_for_port) ...
  EXPECT_EQ(ack_path(s, off, nullptr, true, 0, 1, 3, LastAck{}, 0x1, false), PathSet::kNone);
  // ... or, without waiting, another path on a free port.
  const int free = ack_path(s, off, nullptr, false, 0, 1, 3, LastAck{}, 0x1, false);
  ASSERT_NE(free, PathSet::kNone);
  EXPECT_EQ(s.port_of(free), 0);
  // An echo of a packet that came by a free port's path is the next choice.
  ReceiveWindow w;
  w.start(1024, 0);
  w.allocate(4);
  w.add_echo(wire::AckEcho{0, 2, 0});
  EXPECT_EQ(ack_path(s, off, &w, true, 0, 1, 3, LastAck{}, 0x1, false), 2);
}

}  // namespace
}  // namespace mrc
