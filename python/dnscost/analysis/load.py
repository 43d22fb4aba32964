"""Reading a stored run: run.json and the trial.json of every trial of its plan. A trial that is
missing, unreadable or failed is kept, with its status, never raised. A trial whose raw records
are stored (``engine.jsonl``, ``meter.jsonl``, the target's counters and the summary's context)
gets its summary computed again from them, so what the report shows follows from raw data and
the current definitions (:mod:`dnscost.trial_summary`), not from what was written at the time.
A kept run (``dnscost keep``, :mod:`dnscost.commands.keep`) holds those records gzip-compressed, and is
read the same way."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from dnscost.analysis.series import series_rows
from dnscost.contract import Row, RunRecord, TrialRecord, TrialState, TrialStatus, TrialSummary, shape_problem
from dnscost.errors import UsageError
from dnscost.jsonl import json_kind, loads, parse_lines, read_lines
from dnscost.results import run_problem
from dnscost.trial_summary import CounterDelta, SummaryContext, summarize_trial
from dnscost.validity import flags_from_conditions

__all__ = [
    "damage_notes",
    "is_valid",
    "load_run",
    "load_run_series",
    "raw_records",
    "read_run",
    "read_trial",
    "recompute",
    "record_files",
    "run_network",
    "status_note",
    "trial_problem",
    "validity_flags",
]


def load_run(run_dir: Path) -> tuple[RunRecord, list[TrialRecord]]:
    """The run's record and one trial document per entry of its plan, in plan order.

    A trial without a readable trial.json becomes its plan entry with ``status`` taken from
    run.json's ``trials`` (``"missing"`` when it has none, or when run.json says ``done``: a
    finished trial's record is gone) and ``error`` saying why. A finished trial whose raw records
    are damaged (:func:`recompute`) keeps its stored summary and gets ``records_problem`` saying
    which file and how.
    """
    run, trials, _ = load_run_series(run_dir, series=False)
    return run, trials


def load_run_series(run_dir: Path, *, series: bool = True) -> tuple[RunRecord, list[TrialRecord], list[Row]]:
    """:func:`load_run`, and every trial's rows over time (:mod:`dnscost.analysis.series`, in plan
    order) from the same raw records, read once (none when ``series`` is False)."""
    run = read_run(run_dir)
    statuses = run.get("trials", {})
    trials: list[TrialRecord] = []
    rows: list[Row] = []
    for entry in run["plan"]:
        doc = read_trial(run_dir, entry, statuses.get(str(entry.get("id"))))
        raw, problem = raw_records(run_dir / "trials" / str(entry.get("id")), doc)
        if raw is not None:
            doc["summary"] = raw.summary()
            if series:
                rows += series_rows(str(doc.get("id")), raw.engine, raw.meter, raw.context)
        if problem is not None:
            doc["records_problem"] = problem
        trials.append(doc)
    return run, trials, rows


def read_run(run_dir: Path) -> RunRecord:
    """The run's record (run.json), with its plan. Raises :class:`dnscost.errors.UsageError`
    when ``run_dir`` holds no readable run.json with a plan."""
    path = run_dir / "run.json"
    try:
        run: dict[str, object] = loads(path.read_text())
    except FileNotFoundError:
        raise UsageError(f"{run_dir}: not a run directory (no run.json)") from None
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as e:
        raise UsageError(f"{path}: unreadable ({e})") from None
    if isinstance(run, dict) and "plan" not in run:
        raise UsageError(f"{path}: no plan (format_version {run.get('format_version')}; analysis needs 2)")
    problem = run_problem(run)
    if problem is not None:
        raise UsageError(f"{path}: {problem}")
    return cast(RunRecord, run)


def read_trial(run_dir: Path, entry: TrialRecord, status: TrialState | None) -> TrialRecord:
    """The trial of the plan ``entry`` as stored: the entry with its trial.json over it (the
    summary as written at measurement), or, without a readable trial.json, the entry with its
    ``status`` (``status``: its entry in run.json's ``trials``) and an ``error`` saying why."""
    path = run_dir / "trials" / str(entry.get("id")) / "trial.json"
    try:
        doc = loads(path.read_text())
    except FileNotFoundError:
        recorded = "missing" if status is None else status["status"]
        if recorded == "done":  # run.json says it finished: its record is gone
            return _entry(entry, "missing", "trial.json is missing (run.json says the trial finished)")
        return _entry(entry, recorded, (status.get("error") if status else None) or "no trial.json")
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as e:
        return _entry(entry, "unreadable", f"trial.json: {e}")
    problem = trial_problem(doc)
    if problem is not None:
        return _entry(entry, "unreadable", f"trial.json: {problem}")
    # The plan says what the trial is; trial.json adds what happened.
    return cast(TrialRecord, {**entry, **doc})


def _entry(entry: TrialRecord, status: TrialStatus, error: str) -> TrialRecord:
    """The plan ``entry`` of a trial without a readable trial.json, with why."""
    return cast(TrialRecord, {**entry, "status": status, "error": error})


def trial_problem(doc: Any) -> str | None:
    """What is wrong with the shape of a trial.json document, or None: an object whose fields
    are of the types :class:`dnscost.contract.TrialRecord` gives them (parameters, settings,
    summary, counters and the like objects or null), and whose summary's validity is an object."""
    if not isinstance(doc, dict):
        return f"not a trial record ({json_kind(doc)}, not an object)"
    if (problem := shape_problem(doc, TrialRecord)) is not None:
        return problem
    validity = (doc.get("summary") or {}).get("validity")
    if validity is not None and not isinstance(validity, dict):
        return f"summary.validity is {json_kind(validity)}, not an object"
    return None


def record_files(doc: TrialRecord) -> list[str]:
    """The raw record files, relative to the trial's directory, that :func:`resummarize` reads
    for the trial ``doc`` (its trial.json with its plan entry): the engine's records
    (``engine.jsonl``, or each cluster worker's ``workers/<k>/engine.jsonl``) and then the
    meter's (``meter.jsonl``). Empty for a trial whose stored summary stands (not a finished
    load or idle trial, or no counters or summary context)."""
    context, counters = doc.get("summary_context"), doc.get("counters")
    if doc.get("status") != "done" or doc.get("kind") in ("search", "capacity") or not context or not counters:
        return []
    engines = [f"{w['dir']}/engine.jsonl" for w in doc["cluster"]["workers"]] if _cluster(doc) else ["engine.jsonl"]
    return [*engines, "meter.jsonl"]


def _cluster(doc: TrialRecord) -> bool:
    """A cluster trial: its summary comes from its workers' records, merged."""
    return isinstance(doc.get("cluster"), dict) and isinstance(doc.get("engine_config"), dict)


def resummarize(trial_dir: Path, doc: TrialRecord) -> TrialSummary | None:
    """The summary of a finished load or idle trial computed again from its raw records, or
    None when they are not all stored, or damaged (the stored summary then stands; :func:`recompute`
    says why)."""
    return recompute(trial_dir, doc)[0]


@dataclass(frozen=True)
class RawRecords:
    """A finished trial's raw records: its engine's (a cluster trial's workers' merged under
    today's definitions), its meter's samples, its counters and its summary's context."""

    engine: Sequence[Mapping[str, Any]]
    meter: list[dict[str, object]]
    counters: CounterDelta
    context: SummaryContext

    def summary(self) -> TrialSummary:
        """The trial's summary computed again from these records (:mod:`dnscost.trial_summary`)."""
        return summarize_trial(self.engine, self.meter, self.counters, self.context)


def raw_records(trial_dir: Path, doc: TrialRecord) -> tuple[RawRecords | None, str | None]:
    """The raw records of a finished load or idle trial (:func:`record_files`) and what is wrong
    with them: ``(records, None)``, or ``(None, problem)`` when a record file is missing, empty,
    cut short (the engine's last record is not its summary) or holds a line that is not JSON,
    naming the file; ``(None, None)`` for a trial whose stored summary stands by design (a
    search, a failed trial, one without counters)."""
    files = record_files(doc)
    if not files:
        return None, None
    *engines, meter = files
    parts = []
    for name in engines:
        part, problem = _checked_records(trial_dir, name, engine=True)
        if problem is not None:
            return None, problem
        parts.append(part)
    samples, problem = _checked_records(trial_dir, meter, engine=False)
    if problem is not None:
        return None, problem
    records: Sequence[Mapping[str, Any]] = parts[0]
    if _cluster(doc):
        from dnscost.cluster.shares import merge_records

        records = merge_records(parts, doc["engine_config"])
    context, counters = doc["summary_context"], doc["counters"]
    counts = CounterDelta.from_counters(counters["before"], counters["after"])
    return RawRecords(records, samples, counts, SummaryContext.from_dict(context)), None


def recompute(trial_dir: Path, doc: TrialRecord) -> tuple[TrialSummary | None, str | None]:
    """The summary of a finished load or idle trial computed again from its raw records
    (:func:`raw_records`), and what is wrong with them: ``(summary, None)``, ``(None,
    problem)``, or ``(None, None)`` for a trial whose stored summary stands by design."""
    raw, problem = raw_records(trial_dir, doc)
    return (raw.summary() if raw is not None else None), problem


def _checked_records(trial_dir: Path, name: str, *, engine: bool) -> tuple[list[dict[str, object]], str | None]:
    """The records of the file ``name`` of a finished trial (or of ``<name>.gz``, a kept run's),
    and what is wrong with them, or None: missing, empty, a line that is not a JSON object (a
    finished trial's files were written whole), or, for the engine's, no summary record last."""
    path = trial_dir / name
    if not path.exists() and not path.with_name(path.name + ".gz").exists():
        return [], f"{name} is missing"
    lines = read_lines(path)
    parsed = parse_lines(lines)
    records = [line.record for line in parsed if line.record is not None]
    bad = [line.number for line in parsed if line.record is None]
    if not records:
        return [], f"{name} is empty"
    if engine and records[-1].get("type") != "summary":
        cut = f", its line {bad[-1]} cut" if bad and bad[-1] == len(lines) else ""
        return [], f"{name} is cut short (no summary record at its end{cut})"
    if bad:
        which = f"line {bad[0]}" if len(bad) == 1 else f"{len(bad)} lines, the first {bad[0]},"
        return [], f"{name} is corrupt ({which} of {len(lines)} not a JSON record)"
    return records, None


def status_note(run: RunRecord, trials: list[TrialRecord]) -> str | None:
    """What a reader of the run's tables must know when run.json does not say ``done``: its
    status and how many trials of its plan are done (``is running: 1 of 3 trials done``,
    ``failed: 0 of 3 trials done``); None for a finished run."""
    status = str(run.get("status") or "of no status")
    if status == "done":
        return None
    done = sum(t.get("status") == "done" for t in trials)
    state = "failed" if status == "failed" else f"is {status}"
    return f"{state}: {done} of {len(trials)} trials done"


def damage_notes(run_dir: Path, trials: list[TrialRecord]) -> list[str]:
    """One line per trial of :func:`load_run` whose stored record is damaged, naming the file: a
    trial.json unreadable, or missing for a trial run.json says finished (the trial is left
    out), or raw records missing, cut short or corrupt (its stored summary is used, unchecked)."""
    lines = []
    for t in trials:
        trial_dir = run_dir / "trials" / str(t.get("id"))
        error = str(t.get("error") or "")
        if t.get("status") == "unreadable":
            lines.append(f"{trial_dir / 'trial.json'}: {error.removeprefix('trial.json: ')}; left out")
        elif t.get("status") == "missing" and error.startswith("trial.json is missing"):
            lines.append(f"{trial_dir / 'trial.json'}: missing, though run.json says the trial finished; left out")
        if t.get("records_problem"):
            lines.append(f"{trial_dir}/{t['records_problem']}; its stored summary is used, unchecked")
    return lines


def run_network(run: RunRecord) -> str:
    """The run's ``--network`` set-up: run.json's ``spec.network`` (``spec.settings.network``
    for ``dnscost load``); runs made before the option existed were on loopback."""
    spec = run.get("spec") or {}
    network = spec.get("network") or (spec.get("settings") or {}).get("network")
    return str(network) if network else "loopback"


def validity_flags(validity: dict[str, object]) -> list[str]:
    """The flags of a summary's ``validity``: recorded ones when present, else derived from the
    recorded conditions (:func:`dnscost.validity.flags_from_conditions`)."""
    flags = validity.get("flags")
    if isinstance(flags, list):
        return [str(f) for f in flags]
    return flags_from_conditions(validity)


def is_valid(trial: TrialRecord) -> bool:
    """A trial counts in fits, medians and headline figures: done, with a summary, and valid."""
    summary = trial.get("summary")
    if trial.get("status") != "done" or not isinstance(summary, dict):
        return False
    validity = summary.get("validity") or {}
    recorded = validity.get("valid")
    if isinstance(recorded, bool):
        return recorded
    return not validity_flags(validity)
