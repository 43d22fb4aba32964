"""The results store (``docs/results.md``): ``results/<experiment>/<run-id>/run.json``
(versioned, self-describing) and one directory per trial with its raw data. run.json is
rewritten, atomically, as each trial finishes, so an interrupted run keeps everything it
measured and can be resumed."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import shutil
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, TypeVar

from dnscost import __version__
from dnscost.contract import (
    RunRecord,
    RunSpecRecord,
    RunStatus,
    SourceCommit,
    TrialRecord,
    TrialState,
    TrialStatus,
    document_problem,
    shape_problem,
)
from dnscost.errors import UsageError
from dnscost.jsonl import json_kind, loads
from dnscost.proc import Ledger

__all__ = [
    "FORMAT_VERSION",
    "Run",
    "new_run_id",
    "open_atomic",
    "read_json",
    "run_problem",
    "source_commit",
    "write_atomic",
    "write_json",
]

FORMAT_VERSION = 2


def source_commit() -> SourceCommit | None:
    """The git commit of the dnscost code running, ``{"commit": SHA, "dirty": bool}`` (``dirty``:
    its tracked files differ from the commit), recorded in run.json so that a stored run names
    the code that measured it; None outside a git checkout (an installed package) or without git."""
    here = Path(__file__).resolve().parent

    def git(*args: str) -> str | None:
        try:
            r = subprocess.run(["git", "-C", str(here), *args], capture_output=True, text=True, timeout=10, check=False)
        except (OSError, subprocess.SubprocessError):
            return None
        return r.stdout if r.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    if commit is None:
        return None
    status = git("status", "--porcelain", "--untracked-files=no")
    return {"commit": commit.strip(), "dirty": bool(status and status.strip())}


def new_run_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + f"-{os.getpid() % 10000:04d}"


def _not_regular(path: Path) -> bool:
    """Whether ``path`` exists and is not a regular file (a device, a FIFO, a socket, a
    directory), following symbolic links: what an output must never be renamed over."""
    try:
        return not stat.S_ISREG(path.stat().st_mode)
    except FileNotFoundError:
        return False


@contextlib.contextmanager
def open_atomic(path: Path, mode: str = "w") -> Iterator[IO[Any]]:
    """A file to write ``path`` through, atomically where ``path`` is (or will be) a regular
    file: written as ``<name>.tmp`` beside it and moved over it when the block ends without an
    error (a reader never sees half a file; a failed write leaves ``path`` as it was and no
    partial copy beside it). A symbolic link is followed, so the file it names is replaced,
    not the link. A ``path`` that exists and is no regular file is never replaced: a device or
    a FIFO (``/dev/null``, ``/dev/stdout``) is written through, a directory refused. Errors
    are :class:`OSError` naming ``path``."""
    if mode not in ("w", "wb"):
        raise ValueError(f"open_atomic: mode {mode!r} (w or wb)")
    path = Path(os.path.realpath(path)) if path.is_symlink() else path
    if _not_regular(path):
        if path.is_dir():
            raise IsADirectoryError(errno.EISDIR, "is a directory, not a file to write", str(path))
        try:
            with path.open(mode) as f:
                yield f
        except OSError as e:
            raise OSError(e.errno, e.strerror or str(e), str(path)) from None
        return
    tmp = path.with_name(path.name + ".tmp")
    try:
        with tmp.open(mode) as f:
            yield f
        tmp.replace(path)
    except BaseException as e:
        with contextlib.suppress(OSError):
            tmp.unlink()
        if isinstance(e, OSError):
            raise OSError(e.errno, e.strerror or str(e), str(path)) from None
        raise


def write_atomic(path: Path, data: str | bytes) -> None:
    """Writes ``data`` to ``path`` as :func:`open_atomic` says: atomically to a regular file,
    through a device, never renamed over anything that is not a regular file."""
    with open_atomic(path, "w" if isinstance(data, str) else "wb") as f:
        f.write(data)


def write_json(path: Path, doc: Any, indent: int = 2) -> None:
    """Writes ``doc`` to ``path`` as JSON indented by ``indent`` and ended by a newline,
    atomically as :func:`write_atomic` says: every JSON document dnscost writes goes through
    here (``test_architecture.py`` holds the package to it)."""
    write_atomic(path, json.dumps(doc, indent=indent) + "\n")


def read_json(path: Path) -> Any:
    try:
        return loads(path.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise UsageError(f"{path}: cannot read ({e})") from None


Doc = TypeVar("Doc")


def read_document(path: Path, record: type[Doc], missing: str | None = None) -> Doc:
    """A JSON file parsed once and checked against its record (a ``TypedDict`` of
    :mod:`dnscost.contract` or beside its writer): a missing file (with ``missing``, what that
    means), an unreadable one or one of another shape is one line, a :class:`UsageError`."""
    try:
        doc = loads(path.read_text())
    except FileNotFoundError:
        raise UsageError(f"{path}: missing ({missing})" if missing else f"{path}: missing") from None
    except (OSError, json.JSONDecodeError) as e:
        raise UsageError(f"{path}: unreadable: {e}") from None
    problem = document_problem(doc, record)
    if problem is not None:
        raise UsageError(f"{path}: {problem}")
    return doc  # type: ignore[no-any-return]  # checked against the record just above


def run_problem(doc: Any) -> str | None:
    """What is wrong with the shape of a run.json document, or None: an object whose fields are
    of the types :class:`dnscost.contract.RunRecord` gives them (the plan an array of trials, each
    an object with a string ``id``; the spec, the machine, the versions and the trials' states
    objects; ``spec_toml`` a string). Readers check what they need present."""
    if not isinstance(doc, dict):
        return f"not a dnscost run ({json_kind(doc)}, not an object)"
    plan = doc.get("plan", [])
    if not isinstance(plan, list):
        return f"plan is {json_kind(plan)}, not an array of trials"
    for k, entry in enumerate(plan):
        if not isinstance(entry, dict) or not isinstance(entry.get("id"), str):
            return f"plan[{k}] is not a trial (an object with a string id)"
    return shape_problem(doc, RunRecord)


class Run:
    """One run: its directory, its run.json (``doc``), its trials."""

    def __init__(self, directory: Path, doc: RunRecord) -> None:
        self.dir = directory
        self.doc = doc
        self._lock: IO[str] | None = None

    @property
    def ledger(self) -> Ledger:
        """What this run started (processes, cgroups): a resume stops a dead run's leftovers."""
        return Ledger(self.dir / "children.jsonl")

    def lock(self) -> None:
        """Takes the run directory for this process (released when it exits, however it
        exits); a second writer gets one line naming the first."""
        f = (self.dir / "lock").open("a+")
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.seek(0)
            holder = f.read().strip() or "?"
            f.close()
            raise UsageError(f"{self.dir} is being written by another dnscost (PID {holder})") from None
        f.seek(0)
        f.truncate()
        f.write(f"{os.getpid()}\n")
        f.flush()
        self._lock = f

    def unlock(self) -> None:
        if self._lock is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(self._lock, fcntl.LOCK_UN)
            self._lock.close()
            self._lock = None

    @classmethod
    def create(
        cls,
        directory: Path,
        experiment: str,
        *,
        spec: RunSpecRecord,
        spec_toml: str,
        plan: list[TrialRecord],
        facts: dict[str, object],
        versions: dict[str, str],
        reuse_unmeasured: bool = False,
    ) -> Run:
        """A new run in ``directory``, locked for this process. A directory that already holds
        a run is refused, except, with ``reuse_unmeasured``, one that holds a run of the same
        command and ``experiment`` in which nothing was measured (:meth:`measured`): that run's
        files make way for the new one's (:meth:`_take_unmeasured`)."""
        lock = None
        if (directory / "run.json").exists():
            if not reuse_unmeasured:
                raise UsageError(f"{directory} already holds a run: give another --output")
            lock = cls._take_unmeasured(directory, experiment, spec.get("command"))
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise UsageError(f"{directory}: cannot create the run directory ({e.strerror or e})") from None
        if not os.access(directory, os.W_OK):
            raise UsageError(f"{directory}: cannot write the run directory (permission denied)")
        doc: RunRecord = {
            "format_version": FORMAT_VERSION,
            "dnscost_version": __version__,
            "dnscost_source": source_commit(),
            "experiment": experiment,
            "run_id": directory.name,
            "created_unix_ms": int(time.time() * 1000),
            "command": sys.argv,
            "status": "running",
            "spec": spec,
            "spec_toml": spec_toml,
            "machine": facts,
            "versions": versions,
            "plan": plan,
            "trials": {},
        }
        run = cls(directory, doc)
        if lock is None:
            run.lock()
        else:
            run._lock = lock
        try:
            run.save()
        except OSError as e:
            raise UsageError(f"{directory}: cannot write run.json ({e.strerror or e})") from None
        return run

    @classmethod
    def _take_unmeasured(cls, directory: Path, experiment: str, command: Any) -> IO[str]:
        """Takes the earlier run in ``directory`` for a new run of ``experiment`` made by
        ``command`` (run.json's ``spec.command``): refused unless it is a run of both in which
        nothing was measured and no dnscost is writing it. What it left running is stopped and
        its files (run.json, children.jsonl, trials/, cluster/) are removed; nothing else in the
        directory is touched. Returns the directory's lock, held."""
        doc = read_json(directory / "run.json")
        if (
            run_problem(doc) is not None
            or doc.get("experiment") != experiment
            or (doc.get("spec") or {}).get("command") != command
        ):
            raise UsageError(f"{directory} already holds a run: give another --output")
        earlier = cls(directory, doc)
        earlier.doc.setdefault("trials", {})
        earlier.lock()
        if earlier.measured():
            earlier.unlock()
            raise UsageError(f"{directory} already holds a run with measured data: give another --output")
        earlier.ledger.stop_leftovers()
        (directory / "run.json").unlink()
        for name in ("trials", "cluster"):
            if (directory / name).is_dir():
                shutil.rmtree(directory / name)
        assert earlier._lock is not None
        return earlier._lock

    def measured(self) -> bool:
        """Whether anything was measured into this run: a trial done, or the engine's or the
        meter's records in a trial's directory (a trial cut short keeps what it measured)."""
        if any(entry.get("status") == "done" for entry in self.doc["trials"].values()):
            return True
        trials = self.dir / "trials"
        records = ("engine.jsonl", "meter.jsonl")
        return trials.is_dir() and any(p.name.removesuffix(".gz") in records for p in trials.rglob("*.jsonl*"))

    @classmethod
    def open(cls, directory: Path) -> Run:
        """An existing run, to analyse."""
        if not (directory / "run.json").is_file():
            raise UsageError(f"{directory}: not a run directory (no run.json)")
        doc = read_json(directory / "run.json")
        if isinstance(doc, dict) and (doc.get("format_version") != FORMAT_VERSION or "plan" not in doc):
            raise UsageError(f"{directory}/run.json: not a dnscost run of format {FORMAT_VERSION}")
        problem = run_problem(doc)
        if problem is not None:
            raise UsageError(f"{directory}/run.json: {problem}")
        doc.setdefault("trials", {})
        return cls(directory, doc)

    @classmethod
    def resume(cls, directory: Path) -> tuple[Run, list[str]]:
        """An interrupted run of a spec, locked for this process, with what a dead earlier
        process of it left running stopped. Returns the run and what was stopped."""
        run = cls.open(directory)
        spec = run.doc.get("spec")
        if (
            run.doc.get("experiment") == "load"
            or not isinstance(spec, dict)
            or not isinstance(spec.get("origin"), str)
            or "spec_toml" not in run.doc
        ):
            raise UsageError(f"{directory}: not a run of a spec (a `dnscost load` directory cannot be resumed)")
        run.lock()
        return run, run.ledger.stop_leftovers()

    def trial_dir(self, trial_id: str) -> Path:
        return self.dir / "trials" / trial_id

    def done(self, trial_id: str) -> bool:
        state = self.doc["trials"].get(trial_id)
        return state is not None and state["status"] == "done"

    def set_trial(self, trial_id: str, status: TrialStatus, error: str | None = None) -> None:
        entry: TrialState = {"status": status}
        if error:
            entry["error"] = error
        self.doc["trials"][trial_id] = entry
        self.save()

    def finish(self, status: RunStatus) -> None:
        self.doc["status"] = status
        self.doc["finished_unix_ms"] = int(time.time() * 1000)
        self.save()

    def save(self) -> None:
        write_json(self.dir / "run.json", self.doc)

    def trial_counts(self) -> dict[str, int]:
        """Trials by status, as run.json records them (``pending`` for the rest of the plan)."""
        counts: dict[str, int] = {}
        for entry in self.doc["plan"]:
            state = self.doc["trials"].get(entry["id"])
            status = "pending" if state is None else state["status"]
            counts[status] = counts.get(status, 0) + 1
        return counts
