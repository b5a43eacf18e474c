"""Calls sys.exit(3) while it is imported (was: exit 2, a set-up error)."""
import sys

sys.exit(3)
