#!/usr/bin/env bash
# compare's false-positive and detection rates on this machine (issue 29). For each of PAIRS pairs,
# nine `punctual latency` runs interleaved A B C A B C A B C: A and B quiet, C under an injected load
# (LOAD, chosen to raise p99 by about 10 %). Then, per pair: single runs (A1 vs B1: any verdict is
# a false positive; A1 vs C1: a regression is a detection) and 3-run sets (A1 A2 A3 -- B1 B2 B3 and
# A1 A2 A3 -- C1 C2 C3). Prints one line per comparison and the rates; every document stays in DIR
# with each run's steal and other processes' CPU time (settings.steal_ns, others_cpu_ns). Before
# and after: the load average and the busiest other processes, so the figures say what else ran.
# Usage: [PAIRS=10] [SECS=5] [LOAD=mem:1] scripts/bench-compare.sh [PUNCTUAL] [DIR]
set -euo pipefail
P=$(realpath "${1:-target/release/punctual}")
DIR=${2:-$(mktemp -d)}
PAIRS=${PAIRS:-10}
SECS=${SECS:-5}
LOAD=${LOAD:-mem:1}
mkdir -p "$DIR"
machine() {
    echo "# $(date -u +%FT%TZ) load average: $(cut -d' ' -f1-3 /proc/loadavg)"
    ps -eo pcpu,comm --sort=-pcpu --no-headers | head -5 | sed 's/^/#   /'
}
machine
for i in $(seq 1 "$PAIRS"); do
    for k in 1 2 3; do
        for side in a b c; do
            extra=()
            [ "$side" = c ] && extra=(--load "$LOAD")
            "$P" latency -D "${SECS}s" -i 1ms --no-store "${extra[@]}" \
                --json "$DIR/$side$i-$k.json" >/dev/null 2>&1
        done
    done
done
machine
verdicts() { # compare's verdict per series, from its JSON: "regression no_significant_change ..."
    "$P" compare "$@" --json - 2>/dev/null |
        python3 -c 'import json,sys; c=json.load(sys.stdin); print(" ".join(a["verdict"] for s in c["series"] for a in s["against"]))'
}
python3 - "$DIR" "$PAIRS" <<'PY' >"$DIR/taken.txt"
import json, sys, math, glob
d, pairs = sys.argv[1], int(sys.argv[2])
for side in "abc":
    p99, steal, others = [], [], []
    for f in sorted(glob.glob(f"{d}/{side}*-*.json")):
        doc = json.load(open(f))
        s = {x["name"]: x for x in doc["series"]}
        p99.append(s["total"]["percentiles"]["99"])
        x = doc["settings"]
        w = x.get("steal_window_ns", 1)
        steal.append(sum(x.get("steal_ns", {}).values()) / (w * len(x.get("steal_ns", {"0": 0}))))
        others.append(x.get("others_cpu_ns", 0) / (w * doc["host"]["cpus"]))
    gm = math.exp(sum(map(math.log, p99)) / len(p99))
    print(f"side {side}: {len(p99)} runs, total p99 geometric mean {gm/1000:.1f} us "
          f"(runs {min(p99)/1000:.1f}-{max(p99)/1000:.1f} us), steal {100*sum(steal)/len(steal):.2f} % "
          f"(max {100*max(steal):.2f} %), other processes {100*sum(others)/len(others):.0f} % of the CPUs "
          f"(max {100*max(others):.0f} %)")
PY
cat "$DIR/taken.txt"
fp1=0; det1=0; fp3=0; det3=0
for i in $(seq 1 "$PAIRS"); do
    s_fp=$(verdicts "$DIR/a$i-1.json" "$DIR/b$i-1.json")
    s_det=$(verdicts "$DIR/a$i-1.json" "$DIR/c$i-1.json")
    r_fp=$(verdicts "$DIR/a$i-1.json" "$DIR/a$i-2.json" "$DIR/a$i-3.json" -- "$DIR/b$i-1.json" "$DIR/b$i-2.json" "$DIR/b$i-3.json")
    r_det=$(verdicts "$DIR/a$i-1.json" "$DIR/a$i-2.json" "$DIR/a$i-3.json" -- "$DIR/c$i-1.json" "$DIR/c$i-2.json" "$DIR/c$i-3.json")
    echo "pair $i: single quiet [$s_fp] loaded [$s_det]; 3-run quiet [$r_fp] loaded [$r_det]"
    [[ "$s_fp" =~ (regression|improvement) ]] && fp1=$((fp1 + 1))
    [[ "$s_det" =~ regression ]] && det1=$((det1 + 1))
    [[ "$r_fp" =~ (regression|improvement) ]] && fp3=$((fp3 + 1))
    [[ "$r_det" =~ regression ]] && det3=$((det3 + 1))
done
echo "single runs: false positives $fp1/$PAIRS, detections $det1/$PAIRS"
echo "3-run sets:  false positives $fp3/$PAIRS, detections $det3/$PAIRS"
echo "documents in $DIR"
