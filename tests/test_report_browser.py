"""The HTML report opened in a real browser (headless Chromium): every plot decodes, the page is not blank."""

from __future__ import annotations

import base64
import html
import io
import json
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from rewardlab.evaluate import evaluate
from rewardlab.types import PreferencePair

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-dev-shm-usage", "--hide-scrollbars",
]

# Appended to a copy of the report: in the window's load event (fired only after every image has loaded or
# failed) write what the browser saw into the DOM, synchronously, so that --dump-dom prints it. A PNG that
# fails to decode has naturalWidth 0 once loading is over.
PROBE = """
<script>
window.addEventListener('load', () => {
  const seen = [...document.images].map(img => ({
    plot: img.dataset.plot, complete: img.complete,
    naturalWidth: img.naturalWidth, naturalHeight: img.naturalHeight,
    shownWidth: img.getBoundingClientRect().width, shownHeight: img.getBoundingClientRect().height}));
  const out = document.createElement('pre');
  out.id = 'image-probe';
  out.textContent = JSON.stringify(seen);
  document.body.appendChild(out);
});
</script>
"""

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason=f"{CHROMIUM} is absent (Debian package 'chromium'; .ci/run "
                                                      "installs it)"),
]


def _pairs() -> list[PreferencePair]:
    out = []
    for i in range(30):
        good = "Here is a careful answer. " * (1 + i % 4)
        bad = "No." if i % 3 else "Do it yourself, I will not help. " * (1 + i % 5)
        out.append(PreferencePair(f"question {i}", good, bad, subset=("chat", "safety", "reasoning")[i % 3]))
    return out


def _chromium(user_data: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(CHROMIUM), *CHROMIUM_FLAGS, f"--user-data-dir={user_data}", *args],
        capture_output=True, text=True, timeout=90,
    )


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("report")
    evaluate(["length", '{"length": {"unit": "chars"}}'], _pairs(), output_dir=out, quiet=True,
             robustness_pairs=10)
    return out / "report.html"


def test_report_is_self_contained(report: Path) -> None:
    text = report.read_text(encoding="utf-8")
    assert not re.search(r"""(src|href)\s*=\s*["'](?!data:)""", text), "the report references an external file"
    assert "<script" not in text
    images = re.findall(r'src="data:image/png;base64,([^"]+)"', text)
    assert len(images) == 1 + 3 * 2 + 1  # subset bars, 3 plots per reward, robustness bars
    from PIL import Image

    for encoded in images:  # each embedded plot is a real, non-uniform PNG
        picture = Image.open(io.BytesIO(base64.b64decode(encoded))).convert("L")
        low, high = picture.getextrema()
        assert picture.width > 100 and picture.height > 100 and high - low > 100


def test_every_plot_renders_in_chromium(report: Path, tmp_path: Path) -> None:
    probe_page = tmp_path / "probe.html"
    probe_page.write_text(report.read_text(encoding="utf-8").replace("</body>", PROBE + "</body>"), encoding="utf-8")
    dom = _chromium(tmp_path / "profile-dom", "--dump-dom", probe_page.as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    match = re.search(r'<pre id="image-probe">(.*?)</pre>', dom.stdout, re.DOTALL)
    assert match, f"the probe did not run; chromium said: {dom.stderr[-2000:]}"
    seen = json.loads(html.unescape(match.group(1)))
    expected = report.read_text(encoding="utf-8").count("<img ")
    assert len(seen) == expected == 8
    for image in seen:
        assert image["complete"], f"{image['plot']} did not finish loading"
        assert image["naturalWidth"] > 100 and image["naturalHeight"] > 100, image
        assert image["shownWidth"] > 50 and image["shownHeight"] > 50, image
    plots = {image["plot"] for image in seen}
    assert {"subset_bars", "robustness_bars", "histogram:length", "reliability:length(unit=chars)",
            "length:length"} <= plots


def test_screenshot_is_not_blank(report: Path, tmp_path: Path) -> None:
    shot = tmp_path / "shot.png"
    result = _chromium(tmp_path / "profile-shot", f"--screenshot={shot}", "--window-size=1200,3000",
                       report.as_uri())
    assert result.returncode == 0 and shot.is_file(), result.stderr[-2000:]
    from PIL import Image

    picture = Image.open(shot).convert("RGB")
    assert picture.size == (1200, 3000)
    pixels = np.asarray(picture.resize((120, 300))).reshape(-1, 3)
    non_white = int((pixels.min(axis=1) < 230).sum())
    assert non_white / len(pixels) > 0.05  # text, tables and plots cover the page
    assert len({tuple(p) for p in pixels}) > 200  # many colours: plots, not just text
    shutil.rmtree(tmp_path / "profile-shot", ignore_errors=True)
