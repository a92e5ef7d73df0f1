"""The input space dsh accepts, and which of its kinds and forms a run generated.

The space is derived from dsh's own vocabulary (:mod:`surfacecheck.runtime.dsh_vocabulary`), schema by schema:

* ``events``: every event type dsh's read path knows (appended by the driver or written by the runtime itself);
* ``blocks``: every content-block kind the meter prices apart, plus ``other`` (its default arm: images);
* ``config <schema>``: every field of compaction-basic's and the pruner's config, in each form its type has
  (absent, on and around a minimum, the wrong type...): the accepted forms and the refused ones;
* ``config checks``: every refusal message of the config resolvers, met in a result;
* ``/compact``: the command's grammar (no arguments, blank, arguments);
* ``agent options``: every AgentOptions field compaction-basic reads, in each form its declared type has (a typed
  field: its wrong type is not an input the typed API lets through).

:func:`forms_of` names the forms one step exercised; the machines count them among the run's operations
(``input <schema> | <form>``) and :func:`report` lists per schema what was generated and what was not.
"""
from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from surfacecheck.runtime.dsh_vocabulary import Vocabulary, vocabulary

PREFIX = "input "
SEP = " | "
PRUNER_KEY = "toolResultPruner"
"""The policy key whose value is the pruner's own config (the corpus ``policies/*.json`` shape)."""


def forms_of_type(field: Mapping[str, Any]) -> tuple[str, ...]:
    kind = field["type"]
    if kind == "number" and "min" in field:
        return ("absent", "at the minimum", "above the minimum", "below the minimum", "not an integer",
                "not a number")
    if kind == "number":
        return "absent", "a number", "not a number"
    if kind == "string":
        return "absent", "empty", "non-empty", "not a string"
    if kind == "boolean":
        return "absent", "true", "false", "not a boolean"
    if kind == "array":
        return "absent", "empty", "non-empty", "not an array"
    return "an object", "not an object"


def form_of_value(field: Mapping[str, Any], value: Any, present: bool = True) -> str:
    """The form of ``value`` for a field of this schema type (JSON's types: a boolean is not a number)."""
    kind = field["type"]
    if not present:
        return "absent"
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind == "number" and "min" in field:
        if not number:
            return "not a number"
        if value != int(value):
            return "not an integer"
        return ("at the minimum" if value == field["min"] else
                "above the minimum" if value > field["min"] else "below the minimum")
    if kind == "number":
        return "a number" if number else "not a number"
    if kind == "string":
        return ("empty" if value == "" else "non-empty") if isinstance(value, str) else "not a string"
    if kind == "boolean":
        return ("true" if value else "false") if isinstance(value, bool) else "not a boolean"
    if kind == "array":
        return ("non-empty" if value else "empty") if isinstance(value, list) else "not an array"
    return "an object" if isinstance(value, dict) else "not an object"


def values_of_form(field: Mapping[str, Any], form: str) -> tuple[Any, ...]:
    """Values of one form of a field (the inverse of :func:`form_of_value`); ``()`` for ``absent`` and for the
    forms of arrays and objects, whose values the caller builds."""
    low = field.get("min", 0)
    return {"at the minimum": (low,), "above the minimum": (low + 1, low + 3),
            "below the minimum": (low - 1, -7), "not an integer": (low + 0.5,), "not a number": ("1", None, True),
            "a number": (0.16, 0.5, 0.8, 0.99, 1, 0, -0.25, 1.5), "empty": ("",), "non-empty": ("prov", "mod"),
            "not a string": (7, None), "true": (True,), "false": (False,), "not a boolean": ("yes", 1, None),
            "not an array": ("all", None, {}), "not an object": (7, "p", None)}.get(form, ())


def space(voc: Vocabulary | None = None) -> dict[str, tuple[str, ...]]:
    """Every schema's kinds and forms, in dsh's order."""
    voc = voc or vocabulary()
    out: dict[str, tuple[str, ...]] = {"events": voc.events, "blocks": (*voc.blocks, "other")}
    for schema, fields in voc.config.items():
        out[f"config {schema}"] = tuple(f"{path}: {form}" for path, field in fields.items()
                                        for form in forms_of_type(field))
    out["config checks"] = tuple(f"{c.id} {c.message}" for c in voc.checks)
    out["/compact"] = ("no arguments", "blank", "arguments") if voc.compact_trims else ("no arguments", "arguments")
    out["agent options"] = tuple(f"{name}: {form}" for name, field in voc.agent.items()
                                 for form in _declared_forms(field))
    return out


def _declared_forms(field: Mapping[str, Any]) -> tuple[str, ...]:
    """The forms of a field a TypeScript declaration types: its type's, without the wrong type; no absent when the
    field is required."""
    forms = forms_of_type(field)
    return tuple(f for f in forms if not f.startswith("not a") and (field.get("optional") or f != "absent"))


def _config_forms(schema: str, fields: Mapping[str, Mapping], config: Any, prefix: str = "") -> Iterator[tuple[str, str]]:
    """The forms of one config object: its fields are the paths one level below ``prefix``."""
    for path, field in fields.items():
        name = path[len(prefix):]
        if not path.startswith(prefix) or not name or "." in name or name.endswith("[]"):
            continue
        present = isinstance(config, dict) and name in config
        value = config.get(name) if present else None
        yield schema, f"{path}: {form_of_value(field, value, present)}"
        item = f"{path}[]"
        if item in fields and present and isinstance(value, list):
            for element in value:
                yield schema, f"{item}: {form_of_value(fields[item], element)}"
                if isinstance(element, dict):
                    yield from _config_forms(schema, fields, element, f"{item}.")


def _blocks(content: Any, known: tuple[str, ...]) -> Iterator[str]:
    if not isinstance(content, list):
        return
    for block in content:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        yield kind if kind in known else "other"
        if kind == "tool-result":
            yield from _blocks(block.get("content"), known)


def _messages(result: Any) -> Iterator[str]:
    if isinstance(result, dict):
        for key, value in result.items():
            if key == "message" and isinstance(value, str):
                yield value
            else:
                yield from _messages(value)
    elif isinstance(result, list):
        for value in result:
            yield from _messages(value)


def forms_of(op: str, args: Mapping[str, Any], result: Any, voc: Vocabulary | None = None) -> Iterator[tuple[str, str]]:
    """``(schema, form)`` for every kind and form one protocol step exercised."""
    voc = voc or vocabulary()
    event = args.get("event") if op == "append" else None
    if isinstance(event, dict):
        if event.get("type") in voc.events:
            yield "events", event["type"]
        data = event.get("data")
        if isinstance(data, dict):
            message = data.get("message", data)
            if isinstance(message, dict):
                for kind in _blocks(message.get("content"), voc.blocks):
                    yield "blocks", kind
    if isinstance(result, dict):
        for kind in result.get("appended") or ():
            if kind in voc.events:
                yield "events", kind
    if op == "configure" and "policy" in args:
        policy = args["policy"]
        basic, pruner = (voc.config.get("compaction-basic", {}), voc.config.get("tool-result-pruner", {}))
        yield from _config_forms("config compaction-basic", basic, policy)
        if isinstance(policy, dict) and isinstance(policy.get(PRUNER_KEY), dict):
            yield from _config_forms("config tool-result-pruner", pruner, policy[PRUNER_KEY])
    if op == "configure" and isinstance(args.get("agent"), dict):
        for name, field in voc.agent.items():
            agent = args["agent"]
            yield "agent options", f"{name}: {form_of_value(field, agent.get(name), name in agent)}"
    if op == "manual_compact":
        words = args.get("args", "")
        yield "/compact", ("no arguments" if words == "" else
                           "blank" if voc.compact_trims and not str(words).strip() else "arguments")
    for message in _messages(result):
        for check in voc.checks:
            if check.pattern.fullmatch(message):
                yield "config checks", f"{check.id} {check.message}"


def key(schema: str, form: str) -> str:
    """The operation name a form is counted under."""
    return f"{PREFIX}{schema}{SEP}{form}"


def report(operations: Mapping[str, int], voc: Vocabulary | None = None) -> dict[str, dict]:
    """Per schema: how many of its forms a run generated, the counts, and the forms never generated."""
    out = {}
    for schema, forms in space(voc).items():
        counts = {form: operations.get(key(schema, form), 0) for form in forms}
        out[schema] = {"forms": len(forms), "generated": sum(1 for n in counts.values() if n),
                       "counts": counts, "missing": [form for form, n in counts.items() if not n]}
    return out
