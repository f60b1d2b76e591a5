"""Environment ids and their registration with gymnasium.

Registration is data: each id maps to an entry point string, so registering costs no import of
the environment's engine. The ids are registered by ``import prover_gym``, by the
``gymnasium.envs`` entry point (gymnasium<1.0), and by the ``prover_gym_register.pth`` import
hook (gymnasium>=1.0, which dropped entry-point discovery) as soon as ``gymnasium`` is imported.
"""

from __future__ import annotations

import importlib.util

# id -> (entry point, module that must be importable for the id to be registered)
ENV_IDS: dict[str, str] = {
    "prover/ALFWorld-v0": "prover_gym.alfworld.env:ALFWorldEnv",
    "prover/SearchQA-v0": "prover_gym.searchqa.env:SearchQAEnv",
    "prover/WebShop-v0": "prover_gym.webshop.env:WebShopEnv",
}


def register_envs() -> None:
    """Register every prover-gym id whose entry-point module exists. Idempotent."""
    import gymnasium

    for env_id, entry_point in ENV_IDS.items():
        module = entry_point.split(":")[0]
        if env_id in gymnasium.registry:
            continue
        if importlib.util.find_spec(module) is None:
            continue
        gymnasium.register(id=env_id, entry_point=entry_point, disable_env_checker=False)
