"""The programs of lf_src/ give the same port values on 1, 2 and 4 workers, both backends.

(The programs of tests/lf/ are checked the same way by tests/test_lf_programs.py.) Each
program runs at a tiny size (``lfc -D`` defaults below). These programs print measured times
and run directories, so only the exit status and the digest of every port value at every tag
are compared, not stdout. A program of lf_src/ without an entry in ``SMALL`` is skipped with
a message saying so. Programs that import torch (about a second of start-up per process) run
on 2 worker processes and on 2 and 4 worker threads, not on 4 processes, to keep
``make test`` short.
"""

from __future__ import annotations

import importlib.util

import pytest
from conftest import ROOT, VARIANTS, build, has_main, run_digest, same_on_any_workers

LF_SRC = ROOT / "lf_src"
PROGRAMS = sorted(p for p in LF_SRC.rglob("*.lf") if has_main(p))

PIDS = r"\.pid(\[\d+\])?$"  # ports that carry process ids, different by design
#: program (relative to lf_src) -> (lfc -D defines for a tiny run, modules it needs, ports
#: whose values legitimately differ (a regular expression) or None)
SMALL = {
    "bench/PingPong.lf": (["count=200"], (), None),
    "bench/BigBank.lf": (["n=40"], (), None),
    "bench/Broadcast16.lf": (["n=3", "mib=1", "rounds=4"], ("numpy",), PIDS),
    "bench/GymSim.lf": (["n=3", "rounds=20"], ("gymnasium",), PIDS),
    "bench/AtariSim.lf": (["n=2", "rounds=3"], ("ale_py",), PIDS),
    "bench/QLearn.lf": (["n=3", "steps=10", "batch=16", "rounds=4", "seed=2"], ("torch",), PIDS),
    "bench/Junction.lf": (["n=4", "steps=100", "seed=5"], (), PIDS),
    "bench/Speedup.lf": (["rounds=2", "work=20000"], (), None),
    "bench/EnvBank.lf": (["n=5", "rounds=20", "iters=2"], ("numpy",), None),
    "bench/TinyBank.lf": (["n=5", "rounds=50"], (), None),
    "Bandits.lf": (["n=5"], (), None),  # the README's program, with an odd bank of 5
    # no port carries a run's directory: every port value is compared
    "CartPolePPO.lf": (["max_steps=600", "target_return=0.0"], ("torch", "gymnasium"), None),
    "CartPoleDQN.lf": (["max_steps=600", "target_return=0.0"], ("torch", "gymnasium"), None),
    # Acrobot's first episodes end after 500 steps, CartPole's after ~20: the program's wiring
    # is what this compares, on an environment whose episodes end within a tiny run
    "AcrobotPPO.lf": (
        ["max_steps=600", "target_return=0.0", "num_steps=32", "env_id=CartPole-v1"],
        ("torch", "gymnasium"),
        None,
    ),
    "PendulumPPO.lf": (
        ["envs_per_member=2", "num_steps=32", "target_return=-1e5"]
        + ['make_kwargs={= {"max_episode_steps": 25} =}'],
        ("torch", "gymnasium"),
        None,
    ),
    # a 1-layer model; the target is met at the first evaluation (step 0), so the run is
    # one step: prompts, completions, rewards, reference log-probabilities, one update
    "GRPO.lf": (
        ["sft_steps=3", "sft_batch=8", "prompts_per_step=4", "group_size=2", "width=16"]
        + ["heads=2", "layers=1", "target_accuracy=0.0", 'device="cpu"'],
        ("torch",),
        None,
    ),
    # 100 environments: the logger's window of 100 episodes fills at the first episodes' end
    # (tag 25, or 20), after two updates, and the target is met there
    "SpreadMAPPO.lf": (
        ["envs_per_member=50", "num_steps=10", "target_return=-1e5", "checkpoint_every=0"],
        ("torch", "mpe2"),
        None,
    ),
    "JunctionPPO.lf": (
        ["envs_per_member=50", "cars=4", "max_cycles=20", "num_steps=10", "target_return=-1e5"]
        + ["checkpoint_every=0"],
        ("torch", "pettingzoo"),
        None,
    ),
    "PendulumSAC.lf": (
        ["envs_per_member=2", "max_steps=600", "learning_starts=100", "batch_size=32"]
        + ["hidden=[16, 16]", "target_return=-1e5", 'make_kwargs={= {"max_episode_steps": 25} =}'],
        ("torch", "gymnasium"),
        None,
    ),
}
#: RL programs of tests/rl_fixtures/ run several times on each backend (their races are rare)
RL_FIXTURES = ROOT / "tests" / "rl_fixtures"
RL_NEEDS = ("torch", "gymnasium")


@pytest.mark.parametrize("program", PROGRAMS, ids=[str(p.relative_to(LF_SRC)) for p in PROGRAMS])
def test_same_port_values_on_any_workers(program, tmp_path):
    key = str(program.relative_to(LF_SRC))
    if key not in SMALL:
        pytest.skip(f"no tiny configuration for {key} in tests/test_determinism.py SMALL")
    defines, needs, ignore = SMALL[key]
    for module in needs:
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"{module} is not installed")
    launcher = build(program, tmp_path, *[a for d in defines for a in ("-D", d)])
    ref, digest = run_digest(launcher, "w1", "-w", "1", timeout=300)
    assert ref.returncode == 0, f"{key} exited {ref.returncode}\n{ref.stderr[-3000:]}"
    assert digest, f"{key} computed no port value"
    # a program that imports torch: one run per backend (each run pays torch's import)
    torch_variants = [("2", "processes"), ("4", "threads")]
    variants = torch_variants if "torch" in needs else VARIANTS
    same_on_any_workers(
        launcher,
        ref,
        digest,
        None,
        compare_stdout=False,
        timeout=300,
        ignore=ignore,
        variants=variants,
    )


def skip_without(modules) -> None:
    for module in modules:
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"{module} is not installed")


@pytest.mark.parametrize("backend,runs", [("threads", 2), ("processes", 1)])
def test_two_learners_give_the_same_port_values_every_run(backend, runs, tmp_path):
    """Two PPO agents from the lib reactors, learners on two workers: on threads both build
    their networks at once, which must not mix their random streams (exact digest equality
    with the one-worker run, several runs)."""
    skip_without(RL_NEEDS)
    launcher = build(RL_FIXTURES / "TwoAgentsPPO.lf", tmp_path)
    ref, digest = run_digest(launcher, "w1", "-w", "1", timeout=300)
    assert ref.returncode == 0, ref.stderr[-3000:]
    assert digest
    for i in range(runs):
        r, d = run_digest(launcher, f"{backend}{i}", "-w", "2", "--backend", backend, timeout=300)
        assert r.returncode == 0, r.stderr[-3000:]
        assert d == digest, f"run {i} on 2 workers ({backend}) computed other port values"
