"""A load-timing test that fails while the hypervisor stole this machine's cores runs once more.

Tests marked ``load_timing`` assert what a load does in time (a latency over an emulated link,
a generator that keeps its schedule, a trial with no validity flag). On a shared VM the
hypervisor runs other machines on our cores for seconds at a time, and such a test then fails
for a reason that is not in the code. The kernel counts that time (``steal`` in ``/proc/stat``),
so the test does not have to guess: when a marked test fails and the kernel counted at least
``MIN_STOLEN`` of the machine's core time stolen while it ran, it runs once more with the same
fixtures (a fresh ``tmp_path`` below the first); a second failure fails, and so does a first
failure on a machine whose cores were its own. Every retry is listed at the end of the run with
the share stolen and the first failure's last line.

conftest.py imports the hooks; a test can point ``PROC_STAT`` elsewhere.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

PROC_STAT = Path("/proc/stat")
MIN_STOLEN = 0.005
"""Share of the machine's core time (all cores, the attempt's wall time) stolen by the
hypervisor at or above which a failed load-timing test runs again."""


@dataclass(frozen=True)
class Retry:
    nodeid: str
    stolen: float
    first_failure: str
    passed: bool = False


RETRIES = pytest.StashKey[list[Retry]]()


def _ticks() -> tuple[int, int]:
    """(stolen, all) clock ticks of every core so far, from the kernel's aggregate ``cpu`` line:
    user nice system idle iowait irq softirq steal."""
    fields = [int(f) for f in PROC_STAT.read_text().split("\n", 1)[0].split()[1:9]]
    return fields[7], sum(fields)


def stolen_share(before: tuple[int, int], after: tuple[int, int]) -> float:
    elapsed = after[1] - before[1]
    return (after[0] - before[0]) / elapsed if elapsed > 0 else 0.0


def _last_line(error: BaseException) -> str:
    lines = [line for line in str(error).splitlines() if line.strip()]
    return f"{type(error).__name__}: {lines[0] if lines else ''}"[:200]


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    if pyfuncitem.get_closest_marker("load_timing") is None:
        return None
    retries = pyfuncitem.config.stash.setdefault(RETRIES, [])
    kwargs: dict[str, Any] = {name: pyfuncitem.funcargs[name] for name in pyfuncitem._fixtureinfo.argnames}
    before = _ticks()
    try:
        pyfuncitem.obj(**kwargs)
        return True
    except (Exception, pytest.fail.Exception) as error:
        share = stolen_share(before, _ticks())
        if share < MIN_STOLEN:
            raise
        first = _last_line(error)
    if isinstance(kwargs.get("tmp_path"), Path):
        kwargs["tmp_path"] = kwargs["tmp_path"] / "retry"
        kwargs["tmp_path"].mkdir()
    try:
        pyfuncitem.obj(**kwargs)
    except BaseException:
        retries.append(Retry(pyfuncitem.nodeid, share, first))
        raise
    retries.append(Retry(pyfuncitem.nodeid, share, first, passed=True))
    return True


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    retries = config.stash.get(RETRIES, [])
    if not retries:
        return
    terminalreporter.section("load-timing tests run again after stolen cores")
    for r in retries:
        verdict = "passed" if r.passed else "failed again"
        terminalreporter.write_line(
            f"{r.nodeid}: {r.stolen:.1%} of the cores stolen (/proc/stat) while it failed "
            f"({r.first_failure}); run again: {verdict}"
        )
