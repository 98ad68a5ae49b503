"""Per-reactor generators (rl_algos.seeding) and the one-transfer batch move (rl_algos.device)."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys

import numpy as np
import torch

from rl_algos.device import batch_to_device, choose_device
from rl_algos.networks import ActorCritic, export_weights, load_weights
from rl_algos.seeding import derive_int, name_words, reactor_rng, seed_sequence, torch_seeded


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


def test_torch_seeded_networks_are_identical_and_restore_the_global_generator():
    before = torch.random.get_rng_state()
    with torch_seeded(5):
        a = ActorCritic((4,), 2)
    with torch_seeded(5):
        b = ActorCritic((4,), 2)
    assert torch.equal(torch.random.get_rng_state(), before)
    for x, y in zip(a.state_dict().values(), b.state_dict().values()):
        assert torch.equal(x, y)
    w = export_weights(a, "actor_critic", 3)
    c = load_weights(w)
    obs = torch.ones(2, 4)
    assert torch.equal(a(obs)[0], c(obs)[0]) and w.version == 3


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
