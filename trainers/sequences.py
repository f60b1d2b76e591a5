"""From trajectories to training tensors, one sequence per turn.

Each turn's sequence is exactly what the model saw and produced: ``prompt_token_ids`` (masked)
followed by the generated ``token_ids`` (the policy tokens, with their rollout log-probs). Tokens
the policy generated after the format's cut (text after ``</search>`` that Search-R1 discards) are
dropped. Env text only ever appears inside prompts, so it is never a policy token.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch

from agents.trajectory import Trajectory


@dataclass
class TurnSample:
    """One turn as a training sequence: prompt and generated token ids, the mask of policy tokens, their old log-
    probabilities and per-position advantages, and where it came from (trajectory, turn)."""

    input_ids: list[int]
    policy_mask: list[int]
    old_logprobs: list[float]
    advantages: list[float]  # per position, 0 on prompt tokens
    trajectory: int
    turn: int


def kept_token_count(tokenizer, token_ids: list[int], kept_text: str) -> int:
    """The shortest prefix of ``token_ids`` whose decoding covers ``kept_text`` (all of them, EOS included,
    when nothing was cut). Memoised: an
    iteration asks for every turn twice (the credit's token layout, then the learner's samples),
    and each answer decodes up to every prefix."""
    return _kept_token_count(tokenizer, tuple(token_ids), kept_text)


@functools.lru_cache(maxsize=1 << 16)
def _kept_token_count(tokenizer, token_ids_key: tuple[int, ...], kept_text: str) -> int:
    token_ids = list(token_ids_key)
    full = tokenizer.decode(token_ids, skip_special_tokens=True)
    if full == kept_text or not full.startswith(kept_text):
        # nothing was cut (the whole reply is the action, its EOS included: the stop is the policy's decision
        # too, and a stop that never trains drifts, e.g. to '<think>' + EOS), or the kept text is not a
        # prefix of the generation: keep every token
        return len(token_ids)
    for n in range(len(token_ids) + 1):
        if len(tokenizer.decode(token_ids[:n], skip_special_tokens=True)) >= len(kept_text):
            return n
    return len(token_ids)


def kept_counts(traj: Trajectory, tokenizer=None) -> list[int]:
    """Per turn, how many of its generated tokens train (0 for turns without token ids)."""
    out = []
    for turn in traj.turns:
        if turn.token_ids is None:
            out.append(0)
            continue
        ids = list(turn.token_ids)
        out.append(kept_token_count(tokenizer, ids, turn.text) if tokenizer is not None else len(ids))
    return out


def token_turns(traj: Trajectory, tokenizer=None) -> torch.Tensor:
    """The turn index of each of the trajectory's policy tokens, all turns concatenated [T]: the
    layout of a trajectory's token advantages (``trainers.advantages.apply_segment_bonus``)."""
    return torch.tensor([k for k, n in enumerate(kept_counts(traj, tokenizer)) for _ in range(n)], dtype=torch.long)


def turn_samples(trajectories: list[Trajectory], advantages: list, tokenizer=None) -> list[TurnSample]:
    """One sample per turn with token ids (scripted policies' turns are skipped).

    ``advantages[i]``: trajectory i's advantages, either per turn (a list of floats, one per turn:
    every policy token of turn k gets ``advantages[i][k]``) or per token (a tensor over the
    trajectory's policy tokens in ``token_turns`` layout: GRPO's A_i plus ProVer's bonus)."""
    samples = []
    for i, (traj, adv) in enumerate(zip(trajectories, advantages)):
        counts = kept_counts(traj, tokenizer)
        if isinstance(adv, torch.Tensor):
            if adv.numel() != sum(counts):
                raise ValueError(f"trajectory {i}: {adv.numel()} token advantages for {sum(counts)} policy tokens")
            per_token = adv.tolist()
        else:
            if len(adv) != len(traj.turns):
                raise ValueError(f"trajectory {i}: {len(adv)} advantages for {len(traj.turns)} turns")
            per_token = [float(a) for a, n in zip(adv, counts) for _ in range(n)]
        offset = 0
        for k, (turn, n) in enumerate(zip(traj.turns, counts)):
            if turn.token_ids is None:
                continue
            prompt = turn.prompt_token_ids or []
            ids = list(turn.token_ids)[:n]
            lps = list(turn.logprobs or [0.0] * len(turn.token_ids))[:n]
            samples.append(
                TurnSample(
                    list(prompt) + ids,
                    [0] * len(prompt) + [1] * n,
                    [0.0] * len(prompt) + lps,
                    [0.0] * len(prompt) + per_token[offset : offset + n],
                    i,
                    k,
                )
            )
            offset += n
    return samples


def collate(samples: list[TurnSample], pad_id: int) -> dict[str, torch.Tensor]:
    """Right-padded tensors: input_ids, attention_mask, policy_mask, old_logprobs, advantages [B, T]."""
    width = max(len(s.input_ids) for s in samples)

    def pad(seq, value):
        return seq + [value] * (width - len(seq))

    policy = torch.tensor([pad(s.policy_mask, 0) for s in samples])
    return {
        "input_ids": torch.tensor([pad(s.input_ids, pad_id) for s in samples]),
        "attention_mask": torch.tensor([pad([1] * len(s.input_ids), 0) for s in samples]),
        "policy_mask": policy,
        "old_logprobs": torch.tensor([pad(s.old_logprobs, 0.0) for s in samples]),
        "advantages": torch.tensor([pad(s.advantages, 0.0) for s in samples], dtype=torch.float32) * policy,
    }


def token_logprobs(model, batch: dict[str, torch.Tensor], mask: torch.Tensor | None = None) -> torch.Tensor:
    """log pi(token_t | tokens_<t) for every position (position 0 gets 0), [B, T].

    With ``mask`` [B, T] (e.g. the policy mask), only the masked positions are computed (the rest
    are 0): the LM head, which dominates the cost of a small model over long prompts, then runs on
    the few generated tokens instead of every prompt position.
    """
    ids, attn = batch["input_ids"], batch["attention_mask"]
    if hasattr(model, "get_base_model"):  # peft: the causal LM its adapters are injected into
        model = model.get_base_model()
    base = getattr(model, getattr(model, "base_model_prefix", ""), None)
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    if mask is None or base is None or head is None:
        logits = model(input_ids=ids, attention_mask=attn, use_cache=False).logits
        lp = torch.log_softmax(logits[:, :-1].float(), -1).gather(-1, ids[:, 1:, None])[..., 0]
        out = torch.cat([torch.zeros_like(lp[:, :1]), lp], dim=1)
        return out if mask is None else out * mask.to(out.dtype)
    rows, cols = torch.nonzero(mask[:, 1:], as_tuple=True)  # token cols+1 is predicted at position cols
    shared = _shared_hidden(base, ids, attn, mask)
    if shared is None:
        hidden = base(input_ids=ids, attention_mask=attn, use_cache=False).last_hidden_state  # [B, T, H]
        picked_hidden = hidden[rows, cols]
    else:  # positions before `taken` were encoded once per cluster: the suffix pass starts there
        hidden, taken = shared
        picked_hidden = hidden[rows, cols - taken[rows]]
    logits = head(picked_hidden).float()  # [N, V]
    picked = torch.log_softmax(logits, -1).gather(-1, ids[rows, cols + 1][:, None])[:, 0]
    out = torch.zeros(ids.shape, dtype=picked.dtype, device=picked.device)
    return out.index_put((rows, cols + 1), picked)


def _shared_hidden(base, ids: torch.Tensor, attn: torch.Tensor, mask: torch.Tensor):
    """Hidden states with shared prompt prefixes encoded once (agents.backends.decode.plan_prefixes):
    the samples of a GRPO group repeat their first prompt (and often more), so each cluster's common
    prefix goes through the model once and its keys and values are copied to its rows, gradient
    included (the copy is an index_select, whose backward sums the rows' gradients into the prefix).
    Returns (hidden [B, S, H] of each row's suffix, taken [B]: where its suffix starts) or None when
    sharing would not save enough (then the caller encodes the rows whole). A row may hand over at most
    the tokens before its first scored position (the first policy token's predecessor is in the suffix).
    Only the summation order differs from one pass: log-probs agree to ~1e-6."""
    from agents.backends.decode import (
        cache_kwargs,
        can_share,
        output_cache,
        padded_positions,
        plan_prefixes,
        stack_prefixes,
    )

    if not can_share(base):
        return None
    lengths = attn.sum(-1).tolist()
    if attn.shape[0] < 2 or any(int(attn[i, : lengths[i]].sum()) != lengths[i] for i in range(len(lengths))):
        return None  # not right-padded rows: encode them whole
    first = [int(torch.nonzero(m[1:])[0]) if bool(m[1:].any()) else n - 1 for m, n in zip(mask, lengths)]
    seqs = [ids[i, :n].tolist() for i, n in enumerate(lengths)]
    clusters = plan_prefixes(seqs, first)
    if clusters is None:
        return None
    device = ids.device
    pad = 0  # padding's value is never read (masked)
    n = len(seqs)
    pre_ids, pre_mask, cluster_of, taken = stack_prefixes(seqs, clusters, pad)
    sw = max(len(q) - t for q, t in zip(seqs, taken))
    suf_ids = torch.full((n, sw), pad, dtype=torch.long)
    suf_mask = torch.zeros((n, sw), dtype=torch.long)
    for i, (q, t) in enumerate(zip(seqs, taken)):
        suf_ids[i, : len(q) - t] = torch.tensor(q[t:])
        suf_mask[i, : len(q) - t] = 1
    pre_ids, pre_mask, index = pre_ids.to(device), pre_mask.to(device), torch.tensor(cluster_of, device=device)
    positions = padded_positions(pre_mask)
    cache = output_cache(base(input_ids=pre_ids, attention_mask=pre_mask, position_ids=positions, use_cache=True))
    cache.reorder_cache(index)
    starts = torch.tensor(taken, device=device)
    suf_positions = starts[:, None] + torch.arange(sw, device=device)[None, :]
    full_mask = torch.cat([pre_mask[index], suf_mask.to(device)], dim=1)
    out = base(
        input_ids=suf_ids.to(device),
        attention_mask=full_mask,
        position_ids=suf_positions,
        use_cache=True,
        **cache_kwargs(base, cache),
    )
    return out.last_hidden_state, starts
