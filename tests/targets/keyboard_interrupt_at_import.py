"""Raises KeyboardInterrupt while it is imported."""
raise KeyboardInterrupt
