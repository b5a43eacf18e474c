"""``replayssm-verify``: prove the spec's obligations (and, later, fuzz and replay)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path


def _prove(args: argparse.Namespace) -> int:
    from replayssm.verify.catalog import obligations
    from replayssm.verify.obligation import prove, render_scenario, save_counterexample

    try:
        chosen = obligations(args.only)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.list:
        for ob in chosen:
            print(f"{ob.name}  [{ob.transition}]\n    {ob.statement}")
            names = sorted({n for claim in ob.build() for n, _ in claim.assumptions})
            print(f"    assumptions: {', '.join(names)}")
        return 0
    start = time.perf_counter()
    results = []
    for ob in chosen:
        r = prove(ob)
        results.append(r)
        print(f"{r.name:<44} {r.status:<8} {r.seconds * 1000:8.1f} ms  ({r.cases} cases)", flush=True)
        if r.status != "proved":
            if r.detail:
                print(f"    {r.detail}")
            if r.counterexample is not None:
                print(render_scenario(r.counterexample))
                path = save_counterexample(r, Path(args.counterexamples))
                print(f"    counterexample saved to {path}")
    total = time.perf_counter() - start
    failed = [r for r in results if r.status != "proved"]
    print(f"{len(results) - len(failed)}/{len(results)} obligations proved in {total:.2f} s")
    if args.json:
        Path(args.json).write_text(json.dumps(
            {"obligations": [r.as_json() for r in results], "seconds": round(total, 3)}, indent=2))
    return 1 if failed else 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="replayssm-verify", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("prove", help="discharge the Z3 proof obligations")
    p.add_argument("--only", metavar="NAME", help="run the obligations whose name contains NAME")
    p.add_argument("--list", action="store_true", help="show each obligation's statement and assumptions")
    p.add_argument("--json", metavar="FILE", help="write the results as JSON")
    p.add_argument("--counterexamples", metavar="DIR", default="out/counterexamples",
                   help="where failed obligations' scenarios are saved (default: out/counterexamples)")
    p.set_defaults(run=_prove)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
