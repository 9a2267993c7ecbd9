#!/usr/bin/env python3
"""`make bench`'s picture: bandwidth and latency against message size.

    plot.py RESULTS.TSV OUT.PNG [vms]

RESULTS.TSV is qemu-test/bench/perftest.sh's table (test, bytes, device, value, unit), with
qemu-test/bench/roce.sh's rows after it. Without `vms`: the rows of one VM; with it: those
between two machines (ordma to ordma on a clean wire and at 0.1% and 1% loss, ordma to
soft-RoCE, soft-RoCE to soft-RoCE). Left:
each perftest bandwidth test in MiB/s; right: each latency test's median in microseconds
(ibv_rc_pingpong's one point in µs per iteration beside them). One colour per device
(soft-RoCE, ordma on one NIC, ordma between two NICs), one line style per test. Both axes
are logarithmic: sizes go from bytes to MiB and ordma is tens to hundreds of times soft-RoCE.
Runs on the host with matplotlib (scripts/bench.sh provides it).
"""
import csv
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

DEVICES = [("rxe", "soft-RoCE", "tab:gray"), ("lo", "ordma, one NIC", "tab:blue"),
           ("2nics", "ordma, two NICs", "tab:orange")]
VMS_DEVICES = [("rxe-rxe", "soft-RoCE to soft-RoCE", "tab:gray"),
               ("ordma-rxe", "ordma to soft-RoCE", "tab:green"),
               ("vms", "ordma to ordma", "tab:blue"),
               ("vms-0.1", "ordma to ordma, 0.1% loss", "tab:orange"),
               ("vms-1", "ordma to ordma, 1% loss", "tab:red")]
STYLES = {"write": ("-", "o"), "read": ("--", "s"), "send": (":", "^")}


def size_label(n, _pos=None):
    for unit, div in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= div:
            return f"{n / div:g} {unit}"
    return f"{n:g} B"


def main():
    if len(sys.argv) not in (3, 4) or sys.argv[3:] not in ([], ["vms"]):
        sys.exit("usage: plot.py RESULTS.TSV OUT.PNG [vms]")
    vms = sys.argv[3:] == ["vms"]
    devices = VMS_DEVICES if vms else DEVICES
    series = defaultdict(list)  # (test, device, unit) -> [(bytes, value)]
    with open(sys.argv[1], newline="") as f:
        for row in csv.DictReader(f, delimiter="\t"):
            try:
                value = float(row["value"])
            except ValueError:  # "fail": that run gave no number
                continue
            series[(row["test"], row["device"], row["unit"])].append((int(row["bytes"]), value))

    fig, (bw, lat) = plt.subplots(1, 2, figsize=(14, 6))
    for (test, device, unit), points in sorted(series.items()):
        dev = next((d for d in devices if d[0] == device), None)
        if dev is None:
            continue
        points.sort()
        xs, ys = zip(*points)
        verb = next((v for v in STYLES if f"_{v}_" in test), "send")
        line, marker = STYLES[verb]
        if unit == "MiB/s":
            ax = bw
        elif unit in ("us median", "us/iter"):
            ax = lat
        else:
            continue
        if test == "ibv_rc_pingpong":
            line, marker = "none", "*"
        elif test.endswith("-o 1"):  # READs one at a time, beside the full depth
            line, marker = "-.", "x"
        ax.plot(xs, ys, linestyle=line, marker=marker, color=dev[2], label=f"{test}, {dev[1]}",
                markersize=9 if marker == "*" else 5)
    # issue #13's bandwidth targets for 2 MiB writes
    targets = () if vms else ((8.5 * 1024, "target: 8.5 GiB/s, one NIC"), (2 * 1024, "target: 2 GiB/s, two NICs"))
    for mib, text in targets:
        bw.axhline(mib, color="black", linewidth=0.6, linestyle="-.")
        bw.annotate(text, (0.01, mib), xycoords=("axes fraction", "data"), fontsize=7,
                    va="bottom")
    for ax, title, ylabel in ((bw, "bandwidth (perftest, higher is better)", "MiB/s"),
                              (lat, "latency (perftest median; ibv_rc_pingpong per iteration)",
                               "µs")):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(size_label))
        ax.set_xlabel("message size")
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7, ncol=2)
    fig.suptitle("ordma and soft-RoCE between two guests, RoCEv2 by GID (make bench)" if vms else
                 "ordma against soft-RoCE, same VM, same run (make bench)")
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=110)


if __name__ == "__main__":
    main()
