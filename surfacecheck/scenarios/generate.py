"""Generate dsh-format logs for the compaction cases the recorded corpus lacks (issue: scenarios).

Each :class:`Scenario` drives the model's scripted agent (:mod:`model.agent`) under a runtime
policy and writes `scenarios/logs/<name>.jsonl`. Generation is deterministic: re-running it
reproduces the committed bytes, which the tests check. Run ``python -m scenarios.generate``.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from surfacecheck.model.agent import Agent, Reply, ToolCall, Turn, crash_and_reload, manual_compact, run_turn
from surfacecheck.model.config import RuntimePolicy
from surfacecheck.model.jsonl import dumps_log
from surfacecheck.model.policy import Environment
from surfacecheck.model.summarizer import ScriptedSummarizer, SummaryScript

LOG_DIR = Path(__file__).resolve().parent / "logs"

SMALL_POLICY = {"thresholdRatio": 0.8, "retainTokens": 100, "compactionRetries": 1, "maxOverflowRetries": 1,
                "maxTokens": 512, "toolResultPruner": {"thresholdChars": 1200, "headChars": 300, "tailChars": 200},
                "contextWindow": 1000}


def build_log(name: str, lines: int = 80) -> str:
    """A deterministic tool output of about 60 characters per line."""
    return "\n".join(f"{name}:{i:04d}: const value_{i} = compute({i * 7}, \"{name}\") // ok" for i in range(1, lines + 1))


def words(n: int, word: str = "detail") -> str:
    return " ".join(f"{word}{i % 10}" for i in range(n))


def read_step(path: str, lines: int = 12, text: str = "Reading.") -> Reply:
    return Reply(text, (ToolCall("read_file", f'{{"path":"{path}"}}', build_log(path, lines)),))


@dataclass(frozen=True)
class Scenario:
    name: str
    story: str
    policy: dict
    run: Callable[[Agent], Agent]
    summarizer: ScriptedSummarizer = ScriptedSummarizer()


def _prune(agent: Agent) -> Agent:
    agent = run_turn(agent, Turn("The CI build failed. Read build.log and tell me which step broke.",
                                 (read_step("build.log", 80, "Reading the build log."),
                                  Reply("The link step broke: compute(42) returned an unexpected value."))))
    return agent


def _pressure(agent: Agent) -> Agent:
    steps = tuple(read_step(f"src/mod{i}.ts", 8, f"Reading module {i}.") for i in range(6))
    agent = run_turn(agent, Turn("Review the six modules under src/ for unused exports: " + words(40),
                                 steps + (Reply("Modules reviewed; mod3 has two unused exports."),)))
    return run_turn(agent, Turn("Now list the exports to remove.", (Reply("Remove helperA and helperB from mod3."),)))


def _second_generation(agent: Agent) -> Agent:
    for round_ in range(3):
        steps = tuple(read_step(f"logs/r{round_}-{i}.txt", 8, f"Round {round_} read {i}.") for i in range(5))
        agent = run_turn(agent, Turn(f"Round {round_}: inspect the logs. " + words(30),
                                     steps + (Reply(f"Round {round_} inspected."),)))
    return agent


def _failed_bracket(agent: Agent) -> Agent:
    return _pressure(agent)


def _manual(agent: Agent) -> Agent:
    agent = run_turn(agent, Turn("Add input validation to the signup handler. " + words(60),
                                 (read_step("src/signup.ts", 6), Reply("Validation added."))))
    agent = run_turn(agent, Turn("Run its unit tests.", (Reply("Running.", (ToolCall("bash", '{"command":"npm test"}',
                                                                                     "12 passing"),)),
                                                         Reply("All 12 tests pass."))))
    return manual_compact(agent, "cmd-1")


def _overflow(agent: Agent) -> Agent:
    agent = run_turn(agent, Turn("Summarize the design doc. " + words(120), (read_step("docs/design.md", 6),
                                                                             Reply("The design has three parts."))))
    return run_turn(agent, Turn("Which part is riskiest?", (Reply(overflow=True), Reply("The cache layer."))))


def _compact_usage(agent: Agent) -> Agent:
    agent = run_turn(agent, Turn("Tidy the changelog. " + words(20), (read_step("CHANGELOG.md", 4), Reply("Tidied."))))
    return manual_compact(agent, "cmd-1", args="now please")


def _overflow_exhausted(agent: Agent) -> Agent:
    agent = run_turn(agent, Turn("Summarize the release notes. " + words(60), (read_step("NOTES.md", 6),
                                                                              Reply("Three highlights."))))
    return run_turn(agent, Turn("And the known issues?", (Reply(overflow=True), Reply("Never sent."))))


def _runtime_context(agent: Agent) -> Agent:
    sections = ({"name": "sandbox:policy", "text": "Sandbox: workspace-write. Network access: disabled."},)
    steps = tuple(read_step(f"pkg/u{i}.ts", 8) for i in range(5))
    agent = run_turn(agent, Turn("Clean up the unused exports in the utils package. " + words(60),
                                 steps + (Reply("Exports cleaned."),), context=sections))
    return run_turn(agent, Turn("Rebuild the package.", (read_step("pkg/build.log", 4), Reply("Rebuilt.")),
                                context=sections))


def _crash_reload(agent: Agent) -> Agent:
    agent = run_turn(agent, Turn("Start the migration. " + words(30), (read_step("db/plan.sql", 6), Reply("Planned."))))
    agent = crash_and_reload(agent)
    return run_turn(agent, Turn("Continue the migration.", (Reply("Continuing."),)))


SCENARIOS = (
    Scenario("prune", "a pressure check prunes one big tool result and needs no summary", SMALL_POLICY, _prune),
    Scenario("pressure-summary", "pressure prunes nothing big enough, then a summary checkpoint lands",
             {**SMALL_POLICY, "retainTokens": 150}, _pressure),
    Scenario("second-generation", "a later checkpoint's range starts with the first checkpoint and merges it",
             {**SMALL_POLICY, "retainTokens": 150}, _second_generation),
    Scenario("failed-bracket", "the first summary is not smaller (error close), the next attempt succeeds",
             {**SMALL_POLICY, "retainTokens": 150}, _failed_bracket,
             ScriptedSummarizer((SummaryScript(ratio=3.0),))),
    Scenario("manual-compact", "an idle /compact: standalone bracket, sourceCommandId, command/done text",
             {**SMALL_POLICY, "contextWindow": 100000}, _manual),
    Scenario("overflow-recovery", "a provider overflow, a retain-0 summary inside the open step, same-step retry",
             {**SMALL_POLICY, "contextWindow": 100000}, _overflow),
    Scenario("runtime-context", "pressure shadows the runtime-context snapshot in the pre-step; re-emitted next step",
             {**SMALL_POLICY, "retainTokens": 150, "contextWindow": 1200}, _runtime_context),
    Scenario("crash-reload", "a reload appends session/end-seed and the session continues",
             {**SMALL_POLICY, "contextWindow": 100000}, _crash_reload),
    Scenario("compact-usage", "/compact with arguments: the usage error, no bracket, no backend call (spec 11)",
             {**SMALL_POLICY, "contextWindow": 100000}, _compact_usage),
    Scenario("overflow-exhausted", "a provider overflow with maxOverflowRetries 0: summarised, not retried; the turn "
             "ends with CONTEXT_WINDOW_EXCEEDED (spec 10.2)", {**SMALL_POLICY, "contextWindow": 100000,
                                                              "maxOverflowRetries": 0}, _overflow_exhausted),
)


def run(scenario: Scenario) -> Agent:
    env = Environment(policy=RuntimePolicy.from_json(scenario.policy), summarizer=scenario.summarizer)
    return scenario.run(Agent(env=env, session_id=f"scenario-{scenario.name}"))


def render(scenario: Scenario) -> str:
    agent = run(scenario)
    header = {"type": "session", "version": 0, "id": f"scenario-{scenario.name}", "createdAt": 1_800_000_000_000,
              "delegationDepth": 0}
    return dumps_log(header, agent.session.log)


def main(argv: list[str] | None = None) -> int:
    LOG_DIR.mkdir(exist_ok=True)
    for scenario in SCENARIOS:
        path = LOG_DIR / f"{scenario.name}.jsonl"
        path.write_text(render(scenario), encoding="utf-8")
        print(f"wrote {path.relative_to(Path.cwd()) if path.is_relative_to(Path.cwd()) else path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
