"""The layer every command stands on, above the spec: trace files (their kinds, format versions, sizes,
the system trace's layout), loading a target in this process, exit codes and report files, interrupts.

verify, fuzz, review and the command line import it; it imports only the spec (and our impl's table
names, to rebuild a documentation page into source)."""
