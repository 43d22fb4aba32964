"""The results store (``docs/results.md``): ``results/<experiment>/<run-id>/run.json``
(versioned, self-describing) and one directory per trial with its raw data. run.json is
rewritten, atomically, as each trial finishes, so an interrupted run keeps everything it
measured and can be resumed."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from dnscost import __version__
from dnscost.errors import UsageError

__all__ = ["FORMAT_VERSION", "Run", "new_run_id", "read_json", "write_json"]

FORMAT_VERSION = 2


def new_run_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + f"-{os.getpid() % 10000:04d}"


def write_json(path: Path, doc: Any) -> None:
    """Writes ``doc`` to ``path`` atomically (a reader never sees half a file)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(doc, indent=2) + "\n")
    tmp.replace(path)


def read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise UsageError(f"{path}: cannot read ({e})") from None


class Run:
    """One run: its directory, its run.json (``doc``), its trials."""

    def __init__(self, directory: Path, doc: dict[str, Any]) -> None:
        self.dir = directory
        self.doc = doc

    @classmethod
    def create(
        cls,
        directory: Path,
        experiment: str,
        *,
        spec: dict[str, Any],
        spec_toml: str,
        plan: list[dict[str, Any]],
        facts: dict[str, Any],
        versions: dict[str, str],
    ) -> Run:
        if (directory / "run.json").exists():
            raise UsageError(f"{directory} already holds a run: give another --output, or --resume it")
        directory.mkdir(parents=True, exist_ok=True)
        doc: dict[str, Any] = {
            "format_version": FORMAT_VERSION,
            "dnscost_version": __version__,
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
        run.save()
        return run

    @classmethod
    def open(cls, directory: Path) -> Run:
        """An existing run, to resume or to analyse."""
        doc = read_json(directory / "run.json")
        if not isinstance(doc, dict) or doc.get("format_version") != FORMAT_VERSION:
            raise UsageError(f"{directory}/run.json: not a dnscost run of format {FORMAT_VERSION}")
        return cls(directory, doc)

    def trial_dir(self, trial_id: str) -> Path:
        return self.dir / "trials" / trial_id

    def done(self, trial_id: str) -> bool:
        return bool(self.doc["trials"].get(trial_id, {}).get("status") == "done")

    def set_trial(self, trial_id: str, status: str, error: str | None = None) -> None:
        entry: dict[str, Any] = {"status": status}
        if error:
            entry["error"] = error
        self.doc["trials"][trial_id] = entry
        self.save()

    def finish(self, status: str) -> None:
        self.doc["status"] = status
        self.doc["finished_unix_ms"] = int(time.time() * 1000)
        self.save()

    def save(self) -> None:
        write_json(self.dir / "run.json", self.doc)
