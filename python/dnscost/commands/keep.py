"""``dnscost keep``: a run in the form a repository keeps (``docs/results.md``, "Kept runs"),
holding what ``dnscost report`` reads to recompute every table, and nothing else.

    dnscost keep RUN_DIR DEST

DEST gets run.json and every trial's trial.json, byte for byte, and, for each trial whose
summary the analysis computes again from raw records (:func:`dnscost.analysis.load.record_files`),
those records gzip-compressed beside it: the engine's ``start``, ``interval`` and ``summary``
records (``engine.jsonl.gz``; a cluster trial's are its workers', ``workers/<k>/engine.jsonl.gz``)
and the meter's samples (``meter.jsonl.gz``), each line as it was written. Left out: the target's
configuration and log, the connections logs, the cache fills, TLS files, search steps, derived
tables, figures and the report (``dnscost report DEST`` writes them again). ``kept.json`` says
what was kept and how large the run was. A compressed file carries no time or name, so keeping
a run again writes the same bytes.

A ``dnscost client`` run (a directory with ``client.json``) is kept as its JSON documents byte
for byte (``client.json``, ``check/check.json``, ``times/<target>/times.json``,
``pageload/presets.json``, ``pageload/<preset>/pageload.json``) and its per-load and per-session
records gzip-compressed (``check/check.jsonl.gz``, ``pageload/<preset>/loads.jsonl.gz``,
``sessions.jsonl.gz``): what ``dnscost client report`` and ``python -m dnscost.clientside.tables``
read. Left out: the engines' and servers' logs, the corpus' pages and zone, TLS files, browser
profiles and the resolvers' query logs.
"""

from __future__ import annotations

import argparse
import gzip
import os
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path

from dnscost import __version__
from dnscost.errors import UsageError
from dnscost.jsonl import parse_lines, read_lines

__all__ = ["ENGINE_RECORDS", "Kept", "add_parser", "keep_client_run", "keep_run", "main"]

ENGINE_RECORDS = ("start", "interval", "summary")
"""The engine's records a kept run holds: the ones a summary is computed from."""


@dataclass(frozen=True)
class Kept:
    """What :func:`keep_run` wrote (``kept.json``)."""

    kept_by: str
    dnscost_version: str
    run_id: str | None
    trials: int
    """Trials with a trial.json."""
    trials_with_records: int
    """Trials whose summary is computed again from their kept records."""
    run_bytes: int
    """Every file of the run directory."""
    kept_bytes: int
    """Every file written, kept.json aside."""
    parts: tuple[str, ...] | None = None
    """A client run's parts that finished (None for a run of trials)."""


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "keep", help="copy what `dnscost report` needs of a run, compactly, to keep it (in a repository)"
    )
    p.add_argument("run_dir", type=Path, metavar="RUN_DIR", help="a run directory (or a kept run)")
    p.add_argument("dest", type=Path, metavar="DEST", help="where to write the kept run (may exist, without a run)")


def main(a: argparse.Namespace) -> int:
    kept = keep_run(a.run_dir, a.dest)
    if kept.parts is not None:
        print(f"kept a client run ({', '.join(kept.parts) or 'no part finished'}) in {a.dest}: "
              f"{_size(kept.kept_bytes)} of {_size(kept.run_bytes)}")  # fmt: skip
        return 0
    print(
        f"kept {kept.trials} trials ({kept.trials_with_records} with their records) in {a.dest}: "
        f"{_size(kept.kept_bytes)} of {_size(kept.run_bytes)}"
    )
    return 0


def _size(n: int) -> str:
    return f"{n / 1e6:.1f} MB" if n >= 1e6 else f"{n / 1e3:.1f} kB"


def keep_run(run_dir: Path, dest: Path) -> Kept:
    """Writes the kept form of the run in ``run_dir`` into ``dest`` (see the module's
    documentation). Raises :class:`dnscost.errors.UsageError` when ``run_dir`` is not a run, or
    when ``dest`` is ``run_dir``, lies inside it, or already holds a run or trials."""
    from dnscost.analysis.load import read_run, read_trial, record_files
    from dnscost.results import write_json

    source, target = run_dir.resolve(), dest.resolve()
    if target == source or source in target.parents:
        raise UsageError(f"{dest}: inside the run it would keep; give a directory outside {run_dir}")
    if (run_dir / "client.json").is_file():
        return keep_client_run(run_dir, dest)
    run = read_run(run_dir)
    for name in ("run.json", "trials"):
        if (dest / name).exists():
            raise UsageError(f"{dest} already holds {name}: give another DEST")
    dest.mkdir(parents=True, exist_ok=True)
    statuses = run.get("trials", {})
    trials = with_records = written = 0
    for entry in run["plan"]:
        trial_id = str(entry.get("id"))
        src = run_dir / "trials" / trial_id
        if not (src / "trial.json").is_file():
            continue
        out = dest / "trials" / trial_id
        out.mkdir(parents=True)
        shutil.copyfile(src / "trial.json", out / "trial.json")
        written += (out / "trial.json").stat().st_size
        trials += 1
        files = record_files(read_trial(run_dir, entry, statuses.get(trial_id)))
        for name in files:
            types = ENGINE_RECORDS if Path(name).name == "engine.jsonl" else None
            written += _keep_records(src / name, out / f"{name}.gz", types)
        with_records += bool(files)
    shutil.copyfile(run_dir / "run.json", dest / "run.json")
    written += (dest / "run.json").stat().st_size
    kept = Kept(
        kept_by="dnscost keep",
        dnscost_version=__version__,
        run_id=run.get("run_id"),
        trials=trials,
        trials_with_records=with_records,
        run_bytes=_tree_bytes(run_dir),
        kept_bytes=written,
    )
    write_json(dest / "kept.json", asdict(kept))
    return kept


CLIENT_DOCUMENTS = ("client.json", "check/check.json", "times/*/times.json", "pageload/presets.json",
                    "pageload/*/pageload.json")  # fmt: skip
"""The JSON documents of a client run a kept one holds, byte for byte."""
CLIENT_RECORDS = ("check/check.jsonl", "pageload/*/loads.jsonl", "pageload/*/sessions.jsonl")
"""The JSON-lines records of a client run a kept one holds, gzip-compressed."""


def keep_client_run(run_dir: Path, dest: Path) -> Kept:
    """The kept form of a ``dnscost client`` run (see the module's documentation)."""
    if (dest / "client.json").exists():
        raise UsageError(f"{dest} already holds client.json: give another DEST")
    from dnscost.results import read_json, write_json

    doc = read_json(run_dir / "client.json")
    written = 0
    for pattern in CLIENT_DOCUMENTS:
        for src in sorted(run_dir.glob(pattern)):
            out = dest / src.relative_to(run_dir)
            out.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, out)
            written += out.stat().st_size
    for pattern in CLIENT_RECORDS:
        # A kept run's records are compressed: keeping it again writes the same bytes.
        found = [*run_dir.glob(pattern), *run_dir.glob(f"{pattern}.gz")]
        for src in sorted({f.with_name(f.name.removesuffix(".gz")) for f in found}):
            rel = src.relative_to(run_dir)
            written += _keep_records(src, dest / rel.parent / f"{rel.name}.gz", None)
    kept = Kept(
        kept_by="dnscost keep",
        dnscost_version=__version__,
        run_id=run_dir.name,
        trials=0,
        trials_with_records=0,
        run_bytes=_tree_bytes(run_dir),
        kept_bytes=written,
        parts=tuple(str(x) for x in doc.get("finished", [])),
    )
    write_json(dest / "kept.json", asdict(kept))
    return kept


def _keep_records(path: Path, out: Path, types: tuple[str, ...] | None) -> int:
    """Writes the records of ``path`` (whose ``type`` is one of ``types``; all when None) to
    ``out``, gzip-compressed, each line as it was; nothing when ``path`` has none. Returns the
    bytes written."""
    lines = []
    # Each kept line is written as it was. A line that is no record (cut short by a crash) is
    # left out: the analysis skips it too.
    for line in parse_lines(read_lines(path)):
        if line.record is not None and (types is None or line.record.get("type") in types):
            lines.append(line.text + "\n")
    if not lines:
        return 0
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("wb") as f, gzip.GzipFile(filename="", mode="wb", fileobj=f, compresslevel=9, mtime=0) as z:
        z.write("".join(lines).encode())
    return out.stat().st_size


def _tree_bytes(root: Path) -> int:
    return sum(os.lstat(os.path.join(d, name)).st_size for d, _, names in os.walk(root) for name in names)
