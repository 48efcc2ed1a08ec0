"""The flake8 plugin through flake8 itself: same findings, same positions as the CLI."""

from __future__ import annotations

import subprocess
import sys
import textwrap

SRC = textwrap.dedent(
    """\
    import torch

    total = 0
    for i, (x, y) in enumerate(loader):
        loss = criterion(model(x), y)
        total = total + loss
        total.backward(retain_graph=True)
        optimizer.step()
    """
)


def flake8(*args, cwd):
    return subprocess.run([sys.executable, "-m", "flake8", *args], cwd=cwd, capture_output=True, text=True, timeout=120)


def test_plugin_is_registered(tmp_path):
    r = flake8("--version", cwd=tmp_path)
    assert "torchlint" in r.stdout


def test_same_findings_as_cli(tmp_path, run_cli):
    (tmp_path / "train.py").write_text(SRC)
    r = flake8("--select", "TL", "train.py", cwd=tmp_path)
    assert r.returncode == 1
    plugin = [line.split(" ", 2)[:2] for line in r.stdout.splitlines()]
    cli = run_cli("-q", "train.py", cwd=tmp_path)
    expected = [line.split(" ", 2)[:2] for line in cli.stdout.splitlines()]
    assert plugin == expected
    assert [p[1] for p in plugin] == ["TL001", "TL002", "TL004"]
    assert plugin[0][0] == "train.py:7:5:"


def test_noqa_and_select_are_flake8s(tmp_path):
    (tmp_path / "train.py").write_text(SRC.replace("optimizer.step()", "optimizer.step()  # noqa: TL004"))
    r = flake8("--select", "TL001", "train.py", cwd=tmp_path)
    assert [line.split()[1] for line in r.stdout.splitlines()] == ["TL001"]
    r = flake8("--select", "TL", "train.py", cwd=tmp_path)
    assert "TL004" not in r.stdout


def test_file_without_training_code(tmp_path):
    (tmp_path / "util.py").write_text("def add(a, b):\n    return a + b\n")
    r = flake8("--select", "TL", "util.py", cwd=tmp_path)
    assert (r.returncode, r.stdout) == (0, "")


def test_syntax_error_file_does_not_crash_plugin(tmp_path):
    (tmp_path / "bad.py").write_text("loss.backward(\n")
    r = flake8("--select", "TL,E9", "bad.py", cwd=tmp_path)
    assert "Traceback" not in r.stderr
