"""Faster local generation, the same tokens: shared-prefix prefill and a lean decode loop.

Two things make ``generate()`` slow for the small models this project trains on a CPU, and neither is
arithmetic:

- **Prompts repeat.** A GRPO group is G rows of the same prompt (turn 1 of every rollout, and later
  turns where rollouts agree); verification continuations repeat a state's prompt M times. A batch's
  prompts are cut into clusters that share a prefix; each cluster's prefix is encoded once and its
  key/value cache is copied to its rows, and only the rows' own suffixes (at least their last token)
  are encoded per row. With the tiny model on the default preset this encodes 2-2.4x fewer prompt
  tokens (``benchmarks/profile_stages.py``). vLLM does the same with its prefix cache.
- **A decode step is mostly Python.** ``generate()`` re-derives masks, grows the cache by
  concatenation and runs its processors per token; for a 2-layer model that overhead is most of a
  step. :class:`Decoder` runs the model's own modules (its projections, norms, rotary embedding and
  transformers' SDPA attention function, so the arithmetic is the same ops on the same weights) over a
  key/value buffer allocated once, and stops when every row has ended.

Only the summation order can differ from ``generate()`` (a prefix encoded apart from its suffix, a
strided key buffer): log-probabilities agree to ~1e-6, and tokens are the same unless two candidates'
perturbed scores lie within that distance (``tests/test_decode.py`` checks both on recorded batches;
``tests/test_golden.py`` checks whole runs). Qwen3 and Llama (SmolLM2) are run this way; other
architectures use ``generate()``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

MIN_SHARED = 8  # a shorter common prefix is not worth a separate pass
# caps tried on a row's own suffix: every row of the suffix pass is padded to the longest suffix, so the
# plan that encodes the fewest (padded) tokens wins
SUFFIX_CAPS = (16, 32, 64, 128, 256, 512)


@dataclass
class Cluster:
    """Rows (indices into the batch) whose first ``length`` tokens are the same."""

    length: int
    rows: list[int]


def _lcp(a: Sequence[int], b: Sequence[int]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def share_prefixes(
    rows: Sequence[Sequence[int]], limits: Sequence[int], *, max_suffix: int, min_shared: int = MIN_SHARED
) -> list[Cluster]:
    """Clusters of rows with a common prefix, every row in exactly one. ``limits[i]``: the longest
    prefix row ``i`` may hand over (for generation its length - 1: the last prompt token is encoded with
    the row, it gives the first logits). Rows are taken in sorted order, where the longest common
    prefixes are neighbours; a row joins the open cluster while the shared prefix stays at least
    ``min_shared`` tokens and leaves no member more than ``max_suffix`` tokens of its own. A row alone
    hands over its whole limit."""
    if not rows:
        return []
    order = sorted(range(len(rows)), key=lambda i: list(rows[i]))
    out: list[Cluster] = []
    cur, length = [order[0]], limits[order[0]]
    for prev, i in zip(order, order[1:]):
        shared = min(length, _lcp(rows[prev], rows[i]), limits[i])
        if shared >= min_shared and all(len(rows[j]) - shared <= max_suffix for j in (*cur, i)):
            cur.append(i)
            length = shared
        else:
            out.append(Cluster(length, cur))
            cur, length = [i], limits[i]
    out.append(Cluster(length, cur))
    return out


def padded_cost(rows: Sequence[Sequence[int]], clusters: list[Cluster]) -> int:
    """Tokens a two-pass encoding computes, padding included: each cluster's prefix padded to the longest
    prefix, then every row's suffix padded to the longest suffix."""
    taken = {r: c.length for c in clusters for r in c.rows}
    prefix = max((c.length for c in clusters), default=0)
    suffix = max((len(rows[r]) - t for r, t in taken.items()), default=0)
    return len(clusters) * prefix + len(rows) * suffix


def plan_prefixes(rows: Sequence[Sequence[int]], limits: Sequence[int], *, gain: float = 0.8) -> list[Cluster] | None:
    """The cheapest clustering over ``SUFFIX_CAPS`` (fewest padded tokens), or None when it would not
    encode at most ``gain`` times the tokens of one padded pass over the rows (then share nothing)."""
    if len(rows) < 2:
        return None
    best, best_cost = None, gain * len(rows) * max(len(r) for r in rows)
    for cap in SUFFIX_CAPS:
        clusters = share_prefixes(rows, limits, max_suffix=cap)
        if len(clusters) == len(rows) and cap != SUFFIX_CAPS[0]:
            continue
        cost = padded_cost(rows, clusters)
        if cost < best_cost:
            best, best_cost = clusters, cost
    return best


_CACHE_KWARG: dict[Any, str | None] = {}


def cache_kwarg(module) -> str | None:
    """The keyword under which this transformers version's ``forward`` takes a key/value cache: ``cache``
    (5.2x) or ``past_key_values`` (before), or None when it takes neither. Passing the wrong one is
    silent (it lands in ``**kwargs``), so every cached call here goes through this."""
    kind = type(module)
    if kind not in _CACHE_KWARG:
        params = inspect.signature(kind.forward).parameters
        _CACHE_KWARG[kind] = next((name for name in ("cache", "past_key_values") if name in params), None)
    return _CACHE_KWARG[kind]


def cache_kwargs(module, cache) -> dict:
    """``{keyword: cache}`` for ``module``'s forward (see :func:`cache_kwarg`); {} for no cache."""
    if cache is None:
        return {}
    name = cache_kwarg(module)
    if name is None:
        raise TypeError(f"{type(module).__name__}.forward takes no key/value cache (transformers version?)")
    return {name: cache}


def output_cache(out):
    """The key/value cache of a model output, under either version's name."""
    cache = getattr(out, "cache", None)
    return cache if cache is not None else getattr(out, "past_key_values", None)


def can_share(module) -> bool:
    """Whether ``module`` (a transformers decoder) takes a cache that shared-prefix encoding can copy to
    rows: a known cache keyword, and a DynamicCache with ``reorder_cache``."""
    try:
        from transformers.cache_utils import DynamicCache
    except ImportError:
        return False
    return cache_kwarg(module) is not None and hasattr(DynamicCache, "reorder_cache")


# the decoder layers it runs: pre-norm attention (Qwen3's with q/k RMSNorm, Llama's without) and a gated MLP
ARCHITECTURES = ("Qwen3ForCausalLM", "LlamaForCausalLM")


def supports(model) -> bool:
    """Whether :class:`Decoder` runs ``model``: a plain (not peft-wrapped) Qwen3 or Llama causal LM with full
    attention, default rotary embedding and SDPA or eager attention."""
    cfg = getattr(model, "config", None)
    if cfg is None or type(model).__name__ not in ARCHITECTURES:
        return False
    try:
        from transformers.integrations.sdpa_attention import sdpa_attention_forward  # noqa: F401
    except ImportError:
        return False
    if not can_share(model) or "logits_to_keep" not in inspect.signature(type(model).forward).parameters:
        return False
    rope = (getattr(cfg, "rope_parameters", None) or {}).get("rope_type", "default")
    layer_types = set(getattr(cfg, "layer_types", None) or ["full_attention"])
    return (
        rope == "default"
        and layer_types == {"full_attention"}
        and not getattr(cfg, "use_sliding_window", False)
        and getattr(cfg, "_attn_implementation", "sdpa") in ("sdpa", "eager")
        and getattr(cfg, "hidden_act", "silu") == "silu"
    )


class Decoder:
    """Batched generation for a Qwen3 or Llama causal LM (see the module docstring).

    ``generate(prompts, max_new, choose)``: ``choose(logits [B, V] float32) -> tokens [B]`` picks each
    step's tokens (greedy, or ``KeyedSampler.choose``). Returns each row's tokens up to and including
    its ``eos`` (or ``max_new`` of them)."""

    def __init__(self, model, pad_id: int, eos_id: int | None):
        from transformers.integrations.sdpa_attention import sdpa_attention_forward

        self.model, self.pad_id, self.eos_id = model, pad_id, eos_id
        self.base = model.model
        self.head = model.lm_head
        self._attend = sdpa_attention_forward

    # -- prefill -----------------------------------------------------------------------------------
    def _forward(self, ids, mask, positions, cache=None):
        kwargs = cache_kwargs(self.model, cache)
        out = self.model(
            input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=True, logits_to_keep=1, **kwargs
        )
        return out.logits[:, -1, :].float(), output_cache(out)

    def prefill(self, prompts: Sequence[Sequence[int]]):
        """Encodes the prompts (shared prefixes once) -> (last logits [B, V], keys and values per layer
        [B, Hkv, W, D], key mask [B, W], next positions [B])."""
        device = self.head.weight.device
        clusters = plan_prefixes(prompts, [len(p) - 1 for p in prompts])
        n = len(prompts)
        if clusters is None:  # not enough repeats: one left-padded pass, as generate() does
            width = max(len(p) for p in prompts)
            ids = torch.full((n, width), self.pad_id, dtype=torch.long)
            mask = torch.zeros((n, width), dtype=torch.long)
            for i, p in enumerate(prompts):
                ids[i, width - len(p) :] = torch.tensor(list(p))
                mask[i, width - len(p) :] = 1
            ids, mask = ids.to(device), mask.to(device)
            logits, cache = self._forward(ids, mask, padded_positions(mask))
            return logits, cache, mask
        pre_ids, pre_mask, cluster_of, taken = stack_prefixes(prompts, clusters, self.pad_id)
        pw = pre_ids.shape[1]
        # each row: its cluster's prefix, then its own suffix left-padded to the longest suffix
        sw = max(len(p) - t for p, t in zip(prompts, taken))
        index = torch.tensor(cluster_of)
        suf_ids = torch.full((n, sw), self.pad_id, dtype=torch.long)
        suf_mask = torch.zeros((n, sw), dtype=torch.long)
        for i, (p, t) in enumerate(zip(prompts, taken)):
            s = list(p[t:])
            suf_ids[i, sw - len(s) :] = torch.tensor(s)
            suf_mask[i, sw - len(s) :] = 1
        pre_ids, pre_mask = pre_ids.to(device), pre_mask.to(device)
        _, cache = self._forward(pre_ids, pre_mask, padded_positions(pre_mask))
        cache.reorder_cache(index.to(device))  # each row gets its cluster's keys and values
        mask = torch.cat([pre_mask[index.to(device)], suf_mask.to(device)], dim=1)
        positions = padded_positions(mask)[:, pw:]
        logits, cache = self._forward(suf_ids.to(device), mask, positions, cache)
        return logits, cache, mask

    # -- decode ------------------------------------------------------------------------------------
    @torch.no_grad()
    def generate(
        self, prompts: Sequence[Sequence[int]], max_new: int, choose: Callable[[torch.Tensor], torch.Tensor]
    ) -> list[list[int]]:
        """Up to ``max_new`` tokens for each prompt, each step's tokens picked by ``choose`` from the logits; rows stop
        at ``eos``."""
        logits, cache, mask = self.prefill(prompts)
        n, width = mask.shape
        device = mask.device
        layers = list(self.base.layers)
        total = width + max_new
        keys, values = [], []
        for i in range(len(layers)):
            k, v = cache.layers[i].keys, cache.layers[i].values
            kb = k.new_empty((n, k.shape[1], total, k.shape[3]))
            vb = v.new_empty((n, v.shape[1], total, v.shape[3]))
            kb[:, :, :width] = k
            vb[:, :, :width] = v
            keys.append(kb)
            values.append(vb)
        valid = torch.zeros((n, total), dtype=torch.bool, device=device)
        valid[:, :width] = mask.bool()
        valid[:, width:] = True  # generated positions (a finished row's padding too, as generate() does)
        padded = not bool(mask.all())
        position = mask.sum(-1, keepdim=True)  # [B, 1]: the next token's position
        out = torch.empty((n, max_new), dtype=torch.long)
        done = torch.zeros(n, dtype=torch.bool, device=device)
        steps = 0
        for t in range(max_new):
            token = choose(logits)
            if self.eos_id is not None:
                token = torch.where(done, torch.full_like(token, self.pad_id), token)
                done = done | (token == self.eos_id)
            out[:, t] = token.cpu()
            steps = t + 1
            if bool(done.all()) or t == max_new - 1:
                break
            logits = self._step(token, position + t, width + t, layers, keys, values, valid, padded)
        rows = []
        for row in out[:, :steps].tolist():
            if self.eos_id is not None and self.eos_id in row:
                row = row[: row.index(self.eos_id) + 1]
            rows.append(row)
        return rows

    def _step(self, token, position, at: int, layers, keys, values, valid, padded: bool) -> torch.Tensor:
        """One token per row at cache slot ``at`` -> next logits [B, V] (the model's modules, in its order)."""
        hidden = self.base.embed_tokens(token[:, None])
        cos, sin = self.base.rotary_emb(hidden, position)
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
        span = at + 1
        mask = valid[:, None, None, :span] if padded else None
        n = hidden.shape[0]
        qk_norm = hasattr(layers[0].self_attn, "q_norm")
        for i, layer in enumerate(layers):
            attn = layer.self_attn
            residual = hidden
            h = layer.input_layernorm(hidden)
            shape = (n, 1, -1, attn.head_dim)
            q, k = attn.q_proj(h).view(shape), attn.k_proj(h).view(shape)
            if qk_norm:  # Qwen3 normalises queries and keys per head; Llama does not
                q, k = attn.q_norm(q), attn.k_norm(k)
            q, k = q.transpose(1, 2), k.transpose(1, 2)
            v = attn.v_proj(h).view(shape).transpose(1, 2)
            q = (q * cos) + (_rotate_half(q) * sin)
            k = (k * cos) + (_rotate_half(k) * sin)
            keys[i][:, :, at : at + 1] = k
            values[i][:, :, at : at + 1] = v
            o, _ = self._attend(
                attn, q, keys[i][:, :, :span], values[i][:, :, :span], mask, dropout=0.0, scaling=attn.scaling
            )
            hidden = residual + attn.o_proj(o.reshape(n, 1, -1).contiguous())
            residual = hidden
            hidden = residual + layer.mlp(layer.post_attention_layernorm(hidden))
        return self.head(self.base.norm(hidden))[:, -1, :].float()


def stack_prefixes(
    rows: Sequence[Sequence[int]], clusters: list[Cluster], pad_id: int
) -> tuple[torch.Tensor, torch.Tensor, list[int], list[int]]:
    """The clusters' prefixes as one left-padded batch: (ids [C, W], mask [C, W], each row's cluster,
    each row's prefix length)."""
    width = max(c.length for c in clusters)
    ids = torch.full((len(clusters), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(clusters), width), dtype=torch.long)
    cluster_of, taken = [0] * len(rows), [0] * len(rows)
    for k, c in enumerate(clusters):
        if c.length:
            ids[k, width - c.length :] = torch.tensor(list(rows[c.rows[0]][: c.length]))
            mask[k, width - c.length :] = 1
        for r in c.rows:
            cluster_of[r], taken[r] = k, c.length
    return ids, mask, cluster_of, taken


def padded_positions(mask: torch.Tensor) -> torch.Tensor:
    """generate()'s position ids: the count of real tokens before each one (padding gets 0)."""
    return (mask.long().cumsum(-1) - 1).masked_fill(mask == 0, 0)


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)
