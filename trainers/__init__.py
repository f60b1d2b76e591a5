"""GRPO + ProVer training. Landed so far: the advantage math (``advantages.py``) and segment
verification from snapshots (``verification.py``); the loss, loop, checkpoints and scale-out land
with the rest of issue 6."""
