"""A launch's declared extra outputs in the frame (``roles.DeclaredOutput``):
A3's postprocess increments ``rand_seeds`` from program 0, which its adapter
declares, so its frame is proved; teeth: a copy of A3 (made here from
``../shared``, never committed) whose write to ``rand_seeds`` comes from
another program, or lands past its extent, fails the frame, and the
counterexample's launch shows the stray write on the mutated kernel, and on A3
itself (program 0's write, of a buffer the trace does not carry) none."""

from __future__ import annotations

import pytest

from replayssm.base.targets import load_target
from replayssm.spec.generations import detect
from replayssm.verify.kernels.generation_roles import roles_of
from replayssm.spec import corpus
from replayssm.verify.kernels.obligations import register
from replayssm.verify.kernels.playback import playback
from replayssm.verify.kernels.report import explain
from replayssm.verify.obligation import REGISTRY, prove

NAME = "kernel.A.postprocess.frame@{}"
PLANTED = [
    ("another program", "if NUM_RAND_SEEDS > 0 and batch_idx == 0:", "if NUM_RAND_SEEDS > 0 and batch_idx == 1:"),
    ("past its numel", "tl.store(rand_seeds + seed_idx, seed + 1)", "tl.store(rand_seeds + seed_idx + 1, seed + 1)"),
]

pytestmark = pytest.mark.corpus


def _frame(path: str, label: str):
    module = load_target(path)
    roles = roles_of(detect(module))
    register(module, label, roles)
    return module, roles, prove(REGISTRY[NAME.format(label)])


def test_a3_declared_rand_seeds_write_is_inside_the_frame():
    _, _, result = _frame(str(corpus.versions() / "A3.py"), "A3")
    assert result.status == "proved", result.counterexample


@pytest.mark.parametrize("what,old,new", PLANTED, ids=[p[0] for p in PLANTED])
def test_planted_rand_seeds_write_outside_the_declaration_fails_the_frame(what, old, new, tmp_path):
    text = (corpus.versions() / "A3.py").read_text()
    assert text.count(old) == 1
    path = tmp_path / "A3_planted.py"
    path.write_text(text.replace(old, new))
    module, roles, result = _frame(str(path), path.stem)
    assert result.status == "failed", f"{what}: {result.status}"
    case = result.counterexample["case"]
    finding = explain(NAME.format(path.stem), case, str(path))
    assert finding.trace is not None, finding.text
    assert "rand_seeds" in finding.text, finding.text
    seen = playback(finding.trace, module, roles)
    # a store past the extent replays as an out-of-bounds write (the arena's watch), one from another
    # program as a write outside the frame
    assert seen.reproduces("frame") or any("rand_seeds" in x for x in seen.out_of_bounds), seen.report()
    if what == "another program":  # the same launch on A3: program 0 bumps rand_seeds, inside the declaration
        clean = playback(finding.trace, load_target(str(corpus.versions() / "A3.py")), roles)
        assert not clean.outside_frame and not clean.out_of_bounds, clean.report()


def test_a_label_registered_again_proves_the_module_registered_last(tmp_path):
    """Regression: two files of one name (one label) in one process, e.g. a review of two heads called
    ``A3.py`` or a test after another that planted its own ``A3_planted``. The second registration used to
    keep the first module's obligation, so the planted write outside the frame proved; teeth: A3 then its
    planted copy under one label fails the frame, and A3 registered again after it proves."""
    what, old, new = PLANTED[0]
    text = (corpus.versions() / "A3.py").read_text()
    path = tmp_path / "A3.py"
    path.write_text(text.replace(old, new))
    label = "same_name"
    for source, status in ((str(corpus.versions() / "A3.py"), "proved"), (str(path), "failed"),
                           (str(corpus.versions() / "A3.py"), "proved")):
        module = load_target(source)
        register(module, label, roles_of(detect(module)))
        assert prove(REGISTRY[NAME.format(label)]).status == status, source
