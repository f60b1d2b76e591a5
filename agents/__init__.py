"""Policies: prompt formats and their parsers per env (``formats``), scripted baselines
(``baselines``: expert, hasty expert, random), the LLM policy over a chat backend (``llm_policy``;
backends in ``backends``: HF, vLLM, any OpenAI-compatible server), the tiny local model
(``tiny_model``) and the rollout helpers (``rollout``: single, batched, from a snapshot).
"""

from agents.formats import FORMATS, ParsedAction, ReActFormat, SearchR1Format, make_format
from agents.trajectory import Trajectory, Turn

__all__ = ["FORMATS", "ParsedAction", "ReActFormat", "SearchR1Format", "Trajectory", "Turn", "make_format"]
