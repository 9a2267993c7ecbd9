#!/usr/bin/env python3
"""ordma through rdma-core's own Python binding, pyverbs (Debian's python3-pyverbs, the same
56.1 as libibverbs), as an RDMA developer's script would use it:

- the device and port as pyverbs reads them (`Context.query_device`, `query_port`);
- the limits answered with their exact errnos through `PyverbsRDMAError.error_code`: a CQ
  of `max_cqe + 1` and a QP asking `max_qp_wr + 1` WRs are EINVAL, a raw packet QP EOPNOTSUPP;
- two RC QPs on one context connected to each other with pyverbs' own `QP.to_rts`
  (RESET -> INIT -> RTR -> RTS), and over them SEND/RECV, RDMA WRITE and RDMA READ of 64 KiB
  between pyverbs `MR`s, every byte compared (`MR.read`), every completion's status,
  opcode and length;
- `QP.query` answering what was set.

Usage: pyverbs_rc.py [DEVICE]   (default ordma0). Prints "ok ..." per check; exits 1 on the
first failure.
"""
import errno
import os
import sys

import pyverbs.enums as e
from pyverbs.addr import AHAttr
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.pyverbs_error import PyverbsRDMAError
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
from pyverbs.wr import SGE, RecvWR, SendWR

DEV = sys.argv[1] if len(sys.argv) > 1 else "ordma0"
SIZE = 64 << 10
RW = e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE | e.IBV_ACCESS_REMOTE_READ


def die(msg):
    print(f"FAIL: {msg}", flush=True)
    sys.exit(1)


def ok(msg):
    print(f"ok {msg}", flush=True)


def expect_errno(what, want, fn):
    try:
        obj = fn()
    except PyverbsRDMAError as ex:
        if ex.error_code != want:
            die(f"{what}: {name(ex.error_code)}, expected {name(want)}")
        ok(f"{what}: {name(want)}")
        return
    obj.close()
    die(f"{what} succeeded, expected {name(want)}")


def name(err):
    # errno.errorcode names 95 ENOTSUP; libibverbs documents EOPNOTSUPP (the same number).
    return "EOPNOTSUPP" if err == errno.EOPNOTSUPP else errno.errorcode.get(err, str(err))


def qp(pd, cq, wr=16, qp_type=e.IBV_QPT_RC):
    cap = QPCap(max_send_wr=wr, max_recv_wr=wr, max_send_sge=1, max_recv_sge=1)
    return QP(pd, QPInitAttr(qp_type=qp_type, scq=cq, rcq=cq, cap=cap))


def poll(cq, what, opcode, length=None):
    for _ in range(2_000_000):
        n, wcs = cq.poll(num_entries=1)
        if n:
            wc = wcs[0]
            if wc.status != e.IBV_WC_SUCCESS or (opcode is not None and wc.opcode != opcode) or \
                    (length is not None and wc.byte_len != length):
                die(f"{what}: completion status {wc.status} opcode {wc.opcode} "
                    f"byte_len {wc.byte_len}, expected success, {opcode}, {length}")
            return wc
    die(f"{what}: no completion")


def main():
    ctx = Context(name=DEV)
    dev = ctx.query_device()
    port = ctx.query_port(1)
    if port.state != e.IBV_PORT_ACTIVE or port.lid == 0:
        die(f"port 1: state {port.state}, LID {port.lid}")
    ok(f"{DEV}: vendor part {dev.vendor_part_id:#x}, max_qp {dev.max_qp}, max_cqe {dev.max_cqe}, "
       f"max_qp_wr {dev.max_qp_wr}; port 1 ACTIVE, LID {port.lid}")
    pd = PD(ctx)
    expect_errno(f"CQ of max_cqe + 1 ({dev.max_cqe + 1})", errno.EINVAL,
                 lambda: CQ(ctx, dev.max_cqe + 1, None, None, 0))
    cq = CQ(ctx, 64, None, None, 0)
    expect_errno(f"RC QP of max_qp_wr + 1 ({dev.max_qp_wr + 1}) WRs", errno.EINVAL,
                 lambda: qp(pd, cq, dev.max_qp_wr + 1))
    expect_errno("raw packet QP", errno.EOPNOTSUPP, lambda: qp(pd, cq, 16, e.IBV_QPT_RAW_PACKET))

    a, b = qp(pd, cq), qp(pd, cq)
    for me, peer in ((a, b), (b, a)):
        attr = QPAttr(qp_state=e.IBV_QPS_INIT, cur_qp_state=e.IBV_QPS_RESET)
        attr.qp_access_flags = RW
        attr.path_mtu = e.IBV_MTU_4096
        attr.dest_qp_num = peer.qp_num
        attr.rq_psn = 0x100 + peer.qp_num
        attr.sq_psn = 0x100 + me.qp_num
        attr.max_dest_rd_atomic = 1
        attr.max_rd_atomic = 1
        attr.min_rnr_timer = 1
        attr.timeout = 14
        attr.retry_cnt = 7
        attr.rnr_retry = 7
        attr.ah_attr = AHAttr(dlid=port.lid, port_num=1)
        me.to_rts(attr)
    attr, _ = a.query(e.IBV_QP_STATE | e.IBV_QP_DEST_QPN | e.IBV_QP_PATH_MTU | e.IBV_QP_SQ_PSN)
    if (attr.qp_state, attr.dest_qp_num, attr.path_mtu, attr.sq_psn) != \
            (e.IBV_QPS_RTS, b.qp_num, e.IBV_MTU_4096, 0x100 + a.qp_num):
        die(f"QP.query: state {attr.qp_state}, dest {attr.dest_qp_num}, mtu {attr.path_mtu}, "
            f"sq_psn {attr.sq_psn:#x}")
    ok(f"QPs {a.qp_num:#x} and {b.qp_num:#x} to RTS with QP.to_rts; QP.query agrees")

    src, dst = MR(pd, SIZE, RW), MR(pd, SIZE, RW)
    data = os.urandom(SIZE)
    src.write(data, SIZE)

    def clear():
        dst.write(bytes(SIZE), SIZE)

    def check(what):
        if dst.read(SIZE, 0) != data:
            die(f"{what}: the bytes differ")
        ok(f"{what} of {SIZE} bytes: every byte")

    clear()
    b.post_recv(RecvWR(wr_id=1, num_sge=1, sg=[SGE(dst.buf, SIZE, dst.lkey)]))
    a.post_send(SendWR(wr_id=2, opcode=e.IBV_WR_SEND, num_sge=1, sg=[SGE(src.buf, SIZE, src.lkey)],
                       send_flags=e.IBV_SEND_SIGNALED))
    # Both completions land on the one CQ, in either order.
    got = set()
    for _ in range(2):
        wc = poll(cq, "SEND/RECV", None)
        got.add((wc.wr_id, wc.opcode, wc.byte_len if wc.wr_id == 1 else SIZE))
    if got != {(1, e.IBV_WC_RECV, SIZE), (2, e.IBV_WC_SEND, SIZE)}:
        die(f"SEND/RECV completions: {got}")
    check("SEND/RECV")

    def rdma(wr_id, opcode, local, remote, wc_opcode, length, what):
        """One signaled RDMA WRITE or READ of SIZE bytes from `local` to (or from) `remote`."""
        clear()
        wr = SendWR(wr_id=wr_id, opcode=opcode, num_sge=1, sg=[SGE(local.buf, SIZE, local.lkey)],
                    send_flags=e.IBV_SEND_SIGNALED)
        wr.set_wr_rdma(remote.rkey, remote.buf)
        a.post_send(wr)
        poll(cq, what, wc_opcode, length)
        check(what)

    rdma(3, e.IBV_WR_RDMA_WRITE, src, dst, e.IBV_WC_RDMA_WRITE, None, "RDMA WRITE")
    rdma(4, e.IBV_WR_RDMA_READ, dst, src, e.IBV_WC_RDMA_READ, SIZE, "RDMA READ")

    for o in (a, b, src, dst, cq, pd, ctx):
        o.close()
    ok("closed")


if __name__ == "__main__":
    main()
