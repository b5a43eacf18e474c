"""An assumption is one record: a made-up one, registered from a module of its
own with the proof that uses it and nothing else, shows in ``prove --list``
(classified by its provenance), among ``fuzz --drop``'s choices (the fuzz
callers check it on every row and break it with its own breaker) and among
review's probes (with its reach). Removed, it shows nowhere (the teeth)."""

from __future__ import annotations

import ast
import re
import importlib.util
import textwrap
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replayssm.cli import main
from replayssm.fuzz.caller_shapes import systems
from replayssm.fuzz.callers import Callers
from replayssm.fuzz.containment import check_drop, drop_choices
from replayssm.review import probes as pr
from replayssm.spec import assumptions as env
from replayssm.spec import contract
from replayssm.spec.geometry import Conventions
from replayssm.verify import obligation as obligations

NAME = "prefill_chunk_within_prompt"

MODULE = '''
"""A made-up caller assumption and the proof that uses it (a test's module)."""

from dataclasses import replace

import z3

from replayssm.spec.assumption_record import PER_REQUEST, Assumption, Reach
from replayssm.spec.geometry import chunks_on_boundary
from replayssm.spec.provenance import not_guaranteed
from replayssm.spec.vocab import implies
from replayssm.verify.obligation import Claim, obligation


def _within_prompt(row, prompt_len):
    return implies(row.prefilling, row.computed_before + row.query_len <= prompt_len)


def _break(ctx, row, choose):
    """A prefill chunk one token past the prompt (outside align mode, inside the model length)."""
    q = ctx.prompt_len - row.computed_before + 1
    if not row.prefilling or chunks_on_boundary(ctx.mode) or row.computed_before + q > ctx.max_model_len:
        return None
    return replace(row, query_len=q, live_col=ctx.live_col(row.computed_before, q))


MADE_UP = Assumption(
    "prefill_chunk_within_prompt", "a prefill chunk ends at or before its prompt's end", _within_prompt,
    not_guaranteed("made up by a test"), scope=PER_REQUEST,
    on_row=lambda ctx, row: _within_prompt(row, ctx.prompt_len), breaker=_break,
    reach=Reach(lambda c: c.mode != "align"))


@obligation("made_up.chunk_fits", "made_up", "a chunk within its prompt leaves no negative rest")
def chunk_fits():
    n, q, prompt = z3.Ints("n q prompt")
    yield Claim([("rest", prompt - n - q >= 0)], [("prefill_chunk_within_prompt", n + q <= prompt)], case="one row")
'''


@pytest.fixture(scope="module")
def module_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("made_up") / "made_up_assumption.py"
    path.write_text(textwrap.dedent(MODULE))
    return path


def _register(path: Path, mp: pytest.MonkeyPatch):
    """The made-up module imported (its obligation registered) and its record added to ``spec.assumptions.ALL``, the registry
    every view reads; ``mp`` undoes both."""
    before = set(obligations.REGISTRY)
    spec = importlib.util.spec_from_file_location("made_up_assumption", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for name in set(obligations.REGISTRY) - before:  # registered through mp, so that mp removes them
        ob = obligations.REGISTRY.pop(name)
        mp.setitem(obligations.REGISTRY, name, ob)
    mp.setattr(env, "ALL", [*env.ALL, module.MADE_UP])
    return module.MADE_UP


@pytest.fixture
def made_up(module_file: Path, monkeypatch: pytest.MonkeyPatch):
    return _register(module_file, monkeypatch)


def _listed(capsys: pytest.CaptureFixture) -> str:
    assert main(["prove", "--list", "--only", "made_up", "--no-cache"]) == 0
    return capsys.readouterr().out


def test_a_made_up_record_shows_in_prove_list(made_up, capsys) -> None:
    out = _listed(capsys)
    assert "made_up.chunk_fits  [made_up]" in out and f"not guaranteed: {NAME}" in out, out
    assert contract.classify(NAME) == "not guaranteed"


def test_without_its_record_the_proofs_hypothesis_is_unrecorded(made_up, capsys, monkeypatch) -> None:
    monkeypatch.setattr(env, "ALL", [a for a in env.ALL if a is not made_up])
    assert f"unrecorded: {NAME}" in _listed(capsys)


def test_a_made_up_record_is_one_of_fuzz_drops_choices(made_up, tmp_path, capsys) -> None:
    assert drop_choices()[-1] == NAME
    check_drop(NAME)
    assert main(["fuzz", "--drop", "no_such_assumption", "--failures", str(tmp_path / "f")]) == 2
    assert NAME in capsys.readouterr().err


def test_a_made_up_record_is_among_reviews_probes(made_up) -> None:
    probe = next(p for p in pr.probes() if p.assumptions == (NAME,))
    assert not probe.guaranteed and probe.reach is made_up.reach
    assert not probe.reach.conventions(next(c for c in Conventions.all() if c.mode == "align"))


def test_without_its_record_no_view_has_it() -> None:
    assert NAME not in drop_choices() and all(p.assumptions != (NAME,) for p in pr.probes())
    assert contract.classify(NAME) == "unrecorded"


@settings(max_examples=10, deadline=None)
@given(data=st.data())
def test_the_fuzz_callers_check_and_break_a_made_up_record(module_file, data) -> None:
    """The callers check the record on every row they generate (a row that
    broke it must keep every other assumption, ``Callers.check_assumptions``)
    and break it with its breaker: each broken row is in the step's footprint."""
    with pytest.MonkeyPatch.context() as mp:
        _register(module_file, mp)
        setup, features = data.draw(systems(tuple(c for c in Conventions.all() if c.mode != "align")))
        callers = Callers(setup, features, drop=NAME)
        callers.admit(data.draw)
        for _ in range(data.draw(st.integers(1, 6))):
            for action in callers.step(data.draw) if callers.requests else []:
                if action.NAME == "postprocess":
                    broken = [b for b, c in enumerate(action.caller) if f"(breaks {NAME})" in c]
                    assert set(broken) <= set((action.contained or {"rows": []})["rows"])


OUTSIDE_SPEC = ("impl", "base", "verify", "fuzz", "review", "replayssm")


def names_as_strings(root: Path, names: set[str]) -> list[str]:
    """``path:line: name`` for each string constant, in a module of ours outside
    ``spec/``, that is one of ``names``: a module that needs an assumption names
    its record (``env.ROW_NONEMPTY.name``), so the records' modules and their
    users are all a reader has to find."""
    out = []
    for package in OUTSIDE_SPEC:
        for path in sorted((root / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
                if isinstance(node, ast.Constant) and node.value in names:
                    out.append(f"{path.relative_to(root)}:{node.lineno}: {node.value}")
    return out


def test_no_module_outside_spec_spells_an_assumptions_name() -> None:
    root = Path(__file__).resolve().parents[1]
    assert (root / "fuzz" / "callers.py").is_file(), "is the scan reading the tree?"
    assert names_as_strings(root, {a.name for a in env.ALL}) == []


def test_a_planted_name_as_a_string_is_reported(tmp_path: Path) -> None:
    (tmp_path / "fuzz").mkdir()
    (tmp_path / "review").mkdir()
    (tmp_path / "fuzz" / "callers.py").write_text('if drop != "live_col_is_last_block":\n    pass\n')
    (tmp_path / "review" / "x.py").write_text('"""Mentions live_col_is_last_block in prose."""\nx = env.ROW_NONEMPTY.name\n')
    assert names_as_strings(tmp_path, {"live_col_is_last_block", "row_nonempty"}) == [
        "fuzz/callers.py:1: live_col_is_last_block"]


def test_the_architecture_docs_trace_of_one_assumption_lists_the_modules_that_name_it() -> None:
    """docs/architecture.md's "One assumption, traced": its bullets name exactly the
    modules its command finds (the record, the registry, and those that use it)."""
    root = Path(__file__).resolve().parents[1]
    doc = (root / "docs" / "architecture.md").read_text()
    section = doc[doc.index("### One assumption, traced"):]
    section = section[:section.index("\n## ")]
    listed = set(re.findall(r"`((?:spec|base|verify|fuzz|review|replayssm|impl)/[\w/]+\.py)`",
                            section[section.index("```\n\n"):section.index("\n\nSeven modules")]))
    word = re.compile(r"\b(DECODE_WITHIN_BLOCK|decode_within_block)\b")
    naming = {str(p.relative_to(root)) for package in ("spec", "base", "verify", "fuzz", "review", "replayssm", "impl")
              for p in (root / package).rglob("*.py") if word.search(p.read_text())}
    assert listed == naming and len(naming) == 7, (sorted(listed), sorted(naming))


UNPROBED_NOT_GUARANTEED: dict[str, str] = {}
"""The assumptions vLLM does not guarantee that no review probe drops and no
review campaign draws, with their scope (issue 36 item 2 asks for a probe of
each): a ratchet, empty; an entry may only leave it. The last five left it so:
batch_in_launch, packed_tables_match_layers and positions_in_model as
guaranteed (the grid and the packed layout the host builds itself, the model
runner's rows of max_model_len tokens; their int32 bounds are the model choice
int32_sizes); fresh_slot_is_free by a caller break (the pool hands a prefill a
block another request holds); distinct_slots_in_row, contradicted by T5, is
drawn by every campaign (caller_draws: a moved live column keeps its block)."""


def test_every_not_guaranteed_assumption_is_probed_or_drawn_by_every_review() -> None:
    probed = {n for p in pr.probes() for n in p.assumptions}
    drawn = {a.name for a in env.caller_model_draws()}
    gap = {a.name: a.scope for a in env.ALL
           if not a.provenance.is_guaranteed and a.name not in probed | drawn}
    assert gap == UNPROBED_NOT_GUARANTEED, "a probe was added (remove it here) or a record lost its own"
    assert drawn and not drawn & probed, "a drawn behaviour is vLLM's: never probed"
    assert all(env.named(n).provenance.status == "contradicted" for n in drawn)


def test_only_a_contradicted_unprobed_assumption_is_drawn() -> None:
    """Teeth of the record's check: a guaranteed or probed record cannot carry ``caller_draws``."""
    import dataclasses

    with pytest.raises(ValueError, match="only a contradicted"):
        dataclasses.replace(env.GROUPS_AGREE_ON_NULL, caller_draws=(("aliased_live_moves", True),))
    with pytest.raises(ValueError, match="only a contradicted"):
        dataclasses.replace(env.LIVE_MOVE_COPIES_STATE, caller_breaks=None, caller_draws=(("x", True),))


def test_review_campaigns_draw_the_contradicted_behaviour_kept_or_dropped() -> None:
    from replayssm.review.lifecycle import StepRecord, review_policy

    for dropped in (frozenset(), frozenset({env.FRESH_SLOT_IS_FREE.name})):
        assert review_policy(StepRecord(dropped)).aliased_live_moves
    assert review_policy(StepRecord(frozenset({env.FRESH_SLOT_IS_FREE.name}))).taken_live_blocks
    assert not review_policy(StepRecord()).taken_live_blocks


RECORD_CONSTANTS = {name for name, value in vars(env).items()
                    if isinstance(value, (env.Assumption, env.AssumptionSet))}
"""The names the registry module gives its records (``env.ROW_NONEMPTY`` ...)."""

STILL_BRANCHING: dict[str, set[str]] = {}
"""Modules of review/ and fuzz/ that still pick out a record by its constant (a ratchet: none)."""


def records_named(root: Path, packages: tuple[str, ...] = ("review", "fuzz")) -> dict[str, set[str]]:
    """Per module of ``packages``, the record constants it reads as ``env.NAME``: a module that
    does so treats that assumption apart from the others, by its name."""
    out: dict[str, set[str]] = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
                if isinstance(node, ast.Attribute) and node.attr in RECORD_CONSTANTS \
                        and isinstance(node.value, ast.Name) and node.value.id == "env":
                    out.setdefault(str(path.relative_to(root)), set()).add(node.attr)
    return out


def test_no_review_or_fuzz_module_picks_out_an_assumption_by_its_record() -> None:
    """How the review's caller model breaks an assumption is a field of its record
    (``caller_breaks``): ``review/lifecycle.py`` and the fuzz callers read the views only."""
    root = Path(__file__).resolve().parents[1]
    assert (root / "review" / "lifecycle.py").is_file(), "is the scan reading the tree?"
    assert records_named(root) == STILL_BRANCHING


def test_a_planted_branch_on_a_record_is_reported(tmp_path: Path) -> None:
    (tmp_path / "review").mkdir()
    (tmp_path / "fuzz").mkdir()
    (tmp_path / "review" / "x.py").write_text("if record.holds(env.LIVE_MOVE_COPIES_STATE):\n    pass\n"
                                             "for a in env.ALL:\n    pass\n")
    assert records_named(tmp_path) == {"review/x.py": {"LIVE_MOVE_COPIES_STATE"}}


def test_a_caller_break_restores_by_rows_or_by_copies_only() -> None:
    from replayssm.spec.assumption_record import CallerBreak

    assert CallerBreak("x", lambda s: False, restored_by="copies").restored_by == "copies"
    with pytest.raises(ValueError, match="restored_by must be one of rows, copies"):
        CallerBreak("x", lambda s: False, restored_by="by hand")
