#!/usr/bin/env python3
"""A verbs user of ordma through the real libibverbs and the ordma provider (ctypes, no
bindings of our own): opens a device, allocates PDs, and reports what the provider
mapped. The provider exports nothing, so what it holds (its doorbell page, the NIC's PDs)
is seen from the NIC model's control channel by the tests, not asked of the library.

Usage:
  verbs_ctx.py hold DEV NPDS [DBOFF]
      Opens DEV, allocates NPDS PDs, writes 4 bytes at offset DBOFF of the doorbell
      mapping when DBOFF is given (the NIC model counts it on its page), prints one
      JSON line (pid, the doorbell mapping from /proc/self/maps, DBOFF), then obeys lines
      on stdin:
        free          deallocate the PDs, close the device, print "closed", exit 0
        after-remove  (the device was removed under us) try one more ALLOC_PD and print
                      its errno, write to the old doorbell mapping, deallocate the PDs
                      (printing each errno), close the device, print "closed", exit 0
  verbs_ctx.py exhaust DEV
      Allocates PDs until one fails; prints "allocated N errno E".
  verbs_ctx.py take DEV MAXCTX MAXPDS
      Takes what it can of DEV, as a greedy user would: opens contexts until one fails or
      MAXCTX are open, then allocates PDs on them in turn until one fails or MAXPDS are
      held; prints "contexts N errno E pds M errno F" (errno 0: stopped at the maximum) and
      holds them until stdin closes, then frees them, prints "freed" and exits 0.
"""
import ctypes
import json
import os
import sys

from ibv import die, ibv, open_device


def doorbell_mappings():
    """(start, end, perms) of this process's mappings of a uverbs file."""
    out = []
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 6 and parts[5].startswith("/dev/infiniband/uverbs"):
                lo, hi = (int(x, 16) for x in parts[0].split("-"))
                out.append((lo, hi, parts[1]))
    return out


def hold(name, npds, dboff):
    ctx = open_device(name)
    pds = []
    for _ in range(npds):
        pd = ibv.ibv_alloc_pd(ctx)
        if not pd:
            die(f"ibv_alloc_pd: errno {ctypes.get_errno()}")
        pds.append(pd)
    maps = doorbell_mappings()
    if dboff is not None:
        if len(maps) != 1:
            die(f"doorbell mappings {maps}, expected one")
        ctypes.memmove(maps[0][0] + dboff, b"\x01\x00\x00\x00", 4)
    print(json.dumps({
        "pid": os.getpid(),
        "maps": [[hi - lo, perms] for lo, hi, perms in maps],
        "dboff": dboff,
    }), flush=True)
    cmd = sys.stdin.readline().strip()
    if cmd == "after-remove":
        pd = ibv.ibv_alloc_pd(ctx)
        print(f"alloc_pd errno {0 if pd else ctypes.get_errno()}", flush=True)
        # The mapping is still valid memory (ib_core swapped in a dummy page): no fault.
        for lo, _, _ in maps:
            ctypes.memmove(lo + 0x10, b"\x01\x00\x00\x00", 4)
        print("doorbell write ok", flush=True)
        for pd in pds:
            print(f"dealloc_pd {ibv.ibv_dealloc_pd(pd)}", flush=True)
    elif cmd == "free":
        for pd in pds:
            r = ibv.ibv_dealloc_pd(pd)
            if r:
                die(f"ibv_dealloc_pd: {r}")
    else:
        die(f"unknown command {cmd!r}")
    print(f"close {ibv.ibv_close_device(ctx)}", flush=True)
    print("closed", flush=True)


def exhaust(name):
    ctx = open_device(name)
    pds = []
    while True:
        pd = ibv.ibv_alloc_pd(ctx)
        if not pd:
            err = ctypes.get_errno()
            break
        pds.append(pd)
        if len(pds) > 100000:
            die("no limit")
    print(f"allocated {len(pds)} errno {err}", flush=True)
    for pd in pds:
        ibv.ibv_dealloc_pd(pd)
    ibv.ibv_close_device(ctx)


def take(name, maxctx, maxpds):
    n = ctypes.c_int()
    devs = ibv.ibv_get_device_list(ctypes.byref(n))
    if not devs:
        die(f"ibv_get_device_list: errno {ctypes.get_errno()}")
    dev = next((devs[i] for i in range(n.value)
                if ibv.ibv_get_device_name(devs[i]).decode() == name), None)
    if dev is None:
        die(f"no device {name}")
    ctxs, ctx_errno = [], 0
    while len(ctxs) < maxctx:
        ctx = ibv.ibv_open_device(dev)
        if not ctx:
            ctx_errno = ctypes.get_errno()
            break
        ctxs.append(ctx)
    pds, pd_errno = [], 0
    while ctxs and len(pds) < maxpds:
        pd = ibv.ibv_alloc_pd(ctxs[len(pds) % len(ctxs)])
        if not pd:
            pd_errno = ctypes.get_errno()
            break
        pds.append(pd)
    print(f"contexts {len(ctxs)} errno {ctx_errno} pds {len(pds)} errno {pd_errno}", flush=True)
    sys.stdin.read()
    for pd in pds:
        if ibv.ibv_dealloc_pd(pd):
            die("ibv_dealloc_pd failed")
    for ctx in ctxs:
        if ibv.ibv_close_device(ctx):
            die("ibv_close_device failed")
    ibv.ibv_free_device_list(devs)
    print("freed", flush=True)


if sys.argv[1] == "hold":
    hold(sys.argv[2], int(sys.argv[3]), int(sys.argv[4], 0) if len(sys.argv) > 4 else None)
elif sys.argv[1] == "exhaust":
    exhaust(sys.argv[2])
elif sys.argv[1] == "take":
    take(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
else:
    die(f"usage: {__doc__}")
