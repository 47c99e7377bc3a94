/* Compiled as C11 (-std=c11 -pedantic-errors): every name of the four OCP MRC headers (and
 * the device's vendor extension, mrc_soft.h), the
 * version macros, and the LP64 layout of ocp-mrc-api.md section 9. Linked into
 * test_api_headers, which calls mrc_headers_c11_names(). */
#include <mrc_ctl.h>
#include <mrc_soft.h>
#include <stddef.h>

#define CHECK_SIZE(type, size) _Static_assert(sizeof(type) == (size), #type " size")
#define CHECK_OFF(type, member, off) \
  _Static_assert(offsetof(type, member) == (off), #type "." #member " offset")

_Static_assert(MRC_API_VER(1, 0, 1) == 0x01000001, "MRC_API_VER");
_Static_assert(MRC_API_CURRENT_VERSION == 0x01000001, "current");
_Static_assert(MRC_API_LAST_SUPPORTED_VERSION == 0, "last supported");
_Static_assert(MRC_VENDOR_API_CURRENT_VERSION == 0x01000000, "vendor current");
_Static_assert(MRC_VENDOR_API_LAST_SUPPORTED_VERSION == 0, "vendor last");
_Static_assert(MRC_API_VER_USED == MRC_API_CURRENT_VERSION, "default used");
_Static_assert(MRC_VENDOR_API_VER_USED == MRC_VENDOR_API_CURRENT_VERSION, "vendor used");
_Static_assert(MRC_API_VER_MAJOR_OFFSET == 24 && MRC_API_VER_MINOR_OFFSET == 16 &&
                   MRC_API_VER_SUBMINOR_OFFSET == 0,
               "offsets");
_Static_assert(MRC_CTL_API_VER(1, 0, 1) == 0x01000001, "MRC_CTL_API_VER");
_Static_assert(MRC_CTL_API_CURRENT_VERSION == 0x01000001, "ctl current");
_Static_assert(MRC_CTL_API_LAST_SUPPORTED_VERSION == 0, "ctl last");
_Static_assert(MRC_CTL_VENDOR_API_CURRENT_VERSION == 0x01000000, "ctl vendor");
_Static_assert(MRC_CTL_VENDOR_API_LAST_SUPPORTED_VERSION == 0, "ctl vendor last");
_Static_assert(MRC_CTL_API_VER_USED == MRC_CTL_API_CURRENT_VERSION, "ctl used");
_Static_assert(MRC_CTL_VENDOR_API_VER_USED == MRC_CTL_VENDOR_API_CURRENT_VERSION, "ctl vused");
_Static_assert(MRC_CTL_API_VER_MAJOR_OFFSET == 24 && MRC_CTL_API_VER_MINOR_OFFSET == 16 &&
                   MRC_CTL_API_VER_SUBMINOR_OFFSET == 0,
               "ctl offsets");
#if MRC_API_VER_LATEST != 0xFFFFFFFF || MRC_CTL_API_VER_LATEST != 0xFFFFFFFF
#error "LATEST sentinel"
#endif

_Static_assert(MRC_MAX_VENDOR_CFG_SIZE == 128 && MRC_CTL_MAX_VENDOR_CFG_SIZE == 128, "cfg");
_Static_assert(MRC_CTL_EV_MAX_BYTES == 32, "ev bytes");
_Static_assert(MRC_PROTOCOL_VERSION_0 == 0 && MRC_PROTOCOL_VERSION_1 == 1, "proto");
_Static_assert(MRC_DEVICE_CAP_TRIM_NACK == 1 && MRC_DEVICE_CAP_DYNAMIC_MPR == 2 &&
                   MRC_DEVICE_CAP_SVC_TIME == 4,
               "device cap");
_Static_assert(MRC_QP_HINT_NUM_QPS_PER_PEER == 1 && MRC_QP_HINT_NUM_SEND_PEERS == 2 &&
                   MRC_QP_HINT_NUM_REMOTE_RECV_PEERS == 4 &&
                   (unsigned)MRC_QP_HINT_VENDOR_CFG == 0x80000000u,
               "hint mask");
_Static_assert(MRC_QP_MAX_WIMM == 0x1 && MRC_QP_MAX_WIMM_DEST == 0x2 && MRC_QP_MPR == 0x4 &&
                   MRC_QP_MPR_DEST == 0x8 && MRC_QP_TIMEOUT == 0x10 &&
                   MRC_QP_EV_PROFILE_ID == 0x20 && MRC_QP_CC_PROFILE_ID == 0x40 &&
                   MRC_QP_HINT == 0x80 && MRC_QP_RETRY_CNT == 0x100 && MRC_QP_CAP == 0x200 &&
                   (unsigned)MRC_QP_VENDOR_CFG == 0x80000000u,
               "qp attr mask");
_Static_assert(MRC_QP_CAP_TRIM_NACK_DEST_UNSUPPORTED == 1 && MRC_QP_CAP_DYNAMIC_MPR == 2 &&
                   MRC_QP_CAP_SVC_TIME_DEST_UNSUPPORTED == 4,
               "qp cap");
_Static_assert(MRC_CTL_PROTOCOL_VERSION_0 == 0 && MRC_CTL_PROTOCOL_VERSION_1 == 1, "ctl proto");
_Static_assert(MRC_CTL_PROFILE_INIT == 0 && MRC_CTL_PROFILE_OFFLINE == 1 &&
                   MRC_CTL_PROFILE_ONLINE == 2,
               "profile state");
_Static_assert(MRC_CTL_OPT_CAP_EV_PROFILE_MODIFY_ONLINE == 1 &&
                   MRC_CTL_OPT_CAP_CC_PROFILE_MODIFY_ONLINE == 2 && MRC_CTL_OPT_CAP_EV_EVENT == 4 &&
                   MRC_CTL_OPT_CAP_EV_EXPLICIT_RANGE == 8 &&
                   MRC_CTL_OPT_CAP_EV_EVENT_PRECISE_DROP_CNT == 0x10 &&
                   MRC_CTL_OPT_CAP_EP_OP_EV_PROBE == 0x20,
               "opt");
_Static_assert(MRC_CTL_PORT_ADMIN_DISABLED == 0 && MRC_CTL_PORT_ADMIN_ENABLED == 1 &&
                   MRC_CTL_PORT_ADMIN_STATE == 1,
               "port");
_Static_assert(MRC_CTL_EV_FMT_MODE_STEV == 1 && MRC_CTL_EV_FMT_MODE_SRV6 == 2 &&
                   MRC_CTL_EV_FMT_MODE_UDP == 4,
               "fmt mode");
_Static_assert(MRC_CTL_EV_FMT_OP_MODIFY_FIELDS == 0 && MRC_CTL_EV_FMT_OP_QUERY_FIELDS == 1,
               "fmt op");
_Static_assert(MRC_CTL_EV_FMT_PROFILE_STATE == 1 && MRC_CTL_EV_FMT_PROFILE_CUR_STATE == 2 &&
                   MRC_CTL_EV_FMT_PROFILE_MODE == 4 && MRC_CTL_EV_FMT_PROFILE_OP == 8 &&
                   (unsigned)MRC_CTL_EV_FMT_VENDOR_CFG == 0x80000000u,
               "fmt mask");
_Static_assert(MRC_CTL_EV_GOOD == 1 && MRC_CTL_EV_ASSUMED_BAD == 2 && MRC_CTL_EV_DENIED == 4 &&
                   (unsigned)MRC_CTL_EV_UNKNOWN == 0x80000000u,
               "ev state");
_Static_assert(MRC_CTL_EV_MODE_AUTO == 1 && MRC_CTL_EV_MODE_EXP == 2 && MRC_CTL_EV_MODE_GEN == 4,
               "ev mode");
_Static_assert(MRC_CTL_EV_OP_REPLACE_EV == 0 && MRC_CTL_EV_OP_MODIFY_EV_STATE == 1 &&
                   MRC_CTL_EV_OP_QUERY_EV_STATE == 2 && MRC_CTL_EV_OP_QUERY_EV_ARRAY == 3,
               "ev op");
_Static_assert(MRC_CTL_EV_FIELDS_OP_MODIFY_FIELDS == 0 && MRC_CTL_EV_FIELDS_OP_QUERY_FIELDS == 1,
               "fields op");
_Static_assert(MRC_CTL_EV_PROFILE_STATE == 1 && MRC_CTL_EV_PROFILE_CUR_STATE == 2 &&
                   MRC_CTL_EV_PROFILE_MODE == 4 && MRC_CTL_EV_PROFILE_FMT_ID == 8 &&
                   MRC_CTL_EV_PROFILE_COUNT == 0x10 && MRC_CTL_EV_PROFILE_MIN_ACTIVE == 0x20 &&
                   MRC_CTL_EV_PROFILE_EVENT_MASK == 0x40 && MRC_CTL_EV_PROFILE_EV_OP == 0x80 &&
                   MRC_CTL_EV_PROFILE_EV_FIELDS_OP == 0x100 &&
                   (unsigned)MRC_CTL_EV_PROFILE_VENDOR_CFG == 0x80000000u,
               "ev profile mask");
_Static_assert(MRC_CTL_EV_OP_F_ALL_COPIES == 1, "all copies");
_Static_assert(MRC_CTL_CC_PROFILE_STATE == 1 && MRC_CTL_CC_PROFILE_CUR_STATE == 2 &&
                   MRC_CTL_CC_PROFILE_ALGORITHM == 4 && MRC_CTL_CC_PROFILE_CONFIG == 8 &&
                   (unsigned)MRC_CTL_CC_PROFILE_VENDOR_CFG == 0x80000000u,
               "cc mask");
_Static_assert(MRC_CTL_EP_OP_EV_PROBE == 0 && MRC_CTL_EP_OP_PORT_STATUS_UPDATE == 1, "ep op");

/* Section 9: LP64 layout. */
CHECK_SIZE(struct mrc_device_attr, 20);
CHECK_OFF(struct mrc_device_attr, wimm_attr, 4);
CHECK_OFF(struct mrc_device_attr, mpr_attr, 8);
CHECK_OFF(struct mrc_device_attr, qp_attr, 12);
CHECK_OFF(struct mrc_device_attr, cap, 16);
CHECK_SIZE(struct mrc_context_attr, 8);
CHECK_SIZE(struct mrc_qp_hint_attr, 140);
CHECK_OFF(struct mrc_qp_hint_attr, vendor_cfg, 12);
CHECK_SIZE(struct mrc_qp_hint_init_attr, 140);
CHECK_SIZE(struct mrc_qp_init_attr, 72);
CHECK_OFF(struct mrc_qp_init_attr, send_cq, 8);
CHECK_OFF(struct mrc_qp_init_attr, recv_cq, 16);
CHECK_OFF(struct mrc_qp_init_attr, cap, 24);
CHECK_OFF(struct mrc_qp_init_attr, sq_sig_all, 44);
CHECK_OFF(struct mrc_qp_init_attr, pd, 48);
CHECK_OFF(struct mrc_qp_init_attr, send_ops_flags, 56);
CHECK_OFF(struct mrc_qp_init_attr, protocol_version, 64);
CHECK_SIZE(struct mrc_qp_attr, 176);
CHECK_OFF(struct mrc_qp_attr, mpr, 0);
CHECK_OFF(struct mrc_qp_attr, wimm, 2);
CHECK_OFF(struct mrc_qp_attr, timeout, 6);
CHECK_OFF(struct mrc_qp_attr, profile, 8);
CHECK_OFF(struct mrc_qp_attr, retry, 24);
CHECK_OFF(struct mrc_qp_attr, qp_hint, 32);
CHECK_OFF(struct mrc_qp_attr, cap, 40);
CHECK_OFF(struct mrc_qp_attr, vendor_cfg, 44);
CHECK_SIZE(struct mrc_async_event, 16);
CHECK_OFF(struct mrc_async_event, event_type, 8);
CHECK_SIZE(struct mrc_ctl_device_attr, 72);
CHECK_OFF(struct mrc_ctl_device_attr, ev, 4);
CHECK_OFF(struct mrc_ctl_device_attr, cc, 48);
CHECK_OFF(struct mrc_ctl_device_attr, cc.algorithms, 56);
CHECK_OFF(struct mrc_ctl_device_attr, phy_port_mask, 64);
CHECK_OFF(struct mrc_ctl_device_attr, opt_attr, 68);
CHECK_SIZE(struct mrc_ctl_port_attr, 4);
CHECK_SIZE(struct mrc_ctl_ev_fmt_field, 1);
CHECK_SIZE(struct mrc_ctl_ev_fmt_profile_attr, 168);
CHECK_OFF(struct mrc_ctl_ev_fmt_profile_attr, ev_fmt_mode, 8);
CHECK_OFF(struct mrc_ctl_ev_fmt_profile_attr, ev_fmt_op, 16);
CHECK_OFF(struct mrc_ctl_ev_fmt_profile_attr, ev_fmt_op.fmt_fields, 24);
CHECK_OFF(struct mrc_ctl_ev_fmt_profile_attr, ev_fmt_op.fmt_field_count, 32);
CHECK_OFF(struct mrc_ctl_ev_fmt_profile_attr, vendor_cfg, 40);
CHECK_SIZE(struct mrc_ctl_ev, 33);
CHECK_OFF(struct mrc_ctl_ev, port, 32);
CHECK_SIZE(struct mrc_ctl_ev_field, 20);
CHECK_SIZE(struct mrc_ctl_ev_op_entry, 76);
CHECK_OFF(struct mrc_ctl_ev_op_entry, ev_new, 33);
CHECK_OFF(struct mrc_ctl_ev_op_entry, state, 68);
CHECK_OFF(struct mrc_ctl_ev_op_entry, flags, 72);
CHECK_SIZE(struct mrc_ctl_ev_profile_attr, 216);
CHECK_OFF(struct mrc_ctl_ev_profile_attr, ev_mode, 8);
CHECK_OFF(struct mrc_ctl_ev_profile_attr, ev_fmt_profile_id, 16);
CHECK_OFF(struct mrc_ctl_ev_profile_attr, ev_count, 24);
CHECK_OFF(struct mrc_ctl_ev_profile_attr, ev_min_active, 28);
CHECK_OFF(struct mrc_ctl_ev_profile_attr, ev_event_mask, 32);
CHECK_OFF(struct mrc_ctl_ev_profile_attr, ev_op, 40);
CHECK_OFF(struct mrc_ctl_ev_profile_attr, ev_op.entries, 48);
CHECK_OFF(struct mrc_ctl_ev_profile_attr, ev_op.entry_count, 56);
CHECK_OFF(struct mrc_ctl_ev_profile_attr, ev_fields_op, 64);
CHECK_OFF(struct mrc_ctl_ev_profile_attr, ev_fields_op.fields, 72);
CHECK_OFF(struct mrc_ctl_ev_profile_attr, ev_fields_op.field_count, 80);
CHECK_OFF(struct mrc_ctl_ev_profile_attr, vendor_cfg, 88);
CHECK_SIZE(struct mrc_ctl_cc_profile_attr, 152);
CHECK_OFF(struct mrc_ctl_cc_profile_attr, algorithm, 8);
CHECK_OFF(struct mrc_ctl_cc_profile_attr, cc_config, 16);
CHECK_OFF(struct mrc_ctl_cc_profile_attr, vendor_cfg, 24);
CHECK_SIZE(struct mrc_ctl_cc_nscc_cfg, 52);
CHECK_OFF(struct mrc_ctl_cc_nscc_cfg, adjust_bytes_threshold, 4);
CHECK_OFF(struct mrc_ctl_cc_nscc_cfg, adjust_period_threshold, 8);
CHECK_OFF(struct mrc_ctl_cc_nscc_cfg, base_rtt, 12);
CHECK_OFF(struct mrc_ctl_cc_nscc_cfg, eta, 16);
CHECK_OFF(struct mrc_ctl_cc_nscc_cfg, fi, 20);
CHECK_OFF(struct mrc_ctl_cc_nscc_cfg, fi_scale, 24);
CHECK_OFF(struct mrc_ctl_cc_nscc_cfg, gamma, 28);
CHECK_OFF(struct mrc_ctl_cc_nscc_cfg, max_md_jump, 32);
CHECK_OFF(struct mrc_ctl_cc_nscc_cfg, max_cwnd, 36);
CHECK_OFF(struct mrc_ctl_cc_nscc_cfg, qa_gate, 40);
CHECK_OFF(struct mrc_ctl_cc_nscc_cfg, qa_threshold, 44);
CHECK_OFF(struct mrc_ctl_cc_nscc_cfg, target_delay, 48);
CHECK_SIZE(struct mrc_ctl_ev_event, 56);
CHECK_OFF(struct mrc_ctl_ev_event, ev, 8);
CHECK_OFF(struct mrc_ctl_ev_event, drop_count, 44);
CHECK_OFF(struct mrc_ctl_ev_event, state, 48);
CHECK_SIZE(struct mrc_ctl_ep_req, 88);
CHECK_OFF(struct mrc_ctl_ep_req, sgid, 8);
CHECK_OFF(struct mrc_ctl_ep_req, dgid, 24);
CHECK_OFF(struct mrc_ctl_ep_req, ev_fmt_mode, 40);
CHECK_OFF(struct mrc_ctl_ep_req, req_ev, 44);
CHECK_OFF(struct mrc_ctl_ep_req, op, 80);
CHECK_OFF(struct mrc_ctl_ep_req, op.port_status_update.port_status, 80);
CHECK_SIZE(struct mrc_ctl_ep_rsp, 12);
CHECK_OFF(struct mrc_ctl_ep_rsp, port, 2);
CHECK_OFF(struct mrc_ctl_ep_rsp, rtt, 4);
CHECK_OFF(struct mrc_ctl_ep_rsp, adj_svc_time, 8);

/* Every function, by its exact signature (a mismatch is a compile error). */
typedef void (*any_fn)(void);
int mrc_headers_c11_names(void);
int mrc_headers_c11_names(void) {
  int (*qd_ex)(struct ibv_context *, struct mrc_context *, struct mrc_device_attr *, int *) =
      mrc_query_device_ex;
  int (*qd)(struct ibv_context *, struct mrc_device_attr *, int *) = mrc_query_device;
  void (*qv)(uint32_t *, uint32_t *, uint32_t *, uint32_t *) = mrc_query_version;
  struct mrc_context *(*cc)(struct ibv_context *, struct mrc_context_attr *) =
      mrc_create_context;
  int (*dc)(struct mrc_context *) = mrc_destroy_context;
  int (*ccc)(struct mrc_context *, struct mrc_comp_channel **) = mrc_create_comp_channel;
  int (*gcf)(struct mrc_comp_channel *, int *) = mrc_get_comp_channel_fd;
  int (*dcc)(struct mrc_comp_channel *) = mrc_destroy_comp_channel;
  struct mrc_cq *(*ccq)(struct mrc_context *, int, void *, struct mrc_comp_channel *, int) =
      mrc_create_cq;
  int (*pcq)(struct mrc_cq *, int, struct ibv_wc *) = mrc_poll_cq;
  int (*dcq)(struct mrc_cq *) = mrc_destroy_cq;
  struct mrc_qp_hint *(*ch)(struct mrc_context *, struct mrc_qp_hint_init_attr *) =
      mrc_create_qp_hint;
  int (*dh)(struct mrc_qp_hint *) = mrc_destroy_qp_hint;
  int (*qh)(struct mrc_qp_hint *, struct mrc_qp_hint_attr *, int) = mrc_query_qp_hint;
  int (*mh)(struct mrc_qp_hint *, struct mrc_qp_hint_attr *, int) = mrc_modify_qp_hint;
  struct mrc_qp *(*cq)(struct mrc_context *, struct mrc_qp_init_attr *) = mrc_create_qp;
  int (*dq)(struct mrc_qp *) = mrc_destroy_qp;
  int (*qq)(struct mrc_qp *, struct ibv_qp_attr *, int, struct mrc_qp_attr *, int,
            struct mrc_qp_init_attr *) = mrc_query_qp;
  int (*mq)(struct mrc_qp *, struct ibv_qp_attr *, int, struct mrc_qp_attr *, int) =
      mrc_modify_qp;
  int (*gq)(struct mrc_qp *, uint32_t *) = mrc_get_qpn;
  int (*pr)(struct mrc_qp *, struct ibv_recv_wr *, struct ibv_recv_wr **) = mrc_post_recv;
  int (*ps)(struct mrc_qp *, struct ibv_send_wr *, struct ibv_send_wr **) = mrc_post_send;
  int (*gae)(struct mrc_context *, struct mrc_async_event *) = mrc_get_async_event;
  void (*aae)(struct mrc_async_event *) = mrc_ack_async_event;
  int (*rn)(struct mrc_cq *, int) = mrc_req_notify_cq;
  int (*gce)(struct mrc_comp_channel *, struct mrc_cq **, void **) = mrc_get_cq_event;
  void (*ace)(struct mrc_cq *, unsigned int) = mrc_ack_cq_events;
  int (*cqd_ex)(struct ibv_context *, struct mrc_context *, struct mrc_ctl_device_attr *, int *) =
      mrc_ctl_query_device_ex;
  int (*cqd)(struct ibv_context *, struct mrc_ctl_device_attr *) = mrc_ctl_query_device;
  void (*cqv)(uint32_t *, uint32_t *, uint32_t *, uint32_t *) = mrc_ctl_query_version;
  int (*cqp)(struct mrc_context *, uint8_t, struct mrc_ctl_port_attr *, int) =
      mrc_ctl_query_port;
  int (*cmp)(struct mrc_context *, uint8_t, struct mrc_ctl_port_attr *, int) =
      mrc_ctl_modify_port;
  int (*mfp)(struct mrc_context *, uint64_t, struct mrc_ctl_ev_fmt_profile_attr *, int) =
      mrc_ctl_modify_ev_fmt_profile;
  int (*qfp)(struct mrc_context *, uint64_t, struct mrc_ctl_ev_fmt_profile_attr *, int) =
      mrc_ctl_query_ev_fmt_profile;
  int (*mep)(struct mrc_context *, uint64_t, struct mrc_ctl_ev_profile_attr *, int) =
      mrc_ctl_modify_ev_profile;
  int (*qep)(struct mrc_context *, uint64_t, struct mrc_ctl_ev_profile_attr *, int) =
      mrc_ctl_query_ev_profile;
  int (*mcp)(struct mrc_context *, uint64_t, struct mrc_ctl_cc_profile_attr *, int) =
      mrc_ctl_modify_cc_profile;
  int (*qcp)(struct mrc_context *, uint64_t, struct mrc_ctl_cc_profile_attr *, int) =
      mrc_ctl_query_cc_profile;
  struct mrc_cq *(*cec)(struct mrc_context *, int, void *, struct mrc_comp_channel *, int) =
      mrc_ctl_create_ev_event_cq;
  int (*pee)(struct mrc_cq *, int, struct mrc_ctl_ev_event *) = mrc_ctl_poll_ev_event;
  int (*ebs)(struct mrc_context *, uint8_t, enum mrc_ctl_ep_op_type, struct mrc_ctl_ep_req *,
             int, uint32_t, struct mrc_ctl_ep_rsp *, int *) = mrc_ctl_ep_batch_send_wait;
  any_fn all[] = {
      (any_fn)qd_ex, (any_fn)qd,  (any_fn)qv,  (any_fn)cc,   (any_fn)dc,  (any_fn)ccc,
      (any_fn)gcf,   (any_fn)dcc, (any_fn)ccq, (any_fn)pcq,  (any_fn)dcq, (any_fn)ch,
      (any_fn)dh,    (any_fn)qh,  (any_fn)mh,  (any_fn)cq,   (any_fn)dq,  (any_fn)qq,
      (any_fn)mq,    (any_fn)gq,  (any_fn)pr,  (any_fn)ps,   (any_fn)gae, (any_fn)aae,
      (any_fn)rn,    (any_fn)gce, (any_fn)ace, (any_fn)cqd_ex, (any_fn)cqd, (any_fn)cqv,
      (any_fn)cqp,   (any_fn)cmp, (any_fn)mfp, (any_fn)qfp,  (any_fn)mep, (any_fn)qep,
      (any_fn)mcp,   (any_fn)qcp, (any_fn)cec, (any_fn)pee,  (any_fn)ebs};
  int n = 0;
  for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i) n += all[i] != 0;
  /* The sentinel and the typedef. */
  struct mrc_ctl_ev unset = MRC_CTL_EV_UNPOPULATED;
  mrc_ctl_ev_t raw = {0};
  n += unset.port + raw[0];
  return n; /* 41 functions */
}
