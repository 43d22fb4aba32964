"""Energy: measured through RAPL where the machine exposes it, otherwise estimated from CPU
time by a stated linear model. Every figure says which (``"source": "rapl"`` or ``"model"``).

RAPL (Running Average Power Limit) counters are read from the powercap class in sysfs::

    /sys/class/powercap/intel-rapl:0/        name = package-0, energy_uj, max_energy_range_uj
    /sys/class/powercap/intel-rapl:0:0/      name = core      (a sub-domain of package-0)
    /sys/class/powercap/intel-rapl:0:1/      name = dram or uncore
    /sys/class/powercap/intel-rapl:1/        name = psys      (whole platform, where present)
    /sys/class/powercap/intel-rapl-mmio:0/   name = package-0 (same package through MMIO)

AMD Zen processors appear under the same ``intel-rapl`` names. ``energy_uj`` counts up from an
arbitrary value and wraps to zero after ``max_energy_range_uj``; the reader keeps the last raw
value of every domain and accumulates the differences, so it must be read at least once per
wrap period (minutes at full load on a big package; the sampler reads it ten times a second).
Since Linux 5.10 ``energy_uj`` is readable by root only.

The *total* is the sum of the package domains (one per socket; an MMIO package domain is used
only when the MSR one is missing, never both). Sub-domains, ``dram`` and ``psys`` are recorded
per domain but not added, since they overlap the packages or each other. RAPL measures the
whole package: the target, the generator and everything else on it. Attributing a share of it
to the target is left to analysis.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["CCF_REFERENCE", "CpuPowerModel", "EnergyReading", "RaplDomain", "RaplReader"]

POWERCAP = Path("/sys/class/powercap")

CCF_REFERENCE = (
    "Cloud Carbon Footprint, Methodology, Energy estimate: average of AWS coefficients "
    "(min 0.74 W, max 3.5 W per vCPU), https://www.cloudcarbonfootprint.org/docs/methodology/"
)

_ZONE = re.compile(r"^(intel-rapl(?:-mmio)?):(\d+)(?::(\d+))?$")


@dataclass(frozen=True)
class RaplDomain:
    """One powercap zone. ``key`` is how it appears in results: ``package-0``,
    ``package-0/core``, ``package-0/dram``, ``psys``."""

    key: str
    path: Path
    max_energy_range_uj: int
    package: bool


@dataclass(frozen=True)
class EnergyReading:
    """Joules since the reader's first reading: ``energy_j`` over the package domains, and
    every domain by its key."""

    energy_j: float
    domains_j: dict[str, float] = field(default_factory=dict)


def _read_text(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _read_uj(path: Path) -> int | None:
    text = _read_text(path)
    return int(text) if text and text.isdigit() else None


class RaplReader:
    """Cumulative energy of the RAPL domains under ``root`` (injectable for tests)."""

    def __init__(self, root: Path = POWERCAP) -> None:
        self.root = root
        self.domains = self.discover(root)
        self._last: dict[str, int] = {}
        self._total_uj: dict[str, int] = {}

    @staticmethod
    def discover(root: Path) -> list[RaplDomain]:
        """The zones under ``root`` that have an ``energy_uj`` (readable or not)."""
        found: dict[str, tuple[str, Path]] = {}  # zone dir name -> (domain name, path)
        try:
            entries = sorted(root.iterdir())
        except OSError:
            return []
        for entry in entries:
            if _ZONE.match(entry.name) and (entry / "energy_uj").exists():
                found[entry.name] = (_read_text(entry / "name") or entry.name, entry)
        domains: list[RaplDomain] = []
        msr_packages = {
            name for zone, (name, _) in found.items() if zone.startswith("intel-rapl:") and zone.count(":") == 1
        }
        for zone, (name, path) in found.items():
            m = _ZONE.match(zone)
            assert m is not None
            kind, top, sub = m.group(1), m.group(2), m.group(3)
            if kind == "intel-rapl-mmio" and name in msr_packages:
                continue  # the same package, already read through the MSR interface
            if sub is None:
                key = name
            else:
                parent = found.get(f"{kind}:{top}")
                key = f"{parent[0] if parent else f'{kind}:{top}'}/{name}"
            max_range = _read_uj(path / "max_energy_range_uj") or 0
            domains.append(RaplDomain(key, path, max_range, sub is None and name.startswith("package")))
        return domains

    def available(self) -> bool:
        """True when at least one package domain can be read (root, RAPL exposed)."""
        return any(d.package and _read_uj(d.path / "energy_uj") is not None for d in self.domains)

    def read(self) -> EnergyReading:
        """Joules since the first call (the first call returns zeros)."""
        for d in self.domains:
            raw = _read_uj(d.path / "energy_uj")
            if raw is None:
                continue
            last = self._last.get(d.key)
            if last is None:
                self._total_uj[d.key] = 0
            else:
                delta = raw - last
                if delta < 0:  # wrapped: the counter runs 0 ..= max_energy_range_uj
                    delta += d.max_energy_range_uj + 1
                self._total_uj[d.key] += delta
            self._last[d.key] = raw
        domains_j = {k: v / 1e6 for k, v in self._total_uj.items()}
        total = sum(self._total_uj.get(d.key, 0) for d in self.domains if d.package) / 1e6
        return EnergyReading(total, domains_j)

    def describe(self) -> dict[str, object]:
        return {
            "source": "rapl",
            "root": str(self.root),
            "domains": [d.key for d in self.domains],
            "total_over": [d.key for d in self.domains if d.package],
        }


@dataclass(frozen=True)
class CpuPowerModel:
    """Energy estimated from CPU time, linear in utilisation per vCPU.

    Each vCPU draws ``P(u) = P_idle + u · (P_max - P_idle)`` at utilisation ``u`` (0..1). Over a
    trial of ``T`` seconds during which the target holds ``n`` vCPUs (its pinned cores) and uses
    ``C`` CPU-seconds on them, integrating gives::

        E = C · (P_max - P_idle)  +  n · T · P_idle      [J]
            ^ the work itself        ^ idle power of the cores it holds (include_idle)

    With ``include_idle=False`` only the first term is counted (the marginal energy of the
    work). Defaults: ``P_idle`` = 0.74 W and ``P_max`` = 3.5 W per vCPU, from Cloud Carbon
    Footprint, Methodology, Energy estimate: average of AWS coefficients
    (https://www.cloudcarbonfootprint.org/docs/methodology/). These are fleet averages for
    cloud vCPUs, not a measurement of this machine: use the model for comparisons between
    transports on one machine, and RAPL for absolute figures.
    """

    p_idle_w_per_vcpu: float = 0.74
    p_max_w_per_vcpu: float = 3.5
    include_idle: bool = True

    def energy_j(self, cpu_us: int, wall_s: float, vcpus_held: int) -> float:
        """Joules for ``cpu_us`` of CPU time over ``wall_s`` seconds on ``vcpus_held`` vCPUs."""
        work = cpu_us / 1e6 * (self.p_max_w_per_vcpu - self.p_idle_w_per_vcpu)
        idle = vcpus_held * wall_s * self.p_idle_w_per_vcpu if self.include_idle else 0.0
        return work + idle

    def describe(self) -> dict[str, object]:
        return {
            "source": "model",
            "model": "linear-per-vcpu",
            "formula": "cpu_s * (p_max - p_idle) + (vcpus_held * wall_s * p_idle if include_idle)",
            "p_idle_w_per_vcpu": self.p_idle_w_per_vcpu,
            "p_max_w_per_vcpu": self.p_max_w_per_vcpu,
            "include_idle": self.include_idle,
            "reference": CCF_REFERENCE,
        }
