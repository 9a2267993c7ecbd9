#!/usr/bin/env python3
"""A verbs process that waits for a device's asynchronous events through the real
libibverbs (ctypes): ibv_get_async_event(), named by libibverbs' own ibv_event_type_str().

Usage: async_events.py DEV [--pd] [--then-alloc-pd] [--wait S] [--ignore EVENT]... EVENT...
  Opens DEV (with --pd, also allocates a PD), prints "ready", then waits for each EVENT in
  turn (libibverbs' names, e.g. "port error", "port active", "local catastrophic error";
  S seconds each, default 60), printing "event <name> port <n>" for every event read and acking it.
  An event other than the one awaited fails the run, but for those named with --ignore
  (printed as "ignored <name> port <n>", acked, and not counted; e.g. "GID table change" on
  a RoCE port, whose GID table follows its netdev's addresses). With --then-alloc-pd, once all have
  arrived it calls ibv_alloc_pd() once more and prints "alloc_pd errno <name> <ms> ms".
  Prints "done" and exits 0 when everything expected happened.
"""
import ctypes
import errno
import sys
import threading
import time

from ibv import die, ibv, open_device


class AsyncEvent(ctypes.Structure):
    # struct ibv_async_event: a pointer-sized union, then enum ibv_event_type.
    _fields_ = [("element", ctypes.c_uint64), ("event_type", ctypes.c_int)]


ibv.ibv_get_async_event.argtypes = [ctypes.c_void_p, ctypes.POINTER(AsyncEvent)]
ibv.ibv_ack_async_event.argtypes = [ctypes.POINTER(AsyncEvent)]


def main():
    args = sys.argv[1:]
    dev = args.pop(0)
    want_pd = "--pd" in args
    then_alloc = "--then-alloc-pd" in args
    wait_s = 60
    if "--wait" in args:
        i = args.index("--wait")
        wait_s = int(args[i + 1])
        del args[i:i + 2]
    ignore = []
    while "--ignore" in args:
        i = args.index("--ignore")
        ignore.append(args[i + 1])
        del args[i:i + 2]
    events = [a for a in args if not a.startswith("--")]
    ctx = open_device(dev)
    if want_pd and not ibv.ibv_alloc_pd(ctx):
        die(f"ibv_alloc_pd: errno {ctypes.get_errno()}")
    print("ready", flush=True)
    for want in events:
        while True:
            ev = AsyncEvent()
            got = {}

            def wait():
                got["rc"] = ibv.ibv_get_async_event(ctx, ctypes.byref(ev))

            t = threading.Thread(target=wait, daemon=True)
            t.start()
            t.join(wait_s)
            if t.is_alive():
                die(f"no event within {wait_s} s (waiting for '{want}')")
            if got["rc"]:
                die(f"ibv_get_async_event: errno {ctypes.get_errno()}")
            name = ibv.ibv_event_type_str(ev.event_type).decode()
            ibv.ibv_ack_async_event(ctypes.byref(ev))
            if name in ignore:
                print(f"ignored {name} port {ev.element & 0xffffffff}", flush=True)
                continue
            print(f"event {name} port {ev.element & 0xffffffff}", flush=True)
            if name != want:
                die(f"event '{name}', expected '{want}'")
            break
    if then_alloc:
        t0 = time.monotonic()
        pd = ibv.ibv_alloc_pd(ctx)
        ms = (time.monotonic() - t0) * 1000
        e = 0 if pd else ctypes.get_errno()
        print(f"alloc_pd errno {errno.errorcode.get(e, e)} {ms:.0f} ms", flush=True)
    print("done", flush=True)
    # The device may be gone (unbind): leave without closing, the kernel cleans up.


main()
