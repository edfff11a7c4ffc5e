# Sourced by scripts whose arguments are all numbers: `--help` prints the script's header comment
# (from line 2 to `set -euo`), any other argument that is not a number is refused with exit 2.
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
case "${1:-}" in -h|--help) usage; exit 0 ;; esac
for a in "$@"; do
  [[ $a =~ ^[0-9]+(\.[0-9]+)?$ ]] || { echo "$(basename "$0"): not a number: $a" >&2; usage >&2; exit 2; }
done
