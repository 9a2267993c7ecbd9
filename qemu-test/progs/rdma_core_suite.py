#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""rdma-core's own test suite on ordma against soft-RoCE in the same guest.

Usage: rdma_core_suite.py ORDMA_OUT RXE_OUT [--record FILE] [--check-record FILE]

Both files are `run_tests.py --dev DEV -v` outputs (unittest's verbose form: a line
"name (module.Class.name) ... outcome", the outcome on the next line when the test has a
docstring). RXE_OUT may also be a recording of soft-RoCE's results (RECORD_HEADER, then a
line "outcome<TAB>test<TAB>reason" per test), as `make test` compares with: rdma-core and the
kernel are pinned, so soft-RoCE's results are too, and `make test-full` runs soft-RoCE live
and checks the recording against it (--check-record: its outcomes must be the live ones;
--record FILE writes the live ones, to be copied over the recording when they change).
What must hold:
  - no test fails or errs on ordma (test_rdmacm aside: rdma_cm comes with kernel consumers);
  - every test that passes on soft-RoCE passes on ordma (test_rdmacm aside);
  - every test that does not run on ordma is skipped by the test itself, for the reason it
    prints (listed here by reason, with its count);
  - no module crashed on ordma (a "CRASHED: tests.MODULE (exit N)" line the runner adds);
    a module that crashed on soft-RoCE is compared as far as it ran.
Prints the tally ("rdma-core suite: ordma0 P passed, S skipped, ...") and exits 0 when all
of it holds.
"""
import collections
import re
import sys

START = re.compile(r"^(test\w*) \(([\w.]+)\)")
# The outcome ends the test's line, or starts a line of its own when a warning the test
# printed came between.
OUTCOME = re.compile(
    r"(?:^| \.\.\. )(ok|FAIL|ERROR|skipped (.*)|expected failure|unexpected success)$")
# Not compared: rdma_cm needs kernel QPs (QP1), which ordma does not have yet.
EXEMPT = ("tests.test_rdmacm.",)
# Skips allowed where soft-RoCE passes: a capability ordma does not claim (testing.md says
# why), by the reason the test prints.
NOT_CLAIMED = {
    "ODP is not supported": "on-demand paging: ordma pins every MR (ib_umem); no page faults",
}
# Tests soft-RoCE passes that ordma does not yet: work not done, named here so that the step
# fails on anything else, and fails when one of these starts to pass (remove it then).
PENDING = {}


CRASHED = re.compile(r"^CRASHED: (tests\.\w+)")
RECORD_HEADER = "# rdma-core 56.1's suite on soft-RoCE (rxe0), recorded by rdma_core_suite.py --record"


def parse(path):
    """({test id: (outcome, skip reason)}, [crashed modules]) of one verbose run."""
    results = {}
    crashed = []
    pending = None
    with open(path, errors="replace") as f:
        if f.readline().rstrip("\n") == RECORD_HEADER:
            for line in f:
                o, t, reason = (line.rstrip("\n").split("\t") + ["", ""])[:3]
                if o.startswith("crashed-module"):
                    crashed.append(t)
                elif t:
                    results[t] = (o, reason)
            return results, crashed
        f.seek(0)
        for line in f:
            line = line.rstrip("\n")
            c = CRASHED.match(line)
            if c:
                crashed.append(c.group(1))
                if pending is not None:
                    results[pending] = ("crashed", "")
                pending = None
                continue
            m = START.match(line)
            if m:
                pending = m.group(2)
            if pending is None:
                continue
            o = OUTCOME.search(line)
            if o:
                outcome = "skipped" if o.group(1).startswith("skipped") else o.group(1)
                reason = (o.group(2) or "").strip("'\"") if outcome == "skipped" else ""
                results[pending] = (outcome, reason)
                pending = None
    return results, crashed


def tally(name, r):
    c = collections.Counter(o for o, _ in r.values())
    return (f"{name} {c['ok']} passed, {c['skipped']} skipped, "
            f"{c['FAIL'] + c['ERROR'] + c['crashed']} failed of {len(r)}")


def record(path, results, crashed):
    """Writes soft-RoCE's results as a recording (RECORD_HEADER)."""
    with open(path, "w") as f:
        print(RECORD_HEADER, file=f)
        for m in crashed:
            print(f"crashed-module\t{m}\t", file=f)
        for t, (o, reason) in sorted(results.items()):
            print(f"{o}\t{t}\t{reason}", file=f)


def main():
    args = sys.argv[1:]
    opts = {}
    while len(args) > 2 and args[-2] in ("--record", "--check-record"):
        opts[args[-2]] = args[-1]
        args = args[:-2]
    if len(args) != 2:
        print(__doc__)
        return 2
    (ordma, ordma_crashed), (rxe, rxe_crashed) = parse(args[0]), parse(args[1])
    if not ordma or not rxe:
        print(f"FAIL: no test results parsed (ordma0 {len(ordma)}, rxe0 {len(rxe)})")
        return 1
    bad = [f"{m} crashed on ordma0" for m in ordma_crashed]
    if "--record" in opts:
        record(opts["--record"], rxe, rxe_crashed)
    if "--check-record" in opts:
        rec, rec_crashed = parse(opts["--check-record"])
        live = {t: o for t, (o, _) in rxe.items()}
        was = {t: o for t, (o, _) in rec.items()}
        diff = sorted(t for t in set(live) | set(was) if live.get(t) != was.get(t))
        for t in diff[:20]:
            bad.append(f"{t}: {was.get(t, 'absent')} in the recording, {live.get(t, 'absent')} on rxe0 now")
        if diff or sorted(rec_crashed) != sorted(rxe_crashed):
            bad.append(f"the recording of soft-RoCE's results ({opts['--check-record']}) is not what rxe0 "
                       f"does now ({len(diff)} tests differ; crashed {rec_crashed} then, {rxe_crashed} now): "
                       f"copy {opts.get('--record', 'the --record file')} over it")
    for t, (o, _) in sorted(ordma.items()):
        if t.startswith(EXEMPT):
            continue
        if o in ("FAIL", "ERROR", "unexpected success", "crashed"):
            bad.append(f"{t}: {o} on ordma0")
    pending, not_claimed = [], []
    for t, (o, _) in sorted(rxe.items()):
        if o != "ok" or t.startswith(EXEMPT):
            continue
        mine = ordma.get(t, ("not run", ""))
        why = next((w for r, w in NOT_CLAIMED.items() if mine[1].startswith(r)), None)
        if mine[0] == "ok":
            continue
        if mine[0] == "skipped" and t in PENDING:
            pending.append(f"{t}: {PENDING[t]} ({mine[1]})")
        elif mine[0] == "skipped" and why:
            not_claimed.append(f"{t}: {why}")
        else:
            bad.append(f"{t}: passes on rxe0, {mine[0]} on ordma0 {mine[1]}".rstrip())
    for t in sorted(PENDING):
        if ordma.get(t, ("", ""))[0] == "ok":
            bad.append(f"{t}: passes on ordma0 now: take it off PENDING")
    reasons = collections.Counter(r for o, r in ordma.values() if o == "skipped")
    print("----- tests skipped on ordma0, by the reason the test gives:")
    for reason, n in reasons.most_common():
        print(f"  {n:3d}  {reason}")
    exempt = sorted(t for t in ordma if t.startswith(EXEMPT))
    print(f"----- not compared (rdma_cm, kernel QPs): {len(exempt)} tests of test_rdmacm")
    print(f"----- passing on rxe0, skipped on ordma0 for a capability it does not claim: {len(not_claimed)}")
    for line in not_claimed:
        print(f"  {line}")
    print(f"----- passing on rxe0, skipped on ordma0, pending work: {len(pending)}")
    for line in pending:
        print(f"  {line}")
    for m in rxe_crashed:
        print(f"----- {m} crashed on rxe0: compared as far as it ran")
    for line in bad:
        print(f"FAIL: {line}")
    compared = {t: r for t, r in ordma.items() if not t.startswith(EXEMPT)}
    print(f"rdma-core suite: {tally('ordma0', compared)}, {len(pending)} pending; "
          f"{tally('rxe0', rxe)} (test_rdmacm not compared)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
