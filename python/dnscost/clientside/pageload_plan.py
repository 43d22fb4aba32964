"""A page-load run's settings and its plan: rounds of sessions, each transport once a round in a
shuffled order, each session a warm-up and every page under names of its own
(:mod:`dnscost.clientside.pageload` describes the experiment). Pure."""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass, field

from dnscost.clientside.corpus import Corpus, CorpusParams, host_name, page_path
from dnscost.errors import UsageError
from dnscost.lab.browsers import BROWSERS

__all__ = ["DEFAULT_SETUPS", "SETUPS", "PageloadSettings", "PlannedLoad", "Session", "page_url", "plan_sessions"]

SETUPS = ("do53", "dot", "dot-unbound", "dot-nodelay", "doh")
"""Every resolver set-up a run may take (how the browser's host reaches the resolver; the
``--transports`` option and a spec's ``pageload.transports`` name them): ``dot`` is Stubby,
``dot-unbound`` unbound, ``dot-nodelay`` Stubby with Nagle's algorithm off, a diagnostic (see
:mod:`dnscost.clientside.pageload`)."""
DEFAULT_SETUPS = ("do53", "dot", "doh")


@dataclass(frozen=True)
class PageloadSettings:
    """One run's settings (see :mod:`dnscost.clientside.pageload`)."""

    pages: int = 10
    rounds: int = 3
    transports: tuple[str, ...] = DEFAULT_SETUPS
    browser: str = "chromium"
    seed: int = 1
    loads_per_page: int = 1
    preset: str = "none"
    """A label for the lab's network (the caller's preset); recorded, not applied here."""
    page_timeout_s: float = 30.0
    settle_s: float = 6.0
    """How long a started browser rests on a local page before its first load."""
    stub_idle_timeout_ms: int = 10_000
    ttl_s: int = 300
    """TTL of the corpus' answers."""
    corpus: CorpusParams = field(default_factory=CorpusParams)

    def check(self) -> None:
        """Raises :class:`UsageError` naming the first bad setting."""
        if self.pages < 1 or self.rounds < 1 or self.loads_per_page < 1:
            raise UsageError("pageload: pages, rounds and loads per page must be at least 1")
        if not self.transports or len(set(self.transports)) != len(self.transports):
            raise UsageError("pageload: give each transport once")
        unknown = set(self.transports) - set(SETUPS)
        if unknown:
            raise UsageError(f"pageload: unknown transports {sorted(unknown)} (known: {', '.join(SETUPS)})")
        if self.browser not in BROWSERS:
            raise UsageError(f"pageload: unknown browser {self.browser!r} (known: {', '.join(BROWSERS)})")
        if self.page_timeout_s <= 0 or self.settle_s < 0 or self.stub_idle_timeout_ms < 0 or self.ttl_s < 0:
            raise UsageError("pageload: timeouts and the TTL must be positive")
        if not 0 < self.corpus.size_scale <= 10:
            raise UsageError("pageload: the size scale must be in (0, 10]")

    def as_dict(self) -> dict[str, object]:
        """The settings as ``pageload.json`` records them."""
        d = asdict(self)
        d["transports"] = list(self.transports)
        return d


@dataclass(frozen=True)
class PlannedLoad:
    load: int
    """The load's number in the run: its hostnames are its own."""
    page: int
    index: int
    """Its place in its session (0: the warm-up)."""
    warmup: bool


@dataclass(frozen=True)
class Session:
    number: int
    round: int
    transport: str
    loads: tuple[PlannedLoad, ...]


def plan_sessions(settings: PageloadSettings, corpus: Corpus) -> list[Session]:
    """The run's sessions, in order: rounds; in each, every transport once in a shuffled order
    over the same pages in the round's shuffled order; each session's first load a warm-up
    of the corpus' smallest page. Every load gets the next number. Pure."""
    rng = random.Random(f"dnscost-pageload-plan:{settings.seed}")
    warm = min(corpus.pages, key=lambda p: (p.requests, p.index)).index
    sessions: list[Session] = []
    number = 0
    for r in range(settings.rounds):
        order = list(settings.transports)
        rng.shuffle(order)
        pages = list(range(len(corpus.pages)))
        rng.shuffle(pages)
        for transport in order:
            loads = [PlannedLoad(number, warm, 0, True)]
            number += 1
            for _ in range(settings.loads_per_page):
                for p in pages:
                    loads.append(PlannedLoad(number, p, len(loads), False))
                    number += 1
            sessions.append(Session(len(sessions), r, transport, tuple(loads)))
    return sessions


def page_url(load: PlannedLoad, tld: str) -> str:
    """The URL of ``load``'s page, on its own host name."""
    return f"http://{host_name(load.page, load.load, 0, tld)}{page_path(load.load)}"
