"""Import hook installed by ``prover_gym_register.pth`` at interpreter start-up.

gymnasium>=1.0 no longer loads plugins from the ``gymnasium.envs`` entry-point group, yet users
expect ``gym.make("prover/SearchQA-v0")`` after ``import gymnasium`` alone. This module adds a
meta-path finder that waits for ``gymnasium`` to finish importing and then registers our ids
(string entry points only: nothing heavy is imported). It costs nothing until gymnasium is
imported and never raises: a failure only means the user has to ``import prover_gym``.
"""

from __future__ import annotations

import importlib.abc
import sys


class _RegisterAfterGymnasium(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        if fullname != "gymnasium":
            return None
        sys.meta_path.remove(self)  # one shot; avoid recursion while we look the real spec up
        import importlib.util

        spec = importlib.util.find_spec(fullname)
        if spec is None or spec.loader is None:
            return spec
        loader = spec.loader
        original_exec = loader.exec_module

        def exec_module(module):
            original_exec(module)
            try:
                from prover_gym.registration import register_envs

                register_envs()
            except Exception:  # pragma: no cover - never break `import gymnasium`
                pass

        loader.exec_module = exec_module  # type: ignore[method-assign]  # wrapped once, then called as before
        return spec


def install() -> None:
    """Register the prover/* env ids now if gymnasium is already imported (else the entry point does it on gymnasium's
    import); never raises."""
    if "gymnasium" in sys.modules:
        try:
            from prover_gym.registration import register_envs

            register_envs()
        except Exception:  # pragma: no cover
            pass
        return
    if not any(isinstance(f, _RegisterAfterGymnasium) for f in sys.meta_path):
        sys.meta_path.insert(0, _RegisterAfterGymnasium())
