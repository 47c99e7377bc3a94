// The `mrc` libfabric provider (src/fi/provider.cc) through libfabric's own API, as an
// application sees it: libfabric loads build/lib/libmrc-fi.so from FI_PROVIDER_PATH. Two
// domains of one process talk over loopback; progress comes from reading their CQs.
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace {

constexpr uint32_t kVersion = FI_VERSION(1, 17);

// Before libfabric's first call: it reads FI_PROVIDER_PATH once.
const bool g_path_set = [] {
  setenv("FI_PROVIDER_PATH", MRC_BINARY_DIR "/lib", 1);
  return true;
}();

struct InfoDeleter {
  void operator()(fi_info* i) const { fi_freeinfo(i); }
};
using Info = std::unique_ptr<fi_info, InfoDeleter>;

Info hints_for(uint64_t caps) {
  Info h(fi_allocinfo());
  h->caps = caps;
  h->ep_attr->type = FI_EP_RDM;
  h->fabric_attr->prov_name = strdup("mrc");
  h->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_PROV_KEY | FI_MR_ALLOCATED;
  return h;
}

// fi_getinfo for `hints`: the provider's info, or null with the return code in `rc`.
Info getinfo(const fi_info* hints, int* rc = nullptr) {
  fi_info* out = nullptr;
  const int r = fi_getinfo(kVersion, nullptr, nullptr, 0, hints, &out);
  if (rc) *rc = r;
  return Info(r == 0 ? out : nullptr);
}

// One process-local endpoint with its domain, AV and one CQ (tagged format) for both directions.
struct Node {
  Info info;
  fid_fabric* fabric = nullptr;
  fid_domain* domain = nullptr;
  fid_av* av = nullptr;
  fid_cq* cq = nullptr;
  fid_ep* ep = nullptr;
  std::vector<fi_cq_tagged_entry> done;
  std::vector<fi_cq_err_entry> errors;

  explicit Node(uint64_t caps = FI_TAGGED | FI_MSG | FI_RMA | FI_WRITE | FI_REMOTE_WRITE) {
    info = getinfo(hints_for(caps).get());
    EXPECT_TRUE(info);
    if (!info) return;
    EXPECT_EQ(fi_fabric(info->fabric_attr, &fabric, nullptr), 0);
    EXPECT_EQ(fi_domain(fabric, info.get(), &domain, nullptr), 0);
    fi_av_attr av_attr{};
    av_attr.type = FI_AV_TABLE;
    EXPECT_EQ(fi_av_open(domain, &av_attr, &av, nullptr), 0);
    fi_cq_attr cq_attr{};
    cq_attr.format = FI_CQ_FORMAT_TAGGED;
    EXPECT_EQ(fi_cq_open(domain, &cq_attr, &cq, nullptr), 0);
    EXPECT_EQ(fi_endpoint(domain, info.get(), &ep, nullptr), 0);
    EXPECT_EQ(fi_ep_bind(ep, &av->fid, 0), 0);
    EXPECT_EQ(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV), 0);
    EXPECT_EQ(fi_enable(ep), 0);
  }
  ~Node() { close(); }
  void close() {
    if (ep) {
      EXPECT_EQ(fi_close(&ep->fid), 0);
    }
    if (cq) {
      EXPECT_EQ(fi_close(&cq->fid), 0);
    }
    if (av) {
      EXPECT_EQ(fi_close(&av->fid), 0);
    }
    if (domain) {
      EXPECT_EQ(fi_close(&domain->fid), 0);
    }
    if (fabric) {
      EXPECT_EQ(fi_close(&fabric->fid), 0);
    }
    ep = nullptr, cq = nullptr, av = nullptr, domain = nullptr, fabric = nullptr;
  }

  std::vector<uint8_t> name() const {
    std::vector<uint8_t> n(256);
    size_t len = n.size();
    EXPECT_EQ(fi_getname(&ep->fid, n.data(), &len), 0);
    n.resize(len);
    return n;
  }
  fi_addr_t insert(const Node& peer) {
    fi_addr_t a = FI_ADDR_NOTAVAIL;
    EXPECT_EQ(fi_av_insert(av, peer.name().data(), 1, &a, 0, nullptr), 1);
    return a;
  }

  // One progress turn: reads what completed into done / errors.
  void poll() {
    fi_cq_tagged_entry e[8];
    const ssize_t n = fi_cq_read(cq, e, 8);
    if (n > 0) done.insert(done.end(), e, e + n);
    if (n == -FI_EAVAIL) {
      fi_cq_err_entry err{};
      EXPECT_EQ(fi_cq_readerr(cq, &err, 0), 1);
      errors.push_back(err);
    }
  }
};

// Polls every node until `ready` holds or `seconds` pass.
bool run_until(std::vector<Node*> nodes, const std::function<bool()>& ready, double seconds = 10) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (!ready()) {
    if (std::chrono::steady_clock::now() > end) return false;
    for (Node* n : nodes)
      n->poll();
  }
  return true;
}

std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = uint8_t(seed + i * 131 + (i >> 9));
  return v;
}

void* ctx(uintptr_t v) {
  return reinterpret_cast<void*>(v);
}

TEST(Provider, getinfo__offers_tagged_rdm_and_says_no_to_what_it_cannot_do) {
  Info info = getinfo(hints_for(FI_TAGGED | FI_MSG).get());
  ASSERT_TRUE(info);
  EXPECT_STREQ(info->fabric_attr->prov_name, "mrc");
  EXPECT_EQ(info->ep_attr->type, FI_EP_RDM);
  EXPECT_TRUE(info->caps & FI_TAGGED);
  EXPECT_FALSE(info->caps & FI_DIRECTED_RECV);   // not asked for
  EXPECT_NE(info->ep_attr->mem_tag_format, 0u);  // Open MPI counts its tag bits from it
  EXPECT_GT(info->tx_attr->inject_size, 0u);
  EXPECT_EQ(info->domain_attr->data_progress, FI_PROGRESS_MANUAL);

  int rc = 0;
  Info h = hints_for(FI_TAGGED | FI_ATOMIC);
  EXPECT_FALSE(getinfo(h.get(), &rc));
  EXPECT_EQ(rc, -FI_ENODATA);
  h = hints_for(FI_MSG);
  h->ep_attr->type = FI_EP_MSG;
  EXPECT_FALSE(getinfo(h.get(), &rc));
  h = hints_for(FI_MSG);
  h->domain_attr->data_progress = FI_PROGRESS_AUTO;
  EXPECT_FALSE(getinfo(h.get(), &rc));
  // FI_RMA alone implies reads, which MRC does not have; writes alone are offered.
  EXPECT_FALSE(getinfo(hints_for(FI_TAGGED | FI_RMA).get(), &rc));
  EXPECT_FALSE(getinfo(hints_for(FI_RMA | FI_READ).get(), &rc));
  info = getinfo(hints_for(FI_RMA | FI_WRITE).get());
  ASSERT_TRUE(info);
  EXPECT_FALSE(info->caps & (FI_READ | FI_REMOTE_READ));
}

TEST(Provider, tagged__eager_and_rendezvous_messages_arrive_whole_with_their_tags) {
  Node a, b;
  const fi_addr_t to_b = a.insert(b);
  b.insert(a);
  const auto small = pattern(100, 1), large = pattern(3 << 20, 2);
  std::vector<uint8_t> r1(small.size()), r2(large.size());
  ASSERT_EQ(fi_trecv(b.ep, r1.data(), r1.size(), nullptr, FI_ADDR_UNSPEC, 0x10, 0xF, ctx(1)), 0);
  ASSERT_EQ(fi_trecv(b.ep, r2.data(), r2.size(), nullptr, FI_ADDR_UNSPEC, 0x20, 0, ctx(2)), 0);
  ASSERT_EQ(fi_tsend(a.ep, small.data(), small.size(), nullptr, to_b, 0x13, ctx(11)), 0);
  ASSERT_EQ(fi_tsend(a.ep, large.data(), large.size(), nullptr, to_b, 0x20, ctx(12)), 0);
  ASSERT_TRUE(run_until({&a, &b}, [&] { return a.done.size() == 2 && b.done.size() == 2; }));
  EXPECT_TRUE(a.errors.empty() && b.errors.empty());
  EXPECT_EQ(b.done[0].op_context, ctx(1));
  EXPECT_EQ(b.done[0].tag, 0x13u);
  EXPECT_EQ(b.done[0].len, small.size());
  EXPECT_TRUE(b.done[0].flags & FI_RECV);
  EXPECT_EQ(r1, small);
  EXPECT_EQ(b.done[1].op_context, ctx(2));
  EXPECT_EQ(r2, large);
}

// FI_MRC_QLOG: each domain writes its engine's event log to a file of its own.
TEST(Provider, qlog__each_domain_writes_its_engines_events_to_its_own_file) {
  char dir[] = "/tmp/mrc-fi-qlog.XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string prefix = std::string(dir) + "/q";
  setenv("FI_MRC_QLOG", prefix.c_str(), 1);
  {
    Node a, b;
    unsetenv("FI_MRC_QLOG");
    const fi_addr_t to_b = a.insert(b);
    b.insert(a);
    const auto msg = pattern(100, 3);
    std::vector<uint8_t> got(msg.size());
    ASSERT_EQ(fi_trecv(b.ep, got.data(), got.size(), nullptr, FI_ADDR_UNSPEC, 1, 0, ctx(1)), 0);
    ASSERT_EQ(fi_tsend(a.ep, msg.data(), msg.size(), nullptr, to_b, 1, ctx(2)), 0);
    ASSERT_TRUE(run_until({&a, &b}, [&] { return a.done.size() == 1 && b.done.size() == 1; }));
    EXPECT_EQ(got, msg);
  }
  unsetenv("FI_MRC_QLOG");
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    files.push_back(e.path().string());
  ASSERT_EQ(files.size(), 2u);
  for (const std::string& f : files) {
    std::ifstream in(f);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_NE(text.find("\"event\":\"packet_sent\""), std::string::npos) << f;
    EXPECT_NE(text.find("\"event\":\"packet_received\""), std::string::npos) << f;
  }
  std::filesystem::remove_all(dir);
}

// Once a rendezvous send has completed, the sender may stop calling into libfabric (fi_pingpong
// waits on its control socket, for one): the receive completes with the receiver's progress
// alone, every size, many times.
TEST(Provider, tagged__a_completed_rendezvous_send_needs_no_more_sender_progress) {
  Node a, b;
  const fi_addr_t to_b = a.insert(b);
  b.insert(a);
  for (const size_t size : {size_t(16'384), size_t(20'000), size_t(100'000), size_t(1) << 20}) {
    const auto msg = pattern(size, uint8_t(size));
    for (int i = 0; i < 20; ++i) {
      std::vector<uint8_t> r(size);
      a.done.clear();
      b.done.clear();
      ASSERT_EQ(fi_trecv(b.ep, r.data(), r.size(), nullptr, FI_ADDR_UNSPEC, 7, 0, ctx(1)), 0);
      ASSERT_EQ(fi_tsend(a.ep, msg.data(), msg.size(), nullptr, to_b, 7, ctx(2)), 0);
      ASSERT_TRUE(run_until({&a, &b}, [&] { return a.done.size() == 1; })) << size;
      ASSERT_TRUE(run_until(
          {&b}, [&] { return b.done.size() == 1; }, 2))
          << size << " " << i;
      EXPECT_EQ(r, msg);
    }
  }
  EXPECT_TRUE(a.errors.empty() && b.errors.empty());
}

TEST(Provider, inject__copies_the_buffer_and_reports_nothing_and_sendmsg_inject_reports) {
  Node a, b;
  const fi_addr_t to_b = a.insert(b);
  auto msg = pattern(64, 3);
  const auto sent = msg;
  std::vector<uint8_t> r1(64), r2(64);
  ASSERT_EQ(fi_recv(b.ep, r1.data(), r1.size(), nullptr, FI_ADDR_UNSPEC, ctx(1)), 0);
  ASSERT_EQ(fi_recv(b.ep, r2.data(), r2.size(), nullptr, FI_ADDR_UNSPEC, ctx(2)), 0);
  ASSERT_EQ(fi_inject(a.ep, msg.data(), msg.size(), to_b), 0);
  std::fill(msg.begin(), msg.end(), 0);  // the provider kept its own copy
  iovec iov{msg.data(), msg.size()};
  fi_msg m{};
  m.msg_iov = &iov;
  m.iov_count = 1;
  m.addr = to_b;
  m.context = ctx(12);
  ASSERT_EQ(fi_sendmsg(a.ep, &m, FI_INJECT | FI_TRANSMIT_COMPLETE), 0);
  ASSERT_TRUE(run_until({&a, &b}, [&] { return b.done.size() == 2 && a.done.size() == 1; }));
  EXPECT_EQ(r1, sent);
  EXPECT_EQ(r2, std::vector<uint8_t>(64, 0));
  EXPECT_EQ(a.done[0].op_context, ctx(12));  // only the sendmsg's completion
  run_until(
      {&a, &b}, [] { return false; }, 0.05);
  EXPECT_EQ(a.done.size(), 1u);
}

TEST(Provider, trecvmsg__peek_claim_and_discard) {
  Node a, b;
  const fi_addr_t to_b = a.insert(b);
  const auto m1 = pattern(500, 4), m2 = pattern(40'000, 5);
  ASSERT_EQ(fi_tsend(a.ep, m1.data(), m1.size(), nullptr, to_b, 7, ctx(11)), 0);
  ASSERT_EQ(fi_tsend(a.ep, m2.data(), m2.size(), nullptr, to_b, 8, ctx(12)), 0);

  fi_context peek_ctx{}, claim_ctx{}, none_ctx{}, drop_ctx{};
  fi_msg_tagged t{};
  t.addr = FI_ADDR_UNSPEC;
  // Peek for a tag that never comes: FI_ENOMSG as an error entry.
  t.tag = 99;
  t.context = &none_ctx;
  ASSERT_EQ(fi_trecvmsg(b.ep, &t, FI_PEEK), 0);
  ASSERT_TRUE(run_until({&a, &b}, [&] { return !b.errors.empty(); }));
  EXPECT_EQ(b.errors[0].err, FI_ENOMSG);
  EXPECT_EQ(b.errors[0].op_context, &none_ctx);
  // Peek and claim tag 7 once it has arrived.
  t.tag = 7;
  t.context = &peek_ctx;
  for (int i = 0; i < 10000 && b.done.empty(); ++i) {
    b.errors.clear();
    ASSERT_EQ(fi_trecvmsg(b.ep, &t, FI_PEEK | FI_CLAIM), 0);
    run_until({&a, &b}, [&] { return !b.done.empty() || !b.errors.empty(); });
  }
  ASSERT_EQ(b.done.size(), 1u);
  EXPECT_EQ(b.done[0].len, m1.size());
  EXPECT_EQ(b.done[0].tag, 7u);
  // A plain receive for tag 7 does not get the claimed message (it waits until canceled);
  // the claim does.
  std::vector<uint8_t> got(m1.size()), other(m1.size());
  ASSERT_EQ(fi_trecv(b.ep, other.data(), other.size(), nullptr, FI_ADDR_UNSPEC, 7, 0, &claim_ctx),
            0);
  run_until(
      {&a, &b}, [] { return false; }, 0.05);
  ASSERT_EQ(b.done.size(), 1u);
  ASSERT_EQ(fi_cancel(&b.ep->fid, &claim_ctx), 0);
  ASSERT_TRUE(run_until({&a, &b}, [&] { return !b.errors.empty(); }));
  EXPECT_EQ(b.errors.back().err, FI_ECANCELED);
  iovec iov{got.data(), got.size()};
  t.msg_iov = &iov;
  t.iov_count = 1;
  t.context = &peek_ctx;
  ASSERT_EQ(fi_trecvmsg(b.ep, &t, FI_CLAIM), 0);
  ASSERT_TRUE(run_until({&a, &b}, [&] { return b.done.size() == 2; }));
  EXPECT_EQ(got, m1);
  // Claim and discard tag 8 (a rendezvous message): the sender completes without error.
  t.tag = 8;
  t.context = &drop_ctx;
  t.iov_count = 0;
  for (int i = 0; i < 10000 && b.done.size() < 3; ++i) {
    b.errors.clear();
    ASSERT_EQ(fi_trecvmsg(b.ep, &t, FI_PEEK | FI_CLAIM), 0);
    run_until({&a, &b}, [&] { return b.done.size() == 3 || !b.errors.empty(); });
  }
  ASSERT_EQ(fi_trecvmsg(b.ep, &t, FI_CLAIM | FI_DISCARD), 0);
  ASSERT_TRUE(run_until({&a, &b}, [&] { return b.done.size() == 4 && a.done.size() == 2; }));
  EXPECT_EQ(b.done[3].len, 0u);
  EXPECT_TRUE(a.errors.empty());
  // FI_PEEK | FI_DISCARD is refused; a claim nobody made is refused.
  EXPECT_EQ(fi_trecvmsg(b.ep, &t, FI_PEEK | FI_DISCARD), -FI_EINVAL);
  t.context = &none_ctx;
  EXPECT_EQ(fi_trecvmsg(b.ep, &t, FI_CLAIM), -FI_EINVAL);
}

TEST(Provider, errors__truncation_and_cancel_come_as_error_entries_with_text) {
  Node a, b;
  const fi_addr_t to_b = a.insert(b);
  const auto msg = pattern(1000, 6);
  std::vector<uint8_t> small(100), never(10);
  ASSERT_EQ(fi_trecv(b.ep, never.data(), never.size(), nullptr, FI_ADDR_UNSPEC, 5, 0, ctx(2)), 0);
  ASSERT_EQ(fi_cancel(&b.ep->fid, ctx(2)), 0);
  EXPECT_EQ(fi_cancel(&b.ep->fid, ctx(2)), -FI_ENOENT);  // nothing left to cancel
  ASSERT_EQ(fi_trecv(b.ep, small.data(), small.size(), nullptr, FI_ADDR_UNSPEC, 1, 0, ctx(1)), 0);
  ASSERT_EQ(fi_tsend(a.ep, msg.data(), msg.size(), nullptr, to_b, 1, ctx(11)), 0);
  ASSERT_TRUE(run_until({&a, &b}, [&] { return b.errors.size() == 2 && a.done.size() == 1; }));
  EXPECT_EQ(b.errors[0].err, FI_ECANCELED);
  EXPECT_EQ(b.errors[0].op_context, ctx(2));
  EXPECT_EQ(b.errors[1].err, FI_ETRUNC);
  EXPECT_EQ(b.errors[1].len, 100u);
  EXPECT_EQ(b.errors[1].olen, 900u);
  const std::string text =
      fi_cq_strerror(b.cq, b.errors[1].prov_errno, b.errors[1].err_data, nullptr, 0);
  EXPECT_NE(text.find("truncated"), std::string::npos) << text;
}

TEST(Provider, rma__writedata_places_the_bytes_then_raises_a_remote_entry) {
  Node a, b;
  const fi_addr_t to_b = a.insert(b);
  std::vector<uint8_t> target(1 << 20, 0);
  fid_mr* mr = nullptr;
  ASSERT_EQ(
      fi_mr_reg(b.domain, target.data(), target.size(), FI_REMOTE_WRITE, 0, 0, 0, &mr, nullptr), 0);
  const auto data = pattern(300'000, 7);
  const uint64_t addr = reinterpret_cast<uint64_t>(target.data()) + 4096;
  ASSERT_EQ(fi_writedata(a.ep, data.data(), data.size(), nullptr, 0xABCD, to_b, addr, fi_mr_key(mr),
                         ctx(11)),
            0);
  ASSERT_TRUE(run_until({&a, &b}, [&] { return a.done.size() == 1 && b.done.size() == 1; }));
  EXPECT_TRUE(b.done[0].flags & FI_REMOTE_CQ_DATA);
  EXPECT_EQ(b.done[0].data, 0xABCDu);
  EXPECT_TRUE(std::equal(data.begin(), data.end(), target.begin() + 4096));
  EXPECT_EQ(target[4095], 0);
  EXPECT_EQ(fi_close(&mr->fid), 0);
}

TEST(Provider, bad_input__gets_an_error_and_changes_nothing) {
  Node a, b;
  const fi_addr_t to_b = a.insert(b);
  uint8_t byte = 1;
  EXPECT_EQ(fi_send(a.ep, &byte, 1, nullptr, to_b + 5, ctx(1)), -FI_EINVAL);  // no such peer
  EXPECT_EQ(fi_inject(a.ep, &byte, a.info->tx_attr->inject_size + 1, to_b), -FI_EINVAL);
  std::vector<uint8_t> junk(40, 0xEE);
  fi_addr_t out = 0;
  EXPECT_EQ(fi_av_insert(a.av, junk.data(), 1, &out, 0, nullptr), 0);
  EXPECT_EQ(out, FI_ADDR_NOTAVAIL);
  EXPECT_EQ(fi_read(a.ep, &byte, 1, nullptr, to_b, 0, 0, ctx(2)), -FI_ENOSYS);  // no READ
  EXPECT_EQ(fi_close(&a.cq->fid), -FI_EBUSY);                                   // still bound
  // After all that the pair still works.
  std::vector<uint8_t> r(1);
  ASSERT_EQ(fi_recv(b.ep, r.data(), 1, nullptr, FI_ADDR_UNSPEC, ctx(3)), 0);
  ASSERT_EQ(fi_send(a.ep, &byte, 1, nullptr, to_b, ctx(4)), 0);
  ASSERT_TRUE(run_until({&a, &b}, [&] { return a.done.size() == 1 && b.done.size() == 1; }));
  EXPECT_EQ(r[0], 1);
}

TEST(Provider, peer_gone__outstanding_operations_complete_with_an_error) {
  Node a;
  auto b = std::make_unique<Node>();
  const fi_addr_t to_b = a.insert(*b);
  const auto msg = pattern(1 << 20, 8);
  ASSERT_EQ(fi_tsend(a.ep, msg.data(), 100, nullptr, to_b, 1, ctx(1)), 0);
  std::vector<uint8_t> r(100);
  ASSERT_EQ(fi_trecv(b->ep, r.data(), r.size(), nullptr, FI_ADDR_UNSPEC, 1, 0, ctx(2)), 0);
  ASSERT_TRUE(run_until({&a, b.get()}, [&] { return a.done.size() == 1; }));
  b.reset();  // the peer process goes away mid-conversation
  ASSERT_EQ(fi_tsend(a.ep, msg.data(), msg.size(), nullptr, to_b, 2, ctx(3)), 0);
  ASSERT_TRUE(run_until(
      {&a}, [&] { return !a.errors.empty(); }, 30));
  EXPECT_EQ(a.errors[0].op_context, ctx(3));
  EXPECT_EQ(a.errors[0].err, FI_EIO);
  // The entry carries the connection's first error: nobody acknowledges any more, so the retry
  // budget runs out (not the flushed completions that follow it). err_data is the provider's
  // text until the next fi_cq_readerr.
  ASSERT_NE(a.errors[0].err_data, nullptr);
  ASSERT_GT(a.errors[0].err_data_size, 1u);
  const std::string cause(static_cast<const char*>(a.errors[0].err_data));
  EXPECT_EQ(cause.size() + 1, a.errors[0].err_data_size);
  EXPECT_NE(cause.find("retry exceeded"), std::string::npos) << cause;
  const std::string text =
      fi_cq_strerror(a.cq, a.errors[0].prov_errno, a.errors[0].err_data, nullptr, 0);
  EXPECT_NE(text.find("connection to the peer failed"), std::string::npos) << text;
  EXPECT_NE(text.find(cause), std::string::npos) << text;
  // Without err_data the cause's name still comes from prov_errno.
  const std::string bare = fi_cq_strerror(a.cq, a.errors[0].prov_errno, nullptr, nullptr, 0);
  EXPECT_NE(bare.find("retry exceeded"), std::string::npos) << bare;

  // An operation after the failure fails at once with the same cause; a caller's own err_data
  // buffer gets the text, cut to fit and terminated.
  ASSERT_EQ(fi_tsend(a.ep, msg.data(), 100, nullptr, to_b, 3, ctx(4)), 0);
  fi_cq_tagged_entry e;
  ASSERT_TRUE(run_until({&a}, [&] { return fi_cq_read(a.cq, &e, 1) == -FI_EAVAIL; }));
  char mine[24];
  std::memset(mine, 'x', sizeof mine);
  fi_cq_err_entry err{};
  err.err_data = mine;
  err.err_data_size = sizeof mine;
  ASSERT_EQ(fi_cq_readerr(a.cq, &err, 0), 1);
  EXPECT_EQ(err.op_context, ctx(4));
  EXPECT_EQ(err.prov_errno, a.errors[0].prov_errno);
  EXPECT_EQ(err.err_data, mine);
  EXPECT_EQ(err.err_data_size, sizeof mine);
  EXPECT_EQ(std::string(mine), cause.substr(0, sizeof mine - 1));
}

TEST(Provider, eq__carries_what_the_application_writes) {
  Info info = getinfo(hints_for(FI_MSG).get());
  ASSERT_TRUE(info);
  fid_fabric* fabric = nullptr;
  ASSERT_EQ(fi_fabric(info->fabric_attr, &fabric, nullptr), 0);
  fi_eq_attr attr{};
  attr.wait_obj = FI_WAIT_UNSPEC;
  fid_eq* eq = nullptr;
  ASSERT_EQ(fi_eq_open(fabric, &attr, &eq, nullptr), 0);
  uint32_t event = 0;
  fi_eq_entry in{}, out{};
  in.context = ctx(5);
  in.data = 42;
  EXPECT_EQ(fi_eq_read(eq, &event, &out, sizeof out, 0), -FI_EAGAIN);
  EXPECT_EQ(fi_eq_sread(eq, &event, &out, sizeof out, 10, 0), -FI_EAGAIN);
  EXPECT_EQ(fi_eq_write(eq, FI_NOTIFY, &in, sizeof in, 0), ssize_t(sizeof in));
  EXPECT_EQ(fi_eq_read(eq, &event, &out, sizeof out, FI_PEEK), ssize_t(sizeof out));
  EXPECT_EQ(fi_eq_sread(eq, &event, &out, sizeof out, 10, 0), ssize_t(sizeof out));
  EXPECT_EQ(event, uint32_t(FI_NOTIFY));
  EXPECT_EQ(out.context, ctx(5));
  EXPECT_EQ(out.data, 42u);
  EXPECT_EQ(fi_eq_read(eq, &event, &out, sizeof out, 0), -FI_EAGAIN);
  EXPECT_EQ(fi_close(&eq->fid), 0);
  EXPECT_EQ(fi_close(&fabric->fid), 0);
}

}  // namespace
