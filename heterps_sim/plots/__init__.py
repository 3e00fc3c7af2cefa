"""Figures and tables from files a run or a study wrote; nothing here recomputes a plan."""
