"""The Python side of the process boundary, against the real engine."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from dnscost.engine import Responder, engine_path, generate
from dnscost.errors import MachineError, UsageError
from dnscost.proc import Child


def test_responder_and_generate_round_trip(tmp_path: Path) -> None:
    r = Responder(tmp_path, ["udp://127.0.0.1:0", "dot://127.0.0.1:0"], synthetic=100)
    try:
        assert set(r.endpoints) == {"udp", "dot"} and r.ca.exists()
        records = generate(
            {
                "transport": "dot",
                "target": r.endpoints["dot"].address,
                "ca_file": str(r.ca),
                "synthetic": 100,
                "rate": 200,
                "duration_ms": 500,
            },
            tmp_path,
        )
    finally:
        r.stop()
    assert records[0]["type"] == "start" and records[-1]["type"] == "summary"
    assert records[-1]["accounting"]["balanced"]
    assert records[-1]["total"]["queries"]["answered"] >= 95
    assert json.loads((tmp_path / "engine-config.json").read_text())["transport"] == "dot"


def test_engine_errors_come_back_as_one_line(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"^invalid configuration: lifetime does not apply to udp$"):
        generate({"transport": "udp", "target": "127.0.0.1:9", "lifetime": {"queries": 1}}, tmp_path)
    with pytest.raises(UsageError, match="unknown field `bogus`"):
        generate({"transport": "udp", "target": "127.0.0.1:9", "bogus": 1}, tmp_path)


def test_check_config_names_the_field_as_its_caller_calls_it() -> None:
    """The engine's parse errors name a line of the configuration, not a field: the field on
    that line is named instead, as the caller calls it (a flag, a file's field)."""
    from dnscost.engine import check_config

    udp = {"transport": "udp", "synthetic": 100}
    with pytest.raises(UsageError, match=r"^load: --names: invalid value: integer `-5`, expected u64$"):
        check_config({**udp, "synthetic": -5}, "load", {"synthetic": "--names"})
    with pytest.raises(UsageError, match=r"^spec\.toml: close: unknown variant `bogus`, expected one of"):
        check_config({**udp, "close": "bogus", "seed": 1}, "spec.toml")
    with pytest.raises(UsageError, match=r"^load: f\.json: udp_retry\.attempts: 11 is out of range 1\.\.=10$"):
        check_config(
            {**udp, "udp_retry": {"timeout_ms": 100, "attempts": 11}}, "load", {"udp_retry": "f.json: udp_retry"}
        )
    with pytest.raises(UsageError, match=r"^load: f\.json: udp_retry: invalid type: string \"x\", expected u32$"):
        check_config(
            {**udp, "udp_retry": {"timeout_ms": 100, "attempts": "x"}}, "load", {"udp_retry": "f.json: udp_retry"}
        )
    with pytest.raises(UsageError, match=r"^load: --lifetime does not apply to udp$"):
        check_config({**udp, "lifetime": {"queries": 1}}, "load", {"lifetime": "--lifetime"})


def test_missing_binaries_are_machine_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(MachineError, match="not found"):
        Child("nothing", ["/nonexistent/dnscost-nothing"], log=tmp_path / "x.log")
    # A DNSCOST_ENGINE that names nothing is an error, never silently another engine.
    monkeypatch.setenv("DNSCOST_ENGINE", "/nonexistent/engine")
    with pytest.raises(MachineError, match="DNSCOST_ENGINE=/nonexistent/engine is not an executable file"):
        engine_path()
