"""Stateful conformance fuzzing: implementations driven against the spec."""
