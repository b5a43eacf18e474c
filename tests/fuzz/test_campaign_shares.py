"""A campaign's Hypothesis runs: every combination's examples run once, split only when there are many,
and local workers take the next run when they finish one."""

from __future__ import annotations

import multiprocessing
from collections import Counter
from pathlib import Path

import pytest

from replayssm.fuzz import campaign_shares
from replayssm.fuzz.campaign import run_campaign
from replayssm.fuzz.campaign_config import CampaignConfig, combinations_of, examples_per_combination
from replayssm.fuzz.campaign_shares import Share, SharedCounter, parts_of, shares, static_shares, taken_shares


@pytest.mark.parametrize("jobs", [1, 2, 7, 14, 16, 32])
def test_one_part_per_combination_is_the_share_out_of_before(jobs: int) -> None:
    """With few examples per combination nothing is split, and a worker's static runs are the
    combinations combinations_of gives it, in its order, with the same seeds' indices."""
    for examples in (32, 128, 256):
        assert parts_of(examples, jobs) == 1
        for w in range(jobs):
            runs = static_shares(w, jobs, examples)
            assert [s.combination for s in runs] == combinations_of(w, jobs)
            assert all(s.part == 0 and s.index == s.combination for s in runs)
            assert all(s.examples == examples_per_combination(examples) for s in runs)


@pytest.mark.parametrize("examples, jobs, parts", [(1024, 16, 4), (2000, 14, 4), (2000, 1, 1), (4096, 32, 8),
                                                   (300, 16, 1)])
def test_every_combination_s_examples_run_once(examples: int, jobs: int, parts: int) -> None:
    every = shares(examples, jobs)
    assert parts_of(examples, jobs) == parts and len(every) == 32 * parts
    per = Counter()
    for s in every:
        per[s.combination] += s.examples
        assert s.examples >= min(campaign_shares.SHARE_EXAMPLES, examples_per_combination(examples))
    assert per == {n: examples_per_combination(examples) for n in range(32)}
    assert len({s.index for s in every}) == len(every) and max(s.index for s in every) < 1000
    assert [s.combination for s in every[:jobs]] == [combinations_of(w, jobs)[0] for w in range(jobs)]
    assert sorted(sum((static_shares(w, jobs, examples) for w in range(jobs)), []), key=every.index) == every


def test_workers_pulling_from_one_counter_take_each_run_once() -> None:
    """Three workers, one slow: the fast ones take the slow one's would-be runs."""
    counter = SharedCounter(multiprocessing.get_context("fork"), 3)
    pulls = [taken_shares(w, 3, 1024, counter) for w in range(3)]
    taken: list[list[Share]] = [[], [], []]
    for w in (0, 1, 2):
        taken[w].append(next(pulls[w]))
    done = set()
    while len(done) < 2:  # worker 2 never comes back for another
        for w in (0, 1):
            if w not in done:
                try:
                    taken[w].append(next(pulls[w]))
                except StopIteration:
                    done.add(w)
    assert sorted(sum(taken, []), key=shares(1024, 3).index) == shares(1024, 3)
    assert len(taken[2]) == 1 and len(taken[0]) + len(taken[1]) == len(shares(1024, 3)) - 1


def test_a_split_campaign_runs_every_part_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A CPU campaign (forked workers see the patched sizes) split into two runs per combination:
    each (combination, part) runs once, over both workers, and the campaign passes its checks."""
    monkeypatch.setattr(campaign_shares, "SHARE_EXAMPLES", 2)
    monkeypatch.setattr(campaign_shares, "SHARES_PER_WORKER", 32)
    s = run_campaign(CampaignConfig(None, "cpu", 128, 2, seed=0, jobs=2, failures_dir=str(tmp_path)))
    assert s["findings"] == [] and s["request_steps"] > 0
    runs = [(n, part) for w in s["time_split"]["workers"] for n, part, _ in w["combinations"]]
    assert sorted(runs) == [(n, p) for n in range(32) for p in range(2)]


def test_workers_forked_from_the_fork_server_run_the_campaign(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """The CUDA workers' context (a fork server that imported the harness) on CPU: the workers
    start, take their runs from the shared counter and report their times."""
    from replayssm.fuzz import campaign

    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(campaign.WORKER_PRELOAD)
    monkeypatch.setattr(campaign, "worker_context", lambda device: context)
    s = run_campaign(CampaignConfig(None, "cpu", 32, 2, seed=0, jobs=2, failures_dir=str(tmp_path)))
    assert s["findings"] == [] and len(s["time_split"]["workers"]) == 2
    assert sorted(n for w in s["time_split"]["workers"] for n, _, _ in w["combinations"]) == list(range(32))
    assert campaign.worker_context("cuda").get_start_method() == "forkserver"
