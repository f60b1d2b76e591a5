"""The method registry: one ``MethodSpec`` per method, registered once, read by everything that
interprets a method name (the trainer config's check, the advantage, whether and how a run asks a
judge and verifies, the leaderboard's plan, the report's order and comparisons, the benchmarks).

Adding a method is one ``register(MethodSpec(...))`` here (plus its tests): e.g. a new advantage
estimator is ``MethodSpec("my_method", advantage=my_fn, order=35, compare_to=("grpo",))``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from trainers import advantages as adv

KINDS = ("baseline", "sft", "rl")


@dataclass(frozen=True)
class MethodSpec:
    """What a method is, for every part of the system that acts on it."""

    name: str
    kind: str = "rl"  # baseline: played without a model (random, expert); sft: the start model; rl: trained
    advantage: Callable | None = None  # rl: the per-turn advantage estimator (trainers/advantages.py)
    asks_judge: bool = False  # builds the preset's judge and asks it for a segment in each mixed group
    verifies: bool = False  # estimates the segment's A_seg from continuations (else trusts the judge: A_seg = 1)
    judge: Callable[[dict | None, int], dict] | None = None  # the judge it uses instead of the preset's
    extra_tasks: bool = False  # trains on match_ratio extra tasks per iteration (compute matching)
    matched_to: str | None = None  # with extra_tasks: the method whose measured token ratio it is given
    order: int = 100  # place in tables and plots
    compare_to: tuple[str, ...] = ()  # the report states this method - each of these, paired by seed
    description: str = field(default="", compare=False)

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"MethodSpec {self.name!r}: kind={self.kind!r}; use one of {KINDS}")
        if (self.kind == "rl") != (self.advantage is not None):
            raise ValueError(f"MethodSpec {self.name!r}: an rl method needs an advantage, the others none")
        if self.verifies and not self.asks_judge:
            raise ValueError(f"MethodSpec {self.name!r}: verifies needs asks_judge (something proposes the segment)")


REGISTRY: dict[str, MethodSpec] = {}


def register(spec: MethodSpec) -> MethodSpec:
    """Add ``spec`` (its name must be new); returns it."""
    if spec.name in REGISTRY:
        raise ValueError(f"method {spec.name!r} is already registered")
    REGISTRY[spec.name] = spec
    return spec


def get(name: str) -> MethodSpec:
    """The spec of ``name``; ValueError naming the registered ones."""
    if name not in REGISTRY:
        from prover_gym.checks import did_you_mean

        raise ValueError(f"method={name!r}{did_you_mean(name, list(REGISTRY))}; use one of {names()}")
    return REGISTRY[name]


def names(*kinds: str) -> list[str]:
    """Registered method names of ``kinds`` (all when none), in display order."""
    specs = sorted(REGISTRY.values(), key=lambda s: s.order)
    return [s.name for s in specs if not kinds or s.kind in kinds]


def comparisons() -> list[tuple[str, str]]:
    """Every (a, b) the report states as a - b, in display order of a."""
    return [(s.name, b) for s in sorted(REGISTRY.values(), key=lambda s: s.order) for b in s.compare_to]


def _random_judge(judge: dict | None, seed: int) -> dict:
    """prover_random's placebo: a random segment on the preset judge's side, verified with the same budget."""
    return {"kind": "random", "side": (judge or {}).get("side", "won"), "seed": seed}


register(MethodSpec("random", kind="baseline", order=0, description="uniformly random admissible actions"))
register(MethodSpec("expert", kind="baseline", order=10, description="the env's built-in expert"))
register(MethodSpec("sft", kind="sft", order=20, compare_to=("random",), description="the start model, untrained"))
register(MethodSpec("grpo", advantage=adv.grpo, order=30, compare_to=("sft",), description="GRPO"))
register(
    MethodSpec(
        "dr_grpo", advantage=adv.dr_grpo, order=40, compare_to=("grpo",), description="Dr. GRPO (no std division)"
    )
)
register(MethodSpec("gigpo", advantage=adv.gigpo, order=50, compare_to=("grpo",), description="GiGPO (step groups)"))
register(
    MethodSpec(
        "grpo_matched",
        advantage=adv.grpo,
        extra_tasks=True,
        matched_to="prover",
        order=60,
        compare_to=("grpo",),
        description="GRPO given ProVer's extra generated tokens as extra tasks (the compute-matched control)",
    )
)
register(
    MethodSpec(
        "prover",
        advantage=adv.grpo,
        asks_judge=True,
        verifies=True,
        order=70,
        compare_to=("sft", "grpo", "grpo_matched", "gigpo"),
        description="ProVer: the judge's segment, verified by continuations, positive A_seg credited",
    )
)
register(
    MethodSpec(
        "prover_random",
        advantage=adv.grpo,
        asks_judge=True,
        verifies=True,
        judge=_random_judge,
        order=80,
        compare_to=("grpo",),
        description="ablation: a random segment of a random trajectory, verified with the same budget",
    )
)
register(
    MethodSpec(
        "prover_unverified",
        advantage=adv.grpo,
        asks_judge=True,
        order=90,
        compare_to=("grpo",),
        description="ablation: the judge's segment credited with A_seg = 1, no continuations",
    )
)


def base_advantage(method: str, std_normalize: bool = True) -> Callable[..., list[list[float]]]:
    """The advantage estimator a method starts from (its ``MethodSpec.advantage``):
    ProVer and its ablations start from GRPO, which with ``std_normalize`` off is Dr. GRPO's centring."""
    spec = get(method)
    if spec.advantage is None:
        raise ValueError(f"method={method!r} is not trained with an advantage (a {spec.kind} method)")
    return spec.advantage
