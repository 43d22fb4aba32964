"""The results store: ``results/<experiment>/<run-id>/run.json`` (versioned, self-describing)
and one directory per trial with its raw data. run.json is rewritten as trials finish, so an
interrupted run keeps everything it measured."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from dnscost import __version__

__all__ = ["FORMAT_VERSION", "Run", "new_run_id"]

FORMAT_VERSION = 1


def new_run_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + f"-{os.getpid() % 10000:04d}"


class Run:
    """One run: its directory, its run.json, its trials."""

    def __init__(
        self,
        directory: Path,
        experiment: str,
        settings: dict[str, Any],
        facts: dict[str, Any],
        versions: dict[str, str],
    ) -> None:
        self.dir = directory
        self.dir.mkdir(parents=True, exist_ok=True)
        self.doc: dict[str, Any] = {
            "format_version": FORMAT_VERSION,
            "dnscost_version": __version__,
            "experiment": experiment,
            "run_id": directory.name,
            "created_unix_ms": int(time.time() * 1000),
            "command": sys.argv,
            "settings": settings,
            "machine": facts,
            "versions": versions,
            "status": "running",
            "trials": [],
        }
        self.save()

    def trial_dir(self, index: int, label: str) -> Path:
        d = self.dir / f"trial-{index:03d}-{label}"
        d.mkdir(parents=True, exist_ok=True)
        return d

    def add_trial(self, record: dict[str, Any]) -> None:
        self.doc["trials"].append(record)
        self.save()

    def finish(self, status: str) -> None:
        self.doc["status"] = status
        self.doc["finished_unix_ms"] = int(time.time() * 1000)
        self.save()

    def save(self) -> None:
        tmp = self.dir / "run.json.tmp"
        tmp.write_text(json.dumps(self.doc, indent=2, sort_keys=False) + "\n")
        tmp.replace(self.dir / "run.json")
