"""The Python half's type of the engine's configuration (``dnscost.contract.EngineConfig``) is
the engine's own, field by field: the engine writes its schema (``dnscost-engine schema``, kept
in ``schemas/engine-config.schema.json``, which ``crates/engine/tests/it/schema.rs`` holds to the
code), and every field, its type and its choices must be the same on both sides, so that a field
added, renamed or narrowed in ``config.rs`` fails here."""

from __future__ import annotations

import json
import types
import typing
from pathlib import Path
from typing import Any, Literal, get_args, get_origin, get_type_hints

from dnscost import contract
from dnscost.transports import TRANSPORTS

SCHEMA = Path(__file__).parents[2] / "schemas" / "engine-config.schema.json"
PROFILE_SCHEMA = SCHEMA.with_name("client-profile.schema.json")
JSON_TYPES = {"string": str, "integer": int, "number": float, "boolean": bool, "null": type(None)}


def schema_atoms(node: dict[str, Any], defs: dict[str, Any]) -> set[object]:
    """What a schema node admits, as atoms: Python types, ("literal", value) for a choice,
    ("object", NAME) for a structure, ("list", atoms) for an array."""
    if "$ref" in node:
        name = node["$ref"].rsplit("/", 1)[1]
        target = defs[name]
        return {("object", name)} if target.get("type") == "object" else schema_atoms(target, defs)
    if "const" in node:
        return {("literal", node["const"])}
    if "enum" in node:
        return {("literal", v) for v in node["enum"]}
    for key in ("oneOf", "anyOf", "allOf"):
        if key in node:
            return set().union(*(schema_atoms(part, defs) for part in node[key]))
    kinds = node["type"] if isinstance(node["type"], list) else [node["type"]]
    atoms: set[object] = set()
    for kind in kinds:
        if kind == "array":
            atoms.add(("list", frozenset(schema_atoms(node["items"], defs))))
        elif kind == "object":
            atoms.add(("object", "map"))
        else:
            atoms.add(JSON_TYPES[kind])
    return atoms


def hint_atoms(hint: object) -> set[object]:
    """The same atoms for a Python annotation."""
    origin = get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return set().union(*(hint_atoms(h) for h in get_args(hint)))
    if origin is Literal:
        return {("literal", v) for v in get_args(hint)}
    if origin is list:
        return {("list", frozenset(hint_atoms(get_args(hint)[0])))}
    if origin is dict:
        return {("object", "map")}
    if isinstance(hint, type) and typing.is_typeddict(hint):
        return {("object", hint.__name__)}
    if hint is type(None) or hint is None:
        return {type(None)}
    assert isinstance(hint, type), hint
    return {hint}


def test_engine_config_has_the_engines_fields_and_types() -> None:
    schema = json.loads(SCHEMA.read_text())
    defs = schema["definitions"]
    hints = get_type_hints(contract.EngineConfig)
    assert set(hints) == set(schema["properties"]), "fields only on one side"
    for field, node in schema["properties"].items():
        want = schema_atoms(node, defs)
        if field == "transport":  # a str, checked against dnscost.transports' list
            assert want == {("literal", t) for t in TRANSPORTS}
            want = {str}
        assert hint_atoms(hints[field]) == want, field


def test_client_profile_has_the_engines_fields_and_types() -> None:
    """A profile file (``schemas/client-profile.schema.json``, what ``dnscost observe`` writes
    and the engine reads) field by field, which are required, and every shipped profile has
    only its fields, of their types."""
    schema = json.loads(PROFILE_SCHEMA.read_text())
    defs = schema["definitions"]
    hints = get_type_hints(contract.ClientProfile)
    assert set(hints) == set(schema["properties"]), "fields only on one side"
    assert contract.ClientProfile.__required_keys__ == frozenset(schema["required"])
    for field, node in schema["properties"].items():
        want = schema_atoms(node, defs)
        if field == "transport":
            assert want == {("literal", t) for t in TRANSPORTS}
            want = {str}
        assert hint_atoms(hints[field]) == want, field
    shipped = sorted((REPO / "python" / "dnscost" / "experiments" / "profiles").glob("*.json"))
    assert len(shipped) >= 10
    for path in shipped:
        doc = json.loads(path.read_text())
        assert set(doc) <= set(hints), path.name
        assert contract.shape_problem(doc, contract.ClientProfile) is None, path.name


def test_nested_structures_have_the_engines_fields() -> None:
    defs = json.loads(SCHEMA.read_text())["definitions"]
    for cls in (contract.Lifetime, contract.UdpRetry):
        node = defs[cls.__name__]
        hints = get_type_hints(cls)
        assert set(hints) == set(node["properties"]), cls.__name__
        for field, sub in node["properties"].items():
            assert hint_atoms(hints[field]) == schema_atoms(sub, defs), f"{cls.__name__}.{field}"
        assert cls.__required_keys__ == frozenset(node.get("required", [])), cls.__name__


RECORDS = Path(__file__).parents[2] / "schemas" / "engine-record.schema.json"
RECORD_TYPES = {
    "start": contract.StartRecord,
    "interval": contract.IntervalRecord,
    "summary": contract.SummaryRecord,
    "connection": contract.ConnectionRecord,
    "query": contract.QueryRecord,
}


def _same_fields(cls: type, node: dict[str, Any], defs: dict[str, Any]) -> None:
    hints = get_type_hints(cls)
    assert set(hints) == set(node["properties"]), f"{cls.__name__}: fields only on one side"
    assert cls.__required_keys__ == frozenset(node["required"]), f"{cls.__name__}: which fields are required"
    for field, sub in node["properties"].items():
        if cls is contract.StartRecord and field == "config":  # the schema leaves it open; the config's own test
            assert hints[field] is contract.EngineConfig
            continue
        assert hint_atoms(hints[field]) == schema_atoms(sub, defs), f"{cls.__name__}.{field}"
        for atom in hint_atoms(hints[field]):
            if isinstance(atom, tuple) and atom[0] == "object" and atom[1] != "map":
                _same_fields(getattr(contract, str(atom[1])), defs[str(atom[1])], defs)


def test_engine_records_have_the_engines_fields_and_types() -> None:
    """Every record the engine writes, and every structure inside one, field by field: a field
    added, renamed, retyped or made optional in the engine's records fails here."""
    schema = json.loads(RECORDS.read_text())
    defs = schema["definitions"]
    seen = set()
    for branch in schema["oneOf"]:
        (kind,) = branch["properties"]["type"]["enum"]
        seen.add(kind)
        _same_fields(RECORD_TYPES[kind], branch, defs)
    assert seen == set(RECORD_TYPES)
    generate_writes = {contract.StartRecord, contract.IntervalRecord, contract.SummaryRecord}
    assert set(get_args(contract.EngineRecord)) == generate_writes


REPO = Path(__file__).parents[2]


def _stored_trials() -> list[Path]:
    """Every trial.json the repository stores: the kept study and client runs, the fixtures."""
    return sorted([*(REPO / "docs").rglob("trial.json"), *(REPO / "python" / "tests" / "fixtures").rglob("trial.json")])


def _held_to(paths: list[Path], record: Any) -> list[dict[str, Any]]:
    """Each file of ``paths``, parsed, asserted of the ``TypedDict`` ``record``'s types and
    naming no field it lacks."""
    fields, docs = set(get_type_hints(record)), []
    for path in paths:
        doc = json.loads(path.read_text())
        assert contract.shape_problem(doc, record) is None, (path, contract.shape_problem(doc, record))
        assert set(doc) <= fields, (path, set(doc) - fields)
        docs.append(doc)
    return docs


def test_a_plan_entry_is_a_trial_record() -> None:
    """``TrialPlan`` (what the plan says of a trial) and the plan's fields of ``TrialRecord``
    are one shape written twice: every field of the one is a field of the other, of one type,
    and ``to_dict`` writes a record the type accepts."""
    from dnscost.plan import TrialPlan

    record = get_type_hints(contract.TrialRecord)
    for name, hint in get_type_hints(TrialPlan).items():
        assert name in record and hint_atoms(hint) == hint_atoms(record[name]), name
    plan = TrialPlan("load-x-udp-r0", "load", "load", "x", "udp", {"rate": 100}, 0, analysis="load")
    assert contract.shape_problem(plan.to_dict(), contract.TrialRecord) is None


def test_every_stored_trial_json_is_a_trial_record() -> None:
    """``TrialRecord`` is trial.json as the package writes it: every stored one is of its types
    and names no field it lacks (a field added by the writers without the type fails here)."""
    paths = _stored_trials()
    assert len(paths) > 100
    fields = set(get_type_hints(contract.TrialRecord))
    seen: set[str] = set()
    for doc in _held_to(paths, contract.TrialRecord):
        seen |= set(doc)
    # and the type names nothing no stored trial has (a field the writers dropped)
    assert fields - seen <= {
        "records_problem",
        "client_subnet",
        "ticket_keys",
        "session_limits",
        "external",
        "cache_fill",
        "cluster",
        "dir",
        "settings",
        "target_pid",
        "target_processes",
    }, fields - seen


def test_trial_params_name_every_knob_the_plan_and_the_stored_trials_give() -> None:
    """``TrialParams`` names every knob a group can sweep (``spec.SWEEPABLE``), and every stored
    trial's ``params`` names no other and is of its types (checked with the whole record)."""
    from dnscost.spec import SWEEPABLE

    fields = set(get_type_hints(contract.TrialParams))
    assert set(SWEEPABLE) <= fields
    seen: set[str] = set()
    for path in _stored_trials():
        params = json.loads(path.read_text()).get("params")
        if isinstance(params, dict):
            assert contract.shape_problem(params, contract.TrialParams, "params") is None, path
            assert set(params) <= fields, (path, set(params) - fields)
            seen |= set(params)
    assert seen == fields, fields ^ seen  # and names none that no stored trial has


def test_a_meter_summary_is_what_the_meter_writes_and_every_stored_one_is_of_its_types() -> None:
    """``MeterSummary`` names every key :func:`~dnscost.meter.summary.summarize` writes and no other (the levels
    of ``LEVELS`` included), and every meter of a stored trial's summary (window and
    baseline) is of its types; the ones the package wrote (all but the synthetic fixture's)
    hold every key it names but those added since (``NotRequired``)."""
    from dnscost.meter.summary import summarize

    samples = [{"type": "fast", "t_ms": t, "target": {}} for t in (0, 1000)]
    written = summarize(samples, 0, 1000)
    fields = set(get_type_hints(contract.MeterSummary))
    assert set(written) == fields
    meters = 0
    for path in _stored_trials():
        summary = json.loads(path.read_text()).get("summary") or {}
        for key in ("meter", "baseline_meter"):
            if (meter := summary.get(key)) is None:
                continue
            meters += 1
            assert contract.shape_problem(meter, contract.MeterSummary, key) is None, path
            # The keys added later (NotRequired: the page faults) may be absent from older runs.
            required = set(contract.MeterSummary.__required_keys__)
            assert set(meter) <= fields and ("synthetic" in str(path) or set(meter) >= required), (
                path,
                fields ^ set(meter),
            )
    assert meters > 1000


def test_the_documented_trial_json_names_only_trial_record_fields() -> None:
    text = (REPO / "docs" / "results.md").read_text()
    block = text.split("## trial.json", 1)[1].split("```json", 1)[1].split("```", 1)[0]
    assert set(json.loads(block)) <= set(get_type_hints(contract.TrialRecord))


def test_shape_problem_names_the_field_and_both_kinds() -> None:
    check = contract.shape_problem
    record = contract.TrialRecord
    assert check({"id": "x", "rep": 1, "summary": None, "target_cpus": [0, 1]}, record) is None
    assert check({"cache_hit_ratio": 1}, record) is None  # an integer is a number, as in JSON
    assert check({"rep": True}, record) == "rep is a boolean, not a number"
    assert check({"rep": 1.0, "summary": {"queries_answered": 10.0}}, record) is None  # JSON's one number
    assert check({"target_cpus": [0, "1"]}, record) == "target_cpus[1] is a string, not a number"
    assert check({"listen_backlog": {"tcp": None}}, record) == "listen_backlog.tcp is null, not a number"
    assert (
        check({"summary": {"validity": {"flags": "loss"}}}, record)
        == "summary.validity.flags is a string, not an array"
    )
    assert check({"kind": "soak"}, record) == "kind is 'soak', not one of 'load', 'idle', 'search', 'capacity'"
    assert check({"engine_config": {"connections": "many"}}, record) == (
        "engine_config.connections is a string, not a number"
    )
    assert check({"summary": []}, record) == "summary is an array, not an object or null"
    assert check([], record) == "the document is an array, not an object"
    assert check({"a later field": 1}, record) is None  # written by another version: let through


def test_every_stored_run_json_is_a_run_record() -> None:
    """``RunRecord`` is run.json as the package writes it: every stored one (the kept study,
    client and version runs, the fixtures) is of its types and names no field it lacks."""
    paths = sorted([*(REPO / "docs").rglob("run.json"), *(REPO / "python" / "tests" / "fixtures").rglob("run.json")])
    assert len(paths) >= 5
    fields = set(get_type_hints(contract.RunRecord))
    settings = set(get_type_hints(contract.GroupSettings))
    for doc in _held_to(paths, contract.RunRecord):
        for entry in doc.get("plan", []):
            assert set(entry) <= set(get_type_hints(contract.TrialRecord)), entry
        for group in doc.get("spec", {}).get("groups", []):  # a group's settings, as the spec resolved them
            assert contract.shape_problem(group["settings"], contract.GroupSettings) is None, group["name"]
            missing = contract.GroupSettings.__required_keys__ - set(group["settings"])
            assert set(group["settings"]) <= settings and not missing, (group["name"], missing)
    text = (REPO / "docs" / "results.md").read_text()
    block = text.split("## run.json", 1)[1].split("```json", 1)[1].split("```", 1)[0]
    assert set(json.loads(block)) <= fields


def test_a_run_json_s_problem_names_its_field() -> None:
    from dnscost.results import run_problem

    assert run_problem({"status": "paused"}) == (
        "status is 'paused', not one of 'running', 'done', 'failed', 'incomplete', 'interrupted'"
    )
    assert (
        run_problem({"trials": {"t1": {"status": "done", "error": 3}}})
        == "trials.t1.error is a number, not a string or null"
    )
    assert run_problem({"versions": {"dnsdist": 1.7}}) == "versions.dnsdist is a number, not a string"
    assert run_problem({"plan": [{"id": "t1", "rep": "0"}]}) == "plan[0].rep is a string, not a number"


METER_TYPES = {
    "header": contract.MeterHeader,
    "fast": contract.FastSample,
    "slow": contract.SlowSample,
    "end": contract.MeterEnd,
}


def _unnamed(value: object, hint: object, where: str) -> list[str]:
    """The keys of ``value`` that no ``TypedDict`` inside ``hint`` names, and the required keys
    it lacks, all the way down (``shape_problem`` checks the kinds of those it names)."""
    if typing.is_typeddict(hint) and isinstance(value, dict):
        hints = get_type_hints(hint)
        out = [f"{where}.{k} unnamed" for k in set(value) - set(hints)]
        out += [f"{where}.{k} missing" for k in hint.__required_keys__ - set(value)]
        for key, sub in hints.items():
            if key in value:
                out += _unnamed(value[key], sub, f"{where}.{key}")
        return out
    origin, args = get_origin(hint), get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return next((_unnamed(value, h, where) for h in args if typing.is_typeddict(h) and isinstance(value, dict)), [])
    if origin in (typing.Required, typing.NotRequired):
        return _unnamed(value, args[0], where)
    if origin is list and isinstance(value, list):
        return [p for i, v in enumerate(value) for p in _unnamed(v, args[0], f"{where}[{i}]")]
    return []


def test_every_stored_meter_record_is_a_meter_record() -> None:
    """``MeterRecord`` is a line of meter.jsonl as the sampler writes it: in every stored meter
    file (the kept runs', the fixtures'), a header first and an end last, and each of its first
    dozen lines and its last of its type's kinds, naming no field the type lacks and lacking
    none it requires, all the way down."""
    from dnscost.jsonl import read_records

    paths = sorted(
        {
            p.with_suffix("") if p.suffix == ".gz" else p
            for p in [
                *(REPO / "docs").rglob("meter.jsonl*"),
                *(REPO / "python" / "tests" / "fixtures").rglob("meter.jsonl*"),
            ]
        }
    )
    assert len(paths) > 300
    seen: set[str] = set()
    for path in paths:
        records = read_records(path, strict=True)
        assert records and records[0]["type"] == "header" and records[-1]["type"] == "end", path
        # Every line is written by the same code: a file's first samples and its end stand for it.
        for n, r in [*enumerate(records[:12], 1), (len(records), records[-1])]:
            record = METER_TYPES[r["type"]]
            assert contract.shape_problem(r, record) is None, (path, n, contract.shape_problem(r, record))
            assert not (problems := _unnamed(r, record, r["type"])), (path, n, problems)
            seen.add(r["type"])
    assert seen == set(METER_TYPES)
    assert set(get_args(contract.MeterRecord)) == set(METER_TYPES.values())


def test_capture_flows_have_the_engines_fields_and_types() -> None:
    """``dnscost-engine capture``'s flow record (schemas/capture-flow.schema.json) is
    :class:`contract.FlowRecord`, field by field."""
    schema = json.loads((REPO / "schemas" / "capture-flow.schema.json").read_text())
    _same_fields(contract.FlowRecord, schema, schema.get("definitions", {}))
