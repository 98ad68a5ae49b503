"""Weights that stay on the learner's device: from a learner to a policy on the same GPU
without a round trip through host memory.

:class:`~rl_algos.networks.Weights` holds CPU numpy arrays, so a learner on a GPU copies its
parameters to the host after every update and a policy acting on the GPU copies them back.
:class:`DeviceWeights` holds device copies instead (``tensors``): a policy in the same
process (one worker, or the threads backend: port values there are passed by reference) on
the same device copies them into its network device to device (:func:`load_device_weights`).
Its numpy ``state`` is made only when read (a policy acting in numpy or on another device,
``model.pt``), and when it is pickled (to a policy in a worker process, into a snapshot) it
travels as plain Weights: CUDA tensors do not cross processes through our transports.
"""

from __future__ import annotations

from typing import Any, cast

import torch
from torch import nn

from .networks import Weights, kind_of


class DeviceWeights(Weights):
    """:class:`~rl_algos.networks.Weights` whose state is ``tensors``: detached clones of the
    network's state dict on its device (``device``). Reading ``state`` copies them to numpy
    once (then cached); pickling gives a plain Weights."""

    tensors: dict[str, torch.Tensor]
    device: torch.device

    def __getattr__(self, name: str) -> Any:
        # only for attributes not set: ``state`` until it is first read
        if name != "state" or "tensors" not in self.__dict__:
            raise AttributeError(name)
        state = {k: v.to("cpu", copy=True).numpy() for k, v in self.tensors.items()}
        self.__dict__["state"] = state
        return state

    def __reduce__(self) -> tuple:
        return (Weights, (self.kind, self.spec, self.state, self.version))


def export_device_weights(net: nn.Module, version: int = 0) -> DeviceWeights:
    """``net`` (any device) as :class:`DeviceWeights`: clones of its parameters and buffers
    on its device (a device-to-device copy), its ``spec`` and kind, and ``version`` (the
    learner's update count). No copy to the host is made."""
    tensors = {k: v.detach().clone() for k, v in net.state_dict().items()}
    w = DeviceWeights.__new__(DeviceWeights)
    spec = cast(dict, net.spec)  # set by every class of KINDS
    fields = {"kind": kind_of(net), "spec": dict(spec), "version": version}
    fields.update(tensors=tensors, device=next(iter(tensors.values())).device)
    w.__dict__.update(fields)  # Weights is frozen: no attribute assignment
    return w


def load_device_weights(w: Weights, net: nn.Module | None) -> bool:
    """Copy ``w``'s device tensors into ``net`` when ``w`` is :class:`DeviceWeights` of
    ``net``'s kind on ``net``'s device; True when done, False when the caller must load
    ``w`` another way (:func:`~rl_algos.networks.load_weights`). Raises RuntimeError when
    the shapes do not match ``net``."""
    if not isinstance(w, DeviceWeights) or net is None or kind_of(net) != w.kind:
        return False
    if next(net.parameters()).device != w.device:
        return False
    with torch.no_grad():
        net.load_state_dict(w.tensors)
    return True
