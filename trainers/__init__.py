"""GRPO + ProVer training: the loop (``train.py``), advantages (``advantages.py``, ``credit.py``),
segment verification from snapshots (``verification.py``), the clipped loss (``loss.py``) and learner
step (``learner.py``), SFT (``sft.py``), checkpoints (``checkpoint.py``), data-parallel training
(``distributed.py``) and the shipped bases (``bases.py``)."""
