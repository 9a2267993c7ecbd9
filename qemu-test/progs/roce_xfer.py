#!/usr/bin/env python3
"""Transfers between two machines over RoCE, every byte checked (pyverbs, rdma-core's own
Python binding): what perftest and the pingpongs do not do (perftest checks nothing,
ibv_rc_pingpong --chk one byte per page).

Usage: roce_xfer.py DEVICE GID_INDEX -p PORT [SERVER] [--size BYTES] [--count N] [--sends N]
(as qemu-test/progs/vms.sh's vm_serve and vm_connect call a server and its client)

Without SERVER it serves: one RC QP whose 2 MiB buffer (--size) the client writes into and
reads back, and receives --sends SENDs. With SERVER (its side-channel address) it connects:
the two sides trade QP number, PSN, GID, buffer address and rkey over TCP PORT (one line
each way), connect their QPs by GRH (the destination MAC as ib_core resolves it), then the
client, --count times: RDMA WRITEs a fresh random pattern of --size bytes into the
server's buffer, RDMA READs it back into a second buffer and compares every byte; then it
SENDs --sends messages of 1..4096 random bytes, which the server compares with what the
client tells it over TCP at the end (a SHA-256 of each). Every completion is checked.
Prints progress and a summary; exits 1 on the first failure.

With --cut (the client's link cut, by the test, before it starts): the client's QP has
transport timeout --timeout and --retry retries; it posts one RDMA WRITE, which must
complete with IBV_WC_RETRY_EXC_ERR after the (retry + 1) transport timers the IB
specification predicts (4.096 us x 2^timeout each), not sooner than 0.9 of that and not
later than twice that and 2 s. The server only waits for the client to say it is done.
"""
import argparse
import hashlib
import os
import random
import socket
import sys
import time

import pyverbs.enums as e
from pyverbs.addr import AHAttr, GID, GlobalRoute
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
from pyverbs.wr import SGE, RecvWR, SendWR

RW = e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE | e.IBV_ACCESS_REMOTE_READ
SEND_MAX = 4096
RECVS = 64


def die(msg):
    print(f"FAIL: {msg}", flush=True)
    sys.exit(1)


def poll(cq, what, opcode=None, seconds=120):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        n, wcs = cq.poll(num_entries=1)
        if n:
            wc = wcs[0]
            if wc.status != e.IBV_WC_SUCCESS or (opcode is not None and wc.opcode != opcode):
                die(f"{what}: completion status {wc.status} opcode {wc.opcode}")
            return wc
    die(f"{what}: no completion in {seconds} s")


def side_channel(args):
    if args.server:
        for _ in range(600):
            try:
                return socket.create_connection((args.server, args.port), timeout=300)
            except OSError:
                time.sleep(0.5)
        die(f"cannot connect to {args.server}:{args.port}")
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("", args.port))
    ls.listen(1)
    print(f"listening on {args.port}", flush=True)
    conn, _ = ls.accept()
    ls.close()
    conn.settimeout(600)
    return conn


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("device")
    ap.add_argument("gid_index", type=int)
    ap.add_argument("-p", "--port", type=int, required=True)
    ap.add_argument("server", nargs="?")
    ap.add_argument("--size", type=int, default=2 << 20)
    ap.add_argument("--count", type=int, default=20)
    ap.add_argument("--sends", type=int, default=200)
    ap.add_argument("--cut", action="store_true")
    ap.add_argument("--timeout", type=int, default=14)
    ap.add_argument("--retry", type=int, default=7)
    args = ap.parse_args()

    ctx = Context(name=args.device)
    gid = ctx.query_gid(1, args.gid_index)
    pd = PD(ctx)
    cq = CQ(ctx, 256, None, None, 0)
    cap = QPCap(max_send_wr=64, max_recv_wr=RECVS, max_send_sge=1, max_recv_sge=1)
    qp = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, cap=cap))
    buf, back = MR(pd, args.size, RW), MR(pd, args.size, RW)
    recv = MR(pd, SEND_MAX * RECVS, RW)
    psn = random.randrange(1 << 24)

    conn = side_channel(args)
    f = conn.makefile("rw")
    f.write(f"{qp.qp_num} {psn} {gid} {buf.buf} {buf.rkey}\n")
    f.flush()
    peer = f.readline().split()
    if len(peer) != 5:
        die(f"the peer said {peer}")
    p_qpn, p_psn, p_gid, p_addr, p_rkey = int(peer[0]), int(peer[1]), peer[2], int(peer[3]), int(peer[4])

    attr = QPAttr(qp_state=e.IBV_QPS_INIT, cur_qp_state=e.IBV_QPS_RESET)
    attr.qp_access_flags = RW
    attr.path_mtu = e.IBV_MTU_1024
    attr.dest_qp_num = p_qpn
    attr.rq_psn = p_psn
    attr.sq_psn = psn
    attr.max_dest_rd_atomic = 4
    attr.max_rd_atomic = 4
    attr.min_rnr_timer = 1
    attr.timeout = args.timeout
    attr.retry_cnt = args.retry
    attr.rnr_retry = 7
    gr = GlobalRoute(dgid=GID(p_gid), sgid_index=args.gid_index, hop_limit=64)
    attr.ah_attr = AHAttr(gr=gr, is_global=1, port_num=1)
    qp.to_rts(attr)
    for i in range(RECVS):
        qp.post_recv(RecvWR(wr_id=i, num_sge=1, sg=[SGE(recv.buf + i * SEND_MAX, SEND_MAX, recv.lkey)]))
    f.write("ready\n")
    f.flush()
    if f.readline().strip() != "ready":
        die("the peer is not ready")
    print(f"{args.device}: QP {qp.qp_num:#x} connected to {p_gid} QP {p_qpn:#x}", flush=True)

    if args.cut:
        return cut(args, qp, cq, buf, f, p_rkey, p_addr)
    if not args.server:
        # The server: the client's SENDs, each checked against the digests it sends last.
        got = []
        for n in range(args.sends):
            wc = poll(cq, f"receive {n}", e.IBV_WC_RECV)
            i = wc.wr_id
            got.append(hashlib.sha256(recv.read(wc.byte_len, i * SEND_MAX)).hexdigest())
            qp.post_recv(RecvWR(wr_id=i, num_sge=1, sg=[SGE(recv.buf + i * SEND_MAX, SEND_MAX, recv.lkey)]))
        want = f.readline().split()
        if want != got:
            bad = [n for n, (a, b) in enumerate(zip(want, got)) if a != b]
            die(f"{len(bad)} of {args.sends} SENDs differ (first: {bad[:5]}), or their count: {len(want)}")
        f.write("ok\n")
        f.flush()
        print(f"ok: {args.sends} SENDs received, every byte as sent", flush=True)
        return

    start = time.monotonic()
    for n in range(args.count):
        data = os.urandom(args.size)
        buf.write(data, args.size)
        back.write(bytes(args.size), args.size)
        wr = SendWR(wr_id=1, opcode=e.IBV_WR_RDMA_WRITE, num_sge=1,
                    sg=[SGE(buf.buf, args.size, buf.lkey)], send_flags=e.IBV_SEND_SIGNALED)
        wr.set_wr_rdma(p_rkey, p_addr)
        qp.post_send(wr)
        poll(cq, f"WRITE {n}", e.IBV_WC_RDMA_WRITE)
        wr = SendWR(wr_id=2, opcode=e.IBV_WR_RDMA_READ, num_sge=1,
                    sg=[SGE(back.buf, args.size, back.lkey)], send_flags=e.IBV_SEND_SIGNALED)
        wr.set_wr_rdma(p_rkey, p_addr)
        qp.post_send(wr)
        poll(cq, f"READ {n}", e.IBV_WC_RDMA_READ)
        if back.read(args.size, 0) != data:
            die(f"transfer {n}: the bytes read back differ from those written")
        if (n + 1) % 5 == 0 or n + 1 == args.count:
            print(f"{n + 1}/{args.count} WRITE + READ of {args.size} bytes checked", flush=True)
    took = time.monotonic() - start
    digests = []
    for n in range(args.sends):
        msg = os.urandom(random.randint(1, SEND_MAX))
        buf.write(msg, len(msg))
        qp.post_send(SendWR(wr_id=3, opcode=e.IBV_WR_SEND, num_sge=1,
                            sg=[SGE(buf.buf, len(msg), buf.lkey)], send_flags=e.IBV_SEND_SIGNALED))
        poll(cq, f"SEND {n}", e.IBV_WC_SEND)
        digests.append(hashlib.sha256(msg).hexdigest())
    f.write(" ".join(digests) + "\n")
    f.flush()
    if f.readline().strip() != "ok":
        die("the server found SENDs that differ")
    mib = 2 * args.count * args.size / (1 << 20)
    print(f"ok: {args.count} x {args.size} bytes written and read back ({mib:.0f} MiB in {took:.1f} s),"
          f" {args.sends} SENDs, every byte checked", flush=True)


def cut(args, qp, cq, buf, f, p_rkey, p_addr):
    """One WRITE over a cut link: RETRY_EXC_ERR in the predicted time."""
    if not args.server:
        if f.readline().strip() != "done":
            die("the client did not finish")
        print("ok: the client is done", flush=True)
        return
    predicted = (args.retry + 1) * 4.096e-6 * (1 << args.timeout)
    wr = SendWR(wr_id=9, opcode=e.IBV_WR_RDMA_WRITE, num_sge=1, sg=[SGE(buf.buf, 4096, buf.lkey)],
                send_flags=e.IBV_SEND_SIGNALED)
    wr.set_wr_rdma(p_rkey, p_addr)
    start = time.monotonic()
    qp.post_send(wr)
    wc = None
    while time.monotonic() - start < 2 * predicted + 30:
        n, wcs = cq.poll(num_entries=1)
        if n:
            wc = wcs[0]
            break
        time.sleep(0.001)
    took = time.monotonic() - start
    f.write("done\n")
    f.flush()
    if wc is None:
        die(f"no completion in {took:.1f} s over a cut link")
    if wc.status != e.IBV_WC_RETRY_EXC_ERR:
        die(f"completion status {wc.status}, not IBV_WC_RETRY_EXC_ERR ({e.IBV_WC_RETRY_EXC_ERR})")
    print(f"WRITE over a cut link: IBV_WC_RETRY_EXC_ERR after {took:.2f} s; predicted "
          f"{predicted:.2f} s ({args.retry} retries, timeout {args.timeout})", flush=True)
    if not 0.9 * predicted <= took <= 2 * predicted + 2:
        die(f"{took:.2f} s is outside 0.9 to 2 times the predicted {predicted:.2f} s (+ 2 s)")
    print("ok: retries exhausted in the predicted time", flush=True)


if __name__ == "__main__":
    main()
