"""Hostile populations and captures, generated (issue 57, item 5): every population TOML that
``dnscost load --population`` is given and every capture ``dnscost population`` reads is
either taken or refused in one line (``dnscost: ...``) with a non-zero exit, never a traceback.

Cheap: nothing is started. ``dnscost load`` runs in this process up to the step before its run
begins (``pin_self``, after the population, the settings and the engine's own check of the
classes), where the test stops it; ``dnscost population`` runs whole, its engine reading each
small capture in milliseconds. A population ``dnscost population`` could not have written (a
class's clients, rate or share not a figure it writes) is refused naming the class and the
field."""

from __future__ import annotations

import contextlib
import io
import math
import re
import signal
import struct
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from dnscost import cli
from dnscost.capturegen import ClassSpec, write_capture
from hypothesis import HealthCheck, Phase, event, given, settings
from hypothesis import strategies as st

REPO = Path(__file__).parents[2]
OPERATOR = REPO / "python" / "dnscost" / "experiments" / "populations" / "operator.toml"
CHEAP = settings(
    max_examples=100,
    deadline=None,
    database=None,
    phases=[Phase.explicit, Phase.generate, Phase.shrink],  # no explaining: it runs a failure hundreds of times
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)


class Started(Exception):
    """``dnscost load`` got past every check: its run would begin here."""


def _refuse_to_start(*_: object) -> None:
    raise Started


@contextlib.contextmanager
def _signals_kept() -> Iterator[None]:
    """``cli.main`` takes SIGINT and SIGTERM; pytest's are put back."""
    kept = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, handler in kept.items():
            signal.signal(s, handler)


def _dnscost(*argv: str) -> tuple[int | None, str]:
    """Runs ``dnscost ARGV`` in this process: its exit code (None: a load would have started)
    and what it wrote on stderr. Any exception but :class:`Started` fails the test with its
    traceback."""
    err = io.StringIO()
    with _signals_kept(), contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            rc: int | None = cli.main(list(argv))
        except Started:
            rc = None
    return rc, err.getvalue()


def _one_line_refusal(rc: int | None, stderr: str) -> str:
    assert rc not in (None, 0), stderr
    assert stderr.startswith("dnscost: ") and stderr.count("\n") == 1, stderr
    assert "Traceback" not in stderr and "RUST_BACKTRACE" not in stderr and "panicked" not in stderr, stderr
    return stderr.strip()


def _taken_or_one_line(rc: int | None, stderr: str) -> None:
    if rc in (None, 0):
        event("taken")
    else:
        # What refused it, for --hypothesis-show-statistics: the message less its values.
        event("refused: " + re.sub(r"[^a-z ]", "", _one_line_refusal(rc, stderr).split(": ", 2)[-1])[:30])


# --- populations ---------------------------------------------------------------------------


def _toml(v: object) -> str:
    """A value as TOML writes it (inline tables and arrays)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf") if math.isinf(v) else repr(v)
    if isinstance(v, int):
        return str(v)
    if isinstance(v, str):
        return _string(v)
    if isinstance(v, list):
        return "[" + ", ".join(_toml(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{_string(k)} = {_toml(x)}" for k, x in v.items()) + " }"
    raise TypeError(type(v))


def _string(s: str) -> str:
    """A TOML basic string: printable ASCII as it is, any other character escaped."""
    return '"' + "".join(c if " " <= c <= "~" and c not in '"\\' else f"\\U{ord(c):08x}" for c in s) + '"'


def _population_text(doc: dict[str, Any]) -> str:
    """The document as TOML: ``class``, when a list of tables, as ``[[class]]`` tables."""
    classes = doc.get("class")
    tables = isinstance(classes, list) and all(isinstance(k, dict) for k in classes)
    lines = [f"{_string(k)} = {_toml(v)}" for k, v in doc.items() if not (tables and k == "class")]
    for k in classes if tables else []:
        lines += ["[[class]]", *(f"{_string(f)} = {_toml(v)}" for f, v in k.items()), ""]
    return "\n".join(lines)


SCALARS = st.one_of(
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
)
VALUES = st.recursive(
    SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
)
"""Any TOML value."""

NAMES = st.from_regex(r"[a-z][a-z0-9-]{0,15}", fullmatch=True)
PROFILES = st.fixed_dictionaries(
    {
        "transport": st.sampled_from(["udp", "tcp", "dot", "doh", "doq", "doh3"]),
        "query_interval_ms": st.integers(1, 60_000),
        "name": NAMES,
    },
    optional={
        "lifetime": st.fixed_dictionaries({"queries": st.integers(1, 100)}),
        "idle_timeout_ms": st.integers(100, 60_000),
        "close": st.sampled_from(["graceful", "rst"]),
        "resumption": st.floats(0, 1),
    },
)


@st.composite
def populations(draw: st.DrawFn) -> dict[str, Any]:
    """A population as ``dnscost population`` writes one (its classes' figures, shares summing
    to 1 or none), then a few of its fields, anywhere, replaced by any value or left out."""
    n = draw(st.integers(1, 4))
    weights = draw(st.lists(st.floats(0.01, 1), min_size=n, max_size=n))
    shares = draw(st.booleans())
    classes = [
        {
            "name": draw(NAMES),
            "clients": draw(st.integers(1, 1000)),
            "rate_qps": draw(st.floats(0, 100)),
            **({"share": w / sum(weights)} if shares else {}),
            "profile": draw(PROFILES),
        }
        for w in weights
    ]
    doc: dict[str, Any] = {"duration_s": 10.0, "class": classes}
    for _ in range(draw(st.integers(0, 3))):
        k = draw(st.sampled_from(classes))
        table = draw(st.sampled_from([doc, k, *([k["profile"]] if isinstance(k.get("profile"), dict) else [])]))
        key = draw(st.sampled_from([*table, "names", "bogus"]))
        if draw(st.booleans()):
            table.pop(key, None)
        else:
            table[key] = draw(VALUES)
    return doc


@pytest.fixture(scope="module")
def load_stops_before_it_starts() -> Iterator[None]:
    with pytest.MonkeyPatch.context() as m:
        m.setattr("dnscost.commands.load.pin_self", _refuse_to_start)
        yield


def _load(path: Path, *more: str) -> tuple[int | None, str]:
    return _dnscost("load", "--target", "builtin", "--population", str(path), "--duration", "1s", *more)


def test_the_shipped_population_is_taken(tmp_path: Path, load_stops_before_it_starts: None) -> None:
    """The check stops where a load would start: a good population gets there."""
    assert _load(OPERATOR) == (None, "")


@CHEAP
@given(
    doc=populations(),
    cut=st.sampled_from([None, None, None, 0.1, 0.5, 0.9, 0.99]),
    scale=st.sampled_from([[], ["--scale", "0.5"], ["--rate", "100"]]),
)
def test_any_population_is_taken_or_refused_in_one_line(
    tmp_path: Path, load_stops_before_it_starts: None, doc: dict[str, Any], cut: float | None, scale: list[str]
) -> None:
    """A population, possibly damaged and possibly cut short (at that share of its length)."""
    text = _population_text(doc)
    path = tmp_path / "p.toml"
    path.write_text(text if cut is None else text[: round(len(text) * cut)])
    _taken_or_one_line(*_load(path, *scale))


BAD_FIGURES = {
    "clients": st.one_of(st.booleans(), st.integers(max_value=0), st.floats(allow_nan=True), st.text(max_size=3)),
    "rate_qps": st.one_of(
        st.booleans(), st.floats(max_value=-1e-9), st.sampled_from([math.nan, math.inf, -math.inf]), st.text(max_size=3)
    ),
    "share": st.one_of(
        st.booleans(),
        st.floats(max_value=-1e-9),
        st.floats(min_value=1.000001, allow_infinity=True),
        st.just(math.nan),
        st.lists(st.integers(), max_size=2),
    ),
}


@CHEAP
@given(
    field_value=st.sampled_from(sorted(BAD_FIGURES)).flatmap(lambda f: st.tuples(st.just(f), BAD_FIGURES[f])),
    which=st.integers(0, 6),
)
def test_a_figure_dnscost_population_never_writes_is_refused_naming_class_and_field(
    tmp_path: Path, load_stops_before_it_starts: None, field_value: tuple[str, object], which: int
) -> None:
    """One class of the shipped population given a clients, rate_qps or share that
    ``dnscost population`` could not have written (a boolean, nan, infinite, negative, a share
    above 1, a string): refused in one line that names the class and the field."""
    field, value = field_value
    doc = tomllib.loads(OPERATOR.read_text())
    k = doc["class"][which % len(doc["class"])]
    k[field] = value
    path = tmp_path / "p.toml"
    path.write_text(_population_text(doc))
    line = _one_line_refusal(*_load(path))
    assert line.startswith(f"dnscost: {path}: class {k['name']}: {field} = "), line


# --- captures ------------------------------------------------------------------------------

SMALL_MIX = [
    ClassSpec("udp", 2, 1, 3),
    ClassSpec("tcp", 2, 1, 1),
    ClassSpec("dot", 1, 2, 3, resume=True),
    ClassSpec("doh", 1, 1, 4, closer="server"),
    ClassSpec("doq", 1, 1, 2),
    ClassSpec("doh3", 1, 1, 2),
]


@pytest.fixture(scope="module")
def small_captures(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    """A small capture of every transport, as pcap and as pcapng."""
    out = {}
    for form in ("pcap", "pcapng"):
        path = tmp_path_factory.mktemp("captures") / f"small.{form}"
        write_capture(path, SMALL_MIX, form=form)
        out[form] = path.read_bytes()
    return out


def _ip_udp(sport: int, dport: int, payload: bytes) -> bytes:
    udp = struct.pack("!HHHH", sport, dport, 8 + len(payload), 0) + payload
    return struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 0, 0, 64, 17, 0, b"\x0a\0\0\1", b"\x0a\0\0\x35") + udp


def _ip_tcp(sport: int, dport: int, seq: int, flags: int, payload: bytes) -> bytes:
    tcp = struct.pack("!HHIIBBHHH", sport, dport, seq, 0, 5 << 4, flags, 65535, 0, 0) + payload
    return struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp), 0, 0, 64, 6, 0, b"\x0a\0\0\1", b"\x0a\0\0\x35") + tcp


PORTS = st.sampled_from([53, 53, 853, 443, 40000])
QUERIES = st.builds(
    # A Do53 query: a header (questions 0 to 2), a name of any labels, what follows.
    lambda qd, labels, tail: (
        struct.pack("!HHHHHH", 1, 0x0100, qd, 0, 0, 0) + b"".join(bytes([len(x)]) + x for x in labels) + tail
    ),
    st.sampled_from([1, 1, 0, 2]),
    st.lists(st.binary(min_size=0, max_size=70), max_size=5),
    st.sampled_from([b"\0\0\1\0\1", b"\0\0\x1c\0\1", b"\0", b""]) | st.binary(max_size=6),
)
PACKETS = st.one_of(
    st.builds(_ip_udp, st.integers(1, 65535), st.just(53), QUERIES),
    st.builds(_ip_udp, st.integers(1, 65535), PORTS, st.binary(max_size=80) | QUERIES),
    st.builds(
        _ip_tcp,
        st.integers(1, 65535),
        PORTS,
        st.integers(0, 2**32 - 1),
        st.integers(0, 63),
        st.binary(max_size=80) | QUERIES.map(lambda q: struct.pack("!H", len(q)) + q),
    ),
    st.binary(max_size=60),
)
RECORDS = st.lists(
    # Seconds after the packet before (1 back: out of order; 3 back or 68 years: a clock gone
    # wild), µs.
    st.tuples(st.integers(-1, 5) | st.sampled_from([-3, -(2**31), 2**31]), st.integers(0, 999_999), PACKETS),
    min_size=1,
    max_size=12,
)


def _pcap(records: list[tuple[int, int, bytes]], link: int) -> bytes:
    """A pcap of the packets, each its seconds after the one before (from 1 000 000 000)."""
    out = [struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, link)]
    s = 10**9
    for step, us, p in records:
        s = min(max(s + step, 0), 2**32 - 1)
        out.append(struct.pack("<IIII", s, us, len(p), len(p)) + p)
    return b"".join(out)


def _population(tmp_path: Path, content: bytes) -> tuple[int | None, str]:
    (tmp_path / "c.pcap").write_bytes(content)
    for name in ("p.toml", "n.txt", "f.jsonl"):
        (tmp_path / name).unlink(missing_ok=True)
    return _dnscost(
        "population", str(tmp_path / "c.pcap"), "-o", str(tmp_path / "p.toml"), "--names", str(tmp_path / "n.txt"),
        "--flows", str(tmp_path / "f.jsonl"),
    )  # fmt: skip


@CHEAP
@given(
    records=RECORDS,
    link=st.sampled_from([101] * 6 + [1, 113, 0]),  # raw IP mostly; the others read it as garbage
    cut=st.sampled_from([None] * 4 + [10, 30, 100, 300]),
)
def test_any_capture_is_read_or_refused_in_one_line(
    tmp_path: Path, records: list[tuple[int, int, bytes]], link: int, cut: int | None
) -> None:
    content = _pcap(records, link)
    rc, stderr = _population(tmp_path, content if cut is None else content[:cut])
    _taken_or_one_line(rc, stderr)
    if rc == 0:
        pop = tomllib.loads((tmp_path / "p.toml").read_text())
        assert pop["duration_s"] > 0 and all(k["rate_qps"] > 0 for k in pop["class"]), pop
        assert pop["names"]["queries"] == len((tmp_path / "n.txt").read_text().splitlines())


@CHEAP
@given(
    form=st.sampled_from(["pcap", "pcapng"]),
    flips=st.lists(st.tuples(st.integers(0, 10**6), st.integers(1, 255)), max_size=6),
    cut=st.one_of(st.none(), st.integers(0, 10**6)),
)
def test_any_damage_to_a_real_capture_is_read_or_refused_in_one_line(
    tmp_path: Path, small_captures: dict[str, bytes], form: str, flips: list[tuple[int, int]], cut: int | None
) -> None:
    content = bytearray(small_captures[form])
    for at, xor in flips:
        content[at % len(content)] ^= xor
    rc, stderr = _population(tmp_path, bytes(content if cut is None else content[: cut % (len(content) + 1)]))
    _taken_or_one_line(rc, stderr)
