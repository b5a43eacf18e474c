"""Obligations of the compaction program, for each ``MAX_NUM_REQS`` up to 9.

The program is one block of ``next_power_of_2(MAX_NUM_REQS)`` lanes, so it is
unrolled for each capacity; ``num_reqs`` and every plan entry are symbolic.
"""

from __future__ import annotations

from collections.abc import Iterator

from replayssm.spec.compaction import compact_program
from replayssm.spec.launch import next_power_of_2
from replayssm.spec.vocab import conj, disj, implies, ite

from .memory import SymbolicMemory
from .goals import in_bounds
from .obligation import Claim, obligation
from .terms import named_int

CAPACITIES = range(1, 10)


def _case(cap: int) -> tuple:
    num_reqs = named_int("num_reqs")
    mem = SymbolicMemory({"plan_flush_count": (cap,), "active_request_indices": (cap,)}, {}, "compact")
    trace = compact_program(mem, cap, num_reqs, next_power_of_2(cap))
    flush = [mem.initial("plan_flush_count", (i,)) for i in range(cap)]
    assume = [("num_reqs_in_capacity", conj(num_reqs >= 0, num_reqs <= cap))]
    return num_reqs, mem, trace, flush, assume


@obligation("compaction.work_list", "compaction",
            "active_request_indices lists the rows below num_reqs with a plan (replay >= 0), increasing and "
            "distinct, followed by -1 up to MAX_NUM_REQS: FlashInfer's work-list contract")
def work_list() -> Iterator[Claim]:
    for cap in CAPACITIES:
        num_reqs, mem, trace, flush, assume = _case(cap)
        active = [conj(i < num_reqs, flush[i] >= 0) for i in range(cap)]
        rank, count = [], 0
        for i in range(cap):
            rank.append(count)
            count = count + ite(active[i], 1, 0)
        out = [mem.final("active_request_indices", (k,)) for k in range(cap)]
        goal = []
        for k in range(cap):
            goal.append((f"entry {k} is the k-th active row", conj(*[
                implies(conj(active[i], rank[i] == k), out[k] == i) for i in range(cap)])))
            goal.append((f"entry {k} is -1 past the active rows", implies(k >= count, out[k] == -1)))
        gap = disj(False, *[conj(active[j], flush[i] < 0) for i in range(cap) for j in range(i + 1, cap)])
        yield Claim(goal, assume, conj(gap, count >= 1), f"MAX_NUM_REQS={cap}",
                    {"num_reqs": num_reqs, **{f"flush[{i}]": flush[i] for i in range(cap)},
                     **{f"active[{k}]": out[k] for k in range(cap)}}, [mem])


@obligation("compaction.memory_safety", "compaction",
            "every entry the compaction program reads or writes is below MAX_NUM_REQS")
def memory_safety() -> Iterator[Claim]:
    for cap in CAPACITIES:
        num_reqs, mem, trace, flush, assume = _case(cap)
        goal = in_bounds(mem)
        yield Claim(goal, assume, trace.num_active >= 1, f"MAX_NUM_REQS={cap}", {"num_reqs": num_reqs}, [mem],
                    strategy="whole_goal")
