"""The benchmark tables: ``python leaderboards/run.py`` (``prover-gym-leaderboard``) trains and evaluates
every method of a preset (``presets/*.yaml``) on the three envs, keeps each finished cell in a SQLite
results file (``db.py``; a re-run reuses them), and writes the report with standard errors, paired
differences and learning curves (``report.py``, ``stats.py``)."""
