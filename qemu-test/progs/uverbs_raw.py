#!/usr/bin/env python3
"""ordma's driver data (udata) and doorbell mmap, driven through the raw uverbs write()
interface, with sizes and contents libibverbs would never send.

Usage: uverbs_raw.py IBDEV   (e.g. ordma0)
       uverbs_raw.py --hold IBDEV
         (makes a PD, a CQ of 32768 entries (a 256-page ring and a 1-page record) and a
         QP with 256-page send and receive rings: 769 pages pinned; prints "holding page
         P cqn C qpn Q" (its doorbell page, the NIC's numbers), then sleeps until killed)
       uverbs_raw.py --contexts IBDEV CQN
         (opens contexts until GET_CONTEXT fails, and from each one's doorbell page arms CQ
         CQN (the NIC takes it only from the CQ's own page); prints "pages P..." (the pages
         they got), then "contexts N errno E", and closes them)
       uverbs_raw.py --limits IBDEV PDS CQS QPS MRS
         (a NIC whose model reports these limits: each object can be made exactly that
         many times, the next one gets ENOMEM, and freeing one makes room again)

Checks, each with the exact errno Documentation/uapi.md promises:
  GET_CONTEXT  no or short driver request (below ABI version 1's 4 bytes) -> EINVAL; 4
               bytes (comp_mask only, an older provider's length) -> accepted, zero-extended;
               unknown comp_mask bits, non-zero reserved or trailing bytes (input of a
               newer provider) -> EOPNOTSUPP; a good request -> the documented response; a short response
               buffer is truncated (nothing written past it), a long one zero-filled
  mmap         the context's key maps one page shared and writable; a wrong key, a wrong
               length or a private mapping -> EINVAL, PROT_EXEC -> EPERM
  ALLOC_PD     non-zero driver input -> EOPNOTSUPP; PDs get distinct NIC numbers; DEALLOC_PD
               frees them (a freed handle is ENOENT, ib_core's answer)
  CREATE_CQ    no or short driver request -> EINVAL; unknown comp_mask bits or reserved
               bytes -> EOPNOTSUPP; a ring smaller than the entries asked, a CQE size the NIC
               does not have, a ring not page aligned, a misaligned doorbell record ->
               EINVAL; an unmapped ring -> EFAULT; a good request -> cqe rounded up to the
               ring's depth and the CQN; DESTROY_CQ frees it
  CREATE_QP    (RC) short request -> EINVAL; unknown comp_mask bits -> EOPNOTSUPP; rings
               too shallow or with WQEs too small for the capabilities asked, capabilities
               beyond the device's, an RQ described without receive WRs -> EINVAL; raw packet ->
               EOPNOTSUPP; a good request -> the capabilities the rings hold and the QPN in
               both responses; DESTROY_QP frees it
  ownership    a CQ arm doorbell for another context's CQ, written on this context's
               page, is the NIC's to ignore (the shell checks its foreign_doorbells count);
               the same on the owner's page is taken
  doorbells    2047 user pages: the 2048th context gets ENOMEM; closing one frees its page
Prints one line per check; exits non-zero on the first failure.
"""
import ctypes
import errno
import mmap
import os
import resource
import struct
import sys
import time

# ib_user_verbs.h command numbers
GET_CONTEXT, ALLOC_PD, DEALLOC_PD, REG_MR, DEREG_MR = 0, 3, 4, 9, 13
CREATE_CQ, DESTROY_CQ, CREATE_QP, DESTROY_QP = 18, 20, 24, 27
# uapi/rdma/ordma-abi.h
UCTX_RESP = struct.Struct("<IIQII")  # comp_mask, db_page_index, db_mmap_key, db_page_size, reserved_14
PD_RESP = struct.Struct("<II")  # comp_mask, pdn
CQ_CMD = struct.Struct("<IBBHQQ")  # comp_mask, log_depth, log_cqe_size, reserved_06, buf_addr, db_addr
CQ_RESP = struct.Struct("<II")  # comp_mask, cqn
QP_CMD = struct.Struct("<IBBBBQQ")  # comp_mask, sq/rq log depth and log WQE size, sq/rq buf_addr
QP_RESP = struct.Struct("<II")  # comp_mask, qpn
# ib_uverbs_create_qp_resp: qp_handle, qpn, max_send_wr, max_recv_wr, max_send_sge,
# max_recv_sge, max_inline_data, reserved
QP_CORE_RESP = struct.Struct("<8I")
QPT_RC, QPT_RAW_PACKET = 2, 8
DB_PAGES = 2048  # hw::DB_PAGES (rtl/ordma-hw/src/defs/mod.rs), interface 1.6

checks = 0


def ok(what):
    global checks
    checks += 1
    print(f"ok {checks}: {what}")


def fail(what):
    print(f"FAIL: {what}")
    sys.exit(1)


def uverbs_path(ibdev):
    base = "/sys/class/infiniband_verbs"
    for d in sorted(os.listdir(base)):
        try:
            with open(f"{base}/{d}/ibdev") as f:
                if f.read().strip() == ibdev:
                    return f"/dev/infiniband/{d}"
        except OSError:
            pass
    fail(f"no uverbs device for {ibdev}")


def command(fd, cmd, payload, out_len):
    """Legacy write(): header, core request, driver data; returns (errno, response)."""
    if (8 + len(payload)) % 4 or out_len % 4:
        raise ValueError("uverbs sizes are in 4-byte words")
    resp = ctypes.create_string_buffer(b"\xa5" * (out_len + 64))
    addr = ctypes.addressof(resp)
    # The core request starts with the response pointer (every command here has one,
    # except DEALLOC_PD and DEREG_MR).
    if cmd not in (DEALLOC_PD, DEREG_MR):
        payload = struct.pack("<Q", addr) + payload[8:]
    hdr = struct.pack("<IHH", cmd, (8 + len(payload)) // 4, out_len // 4)
    try:
        os.write(fd, hdr + payload)
        return 0, resp.raw
    except OSError as e:
        return e.errno, resp.raw


def get_context(fd, drv, resp_len=8 + UCTX_RESP.size):
    return command(fd, GET_CONTEXT, b"\0" * 8 + drv, resp_len)


def expect_errno(what, got, want):
    if got != want:
        fail(f"{what}: errno {errno.errorcode.get(got, got)}, expected {errno.errorcode[want]}")
    ok(f"{what} -> {errno.errorcode[want]}")


def create_cq(fd, cqe, drv):
    """CREATE_CQ (ib_uverbs_create_cq: response, user_handle, cqe, comp_vector,
    comp_channel -1, reserved) with driver data `drv`; returns (errno, cqe, handle, cqn)."""
    core = struct.pack("<QQIIiI", 0, 0, cqe, 0, -1, 0)
    e, raw = command(fd, CREATE_CQ, core + drv, 8 + CQ_RESP.size)
    handle, got_cqe = struct.unpack_from("<II", raw, 0)
    _, cqn = CQ_RESP.unpack_from(raw, 8)
    return e, got_cqe, handle, cqn


def store32(m, off, value):
    """One 32-bit store into mapping `m` (a doorbell write)."""
    word = ctypes.c_uint32.from_buffer(m, off)
    word.value = value
    del word  # releases the mapping for close()


def foreign_doorbell(dev, db):
    """Another context's CQ, armed from this context's doorbell page `db` (ignored by the
    NIC) and then from its own (taken)."""
    fd2 = os.open(dev, os.O_RDWR)
    e, raw = get_context(fd2, struct.pack("<II", 0, 0))
    if e:
        fail(f"second GET_CONTEXT: errno {e}")
    _, page2, key2, _, _ = UCTX_RESP.unpack_from(raw, 8)
    db2 = mmap.mmap(fd2, 4096, flags=mmap.MAP_SHARED, prot=mmap.PROT_WRITE, offset=key2)
    ring = mmap.mmap(-1, 4096)
    rec = mmap.mmap(-1, 4096)
    e, _, handle, cqn = create_cq(fd2, 2, CQ_CMD.pack(
        0, 1, 5, 0, ctypes.addressof(ctypes.c_char.from_buffer(ring)),
        ctypes.addressof(ctypes.c_char.from_buffer(rec))))
    if e:
        fail(f"CREATE_CQ on the second context: errno {e}")
    # One 32-bit store each (a slice assignment is a memcpy, which for 4 bytes may store
    # twice).
    store32(db, 0x8, cqn << 16)
    store32(db2, 0x8, cqn << 16)
    ok(f"CQ {cqn} of the context on page {page2} armed from another context's page, then its own")
    print(f"foreign-cq {cqn}")
    e, _ = command(fd2, DESTROY_CQ, struct.pack("<QII", 0, handle, 0), 8)
    if e:
        fail(f"DESTROY_CQ on the second context: errno {e}")
    db2.close()
    os.close(fd2)


def create_cq_checks(fd):
    ring = mmap.mmap(-1, 2 * 4096)
    rec = mmap.mmap(-1, 4096)
    ring_addr = ctypes.addressof(ctypes.c_char.from_buffer(ring))
    rec_addr = ctypes.addressof(ctypes.c_char.from_buffer(rec))

    def drv(log_depth=4, log_cqe=5, buf=ring_addr, db=rec_addr, comp_mask=0, res=0):
        return CQ_CMD.pack(comp_mask, log_depth, log_cqe, res, buf, db)

    for what, data, want in [
        ("CREATE_CQ without driver data", b"", errno.EINVAL),
        ("CREATE_CQ with a short driver request", drv()[:16], errno.EINVAL),
        ("CREATE_CQ with comp_mask 1", drv(comp_mask=1), errno.EOPNOTSUPP),
        ("CREATE_CQ with reserved_06 set", drv(res=1), errno.EOPNOTSUPP),
        ("CREATE_CQ with non-zero bytes past the struct", drv() + struct.pack("<Q", 1), errno.EOPNOTSUPP),
        ("CREATE_CQ of 16 entries in a ring of 8", drv(log_depth=3), errno.EINVAL),
        ("CREATE_CQ of 2^16 entries (beyond the NIC's queues)", drv(log_depth=16), errno.EINVAL),
        ("CREATE_CQ with 128-byte CQEs", drv(log_cqe=7), errno.EINVAL),
        ("CREATE_CQ with a ring not page aligned", drv(buf=ring_addr + 64), errno.EINVAL),
        ("CREATE_CQ with a misaligned doorbell record", drv(db=rec_addr + 4), errno.EINVAL),
        ("CREATE_CQ with an unmapped ring", drv(buf=4096), errno.EFAULT),
    ]:
        e, _, _, _ = create_cq(fd, 16, data)
        expect_errno(what, e, want)
    cqs = []
    for cqe, log_depth in [(16, 4), (9, 7), (1, 1)]:
        e, got, handle, cqn = create_cq(fd, cqe, drv(log_depth=log_depth))
        if e:
            fail(f"CREATE_CQ of {cqe} entries in a ring of {1 << log_depth}: errno {errno.errorcode.get(e, e)}")
        if got != 1 << log_depth:
            fail(f"CREATE_CQ of {cqe} entries: cqe {got}, expected the ring's {1 << log_depth}")
        cqs.append((handle, cqn))
    cqns = [c for _, c in cqs]
    if len(set(cqns)) != len(cqns):
        fail(f"CQ numbers not distinct: {cqns}")
    ok(f"CREATE_CQ x3 over one ring and record (each pins them): cqe = ring depth, CQNs {cqns}")
    for handle, _ in cqs:
        e, _ = command(fd, DESTROY_CQ, struct.pack("<QII", 0, handle, 0), 8)
        if e:
            fail(f"DESTROY_CQ {handle}: errno {e}")
    ok("DESTROY_CQ x3")
    create_qp_checks(fd, ring_addr, rec_addr)


def create_qp(fd, pd, cq, caps, drv, qp_type=QPT_RC):
    """CREATE_QP (ib_uverbs_create_qp) on PD handle `pd` with CQ handle `cq` for both
    queues, capabilities `caps` (send_wr, recv_wr, send_sge, recv_sge, inline); returns
    (errno, core response fields, driver response fields)."""
    core = struct.pack("<QQIIII5IBBBB", 0, 0, pd, cq, cq, 0, *caps, 0, qp_type, 0, 0)
    e, raw = command(fd, CREATE_QP, core + drv, QP_CORE_RESP.size + QP_RESP.size)
    return e, QP_CORE_RESP.unpack_from(raw, 0), QP_RESP.unpack_from(raw, QP_CORE_RESP.size)


def create_qp_checks(fd, _ring, _rec):
    e, raw = command(fd, ALLOC_PD, b"\0" * 8, 4 + PD_RESP.size)
    if e:
        fail(f"ALLOC_PD: errno {e}")
    pd, = struct.unpack_from("<I", raw, 0)
    ring = mmap.mmap(-1, 4096)
    rec = mmap.mmap(-1, 4096)
    ring_addr = ctypes.addressof(ctypes.c_char.from_buffer(ring))
    rec_addr = ctypes.addressof(ctypes.c_char.from_buffer(rec))
    e, _, cq, _ = create_cq(fd, 16, CQ_CMD.pack(0, 4, 5, 0, ring_addr, rec_addr))
    if e:
        fail(f"CREATE_CQ for the QPs: errno {e}")
    sq = mmap.mmap(-1, 64 * 1024)
    rq = mmap.mmap(-1, 64 * 1024)
    sq_addr = ctypes.addressof(ctypes.c_char.from_buffer(sq))
    rq_addr = ctypes.addressof(ctypes.c_char.from_buffer(rq))

    def drv(sq_d=4, sq_w=7, rq_d=4, rq_w=6, sqb=sq_addr, rqb=rq_addr, comp_mask=0):
        return QP_CMD.pack(comp_mask, sq_d, sq_w, rq_d, rq_w, sqb, rqb)

    caps = (16, 16, 4, 2, 64)  # send_wr, recv_wr, send_sge, recv_sge, inline
    for what, c, data, want, qpt in [
        ("CREATE_QP with a short driver request", caps, drv()[:8], errno.EINVAL, QPT_RC),
        ("CREATE_QP with comp_mask 1", caps, drv(comp_mask=1), errno.EOPNOTSUPP, QPT_RC),
        ("CREATE_QP of 16 send WRs in an SQ of 8", caps, drv(sq_d=3), errno.EINVAL, QPT_RC),
        ("CREATE_QP of 16 receive WRs in an RQ of 8", caps, drv(rq_d=3), errno.EINVAL, QPT_RC),
        ("CREATE_QP with 64-byte send WQEs for 4 SGEs (needs 96)", caps, drv(sq_w=6), errno.EINVAL, QPT_RC),
        ("CREATE_QP with 64-byte send WQEs for 64 inline bytes (needs 96)", (16, 16, 1, 2, 64), drv(sq_w=6), errno.EINVAL, QPT_RC),
        ("CREATE_QP with 2 KiB WQEs", caps, drv(sq_w=11), errno.EINVAL, QPT_RC),
        ("CREATE_QP with max_send_sge beyond the device's 16", (16, 16, 17, 2, 0), drv(sq_w=10), errno.EINVAL, QPT_RC),
        ("CREATE_QP with 993 inline bytes (beyond 1 KiB WQEs)", (16, 16, 1, 2, 993), drv(sq_w=10), errno.EINVAL, QPT_RC),
        ("CREATE_QP with max_send_wr beyond the device's 4096", (4097, 16, 1, 1, 0), drv(sq_d=13), errno.EINVAL, QPT_RC),
        ("CREATE_QP with an RQ but no receive WRs", (16, 0, 1, 0, 0), drv(), errno.EINVAL, QPT_RC),
        ("CREATE_QP with an SQ ring not page aligned", caps, drv(sqb=sq_addr + 64), errno.EINVAL, QPT_RC),
        ("CREATE_QP of type raw packet", caps, drv(), errno.EOPNOTSUPP, QPT_RAW_PACKET),
    ]:
        e, _, _ = create_qp(fd, pd, cq, c, data, qpt)
        expect_errno(what, e, want)
    qps = []
    for c, data, want in [
        # 16 x 128-byte send WQEs: 6 SGEs, 96 inline bytes; 16 x 64-byte receive WQEs: 3 SGEs.
        (caps, drv(), (16, 16, 6, 3, 96)),
        # Send only: no RQ.
        ((5, 0, 1, 0, 0), drv(sq_d=3, sq_w=6, rq_d=0, rq_w=0, rqb=0), (8, 0, 2, 0, 32)),
    ]:
        e, core, (cm, qpn) = create_qp(fd, pd, cq, c, data)
        if e:
            fail(f"CREATE_QP with capabilities {c}: errno {errno.errorcode.get(e, e)}")
        handle, core_qpn, *got = core[:7]
        if tuple(got) != want or core_qpn != qpn or cm != 0 or qpn < 2:
            fail(f"CREATE_QP {c}: capabilities {tuple(got)} (expected {want}), QPN {core_qpn}/{qpn}")
        qps.append(handle)
        ok(f"CREATE_QP asking {c}: QPN {qpn}, capabilities {want}")
    for handle in qps:
        e, _ = command(fd, DESTROY_QP, struct.pack("<QII", 0, handle, 0), 4)
        if e:
            fail(f"DESTROY_QP {handle}: errno {e}")
    ok("DESTROY_QP x2")
    e, _ = command(fd, DESTROY_CQ, struct.pack("<QII", 0, cq, 0), 8)
    if e:
        fail(f"DESTROY_CQ after its QPs: errno {e}")
    e, _ = command(fd, DEALLOC_PD, struct.pack("<II", pd, 0), 0)
    if e:
        fail(f"DEALLOC_PD after its QPs: errno {e}")


def fill(what, make, limit, free):
    """Makes objects with `make()` (returns (errno, handle)) until one fails: exactly
    `limit` must succeed and the next get ENOMEM; freeing one (`free(handle)`) makes room
    for one more. Returns the handles."""
    handles = []
    while len(handles) <= limit:
        e, h = make()
        if e:
            break
        handles.append(h)
    if len(handles) != limit:
        fail(f"{len(handles)} {what}s made, the NIC's limit is {limit}")
    expect_errno(f"{what} {limit + 1} (the NIC's limit is {limit})", e, errno.ENOMEM)
    free(handles.pop())
    e, h = make()
    if e:
        fail(f"no {what} after one was freed: errno {e}")
    handles.append(h)
    ok(f"a freed {what}'s room is reused")
    return handles


def limits(ibdev, pds, cqs, qps, mrs):
    fd = os.open(uverbs_path(ibdev), os.O_RDWR)
    e, _ = get_context(fd, struct.pack("<II", 0, 0))
    if e:
        fail(f"GET_CONTEXT: errno {e}")

    def alloc_pd():
        e, raw = command(fd, ALLOC_PD, b"\0" * 8, 4 + PD_RESP.size)
        return e, struct.unpack_from("<I", raw, 0)[0]

    def done(what, e):
        if e:
            fail(f"{what}: errno {errno.errorcode.get(e, e)}")

    def free_pd(h):
        done("DEALLOC_PD", command(fd, DEALLOC_PD, struct.pack("<II", h, 0), 0)[0])

    pd_handles = fill("PD", alloc_pd, pds, free_pd)
    pd = pd_handles[0]
    bufs = []

    def page_addr(n=1):
        m = mmap.mmap(-1, 4096 * n)
        bufs.append(m)
        return ctypes.addressof(ctypes.c_char.from_buffer(m))

    def create():
        e, _, h, _ = create_cq(fd, 2, CQ_CMD.pack(0, 1, 5, 0, page_addr(), page_addr()))
        return e, h

    def destroy_cq(h):
        done("DESTROY_CQ", command(fd, DESTROY_CQ, struct.pack("<QII", 0, h, 0), 8)[0])

    cq_handles = fill("CQ", create, cqs, destroy_cq)
    cq = cq_handles[0]

    def make_qp():
        drv = QP_CMD.pack(0, 0, 6, 0, 6, page_addr(), page_addr())
        e, core, _ = create_qp(fd, pd, cq, (1, 1, 1, 1, 0), drv)
        return e, core[0]

    def destroy_qp(h):
        done("DESTROY_QP", command(fd, DESTROY_QP, struct.pack("<QII", 0, h, 0), 4)[0])

    qp_handles = fill("QP", make_qp, qps, destroy_qp)
    mem = page_addr(16)

    def reg_mr():
        # ib_uverbs_reg_mr: response, start, length, hca_va, pd_handle, access_flags;
        # response: mr_handle, lkey, rkey (and 4 bytes to keep whole words).
        req = struct.pack("<QQQQII", 0, mem, 4096, mem, pd, 1)
        e, raw = command(fd, REG_MR, req, 16)
        return e, struct.unpack_from("<I", raw, 0)[0]

    def dereg_mr(h):
        done("DEREG_MR", command(fd, DEREG_MR, struct.pack("<I", h), 0)[0])

    mr_handles = fill("MR", reg_mr, mrs, dereg_mr)
    for h in qp_handles:
        destroy_qp(h)
    for h in cq_handles:
        destroy_cq(h)
    for h in mr_handles:
        dereg_mr(h)
    for h in pd_handles:
        free_pd(h)
    os.close(fd)
    print(f"PASS: {checks} checks")


def main():
    dev = uverbs_path(sys.argv[1])
    good = struct.pack("<II", 0, 0)

    # Malformed requests: each on a fresh file (a file holds at most one context).
    for what, drv, want in [
        ("GET_CONTEXT without driver data", b"", errno.EINVAL),
        ("GET_CONTEXT with comp_mask 1", struct.pack("<II", 1, 0), errno.EOPNOTSUPP),
        ("GET_CONTEXT with reserved_04 set", struct.pack("<II", 0, 0x100), errno.EOPNOTSUPP),
        ("GET_CONTEXT with non-zero bytes past the struct", good + struct.pack("<Q", 1), errno.EOPNOTSUPP),
    ]:
        fd = os.open(dev, os.O_RDWR)
        e, _ = get_context(fd, drv)
        expect_errno(what, e, want)
        os.close(fd)

    # A request of ABI version 1's minimum length (comp_mask alone) is accepted: the rest
    # reads as zero.
    fd = os.open(dev, os.O_RDWR)
    e, raw = get_context(fd, b"\0" * 4)
    if e:
        fail(f"GET_CONTEXT with the 4-byte minimum request: errno {errno.errorcode.get(e, e)}")
    if UCTX_RESP.unpack_from(raw, 8)[3] != 4096:
        fail("GET_CONTEXT with the 4-byte minimum request: no doorbell page in the response")
    ok("GET_CONTEXT with 4 of 8 driver bytes (the minimum): accepted, zero-extended")
    os.close(fd)

    # Zero bytes past the struct are fine (a newer provider, an older kernel).
    fd = os.open(dev, os.O_RDWR)
    e, raw = get_context(fd, good + b"\0" * 8, resp_len=8 + UCTX_RESP.size + 16)
    if e:
        fail(f"GET_CONTEXT with zero trailing bytes: errno {e}")
    comp_mask, page, key, page_size, res = UCTX_RESP.unpack_from(raw, 8)
    if comp_mask != 0 or not 1 <= page < DB_PAGES or page_size != 4096 or res != 0:
        fail(f"GET_CONTEXT response {comp_mask=} {page=} {page_size=} {res=}")
    if key % 4096:
        fail(f"mmap key {key:#x} is not page aligned")
    tail = raw[8 + UCTX_RESP.size:8 + UCTX_RESP.size + 16]
    if tail != b"\0" * 16:
        fail(f"a longer response buffer is not zero-filled: {tail.hex()}")
    if raw[8 + UCTX_RESP.size + 16:8 + UCTX_RESP.size + 20] != b"\xa5" * 4:
        fail("the kernel wrote past the response buffer")
    ok(f"GET_CONTEXT: doorbell page {page}, key {key:#x}, 4096 bytes; long buffer zero-filled")

    # mmap rules.
    for what, args, want in [
        ("mmap of an unknown key", (4096, mmap.MAP_SHARED, mmap.PROT_WRITE, key + 4096), errno.EINVAL),
        ("mmap of two pages", (8192, mmap.MAP_SHARED, mmap.PROT_WRITE, key), errno.EINVAL),
        ("private mmap", (4096, mmap.MAP_PRIVATE, mmap.PROT_WRITE, key), errno.EINVAL),
        ("executable mmap", (4096, mmap.MAP_SHARED, mmap.PROT_WRITE | mmap.PROT_EXEC, key), errno.EPERM),
    ]:
        length, flags, prot, off = args
        try:
            m = mmap.mmap(fd, length, flags=flags, prot=prot, offset=off)
            m.close()
            fail(f"{what} succeeded")
        except OSError as e:
            expect_errno(what, e.errno, want)
    db = mmap.mmap(fd, 4096, flags=mmap.MAP_SHARED, prot=mmap.PROT_WRITE, offset=key)
    # A doorbell write reaches the NIC at this context's page (the model counts it per page).
    store32(db, 0x10, 0x600D0000 | page)
    ok(f"mmap of the doorbell page, write 0x{0x600D0000 | page:x} at offset 0x10")
    print(f"doorbell-page {page}")

    # ALLOC_PD: the driver has no request: non-zero input is rejected.
    e, _ = command(fd, ALLOC_PD, b"\0" * 8 + struct.pack("<Q", 7), 4 + PD_RESP.size)
    expect_errno("ALLOC_PD with non-zero driver input", e, errno.EOPNOTSUPP)
    pds = []
    for _ in range(3):
        e, raw = command(fd, ALLOC_PD, b"\0" * 8 + b"\0" * 8, 4 + PD_RESP.size)
        if e:
            fail(f"ALLOC_PD: errno {e}")
        handle, = struct.unpack_from("<I", raw, 0)
        cm, pdn = PD_RESP.unpack_from(raw, 4)
        if cm != 0:
            fail(f"ALLOC_PD comp_mask {cm}")
        pds.append((handle, pdn))
    pdns = [p for _, p in pds]
    if len(set(pdns)) != 3:
        fail(f"PD numbers not distinct: {pdns}")
    ok(f"ALLOC_PD x3: NIC PD numbers {pdns}")
    # A response too short for the driver data still allocates: truncated, nothing past.
    e, raw = command(fd, ALLOC_PD, b"\0" * 8, 4)
    if e or raw[4:8] != b"\xa5" * 4:
        fail(f"ALLOC_PD with no room for driver data: errno {e}, bytes {raw[4:8].hex()}")
    handle, = struct.unpack_from("<I", raw, 0)
    pds.append((handle, None))
    ok("ALLOC_PD with a 4-byte response: allocated, driver data truncated")
    for handle, _ in pds:
        e, _ = command(fd, DEALLOC_PD, struct.pack("<II", handle, 0), 0)
        if e:
            fail(f"DEALLOC_PD {handle}: errno {e}")
    e, _ = command(fd, DEALLOC_PD, struct.pack("<II", pds[0][0], 0), 0)
    expect_errno("DEALLOC_PD of a freed handle (ib_core: no such object)", e, errno.ENOENT)
    create_cq_checks(fd)
    foreign_doorbell(dev, db)
    db.close()
    os.close(fd)

    # Doorbell pages: 2047 for users. Every context holds one until it is gone.
    fds = []
    while True:
        f = os.open(dev, os.O_RDWR)
        e, _ = get_context(f, good)
        if e:
            os.close(f)
            break
        fds.append(f)
    if len(fds) != DB_PAGES - 1:
        fail(f"{len(fds)} contexts got a doorbell page, expected {DB_PAGES - 1}")
    expect_errno(f"context {DB_PAGES} (no doorbell page left)", e, errno.ENOMEM)
    os.close(fds.pop())
    f = os.open(dev, os.O_RDWR)
    e, _ = get_context(f, good)
    if e:
        fail(f"no context after one was closed: errno {e}")
    fds.append(f)
    ok("a closed context's doorbell page is reused")
    for f in fds:
        os.close(f)
    print(f"PASS: {checks} checks")


def hold(ibdev):
    fd = os.open(uverbs_path(ibdev), os.O_RDWR)
    e, raw = get_context(fd, struct.pack("<II", 0, 0))
    if e:
        fail(f"GET_CONTEXT: errno {e}")
    _, page, _, _, _ = UCTX_RESP.unpack_from(raw, 8)
    e, raw = command(fd, ALLOC_PD, b"\0" * 8, 4 + PD_RESP.size)
    if e:
        fail(f"ALLOC_PD: errno {e}")
    pd, = struct.unpack_from("<I", raw, 0)
    bufs = [mmap.mmap(-1, 1 << 20) for _ in range(3)] + [mmap.mmap(-1, 4096)]
    ring, sq, rq, rec = (ctypes.addressof(ctypes.c_char.from_buffer(b)) for b in bufs)
    e, _, cq, cqn = create_cq(fd, 32768, CQ_CMD.pack(0, 15, 5, 0, ring, rec))
    if e:
        fail(f"CREATE_CQ: errno {e}")
    e, _, qp_resp = create_qp(fd, pd, cq, (4096, 4096, 1, 1, 0), QP_CMD.pack(0, 12, 8, 12, 8, sq, rq))
    if e:
        fail(f"CREATE_QP: errno {e}")
    print(f"holding page {page} cqn {cqn} qpn {qp_resp[1]}", flush=True)
    while True:
        time.sleep(60)


def contexts(ibdev, cqn):
    dev = uverbs_path(ibdev)
    held, pages = [], []
    while True:
        fd = os.open(dev, os.O_RDWR)
        e, raw = get_context(fd, struct.pack("<II", 0, 0))
        if e:
            os.close(fd)
            break
        _, page, key, _, _ = UCTX_RESP.unpack_from(raw, 8)
        db = mmap.mmap(fd, 4096, flags=mmap.MAP_SHARED, prot=mmap.PROT_WRITE, offset=key)
        store32(db, 0x8, cqn << 16)
        held.append((fd, db))
        pages.append(page)
    print("pages " + " ".join(map(str, pages)))
    print(f"contexts {len(held)} errno {errno.errorcode.get(e, e)}")
    for fd, db in held:
        db.close()
        os.close(fd)


# A file per context, and a doorbell mapping each: more than the default 1024 files.
resource.setrlimit(resource.RLIMIT_NOFILE, (4 * DB_PAGES, 4 * DB_PAGES))
if sys.argv[1] == "--hold":
    hold(sys.argv[2])
elif sys.argv[1] == "--contexts":
    contexts(sys.argv[2], int(sys.argv[3]))
elif sys.argv[1] == "--limits":
    limits(sys.argv[2], *map(int, sys.argv[3:7]))
else:
    main()
