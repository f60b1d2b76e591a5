"""One learner update on each of a few fixed batches, in 1 process or as one rank of ``torchrun``
(tests/test_distributed.py); each batch starts from a fresh copy of the model.

    python tests/helpers/dist_learner_worker.py BATCH.pkl OUT.pt [BATCH2.pkl OUT2.pt ...]
    python -m torch.distributed.run --standalone --nproc_per_node 2 tests/helpers/dist_learner_worker.py BATCH.pkl OUT.pt

Each rank takes the groups ``g % world == rank`` (as the trainer shards them) and rank 0 saves the
parameters after the update and the learner's logs. One process runs every case, so that the start-up
(python, torch, the process group) is paid once.
"""

import pickle
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from trainers.distributed import Dist  # noqa: E402
from trainers.learner import Learner, LogprobModule  # noqa: E402
from trainers.train import make_optimizer  # noqa: E402


def main(pairs: list[str]) -> None:
    dist = Dist()
    for batch_path, out_path in zip(pairs[::2], pairs[1::2], strict=True):
        one_update(dist, batch_path, out_path)


def one_update(dist: Dist, batch_path: str, out_path: str) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    payload = pickle.loads(Path(batch_path).read_bytes())
    cfg, trajs, advs, gids = payload["cfg"], payload["trajectories"], payload["advantages"], payload["groups"]
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(payload["model_dir"]).eval()
    tokenizer = AutoTokenizer.from_pretrained(payload["model_dir"])
    forward = dist.prepare(LogprobModule(model)) if dist.enabled else None
    optimizer = make_optimizer(cfg, [p for p in (forward or model).parameters() if p.requires_grad])
    learner = Learner(
        cfg, model, tokenizer, optimizer, Path(out_path).parent, lambda: model, False, dist=dist, forward_model=forward
    )
    mine = [i for i, g in enumerate(gids) if g % dist.world == dist.rank]
    logs = learner.learn([trajs[i] for i in mine], [advs[i] for i in mine], [gids[i] for i in mine])
    if dist.is_main:
        torch.save(
            {"params": {n: p.detach().clone() for n, p in model.named_parameters()}, "logs": logs, "world": dist.world},
            out_path,
        )
    dist.barrier()


if __name__ == "__main__":
    main(sys.argv[1:])
