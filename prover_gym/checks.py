"""Small helpers for checking user input at load time: the nearest valid name, the keys a callable
accepts, and problems phrased as ``<key path> = <value>: <what is wrong>; did you mean ...``."""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Callable, Iterable


def did_you_mean(value: object, choices: Iterable) -> str:
    """``"; did you mean 'x'?"`` for the nearest of ``choices`` to ``value``, or ``""``."""
    close = difflib.get_close_matches(str(value), [str(c) for c in choices], n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


def params_of(fn: Callable, skip: Iterable[str] = ("self",)) -> set[str] | None:
    """The keyword arguments ``fn`` (a function or class) accepts; None when it takes ``**kwargs``."""
    names = set()
    for p in inspect.signature(fn).parameters.values():
        if p.kind is inspect.Parameter.VAR_KEYWORD:
            return None
        if p.kind is not inspect.Parameter.VAR_POSITIONAL and p.name not in skip:
            names.add(p.name)
    return names


def unknown_keys(
    where: str, given: Iterable[str], valid: Iterable[str] | None, ref: str = "see the docs of this block"
) -> list[str]:
    """One problem per key of ``given`` not in ``valid`` (None = anything goes), with the nearest name;
    the valid names are listed when there are a dozen or fewer, else ``ref`` says where they are."""
    if valid is None:
        return []
    valid = sorted(valid)
    listed = f"valid: {', '.join(valid)}" if len(valid) <= 12 else f"{len(valid)} valid keys: {ref}"
    return [f"{where}.{k}: unknown key{did_you_mean(k, valid)} ({listed})" for k in given if k not in valid]


def bad_choice(where: str, value: object, choices: Iterable, what: str = "value") -> list[str]:
    """``[problem]`` when ``value`` is not one of ``choices``, else ``[]``."""
    choices = list(choices)
    if value in choices:
        return []
    return [f"{where} = {value!r}: not a {what}{did_you_mean(value, choices)} (valid: {', '.join(map(str, choices))})"]
