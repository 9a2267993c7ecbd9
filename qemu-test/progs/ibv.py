"""libibverbs through ctypes, for the guest's test programs: the real library and the
provider it loads, no bindings of our own. Import it from a program in this folder (or put
this folder on sys.path first)."""
import ctypes
import sys

ibv = ctypes.CDLL("libibverbs.so.1", use_errno=True)
ibv.ibv_get_device_list.restype = ctypes.POINTER(ctypes.c_void_p)
ibv.ibv_get_device_list.argtypes = [ctypes.POINTER(ctypes.c_int)]
ibv.ibv_get_device_name.restype = ctypes.c_char_p
ibv.ibv_get_device_name.argtypes = [ctypes.c_void_p]
ibv.ibv_open_device.restype = ctypes.c_void_p
ibv.ibv_open_device.argtypes = [ctypes.c_void_p]
ibv.ibv_close_device.argtypes = [ctypes.c_void_p]
ibv.ibv_alloc_pd.restype = ctypes.c_void_p
ibv.ibv_alloc_pd.argtypes = [ctypes.c_void_p]
ibv.ibv_dealloc_pd.argtypes = [ctypes.c_void_p]
ibv.ibv_free_device_list.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
ibv.ibv_event_type_str.restype = ctypes.c_char_p
ibv.ibv_event_type_str.argtypes = [ctypes.c_int]


def die(msg):
    print(f"FAIL: {msg}", flush=True)
    sys.exit(1)


def open_device(name):
    """ibv_open_device() of the device called NAME; dies if there is none."""
    n = ctypes.c_int()
    devs = ibv.ibv_get_device_list(ctypes.byref(n))
    if not devs:
        die(f"ibv_get_device_list: errno {ctypes.get_errno()}")
    ctx = None
    for i in range(n.value):
        if ibv.ibv_get_device_name(devs[i]).decode() == name:
            ctx = ibv.ibv_open_device(devs[i])
            if not ctx:
                die(f"ibv_open_device({name}): errno {ctypes.get_errno()}")
    ibv.ibv_free_device_list(devs)
    if ctx is None:
        die(f"no device {name}")
    return ctx


# --- CQs, QPs and their events (rdma-core 56.1's verbs.h layouts) ---

class IbvDeviceAttr(ctypes.Structure):
    # struct ibv_device_attr.
    _fields_ = [
        ("fw_ver", ctypes.c_char * 64),
        ("node_guid", ctypes.c_uint64),
        ("sys_image_guid", ctypes.c_uint64),
        ("max_mr_size", ctypes.c_uint64),
        ("page_size_cap", ctypes.c_uint64),
        ("vendor_id", ctypes.c_uint32),
        ("vendor_part_id", ctypes.c_uint32),
        ("hw_ver", ctypes.c_uint32),
        ("max_qp", ctypes.c_int),
        ("max_qp_wr", ctypes.c_int),
        ("device_cap_flags", ctypes.c_uint),
        ("max_sge", ctypes.c_int),
        ("max_sge_rd", ctypes.c_int),
        ("max_cq", ctypes.c_int),
        ("max_cqe", ctypes.c_int),
        ("max_mr", ctypes.c_int),
        ("max_pd", ctypes.c_int),
        ("max_qp_rd_atom", ctypes.c_int),
        ("max_ee_rd_atom", ctypes.c_int),
        ("max_res_rd_atom", ctypes.c_int),
        ("max_qp_init_rd_atom", ctypes.c_int),
        ("max_ee_init_rd_atom", ctypes.c_int),
        ("atomic_cap", ctypes.c_int),
        ("max_ee", ctypes.c_int),
        ("max_rdd", ctypes.c_int),
        ("max_mw", ctypes.c_int),
        ("max_raw_ipv6_qp", ctypes.c_int),
        ("max_raw_ethy_qp", ctypes.c_int),
        ("max_mcast_grp", ctypes.c_int),
        ("max_mcast_qp_attach", ctypes.c_int),
        ("max_total_mcast_qp_attach", ctypes.c_int),
        ("max_ah", ctypes.c_int),
        ("max_fmr", ctypes.c_int),
        ("max_map_per_fmr", ctypes.c_int),
        ("max_srq", ctypes.c_int),
        ("max_srq_wr", ctypes.c_int),
        ("max_srq_sge", ctypes.c_int),
        ("max_pkeys", ctypes.c_uint16),
        ("local_ca_ack_delay", ctypes.c_uint8),
        ("phys_port_cnt", ctypes.c_uint8),
    ]


class IbvPortAttr(ctypes.Structure):
    # struct ibv_port_attr.
    _fields_ = [
        ("state", ctypes.c_int),
        ("max_mtu", ctypes.c_int),
        ("active_mtu", ctypes.c_int),
        ("gid_tbl_len", ctypes.c_int),
        ("port_cap_flags", ctypes.c_uint32),
        ("max_msg_sz", ctypes.c_uint32),
        ("bad_pkey_cntr", ctypes.c_uint32),
        ("qkey_viol_cntr", ctypes.c_uint32),
        ("pkey_tbl_len", ctypes.c_uint16),
        ("lid", ctypes.c_uint16),
        ("sm_lid", ctypes.c_uint16),
        ("lmc", ctypes.c_uint8),
        ("max_vl_num", ctypes.c_uint8),
        ("sm_sl", ctypes.c_uint8),
        ("subnet_timeout", ctypes.c_uint8),
        ("init_type_reply", ctypes.c_uint8),
        ("active_width", ctypes.c_uint8),
        ("active_speed", ctypes.c_uint8),
        ("phys_state", ctypes.c_uint8),
        ("link_layer", ctypes.c_uint8),
        ("flags", ctypes.c_uint8),
        ("port_cap_flags2", ctypes.c_uint16),
        ("active_speed_ex", ctypes.c_uint32),
    ]


class IbvCompChannel(ctypes.Structure):
    # struct ibv_comp_channel.
    _fields_ = [("context", ctypes.c_void_p), ("fd", ctypes.c_int), ("refcnt", ctypes.c_int)]


class IbvCq(ctypes.Structure):
    # struct ibv_cq, up to the fields tests read (libibverbs allocates it).
    _fields_ = [
        ("context", ctypes.c_void_p),
        ("channel", ctypes.c_void_p),
        ("cq_context", ctypes.c_void_p),
        ("handle", ctypes.c_uint32),
        ("cqe", ctypes.c_int),
    ]


class IbvQp(ctypes.Structure):
    # struct ibv_qp, up to the fields tests read (the provider allocates it).
    _fields_ = [
        ("context", ctypes.c_void_p),
        ("qp_context", ctypes.c_void_p),
        ("pd", ctypes.c_void_p),
        ("send_cq", ctypes.c_void_p),
        ("recv_cq", ctypes.c_void_p),
        ("srq", ctypes.c_void_p),
        ("handle", ctypes.c_uint32),
        ("qp_num", ctypes.c_uint32),
        ("state", ctypes.c_int),
        ("qp_type", ctypes.c_int),
    ]


class IbvQpCap(ctypes.Structure):
    # struct ibv_qp_cap.
    _fields_ = [
        ("max_send_wr", ctypes.c_uint32),
        ("max_recv_wr", ctypes.c_uint32),
        ("max_send_sge", ctypes.c_uint32),
        ("max_recv_sge", ctypes.c_uint32),
        ("max_inline_data", ctypes.c_uint32),
    ]


class IbvQpInitAttr(ctypes.Structure):
    # struct ibv_qp_init_attr.
    _fields_ = [
        ("qp_context", ctypes.c_void_p),
        ("send_cq", ctypes.c_void_p),
        ("recv_cq", ctypes.c_void_p),
        ("srq", ctypes.c_void_p),
        ("cap", IbvQpCap),
        ("qp_type", ctypes.c_int),
        ("sq_sig_all", ctypes.c_int),
    ]


class IbvGlobalRoute(ctypes.Structure):
    # struct ibv_global_route; union ibv_gid is 16 bytes, 8-byte aligned.
    _fields_ = [
        ("dgid", ctypes.c_uint64 * 2),
        ("flow_label", ctypes.c_uint32),
        ("sgid_index", ctypes.c_uint8),
        ("hop_limit", ctypes.c_uint8),
        ("traffic_class", ctypes.c_uint8),
    ]


class IbvAhAttr(ctypes.Structure):
    # struct ibv_ah_attr.
    _fields_ = [
        ("grh", IbvGlobalRoute),
        ("dlid", ctypes.c_uint16),
        ("sl", ctypes.c_uint8),
        ("src_path_bits", ctypes.c_uint8),
        ("static_rate", ctypes.c_uint8),
        ("is_global", ctypes.c_uint8),
        ("port_num", ctypes.c_uint8),
    ]


class IbvQpAttr(ctypes.Structure):
    # struct ibv_qp_attr.
    _fields_ = [
        ("qp_state", ctypes.c_int),
        ("cur_qp_state", ctypes.c_int),
        ("path_mtu", ctypes.c_int),
        ("path_mig_state", ctypes.c_int),
        ("qkey", ctypes.c_uint32),
        ("rq_psn", ctypes.c_uint32),
        ("sq_psn", ctypes.c_uint32),
        ("dest_qp_num", ctypes.c_uint32),
        ("qp_access_flags", ctypes.c_uint),
        ("cap", IbvQpCap),
        ("ah_attr", IbvAhAttr),
        ("alt_ah_attr", IbvAhAttr),
        ("pkey_index", ctypes.c_uint16),
        ("alt_pkey_index", ctypes.c_uint16),
        ("en_sqd_async_notify", ctypes.c_uint8),
        ("sq_draining", ctypes.c_uint8),
        ("max_rd_atomic", ctypes.c_uint8),
        ("max_dest_rd_atomic", ctypes.c_uint8),
        ("min_rnr_timer", ctypes.c_uint8),
        ("port_num", ctypes.c_uint8),
        ("timeout", ctypes.c_uint8),
        ("retry_cnt", ctypes.c_uint8),
        ("rnr_retry", ctypes.c_uint8),
        ("alt_port_num", ctypes.c_uint8),
        ("alt_timeout", ctypes.c_uint8),
        ("rate_limit", ctypes.c_uint32),
    ]


class IbvAsyncEvent(ctypes.Structure):
    # struct ibv_async_event: a pointer-sized union (cq, qp, srq, wq, port_num), then
    # enum ibv_event_type.
    _fields_ = [("element", ctypes.c_uint64), ("event_type", ctypes.c_int)]


# enum ibv_qp_type, ibv_qp_state, ibv_event_type (values), ibv_qp_attr_mask.
IBV_QPT_RC, IBV_QPT_UC, IBV_QPT_UD = 2, 3, 4
QP_STATES = ["RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR"]
IBV_EVENT_CQ_ERR, IBV_EVENT_SQ_DRAINED = 0, 5
QP_ATTR = {
    "STATE": 1 << 0, "CUR_STATE": 1 << 1, "EN_SQD_ASYNC_NOTIFY": 1 << 2,
    "ACCESS_FLAGS": 1 << 3, "PKEY_INDEX": 1 << 4, "PORT": 1 << 5, "QKEY": 1 << 6,
    "AV": 1 << 7, "PATH_MTU": 1 << 8, "TIMEOUT": 1 << 9, "RETRY_CNT": 1 << 10,
    "RNR_RETRY": 1 << 11, "RQ_PSN": 1 << 12, "MAX_QP_RD_ATOMIC": 1 << 13,
    "ALT_PATH": 1 << 14, "MIN_RNR_TIMER": 1 << 15, "SQ_PSN": 1 << 16,
    "MAX_DEST_RD_ATOMIC": 1 << 17, "PATH_MIG_STATE": 1 << 18, "CAP": 1 << 19,
    "DEST_QPN": 1 << 20, "RATE_LIMIT": 1 << 25,
}

_P = ctypes.c_void_p
ibv.ibv_query_device.argtypes = [_P, ctypes.POINTER(IbvDeviceAttr)]
ibv.ibv_query_port.argtypes = [_P, ctypes.c_uint8, ctypes.POINTER(IbvPortAttr)]
ibv.ibv_create_comp_channel.restype = ctypes.POINTER(IbvCompChannel)
ibv.ibv_create_comp_channel.argtypes = [_P]
ibv.ibv_destroy_comp_channel.argtypes = [ctypes.POINTER(IbvCompChannel)]
ibv.ibv_create_cq.restype = ctypes.POINTER(IbvCq)
ibv.ibv_create_cq.argtypes = [_P, ctypes.c_int, _P, _P, ctypes.c_int]
ibv.ibv_destroy_cq.argtypes = [ctypes.POINTER(IbvCq)]
ibv.ibv_get_cq_event.argtypes = [ctypes.POINTER(IbvCompChannel), ctypes.POINTER(_P),
                                 ctypes.POINTER(_P)]
ibv.ibv_ack_cq_events.argtypes = [ctypes.POINTER(IbvCq), ctypes.c_uint]
ibv.ibv_create_qp.restype = ctypes.POINTER(IbvQp)
ibv.ibv_create_qp.argtypes = [_P, ctypes.POINTER(IbvQpInitAttr)]
ibv.ibv_destroy_qp.argtypes = [ctypes.POINTER(IbvQp)]
ibv.ibv_modify_qp.argtypes = [ctypes.POINTER(IbvQp), ctypes.POINTER(IbvQpAttr), ctypes.c_int]
ibv.ibv_query_qp.argtypes = [ctypes.POINTER(IbvQp), ctypes.POINTER(IbvQpAttr), ctypes.c_int,
                             ctypes.POINTER(IbvQpInitAttr)]
ibv.ibv_get_async_event.argtypes = [_P, ctypes.POINTER(IbvAsyncEvent)]
ibv.ibv_ack_async_event.argtypes = [ctypes.POINTER(IbvAsyncEvent)]
ibv.ibv_reg_mr.restype = _P
ibv.ibv_reg_mr.argtypes = [_P, _P, ctypes.c_size_t, ctypes.c_int]

# The fast-path verbs are static inline in verbs.h: they call struct ibv_context_ops'
# members, which follow ibv_context's device pointer. The slot of each (in pointers).
_OPS_SLOT = {"poll_cq": 11, "req_notify_cq": 12, "post_send": 25, "post_recv": 26}
_OPS_TYPE = {
    "poll_cq": ctypes.CFUNCTYPE(ctypes.c_int, _P, ctypes.c_int, _P),
    "req_notify_cq": ctypes.CFUNCTYPE(ctypes.c_int, _P, ctypes.c_int),
    "post_send": ctypes.CFUNCTYPE(ctypes.c_int, _P, _P, ctypes.POINTER(_P)),
    "post_recv": ctypes.CFUNCTYPE(ctypes.c_int, _P, _P, ctypes.POINTER(_P)),
}


def context_op(ctx, name):
    """The provider's NAME op of context CTX, as ibv_poll_cq() & co. call it."""
    fn = _P.from_address(ctx + 8 + 8 * _OPS_SLOT[name]).value
    if not fn:
        die(f"context op {name} is not set")
    return _OPS_TYPE[name](fn)


def ptr(p):
    """The address a ctypes pointer holds."""
    return ctypes.cast(p, _P).value
