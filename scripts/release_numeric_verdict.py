"""The verdict of ``scripts/gpu_release_numeric.sh``: its campaigns' JSON lines read back as a table.

    python3 scripts/release_numeric_verdict.py LOGDIR     (exit 1 when anything is not as expected)

Each ``LOGDIR/NAME.jsonl`` is one process of ``python -m replayssm.fuzz.release_numeric``: a line per
campaign, then its summary line. A campaign without a plant is ``ok`` only when it checked something (at
least one output against its float64 truth) and did not fail; one that checked nothing is ``NOTHING
CHECKED``. A planted campaign (its config's ``plant``) is ``caught`` only when it failed the way its plant
must make it fail (:data:`EXPECTED`); a failure of another kind (a block that must not change did) is
``CAUGHT BY ANOTHER FAILURE``, and no failure ``MISSED``. A process with no lines, or whose last line is not
a summary of as many campaigns as it wrote, is ``NO RESULT``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

EXPECTED = {
    "flush one step late": "times its bound",
    "commit one token short": "times its bound",
}
"""What each plant of ``fuzz/release_numeric.py``'s ``PLANTS`` must fail with: a value (a token's output or a
slot's state) beyond its bound off the float64 truth, as the buffered tokens are lost or a commit falls
short (``BoundExceeded`` of ``_check``; not of ``_frames``, a block that must not change)."""

GOOD = ("ok", "caught")
"""The verdicts that are as expected."""


def campaign_verdict(campaign: dict) -> str:
    """One campaign's verdict and its first failure (see the module docstring)."""
    failure, plant = campaign.get("failure"), campaign["config"].get("plant")
    if plant is not None:
        if not failure:
            return "MISSED"
        return "caught" if EXPECTED[plant] in failure else "CAUGHT BY ANOTHER FAILURE"
    if failure:
        return "FAILED"
    return "ok" if campaign["outputs"] > 0 else "NOTHING CHECKED"


def table(log: Path) -> tuple[list[str], int]:
    """The table's lines for every process under ``log`` and how many verdicts are not as expected."""
    bad = 0
    rows = [f"{'process':22} {'campaign':58} {'passes':>6} {'outputs':>8} {'states':>7} {'worst out':>10} "
            f"{'worst st':>9}  verdict"]
    for f in sorted(log.glob("*.jsonl")):
        lines = [json.loads(x) for x in f.read_text().splitlines() if x.startswith("{")]
        campaigns = lines[:-1]
        if not lines or "campaigns" not in lines[-1] or lines[-1]["campaigns"] != len(campaigns):
            bad += 1
            err = log / (f.stem + ".err")
            rows.append(f"{f.stem:22} NO RESULT: {(err.read_text() if err.exists() else '')[-400:]!r}")
            continue
        for c in campaigns:
            k = c["config"]
            name = f"{k['backend']} W{k['buffer_len']} T{k['query_len']} {k['cache_mode']} {k['state_dtype']}"
            verdict = campaign_verdict(c)
            bad += verdict not in GOOD
            rows.append(f"{f.stem:22} {name:58} {c['passes']:>6} {c['outputs']:>8} {c['states']:>7} "
                        f"{c['worst_output']:>10.3g} {c['worst_state']:>9.3g}  {verdict} {c['failure'] or ''}"[:400])
    ran = len(rows) > 1
    rows.append("verdict: " + (f"{bad} unexpected" if bad else "all as expected" if ran else
                               "no campaign ran (PARTS named none)"))
    return rows, bad


def main(argv: list[str]) -> int:
    rows, bad = table(Path(argv[0]))
    print("\n".join(rows))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
