"""The bundled WebShop catalogue: generated once into the cache, in the official file formats."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

from prover_gym.bm25 import cache_dir
from prover_gym.webshop import generator as gen

N_PRODUCTS = 3000
SEED = 0


def bundled_data_dir(n_products: int = N_PRODUCTS, seed: int = SEED, root: Path | None = None) -> Path:
    """Directory holding ``items_shuffle.json`` and ``items_ins_v2.json``, generated on first use."""
    key = f"webshop-bundled-g{gen.GENERATOR_VERSION}-s{seed}-n{n_products}"
    directory = (root or cache_dir()) / key
    if (directory / "complete.json").is_file():
        return directory
    directory.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=key + ".tmp", dir=directory.parent))
    try:
        gen.write(tmp, n_products, seed)
        (tmp / "complete.json").write_text(json.dumps({"products": n_products, "seed": seed}))
        if directory.exists():
            shutil.rmtree(directory, ignore_errors=True)
        try:
            os.rename(tmp, directory)
        except OSError:
            shutil.rmtree(tmp, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return directory
