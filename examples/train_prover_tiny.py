"""Train ProVer on a tiny config: the shipped Search-QA base (the tiny local model after SFT), 3 RL
iterations, ProVer's verified credit on top of GRPO. About a minute on 2 CPU cores.

    python examples/train_prover_tiny.py [out_dir]

The same run from the command line: prover-gym-train method=prover model_path=base:searchqa ...
(``base:<name>``: a shipped SFT base, found in the package wherever you run from).
"""

import sys

from trainers.config import load_config
from trainers.train import Trainer


def main(out_dir: str = "runs/example_prover_tiny", iterations: int = 3) -> list[dict]:
    cfg = load_config(
        None,
        [
            "method=prover",
            "env_kwargs={split: train, max_turns: 2, data_sources: [single_hop]}",
            "model_path=base:searchqa",
            "sft_steps=0",  # the base is already SFT-trained
            "tasks_per_iteration=6",
            "group_size=4",
            "max_tokens=32",
            "lr=1e-4",
            "judge={kind: first_divergence, side: won}",
            "continuations=4",
            f"iterations={iterations}",
            f"out_dir={out_dir}",
        ],
    )
    trainer = Trainer(cfg)
    rows = trainer.run()
    trainer.close()
    for r in rows:
        print(
            f"iteration {r['iteration']}: success {r['success']:.2f}, loss {r['loss']:+.4f}, "
            f"ProVer verified {r['prover/verified_segments']} segments, credited {r['prover/credited_segments']}"
        )
    print(f"metrics: {out_dir}/metrics.jsonl, checkpoint: {out_dir}/checkpoint")
    return rows


if __name__ == "__main__":
    main(*sys.argv[1:2])
