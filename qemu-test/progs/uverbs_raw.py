#!/usr/bin/env python3
"""ordma's driver data (udata) and doorbell mmap, driven through the raw uverbs write()
interface, with sizes and contents libibverbs would never send.

Usage: uverbs_raw.py IBDEV   (e.g. ordma0)

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
  doorbells    63 user pages: the 64th context gets ENOMEM; closing one frees its page
Prints one line per check; exits non-zero on the first failure.
"""
import ctypes
import errno
import mmap
import os
import struct
import sys

# ib_user_verbs.h command numbers
GET_CONTEXT, ALLOC_PD, DEALLOC_PD, CREATE_CQ, DESTROY_CQ = 0, 3, 4, 18, 20
# uapi/rdma/ordma-abi.h
UCTX_RESP = struct.Struct("<IIQII")  # comp_mask, db_page_index, db_mmap_key, db_page_size, reserved_14
PD_RESP = struct.Struct("<II")  # comp_mask, pdn
CQ_CMD = struct.Struct("<IBBHQQ")  # comp_mask, log_depth, log_cqe_size, reserved_06, buf_addr, db_addr
CQ_RESP = struct.Struct("<II")  # comp_mask, cqn
DB_PAGES = 64

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
    # except DEALLOC_PD).
    if cmd not in (DEALLOC_PD,):
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
    ok(f"CREATE_CQ x3 (one ring and record shared, pinned once each): cqe = ring depth, CQNs {cqns}")
    for handle, _ in cqs:
        e, _ = command(fd, DESTROY_CQ, struct.pack("<QII", 0, handle, 0), 8)
        if e:
            fail(f"DESTROY_CQ {handle}: errno {e}")
    ok("DESTROY_CQ x3")


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
    # A doorbell write reaches the NIC at this context's page (the model logs it).
    db[0x10:0x14] = struct.pack("<I", 0x600D0000 | page)
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
    db.close()
    os.close(fd)

    # Doorbell pages: 63 for users. Every context holds one until it is gone.
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


main()
