"""``sysverbs topo --svg``: every GPU fixture drawn, then rendered by a real browser.

One headless chromium (Debian's) loads one HTML page that embeds the SVG of every GPU
fixture; a script in the page measures, with the browser's own layout and fonts
(``getBBox``), that every box is visible, holds its text and its children, that
sibling boxes do not overlap, and that each assignment line joins a GPU box to a NIC
box; it writes its findings into the page, which ``--dump-dom`` prints.  The counts
are compared with what placement reads (one box per GPU, RDMA device and Data Direct
DMA function, one line per assigned NIC).  Under ``CI=true`` a missing chromium fails.
"""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from sysverbs import cli
from sysverbs.placement import assign, read_host, read_host_at
from sysverbs.placement._svg import DMA_ID, Tree, host_svg, layout, walk
from sysverbs.testing import cache
from sysverbs.testing.builder_grace import GRACE_HOSTS
from sysverbs.testing.host import fixture_names
from tests.conftest import require

ROOT = Path(__file__).resolve().parent.parent
GPU_FIXTURES = [n for n in fixture_names() if n.startswith("gpu-")]
PICTURE = ROOT / "docs/topo-gpu-hgx-h100.svg"

CHECK = r"""
const out = {};
function inside(a, b) {  // a within b (half a pixel of rounding)
  return a.x >= b.x - .5 && a.y >= b.y - .5 && a.x + a.width <= b.x + b.width + .5 &&
         a.y + a.height <= b.y + b.height + .5;
}
function overlap(a, b) {
  return a.x < b.x + b.width && b.x < a.x + a.width && a.y < b.y + b.height &&
         b.y < a.y + a.height;
}
for (const div of document.querySelectorAll('div[data-fixture]')) {
  const svg = div.querySelector('svg');
  const r = {count: {}, links: 0, bad: []};
  for (const g of svg.querySelectorAll('g.box')) {
    const kind = g.classList[1];
    r.count[kind] = (r.count[kind] || 0) + 1;
    const box = g.querySelector(':scope > rect').getBBox();
    const style = getComputedStyle(g);
    if (style.display === 'none' || style.visibility === 'hidden' || box.width <= 0 ||
        box.height <= 0) r.bad.push(g.id + ': not visible');
    let bottom = box.y;
    for (const t of g.querySelectorAll(':scope > text')) {
      const tb = t.getBBox();
      if (!inside(tb, box)) r.bad.push(g.id + ': text overflows: ' + t.textContent);
      bottom = Math.max(bottom, tb.y + tb.height);
    }
    const kids = [...g.querySelectorAll(':scope > g.box')].map(
      k => [k.id, k.querySelector(':scope > rect').getBBox()]);
    kids.forEach(([id, kb], i) => {
      if (!inside(kb, box)) r.bad.push(id + ': outside ' + g.id);
      if (kb.y < bottom) r.bad.push(id + ': over the text of ' + g.id);
      for (const [id2, kb2] of kids.slice(i + 1))
        if (overlap(kb, kb2)) r.bad.push(id + ' overlaps ' + id2);
    });
  }
  for (const p of svg.querySelectorAll('path.assign')) {
    const gpu = svg.querySelector('[id="' + p.dataset.gpu + '"]');
    const nic = svg.querySelector('[id="' + p.dataset.nic + '"]');
    if (!gpu || !gpu.classList.contains('gpu') || !nic || !nic.classList.contains('nic') ||
        p.getTotalLength() <= 0) r.bad.push('bad link ' + p.dataset.gpu + ' ' + p.dataset.nic);
    r.links++;
  }
  out[div.dataset.fixture] = r;
}
document.getElementById('result').textContent = JSON.stringify(out);
"""


def _expected(name: str, host: Any = None) -> tuple[str, dict[str, Any]]:
    if host is None:
        host = read_host_at(cache.fixture_tree(name).host_root)
    plan = assign(host)
    dma = [a for a, d in host.pci.items() if (d.vendor, d.device) == DMA_ID]
    placed = [a for a in [*(g.address for g in host.gpus), *(n.address for n in host.nics),
                          *dma] if a is not None and a in host.pci]
    want = {"gpu": len(host.gpus), "nic": len(host.nics), "dma": len(dma),
            "numa": len({host.numa_affinity(a)[0] for a in placed}),
            "links": sum(len(a.nics) for a in plan)}
    return host_svg(host, plan, f"fixture {name}"), want


def test_layout_nests_without_overlap() -> None:
    leaf = Tree("gpu", "gpu-a", ("GPU0 0000:1b:00.0", "nvidia H100"))
    wide = Tree("nic", "nic-b", ("mlx5_0 0000:1a:00.0 and a much longer line",))
    root = layout(Tree("machine", "m", ("M",), (Tree("numa", "n", ("NUMA node 0",),
                                                     (leaf, wide)),)))
    boxes = {b.id: b for b in walk(root)}
    a, b, n = boxes["gpu-a"], boxes["nic-b"], boxes["n"]
    assert a.x + a.w <= b.x and a.y == b.y            # side by side
    assert n.x < a.x and b.x + b.w < n.x + n.w and n.y < a.y and a.y + a.h < n.y + n.h
    assert b.w > len(wide.lines[0]) * 7.2              # the text's width in a 12px mono


def test_docs_picture_is_up_to_date() -> None:
    svg, _ = _expected("gpu-hgx-h100")
    assert PICTURE.read_text() == svg, "regenerate: sysverbs topo --fixture gpu-hgx-h100 " \
        "--svg docs/topo-gpu-hgx-h100.svg"


def test_cli_svg(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "h.svg"
    assert cli.main(["topo", "--fixture", "gpu-pcie-2socket", "--svg", str(out)]) == 0
    text = out.read_text()
    assert text.startswith("<svg ") and text.count('class="box gpu"') == 4
    assert cli.main(["topo", "--fixture", "gpu-pcie-2socket", "--svg", "-", "--json"]) == 2
    assert "--svg draws every GPU's NICs" in capsys.readouterr().err


def test_every_gpu_fixture_in_a_real_browser(tmp_path: Path) -> None:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        require("chromium is not installed (apt-get install chromium)", "chromium")
    assert browser is not None
    want: dict[str, dict[str, Any]] = {}
    parts = ["<!DOCTYPE html><html><body>"]
    # and a GB300 tray of the testing kit: its ConnectX-8 Data Direct DMA functions
    tray = GRACE_HOSTS["gb300-nvl72"]().materialize(tmp_path / "gb300")
    hosts: dict[str, Any] = {name: None for name in GPU_FIXTURES}
    hosts["gb300-nvl72"] = read_host(str(tray.sysfs))
    for name, host in hosts.items():
        svg, want[name] = _expected(name, host)
        parts.append(f'<div data-fixture="{html.escape(name)}">{svg}</div>')
    parts.append(f'<pre id="result">pending</pre><script>{CHECK}</script></body></html>')
    page = tmp_path / "all.html"
    page.write_text("".join(parts))
    p = subprocess.run([browser, "--headless", "--disable-gpu", "--no-sandbox",
                        "--no-first-run", "--disable-extensions", f"--user-data-dir={tmp_path}/u",
                        "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120)
    m = re.search(r'<pre id="result">(.*?)</pre>', p.stdout, re.S)
    assert m is not None and m.group(1) != "pending", p.stderr[-2000:]
    got = json.loads(html.unescape(m.group(1)))
    assert set(got) == set(want) and len(want) >= 8 and want["gb300-nvl72"]["dma"] > 0
    for name, w in want.items():
        r = got[name]
        assert r["bad"] == [], (name, r["bad"][:5])
        assert {k: r["count"].get(k, 0) for k in ("gpu", "nic", "dma", "numa")} == {
            k: w[k] for k in ("gpu", "nic", "dma", "numa")}, name
        assert r["links"] == w["links"] and (w["links"] > 0 or name == "gb300-nvl72"), name
