#include "sim/workloads.h"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <map>
#include <sstream>
#include <utility>

#include "transport/rng.h"

namespace mrc::sim {

const std::vector<CollectiveResult> Workload::kNoCollectives;
const std::vector<IterationResult> Workload::kNoIterations;

namespace {

std::string flow_error(std::string_view who, const FlowSpec& s, Error e) {
  std::ostringstream o;
  o << who << ": cannot add flow " << s.src << "->" << s.dst << " (" << s.bytes
    << " bytes): " << error_name(e);
  return o.str();
}

SimResult<FlowId> add(FlowSink& sink, std::string_view who, const FlowSpec& s) {
  auto id = sink.add_flow(s);
  if (!id) return sim_fail(id.error().code, flow_error(who, s, id.error().code));
  return *id;
}

}  // namespace

std::vector<HostId> all_hosts(uint32_t n) {
  std::vector<HostId> v(n);
  for (uint32_t i = 0; i < n; ++i)
    v[i] = i;
  return v;
}

// ---- static flow sets ----------------------------------------------------------------------

SimResult<std::vector<uint32_t>> random_derangement(uint32_t n, uint64_t seed) {
  if (n < 2) return sim_fail("a permutation needs at least 2 hosts");
  Rng rng(seed ^ 0x7065726d75746174ull);  // "permutat": separate stream from other uses
  std::vector<uint32_t> p(n);
  for (int attempt = 0; attempt < 64; ++attempt) {
    for (uint32_t i = 0; i < n; ++i)
      p[i] = i;
    for (uint32_t i = n - 1; i > 0; --i)
      std::swap(p[i], p[rng.below(i + 1)]);
    bool ok = true;
    for (uint32_t i = 0; i < n && ok; ++i)
      ok = p[i] != i;
    if (ok) return p;  // uniform over derangements (rejection sampling, ~e attempts)
  }
  // Practically unreachable ((1 - 1/e)^64 ~ 1e-13): repair the fixed points.
  for (uint32_t i = 0; i < n; ++i)
    if (p[i] == i) std::swap(p[i], p[(i + 1) % n]);
  return p;
}

SimResult<std::vector<FlowSpec>> permutation_flows(const std::vector<HostId>& hosts, uint64_t bytes,
                                                   Time start, uint64_t seed) {
  if (bytes == 0) return sim_fail("permutation: size must be > 0");
  auto perm = random_derangement(static_cast<uint32_t>(hosts.size()), seed);
  if (!perm) return sim_fail("permutation: ", perm.error());
  std::vector<FlowSpec> flows;
  flows.reserve(hosts.size());
  for (size_t i = 0; i < hosts.size(); ++i)
    flows.push_back(FlowSpec{hosts[i], hosts[(*perm)[i]], bytes, start, false, 0});
  return flows;
}

SimResult<std::vector<FlowSpec>> uniform_random_flows(const std::vector<HostId>& hosts,
                                                      uint32_t count, uint64_t bytes, Time start,
                                                      Time spread, uint64_t seed) {
  if (hosts.size() < 2) return sim_fail("uniform: needs at least 2 hosts");
  if (bytes == 0) return sim_fail("uniform: size must be > 0");
  Rng rng(seed ^ 0x756e69666f726d00ull);
  const uint64_t n = hosts.size();
  std::vector<FlowSpec> flows;
  flows.reserve(count);
  for (uint32_t i = 0; i < count; ++i) {
    const uint64_t s = rng.below(n);
    uint64_t d = rng.below(n - 1);
    if (d >= s) ++d;
    const Time t = start + (spread > 0 ? rng.below(spread) : 0);
    flows.push_back(FlowSpec{hosts[s], hosts[d], bytes, t, false, 0});
  }
  return flows;
}

SimResult<std::vector<FlowSpec>> incast_flows(const std::vector<HostId>& hosts, HostId dst,
                                              uint32_t senders, uint64_t bytes, Time start) {
  if (bytes == 0) return sim_fail("incast: size must be > 0");
  auto it = std::find(hosts.begin(), hosts.end(), dst);
  if (it == hosts.end())
    return sim_fail("incast: destination host " + std::to_string(dst) + " is not in the group");
  if (senders == 0 || senders >= hosts.size())
    return sim_fail("incast: senders must be in 1.." + std::to_string(hosts.size() - 1) + ", got " +
                    std::to_string(senders));
  const size_t at = static_cast<size_t>(it - hosts.begin());
  std::vector<FlowSpec> flows;
  for (uint32_t k = 1; k <= senders; ++k)
    flows.push_back(FlowSpec{hosts[(at + k) % hosts.size()], dst, bytes, start, false, 0});
  return flows;
}

SimResult<std::vector<FlowSpec>> all_to_all_flows(const std::vector<HostId>& group,
                                                  uint64_t bytes_per_rank, Time start) {
  const uint64_t n = group.size();
  if (n < 2) return sim_fail("all_to_all: needs at least 2 ranks");
  if (bytes_per_rank < n)
    return sim_fail("all_to_all: size (" + std::to_string(bytes_per_rank) +
                    " bytes per rank) must be at least the number of ranks (" + std::to_string(n) +
                    ")");
  std::vector<FlowSpec> flows;
  flows.reserve(n * (n - 1));
  for (uint64_t i = 0; i < n; ++i)
    for (uint64_t j = 0; j < n; ++j)
      if (i != j)
        flows.push_back(FlowSpec{group[i], group[j], bytes_per_rank / n, start, false, 0});
  return flows;
}

// ---- collective results --------------------------------------------------------------------

const char* collective_name(CollectiveKind k) {
  switch (k) {
    case CollectiveKind::kAllReduce:
      return "allreduce";
    case CollectiveKind::kAllToAll:
      return "all_to_all";
  }
  return "unknown";
}

double busbw_factor(CollectiveKind k, uint32_t ranks) {
  if (ranks == 0) return 0;
  const double n = ranks;
  switch (k) {
    case CollectiveKind::kAllReduce:
      return 2.0 * (n - 1) / n;
    case CollectiveKind::kAllToAll:
      return (n - 1) / n;
  }
  return 0;
}

double CollectiveResult::algbw_GBps() const {
  const Time t = time();
  if (t == 0) return 0;
  return static_cast<double>(bytes) / (static_cast<double>(t) / kPicosPerSecond) / 1e9;
}

double CollectiveResult::busbw_GBps() const {
  return algbw_GBps() * busbw_factor(kind, ranks);
}

// ---- StaticFlows ---------------------------------------------------------------------------

StaticFlows::StaticFlows(std::string name, std::vector<FlowSpec> flows)
    : name_(std::move(name)), flows_(std::move(flows)) {
  for (const FlowSpec& f : flows_)
    total_ += f.bytes;
}

SimStatus StaticFlows::start(FlowSink& sink) {
  for (const FlowSpec& s : flows_) {
    auto id = add(sink, name_, s);
    if (!id) return std::unexpected(id.error());
  }
  return {};
}

SimStatus StaticFlows::on_complete(const FlowResult&, FlowSink&) {
  ++completed_;
  return {};
}

// ---- SteadyStreams --------------------------------------------------------------------------

SteadyStreams::SteadyStreams(std::string name, std::vector<Stream> streams)
    : name_(std::move(name)), streams_(std::move(streams)) {}

uint64_t SteadyStreams::total_bytes() const {
  uint64_t total = 0;
  for (const Stream& st : streams_) {
    if (st.until > st.start) return 0;  // as many messages as fit before `until`
    total += st.bytes * st.depth;
  }
  return total;
}

SimStatus SteadyStreams::post(uint32_t stream, Time at, FlowSink& sink) {
  const Stream& st = streams_[stream];
  FlowSpec f;
  f.src = st.src;
  f.dst = st.dst;
  f.bytes = st.bytes;
  f.start = at;
  f.path_set = st.path_set;
  f.tag = stream;
  auto id = add(sink, name_, f);
  if (!id) return std::unexpected(id.error());
  stream_of_[*id] = stream;
  ++in_flight_;
  ++messages_;
  return {};
}

SimStatus SteadyStreams::start(FlowSink& sink) {
  started_ = true;
  for (uint32_t i = 0; i < streams_.size(); ++i) {
    if (streams_[i].depth == 0 || streams_[i].bytes == 0)
      return sim_fail(name_ + ": stream " + std::to_string(i) + " needs depth >= 1 and bytes > 0");
    for (uint32_t d = 0; d < streams_[i].depth; ++d)
      if (auto st = post(i, streams_[i].start, sink); !st) return st;
  }
  return {};
}

SimStatus SteadyStreams::on_complete(const FlowResult& r, FlowSink& sink) {
  auto it = stream_of_.find(r.id);
  if (it == stream_of_.end()) return {};
  const uint32_t stream = it->second;
  stream_of_.erase(it);
  --in_flight_;
  if (r.ok && r.end < streams_[stream].until) return post(stream, r.end, sink);
  return {};
}

SimResult<std::vector<SteadyStreams::Stream>> steady_permutation(const std::vector<HostId>& hosts,
                                                                 uint64_t bytes, Time start,
                                                                 Time until, uint32_t depth,
                                                                 uint64_t seed) {
  auto flows = permutation_flows(hosts, bytes, start, seed);
  if (!flows) return std::unexpected(flows.error());
  std::vector<SteadyStreams::Stream> v;
  for (const FlowSpec& f : *flows)
    v.push_back(SteadyStreams::Stream{f.src, f.dst, bytes, start, until, depth, 0});
  return v;
}

// ---- AllToAll ------------------------------------------------------------------------------

AllToAll::AllToAll(std::vector<HostId> group, uint64_t bytes_per_rank, Time start)
    : group_(std::move(group)), bytes_(bytes_per_rank), start_(start) {}

SimStatus AllToAll::start(FlowSink& sink) {
  auto flows = all_to_all_flows(group_, bytes_, start_);
  if (!flows) return std::unexpected(flows.error());
  current_ = CollectiveResult{CollectiveKind::kAllToAll,
                              0,
                              static_cast<uint32_t>(group_.size()),
                              bytes_,
                              start_,
                              start_,
                              static_cast<uint32_t>(flows->size()),
                              true};
  started_ = true;
  remaining_ = static_cast<uint32_t>(flows->size());
  for (const FlowSpec& s : *flows) {
    total_ += s.bytes;
    auto id = add(sink, "all_to_all", s);
    if (!id) return std::unexpected(id.error());
  }
  return {};
}

SimStatus AllToAll::on_complete(const FlowResult& r, FlowSink&) {
  if (remaining_ == 0) return {};
  if (!r.ok) current_.ok = false;
  current_.end = std::max(current_.end, r.end);
  if (--remaining_ == 0) results_.push_back(current_);
  return {};
}

// ---- RingAllReduce -------------------------------------------------------------------------

namespace {

// Chunk j of a buffer of `total` bytes split into `parts`.
uint64_t split(uint64_t total, uint32_t parts, uint32_t j) {
  return total / parts + (j < total % parts ? 1 : 0);
}

}  // namespace

RingAllReduce::RingAllReduce(std::vector<HostId> group, uint64_t bytes, Time start, uint32_t row,
                             uint32_t iteration, DoneFn on_done)
    : group_(std::move(group)),
      bytes_(bytes),
      start_(start),
      row_(row),
      iteration_(iteration),
      on_done_(std::move(on_done)) {
  const uint32_t nn = n();
  if (nn < 2) return;  // start() says why
  if (row_ == 0) {
    stages_.push_back({Stage::kAllReduce, 1, nn, 0, 2 * (nn - 1)});
    return;
  }
  if (row_ < 2 || nn % row_ != 0) return;
  const uint32_t rows = nn / row_;
  stages_.push_back({Stage::kReduceScatter, 1, row_, 0, row_ - 1});
  // One row (row = n) leaves no column stage: the schedule is the flat ring's.
  if (rows > 1) stages_.push_back({Stage::kAllReduce, row_, rows, row_ - 1, 2 * (rows - 1)});
  stages_.push_back(
      {Stage::kAllGather, 1, row_, stages_.back().first + stages_.back().steps, row_ - 1});
}

uint32_t RingAllReduce::steps() const {
  return stages_.empty() ? 0 : stages_.back().first + stages_.back().steps;
}

uint32_t RingAllReduce::stage_of(uint32_t step) const {
  uint32_t s = 0;
  while (s + 1 < stages_.size() && step >= stages_[s + 1].first)
    ++s;
  return s;
}

uint32_t RingAllReduce::peer(uint32_t rank, uint32_t step) const {
  const Stage& s = stages_[stage_of(step)];
  const uint32_t pos = position(s, rank);
  const uint32_t next = (pos + 1) % s.len;
  return rank - pos * s.stride + next * s.stride;
}

uint64_t RingAllReduce::buffer_bytes(const Stage& s, uint32_t rank) const {
  if (s.stride == 1) return bytes_;  // a row (or the flat ring) works on all S bytes
  // A column works on the shard its column holds after the row reduce-scatter.
  const uint32_t col = rank % row_;
  return split(bytes_, row_, (col + 1) % row_);
}

uint32_t RingAllReduce::chunk_of(uint32_t rank, uint32_t step) const {
  const Stage& s = stages_[stage_of(step)];
  const uint32_t m = s.len;
  const uint32_t pos = position(s, rank);
  uint32_t k = step - s.first;
  // Reduce-scatter: send chunk pos - k, ending with chunk pos + 1 fully reduced.
  if (s.op == Stage::kReduceScatter || (s.op == Stage::kAllReduce && k < m - 1))
    return (pos + m - k) % m;
  if (s.op == Stage::kAllReduce) k -= m - 1;
  // All-gather: forward what was received, starting with the owned chunk pos + 1.
  return (pos + 1 + m - k) % m;
}

uint64_t RingAllReduce::step_bytes(uint32_t rank, uint32_t step) const {
  const Stage& s = stages_[stage_of(step)];
  return split(buffer_bytes(s, rank), s.len, chunk_of(rank, step));
}

SimStatus RingAllReduce::send(uint32_t rank, uint32_t step, Time at, FlowSink& sink) {
  // With immediate: the receiver acts on its receive (on_received).
  FlowSpec s{group_[rank], group_[peer(rank, step)], step_bytes(rank, step), at,
             true,         tag(iteration_, step)};
  auto id = add(sink, "allreduce", s);
  if (!id) return std::unexpected(id.error());
  owner_[*id] = uint64_t{rank} << 32 | step;
  return {};
}

SimStatus RingAllReduce::start(FlowSink& sink) {
  if (n() < 2) return sim_fail("allreduce: needs at least 2 ranks");
  if (n() > 65535) return sim_fail("allreduce: at most 65535 ranks");
  if (row_ != 0 && (row_ < 2 || n() % row_ != 0))
    return sim_fail("allreduce: ring2d row (" + std::to_string(row_) +
                    " ranks) must be at least 2 and divide the number of ranks (" +
                    std::to_string(n()) + ")");
  if (bytes_ < n())
    return sim_fail("allreduce: size (" + std::to_string(bytes_) +
                    " bytes) must be at least the number of ranks (" + std::to_string(n()) + ")");
  remaining_ = n() * steps();
  total_ = 0;
  for (uint32_t r = 0; r < n(); ++r)
    for (uint32_t k = 0; k < steps(); ++k)
      total_ += step_bytes(r, k);
  stage_at_.assign(n(), 0);
  received_in_.assign(size_t{n()} * stages(), 0);
  if (stages() > 1) received_.assign(size_t{n()} * steps(), false);
  current_ = CollectiveResult{
      CollectiveKind::kAllReduce, iteration_, n(), bytes_, start_, start_, remaining_, true};
  for (uint32_t r = 0; r < n(); ++r) {
    auto st = send(r, 0, start_, sink);
    if (!st) return st;
  }
  return {};
}

SimStatus RingAllReduce::on_receive(uint32_t rank, uint32_t step, Time at, FlowSink& sink) {
  const uint32_t s = stage_of(step);
  ++received_in_[size_t{rank} * stages() + s];
  if (s > stage_at_[rank]) {
    // Early: the rank is still in an earlier stage; starting it sends the next step.
    received_[size_t{rank} * steps() + step] = true;
    return {};
  }
  if (step + 1 < stages_[s].first + stages_[s].steps) {
    auto st = send(rank, step + 1, at, sink);
    if (!st) return st;
  }
  // Every receive of its stage done: the rank starts the next stage, with the steps whose
  // receives arrived early.
  while (stage_at_[rank] + 1 < stages() &&
         received_in_[size_t{rank} * stages() + stage_at_[rank]] ==
             stages_[stage_at_[rank]].steps) {
    const Stage& next = stages_[++stage_at_[rank]];
    auto st = send(rank, next.first, at, sink);
    if (!st) return st;
    for (uint32_t k = next.first; k + 1 < next.first + next.steps; ++k) {
      if (!received_[size_t{rank} * steps() + k]) continue;
      st = send(rank, k + 1, at, sink);
      if (!st) return st;
    }
  }
  return {};
}

SimStatus RingAllReduce::on_received(const FlowResult& r, FlowSink& sink) {
  auto it = owner_.find(r.id);
  if (it == owner_.end() || (it->second & kReceived)) return {};
  it->second |= kReceived;
  const auto rank = static_cast<uint32_t>((it->second & ~kReceived) >> 32);
  const auto step = static_cast<uint32_t>(it->second);
  // The receiver has its step-`step` data.
  return on_receive(peer(rank, step), step, r.received, sink);
}

SimStatus RingAllReduce::on_complete(const FlowResult& r, FlowSink& sink) {
  auto it = owner_.find(r.id);
  if (it == owner_.end()) return {};
  const bool received = it->second & kReceived;
  const auto rank = static_cast<uint32_t>((it->second & ~kReceived) >> 32);
  const auto step = static_cast<uint32_t>(it->second);
  owner_.erase(it);
  if (!r.ok) current_.ok = false;
  current_.end = std::max(current_.end, r.end);
  --remaining_;
  // A flow whose reception was not reported (it failed, or the sink reports completions
  // only): the receiver goes on at the completion.
  if (!received) {
    auto st = on_receive(peer(rank, step), step, r.end, sink);
    if (!st) return st;
  }
  if (remaining_ == 0) {
    finished_ = true;
    results_.push_back(current_);
    if (on_done_) return on_done_(current_, sink);
  }
  return {};
}

// ---- TrainingLoop --------------------------------------------------------------------------

TrainingLoop::TrainingLoop(std::vector<HostId> group, uint64_t bytes, Time compute,
                           uint32_t iterations, Time start, uint32_t row)
    : group_(std::move(group)),
      bytes_(bytes),
      compute_(compute),
      count_(iterations),
      start_(start),
      row_(row) {}

SimStatus TrainingLoop::start(FlowSink& sink) {
  if (count_ == 0) {
    finished_ = true;
    return {};
  }
  auto st = begin_iteration(0, start_, sink);
  if (st && current_) total_ = count_ * current_->total_bytes();
  return st;
}

SimStatus TrainingLoop::begin_iteration(uint32_t index, Time at, FlowSink& sink) {
  iterations_.push_back(IterationResult{index, at, at + compute_, kNever, true});
  if (current_) retired_.push_back(std::move(current_));
  current_ =
      std::make_unique<RingAllReduce>(group_, bytes_, at + compute_, row_, index,
                                      [this](const CollectiveResult& c, FlowSink& s) -> SimStatus {
                                        collectives_.push_back(c);
                                        IterationResult& it = iterations_.back();
                                        it.end = c.end;
                                        it.ok = c.ok;
                                        if (!c.ok) {
                                          aborted_ = true;
                                          finished_ = true;
                                          return {};
                                        }
                                        if (it.index + 1 >= count_) {
                                          finished_ = true;
                                          return {};
                                        }
                                        return begin_iteration(it.index + 1, c.end, s);
                                      });
  return current_->start(sink);
}

SimStatus TrainingLoop::on_complete(const FlowResult& r, FlowSink& sink) {
  retired_.clear();  // not inside any of them now
  if (!current_) return {};
  return current_->on_complete(r, sink);
}

SimStatus TrainingLoop::on_received(const FlowResult& r, FlowSink& sink) {
  retired_.clear();
  if (!current_) return {};
  return current_->on_received(r, sink);
}

// ---- htsim connection matrices -------------------------------------------------------------

namespace {

std::vector<std::string_view> tokenize(std::string_view line) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r'))
      ++i;
    size_t j = i;
    while (j < line.size() && line[j] != ' ' && line[j] != '\t' && line[j] != '\r')
      ++j;
    if (j > i) out.push_back(line.substr(i, j - i));
    i = j;
  }
  return out;
}

std::optional<uint64_t> parse_uint(std::string_view s) {
  uint64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || s.empty()) return std::nullopt;
  return v;
}

}  // namespace

std::optional<uint64_t> parse_scaled_decimal(std::string_view s, uint64_t scale) {
  // "12", "12.5", ".5", "12." -> round(value * scale), exact for up to 18 fraction digits.
  if (s.empty()) return std::nullopt;
  const size_t dot = s.find('.');
  std::string_view ip = s.substr(0, dot);
  std::string_view fp = dot == std::string_view::npos ? std::string_view{} : s.substr(dot + 1);
  if (ip.empty() && fp.empty()) return std::nullopt;
  uint64_t iv = 0;
  if (!ip.empty()) {
    auto v = parse_uint(ip);
    if (!v) return std::nullopt;
    iv = *v;
  }
  uint64_t out = 0;
  if (__builtin_mul_overflow(iv, scale, &out)) return std::nullopt;
  if (!fp.empty()) {
    if (fp.size() > 18) fp = fp.substr(0, 18);
    auto fv = parse_uint(fp);
    if (!fv) return std::nullopt;
    uint64_t denom = 1;
    for (size_t k = 0; k < fp.size(); ++k)
      denom *= 10;
    const unsigned __int128 num = static_cast<unsigned __int128>(*fv) * scale;
    const uint64_t frac = static_cast<uint64_t>((num + denom / 2) / denom);
    if (__builtin_add_overflow(out, frac, &out)) return std::nullopt;
  }
  return out;
}

namespace {

class CmParser {
 public:
  CmParser(std::string_view filename) : file_(filename) {}

  SimResult<HtsimMatrix> parse(std::string_view text) {
    uint32_t lineno = 0;
    size_t pos = 0;
    while (pos <= text.size()) {
      size_t nl = text.find('\n', pos);
      if (nl == std::string_view::npos) nl = text.size();
      std::string_view line = text.substr(pos, nl - pos);
      pos = nl + 1;
      ++lineno;
      line_ = lineno;
      auto st = parse_line(line);
      if (!st) return std::unexpected(st.error());
      if (nl == text.size()) break;
    }
    return finish();
  }

 private:
  std::string at(uint32_t line) const { return std::string(file_) + ":" + std::to_string(line); }
  std::unexpected<SimError> err(const std::string& msg) const {
    return sim_fail(at(line_) + ": " + msg);
  }

  // The value after keyword tokens[i]; advances i.
  SimResult<std::string_view> value(const std::vector<std::string_view>& t, size_t& i) {
    if (i + 1 >= t.size())
      return err("expected a value after '" + std::string(t[i]) + "', got end of line");
    return t[++i];
  }
  SimResult<uint64_t> number(const std::vector<std::string_view>& t, size_t& i, const char* what) {
    auto v = value(t, i);
    if (!v) return std::unexpected(v.error());
    auto n = parse_uint(*v);
    if (!n)
      return err("expected " + std::string(what) + " (a non-negative integer) after '" +
                 std::string(t[i - 1]) + "', got '" + std::string(*v) + "'");
    return *n;
  }
  SimResult<uint32_t> id32(const std::vector<std::string_view>& t, size_t& i, const char* what) {
    auto n = number(t, i, what);
    if (!n) return std::unexpected(n.error());
    if (*n > UINT32_MAX) return err(std::string(what) + " out of range: " + std::to_string(*n));
    return static_cast<uint32_t>(*n);
  }

  SimStatus header(const std::vector<std::string_view>& t, std::optional<uint32_t>& slot) {
    if (body_started_)
      return err("header line '" + std::string(t[0]) +
                 "' after the first connection/trigger/failure line");
    if (slot) return err("duplicate '" + std::string(t[0]) + "' header");
    if (t.size() != 2)
      return err("expected '" + std::string(t[0]) + " <count>' (one integer), got " +
                 std::to_string(t.size() - 1) + " values");
    size_t i = 0;
    auto n = id32(t, i, "a count");
    if (!n) return std::unexpected(n.error());
    slot = *n;
    return {};
  }

  SimStatus parse_line(std::string_view line) {
    auto t = tokenize(line);
    if (t.empty() || t[0][0] == '#') return {};
    if (t[0] == "Nodes") return header(t, nodes_);
    if (t[0] == "Connections") return header(t, conns_);
    if (t[0] == "Triggers") return header(t, trigs_);
    if (t[0] == "Failures") return header(t, fails_);
    body_started_ = true;
    if (t[0].find("->") != std::string_view::npos) return connection(t);
    if (t[0] == "trigger") return trigger(t);
    if (t[0] == "failure") return failure(t);
    return err(
        "expected a header (Nodes, Connections, Triggers, Failures), a connection "
        "'<src>-><dst> ...', 'trigger ...' or 'failure ...', got '" +
        std::string(t[0]) + "'");
  }

  SimStatus connection(const std::vector<std::string_view>& t) {
    if (!nodes_) return err("connection before the 'Nodes N' header");
    HtsimConnection c;
    c.line = line_;
    const size_t arrow = t[0].find("->");
    auto src = parse_uint(t[0].substr(0, arrow));
    auto dst = parse_uint(t[0].substr(arrow + 2));
    if (!src || !dst)
      return err("expected '<src>-><dst>' with two node numbers, got '" + std::string(t[0]) + "'");
    if (*src >= *nodes_ || *dst >= *nodes_)
      return err("node out of range in '" + std::string(t[0]) + "' (Nodes " +
                 std::to_string(*nodes_) + ": valid 0.." + std::to_string(*nodes_ - 1) + ")");
    if (*src == *dst)
      return err("source and destination are the same node " + std::to_string(*src));
    c.src = static_cast<HostId>(*src);
    c.dst = static_cast<HostId>(*dst);
    bool have_size = false;
    for (size_t i = 1; i < t.size(); ++i) {
      const std::string_view k = t[i];
      if (k == "start") {
        auto v = value(t, i);
        if (!v) return std::unexpected(v.error());
        auto ps = parse_scaled_decimal(*v, kPicosPerMicro);
        if (!ps)
          return err(
              "expected a start time in microseconds (e.g. 0 or 12.5) after 'start', "
              "got '" +
              std::string(*v) + "'");
        c.start = *ps;
      } else if (k == "size") {
        auto n = number(t, i, "a size in bytes");
        if (!n) return std::unexpected(n.error());
        if (*n == 0) return err("size must be > 0 bytes");
        c.bytes = *n;
        have_size = true;
      } else if (k == "id") {
        auto n = id32(t, i, "a flow id");
        if (!n) return std::unexpected(n.error());
        if (*n == 0) return err("flow id 0 is not allowed (htsim reserves it)");
        if (!flow_ids_.emplace(*n, line_).second)
          return err("duplicate flow id " + std::to_string(*n) + " (first at line " +
                     std::to_string(flow_ids_[*n]) + ")");
        c.id = *n;
      } else if (k == "trigger" || k == "send_done_trigger" || k == "recv_done_trigger") {
        auto n = id32(t, i, "a trigger id");
        if (!n) return std::unexpected(n.error());
        if (*n == 0) return err("trigger id 0 is not allowed");
        referenced_.emplace(*n, line_);
        if (k == "trigger")
          c.trigger = *n;
        else if (k == "send_done_trigger")
          c.send_done_trigger = *n;
        else
          c.recv_done_trigger = *n;
      } else if (k == "prio") {
        auto n = number(t, i, "a priority");
        if (!n) return std::unexpected(n.error());
      } else if (k == "addon") {
      } else {
        return err("unknown connection field '" + std::string(k) +
                   "' (expected start, size, id, trigger, send_done_trigger, "
                   "recv_done_trigger, prio or addon)");
      }
    }
    if (!have_size) return err("connection without 'size <bytes>'");
    if (!c.start && !c.trigger)
      return err("connection has neither 'start <us>' nor 'trigger <id>'");
    if (c.start && c.trigger) return err("connection has both 'start' and 'trigger' (use one)");
    m_.connections.push_back(c);
    return {};
  }

  SimStatus trigger(const std::vector<std::string_view>& t) {
    HtsimTrigger tr;
    tr.line = line_;
    bool have_type = false, have_count = false;
    for (size_t i = 1; i < t.size(); ++i) {
      const std::string_view k = t[i];
      if (k == "id") {
        auto n = id32(t, i, "a trigger id");
        if (!n) return std::unexpected(n.error());
        if (*n == 0) return err("trigger id 0 is not allowed");
        tr.id = *n;
      } else if (k == "count") {
        auto n = id32(t, i, "a count");
        if (!n) return std::unexpected(n.error());
        tr.count = *n;
        have_count = true;
      } else if (k == "oneshot" || k == "multishot" || k == "barrier") {
        if (have_type) return err("trigger has more than one type");
        have_type = true;
        tr.type = k == "oneshot"     ? HtsimTrigger::kOneshot
                  : k == "multishot" ? HtsimTrigger::kMultishot
                                     : HtsimTrigger::kBarrier;
      } else {
        return err("unknown trigger field '" + std::string(k) +
                   "' (expected id, count, oneshot, multishot or barrier)");
      }
    }
    if (tr.id == 0) return err("trigger without 'id <n>'");
    if (!have_type)
      return err("trigger " + std::to_string(tr.id) +
                 " has no type (expected oneshot, multishot or barrier)");
    if (tr.type == HtsimTrigger::kBarrier && (!have_count || tr.count == 0))
      return err("barrier trigger " + std::to_string(tr.id) + " needs 'count <n>' with n > 0");
    for (const auto& o : m_.triggers)
      if (o.id == tr.id)
        return err("trigger " + std::to_string(tr.id) + " defined twice (first at line " +
                   std::to_string(o.line) + ")");
    m_.triggers.push_back(tr);
    return {};
  }

  SimStatus failure(const std::vector<std::string_view>& t) {
    HtsimFailure f;
    f.line = line_;
    bool have_type = false, have_switch = false;
    for (size_t i = 1; i < t.size(); ++i) {
      const std::string_view k = t[i];
      if (k == "switch_type") {
        auto v = value(t, i);
        if (!v) return std::unexpected(v.error());
        if (*v == "TOR")
          f.switch_type = HtsimFailure::kTor;
        else if (*v == "AGG")
          f.switch_type = HtsimFailure::kAgg;
        else if (*v == "CORE")
          f.switch_type = HtsimFailure::kCore;
        else
          return err("unknown switch_type '" + std::string(*v) + "' (expected TOR, AGG or CORE)");
        have_type = true;
      } else if (k == "switch_id") {
        auto n = id32(t, i, "a switch id");
        if (!n) return std::unexpected(n.error());
        f.switch_id = *n;
        have_switch = true;
      } else if (k == "link_id") {
        auto n = id32(t, i, "a link id");
        if (!n) return std::unexpected(n.error());
        f.link_id = *n;
      } else if (k == "plane") {
        auto n = id32(t, i, "a plane");
        if (!n) return std::unexpected(n.error());
        f.plane = *n;
      } else if (k == "at") {
        auto v = value(t, i);
        if (!v) return std::unexpected(v.error());
        auto ps = parse_scaled_decimal(*v, kPicosPerMicro);
        if (!ps)
          return err("expected a time in microseconds after 'at', got '" + std::string(*v) + "'");
        f.at = *ps;
      } else {
        return err("unknown failure field '" + std::string(k) +
                   "' (expected switch_type, switch_id, link_id, plane or at)");
      }
    }
    if (!have_type) return err("failure without 'switch_type TOR|AGG|CORE'");
    if (!have_switch) return err("failure without 'switch_id <n>'");
    m_.failures.push_back(f);
    return {};
  }

  SimResult<HtsimMatrix> finish() {
    const std::string f(file_);
    if (!nodes_) return sim_fail(f + ": missing 'Nodes N' header");
    if (*nodes_ < 2)
      return sim_fail(f + ": 'Nodes " + std::to_string(*nodes_) + "': need at least 2 nodes");
    if (!conns_) return sim_fail(f + ": missing 'Connections C' header");
    m_.nodes = *nodes_;
    auto count = [&](const char* what, std::optional<uint32_t> declared, size_t actual) {
      const uint32_t d = declared.value_or(0);
      if (d == actual) return std::string();
      return f + ": '" + what + " " + std::to_string(d) + "'" +
             (declared ? "" : " (header absent)") + " but the file has " + std::to_string(actual) +
             " " +
             (std::string(what) == "Connections" ? "connection"
              : std::string(what) == "Triggers"  ? "trigger"
                                                 : "failure") +
             " lines";
    };
    for (auto msg : {count("Connections", conns_, m_.connections.size()),
                     count("Triggers", trigs_, m_.triggers.size()),
                     count("Failures", fails_, m_.failures.size())})
      if (!msg.empty()) return sim_fail(msg);
    for (const auto& [id, line] : referenced_) {
      bool found = false;
      for (const auto& t : m_.triggers)
        found = found || t.id == id;
      if (!found)
        return sim_fail(at(line) + ": trigger " + std::to_string(id) +
                        " is referenced but never defined ('trigger id " + std::to_string(id) +
                        " oneshot|multishot|barrier')");
    }
    return std::move(m_);
  }

  std::string_view file_;
  uint32_t line_ = 0;
  bool body_started_ = false;
  std::optional<uint32_t> nodes_, conns_, trigs_, fails_;
  std::unordered_map<uint32_t, uint32_t> flow_ids_;  // id -> line
  std::map<uint32_t, uint32_t> referenced_;          // trigger id -> first line
  HtsimMatrix m_;
};

}  // namespace

SimResult<HtsimMatrix> parse_htsim_cm(std::string_view text, std::string_view filename) {
  return CmParser(filename).parse(text);
}

SimResult<HtsimMatrix> load_htsim_cm(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return sim_fail(path + ": cannot open connection matrix");
  std::ostringstream ss;
  ss << in.rdbuf();
  return parse_htsim_cm(ss.str(), path);
}

SimResult<HtsimFault> htsim_fault(const HtsimFailure& f, uint32_t leaves, uint32_t spines,
                                  uint32_t planes, std::string_view filename) {
  const std::string where = std::string(filename) + ":" + std::to_string(f.line) + ": ";
  if (f.plane >= planes)
    return sim_fail(where + "plane " + std::to_string(f.plane) + " out of range (fabric has " +
                    std::to_string(planes) + " planes)");
  HtsimFault out;
  out.at = f.at;
  const bool tor = f.switch_type == HtsimFailure::kTor;
  const uint32_t nsw = tor ? leaves : spines;
  const uint32_t nlink = tor ? spines : leaves;
  const char* sname = tor ? "leaf (TOR)" : "spine (AGG/CORE)";
  if (f.switch_id >= nsw)
    return sim_fail(where + "switch_id " + std::to_string(f.switch_id) + " out of range: the " +
                    sname + " count per plane is " + std::to_string(nsw));
  if (!f.link_id) {
    out.whole_switch = true;
    out.sw = SwitchRef{tor ? SwitchRef::kLeaf : SwitchRef::kSpine, f.plane, f.switch_id};
    return out;
  }
  if (*f.link_id >= nlink)
    return sim_fail(where + "link_id " + std::to_string(*f.link_id) + " out of range: a " + sname +
                    " has " + std::to_string(nlink) + (tor ? " uplinks" : " downlinks"));
  out.link = LinkRef{LinkRef::kLeafSpine, f.plane, tor ? f.switch_id : *f.link_id,
                     tor ? *f.link_id : f.switch_id};
  return out;
}

HtsimWorkload::HtsimWorkload(HtsimMatrix m) : m_(std::move(m)) {
  for (const auto& t : m_.triggers)
    triggers_[t.id].spec = t;
  for (uint32_t i = 0; i < m_.connections.size(); ++i)
    if (m_.connections[i].trigger) triggers_[m_.connections[i].trigger].targets.push_back(i);
}

uint64_t HtsimWorkload::total_bytes() const {
  if (!m_.triggers.empty()) return 0;
  uint64_t total = 0;
  for (const HtsimConnection& c : m_.connections)
    total += c.bytes;
  return total;
}

SimStatus HtsimWorkload::launch(uint32_t conn, Time at, FlowSink& sink) {
  const HtsimConnection& c = m_.connections[conn];
  FlowSpec s{c.src, c.dst, c.bytes, at, false, c.id};
  auto id = sink.add_flow(s);
  if (!id)
    return sim_fail(id.error().code, "htsim matrix line " + std::to_string(c.line) + ": " +
                                         flow_error("connection", s, id.error().code));
  conn_of_[*id] = conn;
  ++started_;
  return {};
}

SimStatus HtsimWorkload::start(FlowSink& sink) {
  for (uint32_t i = 0; i < m_.connections.size(); ++i)
    if (m_.connections[i].start) {
      auto st = launch(i, *m_.connections[i].start, sink);
      if (!st) return st;
    }
  return {};
}

SimStatus HtsimWorkload::activate(uint32_t trigger, Time at, FlowSink& sink) {
  auto it = triggers_.find(trigger);
  if (it == triggers_.end()) return {};
  TriggerState& t = it->second;
  ++t.activations;
  switch (t.spec.type) {
    case HtsimTrigger::kOneshot:
      if (t.fired) return {};
      t.fired = true;
      break;
    case HtsimTrigger::kMultishot:
      if (t.next >= t.targets.size()) return {};
      return launch(t.targets[t.next++], at, sink);
    case HtsimTrigger::kBarrier:
      if (t.fired || t.activations < t.spec.count) return {};
      t.fired = true;
      break;
  }
  for (uint32_t c : t.targets) {
    auto st = launch(c, at, sink);
    if (!st) return st;
  }
  return {};
}

SimStatus HtsimWorkload::on_complete(const FlowResult& r, FlowSink& sink) {
  auto it = conn_of_.find(r.id);
  if (it == conn_of_.end()) return {};
  const HtsimConnection& c = m_.connections[it->second];
  conn_of_.erase(it);
  ++completed_;
  if (c.send_done_trigger) {
    auto st = activate(c.send_done_trigger, r.end, sink);
    if (!st) return st;
  }
  if (c.recv_done_trigger) return activate(c.recv_done_trigger, r.end, sink);
  return {};
}

bool HtsimWorkload::done() const {
  return completed_ == started_;
}

// ---- WorkloadDriver ------------------------------------------------------------------------

class WorkloadDriver::Tracking final : public FlowSink {
 public:
  explicit Tracking(WorkloadDriver& d) : d_(d) {}
  SimResult<FlowId> add_flow(const FlowSpec& spec) override {
    auto id = d_.sink_.add_flow(spec);
    if (id) {
      if (*id >= d_.owner_.size()) d_.owner_.resize(static_cast<size_t>(*id) + 1, kNoOwner);
      d_.owner_[*id] = current;
      ++d_.added_;
    }
    return id;
  }
  uint32_t current = 0;

 private:
  WorkloadDriver& d_;
};

WorkloadDriver::WorkloadDriver(FlowSink& sink)
    : sink_(sink), tracking_(std::make_unique<Tracking>(*this)) {}
WorkloadDriver::~WorkloadDriver() = default;

Workload& WorkloadDriver::add(std::unique_ptr<Workload> w) {
  workloads_.push_back(std::move(w));
  return *workloads_.back();
}

SimStatus WorkloadDriver::start() {
  for (uint32_t i = 0; i < workloads_.size(); ++i) {
    tracking_->current = i;
    auto st = workloads_[i]->start(*tracking_);
    if (!st) return st;
  }
  return {};
}

uint64_t WorkloadDriver::total_bytes() const {
  uint64_t total = 0;
  for (const auto& w : workloads_) {
    const uint64_t b = w->total_bytes();
    if (b == 0) return 0;
    total += b;
  }
  return total;
}

void WorkloadDriver::on_flow_complete(const FlowResult& r) {
  const uint32_t w = owner_of(r.id);
  if (w == kNoOwner) return;
  owner_[r.id] = kNoOwner;
  ++completed_;
  if (error_) return;
  tracking_->current = w;
  auto st = workloads_[w]->on_complete(r, *tracking_);
  if (!st) error_ = st.error();
}

void WorkloadDriver::on_flow_received(const FlowResult& r) {
  const uint32_t w = owner_of(r.id);
  if (w == kNoOwner || error_) return;
  tracking_->current = w;
  auto st = workloads_[w]->on_received(r, *tracking_);
  if (!st) error_ = st.error();
}

bool WorkloadDriver::done() const {
  for (const auto& w : workloads_)
    if (!w->done()) return false;
  return true;
}

}  // namespace mrc::sim
