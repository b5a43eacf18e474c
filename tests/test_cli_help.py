"""Every command's ``--help`` says what each option does and where the command's outputs go."""

from __future__ import annotations

import argparse

import pytest

from replayssm.cli import build_parser


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """The subcommands' parsers, by name."""
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def undocumented(parser: argparse.ArgumentParser) -> list[str]:
    """The options and positionals of ``parser`` that have no help text."""
    return [a.dest for a in parser._actions if not isinstance(a, argparse._HelpAction) and not a.help]


@pytest.mark.parametrize("name", sorted(subcommands(build_parser())))
def test_every_option_has_help_and_the_help_says_where_outputs_go(name: str) -> None:
    parser = subcommands(build_parser())[name]
    assert undocumented(parser) == []
    text = parser.format_help()
    assert "outputs:" in text and "exit status:" in text


def test_teeth_an_option_without_help_is_named() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--documented", help="does a thing")
    parser.add_argument("--bare")
    assert undocumented(parser) == ["bare"]
