#!/usr/bin/env bash
# compare's false-positive and detection rates on this machine (issue 29). For each of PAIRS pairs,
# nine `punctual latency` runs interleaved A B C A B C A B C: A and B quiet, C under an injected load
# (LOAD). A fourth side D is B with every sample 10 % later (scale_result: an exact 10 % regression
# on top of real run-to-run noise). Then, per pair: single runs (A1 vs B1: any verdict is a false
# positive; A1 vs C1 and A1 vs D1: a regression is a detection) and 3-run sets (A1 A2 A3 -- B1 B2
# B3, -- C1 C2 C3, -- D1 D2 D3). Prints one line per comparison and the rates; every document stays
# in DIR with each run's steal and other processes' CPU time (settings.steal_ns, others_cpu_ns).
# Before and after: the load average and the busiest other processes (what else ran).
# Usage: [PAIRS=10] [SECS=5] [LOAD=mem:1] scripts/bench-compare.sh [PUNCTUAL] [DIR]
# (needs `cargo build --release -p punctual-report --example scale_result`; SCALE names it)
set -euo pipefail
P=$(realpath "${1:-target/release/punctual}")
DIR=${2:-$(mktemp -d)}
PAIRS=${PAIRS:-10}
SECS=${SECS:-5}
LOAD=${LOAD:-mem:1}
SCALE=$(realpath "${SCALE:-target/release/examples/scale_result}")
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
for f in "$DIR"/b*-*.json; do
    "$SCALE" 1.10 <"$f" >"$DIR/d${f##*/b}"
done
verdicts() { # compare's verdict per series, from its JSON: "regression no_significant_change ..."
    "$P" compare --json - "$@" 2>/dev/null |
        python3 -c 'import json,sys; c=json.load(sys.stdin); print(" ".join(a["verdict"] for s in c["series"] for a in s["against"]))'
}
python3 - "$DIR" "$PAIRS" <<'PY' >"$DIR/taken.txt"
import json, sys, math, glob
d, pairs = sys.argv[1], int(sys.argv[2])
for side in "abcd":
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
declare -A n
count() { [[ "$2" =~ $3 ]] && n[$1]=$(( ${n[$1]:-0} + 1 )); true; }
for i in $(seq 1 "$PAIRS"); do
    set3() { echo "$DIR/$1$i-1.json" "$DIR/$1$i-2.json" "$DIR/$1$i-3.json"; }
    # shellcheck disable=SC2046
    {
        s_b=$(verdicts "$DIR/a$i-1.json" "$DIR/b$i-1.json")
        s_c=$(verdicts "$DIR/a$i-1.json" "$DIR/c$i-1.json")
        s_d=$(verdicts "$DIR/a$i-1.json" "$DIR/d$i-1.json")
        r_b=$(verdicts $(set3 a) -- $(set3 b))
        r_c=$(verdicts $(set3 a) -- $(set3 c))
        r_d=$(verdicts $(set3 a) -- $(set3 d))
    }
    echo "pair $i: single B [$s_b] C [$s_c] D [$s_d]; 3-run B [$r_b] C [$r_c] D [$r_d]"
    count s_fp "$s_b" "regression|improvement"; count r_fp "$r_b" "regression|improvement"
    count s_c "$s_c" regression; count r_c "$r_c" regression
    count s_d "$s_d" regression; count r_d "$r_d" regression
done
echo "verdicts per series: thread 0, thread 1, total; a comparison counts once when any series is flagged"
echo "single runs: false positives (A vs B) ${n[s_fp]:-0}/$PAIRS; regressions seen: load (A vs C) ${n[s_c]:-0}/$PAIRS, exact +10 % (A vs D) ${n[s_d]:-0}/$PAIRS"
echo "3-run sets:  false positives (A vs B) ${n[r_fp]:-0}/$PAIRS; regressions seen: load (A vs C) ${n[r_c]:-0}/$PAIRS, exact +10 % (A vs D) ${n[r_d]:-0}/$PAIRS"
echo "documents in $DIR"
