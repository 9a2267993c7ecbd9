#!/usr/bin/env python3
"""Checks the ICRC of every RoCEv2 frame (IPv4, UDP destination port 4791) in a pcap file.

Usage: roce-icrc.py [--min N] FILE.pcap

The ICRC (InfiniBand Architecture Specification, Annex A17, RoCEv2) is the CRC-32 of the
frame from the IP header to the end of the payload and pad, with the fields that may change
on the way masked to ones: 8 bytes of ones first (the masked LRH), the IPv4 header's type of
service, TTL and checksum, the UDP checksum, and the BTH's reserved byte (resv8a, FECN and
BECN). It is sent as the last 4 bytes of the UDP payload, least significant byte first (as
the kernel's soft-RoCE, rdma_rxe, writes and checks it). tshark shows the field but does
not check it.

Prints one line per frame whose ICRC is wrong (at most 10) and a summary; exits 0 when every
RoCEv2 frame's ICRC is right and there are at least --min of them (default 1), 1 otherwise,
2 if the file is not a pcap of Ethernet frames.
"""

import argparse
import struct
import sys
import zlib

ROCE_PORT = 4791
BTH = 12


def frames(path):
    """(index, Ethernet frame) for each record of a pcap file."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 24:
        raise ValueError("shorter than a pcap header")
    magic = struct.unpack_from("<I", data)[0]
    if magic in (0xA1B2C3D4, 0xA1B23C4D):
        e = "<"
    elif magic in (0xD4C3B2A1, 0x4D3CB2A1):
        e = ">"
    else:
        raise ValueError(f"not a pcap file (magic {magic:#x})")
    linktype = struct.unpack_from(e + "I", data, 20)[0]
    if linktype != 1:
        raise ValueError(f"link type {linktype}, not Ethernet (1)")
    off, n = 24, 0
    while off + 16 <= len(data):
        incl = struct.unpack_from(e + "I", data, off + 8)[0]
        n += 1
        yield n, data[off + 16 : off + 16 + incl]
        off += 16 + incl


def roce_icrc(frame):
    """(sent, computed) ICRC of an IPv4 RoCEv2 frame, or None if it is not one."""
    if len(frame) < 14 + 20 + 8 + BTH + 4 or frame[12:14] != b"\x08\x00":
        return None
    ip = frame[14:]
    ihl = (ip[0] & 0x0F) * 4
    if ip[0] >> 4 != 4 or ihl < 20 or ip[9] != 17:
        return None
    total = struct.unpack_from(">H", ip, 2)[0]
    if total > len(ip) or total < ihl + 8 + BTH + 4:
        return None
    ip = bytearray(ip[:total])  # without the Ethernet padding, if any
    if struct.unpack_from(">H", ip, ihl + 2)[0] != ROCE_PORT:
        return None
    sent = struct.unpack_from("<I", ip, total - 4)[0]
    ip[1] = 0xFF  # type of service
    ip[8] = 0xFF  # TTL
    ip[10:12] = b"\xff\xff"  # header checksum
    ip[ihl + 6 : ihl + 8] = b"\xff\xff"  # UDP checksum
    ip[ihl + 8 + 4] = 0xFF  # BTH resv8a
    computed = zlib.crc32(b"\xff" * 8 + bytes(ip[: total - 4])) & 0xFFFFFFFF
    return sent, computed


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--min", type=int, default=1)
    ap.add_argument("pcap")
    a = ap.parse_args()
    good = bad = 0
    try:
        for n, frame in frames(a.pcap):
            r = roce_icrc(frame)
            if r is None:
                continue
            sent, computed = r
            if sent == computed:
                good += 1
            else:
                bad += 1
                if bad <= 10:
                    print(f"frame {n}: ICRC {sent:#010x}, should be {computed:#010x}")
    except (OSError, ValueError) as e:
        print(f"roce-icrc: {a.pcap}: {e}", file=sys.stderr)
        return 2
    print(f"{good + bad} RoCEv2 frames: {good} with a correct ICRC, {bad} wrong")
    return 0 if bad == 0 and good >= a.min else 1


if __name__ == "__main__":
    sys.exit(main())
