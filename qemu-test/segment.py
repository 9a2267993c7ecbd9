#!/usr/bin/env python3
"""The L2 segment between the guests of one multi-VM run (qemu-test/run --vms N).

A hub of Unix datagram sockets, unprivileged and private to the run: guest I's virtio-net
is a QEMU dgram netdev bound to DIR/vm<I>.sock that sends its Ethernet frames (one frame
per datagram, as they are) to DIR/hub.sock. The hub sends every frame it gets to every
other guest's socket (a hub floods; the guests' NICs filter by MAC) and, with --pcap,
appends it to a pcap file (link type Ethernet, flushed frame by frame) as the guest sent
it: the capture of the segment that tests decode with tshark.

The segment fails on request: it drops a fraction of the frames (--loss P), duplicates
(--duplicate P), flips one bit after the Ethernet header (--corrupt P), holds one back
until the next frame has gone (--reorder P; at most 50 ms; with a delay, delays it twice as
long), delays every frame (--delay MS), and cuts a guest's link (no frame to or from it). Fractions are per frame sent, drawn
from a generator seeded by --seed. The same settings change while the run goes on, through
the control socket (--control PATH, requests as `segment.py ctl`):

  loss|duplicate|corrupt|reorder P   a fraction, 0 to 1
  delay MS                           0 to 10000
  from G|all                         the above for frames from guest G only, or all
  link G up|down                     guest G's link
  clear                              all of the above off, every link up
  status                             the settings and the counters

each answered with one line, "ok ..." or "error: ...". Counters: frames (sent by guests),
delivered (copies handed to guests), lost (dropped on purpose), link_lost (to or from a
cut link), duplicated, corrupted, reordered, delayed, undeliverable (a guest's socket not
there or full, as on a wire). A frame for a guest not up yet is lost too (undeliverable).
Runs until killed (the harness's PID namespace ends it); SIGTERM logs the counters first.

Usage: segment.py --dir DIR --ports N [--pcap FILE] [--control PATH] [--ready-fd FD]
                  [--log FILE] [--seed N] [--loss P] [--duplicate P] [--corrupt P]
                  [--reorder P] [--delay MS]
       segment.py ctl --control PATH WORD...
"""

import argparse
import heapq
import os
import random
import select
import signal
import socket
import struct
import sys
import tempfile
import time

# The largest frame a guest sends: virtio-net's 64 KiB (GSO off) and headroom.
MAX_FRAME = 65536 + 64
# How long a frame held back for reordering waits for the next one at most.
REORDER_HOLD = 0.05
# How long a frame may wait for room in a guest's socket.
SEND_TIMEOUT = 0.02
FRACTIONS = ("loss", "duplicate", "corrupt", "reorder")
COUNTERS = ("frames", "delivered", "lost", "link_lost", "duplicated", "corrupted",
            "reordered", "delayed", "undeliverable")


class Segment:
    """The hub's state: the ports, the settings, the counters and the frames held."""

    def __init__(self, ports, log, seed):
        self.ports = ports
        self.log = log
        self.rng = random.Random(seed)
        self.fraction = dict.fromkeys(FRACTIONS, 0.0)
        self.delay = 0.0
        self.down = set()
        self.only = None  # the impairments for frames from this guest only (None: all)
        self.count = dict.fromkeys(COUNTERS, 0)
        self.out = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        # A guest's socket holds 10 datagrams (net.unix.max_dgram_qlen): wait a little for
        # room, as the NIC models' wire does, rather than lose a burst's tail.
        self.out.settimeout(SEND_TIMEOUT)
        self.held = None  # (deadline, source port, frame) held back for reordering
        self.later = []  # heap of (due, sequence, source port, frame) for the delay
        self.seq = 0

    def deliver(self, src, frame):
        for i, p in enumerate(self.ports):
            if p == src:
                continue
            if i in self.down:
                self.count["link_lost"] += 1
                continue
            try:
                self.out.sendto(frame, p)
                self.count["delivered"] += 1
            except OSError as e:
                n = self.count["undeliverable"] = self.count["undeliverable"] + 1
                # The first few, then every thousandth: a guest not up yet is normal.
                if n <= 5 or n % 1000 == 0:
                    print(f"segment: a frame from {src} to {p} undeliverable ({e}); {n} so far",
                          file=self.log)

    def send(self, src, frame):
        """A frame after loss, duplication and corruption: now, later, or held back."""
        if self.delay > 0:
            # Delayed frames keep their order, but for those reordering takes: twice the delay.
            self.count["delayed"] += 1
            due = time.monotonic() + self.delay
            if self.rng.random() < self.fraction["reorder"]:
                self.count["reordered"] += 1
                due += self.delay
            self.seq += 1
            heapq.heappush(self.later, (due, self.seq, src, frame))
            return
        if self.held is None and self.rng.random() < self.fraction["reorder"]:
            self.count["reordered"] += 1
            self.held = (time.monotonic() + REORDER_HOLD, src, frame)
            return
        self.deliver(src, frame)
        self.release_held()

    def release_held(self):
        if self.held is not None:
            _, src, frame = self.held
            self.held = None
            self.deliver(src, frame)

    def receive(self, src, frame):
        self.count["frames"] += 1
        if src in self.ports and self.ports.index(src) in self.down:
            self.count["link_lost"] += 1
            return
        if self.only is not None and src != self.ports[self.only]:
            self.deliver(src, frame)
            return
        if self.rng.random() < self.fraction["loss"]:
            self.count["lost"] += 1
            return
        copies = 1
        if self.rng.random() < self.fraction["duplicate"]:
            self.count["duplicated"] += 1
            copies = 2
        for _ in range(copies):
            f = frame
            if len(frame) > 14 and self.rng.random() < self.fraction["corrupt"]:
                self.count["corrupted"] += 1
                b = bytearray(frame)
                i = self.rng.randrange(14, len(b))
                b[i] ^= 1 << self.rng.randrange(8)
                f = bytes(b)
            self.send(src, f)

    def timeout(self):
        """Seconds until the next frame held or delayed is due (None: nothing waits)."""
        due = [d for d in (self.held[0] if self.held else None,
                           self.later[0][0] if self.later else None) if d is not None]
        return max(0.0, min(due) - time.monotonic()) if due else None

    def due(self):
        now = time.monotonic()
        if self.held is not None and self.held[0] <= now:
            self.release_held()
        while self.later and self.later[0][0] <= now:
            _, _, src, frame = heapq.heappop(self.later)
            self.deliver(src, frame)

    def status(self):
        s = " ".join(f"{k}={v:g}" for k, v in self.fraction.items())
        down = ",".join(str(i) for i in sorted(self.down)) or "none"
        c = " ".join(f"{k}={v}" for k, v in self.count.items())
        only = "all" if self.only is None else self.only
        return f"{s} delay_ms={self.delay * 1000:g} from={only} links_down={down} {c}"

    def request(self, words):
        """One control request's answer line."""
        match words:
            case ["status"]:
                return "ok " + self.status()
            case ["clear"]:
                self.fraction = dict.fromkeys(FRACTIONS, 0.0)
                self.delay = 0.0
                self.down.clear()
                self.only = None
                return "ok " + self.status()
            case ["from", "all"]:
                self.only = None
                return "ok " + self.status()
            case ["from", g]:
                if not g.isdigit() or int(g) >= len(self.ports):
                    return f"error: no guest {g!r}"
                self.only = int(g)
                return "ok " + self.status()
            case [kind, p] if kind in FRACTIONS:
                try:
                    v = float(p)
                except ValueError:
                    return f"error: {kind} wants a fraction, not {p!r}"
                if not 0.0 <= v <= 1.0:
                    return f"error: {kind} {p}: not between 0 and 1"
                self.fraction[kind] = v
                return "ok " + self.status()
            case ["delay", ms]:
                if not ms.isdigit() or int(ms) > 10000:
                    return f"error: delay wants 0 to 10000 ms, not {ms!r}"
                self.delay = int(ms) / 1000
                return "ok " + self.status()
            case ["link", g, ("up" | "down") as state]:
                if not g.isdigit() or int(g) >= len(self.ports):
                    return f"error: no guest {g!r}"
                (self.down.discard if state == "up" else self.down.add)(int(g))
                return "ok " + self.status()
            case _:
                return ("error: unknown request (loss|duplicate|corrupt|reorder P, delay MS, "
                        "from G|all, link G up|down, clear, status)")


def ctl(argv):
    """`segment.py ctl --control PATH WORD...`: one request, its answer on stdout."""
    ap = argparse.ArgumentParser(prog="segment.py ctl")
    ap.add_argument("--control", required=True)
    ap.add_argument("words", nargs="+")
    a = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as d:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        s.bind(os.path.join(d, "ctl.sock"))
        s.settimeout(5)
        try:
            s.sendto(" ".join(a.words).encode(), a.control)
            reply = s.recv(4096).decode(errors="replace")
        except OSError as e:
            print(f"error: no answer from the segment ({e})")
            return 1
    print(reply)
    return 0 if reply.startswith("ok") else 1


def main():
    if sys.argv[1:2] == ["ctl"]:
        return ctl(sys.argv[2:])
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", required=True)
    ap.add_argument("--ports", type=int, required=True)
    ap.add_argument("--pcap")
    ap.add_argument("--control")
    ap.add_argument("--ready-fd", type=int)
    ap.add_argument("--log")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--delay", type=int, default=0)
    for k in FRACTIONS:
        ap.add_argument(f"--{k}", type=float, default=0.0)
    a = ap.parse_args()
    log = open(a.log, "a", buffering=1) if a.log else sys.stderr

    hub_path = os.path.join(a.dir, "hub.sock")
    ports = [os.path.join(a.dir, f"vm{i}.sock") for i in range(a.ports)]
    seg = Segment(ports, log, a.seed)
    for k in FRACTIONS:
        r = seg.request([k, str(getattr(a, k.replace("-", "_")))])
        if not r.startswith("ok"):
            print(f"segment: --{k}: {r}", file=sys.stderr)
            return 2
    r = seg.request(["delay", str(a.delay)])
    if not r.startswith("ok"):
        print(f"segment: --delay: {r}", file=sys.stderr)
        return 2

    def bind(path):
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        s.bind(path)
        return s

    sock = bind(hub_path)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    control = bind(a.control) if a.control else None

    pcap = None
    if a.pcap:
        pcap = open(a.pcap, "wb")
        # The pcap global header: microsecond timestamps, snaplen, LINKTYPE_ETHERNET.
        pcap.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, MAX_FRAME, 1))
        pcap.flush()

    def stop(*_):
        print(f"segment: stopped; {seg.status()}", file=log)
        sys.exit(0)

    signal.signal(signal.SIGTERM, stop)
    if a.ready_fd is not None:
        os.write(a.ready_fd, b"ready\n")
        os.close(a.ready_fd)
    print(f"segment: hub {hub_path}, ports {', '.join(ports)}; {seg.status()}", file=log)

    inputs = [sock] + ([control] if control else [])
    while True:
        ready, _, _ = select.select(inputs, [], [], seg.timeout())
        if sock in ready:
            frame, src = sock.recvfrom(MAX_FRAME)
            if pcap:
                t = time.time()
                sec = int(t)
                pcap.write(struct.pack("<IIII", sec, int((t - sec) * 1e6), len(frame), len(frame)))
                pcap.write(frame)
                pcap.flush()
            seg.receive(src, frame)
        if control is not None and control in ready:
            req, client = control.recvfrom(4096)
            words = req.decode(errors="replace").split()
            answer = seg.request(words)
            print(f"segment: control {' '.join(words)!r} -> {answer}", file=log)
            if client:
                try:
                    control.sendto(answer.encode(), client)
                except OSError as e:
                    print(f"segment: control answer not sent ({e})", file=log)
        seg.due()


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        pass
