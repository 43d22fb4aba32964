"""stolen_cores.py: a load-timing test that failed runs once more only when the kernel counted
stolen time while it ran. Checked in a pytest of its own (a subprocess), with a /proc/stat the
inner tests write, so the kernel's count is the observer and nothing here depends on this VM."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

PLUGIN = Path(__file__).with_name("stolen_cores.py")

CONFTEST = """
from pathlib import Path
import stolen_cores
stolen_cores.PROC_STAT = Path(__file__).with_name("stat")
from stolen_cores import pytest_pyfunc_call, pytest_terminal_summary
"""

TESTS = '''
from pathlib import Path
import pytest

HERE = Path(__file__).parent


def steal(ticks):
    """The kernel's line, `ticks` more stolen and nothing else counted: all the time that passed was stolen."""
    stat = HERE / "stat"
    fields = stat.read_text().split()
    fields[8] = str(int(fields[8]) + ticks)
    stat.write_text(" ".join(fields) + "\\n")


def attempt(name):
    counter = HERE / f"{name}.count"
    n = int(counter.read_text()) + 1 if counter.exists() else 1
    counter.write_text(str(n))
    return n


@pytest.mark.load_timing
def test_stolen_then_fine(tmp_path):
    n = attempt("stolen_then_fine")
    assert not (tmp_path / "first").exists()  # a fresh directory for the second run
    (tmp_path / "first").write_text("")
    if n == 1:
        steal(50)
        assert False, "late by 6 ms"


@pytest.mark.load_timing
def test_not_stolen():
    attempt("not_stolen")
    assert False, "a bug"


@pytest.mark.load_timing
def test_stolen_twice():
    attempt("stolen_twice")
    steal(50)
    assert False, "late again"


def test_unmarked_stolen():
    attempt("unmarked_stolen")
    steal(500)
    assert False, "late, not marked"
'''


@pytest.fixture
def inner(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(stolen_cores=PLUGIN.read_text())
    pytester.makeconftest(CONFTEST)
    pytester.makeini("[pytest]\nmarkers =\n    load_timing: x\n")
    pytester.makepyfile(test_inner=TESTS)
    (pytester.path / "stat").write_text("cpu  100 0 100 1000 0 0 0 0 0 0\n")
    return pytester


def _count(pytester: pytest.Pytester, name: str) -> int:
    return int((pytester.path / f"{name}.count").read_text())


def test_only_a_marked_test_that_failed_on_stolen_cores_runs_again(inner: pytest.Pytester) -> None:
    result = inner.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=3)
    assert _count(inner, "stolen_then_fine") == 2
    assert _count(inner, "stolen_twice") == 2
    assert _count(inner, "not_stolen") == 1  # the cores were ours: a failure is a failure
    assert _count(inner, "unmarked_stolen") == 1
    out = result.stdout.str()
    assert "load-timing tests run again after stolen cores" in out
    assert (
        "test_inner.py::test_stolen_then_fine: 100.0% of the cores stolen (/proc/stat) while it failed "
        "(AssertionError: late by 6 ms); run again: passed"
    ) in out
    assert "test_inner.py::test_stolen_twice: 100.0% of the cores stolen" in out
    assert "run again: failed again" in out
    assert "test_not_stolen: " not in out.split("run again after stolen cores")[1]
    result.stdout.fnmatch_lines(["FAILED test_inner.py::test_stolen_twice - AssertionError: late again*"])
