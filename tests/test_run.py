"""`torchlint run`: static findings checked on a real run of the user's script (torchlint.verify.monitor).

Every fixture's bad.py is run under the monitor in one process (torch started once): its finding must be
confirmed by what the run showed, and no fixed.py may show anything. The command itself is run end to end on
scripts with argparse, `if __name__ == "__main__":`, DataLoader workers, a helper module, and a crash.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from tests.conftest import ROOT
from torchlint.project import Project
from torchlint.engine import lint_source

SCENARIOS = sorted(p for p in (ROOT / "fixtures").glob("TL*/*") if (p / "bad.py").is_file())


@pytest.fixture(scope="module")
def records(device):
    from torchlint.verify.monitor import run_many

    scripts = [s / name for s in SCENARIOS for name in ("bad.py", "fixed.py", "reference.py")]
    return dict(zip(map(str, scripts), run_many(scripts, 8, device)))


def _combined(records, scenario: Path, name: str):
    from torchlint.run_command import combine

    script = scenario / name
    static = lint_source(script.read_text(encoding="utf-8"), str(script), project=Project(scenario))
    return combine(static, records[str(script)], script)


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[f"{p.parent.name}/{p.name}" for p in SCENARIOS])
def test_bad_script_finding_is_confirmed_at_runtime(records, scenario):
    code = scenario.parent.name
    found = _combined(records, scenario, "bad.py")
    statuses = {d.runtime for d in found if d.code == code}
    assert statuses == {"confirmed"}, [(d.code, d.line, d.runtime, d.message[:80]) for d in found]


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[f"{p.parent.name}/{p.name}" for p in SCENARIOS])
def test_fixed_and_reference_scripts_show_nothing_at_runtime(records, scenario):
    for name in ("fixed.py", "reference.py"):
        found = _combined(records, scenario, name)
        assert found == [], (name, [(d.code, d.line, d.runtime, d.message[:80]) for d in found])
        assert records[str(scenario / name)]["error"] is None


# -- the command, end to end -------------------------------------------------------------------------------------
TRAIN = textwrap.dedent(
    """\
    import argparse

    import torch
    import torch.nn.functional as F
    from torch.utils.data import DataLoader, TensorDataset


    def main():
        parser = argparse.ArgumentParser()
        parser.add_argument("--lr", type=float, required=True)
        parser.add_argument("--workers", type=int, default=0)
        args = parser.parse_args()
        model = torch.nn.Linear(4, 1)
        optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)
        device = model.weight.device  # where the run put it (--device); the workers' data stays on the CPU
        data = TensorDataset(torch.randn(64, 4, device="cpu"), torch.randn(64, 1, device="cpu"))
        loader = DataLoader(data, batch_size=8, num_workers=args.workers)
        for epoch in range(100):
            for x, y in loader:
                loss = F.mse_loss(model(x.to(device)), y.to(device))
                loss.backward()
                optimizer.step()


    if __name__ == "__main__":
        main()
    """
)


def test_run_confirms_with_argparse_main_and_dataloader_workers(tmp_path, run_cli, device):
    (tmp_path / "train.py").write_text(TRAIN)
    r = run_cli("run", "--steps", "5", "--format", "json", "train.py", "--lr", "0.1", "--workers", "2",
                cwd=tmp_path)
    assert r.returncode == 1, r.stderr
    items = json.loads(r.stdout)
    assert [(i["code"], i["line"], i["runtime"]) for i in items] == [("TL004", 22, "confirmed")]
    assert "Ran train.py for 5 optimizer steps" in r.stderr  # stopped after 5 of 800 steps


def test_run_reports_what_only_the_run_saw(tmp_path, run_cli, device):
    """A helper whose step the analysis cannot see statically (the script hides it behind getattr): the run
    still sees the stale gradient, at the script's own line."""
    (tmp_path / "hidden.py").write_text(textwrap.dedent(
        """\
        import torch
        model = torch.nn.Linear(3, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        apply = getattr(opt, "st" + "ep")
        for _ in range(10):
            model(torch.randn(2, 3)).sum().backward()
            apply()
        """
    ))
    r = run_cli("run", "--steps", "4", "hidden.py", cwd=tmp_path)
    assert r.returncode == 1, r.stderr
    assert r.stdout.startswith("hidden.py:7:1: TL004 [runtime only]"), r.stdout


def test_run_sarif_carries_the_runtime_status(tmp_path, run_cli, device):
    (tmp_path / "train.py").write_text(TRAIN)
    r = run_cli("run", "--steps", "3", "--format", "sarif", "train.py", "--lr", "0.1", cwd=tmp_path)
    results = json.loads(r.stdout)["runs"][0]["results"]
    assert [(x["ruleId"], x["properties"]["runtime"]) for x in results] == [("TL004", "confirmed")]


def test_script_that_fails_before_its_first_step(tmp_path, run_cli, device):
    (tmp_path / "broken.py").write_text("import torch\nmodel = torch.nn.Linear(3, 1)\nraise ValueError('no data')\n")
    r = run_cli("run", "broken.py", cwd=tmp_path)
    assert r.returncode == 2
    assert "failed before its first optimizer step" in r.stderr and "ValueError: no data" in r.stderr
    assert r.stdout == ""


def test_run_never_writes_the_script(tmp_path, run_cli, device):
    script = tmp_path / "train.py"
    script.write_text(TRAIN)
    before = script.stat().st_mtime_ns
    run_cli("run", "--steps", "2", "train.py", "--lr", "0.1", cwd=tmp_path)
    assert script.read_text() == TRAIN and script.stat().st_mtime_ns == before


# -- signs the monitor reads from values: a cut term (TL003) and an unscaled window (TL005) ------------------------
HEAD = "import torch\nimport torch.nn.functional as F\ntorch.manual_seed(0)\nmodel = torch.nn.Linear(3, 1)\n"
WINDOW = HEAD + textwrap.dedent(
    """\
    opt = {optimizer}
    apply = getattr(opt, "st" + "ep")  # the analysis cannot see this step: what the run sees is all there is
    for i in range(40):
        x, y = torch.randn(4, 3), torch.randn(4, 1)
        loss = F.mse_loss(model(x), y){scaled}
        loss.backward()
        {between}
        if (i + 1) % 4 == 0:
            {before_step}
            apply()
            opt.zero_grad()
    """
)
SGD = "torch.optim.SGD(model.parameters(), lr=0.01)"
ADAM = "torch.optim.Adam(model.parameters(), lr=0.01)"
# name -> (script, the observations expected: (code, line of the innermost frame, static_only))
SIGNS = {
    "window_sgd": (WINDOW.format(optimizer=SGD, scaled="", between="", before_step="pass"), [("TL005", 10, False)]),
    "window_divided": (WINDOW.format(optimizer=SGD, scaled=" / 4", between="", before_step="pass"), []),
    "window_multiplied": (WINDOW.format(optimizer=SGD, scaled=" * 0.25", between="", before_step="pass"), []),
    "window_adam": (WINDOW.format(optimizer=ADAM, scaled="", between="", before_step="pass"), []),
    "window_adam_clipped": (WINDOW.format(optimizer=ADAM, scaled="", between="", before_step=(
        "torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)")), [("TL005", 10, False)]),
    "window_adam_coupled_decay": (WINDOW.format(optimizer=ADAM[:-1] + ", weight_decay=0.1)", scaled="",
                                                between="", before_step="pass"), [("TL005", 10, False)]),
    "window_rescaled_by_hand": (WINDOW.format(optimizer=SGD, scaled="", between="", before_step=(
        "[p.grad.div_(4) for p in model.parameters()]")), []),
    # the loss logged after its backward: a cut of a tensor already back-propagated is no sign
    "window_logged": (WINDOW.format(optimizer=SGD, scaled=" / 4", between="total = loss.item()",
                                    before_step="pass"), []),
    "two_terms_two_lines": (HEAD + textwrap.dedent(
        """\
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        for _ in range(10):
            x = torch.randn(4, 3)
            real = model(x).mean()
            fake = -model(torch.randn(4, 3)).mean()
            real.backward()
            fake.backward()
            opt.step()
            opt.zero_grad()
        """), []),
    "scaler_window": (HEAD + textwrap.dedent(
        """\
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        scaler = torch.amp.GradScaler(torch.get_default_device().type)
        for i in range(40):
            loss = model(torch.randn(4, 3)).pow(2).mean()
            scaler.scale(loss{scaled}).backward()
            if i % 2:
                scaler.step(opt)
                scaler.update()
                opt.zero_grad()
        """).replace("{scaled}", ""), [("TL005", 9, False)]),
    "cut_term": (HEAD + textwrap.dedent(
        """\
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        for _ in range(10):
            x = torch.randn(4, 3)
            main = model(x).pow(2).mean()
            reg = model.weight.abs().sum()
            loss = main + float(reg) + main.detach().clamp(max=1)
            loss.backward()
            print(reg.item(), loss.item())
            opt.step()
            opt.zero_grad()
        """), [("TL003", 10, True)]),
    # one loss per output head of one forward, each back-propagated from one line (from a user's article among the
    # seeds): the heads share the graph (retain_graph=True but on the last), their sum is meant, not micro-batches
    "heads_of_one_forward": (HEAD + textwrap.dedent(
        """\
        heads = torch.nn.ModuleList(torch.nn.Linear(1, 1) for _ in range(3))
        opt = torch.optim.SGD([*model.parameters(), *heads.parameters()], lr=0.01)
        for _ in range(10):
            x, y = torch.randn(4, 3), torch.randn(4, 1)
            features = model(x)
            output = [head(features) for head in heads]
            opt.zero_grad()
            for j in range(len(output)):
                loss = F.mse_loss(output[j], y)
                loss.backward(retain_graph=j < len(output) - 1)
            opt.step()
        """), []),
    # LBFGS evaluates its closure (one loss, one backward line) several times inside one step: no window
    "lbfgs_closure": (HEAD + textwrap.dedent(
        """\
        opt = torch.optim.LBFGS(model.parameters(), lr=0.1, max_iter=4)
        x, y = torch.randn(8, 3), torch.randn(8, 1)

        def closure():
            opt.zero_grad()
            loss = F.mse_loss(model(x), y)
            loss.backward()
            return loss


        for _ in range(5):
            opt.step(closure)
        """), []),
    # the graph kept by the first optimizer's last backward is back-propagated by the next one: retain was needed
    "retain_needed_across_steps": (HEAD + textwrap.dedent(
        """\
        head_a, head_b = torch.nn.Linear(1, 1), torch.nn.Linear(1, 1)
        opt_a = torch.optim.SGD(head_a.parameters(), lr=0.01)
        opt_b = torch.optim.SGD([*model.parameters(), *head_b.parameters()], lr=0.01)
        for _ in range(10):
            shared = torch.tanh(model(torch.randn(4, 3)))
            loss_a = head_a(shared).pow(2).mean()
            loss_a.backward(retain_graph=True)
            opt_a.step()
            opt_a.zero_grad()
            loss_b = head_b(shared).abs().mean()
            loss_b.backward()
            opt_b.step()
            opt_b.zero_grad()
        """), []),
    # a running total back-propagated with retain_graph=True: no error, each step applies every earlier loss again
    "total_retained": (HEAD + textwrap.dedent(
        """\
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        total = 0
        for _ in range(10):
            opt.zero_grad()
            total = total + model(torch.randn(4, 3)).pow(2).mean()
            total.backward(retain_graph=True)
            opt.step()
        """), [("TL001", 10, False)]),
    # the same, divided before its backward (from a user's question: "the loss soon becomes nan"); the total is
    # emptied in place with .data.zero_(), which leaves its graph in place
    "total_divided_retained": (HEAD + textwrap.dedent(
        """\
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        total = torch.zeros(1, requires_grad=True)
        for i in range(40):
            total = total + model(torch.randn(1, 3)).pow(2).mean()
            if i % 4 == 0:
                (total / 4).backward(retain_graph=True)
                opt.step()
                total.data.zero_()
                opt.zero_grad()
        """), [("TL001", 10, False)]),
    # a graph built once, before the loop, back-propagated into by every iteration: no loss is back-propagated twice
    "prebuilt_graph_retained": (HEAD + textwrap.dedent(
        """\
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        feature = model(torch.randn(4, 3))
        for _ in range(10):
            opt.zero_grad()
            (feature * torch.randn(4, 1)).mean().backward(retain_graph=True)
            opt.step()
        """), []),
}


@pytest.fixture(scope="module")
def sign_records(tmp_path_factory, device):
    from torchlint.verify.monitor import run_many

    folder = tmp_path_factory.mktemp("signs")
    scripts = []
    for name, (text, _) in SIGNS.items():
        scripts.append(folder / f"{name}.py")
        scripts[-1].write_text(text)
    return dict(zip(SIGNS, run_many(scripts, 6, device)))


@pytest.mark.parametrize("name", SIGNS)
def test_monitor_reads_cut_terms_and_unscaled_windows(sign_records, name):
    record = sign_records[name]
    assert record["error"] is None, record["traceback"]
    seen = [(o["code"], o["frames"][-1][1], bool(o.get("static_only"))) for o in record["observations"]]
    assert seen == SIGNS[name][1]


def test_unscaled_window_is_reported_at_its_backward_line(sign_records, tmp_path):
    from torchlint.run_command import combine

    script = tmp_path / "window_sgd.py"
    record = sign_records["window_sgd"]
    record = dict(record, observations=[dict(o, frames=[[str(script.resolve()), o["frames"][-1][1]]])
                                        for o in record["observations"]])
    found = combine([], record, script)
    assert [(d.code, d.line, d.runtime) for d in found] == [("TL005", 10, "runtime only")]
    assert "sum of 4 gradients, 4x their mean" in found[0].message


def test_a_saved_tensor_modified_in_place_fails_the_run_as_it_fails_alone(tmp_path, device):
    """The monitor's saved-tensor hooks turn off PyTorch's own check of saved tensors; it is done again, so a GAN
    that steps the discriminator before back-propagating the generator's loss through it fails here too."""
    from torchlint.verify.monitor import run_many

    script = tmp_path / "inplace.py"
    script.write_text(HEAD + textwrap.dedent(
        """\
        head = torch.nn.Linear(1, 1)
        opt_d = torch.optim.SGD(head.parameters(), lr=0.1)
        for _ in range(5):
            score = head(model(torch.randn(4, 3))).sigmoid()
            d_loss = score.log().mean()
            d_loss.backward(retain_graph=True)
            opt_d.step()
            (1 - score).log().mean().backward()
        """))
    (record,) = run_many([script], 4, device)
    assert record["error"].startswith("RuntimeError: one of the variables needed for gradient computation has been "
                                      "modified by an inplace operation"), record["error"]
    assert len(record["steps"]) == 1


def test_state_fed_back_with_retain_graph_is_confirmed_by_the_in_place_error(tmp_path, device):
    """retain_graph=True added to silence TL008's error: the next backward reaches the previous chunk's graph, whose
    saved weights the step changed in place. The run fails with that error, which confirms TL008; the retained graph
    was still being back-propagated into, so TL002 is not confirmed."""
    from torchlint.run_command import combine
    from torchlint.verify.monitor import run_many

    script = tmp_path / "gru_retain.py"
    bad = (ROOT / "fixtures" / "TL008" / "script_gru" / "bad.py").read_text()
    script.write_text(bad.replace("loss.backward()", "loss.backward(retain_graph=True)"))
    (record,) = run_many([script], 4, device)
    static = lint_source(script.read_text(), str(script), project=Project(tmp_path))
    found = combine(static, record, script)
    assert [(d.code, d.line, d.runtime) for d in found] == [("TL008", 13, "confirmed"), ("TL002", 15, "not observed")]


def test_script_that_exits_with_an_error_code_before_its_first_step(tmp_path, run_cli, device):
    (tmp_path / "quit.py").write_text("import sys\nsys.exit(3)\n")
    r = run_cli("run", "quit.py", cwd=tmp_path)
    assert r.returncode == 2
    assert r.stderr.endswith("failed before its first optimizer step:\nSystemExit: 3\n"), r.stderr


def test_run_refuses_a_notebook(tmp_path, run_cli):
    (tmp_path / "nb.ipynb").write_text('{"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}')
    r = run_cli("run", "nb.ipynb", cwd=tmp_path)
    assert r.returncode == 2 and "is a notebook" in r.stderr and r.stdout == ""


STEPPING = "import torch\nm = torch.nn.Linear(2, 1)\nopt = torch.optim.SGD(m.parameters(), lr=0.1)\n" \
           "for _ in range(3):\n    m(torch.ones(2)).sum().backward()\n    opt.step()\n    opt.zero_grad()\n"


@pytest.mark.parametrize("args, message", [
    (["--bogus", "t.py"], "torchlint run: error: unrecognized arguments: --bogus"),
    ([], "torchlint run: error: the following arguments are required: script, args"),
    (["--timeout", "-5", "t.py"], "torchlint run: error: argument --timeout: must be 0 (no limit) or more"),
    (["--steps", "x", "t.py"], "torchlint run: error: argument --steps: invalid int value: 'x'"),
])
def test_run_usage_errors_are_one_line(tmp_path, run_cli, args, message):
    """Usage errors were argparse's usage over several lines, and a negative --timeout ran the script and said it
    "ran past -5 s"; each is now one line, exit 2, and nothing runs."""
    (tmp_path / "t.py").write_text(STEPPING)
    r = run_cli("run", *args, cwd=tmp_path)
    assert (r.returncode, r.stdout, r.stderr) == (2, "", message + "\n")


def test_run_on_cuda_without_cuda_says_so_in_one_line(tmp_path, run_cli):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is available here")
    (tmp_path / "t.py").write_text(STEPPING)
    r = run_cli("run", "--device", "cuda", "t.py", cwd=tmp_path)
    assert (r.returncode, r.stdout, r.stderr) == (
        2, "", "torchlint: error: --device cuda but no CUDA device is available\n")


def test_retained_graph_names_the_variable_that_holds_it(records):
    script = ROOT / "fixtures" / "TL002" / "script" / "bad.py"
    [seen] = [o for o in records[str(script)]["observations"] if o["code"] == "TL002"]
    assert seen["holder"] == "loss" and "(held through `loss`)" in seen["message"], seen


# -- the script's process and its output ---------------------------------------------------------------------------
def _alive(pid: int) -> bool:
    """Running (a zombie waiting for its parent to reap it has ended)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _wait_dead(pid: int, seconds: float = 10.0) -> bool:
    import time

    deadline = time.monotonic() + seconds
    while _alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads process states from /proc")
def test_timeout_stops_what_the_script_started_and_keeps_its_output(tmp_path, run_cli, device):
    """The time limit stops the script and the processes it started, and what the script printed before it is
    shown."""
    (tmp_path / "hang.py").write_text(
        "import subprocess, sys, time\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
        "open('child.pid', 'w').write(str(child.pid))\n"
        "print('loading the data', flush=True)\n"
        "time.sleep(600)\n")
    r = run_cli("run", "--timeout", "15", "hang.py", cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    assert "loading the data\n" in r.stderr and "hang.py ran past 15 s; stopped" in r.stderr
    pid = int((tmp_path / "child.pid").read_text())
    assert _wait_dead(pid), f"the script's child {pid} outlived the time limit"


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads process states from /proc")
def test_sigterm_stops_the_script_and_what_it_started(tmp_path, device):
    import shutil
    import signal
    import subprocess
    import time

    (tmp_path / "hang.py").write_text(
        "import subprocess, sys, time\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
        "open('child.pid', 'w').write(str(child.pid))\n"
        "time.sleep(600)\n")
    proc = subprocess.Popen([shutil.which("torchlint"), "run", "hang.py"], cwd=tmp_path,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while not (tmp_path / "child.pid").is_file() and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(0.2)  # the pid is written
    pid = int((tmp_path / "child.pid").read_text())
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 128 + signal.SIGTERM
    assert _wait_dead(pid), f"the script's child {pid} outlived torchlint"


def test_the_scripts_output_is_passed_on_as_it_comes(tmp_path, device):
    """Streamed, not buffered to the end (a buffer would hold all the script prints): torchlint shows the
    script's first line while the script still waits for the test to see it; bytes that are not UTF-8 pass
    through, and the script's stderr is shown when the run succeeds."""
    import os
    import select
    import shutil
    import subprocess
    import time

    (tmp_path / "train.py").write_text(
        "import os, sys, time\nimport torch\n"
        "sys.stdout.buffer.write(b'caf\\xe9 \\xff\\n'); sys.stdout.flush()\n"
        "deadline = time.monotonic() + 60\n"
        "while not os.path.exists('seen') and time.monotonic() < deadline:\n    time.sleep(0.05)\n"
        "print('warming up', file=sys.stderr)\n"
        "model = torch.nn.Linear(2, 1)\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "for _ in range(3):\n    opt.zero_grad()\n    model(torch.ones(1, 2)).sum().backward()\n    opt.step()\n")
    proc = subprocess.Popen([shutil.which("torchlint"), "run", "--steps", "2", "--device", device, "train.py"],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    err = b""
    deadline = time.monotonic() + 50
    while b"\xff\n" not in err and time.monotonic() < deadline and proc.poll() is None:
        if select.select([proc.stderr], [], [], 0.5)[0]:
            err += os.read(proc.stderr.fileno(), 65536)
    seen_while_running = b"caf\xe9 \xff\n" in err and proc.poll() is None
    (tmp_path / "seen").write_text("")
    out, rest = proc.communicate(timeout=120)
    err += rest
    assert seen_while_running, err
    assert proc.returncode == 0, err
    assert b"warming up\n" in err and b"Ran train.py for 2 optimizer steps." in err
    assert out == b""


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads process states from /proc")
def test_sigterm_stops_the_pool_workers(tmp_path):
    """SIGTERM to `torchlint --jobs 2` ends the command and its two workers, without a traceback."""
    import shutil
    import signal
    import subprocess
    import time

    body = "".join(f"for x{i} in loader:\n    loss{i} = crit(model(x{i}))\n    total = total + loss{i}\n"
                   f"    total.backward()\n" for i in range(300))
    for i in range(40):
        (tmp_path / f"m{i}.py").write_text("total = 0\n" + body)
    log = (tmp_path / "stderr").open("w+b")  # not a pipe: workers left alive would hold it open
    proc = subprocess.Popen([shutil.which("torchlint"), "--jobs", "2", "--no-cache", "--file-timeout", "0", "-q",
                             "."], cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=log)
    workers: list[int] = []
    deadline = time.monotonic() + 60
    while len(workers) < 2 and time.monotonic() < deadline:
        time.sleep(0.2)
        workers = [int(p) for p in Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()]
    assert len(workers) == 2, "the pool did not start"
    time.sleep(1)
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=60)
    log.close()
    err = (tmp_path / "stderr").read_bytes()
    assert all(_wait_dead(pid) for pid in workers), "a pool worker outlived the command"
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert b"Traceback" not in err, err


# Shapes the run must confirm: a detached term re-wrapped as a new leaf, stacked with attached terms,
# taken as `.data[0]`; `optimizer.step()` straight after a scaled backward; and the new static findings (a step
# reached through an object, an optimizer wrapper named like a scheduler, a step's output kept after its loss was
# back-propagated).
CONFIRMED = {
    "leaf": (('TL003', 10, 16), textwrap.dedent("""\
        import torch
        torch.manual_seed(0)
        model = torch.nn.Linear(3, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(4):
            x = torch.randn(8, 3)
            out = model(x)
            main = out.pow(2).mean()
            reg = out.abs().mean()
            reg_term = torch.tensor(reg.item(), requires_grad=True)
            loss = main + 0.1 * reg_term
            opt.zero_grad()
            loss.backward()
            opt.step()
        """)),
    "stack": (('TL003', 9, 28), textwrap.dedent("""\
        import torch
        torch.manual_seed(0)
        model = torch.nn.Linear(3, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(4):
            out = model(torch.randn(8, 3))
            a = out.pow(2).mean()
            b = out.abs().mean()
            loss = torch.stack([a, b.detach()]).sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
        """)),
    "data0": (('TL003', 9, 16), textwrap.dedent("""\
        import torch
        torch.manual_seed(0)
        model = torch.nn.Linear(3, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(4):
            out = model(torch.randn(8, 3))
            a = out.pow(2).mean()
            reg_loss = out.abs().mean().view(1)
            loss = a + reg_loss.data[0]
            opt.zero_grad()
            loss.backward()
            opt.step()
        """)),
    "amp": (('TL010', 11, 5), textwrap.dedent("""\
        import torch
        torch.manual_seed(0)
        model = torch.nn.Linear(3, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        scaler = torch.amp.GradScaler("cuda" if torch.cuda.is_available() else "cpu")
        for _ in range(4):
            out = model(torch.randn(8, 3))
            loss = out.pow(2).mean()
            opt.zero_grad()
            scaler.scale(loss).backward()
            opt.step()
            scaler.update()
        """)),
    "obj": (('TL004', 12, 9), textwrap.dedent("""\
        import torch


        class Trainer:
            def __init__(self, model, optimizer):
                self.model = model
                self.optimizer = optimizer

            def train_step(self, x):
                loss = self.model(x).pow(2).mean()
                loss.backward()
                self.optimizer.step()


        torch.manual_seed(0)
        model = torch.nn.Linear(3, 1)
        trainer = Trainer(model, torch.optim.SGD(model.parameters(), lr=0.1))
        for _ in range(4):
            trainer.train_step(torch.randn(8, 3))
        """)),
    "wrap": (('TL005', 21, 5), textwrap.dedent("""\
        import torch


        class Stepper:
            def __init__(self, optimizer):
                self.optimizer = optimizer

            def step(self):
                self.optimizer.step()

            def zero_grad(self):
                self.optimizer.zero_grad()


        torch.manual_seed(0)
        model = torch.nn.Linear(3, 1)
        scheduler = Stepper(torch.optim.SGD(model.parameters(), lr=0.1))
        accum = 2
        for i in range(8):
            loss = model(torch.randn(8, 3)).pow(2).mean()
            loss.backward()
            if (i + 1) % accum == 0:
                scheduler.step()
                scheduler.zero_grad()
        """)),
    "keep": (('TL007', 18, 5), textwrap.dedent("""\
        import torch


        def step(model, x):
            return {"loss": model(x).pow(2).mean(), "n": len(x)}


        torch.manual_seed(0)
        model = torch.nn.Linear(3, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        outputs = []
        batches = [torch.randn(8, 3) for _ in range(40)]
        for x in batches:
            opt.zero_grad()
            output = step(model, x)
            output["loss"].backward()
            opt.step()
            outputs.append(output)
        """)),
}


def test_new_shapes_are_confirmed_at_runtime(tmp_path, device):
    from torchlint.run_command import combine
    from torchlint.verify.monitor import run_many

    paths = []
    for name, (_, src) in CONFIRMED.items():
        paths.append(tmp_path / f"{name}.py")
        paths[-1].write_text(src)
    records = run_many(paths, 8, device)
    got = {}
    for path, record in zip(paths, records):
        static = lint_source(path.read_text(), str(path), project=Project(tmp_path))
        got[path.stem] = [(d.code, d.line, d.column, d.runtime) for d in combine(static, record, path)]
    assert got == {name: [(*where, "confirmed")] for name, (where, _) in CONFIRMED.items()}
