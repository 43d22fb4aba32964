"""Reading a stored run: run.json and the trial.json of every trial of its plan. A trial that is
missing, unreadable or failed is kept, with its status, never raised. A trial whose raw records
are stored (``engine.jsonl``, ``meter.jsonl``, the target's counters and the summary's context)
gets its summary computed again from them, so what the report shows follows from raw data and
the current definitions (:mod:`dnscost.trial_summary`), not from what was written at the time.
A kept run (``dnscost keep``, :mod:`dnscost.keep`) holds those records gzip-compressed, and is
read the same way."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dnscost.errors import UsageError
from dnscost.results import json_kind, run_problem
from dnscost.validity import flags_from_conditions

__all__ = [
    "is_valid",
    "load_run",
    "read_run",
    "read_trial",
    "record_files",
    "run_network",
    "trial_problem",
    "validity_flags",
]


def load_run(run_dir: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The run's record and one trial document per entry of its plan, in plan order.

    A trial without a readable trial.json becomes its plan entry with ``status`` taken from
    run.json's ``trials`` (``"missing"`` when it has none) and ``error`` saying why.
    """
    run = read_run(run_dir)
    statuses: dict[str, Any] = run["trials"] if isinstance(run.get("trials"), dict) else {}
    trials = []
    for entry in run["plan"]:
        doc = read_trial(run_dir, entry, statuses.get(entry.get("id"), {}))
        summary = resummarize(run_dir / "trials" / str(entry.get("id")), doc)
        if summary is not None:
            doc["summary"] = summary
        trials.append(doc)
    return run, trials


def read_run(run_dir: Path) -> dict[str, Any]:
    """The run's record (run.json), with its plan. Raises :class:`dnscost.errors.UsageError`
    when ``run_dir`` holds no readable run.json with a plan."""
    path = run_dir / "run.json"
    try:
        run: dict[str, Any] = json.loads(path.read_text())
    except FileNotFoundError:
        raise UsageError(f"{run_dir}: not a run directory (no run.json)") from None
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as e:
        raise UsageError(f"{path}: unreadable ({e})") from None
    if isinstance(run, dict) and "plan" not in run:
        raise UsageError(f"{path}: no plan (format_version {run.get('format_version')}; analysis needs 2)")
    problem = run_problem(run)
    if problem is not None:
        raise UsageError(f"{path}: {problem}")
    return run


def read_trial(run_dir: Path, entry: dict[str, Any], status: dict[str, Any]) -> dict[str, Any]:
    """The trial of the plan ``entry`` as stored: the entry with its trial.json over it (the
    summary as written at measurement), or, without a readable trial.json, the entry with its
    ``status`` (``status``: its entry in run.json's ``trials``) and an ``error`` saying why."""
    path = run_dir / "trials" / str(entry.get("id")) / "trial.json"
    try:
        doc: dict[str, Any] = json.loads(path.read_text())
    except FileNotFoundError:
        return {**entry, "status": status.get("status", "missing"), "error": status.get("error") or "no trial.json"}
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as e:
        return {**entry, "status": "unreadable", "error": f"trial.json: {e}"}
    problem = trial_problem(doc)
    if problem is not None:
        return {**entry, "status": "unreadable", "error": f"trial.json: {problem}"}
    # The plan says what the trial is; trial.json adds what happened.
    return {**entry, **doc}


_TRIAL_OBJECTS = (
    "params", "settings", "summary", "summary_context", "counters",
    "engine_config", "cluster", "derived_rate", "search",
)  # fmt: skip
"""The fields of trial.json that, when present, are objects (or null)."""


def trial_problem(doc: Any) -> str | None:
    """What is wrong with the shape of a trial.json document, or None: an object whose
    parameters, settings, summary (and its validity), counters and the like are objects or null."""
    if not isinstance(doc, dict):
        return f"not a trial record ({json_kind(doc)}, not an object)"
    for key in _TRIAL_OBJECTS:
        if doc.get(key) is not None and not isinstance(doc[key], dict):
            return f"{key} is {json_kind(doc[key])}, not an object"
    validity = (doc.get("summary") or {}).get("validity")
    if validity is not None and not isinstance(validity, dict):
        return f"summary.validity is {json_kind(validity)}, not an object"
    return None


def record_files(doc: dict[str, Any]) -> list[str]:
    """The raw record files, relative to the trial's directory, that :func:`resummarize` reads
    for the trial ``doc`` (its trial.json with its plan entry): the engine's records
    (``engine.jsonl``, or each cluster worker's ``workers/<k>/engine.jsonl``) and then the
    meter's (``meter.jsonl``). Empty for a trial whose stored summary stands (not a finished
    load or idle trial, or no counters or summary context)."""
    context, counters = doc.get("summary_context"), doc.get("counters")
    if doc.get("status") != "done" or doc.get("kind") == "search" or not context or not counters:
        return []
    engines = [f"{w['dir']}/engine.jsonl" for w in doc["cluster"]["workers"]] if _cluster(doc) else ["engine.jsonl"]
    return [*engines, "meter.jsonl"]


def _cluster(doc: dict[str, Any]) -> bool:
    """A cluster trial: its summary comes from its workers' records, merged."""
    return isinstance(doc.get("cluster"), dict) and isinstance(doc.get("engine_config"), dict)


def resummarize(trial_dir: Path, doc: dict[str, Any]) -> dict[str, Any] | None:
    """The summary of a finished load or idle trial computed again from its raw records, or
    None when they are not all stored (the stored summary then stands)."""
    files = record_files(doc)
    if not files:
        return None
    from dnscost.results import read_records
    from dnscost.trial_summary import CounterDelta, SummaryContext, summarize_trial

    *engines, meter = files
    if _cluster(doc):
        # A cluster trial: its workers' records merged again under today's definitions.
        from dnscost.cluster.shares import merge_records

        parts = [read_records(trial_dir / name) for name in engines]
        if not all(parts):
            return None
        records = merge_records(parts, doc["engine_config"])
    else:
        records = read_records(trial_dir / engines[0])
    samples = read_records(trial_dir / meter)
    context, counters = doc["summary_context"], doc["counters"]
    if not records or records[-1].get("type") != "summary" or not samples:
        return None
    counts = CounterDelta.from_counters(counters["before"], counters["after"])
    return dict(summarize_trial(records, samples, counts, SummaryContext.from_dict(context)))


def run_network(run: dict[str, Any]) -> str:
    """The run's ``--network`` set-up: run.json's ``spec.network`` (``spec.settings.network``
    for ``dnscost load``); runs made before the option existed were on loopback."""
    raw = run.get("spec")
    spec: dict[str, Any] = raw if isinstance(raw, dict) else {}
    raw = spec.get("settings")
    settings: dict[str, Any] = raw if isinstance(raw, dict) else {}
    network = spec.get("network") or settings.get("network")
    return str(network) if network else "loopback"


def validity_flags(validity: dict[str, Any]) -> list[str]:
    """The flags of a summary's ``validity``: recorded ones when present, else derived from the
    recorded conditions (:func:`dnscost.validity.flags_from_conditions`)."""
    flags = validity.get("flags")
    if isinstance(flags, list):
        return [str(f) for f in flags]
    return flags_from_conditions(validity)


def is_valid(trial: dict[str, Any]) -> bool:
    """A trial counts in fits, medians and headline figures: done, with a summary, and valid."""
    summary = trial.get("summary")
    if trial.get("status") != "done" or not isinstance(summary, dict):
        return False
    validity = summary.get("validity") or {}
    recorded = validity.get("valid")
    if isinstance(recorded, bool):
        return recorded
    return not validity_flags(validity)
