#!/bin/bash
# Compare two NIC models under the same guest, driver and provider: the model of REV (a git
# revision, built in the build root) against this tree's (`make`), ROUNDS times each,
# alternating (A B A B ...) so that a change in the machine's load hits both alike. Each run
# boots a guest with two NICs and runs qemu-test/bench/ab-guest.sh (loopback bandwidth and
# latency, ibv_rc_pingpong, READs between the NICs with 1 and 16 outstanding).
#
# Usage: scripts/bench-ab.sh REV [ROUNDS]   (ROUNDS default 3)
# Results: bench-results/ab-<time>/: each run's folder, all.tsv, and summary.md (the median
# of each model per row, and B/A: above 1 is this tree faster, for latency too).
# A benchmark, not a test: it fails only if a build or a VM fails.
source "$(dirname "$0")/lib.sh"
need_root_user
REV=${1:?usage: scripts/bench-ab.sh REV [ROUNDS]}
ROUNDS=${2:-3}
SHA=$(git -C "$ORDMA_SRC" rev-parse --verify "$REV^{commit}") || die "no revision $REV"
R=$ORDMA_SRC/bench-results/ab-$(date +%Y%m%d-%H%M%S)
mkdir -p "$R"
log "results: $R"

# A: REV's model, built in the root from a detached work tree, with a target dir of its own.
AB=$ORDMA_CACHE/ab
A=$AB/ordma-model-${SHA:0:12}
if [ ! -x "$A" ]; then
	mkdir -p "$AB"
	WT=$AB/src-${SHA:0:12}
	[ -d "$WT" ] || git -C "$ORDMA_SRC" worktree add --detach "$WT" "$SHA" >/dev/null ||
		die "cannot check out $REV"
	log "building the model of ${SHA:0:12} (ORDMA_STATE=$AB/state)"
	ORDMA_STATE=$AB/state "$WT/scripts/in-root" -- bash -c 'cd /ordma/src &&
		cargo build --release -p ordma-model && cp /ordma/cache/target/release/ordma-model /ordma/cache/' ||
		die "the model of $REV did not build"
	cp "$AB/state/ordma-model" "$A.tmp" && mv "$A.tmp" "$A"
	git -C "$ORDMA_SRC" worktree remove --force "$WT" || true
fi
# B: this tree's, with everything else the guest runs (module, provider).
log "building this tree (make)"
make -C "$ORDMA_SRC" all >"$R/make.log" 2>&1 || die "make failed (see $R/make.log)"
B=$R/ordma-model-this
cp "$(target_dir)/release/ordma-model" "$B"

printf 'model\tround\ttest\tbytes\twhere\tvalue\tunit\n' >"$R/all.tsv"
for ((i = 1; i <= ROUNDS; i++)); do
	for m in A B; do
		bin=$A
		[ $m = A ] || bin=$B
		log "round $i/$ROUNDS, model $m"
		ORDMA_NO_BUILD=1 "$ORDMA_SRC/qemu-test/run" --nics 2 --timeout 900 --model "$bin" \
			--results "$R/$m-$i" -- bash /ordma/src/qemu-test/bench/ab-guest.sh >/dev/null ||
			die "the VM of round $i, model $m, failed (see $R/$m-$i)"
		awk -F'\t' -v m=$m -v i=$i '{ print m "\t" i "\t" $0 }' "$R/$m-$i/ab.tsv" >>"$R/all.tsv"
	done
done

# One row per test: each model's median over the rounds, and B/A (latency: A/B).
{
	echo "# Model A/B: A = ${SHA:0:12} ($REV), B = this tree ($(git -C "$ORDMA_SRC" rev-parse --short HEAD)$(git -C "$ORDMA_SRC" diff --quiet HEAD -- rtl || echo ', with changes')), $ROUNDS rounds each, medians"
	echo
	echo "| test | bytes | where | A | B | unit | B vs A |"
	echo "|---|---|---|---|---|---|---|"
	awk -F'\t' '
	NR == 1 { next }
	{ k = $3 "\t" $4 "\t" $5 "\t" $7; if (!(k in seen)) { seen[k] = 1; order[n++] = k }
	  if ($6 != "fail") { v[k, $1, ++c[k, $1]] = $6 } }
	function median(k, m,   i, j, t, a, cnt) {
		cnt = c[k, m]; if (!cnt) return "fail"
		for (i = 1; i <= cnt; i++) a[i] = v[k, m, i]
		for (i = 1; i <= cnt; i++) for (j = i + 1; j <= cnt; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
		return cnt % 2 ? a[(cnt + 1) / 2] : (a[cnt / 2] + a[cnt / 2 + 1]) / 2
	}
	END {
		for (i = 0; i < n; i++) {
			k = order[i]; split(k, t, "\t"); a = median(k, "A"); b = median(k, "B")
			r = (a == "fail" || b == "fail" || a + 0 == 0 || b + 0 == 0) ? "-" : sprintf("%.2f×", t[4] == "MiB/s" ? b / a : a / b)
			printf "| %s | %s | %s | %s | %s | %s | %s |\n", t[1], t[2], t[3], a, b, t[4], r
		}
	}' "$R/all.tsv"
} >"$R/summary.md"
cat "$R/summary.md"
log "summary: $R/summary.md"
