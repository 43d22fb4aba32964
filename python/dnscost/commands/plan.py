"""``dnscost plan``: the cores, memory and energy per day a traffic mix needs, per target of a
run, from the run's cost model (:mod:`dnscost.analysis.capacity`; ``docs/capacity.md``).

dnscost plan RUN_DIR --qps 50000 [--peak 1.5] --mix "udp=0.7,chromium-1s-google=0.3" [--json]
dnscost plan RUN_DIR --mix-file mix.toml [--qps N] [--peak F] [--json]
dnscost plan RUN_DIR --population population.toml --qps N [--move CLASS:FRACTION=SHAPE ...] [--json]

CPU is priced at the load it runs at where the run's load model (``load_model``: the cost
curves) identifies the terms, spread over ``--cores`` (default: the fewest that carry the peak).

RUN_DIR is a run directory (analysed again from its stored records, as ``dnscost report``
does) or a directory of a run's tables (``tables/trials.parquet`` and
``tables/memory_points.parquet``, or those files themselves, as in ``docs/study-run``).
"""

from __future__ import annotations

import argparse
import json
import math
import tomllib
from dataclasses import asdict
from pathlib import Path
from typing import Any

from dnscost.contract import Row
from dnscost.errors import UsageError

__all__ = ["add_parser", "load_tables", "main"]


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("plan", help="cores, memory and energy per day for a traffic mix, per target of a run")
    p.add_argument("run_dir", type=Path, metavar="RUN_DIR", help="a run directory, or a run's tables")
    p.add_argument("--qps", type=float, help="the mean rate, queries per second (or the mix file's qps)")
    p.add_argument("--peak", type=float, help="peak rate ÷ mean rate (default: the mix file's, else 1)")
    mix = p.add_mutually_exclusive_group(required=True)
    mix.add_argument(
        "--mix",
        help="comma-separated SHAPE=SHARE: a client profile (chromium-1s-google) or a transport with options "
        "(udp, doh:persistent, dot:1s, dot:1q:resumption=0.5, doh:qps_per_connection=5); "
        'e.g. "udp=0.7,chromium-1s-google=0.3"',
    )
    mix.add_argument("--mix-file", type=Path, help="a TOML file: qps, peak and [[share]] tables (docs/capacity.md)")
    mix.add_argument(
        "--population", type=Path, help="a population (dnscost population's TOML): its classes are the shares"
    )
    p.add_argument(
        "--move",
        action="append",
        default=[],
        metavar="CLASS:FRACTION=SHAPE",
        help="with --population, a what-if: that fraction of a class's queries moved to SHAPE "
        "(a --mix shape), e.g. udp-rate-1e0:0.33=doh:persistent (repeatable)",
    )
    p.add_argument(
        "--cores",
        type=_cores_arg,
        help="the cores the target spreads its load over (default: the fewest that carry it)",
    )
    p.add_argument("--json", action="store_true", help="one JSON document")


def _cores_arg(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of cores") from None
    if not 1 <= n <= 4096:
        raise argparse.ArgumentTypeError(f"{n} is not 1 to 4096 cores")
    return n


def _load_profile(spec_dir: Path) -> Any:
    from dnscost.spec import load_profile

    return lambda name: load_profile(name, spec_dir)


def read_mix(a: argparse.Namespace) -> Any:
    """The mix the command line gives (``--mix`` or ``--mix-file``; ``--qps`` and ``--peak``
    override the file's)."""
    from dnscost.analysis.capacity import mix_from_fields, parse_mix

    if a.move and a.population is None:
        raise UsageError("--move: moves a population's class (give --population)")
    if a.mix is not None:
        return parse_mix(a.mix, a.qps, a.peak, _load_profile(Path.cwd()))
    if a.population is not None:
        from dnscost.analysis.capacity import mix_from_population

        return mix_from_population(
            _read_toml(a.population, "population"),
            _shown(a.population),
            a.qps,
            a.peak,
            a.move,
            _load_profile(Path.cwd()),
        )
    path: Path = a.mix_file
    doc = _read_toml(path, "mix")
    unknown = sorted(set(doc) - {"qps", "peak", "share"})
    if unknown:
        raise UsageError(f"{_shown(path)}: unknown field {unknown[0]!r} (known: qps, peak, share)")
    shares = doc.get("share", [])
    if not isinstance(shares, list) or not all(isinstance(s, dict) for s in shares):
        raise UsageError(f"{_shown(path)}: share: expected [[share]] tables")
    qps = a.qps if a.qps is not None else doc.get("qps")
    peak = a.peak if a.peak is not None else doc.get("peak")
    return mix_from_fields(qps, peak, shares, _load_profile(path.parent), _shown(path))


def _read_toml(path: Path, what: str) -> dict[str, Any]:
    """A TOML file's document; UsageError in one line when it cannot be read or parsed."""
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise UsageError(f"{_shown(path)}: {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise UsageError(f"{_shown(path)}: not a TOML {what} (not UTF-8 text at byte {e.start})") from None
    except tomllib.TOMLDecodeError as e:
        raise UsageError(f"{_shown(path)}: not valid TOML: {e}") from None


def _shown(path: Path) -> str:
    """A path as the user would give it: relative to the working directory when it is under it."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def load_tables(run_dir: Path) -> tuple[list[Row], list[Row], str]:
    """The run's ``trials`` and ``memory_points`` rows and what to call it: a run directory is
    analysed again from its records; a directory of tables is read as it is."""
    if (run_dir / "run.json").exists():
        from dnscost.analysis import analyze

        a = analyze(run_dir)
        name = f"{a.run.get('experiment', 'run')} {a.run.get('run_id', run_dir.name)}"
        return a.tables["trials"].rows, a.tables["memory_points"].rows, name
    for tables in (run_dir / "tables", run_dir):
        if (tables / "trials.parquet").exists():
            import pyarrow.parquet as pq  # type: ignore[import-untyped]

            read = [
                list(pq.read_table(path).to_pylist()) if path.exists() else []
                for path in (tables / "trials.parquet", tables / "memory_points.parquet")
            ]
            return read[0], read[1], f"{_shown(run_dir)} (its tables)"
    raise UsageError(f"{run_dir}: neither a run directory (run.json) nor a run's tables (tables/trials.parquet)")


def _g(value: float | None, digits: int = 3) -> str:
    if value is None or value != value:
        return "-"
    if abs(value) >= 1000:
        return f"{value:,.0f}".replace(",", " ")
    return f"{value:.{digits}g}"


def _interval(e: Any, scale: float = 1.0, unit: str = "", digits: int = 3) -> str:
    if e.value is None:
        return "not identified"
    text = _g(e.value / scale, digits) + unit
    if e.low is not None and e.high is not None:
        text += f" [{_g(e.low / scale, digits)}-{_g(e.high / scale, digits)}]"
    return text


def _cores(e: Any) -> str:
    if e.value is None:
        return "not identified"
    text = f"{e.value:.0f}"
    return text + (f" [{e.low:.0f}-{e.high:.0f}]" if e.low is not None and e.high is not None else "")


def render(p: Any, source: str) -> list[str]:
    """The plan as lines of text: the mix, one row per target, then what is not identified and
    the notes on the intervals."""
    mix = p.mix
    width = max(len(s.label) for s in mix.shares)
    lines = [
        f"plan: {_g(mix.qps)} qps on average, peak x{mix.peak:g} = {_g(mix.peak_qps)} qps; run {source}",
        f"  {'share':>6}  {'shape':<{width}} {'transport':<9} {'handshakes/query':>16} {'resumed':>7} "
        f"{'connection-s/query':>18}",
    ]
    for s in mix.shares:
        hold = "as measured" if s.shape.connection_s_per_query is None else _g(s.shape.connection_s_per_query)
        resumed = f"{s.shape.resumed_share * 100:.3g}%" if s.shape.handshakes_per_query else "-"
        lines.append(
            f"  {s.share * 100:>5.3g}%  {s.label:<{width}} {s.shape.transport:<9} "
            f"{_g(s.shape.handshakes_per_query):>16} {resumed:>7} {hold:>18}"
        )
    header = (
        f"{'target':<22} {'cores at peak':<14} {'CPU at peak, cores':<24} {'memory at peak, MiB':<26} "
        f"{'kWh/day (mean rate)':<26} {'connections at peak':>19}"
    )
    lines += ["", header]
    for t in p.targets:
        name = f"{t.target} {t.version}" if t.version else t.target
        lines.append(
            f"{name:<22} {_cores(t.cores):<14} {_interval(t.cpu_us_per_s, 1e6):<24} "
            f"{_interval(t.memory_bytes, 2**20):<26} {_interval(t.energy_kwh_per_day):<26} "
            f"{_g(t.connections_held):>19}"
        )
    for t in p.targets:
        if t.busy_share is not None:
            measured = t.busy_share_measured
            over = f"; the load fits measured {measured[0]:.1%} to {measured[1]:.1%}" if measured else ""
            cores = f"{t.cores_serving} core" + ("s" if t.cores_serving != 1 else "")
            lines.append(f"{t.target}: busy {t.busy_share:.1%} of {cores} at peak{over}")
    for t in p.targets:
        for what, e in (("CPU", t.cpu_us_per_s), ("memory", t.memory_bytes), ("energy", t.energy_kwh_per_day)):
            if e.value is None and not (what == "energy" and t.cpu_us_per_s.value is None):
                lines.append(f"{t.target}: {what} not identified: {e.reason}")
        for note in t.notes:
            lines.append(f"{t.target}: {note}")
    lines.append(
        "intervals: CPU and cores 95 % over the bootstrap resamples of the load model (else the cost model); "
        "memory adds to the idle target's the ends of the 95 % t intervals of bytes per connection; "
        f"energy is above idle ({', '.join(sorted({t.energy_source or 'unknown' for t in p.targets}))}), "
        "joules per CPU-µs over the transport's trials, min and max"
    )
    return lines


def _json(p: Any, source: str) -> dict[str, object]:
    def clean(value: Any) -> Any:
        if isinstance(value, float) and not math.isfinite(value):
            return None
        if isinstance(value, dict):
            return {k: clean(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [clean(v) for v in value]
        return value

    doc = asdict(p)
    doc["mix"]["peak_qps"] = p.mix.peak_qps
    doc["run"] = source
    return dict(clean(doc))


def main(a: argparse.Namespace) -> int:
    from dnscost.analysis.capacity import plan, run_model

    mix = read_mix(a)
    trials, memory_points, source = load_tables(a.run_dir)
    p = plan(mix, run_model(trials, memory_points), a.cores)
    if not p.targets:
        raise UsageError(f"{a.run_dir}: no load or idle trial, so no target to plan for")
    if a.json:
        print(json.dumps(_json(p, source), indent=1))
    else:
        print("\n".join(render(p, source)))
    return 0
