#!/usr/bin/env python3
"""CQs and RC QPs through the real libibverbs and the ordma provider (ctypes), checked
against the NIC model (its object counts and doorbell counters in `status`, and events
posted through its control channel).

Usage: verbs_cq_qp.py CHECK...   (each in turn, on its own device context)
  cq       CQ sizes (cqe 1, 2, 3, 100, max_cqe: the next power of two, at least 2), cqe 0,
           -1 and max_cqe + 1 EINVAL; arming is a doorbell the NIC accepts; poll_cq of the
           empty CQ is 0
  events   a CQ_COMPLETION event for an armed CQ wakes ibv_get_cq_event with that CQ and
           its context; CQ_ERROR is IBV_EVENT_CQ_ERR for that CQ; RTS -> SQD with
           en_sqd_async_notify is IBV_EVENT_SQ_DRAINED for that QP
  caps     RC QP capabilities (what the provider sizes and the kernel answers), limits
           (EINVAL), a raw packet QP (EOPNOTSUPP), no RQ, post_send/post_recv in RESET are EINVAL
  states   the RC state machine: every (from, to) pair of reachable states with the
           attributes the pair requires; a missing or a disallowed attribute, bad values:
           EINVAL (PSNs past 24 bits are masked by ib_core, not refused); ibv_query_qp
           answers what was set; destroy in every state
  order    a CQ a QP uses, and the PD of a QP: EBUSY, the QP keeps working
  hold     creates a PD, 2 MRs, 2 CQs and 2 QPs (one in RTS), prints "holding", waits to
           be killed
Prints what it checked; exits 0 when everything held.
"""
import ctypes
import errno
import mmap
import re
import subprocess
import sys
import threading

from ibv import (
    IBV_EVENT_CQ_ERR, IBV_EVENT_SQ_DRAINED, IBV_QPT_RC, QP_ATTR, QP_STATES,
    IbvAsyncEvent, IbvDeviceAttr, IbvPortAttr, IbvQpAttr, IbvQpInitAttr, context_op, die,
    ibv, open_device, ptr,
)

NIC_CONTROL = "/ordma/src/qemu-test/progs/nic-control.sh"
DEV = "ordma0"
ACCESS = 1 | 2 | 4  # local write, remote write, remote read


def ename(e):
    if e == errno.EOPNOTSUPP:
        return "EOPNOTSUPP"  # errorcode says ENOTSUP, the same number on Linux
    return errno.errorcode.get(e, str(e)) if e else "success"


def ok(msg):
    print(f"ok: {msg}", flush=True)


def nic_ctl(*words):
    """(exit status, reply) of one control request to NIC model 0."""
    r = subprocess.run(
        ["bash", "-c", f'fail() {{ echo "$*"; exit 1; }}; source {NIC_CONTROL}; nic_ctl 0 "$@"',
         "nic_ctl", *words],
        capture_output=True, text=True, check=False,
    )
    return r.returncode, r.stdout.strip()


def nic_status():
    rc, out = nic_ctl("status")
    if rc:
        die(f"nic_ctl status: {out}")
    return {k: int(v) for k, v in re.findall(r" (\w+)=(\d+)", out)}


def expect_nic(what, **want):
    s = nic_status()
    got = {k: s.get(k) for k in want}
    if got != want:
        die(f"{what}: the NIC has {got}, expected {want}")
    ok(f"{what}: the NIC has {want}")


def device_attr(ctx):
    a = IbvDeviceAttr()
    r = ibv.ibv_query_device(ctx, ctypes.byref(a))
    if r:
        die(f"ibv_query_device: {ename(r)}")
    return a


def port_attr(ctx):
    a = IbvPortAttr()
    r = ibv.ibv_query_port(ctx, 1, ctypes.byref(a))
    if r:
        die(f"ibv_query_port: {ename(r)}")
    return a


def pow2_at_least(n):
    p = 1
    while p < n:
        p <<= 1
    return p


# --- CQs ---

def create_cq(ctx, cqe, channel=None, cq_context=None):
    """(cq, errno)."""
    ctypes.set_errno(0)
    cq = ibv.ibv_create_cq(ctx, cqe, cq_context, channel, 0)
    return (cq, 0) if cq else (None, ctypes.get_errno())


def cq_ok(ctx, cqe, channel=None, cq_context=None):
    cq, e = create_cq(ctx, cqe, channel, cq_context)
    if not cq:
        die(f"ibv_create_cq(cqe {cqe}): {ename(e)}")
    return cq


def destroy_cq_ok(cq, what):
    r = ibv.ibv_destroy_cq(cq)
    if r:
        die(f"ibv_destroy_cq({what}): {ename(r)}")


def check_cq():
    ctx = open_device(DEV)
    max_cqe = device_attr(ctx).max_cqe
    print(f"device max_cqe {max_cqe}", flush=True)
    expect_nic("before", cqs=0)
    sizes = (1, 2, 3, 100, max_cqe)
    cqs = []
    for cqe in sizes:
        cq = cq_ok(ctx, cqe)
        want = max(2, pow2_at_least(cqe))
        if cq.contents.cqe != want:
            die(f"ibv_create_cq(cqe {cqe}): the CQ has {cq.contents.cqe} CQEs, expected {want}")
        ok(f"ibv_create_cq(cqe {cqe}): {want} CQEs")
        cqs.append(cq)
    expect_nic(f"{len(sizes)} CQs created", cqs=len(sizes))
    # A resize (interface 1.7): the next power of two, as at create; 0 and max_cqe + 1 are
    # EINVAL with the CQ unchanged; the NIC holds as many CQs (cq_resize.c moves data).
    for cqe, want, werr in ((64, 64, 0), (3, 4, 0), (0, 4, errno.EINVAL), (max_cqe + 1, 4, errno.EINVAL)):
        r = ibv.ibv_resize_cq(cqs[0], cqe)
        if r != werr or cqs[0].contents.cqe != want:
            die(f"ibv_resize_cq({cqe}): {ename(r) if r else 0} ({cqs[0].contents.cqe} CQEs), "
                f"expected {ename(werr) if werr else 0} and {want} CQEs")
        ok(f"ibv_resize_cq({cqe}): {ename(r) if r else 'done'}, {want} CQEs")
    expect_nic("after the resizes", cqs=len(sizes))
    for cq in cqs:
        destroy_cq_ok(cq, f"cqe {cq.contents.cqe}")
    for cqe in (0, -1, max_cqe + 1):
        cq, e = create_cq(ctx, cqe)
        if cq:
            die(f"ibv_create_cq(cqe {cqe}) succeeded ({cq.contents.cqe} CQEs), expected EINVAL")
        if e != errno.EINVAL:
            die(f"ibv_create_cq(cqe {cqe}): {ename(e)}, expected EINVAL")
        ok(f"ibv_create_cq(cqe {cqe}): EINVAL")
    expect_nic("after the destroys and refusals", cqs=0)

    # Arming: a doorbell on the context's page, which the NIC accepts (no bad or foreign
    # doorbell counted); no system call.
    cq = cq_ok(ctx, 8)
    before = nic_status()
    notify = context_op(ctx, "req_notify_cq")
    for solicited in (0, 1):
        r = notify(ptr(cq), solicited)
        if r != 0:
            die(f"ibv_req_notify_cq(solicited_only={solicited}): {r}, expected 0")
    after = nic_status()
    for k, d in (("doorbells", 2), ("bad_doorbells", 0), ("foreign_doorbells", 0),
                 ("bad_accesses", 0)):
        if after.get(k, 0) - before.get(k, 0) != d:
            die(f"two arm doorbells: the NIC's {k} went from {before.get(k)} to {after.get(k)}, "
                f"expected +{d}")
    ok("ibv_req_notify_cq (both kinds) returns 0; the NIC accepted 2 doorbells, none bad")
    wc = ctypes.create_string_buffer(64)
    r = context_op(ctx, "poll_cq")(ptr(cq), 1, ctypes.addressof(wc))
    if r != 0:
        die(f"ibv_poll_cq: {r}, expected 0 (no completion yet)")
    ok("ibv_poll_cq: 0 (nothing completed)")
    destroy_cq_ok(cq, "armed")
    ibv.ibv_close_device(ctx)


def wait_thread(fn, what, timeout=20):
    got = {}

    def run():
        got["rc"] = fn()

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(timeout)
    if t.is_alive():
        die(f"no {what} within {timeout} s")
    return got["rc"]


def async_event(ctx, what):
    ev = IbvAsyncEvent()
    r = wait_thread(lambda: ibv.ibv_get_async_event(ctx, ctypes.byref(ev)), what)
    if r:
        die(f"ibv_get_async_event: {ename(ctypes.get_errno())}")
    name = ibv.ibv_event_type_str(ev.event_type).decode()
    return ev, name


def check_events():
    ctx = open_device(DEV)
    pd = ibv.ibv_alloc_pd(ctx)
    if not pd:
        die(f"ibv_alloc_pd: {ename(ctypes.get_errno())}")
    # CQNs are the lowest free (hardware.md): on a NIC without CQs, ours are 0 and 1.
    expect_nic("before the event checks", cqs=0)
    channel = ibv.ibv_create_comp_channel(ctx)
    if not channel:
        die(f"ibv_create_comp_channel: {ename(ctypes.get_errno())}")
    cq_a = cq_ok(ctx, 4, channel, 0xa)
    cq_b = cq_ok(ctx, 4, channel, 0xb)
    notify = context_op(ctx, "req_notify_cq")
    if notify(ptr(cq_b), 0) != 0:
        die("ibv_req_notify_cq(CQ 1) failed")
    rc, out = nic_ctl("event", "4", "1")
    if rc:
        die(f"nic_ctl event 4 1: {out}")
    got_cq, got_ctx = ctypes.c_void_p(), ctypes.c_void_p()
    r = wait_thread(lambda: ibv.ibv_get_cq_event(channel, ctypes.byref(got_cq),
                                                 ctypes.byref(got_ctx)),
                    "completion event for CQN 1")
    if r:
        die(f"ibv_get_cq_event: {ename(ctypes.get_errno())}")
    if got_cq.value != ptr(cq_b) or got_ctx.value != 0xb:
        die(f"ibv_get_cq_event: CQ {got_cq.value:#x} context {got_ctx.value}, expected CQ 1 "
            f"({ptr(cq_b):#x}, context 0xb; CQ 0 is {ptr(cq_a):#x})")
    ibv.ibv_ack_cq_events(cq_b, 1)
    ok("CQ_COMPLETION for CQN 1 (armed): ibv_get_cq_event returned that CQ and its context")

    rc, out = nic_ctl("event", "5", "0")
    if rc:
        die(f"nic_ctl event 5 0: {out}")
    ev, name = async_event(ctx, "async event for CQ_ERROR of CQN 0")
    if ev.event_type != IBV_EVENT_CQ_ERR or ev.element != ptr(cq_a):
        die(f"async event '{name}' for {ev.element:#x}, expected '"
            f"{ibv.ibv_event_type_str(IBV_EVENT_CQ_ERR).decode()}' for CQ 0 ({ptr(cq_a):#x})")
    ibv.ibv_ack_async_event(ctypes.byref(ev))
    ok(f"CQ_ERROR for CQN 0: async event '{name}' for that CQ")

    qp, _ = create_qp(pd, cq_a, cq_a, 4, 4, 1, 1, 0)
    if not qp:
        die(f"ibv_create_qp: {ename(_)}")
    a = full_attr(ctx)
    for to in ("INIT", "RTR", "RTS"):
        modify_ok(qp, to, TRANSITIONS[(prev_state(to), to)], a)
    a.en_sqd_async_notify = 1
    a.qp_state = QP_STATES.index("SQD")
    r = ibv.ibv_modify_qp(qp, ctypes.byref(a), QP_ATTR["STATE"] | QP_ATTR["EN_SQD_ASYNC_NOTIFY"])
    if r:
        die(f"RTS -> SQD with en_sqd_async_notify: {ename(r)}")
    ev, name = async_event(ctx, "IBV_EVENT_SQ_DRAINED")
    if ev.event_type != IBV_EVENT_SQ_DRAINED or ev.element != ptr(qp):
        die(f"async event '{name}' for {ev.element:#x}, expected "
            f"'{ibv.ibv_event_type_str(IBV_EVENT_SQ_DRAINED).decode()}' for QP {ptr(qp):#x}")
    ibv.ibv_ack_async_event(ctypes.byref(ev))
    ok(f"RTS -> SQD with en_sqd_async_notify: async event '{name}' for that QP")
    destroy_qp_ok(qp, "SQD")
    destroy_cq_ok(cq_a, "CQ 0")
    destroy_cq_ok(cq_b, "CQ 1")
    ibv.ibv_destroy_comp_channel(channel)
    ibv.ibv_dealloc_pd(pd)
    expect_nic("end", cqs=0, qps=0, pds=0)
    ibv.ibv_close_device(ctx)


# --- QPs ---

def create_qp(pd, scq, rcq, send_wr, recv_wr, send_sge, recv_sge, inline, qp_type=IBV_QPT_RC):
    """(qp, errno, the capabilities libibverbs copied back)."""
    init = IbvQpInitAttr()
    init.send_cq = ptr(scq) if scq else None
    init.recv_cq = ptr(rcq) if rcq else None
    init.cap.max_send_wr, init.cap.max_recv_wr = send_wr, recv_wr
    init.cap.max_send_sge, init.cap.max_recv_sge = send_sge, recv_sge
    init.cap.max_inline_data = inline
    init.qp_type = qp_type
    ctypes.set_errno(0)
    qp = ibv.ibv_create_qp(pd, ctypes.byref(init))
    create_qp.cap = init.cap
    return (qp, 0) if qp else (None, ctypes.get_errno())


def destroy_qp_ok(qp, what):
    r = ibv.ibv_destroy_qp(qp)
    if r:
        die(f"ibv_destroy_qp({what}): {ename(r)}")


def expected_caps(send_wr, recv_wr, send_sge, recv_sge, inline, max_sge):
    """The capabilities the provider's rings hold (Documentation/uapi.md, CREATE_QP)."""
    sq_wqe = pow2_at_least(max(64, 32 + 16 * send_sge, 32 + inline))
    caps = {
        "max_send_wr": pow2_at_least(max(send_wr, 1)),
        "max_send_sge": min(max_sge, (sq_wqe - 32) // 16),
        "max_inline_data": sq_wqe - 32,
        "max_recv_wr": 0,
        "max_recv_sge": 0,
    }
    if recv_wr:
        rq_wqe = pow2_at_least(max(64, 16 + 16 * recv_sge))
        caps["max_recv_wr"] = pow2_at_least(recv_wr)
        caps["max_recv_sge"] = min(max_sge, (rq_wqe - 16) // 16)
    return caps


def check_caps():
    ctx = open_device(DEV)
    dev = device_attr(ctx)
    max_wr, max_sge = dev.max_qp_wr, dev.max_sge
    print(f"device max_qp_wr {max_wr} max_sge {max_sge}", flush=True)
    pd = ibv.ibv_alloc_pd(ctx)
    cq = cq_ok(ctx, 16)
    expect_nic("before", qps=0)
    cases = [
        (1, 1, 1, 1, 0), (64, 64, 2, 2, 0), (max_wr, max_wr, max_sge, max_sge, 0),
        (16, 16, 1, 1, 64), (16, 16, 0, 0, 0), (100, 0, 3, 0, 0), (1, 1, 1, 1, 992),
        (3, 5, max_sge, 1, 200),
    ]
    for case in cases:
        qp, e = create_qp(pd, cq, cq, *case)
        if not qp:
            die(f"ibv_create_qp(send_wr, recv_wr, send_sge, recv_sge, inline = {case}): {ename(e)}")
        cap = create_qp.cap
        got = {k: getattr(cap, k) for k in expected_caps(*case, max_sge)}
        want = expected_caps(*case, max_sge)
        if got != want:
            die(f"ibv_create_qp{case}: capabilities {got}, expected {want}")
        # QPNs are the lowest free from 2 (hardware.md); this is the only QP.
        if qp.contents.qp_num != 2:
            die(f"ibv_create_qp{case}: QPN {qp.contents.qp_num}, expected 2 (the lowest free)")
        st = query(qp, QP_ATTR["STATE"]).qp_state
        if st != 0:
            die(f"a new QP is in state {st}, expected RESET (0)")
        ok(f"RC QP {case}: QPN {qp.contents.qp_num}, RESET, capabilities {want}")
        if case == cases[0]:
            expect_nic("one QP", qps=1)
            check_post(ctx, qp)
        destroy_qp_ok(qp, str(case))

    refused = [
        ("max_send_wr = max_qp_wr + 1", (max_wr + 1, 1, 1, 1, 0), IBV_QPT_RC, errno.EINVAL),
        ("max_recv_wr = max_qp_wr + 1", (1, max_wr + 1, 1, 1, 0), IBV_QPT_RC, errno.EINVAL),
        ("max_send_sge = max_sge + 1", (1, 1, max_sge + 1, 1, 0), IBV_QPT_RC, errno.EINVAL),
        ("max_recv_sge = max_sge + 1", (1, 1, 1, max_sge + 1, 0), IBV_QPT_RC, errno.EINVAL),
        ("max_inline_data = 993", (1, 1, 1, 1, 993), IBV_QPT_RC, errno.EINVAL),
        # A type ordma does not have (IBV_QPT_RAW_PACKET; UD is the `ud` VM test's).
        ("a raw packet QP", (1, 1, 1, 1, 0), 8, errno.EOPNOTSUPP),
    ]
    for what, case, qpt, want in refused:
        qp, e = create_qp(pd, cq, cq, *case, qp_type=qpt)
        if qp:
            destroy_qp_ok(qp, what)
            die(f"ibv_create_qp({what}) succeeded, expected {ename(want)}")
        if e != want:
            die(f"ibv_create_qp({what}): {ename(e)}, expected {ename(want)}")
        ok(f"ibv_create_qp({what}): {ename(want)}")
    qp, e = create_qp(pd, None, None, 1, 1, 1, 1, 0)
    if qp or e != errno.EINVAL:
        die(f"ibv_create_qp(no CQs): {ename(e)}, expected EINVAL")
    ok("ibv_create_qp(no CQs): EINVAL")
    expect_nic(f"{len(cases)} QPs destroyed, {len(refused) + 1} refused", qps=0)
    destroy_cq_ok(cq, "QPs' CQ")
    ibv.ibv_dealloc_pd(pd)
    ibv.ibv_close_device(ctx)


def check_post(ctx, qp):
    """post_send and post_recv on a QP in RESET fail (sends need RTS, receives INIT; a QP
    without an RQ takes none) and name the first WR as bad, without a doorbell."""
    wr = ctypes.create_string_buffer(256)
    for op in ("post_send", "post_recv"):
        bad = ctypes.c_void_p()
        r = context_op(ctx, op)(ptr(qp), ctypes.addressof(wr), ctypes.byref(bad))
        if r != errno.EINVAL or bad.value != ctypes.addressof(wr):
            die(f"ibv_{op}: {r}, bad_wr {bad.value}; expected EINVAL and bad_wr = the WR")
        ok(f"ibv_{op} in RESET: EINVAL, bad_wr = the first WR")


# --- The state machine ---

# Required attributes of the transitions that have any (hardware.md).
TRANSITIONS = {
    ("RESET", "INIT"): ["PKEY_INDEX", "PORT", "ACCESS_FLAGS"],
    ("INIT", "RTR"): ["AV", "PATH_MTU", "DEST_QPN", "RQ_PSN", "MAX_DEST_RD_ATOMIC",
                      "MIN_RNR_TIMER"],
    ("RTR", "RTS"): ["TIMEOUT", "RETRY_CNT", "RNR_RETRY", "SQ_PSN", "MAX_QP_RD_ATOMIC"],
}
REACHABLE = ["RESET", "INIT", "RTR", "RTS", "SQD", "ERR"]  # SQE needs a send error
PATH = {"RESET": [], "INIT": ["INIT"], "RTR": ["INIT", "RTR"], "RTS": ["INIT", "RTR", "RTS"],
        "SQD": ["INIT", "RTR", "RTS", "SQD"], "ERR": ["INIT", "ERR"]}
VALID = ({(f, "RESET") for f in REACHABLE}
         | {(f, "ERR") for f in REACHABLE if f != "RESET"}
         | {("RESET", "INIT"), ("INIT", "INIT"), ("INIT", "RTR"), ("RTR", "RTS"),
            ("RTS", "RTS"), ("SQD", "RTS"), ("RTS", "SQD"), ("SQD", "SQD")})


def prev_state(to):
    return {"INIT": "RESET", "RTR": "INIT", "RTS": "RTR"}[to]


def full_attr(ctx):
    """Valid values for every attribute the transitions to RTS require."""
    port = port_attr(ctx)
    a = IbvQpAttr()
    a.pkey_index, a.port_num, a.qp_access_flags = 0, 1, ACCESS
    a.path_mtu = port.active_mtu
    a.dest_qp_num, a.rq_psn, a.sq_psn = 0x123456, 0xabcde, 0x54321
    a.max_dest_rd_atomic, a.min_rnr_timer = 4, 12
    a.ah_attr.dlid, a.ah_attr.sl, a.ah_attr.port_num = port.lid, 3, 1
    a.timeout, a.retry_cnt, a.rnr_retry, a.max_rd_atomic = 14, 7, 6, 2
    return a


def modify(qp, to, names, a):
    a.qp_state = QP_STATES.index(to)
    mask = QP_ATTR["STATE"]
    for n in names:
        mask |= QP_ATTR[n]
    return ibv.ibv_modify_qp(qp, ctypes.byref(a), mask)


def modify_ok(qp, to, names, a):
    r = modify(qp, to, names, a)
    if r:
        die(f"modify to {to} with {names}: {ename(r)}")


def query(qp, mask):
    a, init = IbvQpAttr(), IbvQpInitAttr()
    r = ibv.ibv_query_qp(qp, ctypes.byref(a), mask, ctypes.byref(init))
    if r:
        die(f"ibv_query_qp: {ename(r)}")
    return a


def state_of(qp):
    return QP_STATES[query(qp, QP_ATTR["STATE"]).qp_state]


class StateQps:
    """QPs on one PD and CQ, driven into a state."""

    def __init__(self, ctx):
        self.ctx = ctx
        self.pd = ibv.ibv_alloc_pd(ctx)
        self.cq = cq_ok(ctx, 8)

    def new(self, state):
        qp, e = create_qp(self.pd, self.cq, self.cq, 4, 4, 1, 1, 0)
        if not qp:
            die(f"ibv_create_qp: {ename(e)}")
        cur = "RESET"
        for to in PATH[state]:
            modify_ok(qp, to, TRANSITIONS.get((cur, to), []), full_attr(self.ctx))
            cur = to
        if state_of(qp) != state:
            die(f"driven to {state}, the QP is in {state_of(qp)}")
        return qp

    def close(self):
        destroy_cq_ok(self.cq, "state CQ")
        ibv.ibv_dealloc_pd(self.pd)


def check_pairs(qps):
    destroyed_in = set()
    for frm in REACHABLE:
        for to in QP_STATES:
            qp = qps.new(frm)
            # Valid pairs get exactly their required attributes. Invalid ones get, in turn,
            # STATE alone and the required attributes of every valid way into `to`: each
            # must be refused (a refusal changes nothing, so one QP serves), so a pair this
            # table wrongly calls invalid is caught by its own attributes succeeding.
            if (frm, to) in VALID:
                names = TRANSITIONS.get((frm, to), [])
                r = modify(qp, to, names, full_attr(qps.ctx))
                now = state_of(qp)
                if r or now != to:
                    die(f"{frm} -> {to} with {names or 'STATE only'}: {ename(r)}, now {now}; "
                        f"expected success")
                ok(f"{frm} -> {to}: ok")
            else:
                tries = [[]] + [list(n) for (f, t), n in sorted(TRANSITIONS.items()) if t == to and n]
                for names in tries:
                    r = modify(qp, to, names, full_attr(qps.ctx))
                    now = state_of(qp)
                    if r != errno.EINVAL or now != frm:
                        die(f"{frm} -> {to} with {names or 'STATE only'}: {ename(r)}, now {now}; "
                            f"expected EINVAL and the QP still {frm}")
                ok(f"{frm} -> {to}: EINVAL, still {frm} ({len(tries)} attribute sets)")
            destroy_qp_ok(qp, f"in {now}")
            destroyed_in.add(now)
    if destroyed_in != set(REACHABLE):
        die(f"QPs destroyed in {sorted(destroyed_in)}, expected every reachable state")
    ok(f"QPs destroyed in every reachable state: {', '.join(REACHABLE)} (SQE is entered by the "
       f"NIC only, on a send error: not reachable without the data path)")


def refuse(qps, frm, to, names, what, **values):
    """FRM -> TO with attributes NAMES and VALUES set: EINVAL, and the QP unchanged."""
    qp = qps.new(frm)
    a = full_attr(qps.ctx)
    for k, v in values.items():
        obj = a.ah_attr if k.startswith("ah_") else a
        setattr(obj, k[3:] if k.startswith("ah_") else k, v)
    r = modify(qp, to, names, a)
    now = state_of(qp)
    if r != errno.EINVAL or now != frm:
        die(f"{frm} -> {to}, {what}: {ename(r)}, now {now}; expected EINVAL, still {frm}")
    ok(f"{frm} -> {to}, {what}: EINVAL")
    destroy_qp_ok(qp, frm)


def check_attrs(qps):
    for (frm, to), req in TRANSITIONS.items():
        for missing in req:
            refuse(qps, frm, to, [n for n in req if n != missing], f"without {missing}")
    not_allowed = [
        ("RESET", "INIT", "PATH_MTU"), ("RESET", "INIT", "CUR_STATE"),
        ("RESET", "INIT", "SQ_PSN"), ("INIT", "RTR", "SQ_PSN"), ("INIT", "RTR", "TIMEOUT"),
        ("RTR", "RTS", "DEST_QPN"), ("RTR", "RTS", "PATH_MTU"), ("RTS", "SQD", "ACCESS_FLAGS"),
        ("RTS", "RTS", "TIMEOUT"),
    ]
    for frm, to, extra in not_allowed:
        refuse(qps, frm, to, TRANSITIONS.get((frm, to), []) + [extra], f"with {extra}")
    mtu = port_attr(qps.ctx).active_mtu
    bad = [
        ("RESET", "INIT", "port_num 2", {"port_num": 2}),
        ("RESET", "INIT", "pkey_index 1", {"pkey_index": 1}),
        ("INIT", "RTR", f"path_mtu {mtu + 1} (above the active MTU {mtu})",
         {"path_mtu": mtu + 1}),
        ("INIT", "RTR", "path_mtu 0", {"path_mtu": 0}),
        ("INIT", "RTR", "dest_qp_num 2^24", {"dest_qp_num": 1 << 24}),
        ("INIT", "RTR", "min_rnr_timer 32", {"min_rnr_timer": 32}),
        ("INIT", "RTR", "max_dest_rd_atomic 17", {"max_dest_rd_atomic": 17}),
        ("INIT", "RTR", "dlid 0", {"ah_dlid": 0}),
        ("INIT", "RTR", "dlid 0xc000 (multicast)", {"ah_dlid": 0xc000}),
        ("INIT", "RTR", "sl 16", {"ah_sl": 16}),
        ("INIT", "RTR", "address vector port_num 2", {"ah_port_num": 2}),
        ("RTR", "RTS", "retry_cnt 8", {"retry_cnt": 8}),
        ("RTR", "RTS", "rnr_retry 8", {"rnr_retry": 8}),
        ("RTR", "RTS", "timeout 32", {"timeout": 32}),
        ("RTR", "RTS", "max_rd_atomic 17", {"max_rd_atomic": 17}),
    ]
    for frm, to, what, values in bad:
        refuse(qps, frm, to, TRANSITIONS[(frm, to)], what, **values)


def check_psn_mask(qps):
    """PSNs of 2^24 and above never reach the driver: ib_core masks them to 24 bits (with a
    warning in the kernel's log) and the transition succeeds."""
    qp = qps.new("INIT")
    a = full_attr(qps.ctx)
    a.rq_psn, a.sq_psn = (1 << 24) | 5, (1 << 24) | 7
    modify_ok(qp, "RTR", TRANSITIONS[("INIT", "RTR")], a)
    modify_ok(qp, "RTS", TRANSITIONS[("RTR", "RTS")], a)
    got = query(qp, QP_ATTR["RQ_PSN"] | QP_ATTR["SQ_PSN"])
    if (got.rq_psn, got.sq_psn) != (5, 7):
        die(f"rq_psn 2^24 + 5, sq_psn 2^24 + 7: queried {got.rq_psn}, {got.sq_psn}; expected "
            f"5, 7 (ib_core masks PSNs to 24 bits)")
    ok("rq_psn 2^24 + 5, sq_psn 2^24 + 7: accepted as 5 and 7 (ib_core masks PSNs to 24 bits)")
    destroy_qp_ok(qp, "RTS")


def check_query(qps):
    qp = qps.new("RTS")
    a = query(qp, 0x1fffff)  # every attribute ibv_query_qp knows
    want = full_attr(qps.ctx)
    checks = [
        ("qp_state", a.qp_state, QP_STATES.index("RTS")),
        ("cur_qp_state", a.cur_qp_state, QP_STATES.index("RTS")),
        ("path_mtu", a.path_mtu, want.path_mtu),
        ("rq_psn", a.rq_psn, want.rq_psn), ("sq_psn", a.sq_psn, want.sq_psn),
        ("dest_qp_num", a.dest_qp_num, want.dest_qp_num),
        ("qp_access_flags", a.qp_access_flags, want.qp_access_flags),
        ("pkey_index", a.pkey_index, 0), ("port_num", a.port_num, 1),
        ("timeout", a.timeout, want.timeout), ("retry_cnt", a.retry_cnt, want.retry_cnt),
        ("rnr_retry", a.rnr_retry, want.rnr_retry),
        ("min_rnr_timer", a.min_rnr_timer, want.min_rnr_timer),
        ("max_rd_atomic", a.max_rd_atomic, want.max_rd_atomic),
        ("max_dest_rd_atomic", a.max_dest_rd_atomic, want.max_dest_rd_atomic),
        ("ah_attr.dlid", a.ah_attr.dlid, want.ah_attr.dlid),
        ("ah_attr.sl", a.ah_attr.sl, want.ah_attr.sl),
        ("ah_attr.port_num", a.ah_attr.port_num, 1),
    ]
    wrong = [f"{n} {g} (expected {w})" for n, g, w in checks if g != w]
    if wrong:
        die("ibv_query_qp in RTS: " + ", ".join(wrong))
    ok("ibv_query_qp in RTS answers what was set: " + ", ".join(f"{n} {g}" for n, g, _ in checks))
    modify_ok(qp, "RESET", [], IbvQpAttr())
    a = query(qp, 0x1fffff)
    if (a.qp_state, a.sq_psn, a.dest_qp_num, a.ah_attr.dlid) != (0, 0, 0, 0):
        die(f"after -> RESET: state {a.qp_state} sq_psn {a.sq_psn} dest_qp_num "
            f"{a.dest_qp_num} dlid {a.ah_attr.dlid}, expected all 0")
    ok("after -> RESET, ibv_query_qp answers RESET and the attributes forgotten (0)")
    destroy_qp_ok(qp, "RESET")


def check_states():
    ctx = open_device(DEV)
    expect_nic("before", qps=0)
    qps = StateQps(ctx)
    check_pairs(qps)
    check_attrs(qps)
    check_psn_mask(qps)
    check_query(qps)
    qps.close()
    expect_nic("end", qps=0, cqs=0)
    ibv.ibv_close_device(ctx)


def check_order():
    ctx = open_device(DEV)
    pd = ibv.ibv_alloc_pd(ctx)
    cq = cq_ok(ctx, 8)
    cq2 = cq_ok(ctx, 8)
    qp, e = create_qp(pd, cq, cq2, 4, 4, 1, 1, 0)
    if not qp:
        die(f"ibv_create_qp: {ename(e)}")
    for c, what in ((cq, "send"), (cq2, "receive")):
        r = ibv.ibv_destroy_cq(c)
        if r != errno.EBUSY:
            die(f"ibv_destroy_cq of a QP's {what} CQ: {ename(r)}, expected EBUSY")
        ok(f"ibv_destroy_cq of a QP's {what} CQ: EBUSY")
    r = ibv.ibv_dealloc_pd(pd)
    if r != errno.EBUSY:
        die(f"ibv_dealloc_pd of a QP's PD: {ename(r)}, expected EBUSY")
    ok("ibv_dealloc_pd of a QP's PD: EBUSY")
    expect_nic("after the refused destroys", pds=1, cqs=2, qps=1)
    modify_ok(qp, "INIT", TRANSITIONS[("RESET", "INIT")], full_attr(ctx))
    if state_of(qp) != "INIT":
        die("the QP did not move to INIT after the refused destroys")
    ok("the QP still works: RESET -> INIT, queried INIT")
    destroy_qp_ok(qp, "INIT")
    destroy_cq_ok(cq, "send CQ")
    destroy_cq_ok(cq2, "receive CQ")
    r = ibv.ibv_dealloc_pd(pd)
    if r:
        die(f"ibv_dealloc_pd after the QP: {ename(r)}")
    expect_nic("after destroying QP, CQs, PD in order", pds=0, cqs=0, qps=0)
    ibv.ibv_close_device(ctx)


def hold():
    ctx = open_device(DEV)
    pd = ibv.ibv_alloc_pd(ctx)
    bufs = [mmap.mmap(-1, 64 << 10, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
            for _ in range(2)]
    for b in bufs:
        b.write(b"x" * len(b))
        if not ibv.ibv_reg_mr(pd, ctypes.addressof(ctypes.c_char.from_buffer(b)), len(b), ACCESS):
            die(f"ibv_reg_mr: {ename(ctypes.get_errno())}")
    # Rings big enough that their pins stand out of the test's slack: two CQs of 16384
    # CQEs (512 KiB each) and two QPs of 4096 send and 4096 receive WQEs.
    cqs = [cq_ok(ctx, 16384), cq_ok(ctx, 16384)]
    qps = []
    for _ in range(2):
        qp, e = create_qp(pd, cqs[0], cqs[1], 4096, 4096, 2, 2, 0)
        if not qp:
            die(f"ibv_create_qp: {ename(e)}")
        qps.append(qp)
    cur = "RESET"
    for to in ("INIT", "RTR", "RTS"):
        modify_ok(qps[0], to, TRANSITIONS[(cur, to)], full_attr(ctx))
        cur = to
    print("holding", flush=True)
    threading.Event().wait()


CHECKS = {"cq": check_cq, "events": check_events, "caps": check_caps, "states": check_states,
          "order": check_order, "hold": hold}

if len(sys.argv) < 2 or any(c not in CHECKS for c in sys.argv[1:]):
    die(f"usage: verbs_cq_qp.py {'|'.join(CHECKS)}...")
for check in sys.argv[1:]:
    CHECKS[check]()
    print(f"done: {check}", flush=True)
