"""Cost at the load you run (``docs/cost-curves.md``), from a run's tables: per target and cell,
the target's CPU per query at each step of its ladder beside its saturation point (median and
range over rounds, the ratio to saturation paired within rounds, the wake-ups per query the meter
saw); which observer carries each curve (``curve_mechanism``); and the load model's hold-out error
beside the constant cost model's on the same trials (``load_model_fit``); and, where the run
replayed populations, the load model on trial (``population``): per population, target and
rate, the CPU measured beside the CPU the run's load model predicts from the classes' counts;
and the hold-out error at each idle time tried for ``LONG_GAP_US`` (``load_model_gaps``).

python -m dnscost.report.curves RUN_DIR   (after ``dnscost report RUN_DIR``: reads its tables)
"""

from __future__ import annotations

import sys
from pathlib import Path

from dnscost.errors import DnscostError, UsageError
from dnscost.report.versions import Row, read_csv
from dnscost.report.versions import figure as _g
from dnscost.report.versions import number as _num

__all__ = ["curve_tables", "gap_table", "main", "planned_table", "split_table", "validation_table", "wake_table"]

OBSERVERS = {"wakeups_per_query": "wake-ups", "runs_per_query": "scheduler runs", "softirq_us_per_query": "softirq µs"}


def _pct(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.0%}".replace("%", " %")


def _shape(r: Row) -> str:
    """A cell as a reader names it: transport, and for connections their lifetime and resumption."""
    if r["transport"] == "udp":
        return "udp"
    life = (
        "persistent"
        if r["lifetime"] in ("forever", "")
        else "one query per connection"
        if r["lifetime"] == "1q"
        else r["lifetime"]
    )
    resumed = _num(r.get("resumption")) or 0.0
    return f"{r['transport']}, {life}" + (f", resumed {resumed:.0%}".replace("%", " %") if resumed else "")


def curve_tables(curve: list[Row], mechanism: list[Row], fits: list[Row]) -> str:
    """Markdown: one table per target of the ``cost_curve`` rows, then the mechanism and the
    load model's hold-out, from the tables' CSV text rows."""
    out: list[str] = []
    for target in dict.fromkeys(r["target"] for r in curve):
        out += [
            f"**{target}**: CPU-µs per answered query at each share of the cell's capacity (median "
            "[min-max] over rounds), its ratio to saturation (paired within rounds) and the "
            "target's wake-ups per query",
            "",
            "| cell | share | answered qps | CPU-µs per query | ÷ saturation | wake-ups per query |",
            "|---|---:|---:|---:|---:|---:|",
        ]
        for r in (r for r in curve if r["target"] == target):
            low, high = _g(_num(r["cpu_us_per_query_min"])), _g(_num(r["cpu_us_per_query_max"]))
            cpu = f"{_g(_num(r['cpu_us_per_query']))} [{low}-{high}]"
            ratio = _num(r["ratio_to_saturation"])
            ratio_text = (
                "n/a"
                if ratio is None
                else (
                    f"{ratio:.2f} [{_num(r['ratio_to_saturation_min']) or 0:.2f}-"
                    f"{_num(r['ratio_to_saturation_max']) or 0:.2f}]"
                )
            )
            share = float(r["share"])
            out.append(
                f"| {_shape(r)} | {'saturation' if share == 1 else f'{share:.1%}'.replace('%', ' %')} "
                f"| {_g(_num(r['answered_qps']))} | {cpu} | {ratio_text} | {_g(_num(r['wakeups_per_query']))} |"
            )
        out.append("")
    out += [
        "What carries each curve: CPU per query regressed on each observer per query over the cell's "
        "trials (CPU-µs a unit costs, 95 % interval; the share of the variance it explains; the share "
        "of the rise from saturation to the lowest step it accounts for)",
        "",
        "| target | cell | observer | CPU-µs a unit | r² | rise explained |",
        "|---|---|---|---:|---:|---:|",
    ]
    for r in mechanism:
        slope = _num(r["us_per_unit"])
        if slope is None:
            continue
        interval = (
            f" [{_g(_num(r['us_per_unit_low']))}-{_g(_num(r['us_per_unit_high']))}]" if r["us_per_unit_low"] else ""
        )
        out.append(
            f"| {r['target']} | {_shape(r)} | {OBSERVERS.get(r['observer'], r['observer'])} | {_g(slope)}{interval} "
            f"| {_g(_num(r['r2']), 2)} | {_pct(_num(r['rise_explained']))} |"
        )
    out += [
        "",
        "The load model against the constant cost model: each trial predicted by a fit without it "
        "(median and largest |predicted ÷ measured - 1|), over the busy shares it was fitted on",
        "",
        "| target | transport | trials | busy share measured | load model: median, max | constant: median, max |",
        "|---|---|---:|---|---:|---:|",
    ]
    for r in fits:
        least, most = _num(r["busy_share_min"]), _num(r["busy_share_max"])
        span = "n/a" if least is None or most is None else f"{least:.1%} to {most:.1%}".replace("%", " %")
        out.append(
            f"| {r['target']} | {r['transport']} | {r['trials']} | {span} "
            f"| {_g(_num(r['holdout_median_abs_error_pct']), 2)} %, {_g(_num(r['holdout_max_abs_error_pct']), 2)} % "
            f"| {_g(_num(r['constant_holdout_median_abs_error_pct']), 2)} %, "
            f"{_g(_num(r['constant_holdout_max_abs_error_pct']), 2)} % |"
        )
    return "\n".join(out) + "\n"


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def _signed(v: float) -> str:
    """A percentage rounded to a whole number with its sign (0 without one)."""
    return "0" if round(v) == 0 else f"{v:+.0f}"


def validation_table(population: list[Row]) -> str:
    """Markdown: the ``population`` rows the load model predicts, one line per population (its
    group: a trial's id starts with it), target and rate: CPU-µs per answered query measured and
    predicted (medians over the valid rounds), the load model's error (median [min-max] over
    rounds) beside the constant model's; then the median and largest |error| over the lines.
    Empty when no row has a load prediction."""
    rows = [r for r in population if r.get("valid") == "true" and _num(r.get("load_predicted_cpu_us")) is not None]
    if not rows:
        return ""
    cells: dict[tuple[str, str, float], list[Row]] = {}
    for r in rows:
        cells.setdefault((r["id"].split("-", 1)[0], r["target"], float(r["rate_qps"])), []).append(r)
    out = [
        "The load model on trial: each population replayed at each rate, CPU-µs per answered query "
        "measured and predicted by the run's load model (medians over valid rounds), the load model's "
        "error (predicted ÷ measured - 1, median [min-max] over rounds) and the constant model's (or "
        "why it has none: a term it does not identify bounds or leaves out its prediction)",
        "",
        "| population | target | qps | rounds | measured | load model | error | constant model's error |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    errors: list[float] = []
    for (group, target, rate), rs in sorted(cells.items()):
        per_query = [float(r["measured_cpu_us"]) / float(r["queries_answered"]) for r in rs]
        predicted = [float(r["load_predicted_cpu_us"]) / float(r["queries_answered"]) for r in rs]
        errs = [float(r["load_error_pct"]) for r in rs]
        constant = [float(e) for r in rs if (e := r.get("error_pct")) not in (None, "")]
        status = sorted({r.get("status") or "n/a" for r in rs})
        mid = _median(errs)
        errors.append(abs(mid))
        out.append(
            f"| {group.removeprefix('population_')} | {target} | {_g(rate)} | {len(rs)} | {_g(_median(per_query))} "
            f"| {_g(_median(predicted))} | {_signed(mid)} % [{_signed(min(errs))} to {_signed(max(errs))}] "
            f"| {f'{_signed(_median(constant))} %' if len(constant) == len(rs) else ', '.join(status)} |"
        )
    out += [
        "",
        f"Over the {len(errors)} lines: median |error| {_median(errors):.1f} %, largest {max(errors):.1f} %.",
    ]
    return "\n".join(out) + "\n"


CLASS_GROUP = "class_"
"""A group that replays one class of a population alone (``population_classes``) is named
``class_`` and the class's name with ``_`` for ``-`` (``experiments/model-probe.toml``)."""


def _per_second(r: Row, field: str) -> float:
    """A population row's CPU-µs in ``field`` per second of its measured window."""
    return float(r[field]) * float(r["answered_qps"]) / float(r["queries_answered"])


def split_table(population: list[Row], whole: str = "population_operator") -> str:
    """Markdown: a population taken apart, per target where the run replayed it whole (group
    ``whole``, at one rate) and class by class (groups ``class_<name>``, each class at the rate
    the whole gives it): each part's target CPU per second measured and predicted by the run's
    load model from its counts (medians over the valid rounds), the load model's error (median
    [min-max] over rounds); then the parts summed beside the whole, measured and predicted:
    whether the classes alone add up to the mix, and which part the model misses. Empty when the
    run has no such groups."""
    rows = [r for r in population if r.get("valid") == "true" and _num(r.get("load_predicted_cpu_us")) is not None]
    cells: dict[str, dict[str, list[Row]]] = {}
    for r in rows:
        group = r["id"].split("-", 1)[0]
        if group == whole or group.startswith(CLASS_GROUP):
            cells.setdefault(r["target"], {}).setdefault(group, []).append(r)
    out: list[str] = []
    for target, groups in sorted(cells.items()):
        parts = sorted(g for g in groups if g != whole)
        if whole not in groups or not parts:
            continue
        rate = _median([float(r["rate_qps"]) for r in groups[whole]])
        out += [
            f"{whole.removeprefix('population_')} on {target} at {_g(rate)} qps, whole and class by class: "
            "target CPU-µs per second measured and predicted by the run's load model (medians over valid "
            "rounds), the error (predicted ÷ measured - 1, median [min-max] over rounds)",
            "",
            "| replayed | answered qps | rounds | measured CPU-µs/s | load model | error |",
            "|---|---:|---:|---:|---:|---:|",
        ]
        sums = [0.0, 0.0]
        for g in [*parts, whole]:
            rs = groups[g]
            measured = _median([_per_second(r, "measured_cpu_us") for r in rs])
            predicted = _median([_per_second(r, "load_predicted_cpu_us") for r in rs])
            errs = [float(r["load_error_pct"]) for r in rs]
            name = g.removeprefix(CLASS_GROUP).replace("_", "-") if g != whole else "the whole"
            if g == whole:
                out.append(
                    f"| the classes summed | | | {_g(sums[0])} | {_g(sums[1])} | "
                    f"{_signed(100 * (sums[1] / sums[0] - 1))} % |"
                )
            out.append(
                f"| {name} | {_g(_median([float(r['answered_qps']) for r in rs]))} | {len(rs)} | {_g(measured)} "
                f"| {_g(predicted)} | {_signed(_median(errs))} % [{_signed(min(errs))} to {_signed(max(errs))}] |"
            )
            if g != whole:
                sums[0] += measured
                sums[1] += predicted
        out.append("")
    return "\n".join(out)


def planned_table(
    population: list[Row], group: str, planned: dict[float, tuple[float, float | None, float | None]]
) -> str:
    """Markdown: a population planned from its TOML alone (``planned``: per total rate, the
    target CPU-µs per second ``dnscost plan RUN --population POP --qps RATE`` gives, with its 95 %
    interval) beside its replays in group ``group`` at those rates: CPU-µs per second measured
    (median and range over the valid rounds) and the plan's error (planned ÷ measured - 1, on
    the median; its range over rounds). Empty when the run has no valid replay at a planned rate."""
    out = [
        "| qps | rounds | measured CPU-µs/s | planned | plan's 95 % interval | error |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for rate, (value, low, high) in sorted(planned.items()):
        rs = [
            r
            for r in population
            if r["id"].split("-", 1)[0] == group
            and r.get("valid") == "true"
            and abs(float(r["rate_qps"]) - rate) <= 1e-3 * rate  # the classes' rates, each rounded
        ]
        if not rs:
            continue
        measured = [_per_second(r, "measured_cpu_us") for r in rs]
        errs = [100 * (value / m - 1) for m in measured]
        interval = f"{_g(low)} to {_g(high)}" if low is not None and high is not None else "n/a"
        out.append(
            f"| {_g(rate)} | {len(rs)} | {_g(_median(measured))} [{_g(min(measured))} to {_g(max(measured))}] "
            f"| {_g(value)} | {interval} | {_signed(100 * (value / _median(measured) - 1))} % "
            f"[{_signed(min(errs))} to {_signed(max(errs))}] |"
        )
    return "\n".join(out) + "\n" if len(out) > 2 else ""


def wake_table(curve: list[Row], target: str, transports: tuple[str, ...] = ("udp", "dot")) -> str:
    """Per ladder step of ``target``'s persistent cells: the CPU a wake-up adds ((CPU per query
    - CPU per query at saturation) / wake-ups per query, from ``cost_curve``) beside the share of
    idle periods longer than ``LONG_GAP_US`` at the step's answered rate (``gap_share``): the rows
    of docs/cost-curves.md's "A long idle period costs more"."""
    from dnscost.analysis.loadmodel import gap_share

    cells = {
        t: {r["share"]: r for r in curve if (r["target"], r["transport"], r["lifetime"]) == (target, t, "forever")}
        for t in transports
    }
    shares = [sh for sh in cells[transports[0]] if sh != "1.0"]
    out = []
    for sh in shares:
        parts = []
        for t in transports:
            r, top = cells[t].get(sh), cells[t].get("1.0")
            per_query, wakes = (_num(r["cpu_us_per_query"]), _num(r["wakeups_per_query"])) if r else (None, None)
            saturated = _num(top["cpu_us_per_query"]) if top else None
            if r is None or per_query is None or not wakes or saturated is None:
                parts += ["n/a", "n/a"]
                continue
            added = (per_query - saturated) / wakes
            parts += [f"{added:.1f}" if added < 100 else f"{added:.0f}", f"{gap_share(float(r['answered_qps'])):.2f}"]
        out.append(f"| {float(sh):.1%} | " + " | ".join(parts) + " |")
    return "\n".join(out).replace("%", " %") + "\n"


def gap_table(gaps: list[Row]) -> str:
    """The load model's hold-out error (median |error| over its trials) per target x transport
    at each idle time tried as the one beyond which a wake-up costs more (``load_model_gaps``),
    and the median over the cells: what ``LONG_GAP_US`` is chosen by."""
    if not gaps:
        return ""
    times = list(dict.fromkeys(float(r["gap_us"]) for r in gaps))
    cells = list(dict.fromkeys((r["target"], r["transport"]) for r in gaps))
    error = {(r["target"], r["transport"], float(r["gap_us"])): _num(r["holdout_median_abs_error_pct"]) for r in gaps}
    head = " | ".join("none" if t == 0 else f"{t:.0f} µs" for t in times)
    out = [
        "The load model's hold-out error (median |error| over each cell's trials, %) with a wake-up after an idle "
        "period longer than each time priced apart (`long_wake`; none: without it)",
        "",
        f"| target | transport | {head} |",
        "|---|---|" + "---:|" * len(times),
    ]
    for target, transport in cells:
        row = " | ".join(_g(error.get((target, transport, t)), 2) for t in times)
        out.append(f"| {target} | {transport} | {row} |")
    medians = []
    for t in times:
        values = [v for c in cells if (v := error.get((*c, t))) is not None]
        medians.append(_g(_median(values), 2) if values else "n/a")
    out.append(f"| median over cells | | {' | '.join(medians)} |")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    try:
        if len(args) != 1:
            raise UsageError("usage: python -m dnscost.report.curves RUN_DIR")
        tables = Path(args[0]) / "tables"
        print(
            curve_tables(
                *(read_csv(tables / f"{name}.csv") for name in ("cost_curve", "curve_mechanism", "load_model_fit"))
            ),
            end="",
        )
        if (tables / "load_model_gaps.csv").exists() and (gaps := gap_table(read_csv(tables / "load_model_gaps.csv"))):
            print("\n" + gaps, end="")
        if (tables / "population.csv").exists() and (
            validation := validation_table(read_csv(tables / "population.csv"))
        ):
            print("\n" + validation, end="")
            if split := split_table(read_csv(tables / "population.csv")):
                print("\n" + split, end="")
    except DnscostError as e:
        print(f"dnscost: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
