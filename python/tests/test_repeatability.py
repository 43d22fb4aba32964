"""The repeatability the docs state is stored and recomputed: two consecutive runs of the
README's main command (``dnscost reproduce --quick``) from one commit, kept in
``docs/repeatability/a`` and ``b`` (``dnscost keep``), compared as ``bench/repeatability`` and
``dnscost compare`` do (:class:`dnscost.compare.Repeatability`); the sentences of
docs/experiments.md and README.md that give the figures are checked against the comparison, and
README.md's sample output is run A's headline, computed again line for line."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from dnscost.analysis import analyze, headline
from dnscost.compare import Repeatability, compare
from dnscost.report.headline import format_headline

ROOT = Path(__file__).parents[2]
KEPT = ROOT / "docs" / "repeatability"


def _text(path: Path) -> str:
    return re.sub(r"\s+", " ", path.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def repeatability() -> Repeatability:
    return Repeatability.of(compare(KEPT / "a", KEPT / "b"))


def test_both_runs_ran_one_commit_one_after_the_other() -> None:
    a, b = (json.loads((KEPT / side / "run.json").read_text()) for side in ("a", "b"))
    assert a["dnscost_source"]["commit"] == b["dnscost_source"]["commit"]
    assert not a["dnscost_source"]["dirty"] and not b["dnscost_source"]["dirty"]
    assert a["spec"]["name"] == b["spec"]["name"] == "study-quick"
    assert 0 <= b["created_unix_ms"] - a["finished_unix_ms"] < 10 * 60_000, "consecutive"


def test_the_docs_state_the_stored_comparison(repeatability: Repeatability) -> None:
    rep = repeatability
    largest = rep.largest
    assert largest is not None and largest.rel_diff is not None and rep.median is not None
    figures = (
        f"{rep.within} of {len(rep.differences)} headline ratios within ±10 %, median difference "
        f"{100 * rep.median:.1f} %, largest {100 * abs(largest.rel_diff):.1f} %"
    )
    assert rep.summary().startswith(figures)
    commit = json.loads((KEPT / "a" / "run.json").read_text())["dnscost_source"]["commit"][:7]
    for doc in (ROOT / "docs" / "experiments.md", ROOT / "README.md"):
        text = _text(doc)
        assert figures in text, f"{doc.name} should say: {figures!r}"
        assert "docs/repeatability" in text and commit in text, f"{doc.name} should name the runs and {commit}"
    # The ratios that cannot differ: shares resumed at 1 in both runs (servers that resume every
    # reconnection), and the figure without them.
    both = [r for r in rep.rows if r.rel_diff is not None]
    fixed = [r for r in both if r.a == r.b == 1.0]
    assert fixed and all("resumed_share" in r.metric for r in fixed)
    rest = [abs(r.rel_diff or 0.0) for r in both if r not in fixed]
    within = sum(1 for d in rest if d <= rep.tolerance)
    assert f"{len(fixed)} of the {len(both)} cannot differ" in _text(ROOT / "docs" / "experiments.md")
    assert f"without them, {within} of {len(rest)} are within ±10 %" in _text(ROOT / "docs" / "experiments.md")
    assert f"{len(fixed)} of the {len(both)} are 1.000 in both by construction" in _text(ROOT / "README.md")


def test_readme_sample_is_run_a() -> None:
    """README.md's sample output is run A's headline, as ``dnscost report docs/repeatability/a``
    prints it."""
    a = analyze(KEPT / "a")
    lines = format_headline(headline(a), a.tables["consistency"].rows, a.tables["clients"].rows)
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    sample = readme[readme.index("$ .venv/bin/dnscost reproduce --quick") :].split("```")[0]
    assert len(lines) > 20
    assert "\n".join(lines) in sample
