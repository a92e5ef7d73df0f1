"""The model's seams (surfacecheck.model.seams): the default is the real functions; a named set of seams
changes what the model does only while it is active; nothing patches a model module's attributes."""
from __future__ import annotations

import ast
import dataclasses
import importlib.util
from pathlib import Path

import pytest

from surfacecheck.explore.run import run_explore
from surfacecheck.explore.stage import CONTROL_BOUNDS
from surfacecheck.explore.variants import VARIANTS
from surfacecheck.model import meter, pairing, region, walk
from surfacecheck.model.seams import REAL, Seams, active, real, using
from surfacecheck.model.session import Session, append

ROOT = Path(__file__).resolve().parents[1]
MODEL_MODULES = ("surfacecheck.model", "surfacecheck.runtime.model_levels", "surfacecheck.runtime.model_runtime")


def test_the_default_seams_are_the_real_functions():
    assert active() is REAL
    fields = [f.name for f in dataclasses.fields(Seams)]
    built = Seams()
    for name in fields:
        assert getattr(REAL, name) is real(name) is getattr(built, name), name
    assert (REAL.measure, REAL.walk_run, REAL.select_compactable_range, REAL.event_delta) == \
        (meter.measure, walk.run, region.select_compactable_range, pairing.event_delta)


def _tool_call_session() -> Session:
    session, _ = append(Session(), "turn/start", {"turn": 1})
    session, _ = append(session, "step/start", {"turn": 1, "step": 1})
    content = [{"type": "tool-call", "id": "call-1", "name": "t", "arguments": "{}"}]
    message = {"id": "a-1", "role": "assistant", "content": content,
               "source": {"kind": "model", "provider": "p", "model": "m"}}
    session, _ = append(session, "assistant/message", {"turn": 1, "step": 1, "message": message},
                        surface_op="append")
    return session


def test_a_named_seam_changes_the_model_only_while_active():
    session = _tool_call_session()
    assert pairing.fold_cuts(session).balanced == (True, False)  # the call is open after the node
    uncounted = REAL.replace(event_delta=lambda event: 0)
    with using(uncounted) as seams:
        assert active() is seams is uncounted
        assert pairing.fold_cuts(session).balanced == (True, True)
        with using(REAL):  # nested: the inner set wins, the outer one is back on exit
            assert pairing.fold_cuts(session).balanced == (True, False)
        assert pairing.fold_cuts(session).balanced == (True, True)
    assert active() is REAL
    assert pairing.fold_cuts(session).balanced == (True, False)


@pytest.mark.parametrize("name", ["retry-without-progress", "no-shrink-rule"])
def test_a_variant_seam_set_breaks_its_property_and_the_default_keeps_it(name):
    variant = VARIANTS[name]
    assert variant.seams() is not REAL and variant.seams(REAL) != REAL
    broken = run_explore(CONTROL_BOUNDS[name], variant=variant)
    assert variant.breaks in {v["property"] for v in broken["violations"]}
    assert active() is REAL  # the explorer's seams were active only while it ran
    assert run_explore(CONTROL_BOUNDS[name])["violations"] == []


# -- nothing patches a model module -------------------------------------------------------------
def _aliases(tree: ast.Module) -> dict[str, str]:
    """Local name -> the dotted path it was imported as."""
    names: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    names[alias.asname] = alias.name
                else:
                    names[alias.name.split(".")[0]] = alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                names[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return names


def _dotted(node: ast.expr, names: dict[str, str]) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value.rpartition(".")[0]  # monkeypatch.setattr("pkg.module.attr", value)
    if isinstance(node, ast.Name):
        return names.get(node.id)
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value, names)
        return None if base is None else f"{base}.{node.attr}"
    return None


def _is_model_module(path: str) -> bool:
    if not any(path == m or path.startswith(m + ".") for m in MODEL_MODULES):
        return False
    try:
        return importlib.util.find_spec(path) is not None
    except ModuleNotFoundError:  # a class or function inside a module, not a module
        return False


def model_patches(source: str) -> list[str]:
    """``setattr`` calls (builtin, monkeypatch, ...) and assignments whose target is a model module."""
    tree = ast.parse(source)
    names, found = _aliases(tree), []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AugAssign)):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                module = _dotted(target.value, names) if isinstance(target, ast.Attribute) else None
                if module is not None and _is_model_module(module):
                    found.append(f"line {node.lineno}: assignment to {module}.{target.attr}")
        if isinstance(node, ast.Call) and node.args and (
                (isinstance(node.func, ast.Name) and node.func.id == "setattr")
                or (isinstance(node.func, ast.Attribute) and node.func.attr == "setattr")):
            target = _dotted(node.args[0], names)
            if target is not None and _is_model_module(target):
                found.append(f"line {node.lineno}: setattr on {target}")
    return sorted(found, key=lambda hit: int(hit.split()[1].rstrip(":")))


def test_the_check_finds_a_model_patch():
    source = ("from surfacecheck import model\nimport surfacecheck.runtime.model_levels as levels\n"
              "def test(monkeypatch):\n"
              "    monkeypatch.setattr(model.policy, 'measure', len)\n"
              "    setattr(levels, 'compact_if_needed', len)\n"
              "    monkeypatch.setattr('surfacecheck.model.meter.node_price', len)\n"
              "    monkeypatch.setattr(levels._Ops, 'pre_step', len)\n"  # a runtime op on its class: allowed
              "    model.walk.run = len\n")
    assert model_patches(source) == ["line 4: setattr on surfacecheck.model.policy",
                                      "line 5: setattr on surfacecheck.runtime.model_levels",
                                      "line 6: setattr on surfacecheck.model.meter",
                                      "line 8: assignment to surfacecheck.model.walk.run"]


def test_nothing_patches_a_model_module():
    files = sorted((ROOT / "surfacecheck").rglob("*.py")) + sorted((ROOT / "tests").rglob("*.py"))
    assert len(files) > 100
    found = {str(f.relative_to(ROOT)): hits for f in files if (hits := model_patches(f.read_text()))}
    assert found == {}
