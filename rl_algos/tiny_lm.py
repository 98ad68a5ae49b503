"""A small decoder-only transformer over a tiny vocabulary, with a key/value cache for sampling.

The architecture is GPT-2's (Radford et al. 2019, "Language Models are Unsupervised
Multitask Learners"): learned token and position embeddings, ``layers`` pre-norm blocks of
causal multi-head self-attention and a GELU MLP (4x wide), a final LayerNorm and a linear
head to the vocabulary. Sampling feeds the prompt once (the *prefill*) and then one token at
a time, each step attending to the keys and values the earlier steps cached, as every LLM
inference engine does; :func:`sample` gives the same logits as re-running the whole prefix
(tests/test_grpo.py).

Tokens are int64 ids in ``[0, vocab)``; logits float32 ``(B, T, vocab)``. The network is
initialised from a ``torch.Generator`` of the caller's (normal, std 0.02, GPT-2's), never
from torch's process-wide generator.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from .networks import Weights

#: The :class:`~rl_algos.networks.Weights` kind of a :class:`TinyLM`.
KIND = "tiny_lm"

#: One layer's cached keys and values, each (B, heads, t, head_dim) float32.
LayerCache = tuple[torch.Tensor, torch.Tensor]


@dataclass(frozen=True)
class LMSpec:
    """The shape of a :class:`TinyLM`: vocabulary size, longest sequence (tokens), width,
    layers and attention heads (``width`` a multiple of ``heads``).

    Raises ValueError (at construction) for a non-positive size or a width that ``heads``
    does not divide."""

    vocab: int
    max_len: int
    width: int = 64
    layers: int = 2
    heads: int = 4

    def __post_init__(self) -> None:
        sizes = (self.vocab, self.max_len, self.width, self.layers, self.heads)
        if min(sizes) < 1 or self.width % self.heads:
            raise ValueError(f"invalid TinyLM shape {self}: sizes >= 1, width % heads == 0")


class Block(nn.Module):
    """One pre-norm transformer block: ``x + attn(ln(x))`` then ``x + mlp(ln(x))``."""

    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.qkv, self.proj = nn.Linear(width, 3 * width), nn.Linear(width, width)
        self.fc, self.out = nn.Linear(width, 4 * width), nn.Linear(4 * width, width)

    def forward(self, x: torch.Tensor, cache: LayerCache | None) -> tuple[torch.Tensor, LayerCache]:
        """``x`` (B, T, width) of the positions after those in ``cache`` -> the block's
        output (B, T, width) and the cache extended by these T positions."""
        b, t, w = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(w, dim=2)
        q, k, v = (z.view(b, t, self.heads, w // self.heads).transpose(1, 2) for z in (q, k, v))
        if cache is not None:
            k, v = torch.cat([cache[0], k], dim=2), torch.cat([cache[1], v], dim=2)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(w // self.heads)
        past = k.shape[2] - t  # query i sees keys 0 .. past + i
        mask = torch.ones(t, k.shape[2], dtype=torch.bool, device=x.device).tril(past)
        att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(b, t, w)
        x = x + self.proj(y)
        x = x + self.out(F.gelu(self.fc(self.ln2(x))))
        return x, (k, v)


class TinyLM(nn.Module):
    """The decoder-only transformer of :class:`LMSpec` ``spec`` (on the CPU; move it with
    ``.to(device)``), its weights drawn from ``generator``."""

    def __init__(self, spec: LMSpec, generator: torch.Generator) -> None:
        super().__init__()
        self.spec = spec
        self.tok = nn.Embedding(spec.vocab, spec.width)
        self.pos = nn.Embedding(spec.max_len, spec.width)
        self.blocks = nn.ModuleList(Block(spec.width, spec.heads) for _ in range(spec.layers))
        self.ln = nn.LayerNorm(spec.width)
        self.head = nn.Linear(spec.width, spec.vocab)
        with torch.no_grad():
            for name, p in self.named_parameters():
                if name.endswith("bias") or ".ln" in name or name.startswith("ln"):
                    p.fill_(0.0 if name.endswith("bias") else 1.0)
                else:
                    p.normal_(0.0, 0.02, generator=generator)

    def forward(
        self, tokens: torch.Tensor, cache: list[LayerCache] | None = None
    ) -> tuple[torch.Tensor, list[LayerCache]]:
        """Logits (B, T, vocab) float32 of ``tokens`` (B, T) int64, which follow the
        positions held in ``cache`` (None: they start the sequence), and the cache extended
        by them (one :data:`LayerCache` per block).

        Raises ValueError when the sequence would pass ``spec.max_len`` tokens."""
        start = 0 if cache is None else cache[0][0].shape[2]
        if start + tokens.shape[1] > self.spec.max_len:
            raise ValueError(f"sequence of {start + tokens.shape[1]} tokens > max_len")
        pos = torch.arange(start, start + tokens.shape[1], device=tokens.device)
        x = self.tok(tokens) + self.pos(pos)
        new: list[LayerCache] = []
        for i, block in enumerate(self.blocks):
            x, layer = block(x, None if cache is None else cache[i])
            new.append(layer)
        return self.head(self.ln(x)), new


def build(spec: LMSpec, seed: int, device: torch.device | str = "cpu") -> TinyLM:
    """A :class:`TinyLM` of ``spec`` initialised from a CPU generator seeded with ``seed``
    (the same numbers on every device), on ``device``."""
    return TinyLM(spec, torch.Generator().manual_seed(int(seed))).to(device)


def export(net: TinyLM, version: int) -> Weights:
    """``net`` as :class:`~rl_algos.networks.Weights` (kind :data:`KIND`, numpy copies of its
    state dict on the CPU), after ``version`` updates."""
    state = {k: v.detach().to("cpu", copy=True).numpy() for k, v in net.state_dict().items()}
    return Weights(KIND, vars(net.spec).copy(), state, version)


def load(w: Weights, net: TinyLM | None = None, device: torch.device | str = "cpu") -> TinyLM:
    """Copy ``w`` into ``net`` (made from ``w.spec`` on ``device`` when None); returns it.

    Raises ValueError when ``w`` is not of kind :data:`KIND`."""
    if w.kind != KIND:
        raise ValueError(f"weights of kind {w.kind!r}, not {KIND!r}")
    if net is None:
        net = build(LMSpec(**w.spec), 0, device)
    dev = next(net.parameters()).device
    net.load_state_dict({k: torch.from_numpy(np.asarray(v)).to(dev) for k, v in w.state.items()})
    return net


@dataclass(frozen=True)
class Samples:
    """Completions sampled for a batch of prompts: ``tokens`` (B, n) int64, their
    log-probabilities under the sampling distribution ``logp`` (B, n) float32 (what the
    learner's importance ratio divides by), and the ``logits`` (B, n, vocab) float32 each
    token was drawn from."""

    tokens: np.ndarray
    logp: np.ndarray
    logits: np.ndarray


@torch.no_grad()
def sample(
    net: TinyLM,
    prompts: np.ndarray,
    n: int,
    temperature: float,
    generator: torch.Generator | None,
    use_cache: bool = True,
) -> Samples:
    """Sample ``n`` tokens after each row of ``prompts`` (B, P) int64 from ``net``:
    token t from softmax(logits / ``temperature``), drawn from ``generator`` (on ``net``'s
    device) by the Gumbel-max rule (Gumbel 1954; argmax of logits/T plus Gumbel noise is a
    draw from the softmax), or greedy (argmax) when ``temperature`` is 0. With ``use_cache``
    each step feeds only the new token, attending to the cached keys and values; without, it
    re-runs the whole prefix (the reference the cache is tested against).

    Raises ValueError for a negative temperature or ``generator`` None with temperature > 0.
    """
    if temperature < 0 or (temperature > 0 and generator is None):
        raise ValueError(f"temperature {temperature}: >= 0, and > 0 needs a generator")
    dev = next(net.parameters()).device
    seq = torch.from_numpy(np.ascontiguousarray(prompts, dtype=np.int64)).to(dev)
    logits, cache = net(seq)
    last = logits[:, -1]
    toks, logps, all_logits = [], [], []
    for i in range(n):
        tok, logp = _draw(last, temperature, generator)
        toks.append(tok)
        logps.append(logp)
        all_logits.append(last)
        if i == n - 1:
            break
        seq = torch.cat([seq, tok[:, None]], dim=1)
        if use_cache:
            logits, cache = net(tok[:, None], cache)
        else:
            logits, _ = net(seq)
        last = logits[:, -1]
    return Samples(
        torch.stack(toks, 1).cpu().numpy(),
        torch.stack(logps, 1).float().cpu().numpy(),
        torch.stack(all_logits, 1).float().cpu().numpy(),
    )


def _draw(
    logits: torch.Tensor, temperature: float, generator: torch.Generator | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """One token per row of ``logits`` (B, vocab) and its log-probability under
    softmax(logits / temperature) (greedy: the argmax and its log-probability at T = 1)."""
    logp = torch.log_softmax(logits / (temperature or 1.0), dim=-1)
    if temperature == 0:
        tok = logp.argmax(dim=-1)
    else:
        u = torch.rand(logp.shape, generator=generator, device=logp.device)
        tok = (logp - torch.log(-torch.log(u.clamp_min(1e-20)))).argmax(dim=-1)
    return tok, logp.gather(1, tok[:, None]).squeeze(1)


def sequence_logp(
    net: TinyLM, prompts: torch.Tensor, completions: torch.Tensor, temperature: float = 1.0
) -> torch.Tensor:
    """Log-probabilities (B, n) float32 of ``completions`` (B, n) int64 after ``prompts``
    (B, P) int64 under softmax(logits / ``temperature``) (1 for temperature 0), with the
    graph for gradients (call under ``torch.no_grad()`` for none)."""
    seq = torch.cat([prompts, completions], dim=1)
    logits, _ = net(seq[:, :-1])
    logp = torch.log_softmax(logits[:, prompts.shape[1] - 1 :] / (temperature or 1.0), dim=-1)
    return logp.gather(2, completions[..., None]).squeeze(2)
