"""ARCHITECTURE.md is checked, not only written: every file or folder it names in backticks
exists in the repository (a path, from the root or from a package's source folder; a bare file
name, somewhere), but for the files dnscost writes at run time, which it names as such."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).parents[2]

WRITTEN = {
    "run.json", "client.json", "observation.json", "pageload.json", "dnscost-root.json", "study.md",
    ".venv/bin", "shared/study/iscc2023.toml", "open-phase-1/",
}  # fmt: skip
"""Names ARCHITECTURE.md gives to what a run or a set-up writes, or to the project's shared
folder beside the repository: not files of the repository."""


def test_every_file_architecture_md_names_exists() -> None:
    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    names = {Path(f).name for f in files}
    folders = {str(p) for f in files for p in Path(f).parents}
    bases = ["", "python/dnscost/", "python/tests/", "python/", "docs/", "crates/engine/src/"]
    bases += sorted({f.split("src/")[0] + "src/" for f in files if f.startswith("crates/") and "/src/" in f})
    text = (ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8")
    named = {t for t in re.findall(r"`([^`\s]+)`", text) if "/" in t or re.search(r"\.(py|rs|toml|md|json|sh)$", t)}
    named = {t for t in named if not t.startswith(("-", "$", "/", "http")) and not re.search(r"[<*{]", t)}
    missing = []
    for token in sorted(named - WRITTEN):
        path = token.split(":")[0].rstrip("/")
        if "/" in path:
            ok = any(b + path in files or b + path in folders for b in bases)
        elif token.endswith("/"):  # a folder, named within its row's package
            ok = any(f == path or f.endswith("/" + path) for f in folders)
        else:
            ok = path in names
        if not ok:
            missing.append(token)
    assert len(named) > 100
    assert not missing, f"ARCHITECTURE.md names what the repository does not hold: {missing}"
