"""``report.png``: the page rendered by a real headless Chromium (Debian's ``chromium``), offline.

``check --screenshot`` and the browser test both use :func:`render`, so what the test looks at is what a
person gets. No network: the page is a local file with nothing to fetch, and background networking is off.
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

FLAGS = ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
         "--disable-background-networking", "--no-first-run", "--hide-scrollbars")
PNG_FILE = "report.png"
WIDTH, SCREEN = 1366, 768  # a laptop's window: the first screen is the top SCREEN pixels

# Run in a copy of the page (the page itself has no script): every <details> opened, then every element whose
# content is wider than its box, every trace label running into the boxes, every coverage bar outside its track,
# and where #why sits.
PROBE = """<script>
document.querySelectorAll('details').forEach(d => d.open = true);
const bad = [];
const name = el => el.tagName.toLowerCase() + (el.id ? '#' + el.id : '') + (el.className && el.className.baseVal === undefined
  ? '.' + String(el.className).split(' ')[0] : '') + ': ' + (el.textContent || '').trim().slice(0, 60);
for (const el of document.querySelectorAll('body *')) {
  if (el.closest('svg') || el.closest('.scroll') || el.clientWidth === 0) continue;
  if (el.scrollWidth > el.clientWidth + 1) bad.push('wider than its box: ' + name(el));
}
for (const text of document.querySelectorAll('svg.trace text.label')) {
  const box = text.getBBox();
  if (box.x + box.width > LEFT) bad.push('trace label into the boxes: ' + text.textContent.slice(0, 60));
}
for (const bar of document.querySelectorAll('.barbox .bar')) {
  const inner = bar.getBoundingClientRect(), track = bar.parentElement.getBoundingClientRect();
  if (inner.top < track.top - 0.5 || inner.bottom > track.bottom + 0.5 || inner.right > track.right + 0.5)
    bad.push('coverage bar outside its track');
}
if (document.documentElement.scrollWidth > window.innerWidth + 1) bad.push('the page is wider than the window');
const why = document.getElementById('why');
const probe = {overflow: bad, why_top: why ? why.getBoundingClientRect().top : null,
               why_bottom: why ? why.getBoundingClientRect().bottom : null, why_text: why ? why.innerText : ''};
const out = document.createElement('pre');
out.id = 'probe';
out.textContent = JSON.stringify(probe);
document.body.appendChild(out);
</script>"""


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def _run(page: Path, *flags: str, timeout: float) -> subprocess.CompletedProcess:
    browser = chromium()
    if browser is None:
        raise RuntimeError("chromium is not installed (apt-get install chromium)")
    done = subprocess.run([browser, *FLAGS, *flags, Path(page).resolve().as_uri()], capture_output=True, text=True,
                          timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"chromium {' '.join(flags)} exited {done.returncode}: {done.stderr[-500:]}")
    return done


def dump_dom(page: Path, timeout: float = 120) -> str:
    """The DOM after the page loaded, as Chromium serialises it; RuntimeError when Chromium fails."""
    return _run(page, "--dump-dom", timeout=timeout).stdout


def probe(page: Path, *, width: int = WIDTH, height: int = SCREEN, timeout: float = 120) -> dict:
    """Layout facts from Chromium about ``page`` at ``width`` x ``height``: ``overflow`` (what overflows its box,
    every ``<details>`` opened), ``why_top``/``why_bottom`` (px of the reasons box, #why) and ``why_text``."""
    from .trace_drawing import LEFT

    html = Path(page).read_text(encoding="utf-8").replace("</body>", PROBE.replace("LEFT", str(LEFT - 4)) + "</body>")
    with tempfile.TemporaryDirectory() as folder:
        copy = Path(folder) / "probe.html"
        copy.write_text(html, encoding="utf-8")
        dom = _run(copy, "--dump-dom", f"--window-size={width},{height}", timeout=timeout).stdout
    found = re.search(r'<pre id="probe">(.*?)</pre>', dom, re.S)
    if found is None:
        raise RuntimeError("the probe script wrote nothing: did the page load?")
    return json.loads(found.group(1).replace("&quot;", '"').replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&"))


def render(page: Path, png: Path, *, width: int = 1366, height: int = 2400, timeout: float = 120) -> Path:
    """A screenshot of the top ``height`` pixels of ``page`` at a laptop's width; RuntimeError on failure."""
    _run(page, f"--screenshot={png}", f"--window-size={width},{height}", timeout=timeout)
    if not Path(png).is_file():
        raise RuntimeError(f"chromium wrote no screenshot at {png}")
    return Path(png)
