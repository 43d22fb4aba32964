#!/usr/bin/env bash
# knot-resolver: plain TCP against DoT at 1 000 persistent connections, three versions, then perf.
# Usage, from anywhere (the roots of trixie and sid made by `dnscost target prepare`, in
# DNSCOST_ROOTS or beside the results):
#   bash docs/findings/knot-tcp/run.sh compare          both transports, three versions, twice
#   bash docs/findings/knot-tcp/run.sh perf [TARGET]    perf record on the target's core for 3 s
#   bash docs/findings/knot-tcp/run.sh stat [TARGET]    perf stat (page faults, syscalls) for 3 s
# Runs go to $OUT (default results/knot-tcp under the repository).
set -u
root=$(cd "$(dirname "$0")/../../.." && pwd)
cd "$root"
out=${OUT:-$root/results/knot-tcp}
mkdir -p "$out"
common=(--connections 1000 --lifetime forever --rate max --in-flight 1 --open-first --open-rate 50000 --warmup 2s --timeout 2s --names 5000)
events=page-faults,syscalls:sys_enter_mmap,syscalls:sys_enter_munmap,syscalls:sys_enter_madvise,syscalls:sys_enter_brk
events+=,syscalls:sys_enter_read,syscalls:sys_enter_readv,syscalls:sys_enter_recvfrom,syscalls:sys_enter_recvmsg
events+=,syscalls:sys_enter_write,syscalls:sys_enter_writev,syscalls:sys_enter_sendmsg,syscalls:sys_enter_epoll_wait
events+=,syscalls:sys_enter_epoll_ctl

# profiled KIND TARGET TRANSPORT: a 10 s load of TARGET, and 4 s into its measured period the
# profiler KIND (record or stat) on the target's core (CPU 0) for 3 s.
profiled() {
  local kind=$1 t=$2 tr=$3 d pid
  d=$out/$kind-${t/@/-}-$tr
  rm -rf "$d"
  timeout 300 .venv/bin/dnscost load --target "$t" --transport "$tr" "${common[@]}" --duration 10s --output "$d" > "$d.log" 2>&1 &
  pid=$!
  for _ in $(seq 600); do compgen -G "$d/trials/*/engine.jsonl" > /dev/null && break; sleep 0.1; done
  sleep 4
  if [[ $kind == perf ]]; then
    perf record -C 0 -g -F 999 -o "$d.perf.data" -- sleep 3 2> /dev/null
  else
    perf stat -C 0 -e "$events" -o "$d.stat.txt" -- sleep 3
  fi
  wait $pid
  grep -E "qps answered|target CPU" "$d.log"
  if [[ $kind == perf ]]; then
    perf report -i "$d.perf.data" --no-children --sort comm,dso,sym --stdio 2> /dev/null | grep -v "^#" | grep "%" | head -40 > "$d.top.txt"
    perf report -i "$d.perf.data" --no-children --sort comm,dso --stdio 2> /dev/null | grep "%" | head -12 > "$d.dso.txt"
  fi
}

case "${1:-}" in
  compare)
    for rep in 1 2; do
      for t in knot-resolver knot-resolver@trixie knot-resolver@sid; do
        for tr in tcp dot; do
          d=$out/cmp-$rep-${t/@/-}-$tr
          rm -rf "$d"
          timeout 300 .venv/bin/dnscost load --target "$t" --transport "$tr" "${common[@]}" --duration 4s --output "$d" 2>&1 | grep -E "qps answered|target CPU|INVALID|latency" | sed "s|^|$rep $t $tr: |"
        done
      done
    done
    ;;
  perf | stat)
    for tr in tcp dot; do profiled "$1" "${2:-knot-resolver}" "$tr"; done
    ;;
  *)
    echo "usage: $0 compare | perf [TARGET] | stat [TARGET]" >&2
    exit 2
    ;;
esac
