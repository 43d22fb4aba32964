"""ARCHITECTURE.md is checked, not only written: every file or folder it names in backticks
exists in the repository (a path, from the root or from a package's source folder; a bare file
name, somewhere), but for the files dnscost writes at run time, which it names as such."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
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


def test_every_module_imports_on_its_own() -> None:
    """Each of the package's modules imports first, in a fresh interpreter: an import circle
    hidden by the order modules happen to be imported in (``A`` imports ``B`` at the top, ``B``
    imports ``A`` at the top, and only importing ``B`` first fails) fails here. One interpreter
    forgets dnscost's modules before each, so as not to start a hundred."""
    script = (
        "import importlib, sys\n"
        "failed = []\n"
        "for name in sys.argv[1:]:\n"
        "    for loaded in [m for m in sys.modules if m == 'dnscost' or m.startswith('dnscost.')]:\n"
        "        del sys.modules[loaded]\n"
        "    try:\n"
        "        importlib.import_module(name)\n"
        "    except Exception as e:\n"
        "        failed.append(f'{name}: {type(e).__name__}: {e}')\n"
        "print('\\n'.join(failed))\n"
    )
    package = ROOT / "python" / "dnscost"
    modules = sorted(
        ".".join(p.relative_to(package.parent).with_suffix("").parts).removesuffix(".__init__")
        for p in package.rglob("*.py")
    )
    assert len(modules) > 100
    out = subprocess.run(
        [sys.executable, "-c", script, *modules], capture_output=True, text=True, check=True, timeout=300
    )
    assert out.stdout.strip() == "", out.stdout


PACKAGE = ROOT / "python" / "dnscost"


def _package_of(module: str) -> str:
    """The package a module of dnscost belongs to (a package's ``__init__`` belongs to it)."""
    path = PACKAGE.parent / module.replace(".", "/")
    return module if path.is_dir() else module.rpartition(".")[0]


def _is_module(name: str) -> bool:
    path = PACKAGE.parent / name.replace(".", "/")
    return path.is_dir() or path.with_suffix(".py").is_file()


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _private_imports(module: str, source: str) -> list[str]:
    """Where ``module`` takes a ``_name`` of a module of another dnscost package: imported by
    name (``from dnscost.report.html import _table``) or reached through a module it imported
    (``html._table``, ``dnscost.network._ip``)."""
    own = _package_of(module)
    modules: dict[str, str] = {}  # a name bound to a module of dnscost -> that module
    found = []
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "dnscost" or alias.name.startswith("dnscost."):
                    # ``import dnscost.x`` binds ``dnscost``; ``import dnscost.x as y`` binds ``y``.
                    modules[alias.asname or "dnscost"] = alias.name if alias.asname else "dnscost"
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = own.split(".")[: len(own.split(".")) - node.level + 1]
                base = ".".join([*up, base] if base else up)
            if base != "dnscost" and not base.startswith("dnscost."):
                continue
            for alias in node.names:
                full = f"{base}.{alias.name}"
                is_module = _is_module(full)
                if is_module:
                    modules[alias.asname or alias.name] = full
                if _private(alias.name) and _package_of(full if is_module else base) != own:
                    found.append(f"{module}: from {base} import {alias.name}")
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            parts = []
            value: ast.expr = node.value
            while isinstance(value, ast.Attribute):
                parts.insert(0, value.attr)
                value = value.value
            if isinstance(value, ast.Name) and value.id in modules:
                target = modules[value.id]
                for part in parts:  # the deepest module the chain names; the rest are its attributes
                    if not _is_module(f"{target}.{part}"):
                        break
                    target = f"{target}.{part}"
                if _package_of(target) != own:
                    found.append(f"{module}: {'.'.join([modules[value.id], *parts])}.{node.attr}")
    return found


def test_no_module_imports_a_private_name_of_another_package() -> None:
    """A ``_name`` is its package's own: no module of dnscost takes one from a module of another
    package (siblings in one package may share one). The check itself catches each way of
    taking one."""
    assert _private_imports("dnscost.observe.report", "from dnscost.report.html import _ENV, Table\n") == [
        "dnscost.observe.report: from dnscost.report.html import _ENV"
    ]
    assert _private_imports("dnscost.lab.lab", "from dnscost.report import html\nhtml._table([], [])\n") == [
        "dnscost.lab.lab: dnscost.report.html._table"
    ]
    assert _private_imports("dnscost.lab.lab", "import dnscost.network\ndnscost.network._ip('x')\n") == [
        "dnscost.lab.lab: dnscost.network._ip"
    ]
    assert _private_imports("dnscost.report.html", "from dnscost.report.figures import _x\n") == []
    assert _private_imports("dnscost.report", "from .html import _table\n") == []
    assert _private_imports("dnscost.lab", "from ..report.html import _table\n") == [
        "dnscost.lab: from dnscost.report.html import _table"
    ]
    files = sorted(PACKAGE.rglob("*.py"))
    assert len(files) > 100
    found = []
    for f in files:
        module = ".".join(f.relative_to(PACKAGE.parent).with_suffix("").parts).removesuffix(".__init__")
        found += _private_imports(module, f.read_text(encoding="utf-8"))
    assert not found, found


def _rust_module_edges() -> dict[Path, set[Path]]:
    """Each Rust source file's imports of its sibling modules (``use super::x``, ``super::x::``,
    ``crate::x`` at the crate's root, ``crate::dir::x`` below it), file to file."""
    edges: dict[Path, set[Path]] = {}
    for f in sorted(ROOT.glob("crates/*/src/**/*.rs")):
        text = re.sub(r"//[^\n]*", "", f.read_text(encoding="utf-8"))
        text = text.split("#[cfg(test)]")[0]  # what the module's tests use is not its import
        here = f.parent
        named = set(re.findall(r"\bsuper::(\w+)", text))
        named |= {m for m in re.findall(r"\bsuper::\{([^}]*)\}", text) for m in re.findall(r"\b(\w+)\b", m)}
        # ``crate::x`` is a module at the crate's root (src/x.rs); ``crate::dir::x`` one in src/dir/.
        inside = "" if here.name == "src" else re.escape(here.name) + "::"
        named |= set(re.findall(r"\bcrate::" + inside + r"(\w+)", text))
        siblings = {n: here / f"{n}.rs" for n in named if (here / f"{n}.rs").exists() and here / f"{n}.rs" != f}
        siblings |= {n: here / n / "mod.rs" for n in named if (here / n / "mod.rs").exists()}
        edges[f] = set(siblings.values())
    return edges


def test_no_rust_module_imports_itself_in_a_circle() -> None:
    """The Rust half's layer check: no circle among the modules of a crate folder (the Python
    half's is import-linter's in scripts/test)."""
    edges = _rust_module_edges()
    assert sum(len(v) for v in edges.values()) > 50  # the check reads the imports it should
    circles = []
    state: dict[Path, int] = {}

    def visit(f: Path, path: list[Path]) -> None:
        state[f] = 1
        for g in edges.get(f, ()):
            if state.get(g) == 1:
                circles.append(" -> ".join(str(p.relative_to(ROOT)) for p in [*path[path.index(g) :], g]))
            elif g not in state:
                visit(g, [*path, g])
        state[f] = 2

    for f in edges:
        if f not in state:
            visit(f, [f])
    assert not circles, circles
