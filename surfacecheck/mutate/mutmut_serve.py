"""mutmut's per-mutant run, one mutant at a time on request (``mutate --runtime embedded --workers N``).

Copied into mutmut's working copy as ``mutmut_serve.py`` and run there (cwd = the copy): it imports mutmut
and the standard library only, so the suite's packages are first imported from ``mutants/`` (mutmut's
trampolines), never from the unmutated copy beside it. Three modes:

* ``prepare OUT``: mutmut's own preparation (generate the mutants, record which gate test reaches which
  function, run the clean tests and the forced failure), then the mutants ``[[file, name], ...]`` in
  mutmut's file and key order to ``OUT``; exit 1 (``clean test failed`` on stdout) when the unmutated gate fails;
* ``serve``: one process, warmed up by the clean tests as ``mutmut run`` is, that reads a mutant name per stdin line, forks it with mutmut's own
  ``ForkRunner`` (the covering tests only, mutmut's CPU and wall-clock limits) and answers one JSON line
  ``{"name", "exit", "seconds"}``; mutmut's exit codes, so the verdicts are the ones ``mutmut run`` gives;
* ``diffs``: reads ``[[file, name], ...]`` as JSON on stdin, writes ``{name: diff}``.
"""
import json
import os
import sys
from math import ceil
from pathlib import Path


def _mutmut():
    import mutmut.__main__ as main

    return main


def prepare(out: str) -> int:
    """The steps ``mutmut run`` takes before its first mutant (its ``_run``, in the same order)."""
    main = _mutmut()
    main.set_mutant_under_test("mutant_generation")
    os.makedirs("mutants", exist_ok=True)
    main.copy_src_dir()
    main.copy_also_copy_files()
    main.setup_source_paths()
    main.store_lines_covered_by_tests()
    main.create_mutants(1)
    runner = main.get_mutant_runner(1)
    main.collect_or_load_stats(runner, mutants_caught_by_type_checker={}, apply_config_invalidation=True)
    mutants, _by_path = main.collect_source_file_mutation_data(mutant_names=())
    main.set_mutant_under_test("")
    if runner.run_clean_tests(tests=main.tests_for_mutant_names(())) != 0:
        print("Failed to run clean test")
        return 1
    main.run_forced_fail_test(runner)
    listed = [[str(data.path), name] for data, name, _result in mutants]
    Path(out).write_text(json.dumps(listed), encoding="utf-8")
    return 0


def serve() -> int:
    """Answer one mutant per request line until stdin closes (the Dask worker that started it went away)."""
    answer = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # anything mutmut or pytest prints goes to the log, never into the answers
    main = _mutmut()
    from mutmut.configuration import config
    from mutmut.state import state
    from mutmut.utils.format_utils import mangled_name_from_mutant_name

    main.setup_source_paths()
    main.load_stats()
    os.environ["PY_IGNORE_IMPORTMISMATCH"] = "1"
    main.set_mutant_under_test("")
    runner = main.get_mutant_runner(1)
    if runner.run_clean_tests(tests=main.tests_for_mutant_names(())) != 0:  # as mutmut: warms the forks' parent up
        return 1
    runner.startup()
    answer.write(json.dumps({"ready": True}) + "\n")
    for line in sys.stdin:
        key = line.strip()
        if not key:
            continue
        name = key.replace("__init__.", "")  # as mutmut's own loop names a package's mutant
        tests = sorted(state().tests_by_mangled_function_name.get(mangled_name_from_mutant_name(name), set()))
        estimated = sum(state().duration_by_test[test] for test in tests)
        limit = ceil((estimated + config().timeout_constant) * config().timeout_multiplier * 2)
        runner.submit(name, tests, limit, estimated)
        result = runner.wait_for_result()
        answer.write(json.dumps({"name": key, "exit": result.exit_code, "seconds": result.duration}) + "\n")
    runner.shutdown()
    return 0


def diffs() -> int:
    from mutmut.mutation.diff_apply import get_diff_for_mutant

    out = {}
    for source, name in json.load(sys.stdin):
        try:
            out[name] = get_diff_for_mutant(name, path=Path(source))
        except Exception as exc:  # noqa: BLE001 - as the one-process path: the diff is only shown
            out[name] = f"(diff unavailable: {type(exc).__name__}: {exc})"
    json.dump(out, sys.stdout)
    return 0


if __name__ == "__main__":
    mode = sys.argv[1] if len(sys.argv) > 1 else ""
    if mode == "prepare":
        sys.exit(prepare(sys.argv[2]))
    sys.exit({"serve": serve, "diffs": diffs}[mode]())
