"""One ``dnscost client`` experiment: its spec's parts in turn, each into a directory of its own
under the run's, then the report.

    <run>/client.json        the spec resolved (presets' definitions included), versions, status
    <run>/check/             the latency check (check.json, check.jsonl, per RTT the engine's records)
    <run>/times/<target>/    response times per preset, cache and transport (times.json)
    <run>/pageload/          page loads per preset (clientside/pageload.py)
    <run>/report.html        every part's tables and figures (clientside/report.py)

What a part measured is kept when a later part fails or is interrupted; ``client.json`` says
which parts finished."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from dnscost import __version__
from dnscost.clientside.spec import ClientSpec
from dnscost.results import write_json

__all__ = ["run_client"]


def run_client(spec: ClientSpec, out: Path, *, say: Any = print) -> dict[str, object]:
    """Runs every part of ``spec`` into ``out``; returns ``client.json``'s content."""
    from dnscost.engine import engine_version

    out.mkdir(parents=True, exist_ok=True)
    finished: list[str] = []
    # The parts done, in client.json as they end.
    doc: dict[str, object] = {
        "dnscost": __version__,
        "engine": engine_version(),
        "started_unix_s": round(time.time(), 3),
        **spec.to_dict(),
        "finished": finished,
    }
    write_json(out / "client.json", doc)
    if spec.check is not None:
        from dnscost.clientside.latency import run_check, table

        c = spec.check
        say(f"client: latency check at {', '.join(f'{r:g}' for r in c.rtt_ms)} ms RTT ({','.join(c.transports)})")
        rows = run_check(out / "check", c.rtt_ms, c.transports, queries=c.queries)
        say(table(rows))
        finished.append("check")
        write_json(out / "client.json", doc)
    if spec.times is not None:
        from dnscost.clientside.times import TimesSettings, run_times

        t = spec.times
        for target in t.targets:
            say(f"client: response times, {target}, presets {', '.join(p.name for p in t.presets)}")
            settings = TimesSettings(target, t.transports, t.qps, t.queries, caches=t.caches)
            for r in run_times(out / "times" / target, t.presets, t.upstream, settings):
                say(
                    f"  {r['preset']:<10} {r['cache']:<5} {r['transport']:<5} median {r['p50_ms']:8.1f} ms  "
                    f"p90 {r['p90_ms']:8.1f} ms  {r['answered']}/{r['offered']} answered"
                )
        finished.append("times")
        write_json(out / "client.json", doc)
    if spec.pageload is not None:
        from dnscost.clientside.pageload import run_pageload_presets
        from dnscost.clientside.pageload_plan import PageloadSettings

        p = spec.pageload
        say(f"client: page loads, {p.browser}, presets {', '.join(x.name for x in p.presets)}")
        page_settings = PageloadSettings(pages=p.pages, rounds=p.rounds, transports=p.transports, browser=p.browser)
        run_pageload_presets(out / "pageload", p.presets, page_settings)
        finished.append("pageload")
        write_json(out / "client.json", doc)
    doc["ended_unix_s"] = round(time.time(), 3)
    write_json(out / "client.json", doc)
    return doc
