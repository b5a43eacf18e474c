"""The prover's bookkeeping: cases split into shards and merged, parts reused
from lemmas proved in the same run, the first violated part reported."""

from __future__ import annotations

import pytest

from replayssm.verify import obligation, runner
from replayssm.verify.obligation import REGISTRY, Claim, LazyClaim, Obligation, merge_shards, prove
from replayssm.verify.runner import LemmaCycle, case_share, discharge, prove_named, share_cases
from replayssm.verify.terms import named_int

X = named_int("test.x")


def _claims(goals: list[list[tuple[str, object]]], cover: object = True, strategy: str = "parts"):
    return lambda: [Claim(goal, [("x positive", X > 0)], cover, f"case {i}", {"x": X}, strategy=strategy)
                    for i, goal in enumerate(goals)]


BASE = [[("non-negative", X >= 0), ("positive", X > 0)], [("above -1", X > -1)]]


@pytest.mark.parametrize("strategy", ["parts", "preprocess"])
def test_shards_merge_to_the_whole_verdict(strategy: str) -> None:
    good = Obligation("t.good", "t", "", _claims(BASE, strategy=strategy))
    bad = Obligation("t.bad", "t", "", _claims(BASE + [[("too big", X > 5)]], strategy=strategy))
    assert prove(good).status == "proved"
    merged = merge_shards([prove(good, (i, 2)) for i in range(2)])
    assert merged.status == "proved" and merged.cases == 2
    shards = [prove(bad, (i, 2)) for i in range(2)]
    assert [s.status for s in shards] == ["failed", "proved"]  # case 2 lands in shard 0
    merged = merge_shards(shards)
    assert merged.status == "failed" and merged.counterexample["violated"] == ["too big"]


def test_shards_taking_cases_from_one_counter_prove_each_case_once() -> None:
    """Dynamic sharding: whichever shard asks next gets the next case index."""
    counter = iter(range(100))
    take = lambda: next(counter)  # noqa: E731 - one counter shared by both shards
    bad = Obligation("t.bad", "t", "", _claims(BASE + [[("too big", X > 5)]] + BASE))
    first, second = prove(bad, (0, 2), take=take), prove(bad, (1, 2), take=take)
    # the first shard takes cases 0, 1, 2 and stops at the failing case 2; the
    # second takes 3 and 4, never a case the first took
    assert (first.status, first.cases) == ("failed", 3) and first.counterexample["case"] == "case 2"
    assert (second.status, second.cases) == ("proved", 2)
    assert merge_shards([first, second]).status == "failed"


def test_after_a_shard_fails_the_others_take_no_further_case(monkeypatch: pytest.MonkeyPatch) -> None:
    bad = Obligation("t.bad_first", "t", "", _claims([[("too big", X > 5)]] + BASE), shardable=True)
    monkeypatch.setitem(REGISTRY, bad.name, bad)
    share_cases([bad.name])
    first = prove_named(bad.name, (0, 2), (), True)
    second = prove_named(bad.name, (1, 2), (), True)
    assert (first.status, first.cases) == ("failed", 1)
    assert (second.status, second.cases) == ("proved", 0)


def _recorded(count: int, built: list[int]):
    """``count`` lazy cases that record, in ``built``, the order they are built in."""
    def make(i: int) -> Claim:
        built.append(i)
        return Claim([("above -5", X > -5)], [("x positive", X > 0)], True, f"case {i}")

    return lambda: [LazyClaim(f"case {i}", lambda i=i: make(i)) for i in range(count)]


def test_a_shard_takes_its_worker_s_share_first_then_helps_the_others(monkeypatch: pytest.MonkeyPatch) -> None:
    """Worker 1's shard builds cases 1 and 3 (those worker 1 built for the
    obligation before, as the row-blocked kernel's four obligations share
    their cases), then the share of the shard that has not begun."""
    built: list[int] = []
    ob = Obligation("t.shares", "t", "", _recorded(5, built), shardable=True)
    monkeypatch.setitem(REGISTRY, ob.name, ob)
    monkeypatch.setitem(runner._WORKER, "id", 1)
    share_cases([ob.name], 2)
    first = prove_named(ob.name, (0, 2), (), True)
    assert built == [1, 3, 0, 2, 4] and (first.status, first.cases) == ("proved", 5)
    second = prove_named(ob.name, (1, 2), (), True)  # share 1 is taken: it gets share 0, emptied
    assert second.cases == 0 and built == [1, 3, 0, 2, 4]


def test_shares_hand_out_each_case_once_whoever_asks(monkeypatch: pytest.MonkeyPatch) -> None:
    ob = Obligation("t.shares", "t", "", _recorded(5, []), shardable=True)
    monkeypatch.setitem(REGISTRY, ob.name, ob)
    share_cases([ob.name], 2)
    monkeypatch.setitem(runner._WORKER, "id", 0)
    a = case_share(ob.name, 2)
    monkeypatch.setitem(runner._WORKER, "id", 1)
    b = case_share(ob.name, 2)
    handed = [a.take(), b.take(), a.take(), b.steal(5), a.take(), a.steal(5), b.steal(5), a.steal(5), b.take()]
    # a take past the last case (6, 5) is the shard finding its share at an end
    assert handed == [0, 1, 2, 4, 6, 3, None, None, 5]


def test_a_cover_satisfiable_under_more_assumptions_is_not_checked_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """A non-vacuity check answered by an earlier one under a superset of the
    assumptions asks no solver; one under other assumptions still does, and
    a vacuous case is still reported."""
    monkeypatch.setattr(obligation, "SATISFIABLE", obligation.Satisfiable())
    both, one = [("x positive", X > 0), ("x small", X < 10)], [("x positive", X > 0)]
    cover = X == 3

    def ob(name: str, assumptions: list) -> Obligation:
        return Obligation(name, "t", "", lambda: [Claim([("above -1", X > -1)], assumptions, cover, "case")],
                          every_case=True)

    assert prove(ob("t.more", both)).status == "proved"
    real, calls = obligation.new_solver, []

    def counting(*args: object, **kwargs: object) -> object:
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(obligation, "new_solver", counting)
    assert prove(ob("t.fewer", one)).status == "proved"
    assert len(calls) == 1  # the goal's query; the cover was satisfiable under more assumptions
    vacuous = prove(ob("t.vacuous", [("x positive", X > 0), ("x big", X > 20)]))
    assert vacuous.status == "failed" and "vacuous case" in vacuous.detail and len(calls) == 3


def test_the_satisfiable_record_forgets_its_oldest_past_its_size(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(obligation, "SATISFIABLE_KEPT", 1)
    record = obligation.Satisfiable()
    record.add([X > 0], X == 3)
    assert record.implied([X > 0], X == 3)
    record.add([X > 1], X == 4)
    assert not record.implied([X > 0], X == 3) and record.implied([X > 1], X == 4)


def test_a_merge_with_no_covered_shard_is_vacuous() -> None:
    never = Obligation("t.never", "t", "", _claims(BASE, cover=X < 0))
    merged = merge_shards([prove(never, (i, 2)) for i in range(2)])
    assert merged.status == "failed" and "vacuous" in merged.detail


def test_lemma_parts_are_reused_and_new_parts_still_solved() -> None:
    base = Obligation("t.base", "t", "", _claims(BASE, strategy="preprocess"))
    view = Obligation("t.view", "t", "", _claims([[("positive", X > 0)]], strategy="preprocess"))
    wrong = Obligation("t.wrong", "t", "", _claims([[("positive", X > 0), ("too big", X > 5)]], strategy="preprocess"))
    r = prove(view, lemmas=[base])
    assert r.status == "proved" and r.reused == 1
    assert prove(view).reused == 0
    r = prove(wrong, lemmas=[base])
    assert r.status == "failed" and r.counterexample["violated"] == ["too big"]


def test_the_first_failing_part_in_order_is_reported() -> None:
    ob = Obligation("t.order", "t", "", _claims([[("ok", X > 0), ("first", X > 2), ("second", X > 1)]],
                                                 strategy="preprocess"))
    r = prove(ob)
    assert r.status == "failed" and "first" in r.counterexample["violated"]
    assert r.counterexample["values"]["x"] <= 2


@pytest.mark.parametrize("strategy", ["parts", "whole_goal"])
def test_a_whole_goal_claim_gets_the_per_part_verdict(strategy: str) -> None:
    """One query for the whole goal first: a failing part is still found,
    and named as the first violated part in order, as part by part."""
    good = Obligation("t.whole_good", "t", "", _claims(BASE, strategy=strategy))
    bad = Obligation("t.whole_bad", "t", "", _claims([[("ok", X > 0), ("first", X > 2), ("second", X > 1)]],
                                                     strategy=strategy))
    assert prove(good).status == "proved"
    r = prove(bad)
    assert r.status == "failed" and r.counterexample["violated"][0] == "first"
    assert r.counterexample["values"]["x"] <= 2


@pytest.mark.parametrize("jobs", [1, 2])
def test_discharge_waits_for_lemmas_and_shards(jobs: int, monkeypatch: pytest.MonkeyPatch) -> None:
    obs = [Obligation("t.base", "t", "", _claims(BASE, strategy="preprocess"), shardable=True),
           Obligation("t.view", "t", "", _claims([[("positive", X > 0)]], strategy="preprocess"), True, ("t.base",)),
           Obligation("t.bad", "t", "", _claims([[("too big", X > 5)]]), True, ("t.base",))]
    for ob in obs:
        monkeypatch.setitem(REGISTRY, ob.name, ob)
    results = {r.name: r for r in discharge([ob.name for ob in obs], jobs)}
    assert results["t.base"].status == "proved" and results["t.base"].cases == 2
    assert results["t.view"].status == "proved" and results["t.view"].reused == 1
    assert results["t.bad"].status == "failed"


@pytest.mark.parametrize("jobs", [1, 2])
def test_discharge_names_obligations_waiting_on_each_other(jobs: int, monkeypatch: pytest.MonkeyPatch) -> None:
    obs = [Obligation("t.a", "t", "", _claims(BASE), lemmas=("t.b",)),
           Obligation("t.b", "t", "", _claims(BASE), lemmas=("t.a",))]
    for ob in obs:
        monkeypatch.setitem(REGISTRY, ob.name, ob)
    with pytest.raises(LemmaCycle, match=r"waiting on each other's lemmas: \['t.a', 't.b'\]"):
        list(discharge([ob.name for ob in obs], jobs))


def test_a_claim_s_goal_is_always_a_list_of_named_parts_and_its_strategy_a_known_one() -> None:
    term = X > 0
    assert [(n, t is term) for n, t in Claim(term, []).goal] == [("goal", True)]
    parts = [("positive", X > 0)]
    assert Claim(parts, []).goal is parts
    with pytest.raises(ValueError, match="strategy must be one of parts, whole_goal, preprocess, preprocess_parts, got 'fast'"):
        Claim(parts, [], strategy="fast")


def _pigeonhole():
    """Six pigeons in five holes: a claim Z3 proves in a few tens of milliseconds, not in one."""
    import z3

    pigeons = [z3.Int(f"test.pigeon{i}") for i in range(6)]
    return lambda: [Claim([("two share a hole", z3.Not(z3.Distinct(*pigeons)))],
                          [(f"pigeon {i} in a hole", z3.And(p >= 0, p < 5)) for i, p in enumerate(pigeons)],
                          case="six in five")]


def test_an_obligations_own_solver_limit_reaches_its_queries() -> None:
    assert prove(Obligation("t.pigeons", "t", "", _pigeonhole())).status == "proved"
    result = prove(Obligation("t.pigeons_1ms", "t", "", _pigeonhole(), timeout_ms=1))
    assert result.status == "unknown", result


@pytest.mark.parametrize("strategy", ["parts", "preprocess", "preprocess_parts"])
def test_an_isolated_obligation_proves_and_explains_as_in_the_main_context(strategy: str) -> None:
    """Its cases solved in Z3 contexts of their own: the same verdicts, the
    counterexample's values read in the main context."""
    good = Obligation("t.iso_good", "t", "", _claims(BASE, strategy=strategy), isolated=True)
    bad = Obligation("t.iso_bad", "t", "", _claims(BASE + [[("too big", X > 5)]], strategy=strategy), isolated=True)
    assert prove(good).status == "proved"
    result = prove(bad)
    assert result.status == "failed" and result.counterexample["violated"] == ["too big"], result
    assert 0 < result.counterexample["values"]["x"] <= 5


def _slow_claims():
    """Two cases, each taking a second to build: an obligation that runs past a short progress interval."""
    import time

    for i in range(2):
        time.sleep(1.0)
        yield Claim([("positive", X > 0)], [("x positive", X > 0)], True, f"slow case {i}")


@pytest.mark.parametrize("jobs", [1, 2])
def test_an_obligation_running_past_the_interval_gets_progress_lines(jobs: int,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """A line naming the obligation still running, its seconds and its cases
    done; none for one that finished at once."""
    from replayssm.verify import obligation, runner

    obs = [Obligation("t.slow", "t", "", _slow_claims, shardable=True), Obligation("t.quick", "t", "", _claims(BASE))]
    for ob in obs:
        monkeypatch.setitem(REGISTRY, ob.name, ob)
    monkeypatch.setattr(runner, "PROGRESS_AFTER_S", 0.2)
    lines: list[str] = []
    results = {r.name: r for r in discharge([ob.name for ob in obs], jobs, progress=lines.append)}
    assert all(r.status == "proved" for r in results.values())
    assert lines and all(line.startswith("  ... still proving t.slow (") for line in lines), lines
    assert all("t.quick" not in line for line in lines) and "cases done)" in lines[-1]
    assert results["t.slow"].cpu_seconds >= 0 and results["t.slow"].as_json()["cpu_seconds"] >= 0


def test_a_result_s_cpu_seconds_are_the_process_time_summed_over_its_shards() -> None:
    busy = Obligation("t.busy", "t", "", _claims(BASE * 20, strategy="preprocess"))
    r = prove(busy)
    assert 0 < r.cpu_seconds
    shards = [prove(busy, (i, 2)) for i in range(2)]
    assert merge_shards(shards).cpu_seconds == pytest.approx(sum(s.cpu_seconds for s in shards))
