"""When a trial counts: every validity threshold and flag, defined once (``docs/results.md``,
"Validity", lists them). Pure: measurement (``trial_summary``) and analysis both use it.

A trial is valid when it has no flag. Each flag names one condition:

==================  ====================================================================
flag                the trial is invalid because
==================  ====================================================================
generator-bound     the generator, not the target, was the bottleneck: it fell behind its
                    schedule (offered more than ``MAX_LOSS`` off scheduled, below, or above
                    when a backlog from before the window was sent in it; with Poisson
                    arrivals, more than ``POISSON_SIGMAS`` standard deviations of their count
                    too) or its own cores
                    were at least
                    ``SATURATED`` busy, while the target's cores were not
loss                ``loss`` (1 - answered/offered; in a closed loop, queries still in
                    flight as the window ends are not lost) ≥ ``MAX_LOSS``
listen-overflow     the kernel dropped connection attempts to the target because its
                    listener's accept queue was full (``ListenOverflows`` in its network
                    namespace, in the window) on at least ``MAX_LOSS`` of the connections
                    the engine opened, and the target was not saturated: a dropped SYN
                    waits a second for its retransmission, so the listen queue, not the
                    target, set the pace (a saturated target that cannot accept every
                    connection offered is a result, and the trial stands)
unbalanced          the engine's accounting does not balance (a query neither answered,
                    timed out, failed nor aborted)
cold-cache          the target's own counters show a cache-hit ratio < ``MIN_CACHE_HITS``
                    (trials that fill the cache: not the memory trials)
answer-mismatch     engine and target answer counts differ by more than
                    1 - ``MIN_ANSWER_AGREEMENT``
class-mismatch      a population's trial: on one transport, the engine's answers (of the
                    classes on it) and the target's own count of queries on it differ by
                    more than 1 - ``MIN_ANSWER_AGREEMENT`` (targets that count per
                    transport: ``Target.transport_counters``)
connections-short   persistent connections: fewer than ``MIN_CONNECTIONS`` of those asked
                    for were open on average
no-cpu-data         the target's CPU time was not metered in the window (never taken as 0)
cpu-unresolved      load trials: the target's CPU time came from clock ticks (``/proc``'s
                    per-process times, counted in ``USER_HZ`` ticks of 10 ms, and no cgroup
                    total) and was below ``MIN_CPU_TICKS`` ticks in the window: the meter
                    cannot resolve it (a server at 100 qps reads 0), so its CPU per query,
                    and the energy modelled from it, are not measured
no-generator-cpu    the generator's CPU time was not metered in the window
no-counters         the target keeps counters, but they could not be read
meter-gaps          fewer than ``MIN_SAMPLES`` of the meter's samples expected in the window
target-core-shared  load trials: the target's cores were busy with work not charged to the
                    target (their busy time less its CPU time) at least ``MAX_FOREIGN`` of
                    the window: another process ran there, so the target's CPU per query
                    and throughput are not its own
cores-stolen        load trials: the hypervisor ran other machines on the target's cores
                    (their steal time, ``/proc/stat``) at least ``MAX_STOLEN`` of the
                    window: the target could not run then, so its throughput, latency and
                    batching (and with it its CPU per query) were the host's, not its own
==================  ====================================================================

Checks a trial could not run are named in its ``validity.unchecked`` (:data:`UNCHECKED`); they
leave it valid, since nothing was found wrong, but say what was not verified:

==================  ====================================================================
unchecked           why
==================  ====================================================================
answer-count        the target keeps no counters dnscost reads (an external target): the
                    engine's answers are not compared with the target's
cache-hits          same: the cache was filled (twice) but its hit ratio not measured
fresh-target        a trial that wants a target of its own (idle trials, no fill) ran on
                    the external target as it was: dnscost cannot restart it
==================  ====================================================================

Consistency flags (:data:`CONSISTENCY_FLAGS`) are raised by the analysis across trials
(:mod:`dnscost.analysis.consistency`), on every trial of both cells that contradict each other
beyond their intervals. They leave the trials valid, since a contradiction does not say which
cell is wrong; the report and ``dnscost report`` name both cells:

=======================  ===============================================================
flag                     the cell contradicts another because
=======================  ===============================================================
inconsistent-lifetime    connections with a shorter lifetime cost less target CPU per query
                         than with a longer one (same target, transport, resumption, key)
inconsistent-resumption  resumed handshakes cost more target CPU per query than full ones
                         (same target, transport, lifetime, key; in the cost model's
                         one-query cells, the same rate), 0-RTT more than the same
                         resumption without it, or a resumed handshake more target CPU than
                         a full one
inconsistent-layering    a transport costs more target CPU per query than one that carries
                         the same queries over it plus more: plain TCP than DoT or DoH (TCP
                         plus TLS), DoT than DoH (plus HTTP/2), DoQ than DoH/3 (plus
                         HTTP/3) (same target, lifetime, connections, rate)
inconsistent-handshakes  TLS or QUIC connections established in the window with no
                         handshake counted (full or resumed), more than
                         ``MAX_NEW_CONNECTIONS`` of them in every round: the cell's handshake
                         counts are short
inconsistent-memory      memory per connection (user + kernel) falls as connections grow
negative-memory          memory per connection (user or kernel, fitted) is below zero
memory-below-kernel      memory per connection (user + kernel, fitted) is below the
                         target's own TCP socket buffers per connection (fitted)
=======================  ===============================================================

A paired comparison's interval is the min and max of its per-round ratios (two rounds or
more: the contradiction holds in every round when the interval lies beyond 1), or the single
ratio ± ``ONE_ROUND_SPREAD``; a memory comparison's, the fits' 95 % intervals, or each point
± ``ONE_ROUND_SPREAD`` (one trial per point). The ``consistency`` table gives each
contradiction's ``margin``: how far its interval lies beyond the bound.

The analysis also invalidates single trials for what their own counts show
(:data:`ANALYSIS_FLAGS`):

==================  ====================================================================
flag                the trial is invalid because
==================  ====================================================================
not-persistent      a trial with persistent connections (lifetime ``forever``) opened more
                    than ``MAX_NEW_CONNECTIONS`` of its connections again in its window,
                    by the engine's count or, over TCP, by the kernel's (connections its
                    network namespace accepted, less ``KERNEL_ACCEPT_NOISE``): its cell is
                    not persistent (knot-resolver's RSA-2048 DoT and DoH trials reconnect
                    about 50 a second)
not-one-query       a trial of one query per connection (lifetime ``1q``) established fewer
                    than ``MIN_ONE_QUERY_OPENS`` connections per query answered in its window
                    (the engine's count): its queries rode connections opened before the
                    window, so it measured no establishment (a ladder's lowest steps: 200
                    connections opened in the warm-up carry the 150 queries of a 2 s window
                    at 76 qps)
==================  ====================================================================
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = [
    "ANALYSIS_FLAGS",
    "CONSISTENCY_FLAGS",
    "FLAGS",
    "KERNEL_ACCEPT_NOISE",
    "MAX_FOREIGN",
    "MAX_LOSS",
    "MAX_NEW_CONNECTIONS",
    "MAX_STOLEN",
    "MIN_ANSWER_AGREEMENT",
    "MIN_CACHE_HITS",
    "MIN_CONNECTIONS",
    "MIN_CPU_TICKS",
    "MIN_HIT_QUERIES",
    "MIN_SAMPLES",
    "ONE_ROUND_SPREAD",
    "SATURATED",
    "UNCHECKED",
    "flags_from_conditions",
]

MAX_LOSS = 0.01
"""Loss (time-outs in a closed loop) at or above this share of offered queries invalidates."""
POISSON_SIGMAS = 4.0
"""With Poisson arrivals the queries due in a window vary by the square root of their mean (a
2 s window at 179 qps: 358 ± 19, 5 %): the schedule is missed when the count offered is further
from its mean than ``MAX_LOSS`` of it and this many standard deviations."""
MIN_CACHE_HITS = 0.99
"""A cache-hit ratio below this (from the target's counters) invalidates."""
MIN_HIT_QUERIES = 100
"""The trial's own cache-hit ratio is used when the target counted at least this many queries
in it; otherwise the ratio measured after the fill stands."""
MIN_ANSWER_AGREEMENT = 0.99
"""min/max of the engine's and the target's answer counts below this invalidates."""
MIN_CONNECTIONS = 0.95
"""Persistent connections: a mean below this share of the connections asked for invalidates."""
SATURATED = 0.9
"""A side (target or generator) whose cores were busy at least this share of the window is
saturated."""
MAX_FOREIGN = 0.10
"""Load trials: the target's cores busy with work not charged to the target (core busy time
less the target's CPU time) at or above this share of the window invalidates. On a machine
nothing else runs on, the target's CPU time (softirq included) is within 0.03 of its cores'
busy time."""
MAX_STOLEN = 0.25
"""Load trials: the target's cores' steal time at or above this share of the window
invalidates. Measured here: a gate's UDP trials with 45 % of the target's core stolen answered
a third of what the same build answered with none, at 1.5 times the CPU per query; of the 1 936
trials stored in docs/, 2 are above 0.25 and 9 above 0.20."""
MIN_CPU_TICKS = 5
"""A target CPU time read in clock ticks (``/proc/PID/stat``) below this many ticks over the
window is ``cpu-unresolved``: each end of the window is off by up to a tick, so fewer than five
leave an error above 20 % (a cgroup's total, in micro- or nanoseconds, has no such floor)."""
MIN_SAMPLES = 0.5
"""Fewer meter samples in the window than this share of those expected invalidates."""

FLAGS = (
    "generator-bound",
    "loss",
    "listen-overflow",
    "unbalanced",
    "cold-cache",
    "answer-mismatch",
    "class-mismatch",
    "connections-short",
    "no-cpu-data",
    "cpu-unresolved",
    "no-generator-cpu",
    "no-counters",
    "meter-gaps",
    "target-core-shared",
    "cores-stolen",
)

UNCHECKED = ("answer-count", "cache-hits", "fresh-target")
"""Checks a trial could not run; recorded, they do not invalidate (see above)."""

CONSISTENCY_FLAGS = (
    "inconsistent-lifetime",
    "inconsistent-resumption",
    "inconsistent-layering",
    "inconsistent-handshakes",
    "inconsistent-memory",
    "negative-memory",
    "memory-below-kernel",
)
"""Flags the analysis raises across trials; they do not invalidate (see above)."""
ANALYSIS_FLAGS = ("not-persistent", "not-one-query")
"""Flags the analysis raises on a single trial from its own counts; they invalidate (see above)."""
MAX_NEW_CONNECTIONS = 0.01
"""A persistent trial that establishes more than this share of its connections in its window
is ``not-persistent``; a TLS or QUIC cell whose connections established without a handshake
counted exceed this share of them in every round is ``inconsistent-handshakes``."""
MIN_ONE_QUERY_OPENS = 0.5
"""A one-query trial that establishes fewer connections than this per query answered in its
window is ``not-one-query``."""
KERNEL_ACCEPT_NOISE = 10
"""Connections the kernel may accept in a trial's window for others than the target (its count,
``Tcp: PassiveOpens``, covers the whole network namespace) before they count against it."""
ONE_ROUND_SPREAD = 0.10
"""With a single round, a paired ratio's interval is the ratio ± this share of it (the spread
of one repetition on the reference 2-core VM)."""


def flags_from_conditions(validity: Mapping[str, Any]) -> list[str]:
    """The flags implied by a stored ``validity`` block's recorded conditions (for summaries
    written before flags were stored). Conditions it does not record raise no flag."""
    out: list[str] = []
    if validity.get("generator_kept_up") is False and not validity.get("target_saturated"):
        out.append("generator-bound")
    loss = validity.get("loss")
    if loss is not None and loss >= MAX_LOSS:
        out.append("loss")
    if validity.get("accounting_balanced") is False:
        out.append("unbalanced")
    hits = validity.get("cache_hit_ratio")
    if hits is not None and hits < MIN_CACHE_HITS:
        out.append("cold-cache")
    agreement = validity.get("answer_count_agreement")
    if agreement is not None and agreement < MIN_ANSWER_AGREEMENT:
        out.append("answer-mismatch")
    return out
