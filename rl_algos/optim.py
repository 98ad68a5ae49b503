"""Adam and the gradient-norm clip, computed as ``torch.optim.Adam(fused=True)`` and
``torch.nn.utils.clip_grad_norm_(foreach=True)`` compute them, with less around the kernels.

Adam is the rule of Kingma and Ba (2015), "Adam: A Method for Stochastic Optimization", ICLR,
in PyTorch's formulation (bias corrections folded into the step size and the denominator); the
arithmetic is torch's own fused kernel (``torch._fused_adam_``, one call per step for all
parameters), so the numbers are bit for bit those of ``torch.optim.Adam(..., fused=True)``.
What is left out is ``torch.optim``'s machinery: building an optimiser there imports
``torch._dynamo`` (about 0.7 s of a learner's start-up on this machine, more than CartPole's
first 3,000 training steps), and every step passes hooks, profiling and grouping by device
that a learner with one parameter group on one device does not need. Likewise the clip is the
global L2 norm rule of Pascanu, Mikolov and Bengio (2013), "On the difficulty of training
recurrent neural networks", ICML, as the same four torch calls that ``clip_grad_norm_``
makes, without its per-call grouping of the gradients by device and dtype.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch


class Adam:
    """Adam over ``params`` (tensors with ``requires_grad``, all of one dtype on one
    device) with learning rate ``lr`` (settable between steps, e.g. annealed), ``betas`` and
    ``eps``; no weight decay, no AMSGrad.

    As in ``torch.optim.Adam``, a parameter's moments (``exp_avg``, ``exp_avg_sq``: zeros
    like it) and its step count (a float32 scalar tensor on its device) start with the first
    step at which it has a gradient, and a step skips the parameters without one.

    Raises:
        ValueError: no parameters, or a negative ``lr``/``eps`` or a beta outside [0, 1).
    """

    def __init__(
        self,
        params: Iterable[torch.Tensor],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
    ) -> None:
        self.params = list(params)
        if not self.params:
            raise ValueError("Adam got an empty parameter list")
        if lr < 0 or eps < 0 or not all(0.0 <= b < 1.0 for b in betas):
            raise ValueError(f"Adam: invalid lr {lr}, betas {betas} or eps {eps}")
        self.lr = float(lr)
        self.betas = (float(betas[0]), float(betas[1]))
        self.eps = float(eps)
        #: per parameter (same order): (exp_avg, exp_avg_sq, step), None before its first step
        self.state: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None] = [
            None for _ in self.params
        ]

    def zero_grad(self) -> None:
        """Drop every parameter's gradient (``grad = None``, as ``set_to_none=True``)."""
        for p in self.params:
            p.grad = None

    @torch.no_grad()
    def step(self) -> None:
        """One Adam step of every parameter that has a gradient.

        The parameters that start together share one step-count tensor, incremented once per
        step (one small op instead of one per parameter; the counts are the same numbers); a
        parameter that skips a step while others sharing its count go on gets a count of its
        own first."""
        with_grad = [p.grad is not None for p in self.params]
        idle = {id(s[2]) for s, g in zip(self.state, with_grad) if s is not None and not g}
        own: dict[int, torch.Tensor] = {}  # shared count -> the copy the stepping ones take
        fresh: torch.Tensor | None = None  # the count of the parameters starting now
        params, grads, avgs, sqs, steps = [], [], [], [], []
        for i, p in enumerate(self.params):
            g = p.grad
            if g is None:
                continue
            s = self.state[i]
            if s is None:
                if fresh is None:
                    fresh = torch.zeros((), dtype=torch.float32, device=p.device)
                s = self.state[i] = (
                    torch.zeros_like(p, memory_format=torch.preserve_format),
                    torch.zeros_like(p, memory_format=torch.preserve_format),
                    fresh,
                )
            elif id(s[2]) in idle:
                if id(s[2]) not in own:
                    own[id(s[2])] = s[2].clone()
                s = self.state[i] = (s[0], s[1], own[id(s[2])])
            params.append(p)
            grads.append(g)
            avgs.append(s[0])
            sqs.append(s[1])
            steps.append(s[2])
        if not params:
            return
        for count in {id(t): t for t in steps}.values():
            count.add_(1)
        torch._fused_adam_(
            params,
            grads,
            avgs,
            sqs,
            [],
            steps,
            amsgrad=False,
            lr=self.lr,
            beta1=self.betas[0],
            beta2=self.betas[1],
            weight_decay=0.0,
            eps=self.eps,
            maximize=False,
            grad_scale=None,
            found_inf=None,
        )


@torch.no_grad()
def clip_grad_norm(params: Iterable[torch.Tensor], max_norm: float) -> torch.Tensor:
    """Scale the gradients of ``params`` (those that have one, all on one device) in place so
    that their global L2 norm is at most ``max_norm``: each is multiplied by
    ``min(max_norm / (norm + 1e-6), 1)``. Returns the norm before clipping (a float32 scalar
    tensor; zero when no parameter has a gradient)."""
    grads = [p.grad for p in params if p.grad is not None]
    if not grads:
        return torch.tensor(0.0)
    total = torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads, 2.0)), 2.0)
    torch._foreach_mul_(grads, torch.clamp(float(max_norm) / (total + 1e-6), max=1.0))
    return total
