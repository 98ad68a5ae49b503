"""GRPO on reactors (lf_src/GRPO.lf, rl_algos/grpo*.py, rl_algos/tiny_lm.py): the task and its
verifier, the key/value cache, the GRPO loss against a direct computation, and the program's
two layouts on one and two workers."""

from __future__ import annotations

import json
import math
import shutil

import numpy as np
import pytest
from conftest import ROOT, build, run_in_folder

torch = pytest.importorskip("torch")

from rl_algos import grpo_task, tiny_lm  # noqa: E402
from rl_algos.grpo import group_advantages, grpo_loss  # noqa: E402

GRPO_LF = ROOT / "lf_src" / "GRPO.lf"
#: a tiny run: a 1-layer model, 4 prompts of 2 completions per step, 4 steps, never solved
TINY = (
    "--max_updates 4 --eval_every 2 --sft_steps 3 --sft_batch 8 --prompts_per_step 4 "
    "--group_size 2 --width 16 --heads 2 --layers 1 --target_accuracy 1.5 --device cpu"
).split()


def test_addition_and_sort_problems_and_their_answers():
    add = grpo_task.Task("addition", 2)
    prompts, answers = add.encode(np.array([1234, 9999]))
    assert [grpo_task.render(add, p) for p in prompts] == ["12+34=", "99+99="]
    assert [grpo_task.render(add, a) for a in answers] == ["640", "891"]  # 46 and 198 reversed
    srt = grpo_task.Task("sort", 5)
    prompts, answers = srt.encode(np.array([31415]))
    assert grpo_task.render(srt, prompts[0]) == "31415>"
    assert grpo_task.render(srt, answers[0]) == "11345"


def test_training_problems_never_come_from_the_held_out_set():
    task = grpo_task.Task("sort", 4)
    held = grpo_task.eval_indices(task)
    train = grpo_task.train_indices(task, np.random.default_rng(0), 5000)
    assert len(held) == grpo_task.EVAL_SIZE and grpo_task.held_out(held).all()
    assert not np.intersect1d(held, train).size and not grpo_task.held_out(train).any()
    assert 0.08 < grpo_task.held_out(np.arange(task.size)).mean() < 0.12  # about a tenth


def test_verifier_rewards_exact_answers_and_documented_partial_credit():
    answers = np.array([[1, 2, 3], [1, 2, 3], [1, 2, 3]])
    completions = np.array([[1, 2, 3], [1, 0, 3], [0, 0, 0]])
    assert grpo_task.rewards(completions, answers).tolist() == [1.0, 0.0, 0.0]
    partial = grpo_task.rewards(completions, answers, partial=0.5)
    assert partial.tolist() == pytest.approx([1.0, 0.5 * 2 / 3, 0.0])
    with pytest.raises(ValueError, match="differ"):
        grpo_task.rewards(completions[:, :2], answers)


def test_sampling_with_the_cache_equals_sampling_without_it():
    net = tiny_lm.build(tiny_lm.LMSpec(vocab=13, max_len=12, width=32, layers=2, heads=4), 7)
    prompts = np.random.default_rng(1).integers(0, 13, size=(6, 6))
    draws = []
    for use_cache in (True, False):
        gen = torch.Generator().manual_seed(3)
        draws.append(tiny_lm.sample(net, prompts, 6, 1.0, gen, use_cache=use_cache))
    cached, full = draws
    assert np.array_equal(cached.tokens, full.tokens)
    np.testing.assert_allclose(cached.logits, full.logits, rtol=0, atol=1e-5)
    np.testing.assert_allclose(cached.logp, full.logp, rtol=0, atol=1e-5)
    # the sampling log-probabilities are those a forward pass over the whole sequence gives
    again = tiny_lm.sequence_logp(net, torch.from_numpy(prompts), torch.from_numpy(cached.tokens))
    np.testing.assert_allclose(again.detach().numpy(), cached.logp, rtol=0, atol=1e-5)


def test_grpo_loss_on_a_hand_made_batch():
    # two groups of two completions of two tokens
    rewards = torch.tensor([1.0, 0.0, 0.5, 0.5])
    adv = group_advantages(rewards, 2, eps=1e-4)
    # group 1: mean 0.5, population std 0.5; group 2: all equal, no advantage
    assert adv.tolist() == pytest.approx([0.5 / 0.5001, -0.5 / 0.5001, 0.0, 0.0], abs=1e-6)
    logp = torch.log(torch.tensor([[0.5, 0.4], [0.2, 0.9], [0.3, 0.3], [0.6, 0.1]]))
    behaviour = torch.log(torch.tensor([[0.4, 0.4], [0.3, 0.5], [0.3, 0.2], [0.6, 0.1]]))
    ref = torch.log(torch.tensor([[0.5, 0.2], [0.2, 0.6], [0.1, 0.3], [0.3, 0.1]]))
    loss, stats = grpo_loss(logp, behaviour, ref, adv, clip_coef=0.2, kl_coef=0.1)
    # directly, token by token (DeepSeekMath eq. 3 and 4)
    p, mu, r = logp.exp().tolist(), behaviour.exp().tolist(), ref.exp().tolist()
    total, kls, clipped = 0.0, 0.0, 0
    for i in range(4):
        for t in range(2):
            rho = p[i][t] / mu[i][t]
            a = float(adv[i])
            surrogate = min(rho * a, min(max(rho, 0.8), 1.2) * a)
            kl = r[i][t] / p[i][t] - math.log(r[i][t] / p[i][t]) - 1
            total += surrogate - 0.1 * kl
            kls += kl
            clipped += abs(rho - 1) > 0.2
    assert float(loss) == pytest.approx(-total / 8, rel=1e-5)
    assert float(stats["kl"]) == pytest.approx(kls / 8, rel=1e-5)
    assert float(stats["clipfrac"]) == clipped / 8 == 4 / 8  # 1.25, 0.67, 1.8 and 1.5


@pytest.fixture(scope="module")
def grpo_program(tmp_path_factory):
    return build(GRPO_LF, tmp_path_factory.mktemp("grpo"))


@pytest.mark.parametrize("staleness", [0, 1])
def test_each_layout_gives_the_same_files_on_one_and_two_workers(grpo_program, tmp_path, staleness):
    files = []
    for workers in ("1", "2"):
        args = [*TINY, "--staleness", str(staleness), "-w", workers]
        proc, run = run_in_folder(grpo_program, tmp_path / f"w{workers}", *args, timeout=120)
        assert proc.returncode == 1, proc.stderr[-3000:]
        assert "stopped at its step budget (max_updates)" in proc.stderr
        files.append({n: (run / n).read_text() for n in ("accuracy.csv", "losses.csv")})
        assert json.loads((run / "config.json").read_text())
        assert any(run.glob("events.out.tfevents.*")) and (run / "model.pt").exists()
    assert files[0] == files[1]
    rows = [line.split(",") for line in files[0]["accuracy.csv"].splitlines()[1:]]
    # step, weights' updates: synchronous, step i samples after update i-1; asynchronous, i-2
    assert [(int(s), int(u)) for s, u, _ in rows] == (
        [(0, 0), (2, 2), (4, 4)] if staleness == 0 else [(0, 0), (2, 1), (4, 3)]
    )
    updates = [line for line in files[0]["losses.csv"].splitlines() if "policy_loss" in line]
    assert len(updates) == 5  # steps 0-4 each give one update (the last joined at shutdown)


@pytest.mark.parametrize(
    "args,message",
    [
        (["--staleness", "2"], "staleness = 2: 0 (synchronous) or 1 (asynchronous)"),
        (["--group_size", "1"], "group_size = 1: an integer >= 2"),
        (["--task", "multiply"], "task 'multiply': one of addition, sort"),
        (["--kl_coef", "high"], "kl_coef"),
    ],
)
def test_bad_parameters_are_refused_at_start_in_one_line(grpo_program, tmp_path, args, message):
    proc = subprocess_run(grpo_program, tmp_path, *args)
    assert proc.returncode != 0
    assert message in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").rglob("model.pt"))


def subprocess_run(launcher, cwd, *args):
    import subprocess

    return subprocess.run(
        [str(launcher), *args], cwd=cwd, capture_output=True, text=True, timeout=60
    )


def test_trace_shows_background_updates_overlapping_generation(tmp_path):
    (tmp_path / "src" / "lib").mkdir(parents=True)
    shutil.copy(ROOT / "lf_src" / "lib" / "GRPO.lf", tmp_path / "src" / "lib" / "GRPO.lf")
    text = GRPO_LF.read_text().replace("{ fast: true }", "{ fast: true, tracing: true }")
    (tmp_path / "src" / "GRPO.lf").write_text(text)
    launcher = build(tmp_path / "src" / "GRPO.lf", tmp_path / "out")
    # The layout lets them overlap; whether they do in wall-clock time is the OS's choice: a
    # machine busy with other tests may run the update only after the generators, so a run
    # that shows no overlap is tried again (up to three runs).
    for attempt in range(3):
        cwd = tmp_path / f"run{attempt}"
        proc, _ = run_in_folder(
            launcher, cwd, *TINY, "--max_updates", "6", "--staleness", "1", timeout=120
        )
        assert proc.returncode == 1, proc.stderr[-3000:]
        events = json.loads((cwd / "GRPO.trace.json").read_text())["traceEvents"]
        updates = [e for e in events if "GRPO update" in e.get("name", "")]
        generation = [e for e in events if "generation" in e.get("name", "") and e.get("tid") == 0]
        assert len(updates) == 7 and {e["tid"] for e in updates} == {1}, updates
        overlaps = [
            (u, g)
            for u in updates
            for g in generation
            if g["ts"] < u["ts"] + u["dur"] and u["ts"] < g["ts"] + g["dur"]
        ]
        if overlaps:
            return
    raise AssertionError("no background update overlapped a generator's reaction in 3 runs")


def test_diagram_reads_as_the_post_training_dataflow(grpo_program, tmp_path):
    """generation -> reward / reference -> training -> weights back to generation, and the
    page lays out with ELK (as tests/test_viewer.py checks the viewer's own programs)."""
    import subprocess

    from test_viewer import LAYOUT_JS

    from codegen.viewer import Diagram, render
    from reactors.model.program import Program

    graph = Program.load(str(grpo_program.parent.parent / "src-gen" / "GRPO" / "graph.json"))
    root = Diagram(graph).to_dict()["root"]
    inst = {c["id"]: c["inst"] for c in root["children"] if c["kind"] == "reactor"}

    def end(ref):
        box, port = ref.split(":")
        return f"{inst[box]}.{port}"

    edges = {(end(e["src"]), end(e["dst"])) for e in root["edges"] if e["kind"] == "conn"}
    assert edges == {
        ("source.prompts", "generation.prompts"),
        ("source.answers", "reward.answers"),
        ("generation.completions", "reward.completions"),
        ("generation.completions", "reference.completions"),
        ("generation.completions", "training.completions"),
        ("reward.scores", "training.scores"),
        ("reward.scores", "logger.scores"),
        ("reference.ref_logp", "training.ref_logp"),
        ("training.reference", "reference.weights"),
        ("training.weights", "generation.weights"),
    }
    if shutil.which("node") is None:
        pytest.skip("node is not installed: the layout is not checked")
    (tmp_path / "layout.js").write_text(LAYOUT_JS)
    (tmp_path / "GRPO.html").write_text(render(graph))
    r = subprocess.run(
        ["node", str(tmp_path / "layout.js"), str(tmp_path / "GRPO.html"), "#expanded"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["edges"] >= 10


def test_resumed_async_run_ends_as_the_uninterrupted_one(grpo_program, tmp_path):
    """A snapshot taken while an update is in flight (staleness 1) waits for it: resumed
    from the first snapshot, the run rewrites the same losses.csv and accuracy.csv."""
    args = [*TINY, "--staleness", "1", "--checkpoint-every-tags", "3"]
    proc, run = run_in_folder(grpo_program, tmp_path / "run", *args, timeout=120)
    assert proc.returncode == 1, proc.stderr[-3000:]
    whole = {n: (run / n).read_text() for n in ("accuracy.csv", "losses.csv")}
    snaps = sorted((tmp_path / "run" / "checkpoints").glob("*.lfsnap"))
    assert snaps, "no snapshot taken"
    again = subprocess_run(grpo_program, tmp_path / "run", "--resume", str(snaps[0]))
    assert again.returncode == 1, again.stderr[-3000:]
    assert {n: (run / n).read_text() for n in whole} == whole
