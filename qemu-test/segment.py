#!/usr/bin/env python3
"""The L2 segment between the guests of one multi-VM run (qemu-test/run --vms N).

A hub of Unix datagram sockets, unprivileged and private to the run: guest I's virtio-net
is a QEMU dgram netdev bound to DIR/vm<I>.sock that sends its Ethernet frames (one frame
per datagram, as they are) to DIR/hub.sock. The hub sends every frame it gets to every
other guest's socket (a hub floods; the guests' NICs filter by MAC) and, with --pcap,
appends it to a pcap file (link type Ethernet, flushed frame by frame): the capture of the
segment that tests decode with tshark.

A frame for a guest whose socket is not there yet (or any more), or whose queue is full,
is lost, as on a wire. Runs until killed (the harness's PID namespace ends it).

Usage: segment.py --dir DIR --ports N [--pcap FILE] [--ready-fd FD] [--log FILE]
"""

import argparse
import os
import socket
import struct
import sys
import time

# The largest frame a guest sends: virtio-net's 64 KiB (GSO off) and headroom.
MAX_FRAME = 65536 + 64


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", required=True)
    ap.add_argument("--ports", type=int, required=True)
    ap.add_argument("--pcap")
    ap.add_argument("--ready-fd", type=int)
    ap.add_argument("--log")
    a = ap.parse_args()
    log = open(a.log, "a", buffering=1) if a.log else sys.stderr

    hub_path = os.path.join(a.dir, "hub.sock")
    ports = [os.path.join(a.dir, f"vm{i}.sock") for i in range(a.ports)]
    try:
        os.unlink(hub_path)
    except FileNotFoundError:
        pass
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(hub_path)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    out = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    out.setblocking(False)

    pcap = None
    if a.pcap:
        pcap = open(a.pcap, "wb")
        # The pcap global header: microsecond timestamps, snaplen, LINKTYPE_ETHERNET.
        pcap.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, MAX_FRAME, 1))
        pcap.flush()

    if a.ready_fd is not None:
        os.write(a.ready_fd, b"ready\n")
        os.close(a.ready_fd)
    print(f"segment: hub {hub_path}, ports {', '.join(ports)}", file=log)

    frames = lost = 0
    while True:
        frame, src = sock.recvfrom(MAX_FRAME)
        frames += 1
        if pcap:
            t = time.time()
            sec = int(t)
            pcap.write(struct.pack("<IIII", sec, int((t - sec) * 1e6), len(frame), len(frame)))
            pcap.write(frame)
            pcap.flush()
        for p in ports:
            if p == src:
                continue
            try:
                out.sendto(frame, p)
            except OSError as e:
                lost += 1
                # The first few, then every thousandth: a guest not up yet is normal.
                if lost <= 5 or lost % 1000 == 0:
                    print(f"segment: frame {frames} from {src} to {p} lost ({e}); {lost} lost",
                          file=log)


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        pass
