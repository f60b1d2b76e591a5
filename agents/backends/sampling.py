"""Keyed sampling: common random numbers for generation.

Every sampled row of a generation call carries a *key* (a tuple such as ``("rollout", seed,
iteration, task_id, rollout_index, turn)``); the noise that picks its tokens is a pure function of
that key and the token position, never of the call counter, the global torch RNG, or which other
rows share the batch. Two runs that ask for the same key from the same model therefore draw the
same tokens, whatever else they generate in between (a verification round, a greedy probe), and a
row's tokens do not change when the batch is cut differently. This is what makes two methods
comparable run against run: they differ only in what they differ in (Glasserman and Yao 1992,
"common random numbers"; the same idea keys vLLM's per-request seeds).

Sampling is Gumbel-max (equivalently, exponential races): with ``E_v ~ Exp(1)`` i.i.d. per vocabulary
entry, ``argmax_v logp_v - log E_v`` is an exact draw from ``softmax(logits / T)`` (restricted to the
top-p nucleus when ``top_p < 1``). The ``E`` of token position ``t`` of a row are the ``t``-th block
of draws of a ``torch.Generator`` seeded with ``key_seed(key)``. The log-probability recorded for
the chosen token is the clean one, ``log_softmax(logits / T)`` after the nucleus cut, as the loss
needs; the noise never enters it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import torch

Key = tuple


def key_seed(key: Key) -> int:
    """A 63-bit seed from a key (stable across processes and Python versions: no ``hash()``)."""
    digest = hashlib.blake2b(repr(tuple(key)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 1


def nucleus_mask(logp: torch.Tensor, top_p: float) -> torch.Tensor:
    """A boolean mask [B, V] of the smallest set of tokens whose probability reaches ``top_p``
    (HF's TopPLogitsWarper semantics: a token is kept while the mass before it is < top_p)."""
    if top_p >= 1.0:
        return torch.ones_like(logp, dtype=torch.bool)
    sorted_logp, order = torch.sort(logp, dim=-1, descending=True)
    before = torch.cumsum(sorted_logp.exp(), dim=-1) - sorted_logp.exp()
    keep_sorted = before < top_p
    keep_sorted[..., 0] = True
    mask = torch.zeros_like(keep_sorted)
    return mask.scatter(-1, order, keep_sorted)


def _signed(x: int) -> int:
    return x - (1 << 64) if x >= 1 << 63 else x


_GOLDEN, _M1, _M2 = _signed(0x9E3779B97F4A7C15), _signed(0xBF58476D1CE4E5B9), _signed(0x94D049BB133111EB)


def counter_uniform(seeds: torch.Tensor, step: int, vocab: int) -> torch.Tensor:
    """Uniforms in (0, 1), shape [B, V], as a pure function of (row seed, step, vocabulary index):
    splitmix64 (Steele et al. 2014) over int64 tensors with wrapping arithmetic, computed on the
    seeds' device in one vectorised pass. The same numbers on any device (integer arithmetic is
    exact), with no per-row generator and no host round trip: the accelerators' noise."""
    index = torch.arange(vocab, dtype=torch.int64, device=seeds.device) + (step * vocab + 1)
    x = seeds[:, None] + index[None, :] * _GOLDEN
    x = x ^ ((x >> 30) & ((1 << 34) - 1))
    x = x * _M1
    x = x ^ ((x >> 27) & ((1 << 37) - 1))
    x = x * _M2
    x = x ^ ((x >> 31) & ((1 << 33) - 1))
    return (((x >> 11) & ((1 << 53) - 1)).to(torch.float64) + 0.5) / float(1 << 53)


class KeyedSampler:
    """A transformers ``LogitsProcessor`` for *greedy* search that turns it into keyed sampling:
    it returns ``logp + Gumbel noise`` (so the greedy argmax is the sample) and records, per step,
    the chosen token and its clean log-probability. One ``torch.Generator`` per row."""

    def __init__(
        self,
        keys: Sequence[Key],
        temperature: float,
        top_p: float = 1.0,
        *,
        counter: bool = False,
        eos_token_id: int | None = None,
    ):
        """``counter``: draw the noise with ``counter_uniform`` on the logits' device (the accelerators'
        default: one vectorised pass) instead of one CPU ``torch.Generator`` per row (the CPU default,
        ~8 ms a step for 48 rows x 4096 entries). The two give different, equally exact draws.
        ``eos_token_id``: a row that has chosen it is finished (generate pads it from then on and its
        later tokens are never read), so no noise is drawn for it any more: the same tokens and
        log-probabilities for every row, less work once rows finish."""
        if temperature <= 0:
            raise ValueError("keyed sampling needs temperature > 0 (temperature 0 is greedy: nothing is drawn)")
        self.temperature, self.top_p, self.counter = float(temperature), float(top_p), counter
        self.seeds = [key_seed(key) for key in keys]
        self.generators = []
        if not counter:
            for seed in self.seeds:
                g = torch.Generator()
                g.manual_seed(seed)
                self.generators.append(g)
        self._seeds: torch.Tensor | None = None  # the row seeds on the logits' device (counter mode)
        self.eos_token_id = eos_token_id
        self.finished = [False] * len(self.seeds)
        self.chosen: list[torch.Tensor] = []
        self.logprobs: list[torch.Tensor] = []

    def noise(self, vocab: int, dtype: torch.dtype, device: Any) -> torch.Tensor:
        """This step's Gumbel noise [B, V], each row a function of its own key only (batch-independent):
        from its CPU generator (moved to ``device``), or with ``counter`` computed on ``device``."""
        if self.counter:
            if self._seeds is None or self._seeds.device != torch.device(device):
                self._seeds = torch.tensor(self.seeds, dtype=torch.int64, device=device)
            u = counter_uniform(self._seeds, len(self.chosen), vocab)
            return (-(-u.log()).log()).to(dtype)
        rows = [
            torch.ones(vocab, dtype=torch.float64)  # a finished row: no draw (its later tokens are padding)
            if done
            else torch.empty(vocab, dtype=torch.float64).exponential_(generator=g)
            for g, done in zip(self.generators, self.finished)
        ]
        return (-torch.stack(rows).log()).to(device=device, dtype=dtype)

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        chosen = self.choose(scores)
        # the greedy step takes the argmax of what is returned: exactly ``chosen``
        out = torch.full_like(scores, float("-inf"))
        return out.scatter(-1, chosen[:, None], 0.0)

    def choose(self, scores: torch.Tensor) -> torch.Tensor:
        """This step's tokens [B] from the logits [B, V] (recorded with their clean log-probabilities)."""
        logp = torch.log_softmax(scores.float() / self.temperature, dim=-1)
        if self.top_p < 1.0:
            keep = nucleus_mask(logp, self.top_p)
            logp = torch.log_softmax(logp.masked_fill(~keep, float("-inf")), dim=-1)
        perturbed = logp + self.noise(logp.shape[-1], logp.dtype, logp.device)
        chosen = perturbed.argmax(dim=-1)
        self.chosen.append(chosen)
        if self.eos_token_id is not None:
            self.finished = [f or c == self.eos_token_id for f, c in zip(self.finished, chosen.tolist())]
        self.logprobs.append(logp.gather(-1, chosen[:, None])[:, 0])
        return chosen

    def row(self, i: int, n: int) -> tuple[list[int], list[float]]:
        """Row ``i``'s first ``n`` chosen tokens and their clean log-probabilities."""
        return [int(c[i]) for c in self.chosen[:n]], [float(lp[i]) for lp in self.logprobs[:n]]
