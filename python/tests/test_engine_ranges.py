"""The ranges and choices a spec accepts for the engine's knobs (``dnscost.spec``) are the
engine's own (``crates/load/src/config.rs``): a value a spec accepts never fails when the
engine starts, and a value the engine refuses is refused with the spec's one line. The engine is
the observer: its ``generate --check`` says each range (``out of range LO..=HI``), and the spec
must accept both ends and refuse just outside them."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from dnscost.engine import engine_path
from dnscost.errors import UsageError
from dnscost.spec import TLS_GROUPS, parse_spec

# (knob, a transport it applies to, whether it takes integers, what else it needs)
NUMERIC: list[tuple[str, str, bool, dict[str, object]]] = [
    ("connections", "tcp", True, {}),
    ("in_flight", "tcp", True, {}),
    ("resumption", "dot", False, {}),
    ("early_data", "doq", False, {"resumption": 1.0}),
    ("open_rate", "tcp", False, {}),
    ("rate", "udp", False, {}),
]
RANGE = re.compile(r"out of range ([0-9.e+-]+)\.\.=([0-9.e+-]+)")


def engine_check(tmp_path: Path, transport: str, **fields: object) -> str | None:
    """The engine's one-line refusal of a configuration, or None when it accepts it."""
    config = {"transport": transport, "target": "127.0.0.1:853", "synthetic": 10, **fields}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    p = subprocess.run(
        [str(engine_path()), "generate", "--config", str(path), "--check"], capture_output=True, text=True, timeout=30
    )
    return None if p.returncode == 0 else p.stderr.strip().splitlines()[-1]


def spec_check(knob: str, transport: str, value: object, **also: object) -> str | None:
    """The spec's one-line refusal of a group with ``knob = value``, or None when it accepts it."""
    text = f'name = "r"\ntargets = ["builtin"]\n[[group]]\nname = "g"\ntransports = ["{transport}"]\n'
    text += "".join(f"{k} = {json.dumps(v)}\n" for k, v in {knob: value, **also}.items())
    try:
        parse_spec(text)
    except UsageError as e:
        return str(e)
    return None


@pytest.mark.parametrize(("knob", "transport", "integer", "also"), NUMERIC)
def test_a_spec_accepts_exactly_the_engines_range(
    knob: str, transport: str, integer: bool, also: dict[str, object], tmp_path: Path
) -> None:
    refusal = engine_check(tmp_path, transport, **{knob: 4_000_000_000, **also})  # past any range, within u32
    m = RANGE.search(refusal or "")
    assert m, refusal
    low, high = (int(float(v)) if integer else float(v) for v in m.groups())
    for inside in (low, high):
        assert engine_check(tmp_path, transport, **{knob: inside, **also}) is None, (knob, inside)
        assert spec_check(knob, transport, inside, **also) is None, (knob, inside)
    step = 1 if integer else max(abs(low), 1e-3) / 2
    for outside in (low - step, high + (1 if integer else high / 10)):
        assert engine_check(tmp_path, transport, **{knob: outside, **also}) is not None, (knob, outside)
        assert spec_check(knob, transport, outside, **also) is not None, (knob, outside)


@pytest.mark.parametrize(
    ("knob", "transport", "choices"),
    [
        ("doh_method", "doh", ("post", "get")),
        ("doh_headers", "doh", ("minimal", "browser")),
        ("tls_group", "dot", TLS_GROUPS),
    ],
)
def test_a_spec_offers_exactly_the_engines_choices(
    knob: str, transport: str, choices: tuple[str, ...], tmp_path: Path
) -> None:
    schema = json.loads((Path(__file__).parents[2] / "schemas" / "engine-config.schema.json").read_text())
    prop = schema["properties"][knob]
    ref = next(part["$ref"] for part in prop.get("anyOf", prop.get("allOf", [])) if "$ref" in part)
    definition = schema["definitions"][ref.rsplit("/", 1)[1]]
    engine = {v for alt in definition.get("oneOf", [definition]) for v in alt.get("enum", [])}
    assert engine == set(choices), f"{knob}: the engine's schema offers {sorted(engine)}, the spec {sorted(choices)}"
    for value in choices:
        assert engine_check(tmp_path, transport, **{knob: value}) is None and spec_check(knob, transport, value) is None
    assert engine_check(tmp_path, transport, **{knob: "other"}) is not None
    assert spec_check(knob, transport, "other") is not None
