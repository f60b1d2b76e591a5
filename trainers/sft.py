"""SFT warm start: cross-entropy on expert turns rendered in the policy's prompt format (prompt
tokens masked, the LM head computed on target positions only)."""

from __future__ import annotations

import math
import random
from dataclasses import replace

import torch

from agents.baselines import make_demonstrator
from agents.rollout import rollout
from prover_gym import restore
from trainers.sequences import token_logprobs


def render_action(fmt, action: str) -> str:
    """An expert action written the way the policy's format expects the model to write it."""
    from agents.formats import SearchR1Format

    if isinstance(fmt, SearchR1Format):
        verb, arg = action.split("[", 1)
        return f"<think>I should {verb} now.</think><{verb}> {arg[:-1]} </{verb}>"
    return f"<think>The next step is {action}.</think><action>{action}</action>"


def sft_task_ids(env, episodes: int | None, seed: int) -> list[str]:
    """The tasks of the SFT episodes: consecutive tasks of the split from a seed-dependent offset, so
    ``episodes`` >= the split's size (or None: exactly one per task) covers every task RL trains on."""
    ids = env.unwrapped.task_ids()
    n = len(ids) if episodes is None else episodes
    return [ids[(seed * 100_003 + episode) % len(ids)] for episode in range(n)]


def expert_examples(
    env, policy, backend, episodes: int | None, seed: int, demonstrator: dict | None = None
) -> list[tuple[list[int], list[int]]]:
    """(prompt ids, target ids + EOS) for every turn of the demonstrator's episodes of ``sft_task_ids``
    (the expert, or a flawed one: agents.baselines.make_demonstrator), each prompt built exactly as
    ``policy`` builds it at rollout time."""
    tok = backend.tokenizer
    examples = []
    for episode, task_id in enumerate(sft_task_ids(env, episodes, seed)):
        demo = make_demonstrator(demonstrator, seed=seed * 100_003 + episode)
        traj = rollout(env, demo, seed=seed * 100_003 + episode, task_id=task_id)
        rendered = [replace(t, text=render_action(policy.format, t.action)) for t in traj.turns]
        for k, turn in enumerate(rendered):
            restore(env, turn.snapshot)
            _, info, _, _ = env.unwrapped.current_state()
            messages, prefix = policy.request(turn.observation, info, rendered[:k])
            prompt = backend.prompt_ids(messages, prefix)
            target = tok(turn.text, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
            examples.append((prompt, target))
    return examples


def lr_factor(step: int, steps: int, schedule: str) -> float:
    """The multiplier of the learning rate at ``step`` (0-based): 1 (constant), or a 5% linear warm-up
    followed by a cosine decay to 0 (cosine)."""
    if schedule == "constant":
        return 1.0
    warm = max(1, steps // 20)
    if step < warm:
        return (step + 1) / warm
    return 0.5 * (1 + math.cos(math.pi * (step - warm) / max(1, steps - warm)))


def sft_steps(
    model,
    params,
    examples,
    *,
    steps: int,
    batch_size: int,
    lr: float,
    pad_id: int,
    rng: random.Random,
    schedule: str = "constant",
    progress: bool = False,
    forward=None,
) -> list[float]:
    """``steps`` AdamW steps on random mini-batches of ``examples``; returns the losses. ``progress``:
    one tqdm bar with the running loss. ``forward(batch, mask)``: the log-probs with gradient (default
    ``token_logprobs(model, ...)``; the trainer passes its DDP wrapper's when data-parallel)."""
    device = next(model.parameters()).device
    forward = forward or (lambda batch, mask: token_logprobs(model, batch, mask))
    from tqdm import tqdm

    opt = torch.optim.AdamW(params, lr=lr)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: lr_factor(step, steps, schedule))
    losses = []
    model.train()
    bar = tqdm(total=steps, desc="SFT", unit="step", leave=False, disable=not progress or None)
    for _ in range(steps):
        batch = rng.sample(examples, min(batch_size, len(examples)))
        width = max(len(p) + len(t) for p, t in batch)
        ids = torch.full((len(batch), width), pad_id)
        targets = torch.zeros((len(batch), width), dtype=torch.bool)
        attn = torch.zeros((len(batch), width), dtype=torch.long)
        for row, (p, t) in enumerate(batch):
            seq = p + t
            ids[row, : len(seq)] = torch.tensor(seq)
            targets[row, len(p) : len(seq)] = True
            attn[row, : len(seq)] = 1
        ids, targets, attn = ids.to(device), targets.to(device), attn.to(device)
        lp = forward({"input_ids": ids, "attention_mask": attn}, targets)
        loss = -(lp * targets).sum() / targets.sum()  # the same mean NLL as the HF loss, LM head on targets only
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(float(loss.detach()))
        bar.update(1)
        if len(losses) % 20 == 0:
            bar.set_postfix(loss=f"{sum(losses[-20:]) / 20:.3f}")
    bar.close()
    model.eval()
    return losses
