"""What a run leaves behind, for the robustness tests (issue 18): its live processes, found by a token every
process of the run inherits in its environment, and the partial report of an interrupted ``check``."""
from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path


def alive(token: str) -> list[int]:
    """PIDs of live processes whose environment carries ``token`` (a zombie is already dead)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if token.encode() in (entry / "environ").read_bytes():
                if (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
                    found.append(int(entry.name))
        except OSError:
            continue
    return found


def left(token: str) -> list[int]:
    """The run's processes still alive, after giving killed ones two seconds to be reaped."""
    found = alive(token)
    for _ in range(20):
        if not found:
            break
        time.sleep(0.1)
        found = alive(token)
    return found


def interrupted_report(child: subprocess.Popen, code: int, name: str, report_dir: Path) -> tuple[dict, str]:
    """Wait for a signalled ``check``; assert it exited ``code`` without a traceback and wrote its partial
    report marked ``interrupted: name``; the report and stdout."""
    out, err = child.communicate(timeout=60)
    assert child.returncode == code, (out[-1500:], err[-1500:])
    assert "Traceback" not in out + err, err
    report = json.loads((report_dir / "report.json").read_text())
    assert report["interrupted"] == name and report["exit_code"] == code
    return report, out
