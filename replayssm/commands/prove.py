"""``replayssm-verify prove``: discharge the Z3 proof obligations (or the kernels' source with
``--kernels``), print one line per obligation, save each failure's counterexample, write JSON and JUnit."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from replayssm.base.interrupts import Interrupted, interruptible, stop_interrupting
from replayssm.base.reports import (
    EXIT_FINDING,
    EXIT_PASSED,
    STDOUT,
    JunitCase,
    UsageError,
    check_distinct_outputs,
    check_output_file,
    check_output_folder,
    status_after_writing,
    write_json,
    write_junit,
    write_reports,
)
from replayssm.spec.system import INVARIANTS
from replayssm.verify.counterexamples import render_scenario, save_counterexample
from replayssm.verify.obligation import Obligation, Result
from replayssm.verify.runner import DEFAULT_JOBS_CAP, MAX_JOBS, REPORT_SCHEMA, Report, default_jobs, discharge

from .finding_reports import add_options, check_options, prove_reports

NAME = "prove"
HELP = "discharge the Z3 proof obligations"
OUTPUTS = """outputs:
  one line per obligation on standard output (standard error with --json -)
  each failed obligation's counterexample in --counterexamples DIR (default out/counterexamples):
    draw it with replayssm-verify explain FILE; a kernel's also as FILE.kernel-trace.json, which
    replayssm-verify replay FILE runs on the real kernel
  proved cases kept in the proof cache (--cache DIR, default ~/.cache/replayssm-verify; --no-cache)
  --json, --junit, --sarif, --html: written when the run ends or is interrupted"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--only", metavar="NAME", help="run the obligations whose name contains NAME")
    parser.add_argument("--transition", metavar="NAME",
                        help="run the obligations of this transition (prove --list shows each one's in brackets)")
    parser.add_argument("--invariant", metavar="NAME",
                        help="run the obligations that prove this system invariant "
                             f"({', '.join(inv.name for inv in INVARIANTS)})")
    parser.add_argument("--list", action="store_true",
                        help="show each obligation's statement and the assumptions of its first case")
    parser.add_argument("--json", metavar="FILE", help="write the results as JSON")
    parser.add_argument("--jobs", type=int, default=default_jobs(),
                        help=f"worker processes, 1 to {MAX_JOBS} (default: every CPU this process may run on, "
                        f"at most {DEFAULT_JOBS_CAP})")
    parser.add_argument("--counterexamples", metavar="DIR", default="out/counterexamples",
                        help="where failed obligations' scenarios are saved (default: out/counterexamples)")
    parser.add_argument("--junit", metavar="FILE", help="write JUnit XML: one test case per obligation")
    parser.add_argument("--cache", metavar="DIR", help="the proof cache's folder (default: $REPLAYSSM_VERIFY_CACHE, "
                        "else ~/.cache/replayssm-verify)")
    parser.add_argument("--no-cache", action="store_true", help="prove every case again; read and write no cache")
    add_options(parser)
    parser.add_argument("--kernels", action="store_true",
                        help="prove the Triton kernels' source (memory safety, equivalence with the spec, int32, "
                             "conflicts): ours, or --impl's")
    parser.add_argument("--impl", metavar="MODULE_OR_FILE",
                        help="with --kernels: the module or .py file whose kernels to prove (default: ours)")


LIST_SCHEMA = "replayssm-prove-list/1"
"""The ``schema`` of ``prove --list --json``: per obligation its name, transition, statement,
first case and that case's assumptions."""


def _check_prove_args(args: argparse.Namespace) -> None:
    """Every option of ``prove`` checked before any work (:class:`UsageError`)."""
    if not 1 <= args.jobs <= MAX_JOBS:
        raise UsageError(f"--jobs must be in [1, {MAX_JOBS}], got {args.jobs}")
    check_output_file(args.json, "--json", stdout_ok=True)
    check_output_file(args.junit, "--junit")
    check_options(args)
    check_distinct_outputs({"--json": args.json, "--junit": args.junit, "--sarif": getattr(args, "sarif", None),
                            "--html": getattr(args, "html", None)})
    check_output_folder(args.counterexamples, "--counterexamples")
    if args.cache is not None:
        check_output_folder(args.cache, "--cache")
    if args.impl is not None and not args.kernels:
        raise UsageError("--impl names the kernels to prove: it needs --kernels")


def _print_result(r: Result, args: argparse.Namespace, saved: list[str]) -> None:
    """One obligation's line; for a failure its counterexample, saved under
    ``--counterexamples`` (a file that cannot be written is reported, and the
    run goes on)."""
    reused = f", {r.reused} parts proved by its lemmas" if r.reused else ""
    reused += f", {r.cases_cached} from the proof cache" if r.cases_cached else ""
    how = "cached" if r.cached else f"{r.seconds * 1000:8.1f} ms"
    print(f"{r.name:<44} {r.status:<8} {how:>11}  ({r.cases} cases{reused})", file=args.out, flush=True)
    if r.status == "proved":
        return
    if r.detail:
        print(f"    {r.detail}", file=args.out)
    if r.counterexample is None:
        return
    print(render_scenario(r.counterexample), file=args.out)
    try:
        scenario, *trace = save_counterexample(r, Path(args.counterexamples))
    except OSError as e:
        print(f"error: cannot save the counterexample of {r.name} under --counterexamples "
              f"{args.counterexamples}: {e}", file=sys.stderr)
        return
    saved.append(str(scenario))
    print(f"    counterexample saved to {scenario} (replayssm-verify explain FILE draws it)", file=args.out)
    from replayssm.verify.kernels.obligations import KERNEL_OBLIGATIONS

    if r.name in KERNEL_OBLIGATIONS:  # a launch-API role's: explained and replayable (a tracker role's is not yet)
        from replayssm.verify.kernels.selection import describe_failure

        print("\n".join(describe_failure(r, Path(args.counterexamples), args.impl)), file=args.out)
    for path in trace:
        print(f"    its run saved to {path}", file=args.out)


def _junit_cases(report: Report) -> list[JunitCase]:
    cases = []
    for r in report.results:
        failure = None
        if r.status != "proved":
            failure = "\n".join(x for x in (f"{r.status}: {r.detail}" if r.detail else r.status,
                                             render_scenario(r.counterexample) if r.counterexample else "") if x)
        cases.append(JunitCase(r.name, r.seconds, failure, "failure" if r.status == "failed" else "error"))
    return cases


def narrowed(obligations: list[Obligation], catalog: list[Obligation], transition: str | None,
             invariant: str | None) -> list[Obligation]:
    """Those of ``obligations`` of ``transition`` that prove ``invariant``
    (either may be None: no narrowing); a transition no obligation of the
    ``catalog`` has, or a name of no system invariant, is a
    :class:`UsageError` listing the allowed ones."""
    if transition is not None:
        known = sorted({ob.transition for ob in catalog})
        if transition not in known:
            raise UsageError(f"--transition must be one of {', '.join(known)}, got {transition!r}")
        obligations = [ob for ob in obligations if ob.transition == transition]
    if invariant is not None:
        names = [inv.name for inv in INVARIANTS]
        if invariant not in names:
            raise UsageError(f"--invariant must be one of {', '.join(names)}, got {invariant!r}")
        obligations = [ob for ob in obligations if invariant in ob.invariants]
    if not obligations:
        raise UsageError(f"no obligation matches {_narrowing(transition, invariant)} with the other options")
    return obligations


def _narrowing(transition: str | None, invariant: str | None) -> str:
    return " and ".join(f"--{k} {v}" for k, v in (("transition", transition), ("invariant", invariant)) if v)


def _chosen(args: argparse.Namespace, cache: str | None) -> list[Obligation]:
    """The obligations ``--only``, ``--kernels``, ``--transition`` and
    ``--invariant`` ask for; with a cache, the catalog of this tree is
    recorded in it for the next warm run."""
    from replayssm.verify.catalog import obligations
    from replayssm.verify.obligation import REGISTRY
    from replayssm.verify.proof_cache import ProofCache

    try:
        if args.kernels:
            from replayssm.verify.kernels.selection import kernel_obligations

            if args.impl is None:
                chosen = [REGISTRY[n] for n in kernel_obligations(None, args.only)]
            else:
                from replayssm.verify.kernels.generation_roles import target_roles
                from replayssm.verify.kernels.selection import target_label
                from replayssm.verify.kernels.tracker_proofs import register

                module, roles = target_roles(args.impl)
                trackers = register(module, target_label(args.impl))  # a generation like P: its adapter's roles
                if trackers:
                    chosen = [REGISTRY[n] for n in trackers if args.only is None or args.only in n]
                    if not chosen:
                        raise ValueError(f"--only {args.only!r} matches no kernel obligation; known: "
                                         f"{', '.join(trackers)}")
                    return narrowed(chosen, [REGISTRY[n] for n in trackers], args.transition, args.invariant)
                chosen = [REGISTRY[n] for n in kernel_obligations(args.impl, args.only, roles, module)]
            kernels = [ob for ob in REGISTRY.values() if ob.name.startswith("kernel.")]
            return narrowed(chosen, kernels, args.transition, args.invariant)
        chosen = obligations(args.only)
    except ValueError as e:
        raise UsageError(str(e)) from None
    if cache is not None:
        ProofCache(cache).keep_catalog(obligations())
    return narrowed(chosen, obligations(), args.transition, args.invariant)


def _hypotheses_by_provenance(names: set[str]) -> list[str]:
    """One line per provenance status of a case's hypothesis names (``spec.contract``);
    an invariant's conjuncts are counted, not listed."""
    from replayssm.spec.contract import INVARIANT_PREFIXES, PROOF, by_status

    lines = []
    for status, group in by_status(names):
        if status == PROOF:
            conjuncts = [n for n in group if n.startswith(INVARIANT_PREFIXES)]
            group = [n for n in group if n not in conjuncts]
            if conjuncts:
                group.append(f"the invariant of the pre-state ({len(conjuncts)} conjuncts)")
            status = "the proof's own"
        lines.append(f"{status}: {', '.join(group)}")
    return lines


def run(args: argparse.Namespace) -> int:
    from replayssm.verify.proof_cache import ProofCache, default_folder
    from replayssm.verify.runner import LemmaCycle, Report, proved_on_this_tree

    _check_prove_args(args)
    cache = None if args.no_cache else (args.cache or str(default_folder()))
    args.out = sys.stderr if args.json == STDOUT else sys.stdout
    unwritable = ProofCache(cache).unwritable() if cache and args.cache is None else None
    if unwritable:  # the default folder (under $HOME) cannot be written: run without one rather than claim it
        print(f"warning: no proof cache: cannot write {cache}: {unwritable}", file=sys.stderr)
        cache = None
    narrowing = args.transition is not None or args.invariant is not None  # the warm path reads no catalog
    warm = proved_on_this_tree(cache, args.only) if cache and not (args.kernels or args.list or narrowing) else None
    if warm is not None:  # every obligation asked for was proved on this very tree: no claim is built
        report = Report([r.name for r in warm])
        run = (r for r in warm)
    else:
        chosen = _chosen(args, cache)
        if args.list:
            listed = []
            for ob in chosen:
                print(f"{ob.name}  [{ob.transition}]\n    {ob.statement}", file=args.out)
                first = next(iter(ob.build()), None)
                names = {n for n, _ in first.assumptions} if first is not None else set()
                print(f"    assumptions (first case{': ' + first.case if first is not None and first.case else ''}), "
                      f"by provenance:{'' if names else ' none'}", file=args.out)
                for line in _hypotheses_by_provenance(names):
                    print(f"      {line}", file=args.out)
                listed.append({"name": ob.name, "transition": ob.transition, "statement": ob.statement,
                               "first_case": first.case if first is not None else None,
                               "assumptions": sorted(names)})
            if args.json:  # the listing as data (it wrote nothing)
                return status_after_writing(EXIT_PASSED, write_reports([
                    ("--json", args.json, lambda: write_json(args.json, LIST_SCHEMA, {"obligations": listed}))],
                    "the list is printed above"))
            return EXIT_PASSED
        report = Report([ob.name for ob in chosen])
        run = discharge(report.order, args.jobs, cache, reuse_whole=args.impl is None,  # a target's source is not digested
                        progress=lambda line: print(line, file=args.out, flush=True))
    saved: list[str] = []
    start = time.perf_counter()
    status = EXIT_PASSED
    with interruptible():
        print(f"proving {len(report.order)} obligations with {args.jobs} worker(s)"
              f"{', proof cache ' + cache if cache else ', no proof cache'}", file=args.out, flush=True)
        try:
            for r in run:
                report.add(r)
                _print_result(r, args, saved)
        except Interrupted as e:
            run.close()
            report.interrupted = True
            status = e.status
            print(f"{e}: the workers were stopped", file=args.out, flush=True)
        except LemmaCycle as e:
            raise UsageError(str(e)) from None
        stop_interrupting()  # the work is over: a signal must not cut the report short
        report.seconds = time.perf_counter() - start
        print(report.summary(), file=args.out, flush=True)
        written = write_reports([
            ("--json", args.json, lambda: write_json(args.json, REPORT_SCHEMA, {**report.as_json(),
                                                                                "counterexamples": saved})),
            ("--junit", args.junit, lambda: write_junit(args.junit, "replayssm-verify prove", _junit_cases(report),
                                                        report.interrupted)),
            *prove_reports(args, {**report.as_json(), "counterexamples": saved}, saved),
        ], "the results are printed above")
    if status == EXIT_PASSED:
        status = EXIT_FINDING if report.failed else EXIT_PASSED
    return status_after_writing(status, written)
