"""The CI recipes under docs/ci/ are valid for their CI system and run command lines surfacecheck accepts.

They are not run here: each parses as YAML, has the structure its CI system requires (a GitHub workflow's
``on``/``jobs``/``steps``, each step ``uses`` or ``run``; a GitLab job with ``script`` and a JUnit report), gates on
``check``'s exit code and keeps the report folder, and every ``surfacecheck`` command line in it parses with
surfacecheck's own parser."""
from __future__ import annotations

import shlex
from pathlib import Path

import pytest
import yaml

from surfacecheck.cli import build_parser

RECIPES = Path(__file__).resolve().parents[1] / "docs" / "ci"
SHELL_OPERATORS = {">", ">>", "<", "|", "||", "&&", ";", "2>", "&"}


def load(name: str) -> dict:
    document = yaml.safe_load((RECIPES / name).read_text(encoding="utf-8"))
    assert isinstance(document, dict), name
    return document


def surfacecheck_commands(lines: list[str]) -> list[list[str]]:
    """The argument lists of every ``surfacecheck ...`` command in shell lines, up to the first shell operator."""
    found = []
    for line in (part for text in lines for part in text.splitlines()):
        words = shlex.split(line, comments=True)
        if words[:1] != ["surfacecheck"]:
            continue
        args = []
        for word in words[1:]:
            if word in SHELL_OPERATORS or word.startswith((">", "2>")):
                break
            args.append(word)
        found.append(args)
    return found


def github_steps(document: dict) -> list[dict]:
    return [step for job in document["jobs"].values() for step in job["steps"]]


def gitlab_jobs(document: dict) -> dict[str, dict]:
    return {name: job for name, job in document.items() if isinstance(job, dict) and "script" in job}


@pytest.fixture
def parse(tmp_path, monkeypatch):
    """surfacecheck's own parser, run where the recipe's report folder may be created (a temporary folder). The
    recipes run where Node is set up, so ``--runtime dsh``'s availability check is the runner's, not this
    machine's: only the spelling and the options are judged here."""
    import surfacecheck.runtime.dsh as dsh

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(dsh, "spec_problem", lambda spec: None)
    return lambda args: build_parser().parse_args(args)


def test_the_github_workflow_has_the_required_structure():
    document = load("github-actions.yml")
    # YAML 1.1 reads the bare key `on` as a boolean; GitHub reads it as the trigger
    assert "on" in document or True in document, "a workflow needs `on`"
    assert document["jobs"], "a workflow needs jobs"
    for name, job in document["jobs"].items():
        assert "runs-on" in job, name
        assert job["steps"], name
        for step in job["steps"]:
            assert isinstance(step, dict) and (("uses" in step) != ("run" in step)), step
    uses = {step["uses"].split("@")[0]: step for step in github_steps(document) if "uses" in step}
    assert str(uses["actions/setup-python"]["with"]["python-version"]) == "3.11"
    assert str(uses["actions/setup-node"]["with"]["node-version"]) == "20"
    assert "actions/checkout" in uses
    upload = uses["actions/upload-artifact"]
    assert upload["if"] == "always()" and upload["with"]["path"].rstrip("/") == "out"
    assert any("junit.xml" in str(step.get("with", {})) for step in uses.values()), "JUnit results published"


def test_the_gitlab_job_has_a_script_and_a_junit_report():
    jobs = gitlab_jobs(load("gitlab-ci.yml"))
    assert jobs, "a GitLab pipeline needs a job with a script"
    [job] = jobs.values()
    assert job["artifacts"]["reports"]["junit"] == "out/junit.xml"
    assert job["artifacts"]["when"] == "always"
    assert [path.rstrip("/") for path in job["artifacts"]["paths"]] == ["out"]


def recipe_lines() -> dict[str, list[str]]:
    github = [step["run"] for step in github_steps(load("github-actions.yml")) if "run" in step]
    gitlab = [line for job in gitlab_jobs(load("gitlab-ci.yml")).values()
              for line in job.get("before_script", []) + job["script"]]
    return {"github-actions.yml": github, "gitlab-ci.yml": gitlab}


@pytest.mark.parametrize("recipe", ["github-actions.yml", "gitlab-ci.yml"])
def test_each_recipe_gates_on_check_with_json_and_a_report_dir(recipe, parse):
    commands = surfacecheck_commands(recipe_lines()[recipe])
    checks = [parse(args) for args in commands if args[:1] == ["check"]]
    assert len(checks) == 1, commands
    [check] = checks
    assert check.json and check.report_dir == "out"
    for args in commands:  # every surfacecheck command line the recipe runs parses
        parse(args)
    # the exit code is the gate: nothing after the command swallows it
    shell = "\n".join(recipe_lines()[recipe])
    assert "|| true" not in shell and "set +e" not in shell


def test_a_command_surfacecheck_refuses_fails_the_parse(parse):
    with pytest.raises(SystemExit):
        parse(surfacecheck_commands(["surfacecheck check --runtime nosuch --json > out/check.json"])[0])
