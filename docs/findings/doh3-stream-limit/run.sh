#!/usr/bin/env bash
# DoH/3 against CoreDNS (its stream limit set to 1 000 by dnscost's adapter) on one connection
# with 500, 1 000 and 2 000 queries in flight, three times each; the runs kept beside this script.
# Usage, from anywhere: bash docs/findings/doh3-stream-limit/run.sh [SCRATCH_DIR]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
scratch=${1:-$root/results/doh3-stream-limit}
mkdir -p "$scratch"
for rep in 1 2 3; do
  for n in 500 1000 2000; do
    d=$scratch/if$n-r$rep
    rm -rf "$d"
    timeout 300 "$root/.venv/bin/dnscost" load --target coredns --transport doh3 --connections 1 \
      --in-flight "$n" --rate max --names 1000 --duration 4s --output "$d" | grep -E "qps answered|validity"
    rm -rf "$here/if$n-r$rep"
    "$root/.venv/bin/dnscost" keep "$d" "$here/if$n-r$rep" > /dev/null
  done
done
