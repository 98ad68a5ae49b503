"""Per-reactor generators (rl_algos.seeding) and the one-transfer batch move (rl_algos.device)."""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys

import numpy as np
import pytest
import torch

from rl_algos.device import batch_to_device, choose_device
from rl_algos.networks import ActorCritic, QNetwork, export_weights, load_weights
from rl_algos.seeding import (
    derive_int,
    instance_path,
    name_words,
    reactor_rng,
    seed_sequence,
    torch_generator,
)


def test_name_words_are_the_sha256_digest():
    digest = hashlib.sha256(b"Main.envs[1]").digest()
    assert name_words("Main.envs[1]")[0] == int.from_bytes(digest[:4], "little")
    assert len(name_words("x")) == 8


def test_streams_depend_on_seed_and_name_only():
    a = reactor_rng(1, "Main.envs[0]").random(4)
    assert np.array_equal(a, reactor_rng(1, "Main.envs[0]").random(4))
    assert not np.array_equal(a, reactor_rng(1, "Main.envs[1]").random(4))
    assert not np.array_equal(a, reactor_rng(2, "Main.envs[0]").random(4))


def test_streams_do_not_depend_on_the_process():
    code = (
        "from rl_algos.seeding import reactor_rng; print(reactor_rng(3, 'M.p').integers(1 << 30))"
    )
    outs = {
        subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            env=dict(os.environ, PYTHONHASHSEED=h),
            check=True,
        ).stdout
        for h in ("0", "1", "random")
    }
    assert outs == {f"{reactor_rng(3, 'M.p').integers(1 << 30)}\n"}


def test_derived_seeds_differ_by_purpose_and_leave_the_generator_alone():
    ss = seed_sequence(1, "Main.learner")
    assert derive_int(ss, "torch") == derive_int(ss, "torch") != derive_int(ss, "env")
    assert 0 <= derive_int(ss, "torch") < 2**63


def test_streams_depend_on_the_path_below_the_main_reactor_only():
    assert instance_path("Main.envs[1]") == "envs[1]"
    assert instance_path("Main.agent.learner") == "agent.learner"
    assert instance_path("Main") == ""
    a = reactor_rng(1, "CartPolePPO.envs[0]").random(4)
    assert np.array_equal(a, reactor_rng(1, "Renamed.envs[0]").random(4))


def test_networks_draw_from_their_generator_only():
    before = torch.random.get_rng_state()
    a = ActorCritic((4,), 2, generator=torch_generator(5))
    b = ActorCritic((4,), 2, generator=torch_generator(5))
    c = ActorCritic((4,), 2, generator=torch_generator(6))
    q1 = QNetwork((4, 84, 84), 3, generator=torch_generator(5))
    q2 = QNetwork((4, 84, 84), 3, generator=torch_generator(5))
    assert torch.equal(torch.random.get_rng_state(), before)  # the process-wide one is untouched
    for x, y in zip(a.state_dict().values(), b.state_dict().values()):
        assert torch.equal(x, y)
    for x, y in zip(q1.state_dict().values(), q2.state_dict().values()):
        assert torch.equal(x, y)
    assert not torch.equal(a.actor[0].weight, c.actor[0].weight)
    w = export_weights(a, "actor_critic", 3)
    d = load_weights(w)
    obs = torch.ones(2, 4)
    assert torch.equal(a(obs)[0], d(obs)[0]) and w.version == 3


def test_networks_built_at_once_in_threads_match_those_built_alone():
    import threading

    alone = [ActorCritic((4,), 2, (256, 256), generator=torch_generator(s)) for s in range(4)]
    built: dict[int, ActorCritic] = {}

    def make(seed: int) -> None:
        for _ in range(5):
            built[seed] = ActorCritic((4,), 2, (256, 256), generator=torch_generator(seed))

    threads = [threading.Thread(target=make, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for s, net in enumerate(alone):
        for x, y in zip(net.state_dict().values(), built[s].state_dict().values()):
            assert torch.equal(x, y)


def test_batch_to_device_is_bit_exact_and_keeps_dtypes():
    arrays = {
        "obs": np.arange(12, dtype=np.uint8).reshape(3, 4),
        "actions": np.array([2, 0, 1]),
        "rewards": np.array([0.5, -1, 1e-8], np.float32),
        "dones": np.array([True, False, True]),
    }
    out = batch_to_device(arrays, choose_device("cpu"))
    for k, a in arrays.items():
        assert out[k].shape == a.shape
        np.testing.assert_array_equal(out[k].numpy(), a)
    assert out["actions"].dtype == torch.int64 and out["obs"].dtype == torch.uint8


@pytest.mark.parametrize("name", ["gpu", "cuda:x", "cuda:99", "CPU"])
def test_an_unknown_or_missing_device_is_refused_with_its_name(name):
    with pytest.raises(ValueError, match=f"device '{re.escape(name)}'"):
        choose_device(name)
