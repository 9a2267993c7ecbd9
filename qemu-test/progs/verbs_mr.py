#!/usr/bin/env python3
"""MRs through the real libibverbs and the ordma provider (ctypes), checked against the NIC
model: its MR count (`status`, through the control channel) and the page size and page
count it was given (its debug log's "MR created" lines).

Usage: verbs_mr.py CHECK [ARGS] [CHECK [ARGS] ...]   (one after another, one device and PD)
  basic            a 64 KiB MR over ordinary (4 KiB-page) memory: lkey == rkey, the NIC
                   has 1 MR of 16 pages of 4 KiB; deregistered, 0; then 4 MiB of shmem:
                   1024 pages of 4 KiB in a two-level page list
  huge PATH        a 2 MiB MR over a hugetlbfs page (a file in the hugetlbfs at PATH): the
                   NIC was given one 2 MiB page
  thp              a 4 MiB MR over anonymous memory with MADV_HUGEPAGE, backed by
                   transparent huge pages (checked in smaps): the NIC was given 2 MiB pages
  shared           two MRs over the same buffer, deregistered in either order: each
                   registration holds its own, the other stays registered and deregisters
  access           remote write or remote atomic without local write: EINVAL, nothing
                   reaches the NIC; MW_BIND (1.9) registers; relaxed ordering (optional)
                   ignored
  memlock BYTES    registering BYTES: ENOMEM expected (run over RLIMIT_MEMLOCK)
  hold N [--then-reg FILE]
                   registers N MRs of 1 MiB, prints "holding", waits to be killed; with
                   --then-reg, once FILE exists registers one more and prints
                   "reg ok|<errno> <ms> ms"
  dmabuf           an MR over a udmabuf dma-buf made from a memfd of 4 KiB pages: the
                   NIC gets 512 pages of 4 KiB
  dmabuf-huge      the same over a memfd of one 2 MiB hugetlb page: one page of 2 MiB
Prints what it checked; exits 0 when everything held.
"""
import ctypes
import errno
import fcntl
import mmap
import os
import re
import subprocess
import sys
import time

from ibv import die, ibv, open_device

LOCAL_WRITE, REMOTE_WRITE, REMOTE_READ, REMOTE_ATOMIC = 1, 2, 4, 8
MW_BIND, RELAXED_ORDERING = 0x10, 1 << 20
RW = LOCAL_WRITE | REMOTE_WRITE | REMOTE_READ


class IbvMr(ctypes.Structure):
    # struct ibv_mr (verbs.h).
    _fields_ = [
        ("context", ctypes.c_void_p),
        ("pd", ctypes.c_void_p),
        ("addr", ctypes.c_void_p),
        ("length", ctypes.c_size_t),
        ("handle", ctypes.c_uint32),
        ("lkey", ctypes.c_uint32),
        ("rkey", ctypes.c_uint32),
    ]


ibv.ibv_reg_mr.restype = ctypes.POINTER(IbvMr)
ibv.ibv_reg_mr.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
ibv.ibv_reg_dmabuf_mr.restype = ctypes.POINTER(IbvMr)
ibv.ibv_reg_dmabuf_mr.argtypes = [
    ctypes.c_void_p, ctypes.c_uint64, ctypes.c_size_t, ctypes.c_uint64, ctypes.c_int,
    ctypes.c_int,
]
ibv.ibv_dereg_mr.argtypes = [ctypes.POINTER(IbvMr)]

libc = ctypes.CDLL(None, use_errno=True)
libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
MADV_HUGEPAGE = 14
NIC_CONTROL = "/ordma/src/qemu-test/progs/nic-control.sh"


def mrs_on_nic():
    """The NIC's MR count, from the model's `status`."""
    out = subprocess.run(
        ["bash", "-c", f'fail() {{ echo "$*"; exit 1; }}; source {NIC_CONTROL}; nic_ctl 0 status'],
        capture_output=True, text=True, check=False,
    ).stdout
    m = re.search(r" mrs=(\d+)", out)
    if not m:
        die(f"no MR count in the NIC's status: {out!r}")
    return int(m.group(1))


def expect_mrs(n, what):
    got = mrs_on_nic()
    if got != n:
        die(f"{what}: the NIC has {got} MR(s), expected {n}")
    print(f"{what}: the NIC has {n} MR(s)", flush=True)


def nic_mr(key):
    """(npages, page_shift, levels) the NIC holds for the MR with KEY (the model's `mr`)."""
    out = subprocess.run(
        ["bash", "-c", f'fail() {{ echo "$*"; exit 1; }}; source {NIC_CONTROL}; nic_ctl 0 mr {key:#x}'],
        capture_output=True, text=True, check=False,
    ).stdout
    m = [re.search(rf" {k}=(\d+)", out) for k in ("npages", "page_shift", "levels")]
    if not all(m):
        die(f"the NIC has no MR with key {key:#x}: {out!r}")
    return tuple(int(x.group(1)) for x in m)


def anon(n):
    """Private anonymous memory (what malloc gives; Python's default is shared)."""
    return mmap.mmap(-1, n, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)


def buffer_addr(buf):
    return ctypes.addressof(ctypes.c_char.from_buffer(buf))


def reg(pd, addr, length, access):
    mr = ibv.ibv_reg_mr(pd, addr, length, access)
    if not mr:
        e = ctypes.get_errno()
        return None, e
    return mr, 0


def reg_ok(pd, addr, length, access=RW):
    mr, e = reg(pd, addr, length, access)
    if not mr:
        die(f"ibv_reg_mr({length} bytes, access {access:#x}): {errno.errorcode.get(e, e)}")
    return mr


def dereg_ok(mr, what):
    r = ibv.ibv_dereg_mr(mr)
    if r != 0:
        die(f"ibv_dereg_mr({what}): {r}")


def check_pages(mr, length, shift, what):
    key = mr.contents.lkey
    npages, page_shift, levels = nic_mr(key)
    want_pages = -(-length // (1 << shift))
    print(f"{what}: key {key:#x}, the NIC got {npages} page(s) of {1 << page_shift} bytes, "
          f"{levels} level(s)", flush=True)
    if page_shift != shift or npages != want_pages:
        die(f"{what}: expected {want_pages} page(s) of {1 << shift} bytes")


def basic(pd):
    n = 64 << 10
    buf = anon(n)
    buf.write(b"x" * n)
    expect_mrs(0, "before")
    mr = reg_ok(pd, buffer_addr(buf), n)
    lkey, rkey = mr.contents.lkey, mr.contents.rkey
    print(f"4 KiB pages: lkey {lkey:#x} rkey {rkey:#x}", flush=True)
    if lkey != rkey:
        die("lkey and rkey differ")
    expect_mrs(1, "registered")
    check_pages(mr, n, 12, "4 KiB pages")
    dereg_ok(mr, "basic")
    expect_mrs(0, "deregistered")
    # 4 MiB of shared anonymous memory (shmem: no huge pages here): 1024 pages of 4 KiB, a
    # page list of two levels.
    n = 4 << 20
    buf = mmap.mmap(-1, n)
    buf.write(b"y" * n)
    mr = reg_ok(pd, buffer_addr(buf), n)
    check_pages(mr, n, 12, "4 MiB of 4 KiB pages")
    if nic_mr(mr.contents.lkey)[2] != 2:
        die("1024 pages need a page list of 2 levels")
    dereg_ok(mr, "4 MiB")
    expect_mrs(0, "4 MiB MR deregistered")


def huge(pd, path):
    n = 2 << 20
    fd = os.open(os.path.join(path, "mr"), os.O_CREAT | os.O_RDWR, 0o600)
    os.ftruncate(fd, n)
    buf = mmap.mmap(fd, n, mmap.MAP_SHARED)
    buf.write(b"h" * n)
    mr = reg_ok(pd, buffer_addr(buf), n)
    expect_mrs(1, "hugetlbfs MR")
    check_pages(mr, n, 21, "hugetlbfs 2 MiB page")
    dereg_ok(mr, "hugetlbfs")
    expect_mrs(0, "hugetlbfs MR deregistered")


def thp(pd):
    n, align = 4 << 20, 2 << 20
    raw = anon(n + align)
    base = buffer_addr(raw)
    addr = (base + align - 1) & ~(align - 1)
    if libc.madvise(addr, n, MADV_HUGEPAGE) != 0:
        die(f"madvise(MADV_HUGEPAGE): errno {ctypes.get_errno()}")
    ctypes.memset(addr, 0x5a, n)
    with open("/proc/self/smaps") as f:
        text = f.read()
    thp_kb = 0
    for block in re.split(r"\n(?=[0-9a-f]+-[0-9a-f]+ )", text):
        start, end = (int(x, 16) for x in block.split()[0].split("-"))
        if start <= addr < end:
            thp_kb = int(re.search(r"AnonHugePages:\s+(\d+) kB", block).group(1))
    print(f"THP: {thp_kb} kB of the buffer's mapping in transparent huge pages", flush=True)
    if thp_kb < n >> 10:
        die("the buffer is not backed by transparent huge pages")
    mr = reg_ok(pd, addr, n)
    check_pages(mr, n, 21, "THP")
    dereg_ok(mr, "THP")
    expect_mrs(0, "THP MR deregistered")


def shared(pd):
    n = 256 << 10
    buf = anon(n)
    buf.write(b"s" * n)
    a = buffer_addr(buf)
    for first in ("A", "B"):
        mrs = {"A": reg_ok(pd, a, n), "B": reg_ok(pd, a, n)}
        ka, kb = mrs["A"].contents.lkey, mrs["B"].contents.lkey
        if ka == kb:
            die(f"two MRs over one buffer share key {ka:#x}")
        expect_mrs(2, f"MRs A {ka:#x} and B {kb:#x} over one buffer")
        second = "B" if first == "A" else "A"
        dereg_ok(mrs[first], first)
        expect_mrs(1, f"{first} deregistered, {second} still registered")
        # The buffer is still usable and pinned for the other MR.
        buf[0:4] = b"live"
        dereg_ok(mrs[second], second)
        expect_mrs(0, f"{second} deregistered too")


def access(pd):
    n = 4096
    buf = anon(n)
    for flags, name in ((REMOTE_WRITE, "remote write"), (REMOTE_ATOMIC, "remote atomic"),
                        (REMOTE_WRITE | REMOTE_READ, "remote write + read")):
        mr, e = reg(pd, buffer_addr(buf), n, flags)
        if mr:
            die(f"{name} without local write was registered")
        print(f"{name} without local write: {errno.errorcode.get(e, e)}", flush=True)
        if e != errno.EINVAL:
            die(f"{name} without local write: expected EINVAL")
    expect_mrs(0, "after the refused registrations")
    # Memory windows may be bound to an MR with MW_BIND (interface 1.9): it registers.
    mr = reg_ok(pd, buffer_addr(buf), n, LOCAL_WRITE | MW_BIND)
    print("local write + MW_BIND: registered", flush=True)
    dereg_ok(mr, "MW_BIND")
    # Relaxed ordering is optional: ignored, the MR registers.
    mr = reg_ok(pd, buffer_addr(buf), n, RW | RELAXED_ORDERING)
    dereg_ok(mr, "relaxed ordering")
    print("relaxed ordering (optional): registered", flush=True)
    mr = reg_ok(pd, buffer_addr(buf), n, LOCAL_WRITE | REMOTE_ATOMIC)
    dereg_ok(mr, "atomic")
    mr = reg_ok(pd, buffer_addr(buf), n, REMOTE_READ)
    dereg_ok(mr, "read-only")
    print("local write + remote atomic, and remote read alone: registered", flush=True)


def memlock(pd, n):
    buf = anon(n)
    buf.write(b"m" * n)
    mr, e = reg(pd, buffer_addr(buf), n, RW)
    if mr:
        die(f"{n} bytes registered over RLIMIT_MEMLOCK (uid {os.getuid()})")
    print(f"{n} bytes as uid {os.getuid()} over RLIMIT_MEMLOCK: {errno.errorcode.get(e, e)}",
          flush=True)
    if e != errno.ENOMEM:
        die("expected ENOMEM")
    small = 4096
    mr = reg_ok(pd, buffer_addr(buf), small)
    dereg_ok(mr, "small")
    print(f"{small} bytes within the limit: registered", flush=True)


def hold(pd, count, then_reg=None):
    n = 1 << 20
    keep = []
    for _ in range(count):
        buf = anon(n)
        buf.write(b"k" * n)
        keep.append((buf, reg_ok(pd, buffer_addr(buf), n)))
    print("holding", flush=True)
    if then_reg:
        while not os.path.exists(then_reg):
            time.sleep(0.1)
        buf = anon(n)
        buf.write(b"r" * n)
        t0 = time.monotonic()
        mr, e = reg(pd, buffer_addr(buf), n, RW)
        ms = int((time.monotonic() - t0) * 1000)
        print(f"reg {'ok' if mr else errno.errorcode.get(e, e)} {ms} ms", flush=True)
        keep.append((buf, mr))
    while True:
        time.sleep(60)


def dmabuf(pd, huge):
    """A 2 MiB dma-buf MR from udmabuf over a memfd: of 4 KiB shmem pages, the NIC gets 512
    pages of 4 KiB; of one 2 MiB hugetlb page (`huge`), one page of 2 MiB: the page size
    comes from the dma-buf's scatterlist, as for user memory."""
    n = 2 << 20
    flags = os.MFD_ALLOW_SEALING | (os.MFD_HUGETLB if huge else 0)
    memfd = os.memfd_create("ordma-mr", flags)
    os.ftruncate(memfd, n)
    F_ADD_SEALS, F_SEAL_SHRINK = 1033, 2
    fcntl.fcntl(memfd, F_ADD_SEALS, F_SEAL_SHRINK)
    # struct udmabuf_create { u32 memfd; u32 flags; u64 offset; u64 size; }
    arg = ctypes.create_string_buffer(24)
    ctypes.memmove(arg, (ctypes.c_uint32 * 2)(memfd, 1), 8)  # UDMABUF_FLAGS_CLOEXEC
    ctypes.memmove(ctypes.byref(arg, 16), ctypes.byref(ctypes.c_uint64(n)), 8)
    UDMABUF_CREATE = 0x40187542
    dev = os.open("/dev/udmabuf", os.O_RDWR)
    fd = fcntl.ioctl(dev, UDMABUF_CREATE, arg)
    if not isinstance(fd, int):
        fd = int.from_bytes(fd[:4], "little")
    iova = 0x10000000
    mr = ibv.ibv_reg_dmabuf_mr(pd, 0, n, iova, fd, RW)
    if not mr:
        die(f"ibv_reg_dmabuf_mr: errno {errno.errorcode.get(ctypes.get_errno())}")
    print(f"dma-buf MR: lkey {mr.contents.lkey:#x}", flush=True)
    expect_mrs(1, "dma-buf MR")
    npages, page_shift, _ = nic_mr(mr.contents.lkey)
    what = "dma-buf of a 2 MiB hugetlb page" if huge else "dma-buf of 4 KiB pages"
    print(f"{what}: the NIC got {npages} page(s) of {1 << page_shift} bytes", flush=True)
    want = 21 if huge else 12
    if page_shift != want or npages << page_shift != n:
        die(f"{what}: expected {n >> want} page(s) of {1 << want} bytes")
    dereg_ok(mr, "dma-buf")
    expect_mrs(0, "dma-buf MR deregistered")


def main():
    args = sys.argv[1:]
    ctx = open_device("ordma0")
    pd = ibv.ibv_alloc_pd(ctx)
    if not pd:
        die(f"ibv_alloc_pd: errno {ctypes.get_errno()}")
    # One check after another in this process (a process costs seconds on the debug
    # kernel); `huge`, `memlock` and `hold` take their arguments after them.
    while args:
        check = args.pop(0)
        if check == "basic":
            basic(pd)
        elif check == "huge":
            huge(pd, args.pop(0))
        elif check == "thp":
            thp(pd)
        elif check == "shared":
            shared(pd)
        elif check == "access":
            access(pd)
        elif check == "memlock":
            memlock(pd, int(args.pop(0)))
        elif check == "hold":
            count, then_reg = int(args.pop(0)), None
            if args[:1] == ["--then-reg"]:
                then_reg = args[1]
                del args[:2]
            hold(pd, count, then_reg)
        elif check == "dmabuf":
            dmabuf(pd, False)
        elif check == "dmabuf-huge":
            dmabuf(pd, True)
        else:
            die(f"unknown check {check}")
        print(f"ok {check}", flush=True)
    ibv.ibv_dealloc_pd(pd)
    ibv.ibv_close_device(ctx)


if __name__ == "__main__":
    main()
