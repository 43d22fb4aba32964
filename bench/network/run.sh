#!/usr/bin/env bash
# The measurements behind docs/metering.md ("Where the kernel's work lands"): ROUNDS rounds of
# bench/network/network.toml on each --network set-up, interleaved (the order rotates each
# round) so that noise from other work on the machine falls on every set-up alike; then the
# table. Usage: bash bench/network/run.sh OUT_DIR [ROUNDS]   (OUT_DIR absolute; run as root)
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:?give an absolute output directory}
rounds=${2:-3}
nets=(loopback veth veth-rps)
for ((r = 1; r <= rounds; r++)); do
    for ((k = 0; k < 3; k++)); do
        n=${nets[$(((k + r - 1) % 3))]}
        echo "round $r: $n" >&2
        .venv/bin/dnscost run bench/network/network.toml --network "$n" --no-report --output "$out/r$r-$n"
    done
done
.venv/bin/python bench/network/table.py "$out"/r*-*
