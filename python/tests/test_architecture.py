"""ARCHITECTURE.md is checked, not only written: every file or folder it names in backticks
exists in the repository (a path, from the root or from a package's source folder; a bare file
name, somewhere), but for the files dnscost writes at run time, which it names as such; its crate
drawing is the crates' ``Cargo.toml`` dependencies and its module graph of ``generate/`` the
modules' imports; what it says of the package's modules holds (each imports on its own, takes no
``_name`` of another package's, writes no JSON document past ``results.py``); no Rust module
imports itself in a circle."""

from __future__ import annotations

import ast
import itertools
import re
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).parents[2]

WRITTEN = {
    "run.json", "client.json", "observation.json", "pageload.json", "dnscost-root.json", "study.md",
    ".venv/bin", "shared/study/iscc2023.toml", "open-phase-1/", "summary.json", "table.md",
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


def _json_call(node: ast.AST, name: str) -> bool:
    """Whether ``node`` calls ``json.<name>``."""
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == name
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "json"
    )


def _json_writes_outside_results(source: str) -> list[int]:
    """The lines where ``source`` writes a JSON document past :mod:`dnscost.results`: a
    ``json.dump`` to a file, or ``write_text`` or ``write_bytes`` of what ``json.dumps`` made
    (``json.dumps(d) + "\\n"``, its ``.encode()``, a ``join`` of such lines, or a name the same
    function bound to one). A value ``json.dumps`` quotes inside another language's text (a
    format string, a ``%``) is not a JSON document."""

    def document(node: ast.AST, names: set[str]) -> bool:
        if _json_call(node, "dumps") or (isinstance(node, ast.Name) and node.id in names):
            return True
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            return document(node.left, names)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "encode":
            return document(node.func.value, names)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "join":
            lines = node.args[0] if node.args else None
            return isinstance(lines, ast.GeneratorExp | ast.ListComp) and document(lines.elt, names)
        return False

    tree = ast.parse(source)
    found: set[int] = set()
    scopes = [tree, *(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef))]
    for scope in scopes:
        names = {
            t.id
            for n in ast.walk(scope)
            if isinstance(n, ast.Assign) and document(n.value, set())
            for t in n.targets
            if isinstance(t, ast.Name)
        }
        for n in ast.walk(scope):
            if not isinstance(n, ast.Call):
                continue
            write = isinstance(n.func, ast.Attribute) and n.func.attr in ("write_text", "write_bytes")
            if (write and any(document(a, names) for a in n.args)) or _json_call(n, "dump"):
                found.add(n.lineno)
    return sorted(found)


def test_every_json_document_is_written_through_results() -> None:
    """ARCHITECTURE.md's ``results.py`` is the one writer of the JSON documents dnscost writes
    (``write_json``, ``write_atomic``: a reader never sees half of one): no other module of the
    package writes one with ``write_text`` or ``json.dump``. The check itself catches each way."""
    assert _json_writes_outside_results('p.write_text(json.dumps(d, indent=2) + "\\n")\n') == [1]
    assert _json_writes_outside_results("def f(p, d):\n    t = json.dumps(d)\n    p.write_bytes(t.encode())\n") == [3]
    assert _json_writes_outside_results("with open(p, 'w') as f:\n    json.dump(d, f)\n") == [2]
    assert _json_writes_outside_results("p.write_text(''.join(json.dumps(r) + '\\n' for r in rs))\n") == [1]
    assert _json_writes_outside_results("write_json(p, d)\nlog.write(json.dumps(r) + '\\n')\np.write_text(s)\n") == []
    assert (
        _json_writes_outside_results("p.write_text(f'a: {json.dumps(v)}')\np.write_text(T % {'u': json.dumps(u)})\n")
        == []
    )
    files = sorted(PACKAGE.rglob("*.py"))
    assert len(files) > 100
    found = [
        f"{f.relative_to(ROOT)}:{line}"
        for f in files
        if f != PACKAGE / "results.py"
        for line in _json_writes_outside_results(f.read_text(encoding="utf-8"))
    ]
    assert not found, f"JSON documents written past results.write_json: {found}"


def _drawn_edges(drawing: str, names: set[str]) -> set[tuple[str, str]]:
    """The arrows of a tree drawing of ``names``: ``a ──► b ──► c`` on a line draws a → b and
    b → c; a line that begins with a branch (``├──►``, ``└──►``) hangs from the first line's
    name. What a line says in parentheses is a comment. A word of a line that is not a name of
    ``names`` is an error, so a renamed crate cannot drop out of the drawing unseen."""
    lines = [re.sub(r"\([^)]*\)", "", line) for line in drawing.strip().splitlines()]
    root = lines[0].split()[0]
    edges = set()
    for line in lines:
        words = re.findall(r"[\w-]+", line)
        assert set(words) <= names, f"not a crate: {set(words) - names} in {line!r}"
        chain = [root, *words] if line.lstrip().startswith(("├", "└")) else words
        edges |= set(itertools.pairwise(chain))
    return edges


def test_the_crate_drawing_is_the_cargo_dependencies() -> None:
    """ARCHITECTURE.md's crate drawing has an arrow for each crate's dependency on another
    crate of the workspace (``[dependencies]`` of ``crates/*/Cargo.toml``), and no other."""
    assert _drawn_edges("a (x, b)\n  ├──► b ──► c\n  └──► c\n", {"a", "b", "c"}) == {("a", "b"), ("b", "c"), ("a", "c")}
    text = (ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8")
    section = text.split("## Crates (`crates/`)")[1]
    drawing = section.split("```")[1]
    crates = {p.parent.name: tomllib.loads(p.read_text(encoding="utf-8")) for p in ROOT.glob("crates/*/Cargo.toml")}
    assert len(crates) >= 6
    prefix = "dnscost-"
    assert all(c["package"]["name"] == prefix + name for name, c in crates.items())
    cargo = {
        (name, dep.removeprefix(prefix))
        for name, c in crates.items()
        for dep in c.get("dependencies", {})
        if dep.startswith(prefix)
    }
    assert len(cargo) > 5
    drawn = _drawn_edges(drawing, set(crates))
    assert drawn == cargo, f"drawn, not in Cargo.toml: {drawn - cargo}; in Cargo.toml, not drawn: {cargo - drawn}"


def test_the_generate_module_graph_is_its_imports() -> None:
    """ARCHITECTURE.md's module graph of ``generate/`` (``a, b → {c, d}`` lines) has an edge for
    each sibling a module of ``crates/engine/src/generate/`` uses, and no other."""
    text = (ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8")
    after = text.split("## generate: data flow")[1].split("module graph, each module")[1].splitlines()[2:]
    edge = re.compile(r"\s+(\w+(?:, \w+)*) → (?:\{([\w, ]+)\}|(\w+))(?:\s+\(.*\))?$")
    drawn = set()
    for line in itertools.takewhile(edge.match, after):
        m = edge.match(line)
        assert m is not None
        drawn |= {(a, b) for a in m[1].split(", ") for b in (m[2] or m[3]).split(", ")}
    folder = ROOT / "crates/engine/src/generate"
    used = {(f.stem, g.stem) for f, gs in _rust_module_edges().items() if f.parent == folder for g in gs}
    assert len(used) > 20
    assert drawn == used, f"drawn, not used: {drawn - used}; used, not drawn: {used - drawn}"


def test_every_shipped_spec_is_named() -> None:
    """ARCHITECTURE.md's row of ``experiments/`` names every spec the package ships, so its list
    cannot go stale as specs are added."""
    text = (ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8")
    row = next(line for line in text.splitlines() if line.startswith("| `experiments/` |"))
    specs = {p.name for p in (PACKAGE / "experiments").glob("*.toml")}
    assert len(specs) > 10
    named = set(re.findall(r"`([\w-]+\.toml)`", row))
    assert specs <= named, f"specs ARCHITECTURE.md does not name: {sorted(specs - named)}"


STARTERS = (
    "subprocess", "multiprocessing", "dnscost.proc", "dnscost.engine", "dnscost.trial", "dnscost.runner",
    "dnscost.network", "dnscost.targets", "dnscost.lab", "dnscost.report", "dnscost.cluster.workers",
    "dnscost.certs",
)  # fmt: skip
"""Modules that start processes (or, for the report, sit above the analysis): what no module of
``analysis/`` imports."""


def _imported(source: str) -> set[tuple[str, str]]:
    """What ``source`` imports, as ``(module, name)``: ``("subprocess", "")`` for ``import
    subprocess``, ``("dnscost.certs", "DEFAULT_KEY_TYPE")`` for a name taken from a module."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found |= {(alias.name, "") for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                found.add((full, "") if _is_module(full) else (node.module, alias.name))
    return found


def test_the_analysis_starts_no_process() -> None:
    """ARCHITECTURE.md: the analysis never starts processes. No module of ``analysis/`` imports a
    module that does (``STARTERS``; ``certs.py`` runs openssl: the key types it makes are
    named in ``transports.py``)."""
    assert _imported("import subprocess\nfrom dnscost import report\nfrom dnscost.certs import X\n") == {
        ("subprocess", ""), ("dnscost.report", ""), ("dnscost.certs", "X"),
    }  # fmt: skip
    files = sorted((PACKAGE / "analysis").glob("*.py"))
    assert len(files) > 10
    found = []
    for f in files:
        for module, _name in _imported(f.read_text(encoding="utf-8")):
            if any(module == s or module.startswith(s + ".") for s in STARTERS):
                found.append(f"{f.name}: {module}")
    assert not found, found


def test_every_trial_flag_raised_is_defined_in_validity() -> None:
    """ARCHITECTURE.md: ``validity.py`` names every flag. The flags ``trial_summary.py`` raises
    on a trial (its ``(name, condition)`` pairs) are exactly ``validity.FLAGS``."""
    from dnscost import validity

    tree = ast.parse((PACKAGE / "trial_summary.py").read_text(encoding="utf-8"))
    assigned = [n for n in ast.walk(tree) if isinstance(n, ast.Assign) and ast.unparse(n.targets[0]) == "flags"]
    assert len(assigned) == 1
    raised = [
        t.elts[0].value
        for t in ast.walk(assigned[0].value)
        if isinstance(t, ast.Tuple) and len(t.elts) == 2
        and isinstance(t.elts[0], ast.Constant) and isinstance(t.elts[0].value, str)
    ]  # fmt: skip
    assert len(raised) == len(set(raised))
    assert set(raised) == set(validity.FLAGS)


def test_every_crate_path_the_repository_names_exists() -> None:
    """A path into ``crates/`` that a document, a test or a comment names (``crates/wire/tests/
    h2_differential.rs``) is a file of the repository: moving a file moves its mentions."""
    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    named = set()
    for f in files:
        if (ROOT / f).suffix in (".md", ".py", ".rs", ".toml", ".j2", ".sh", ".txt", "") and (ROOT / f).is_file():
            text = (ROOT / f).read_text(encoding="utf-8", errors="replace")
            named |= set(re.findall(r"\bcrates/[a-z0-9_]+/[\w./-]*\.(?:rs|toml)\b", text))
    assert len(named) > 8
    missing = sorted(n for n in named if not (ROOT / n).is_file())
    assert not missing, missing
