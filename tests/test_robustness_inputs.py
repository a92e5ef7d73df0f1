"""Issue 18 point 3: bad input to the file-taking commands is a usage error (exit 2) naming the file, never a
traceback and never a verdict; the input is never modified.

The hand list covers the shapes the issue names (truncated and invalid JSON, BOM, CRLF, non-UTF-8, NaN,
duplicate keys, deep nesting, empty files, directories, symlink loops, wrong types); Hypothesis then mutates
real inputs (a session log, a trace, an e2e script, a policy) byte by byte: whatever it makes, the command
either reads it or refuses it with exit 2, and never reports an internal error.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from surfacecheck.cli import main

ROOT = Path(__file__).resolve().parent.parent
LOG = (ROOT / "surfacecheck" / "scenarios" / "logs" / "prune.jsonl").read_bytes()
TRACE = (ROOT / "surfacecheck" / "properties" / "findings" / "G10-compaction-usage-unbilled.jsonl").read_bytes()
SCRIPT = (ROOT / "surfacecheck" / "scenarios" / "e2e" / "prune-only.json").read_bytes()
POLICY = json.dumps({"contextWindow": 1000, "compaction": {"thresholdRatio": 0.5}}).encode()

# (command, argv before the file) -> the file's role
COMMANDS = {
    "audit": (["audit"], LOG),
    "replay": (["replay"], TRACE),
    "e2e": (["e2e", "dsh", "--script"], SCRIPT),
    "policy": (["audit", str(ROOT / "surfacecheck" / "scenarios" / "logs" / "prune.jsonl"), "--policy"], POLICY),
}

BAD = {
    "truncated": lambda good: good[: len(good) // 3],
    "invalid-json": lambda good: b"{this is not json\n",
    "bom": lambda good: b"\xef\xbb\xbf" + good,
    "non-utf8": lambda good: b"\xff\xfe\xfd" + good,
    "nan": lambda good: b'{"a": NaN}\n',
    "deep": lambda good: b"[" * 100_000 + b"\n",
    "empty": lambda good: b"",
    "wrong-type": lambda good: b"[1, 2, 3]\n",
    "number-line": lambda good: b"1e400\n",
}


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _run(capsys, command: str, path: Path) -> tuple[int, str]:
    argv, _good = COMMANDS[command]
    code = main([*argv, str(path)])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("shape", BAD)
def test_bad_input_is_a_located_usage_error(command, shape, tmp_path, capsys):
    path = tmp_path / f"bad-{shape}.jsonl"
    path.write_bytes(BAD[shape](COMMANDS[command][1]))
    before = _sha(path)
    code, text = _run(capsys, command, path)
    assert code == 2, text
    assert str(path) in text and "Traceback" not in text and "internal error" not in text, text
    assert _sha(path) == before


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("shape", ["directory", "missing", "symlink-loop"])
def test_a_path_that_is_no_file_is_a_usage_error(command, shape, tmp_path, capsys):
    path = tmp_path / "x.jsonl"
    if shape == "directory":
        path.mkdir()
    elif shape == "symlink-loop":
        (tmp_path / "y.jsonl").symlink_to(path)
        path.symlink_to(tmp_path / "y.jsonl")
    code, text = _run(capsys, command, path)
    assert code == 2, text
    assert str(path) in text and "Traceback" not in text and "internal error" not in text, text


def test_duplicate_keys_and_crlf_in_a_log_are_read_as_dsh_reads_them(tmp_path, capsys):
    """Neither is an error for dsh's JSON.parse (the last duplicate wins; CR is whitespace): the audit reads
    them, unchanged, instead of refusing (a documented leniency, not a crash)."""
    path = tmp_path / "crlf.jsonl"
    path.write_bytes(LOG.replace(b"\n", b"\r\n"))
    before = _sha(path)
    code, text = _run(capsys, "audit", path)
    assert code in (0, 1) and "internal error" not in text, text
    assert _sha(path) == before


@settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(command=st.sampled_from(sorted(COMMANDS)), data=st.data())
def test_any_mutation_is_read_or_refused_never_crashed(command, data, tmp_path_factory, capsys):
    good = COMMANDS[command][1]
    at = data.draw(st.integers(min_value=0, max_value=len(good)), label="position")
    kind = data.draw(st.sampled_from(["cut", "insert", "flip", "number"]), label="mutation")
    if kind == "cut":
        body = good[:at]
    elif kind == "insert":
        body = good[:at] + data.draw(st.binary(min_size=1, max_size=8), label="bytes") + good[at:]
    elif kind == "flip":
        body = good[:at] + bytes([data.draw(st.integers(0, 255), label="byte")]) + good[at + 1:]
    else:
        number = data.draw(st.sampled_from([b"-1", b"1e308", b"-9007199254740993", b"1e400", b"0.5", b"true"]))
        body = good.replace(b"1", number, 1) if at % 2 else good.replace(b"0", number, 1)
    path = tmp_path_factory.mktemp("m") / "input.jsonl"
    path.write_bytes(body)
    before = _sha(path)
    try:
        code, text = _run(capsys, command, path)
    except SystemExit as exc:  # argparse refusing a value is a usage error too
        code, text = exc.code, ""
    assert "internal error" not in text and "Traceback" not in text, text
    assert code in (0, 1, 2, 3), text  # a mutation may leave a valid input: then it is simply run
    if code == 2 and text:
        assert str(path) in text or "--" in text, text
    assert _sha(path) == before


OUTPUT_OPTIONS = {
    "check --report-dir": ["check", "--only", "runtime", "--report-dir"],
    "verify --trace-dir": ["verify", "--level", "log", "--trace-dir"],
    "explore --trace-dir": ["explore", "--trace-dir"],
    "findings --trace-dir": ["findings", "--trace-dir"],
    "findings --report": ["findings", "--report"],
    "prove --trace-dir": ["prove", "--trace-dir"],
    "bench --report-dir": ["bench", "--report-dir"],
    "e2e --bundle-dir": ["e2e", "dsh", "--bundle-dir"],
    "e2e --keep": ["e2e", "dsh", "--keep"],
}
"""Every option naming a folder (or file) the command writes into."""


def _output_path(shape: str, tmp: Path) -> Path:
    blocker = tmp / "a-file"
    blocker.write_text("not a folder\n")
    return {"a-file": blocker, "under-a-file": blocker / "sub", "proc": Path("/proc/surfacecheck-cannot-write")}[shape]


@pytest.mark.parametrize("option", OUTPUT_OPTIONS)
@pytest.mark.parametrize("shape", ["a-file", "under-a-file", "proc"])
def test_an_output_folder_that_cannot_be_written_is_refused_before_any_work(option, shape, tmp_path, capsys):
    """Issue 18 point 3: exit 2 at once, naming the option and the path: a counterexample found after an hour must
    not be lost to an unwritable folder. (Running as root, permissions cannot refuse; /proc and a file in the way
    can.)"""
    path = _output_path(shape, tmp_path)
    target = path / "report.md" if option == "findings --report" else path
    with pytest.raises(SystemExit) as stop:
        main([*OUTPUT_OPTIONS[option], str(target)])
    err = capsys.readouterr().err
    assert stop.value.code == 2, err
    assert f"argument {option.split()[-1]}" in err and str(path) in err and "Traceback" not in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file"]  # nothing made


def test_a_writable_output_folder_is_probed_without_a_trace(tmp_path):
    from surfacecheck.core.argtypes import writable_dir

    assert writable_dir(str(tmp_path / "x" / "y" / "z")) == str(tmp_path / "x" / "y" / "z")
    assert list(tmp_path.iterdir()) == []  # the folders made to probe are gone again


def _corpus(shape: str, tmp: Path) -> Path:
    root = tmp / f"corpus-{shape}"
    if shape == "a-file":
        root.write_text("x\n")
    elif shape == "empty":
        root.mkdir()
    elif shape == "bad-expected":
        (root / "dsh-generated").mkdir(parents=True)
        (root / "dsh-generated" / "x.jsonl").write_bytes(LOG)
        (root / "dsh-generated" / "expected.json").write_text("{bad\n")
    return root


@pytest.mark.parametrize("shape", ["missing", "a-file", "empty", "bad-expected"])
@pytest.mark.parametrize("how", ["--corpus", "SURFACECHECK_CORPUS"])
def test_a_bad_corpus_is_a_located_usage_error(shape, how, tmp_path, capsys, monkeypatch):
    root = _corpus(shape, tmp_path)
    argv = ["check", "--only", "runtime", "--report-dir", str(tmp_path / "out")]
    if how == "--corpus":
        argv += ["--corpus", str(root)]
    else:
        monkeypatch.setenv("SURFACECHECK_CORPUS", str(root))
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2 and str(root) in err and "Traceback" not in err, err
    if shape == "bad-expected":
        assert "expected.json" in err


@pytest.mark.parametrize("value", ["/nowhere/at/all", "a-file"])
def test_a_bad_dsh_modules_folder_is_a_usage_error_naming_the_variable(value, tmp_path, capsys, monkeypatch):
    (tmp_path / "a-file").write_text("x\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SURFACECHECK_DSH_MODULES", value)
    with pytest.raises(SystemExit) as stop:
        main(["verify", "--runtime", "dsh", "--level", "log"])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and "SURFACECHECK_DSH_MODULES: dsh modules folder" in err, err
    assert value.split("/")[-1] in err, err


@pytest.mark.parametrize("argv", [["explore", "--trace-dir", "{file}", "--json"],
                                  ["check", "--json", "--only", "nonsense"],
                                  ["verify", "--json", "--timeout", "-1"],
                                  ["e2e", "dsh", "--json", "--stall", "zero"]])
def test_a_refused_option_with_json_still_prints_one_json_document(argv, tmp_path, capsys):
    """The --json promise holds on usage errors argparse refuses too: one document on stdout, the reason on
    stderr, exit 2."""
    blocker = tmp_path / "a-file"
    blocker.write_text("x\n")
    with pytest.raises(SystemExit) as stop:
        main([a.replace("{file}", str(blocker)) for a in argv])
    captured = capsys.readouterr()
    doc = json.loads(captured.out)
    assert stop.value.code == 2 and doc["exit_code"] == 2 and doc["verdict"] == "error"
    assert doc["error"] and doc["error"] in captured.err
