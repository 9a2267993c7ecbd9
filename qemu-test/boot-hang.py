#!/usr/bin/env python3
"""Where a guest that does not boot is stuck: qemu-test/vm-inner.sh's boot watchdog.

    boot-hang.py MONITOR_SOCKET SYSTEM_MAP

Asks QEMU's human monitor (a Unix socket) for every vCPU's registers, twice a second apart,
and prints them with the kernel symbol each RIP is in (from System.map; the guest boots
with nokaslr, so the addresses are the link-time ones). Two samples tell a loop (the same
function both times) from progress.
"""
import bisect
import re
import socket
import sys
import time


def monitor(path, command, timeout=10.0):
    """One HMP command's output."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    s.connect(path)
    buf = b""

    def until_prompt():
        nonlocal buf
        while b"(qemu) " not in buf:
            chunk = s.recv(65536)
            if not chunk:
                break
            buf += chunk
        out, _, buf = buf.partition(b"(qemu) ")
        return out

    until_prompt()  # the banner
    s.sendall(command.encode() + b"\n")
    out = until_prompt().decode(errors="replace")
    s.close()
    # The monitor echoes the command (with terminal escapes) first.
    return "\n".join(l for l in out.splitlines() if command not in l)


def load_symbols(path):
    addrs, names = [], []
    with open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) == 3 and parts[1] in "tTwW":
                addrs.append(int(parts[0], 16))
                names.append(parts[2])
    order = sorted(range(len(addrs)), key=addrs.__getitem__)
    return [addrs[i] for i in order], [names[i] for i in order]


def symbol(addrs, names, rip):
    i = bisect.bisect_right(addrs, rip) - 1
    if i < 0:
        return "?"
    return f"{names[i]}+{rip - addrs[i]:#x}"


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: boot-hang.py MONITOR_SOCKET SYSTEM_MAP")
    sock, system_map = sys.argv[1:]
    try:
        addrs, names = load_symbols(system_map)
    except OSError as e:
        print(f"no symbols ({e})")
        addrs, names = [], []
    for sample in (1, 2):
        print(f"== sample {sample}: info registers -a")
        regs = monitor(sock, "info registers -a")
        cpu = None
        for line in regs.splitlines():
            m = re.match(r"\s*CPU#(\d+)", line)
            if m:
                cpu = m.group(1)
            m = re.search(r"RIP=([0-9a-f]+)", line)
            if m:
                rip = int(m.group(1), 16)
                print(f"CPU#{cpu} RIP {rip:#x} in {symbol(addrs, names, rip)}")
        print(regs)
        if sample == 1:
            time.sleep(1)


if __name__ == "__main__":
    main()
