"""Policies: prompt formats and their parsers per env, scripted baselines, and the rollout helper.

The chat backends (HF, vLLM, OpenAI-compatible) and the tiny local model land with issue 5.
"""

from agents.formats import FORMATS, ParsedAction, ReActFormat, SearchR1Format, make_format
from agents.trajectory import Trajectory, Turn

__all__ = ["FORMATS", "ParsedAction", "ReActFormat", "SearchR1Format", "Trajectory", "Turn", "make_format"]
