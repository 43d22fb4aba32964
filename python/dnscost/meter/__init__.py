"""Metering: what a target costs while it serves, read from the kernel.

:class:`Sampler` writes samples of CPU time (cgroup and ``/proc``, per core), memory (cgroup,
RSS/PSS/USS, socket buffers through ``ss``, slab), drop counters and energy (RAPL or
:class:`CpuPowerModel`) to a JSON-lines file; :func:`summarize` turns the samples of one window
into figures. The parsers live in :mod:`dnscost.meter.procfs` and :mod:`dnscost.meter.sockets`.
See ``docs/metering.md``.
"""

from dnscost.meter.energy import CCF_REFERENCE, CpuPowerModel, EnergyReading, RaplDomain, RaplReader
from dnscost.meter.procfs import process_tree
from dnscost.meter.sampler import FORMAT_VERSION, Sampler
from dnscost.meter.sockets import SocketMemory, SsRun, parse_ss, ss_sockets
from dnscost.meter.summary import LEVELS, summarize

__all__ = [
    "CCF_REFERENCE",
    "FORMAT_VERSION",
    "LEVELS",
    "CpuPowerModel",
    "EnergyReading",
    "RaplDomain",
    "RaplReader",
    "Sampler",
    "SocketMemory",
    "SsRun",
    "parse_ss",
    "process_tree",
    "ss_sockets",
    "summarize",
]
