"""The bundled WebShop catalogue: generated once into the cache, in the official file formats."""

from __future__ import annotations

from pathlib import Path

from prover_gym.cache import build_once, cache_dir
from prover_gym.webshop import generator as gen

N_PRODUCTS = 3000
SEED = 0


def bundled_data_dir(n_products: int = N_PRODUCTS, seed: int = SEED, root: Path | None = None) -> Path:
    """Directory holding ``items_shuffle.json`` and ``items_ins_v2.json``, generated on first use."""

    def build(out: Path) -> dict:
        gen.write(out, n_products, seed)
        return {"products": n_products, "seed": seed}

    return build_once((root or cache_dir()) / f"webshop-bundled-g{gen.GENERATOR_VERSION}-s{seed}-n{n_products}", build)
