"""Everything about where and how the processes run: ranks, run directory, checks."""
