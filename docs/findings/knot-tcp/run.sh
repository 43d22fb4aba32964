#!/usr/bin/env bash
# knot-resolver: plain TCP against DoT at 1 000 persistent connections, three versions, then perf.
set -u
cd /work/main
export DNSCOST_ROOTS=/work/roots
out=/work/runs/ktcp
common=(--connections 1000 --lifetime forever --rate max --in-flight 1 --open-first --open-rate 50000 --warmup 2s --timeout 2s --names 5000)
if [[ "${1:-}" == compare ]]; then
  for rep in 1 2; do
    for t in knot-resolver knot-resolver@trixie knot-resolver@sid; do
      for tr in tcp dot; do
        d=$out/cmp-$rep-${t/@/-}-$tr; rm -rf "$d"
        timeout 300 .venv/bin/dnscost load --target "$t" --transport "$tr" "${common[@]}" --duration 4s --output "$d" 2>&1 | grep -E "qps answered|target CPU|INVALID|latency" | sed "s|^|$rep $t $tr: |"
      done
    done
  done
fi
if [[ "${1:-}" == perf ]]; then
  t=${2:-knot-resolver}
  for tr in tcp dot; do
    d=$out/perf-${t/@/-}-$tr; rm -rf "$d"
    timeout 300 .venv/bin/dnscost load --target "$t" --transport "$tr" "${common[@]}" --duration 10s --output "$d" > "$d.log" 2>&1 &
    pid=$!
    for i in $(seq 600); do compgen -G "$d/trials/*/engine.jsonl" > /dev/null && break; sleep 0.1; done
    sleep 4
    perf record -C 0 -g -F 999 -o "$d.perf.data" -- sleep 3 2> /dev/null
    wait $pid
    grep -E "qps answered|target CPU" "$d.log"
    perf report -i "$d.perf.data" --no-children --sort comm,dso,sym --stdio 2>/dev/null | grep -v "^#" | grep -v "^$" | grep "%" | head -40 > "$d.top.txt"
    perf report -i "$d.perf.data" --no-children --sort comm,dso --stdio 2>/dev/null | grep "%" | head -12 > "$d.dso.txt"
  done
fi
if [[ "${1:-}" == stat ]]; then
  t=${2:-knot-resolver}
  for tr in tcp dot; do
    d=$out/stat-${t/@/-}-$tr; rm -rf "$d"
    timeout 300 .venv/bin/dnscost load --target "$t" --transport "$tr" "${common[@]}" --duration 10s --output "$d" > "$d.log" 2>&1 &
    pid=$!
    for i in $(seq 600); do compgen -G "$d/trials/*/engine.jsonl" > /dev/null && break; sleep 0.1; done
    sleep 4
    perf stat -C 0 -e page-faults,syscalls:sys_enter_mmap,syscalls:sys_enter_munmap,syscalls:sys_enter_madvise,syscalls:sys_enter_brk,syscalls:sys_enter_read,syscalls:sys_enter_readv,syscalls:sys_enter_recvfrom,syscalls:sys_enter_recvmsg,syscalls:sys_enter_write,syscalls:sys_enter_writev,syscalls:sys_enter_sendmsg,syscalls:sys_enter_epoll_wait,syscalls:sys_enter_epoll_ctl -o "$d.stat.txt" -- sleep 3
    wait $pid
    grep -E "qps answered|target CPU" "$d.log"
  done
fi
