"""Where the files the code loads at run time live, in a source checkout and in an installed wheel.

The shipped SFT bases (``bases/``) and the train and judge configs (``configs/``) sit at the top of a
source checkout; the wheel carries the same folders as package data under ``prover_gym/_data/``
(``pyproject.toml``'s force-include). Code finds them through :func:`shipped`, never through a
path relative to its own file, so a pip-installed prover-gym works from any folder.

Bases are looked up in ``$PROVER_GYM_BASES`` (folders, ``os.pathsep``-separated; the leaderboard's
``--bases``), then the shipped ones, then ``<cache>/bases`` (where ``python -m trainers.bases build``
writes when prover-gym is installed rather than checked out, and for a base kept out of git).
"""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path

PACKAGE_ROOT = Path(__file__).resolve().parent
KINDS = ("bases", "configs")


def source_root() -> Path | None:
    """The checkout this package runs from (``pyproject.toml`` of prover-gym beside it), or None
    when it is installed."""
    root = PACKAGE_ROOT.parent
    pyproject = root / "pyproject.toml"
    try:
        if pyproject.is_file() and 'name = "prover-gym"' in pyproject.read_text(encoding="utf-8"):
            return root
    except OSError:
        pass
    return None


def shipped(kind: str) -> Path:
    """The shipped folder ``kind`` (``bases`` or ``configs``): the checkout's, else the package data's."""
    if kind not in KINDS:
        raise ValueError(f"shipped({kind!r}): use one of {KINDS}")
    root = source_root()
    if root is not None and (root / kind).is_dir():
        return root / kind
    return Path(str(resources.files("prover_gym") / "_data" / kind))


def cache_bases() -> Path:
    """``<cache>/bases``: bases built outside a checkout, or kept out of git; the last folder searched."""
    from prover_gym.cache import cache_dir

    return cache_dir() / "bases"


def bases_roots() -> list[Path]:
    """Folders searched for a base, first match wins (see the module docstring)."""
    extra = [Path(p).expanduser() for p in os.environ.get("PROVER_GYM_BASES", "").split(os.pathsep) if p]
    return [*extra, shipped("bases"), cache_bases()]


def build_root(ship: bool = True) -> Path:
    """Where a newly built base goes by default: the checkout's ``bases/``, or the user cache when
    prover-gym is installed (never into site-packages) or the base is not shipped in git (``ship=False``)."""
    root = source_root()
    return root / "bases" if root is not None and ship else cache_bases()


def shipped_configs(section: str) -> dict[str, Path]:
    """``{name: path}`` of the shipped YAML configs of ``section`` (``train`` or ``judges``)."""
    folder = shipped("configs") / section
    return {p.stem: p for p in sorted(folder.glob("*.yaml"))} if folder.is_dir() else {}


def config_path(spec: str | os.PathLike, section: str) -> Path:
    """A config given as a path (an existing file) or by the name of a shipped one
    (``alfworld_tiny_grpo``, or a repo path such as ``configs/train/alfworld_tiny_grpo.yaml`` run from
    another folder). Raises FileNotFoundError naming the input, the shipped names and the nearest."""
    path = Path(spec).expanduser()
    if path.is_file():
        return path
    known = shipped_configs(section)
    name = path.name[: -len(path.suffix)] if path.suffix in (".yaml", ".yml") else path.name
    if name in known:
        return known[name]
    from prover_gym.checks import did_you_mean

    hint = did_you_mean(name, known)
    raise FileNotFoundError(
        f"config {str(spec)!r} is neither a file nor a shipped {section} config{hint}; "
        f"shipped: {', '.join(known) or 'none'}"
    )


def provenance() -> dict:
    """What produced a result: ``{"version", "commit", "dirty", "source"}`` of prover-gym itself (its
    checkout's git state, or the commit its wheel was built from), never the caller's repository."""
    import json
    import subprocess

    from prover_gym import __version__

    info: dict = {"version": __version__, "commit": None, "dirty": None, "source": "unknown"}
    root = source_root()
    if root is not None and (root / ".git").exists():

        def git(*args: str) -> str | None:
            try:
                out = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=10)
            except (OSError, subprocess.SubprocessError):
                return None
            return out.stdout.strip() if out.returncode == 0 else None

        commit = git("rev-parse", "HEAD")
        if commit:
            dirty = git("status", "--porcelain", "--untracked-files=no")
            info.update(commit=commit, dirty=bool(dirty), source="checkout")
        return info
    built = PACKAGE_ROOT / "_build_info.json"
    if built.is_file():
        try:
            data = json.loads(built.read_text(encoding="utf-8"))
            info.update(commit=data.get("commit"), dirty=data.get("dirty"), source="wheel")
        except (OSError, ValueError):
            pass
    return info
