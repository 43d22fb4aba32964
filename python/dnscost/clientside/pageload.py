"""Page loads with a real browser through each DNS transport: the synthetic corpus
(:mod:`.corpus`) served in the lab's server namespace (:mod:`.webserver`), loaded by Chromium
or Firefox in the client namespace, its names answered by ``dnscost-engine serve`` over

- ``do53``: the system resolver (the client namespace's ``resolv.conf`` points at the server,
  glibc's defaults: timeout 5 s, 2 attempts), the browser's DoH off;
- ``dot``: Stubby (getdns) in the client namespace as a stub on 127.0.0.1:53, as Hounsel et
  al. used it: one upstream, TLS authenticated by name against the run's CA, no DNSSEC, no
  round robin, its connection reused and closed after 10 s idle (``idle_timeout: 10000``, its
  default); no cache. ``resolv.conf`` points at it;
- ``dot-unbound``: unbound in its place (one thread, ``tcp-reuse-timeout: 10000``), to show
  what the stub changes. Its cache is left on: ``cache-max-ttl: 0`` would rewrite every
  answer's TTL to 0 on its way to the browser, which would then resolve a host again for each
  connection, a cost no cacheless stub adds; the cache never answers a page's name, since
  every load asks names never asked before, and the run checks it (each session's names asked
  upstream, ``dns_check`` in ``pageload.json``);

- ``dot-nodelay``: a diagnostic, Stubby with ``TCP_NODELAY`` forced on its TLS connection by an
  ``LD_PRELOAD`` shim (:class:`~dnscost.lab.stubs.StubbyNoDelay`): neither stub sets it, so a query written while
  an earlier one is unacknowledged waits for that acknowledgement (Nagle's algorithm), about a
  round trip; this measures what that costs;

  The stubs reach the lab's DoT through :mod:`.dotrelay`, a front on the server's port 853
  that writes every answer in a TLS record of its own (getdns reads one answer per read event,
  and the responder writes the answers ready at once in one record: Stubby would hold all but
  the first until the next packet); each DoT connection reaches the responder as one tcp
  connection of its own;
- ``doh``: the browser's own DoH to ``https://<server>/dns-query`` (Chromium: managed policy,
  secure mode; Firefox: TRR mode 3).

A run is made of rounds; in each round every transport once, in an order shuffled with the
run's seed, each a *session*: the browser started with a fresh profile on a local page where it
rests ``settle_s`` (:data:`~.pageload_session.START_PAGE`), a warm-up load (recorded, flagged, left out of the
analysis: the DoH or DoT connection then exists, as in a browser that has been running), then
every page once (or
``loads_per_page`` times) in the round's order, each load under names of its own. A page
sends its timings to the web server and goes on to the next URL by itself; a load that does
not reach its load event within ``page_timeout_s`` is reported as failed by the page, and a
session that stops reporting is ended (its remaining loads recorded as failed).

Files in the output directory:

- ``loads.jsonl``: one line per load, written as it comes (:func:`~.pageload_records.load_record`);
- ``sessions.jsonl``: one line per session;
- ``pageload.json``: the settings resolved, versions, the corpus, the plan's counts, and after
  the run each session's names as the resolver saw them and each DoT session's connections
  (``dns_check``, :mod:`.pageload_check`);
- ``beacons.jsonl`` (the pages' raw reports), ``queries.jsonl`` and ``connections.jsonl``
  (the resolver's logs), ``dot-connections.jsonl`` (the DoT front's log of the stubs'
  connections), ``corpus.zone``, ``pages/``, ``sessions/<n>/`` (browser and stub logs).

:func:`run_pageload_presets` runs the whole experiment once per network preset, each in a lab
of its own joined by the preset's emulated link, into ``<out>/<preset>/`` (the files above),
with ``<out>/presets.json`` listing them and, from
:func:`~dnscost.clientside.pageload_analysis.write_outputs`, ``<out>/summary.json``,
``<out>/table.md`` and ``<out>/figures/``.

The parts: the settings and the plan of sessions (:mod:`.pageload_plan`), one run in a lab
(:mod:`.pageload_run`), one session (:mod:`.pageload_session`), a load's record from its page's
report (:mod:`.pageload_records`), the resolver's view of the names and DoT connections
(:mod:`.pageload_check`); the browsers and the DoT stubs are the lab's
(:mod:`dnscost.lab.browsers`, :mod:`dnscost.lab.stubs`). Here: a run in a lab of its own, one
per network preset, and ``python -m dnscost.clientside.pageload``."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import cast

from dnscost import __version__
from dnscost.clientside.corpus import CorpusParams
from dnscost.clientside.pageload_analysis import PresetEntry, PresetsRecord
from dnscost.clientside.pageload_plan import SETUPS, PageloadSettings
from dnscost.clientside.pageload_run import run_pageloads
from dnscost.errors import DnscostError, UsageError
from dnscost.lab.browsers import BROWSERS
from dnscost.lab.lab import Lab
from dnscost.lab.presets import Preset
from dnscost.results import write_json

__all__ = ["PRESETS_FORMAT", "main", "run_in_new_lab", "run_pageload_presets"]


def run_in_new_lab(out: Path, settings: PageloadSettings) -> Path:
    """:func:`run_pageloads` in a plain lab made for it, removed afterwards (also on Ctrl-C)."""
    lab = Lab.create()
    try:
        return run_pageloads(lab, out, settings)
    finally:
        lab.remove()


PRESETS_FORMAT = 1


def run_pageload_presets(out: Path, presets: Sequence[Preset], settings: PageloadSettings) -> Path:
    """:func:`run_pageloads` once per preset, in that order, each in a lab of its own joined by
    the preset's emulated link (a plain veth pair for a preset without shaping), into
    ``out/<preset>/``; every record carries the preset's name (``settings.preset`` is replaced).
    ``out/presets.json`` lists the presets (their parameters, directory, status, and the link's
    counters once its lab is gone), rewritten as each ends; a preset whose run fails is recorded
    (``status: failed``, ``error``) and the next one runs. Then the analysis
    (:func:`~dnscost.clientside.pageload_analysis.write_outputs`): ``summary.json``, ``table.md``,
    ``figures/``. Returns ``presets.json``."""
    from dnscost.clientside.pageload_analysis import write_outputs

    settings.check()
    names = [p.name for p in presets]
    if not names:
        raise UsageError("pageload: give at least one preset")
    if len(set(names)) != len(names):
        raise UsageError("pageload: give each preset once")
    out.mkdir(parents=True, exist_ok=True)
    doc: PresetsRecord = {
        "format": PRESETS_FORMAT,
        "dnscost": __version__,
        "settings": {k: v for k, v in settings.as_dict().items() if k != "preset"},
        "presets": {p.name: cast(PresetEntry, {**p.to_dict(), "dir": p.name, "status": "pending"}) for p in presets},
        "started_unix_us": time.time_ns() // 1000,
        "status": "running",
    }
    write_json(out / "presets.json", doc)
    status = "interrupted"
    try:
        for preset in presets:
            entry = doc["presets"][preset.name]
            entry["status"] = "running"
            entry["started_unix_us"] = time.time_ns() // 1000
            write_json(out / "presets.json", doc)
            run_dir = out / preset.name
            lab = Lab.create(preset if preset.shaped else None, workdir=run_dir / "lab")
            try:
                run_pageloads(lab, run_dir, replace(settings, preset=preset.name))
                entry["status"] = "done"
            except DnscostError as e:
                entry["status"], entry["error"] = "failed", str(e)
            finally:
                if entry["status"] == "running":
                    entry["status"] = "interrupted"
                lab.remove()
                entry["link"] = lab.link_stats()
                entry["ended_unix_us"] = time.time_ns() // 1000
                write_json(out / "presets.json", doc)
        status = "done"
    finally:
        doc["status"] = status
        doc["ended_unix_us"] = time.time_ns() // 1000
        write_json(out / "presets.json", doc)
    write_outputs(out)
    return out / "presets.json"


def main(argv: list[str] | None = None) -> int:
    """``python -m dnscost.clientside.pageload``: a run in a plain lab, or with ``--presets`` one
    per network preset (:func:`run_pageload_presets`), for manual runs."""
    parser = argparse.ArgumentParser(prog="python -m dnscost.clientside.pageload", description=__doc__.splitlines()[0])
    d = PageloadSettings()
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--pages", type=int, default=d.pages)
    parser.add_argument("--rounds", type=int, default=d.rounds)
    parser.add_argument("--transports", default=",".join(d.transports), help=f"comma-separated, of {','.join(SETUPS)}")
    parser.add_argument("--browser", default=d.browser, choices=BROWSERS)
    parser.add_argument("--seed", type=int, default=d.seed)
    parser.add_argument("--loads-per-page", type=int, default=d.loads_per_page)
    parser.add_argument("--preset", default=d.preset, help="the label recorded for a plain lab's network")
    parser.add_argument(
        "--presets", help="comma-separated network presets (dnscost client presets), one lab each, e.g. lte,3g"
    )
    parser.add_argument("--presets-file", type=Path, help="a TOML file of more presets")
    parser.add_argument("--page-timeout", type=float, default=d.page_timeout_s, help="seconds")
    parser.add_argument("--size-scale", type=float, default=1.0, help="every corpus size multiplied by this")
    args = parser.parse_args(argv)
    settings = PageloadSettings(
        pages=args.pages,
        rounds=args.rounds,
        transports=tuple(t for t in args.transports.split(",") if t),
        browser=args.browser,
        seed=args.seed,
        loads_per_page=args.loads_per_page,
        preset=args.preset,
        page_timeout_s=args.page_timeout,
        corpus=replace(CorpusParams(), size_scale=args.size_scale),
    )
    try:
        if args.presets:
            from dnscost.clientside.pageload_analysis import presets_table, summarise_presets
            from dnscost.lab.presets import load_presets

            known = load_presets(args.presets_file)
            chosen = [t.strip() for t in args.presets.split(",") if t.strip()]
            unknown = [n for n in chosen if n not in known]
            if unknown:
                raise UsageError(f"pageload: unknown presets {unknown} (known: {', '.join(known)})")
            out = args.out.absolute()
            run_pageload_presets(out, [known[n] for n in chosen], settings)
            print(presets_table(summarise_presets(out)))
            return 0
        path = run_in_new_lab(args.out.absolute(), settings)
    except DnscostError as e:
        print(f"pageload: {e}", file=sys.stderr)
        return e.exit_code
    from dnscost.clientside.pageload_analysis import summarise_run

    print(json.dumps(summarise_run(path.parent), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
