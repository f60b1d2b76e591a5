"""Wheel build hook: the package data the code loads at run time, and where the wheel came from.

A standard wheel carries ``bases/`` and ``configs/`` as ``prover_gym/_data/`` (found by
``prover_gym.resources``) and ``prover_gym/_build_info.json`` with the commit it was built from, so an
installed prover-gym records its own provenance (``prover_gym.provenance()``), not its caller's repo.
An editable install reads all of them from the checkout and gets none of this.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile

from hatchling.builders.hooks.plugin.interface import BuildHookInterface


def _git(root: str, *args: str) -> str | None:
    try:
        out = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


class CustomBuildHook(BuildHookInterface):
    def initialize(self, version: str, build_data: dict) -> None:
        if version == "editable":
            return
        for folder in ("bases", "configs"):
            build_data["force_include"][os.path.join(self.root, folder)] = f"prover_gym/_data/{folder}"
        commit = os.environ.get("PROVER_GYM_COMMIT") or _git(self.root, "rev-parse", "HEAD")
        dirty = bool(_git(self.root, "status", "--porcelain", "--untracked-files=no")) if commit else None
        info = {"commit": commit, "dirty": dirty}
        fd, path = tempfile.mkstemp(prefix="prover_gym_build_info", suffix=".json")
        with os.fdopen(fd, "w") as fh:
            json.dump(info, fh)
        self._info_path = path
        build_data["force_include"][path] = "prover_gym/_build_info.json"

    def finalize(self, version: str, build_data: dict, artifact_path: str) -> None:
        path = getattr(self, "_info_path", None)
        if path and os.path.exists(path):
            os.unlink(path)
