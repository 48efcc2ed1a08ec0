"""The result cache (.torchlint_cache/): a cached answer is the answer `--no-cache` gives, whatever happened to
the project in between; and an entry torchlint did not write itself is never believed."""

from __future__ import annotations

from pathlib import Path

TRAIN = ("from engine import step\n"
         "for x, y in loader:\n"
         "    loss = crit(model(x), y)\n"
         "    loss.backward()\n"
         "    step(optimizer)\n")
STEPS_ONLY = "def step(opt):\n    opt.step()\n"  # a caller's loop never clears the gradients: TL004 there
STEPS_AND_ZEROES = "def step(opt):\n    opt.step()\n    opt.zero_grad()\n"  # a correct helper: nothing to report


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


def same_as_uncached(run_cli, root: Path) -> str:
    """The cached run's output, after checking that it is what an uncached run prints."""
    cached = run_cli("--format", "json", cwd=root)
    fresh = run_cli("--format", "json", "--no-cache", cwd=root)
    assert cached.returncode in (0, 1), cached.stderr
    assert (cached.returncode, cached.stdout) == (fresh.returncode, fresh.stdout)
    return cached.stdout


def test_identical_files_in_two_folders_get_their_own_answers(tmp_path, run_cli):
    write(tmp_path, {"a/train.py": TRAIN, "a/engine.py": STEPS_AND_ZEROES,
                     "b/train.py": TRAIN, "b/engine.py": STEPS_ONLY})
    cold = same_as_uncached(run_cli, tmp_path)  # one run, cold: the two files used to share one entry
    assert '"path": "b/train.py"' in cold and "b/engine.py:2" in cold and "a/train.py" not in cold
    assert same_as_uncached(run_cli, tmp_path) == cold


def test_creating_a_helper_that_was_missing_invalidates(tmp_path, run_cli):
    write(tmp_path, {"sub/train.py": TRAIN})
    assert '"code"' not in same_as_uncached(run_cli, tmp_path)
    write(tmp_path, {"engine.py": STEPS_ONLY})  # found from sub/ through the project root
    assert "TL004" in same_as_uncached(run_cli, tmp_path)


def test_a_helper_that_shadows_the_one_read_invalidates(tmp_path, run_cli):
    write(tmp_path, {"sub/train.py": TRAIN, "engine.py": STEPS_ONLY})
    assert "TL004" in same_as_uncached(run_cli, tmp_path)
    write(tmp_path, {"sub/engine.py": STEPS_AND_ZEROES})  # the script's own folder comes first on sys.path
    assert '"code"' not in same_as_uncached(run_cli, tmp_path)
    (tmp_path / "sub" / "engine.py").unlink()  # and a branch switch back
    assert "TL004" in same_as_uncached(run_cli, tmp_path)


def test_a_module_that_shadows_a_package_invalidates(tmp_path, run_cli):
    write(tmp_path, {"train.py": TRAIN.replace("from engine import step", "from lib.engine import step"),
                     "lib/__init__.py": "", "lib/engine/__init__.py": STEPS_ONLY})
    assert "TL004" in same_as_uncached(run_cli, tmp_path)
    write(tmp_path, {"lib/engine.py": STEPS_AND_ZEROES})  # read before the package of the same name
    assert '"code"' not in same_as_uncached(run_cli, tmp_path)
