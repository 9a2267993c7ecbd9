#!/usr/bin/env python3
"""Kills a NIC model (SIGKILL) without making its guest's QEMU abort.

A killed process's sockets close with what it had not read still queued, and a Unix
stream socket closed that way makes its peer's next read fail with ECONNRESET. QEMU 10.2
and later (11.1 here) abort on that read in their vfio-user client: vfio_user_recv_hdr()
sets the Error that qio_channel_readv_full() has already set ("util/error.c: error_setv:
Assertion `*errp == NULL' failed"). An end of file instead is handled: QEMU logs "failed
to read header: EOF", stops reading that socket and fails the device's accesses from then
on, which is what a dead NIC should look like to the guest. So, as a supervisor holding
the model's connection would:

1. take a copy of the model's end of its vfio-user connection (pidfd_getfd(2): the socket
   in the model's descriptors whose address, in /proc/net/unix, is the model's --socket),
2. SIGKILL the model: it dies at once, as it would have; the copy keeps the socket open,
3. shut the copy's sending side: QEMU reads an end of file and stops reading,
4. read and discard what QEMU still sends, for a second, then close the copy (QEMU's
   writes fail from then on; the reset that close makes is never read).

Without the copy (no such socket, no permission), it is a plain SIGKILL, with a warning.

Usage: kill-model.py PID SOCKET_PATH
"""

import ctypes
import os
import select
import signal
import socket
import sys
import time

SYS_PIDFD_GETFD = 438  # x86_64 and the generic table alike


def connection_inodes(path: str) -> set[str]:
    """The inodes of the connected Unix sockets bound to `path` (an accepted connection
    carries its listener's address)."""
    inodes = set()
    with open("/proc/net/unix", encoding="utf-8", errors="replace") as f:
        next(f, None)
        for line in f:
            cols = line.split()
            # Num RefCount Protocol Flags Type St Inode [Path]; St 03: connected.
            if len(cols) >= 8 and cols[7] == path and cols[5] == "03":
                inodes.add(cols[6])
    return inodes


def grab(pid: int, path: str) -> socket.socket | None:
    """A copy of the model's end of its vfio-user connection, or None."""
    inodes = connection_inodes(path)
    libc = ctypes.CDLL(None, use_errno=True)
    pidfd = os.pidfd_open(pid)
    try:
        for name in os.listdir(f"/proc/{pid}/fd"):
            try:
                link = os.readlink(f"/proc/{pid}/fd/{name}")
            except OSError:
                continue
            if link.startswith("socket:[") and link[8:-1] in inodes:
                fd = libc.syscall(SYS_PIDFD_GETFD, pidfd, int(name), 0)
                if fd < 0:
                    err = ctypes.get_errno()
                    print(f"kill-model: pidfd_getfd: {os.strerror(err)}", file=sys.stderr)
                    return None
                return socket.socket(fileno=fd)
    finally:
        os.close(pidfd)
    return None


def main() -> int:
    if len(sys.argv) != 3:
        print(__doc__.rsplit("Usage: ", 1)[1], file=sys.stderr, end="")
        return 2
    pid, path = int(sys.argv[1]), sys.argv[2]
    try:
        conn = grab(pid, path)
    except OSError as e:
        print(f"kill-model: {e}", file=sys.stderr)
        conn = None
    if conn is None:
        print(f"kill-model: no copy of model {pid}'s connection on {path}: a plain SIGKILL "
              "(QEMU may abort on the reset)", file=sys.stderr)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    if conn is None:
        return 0
    conn.shutdown(socket.SHUT_WR)
    end = time.monotonic() + 1.0
    while (left := end - time.monotonic()) > 0:
        ready, _, _ = select.select([conn], [], [], left)
        if ready:
            try:
                if not conn.recv(65536):
                    break
            except OSError:
                break
    conn.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
