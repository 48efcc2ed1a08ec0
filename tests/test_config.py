"""The one reader of configuration (torchlint.config)."""

from __future__ import annotations

BUGGY = "for x, y in loader:\n    loss = criterion(model(x), y)\n    loss.backward()\n    optimizer.step()\n"


def test_per_file_ignores_all_ignores_every_rule(tmp_path, run_cli):
    """`"ALL"` was accepted in per-file-ignores and ignored nothing; as in ruff, it means every rule."""
    (tmp_path / "pyproject.toml").write_text('[tool.torchlint.per-file-ignores]\n"legacy/*" = ["ALL"]\n')
    (tmp_path / "legacy").mkdir()
    (tmp_path / "legacy" / "old.py").write_text(BUGGY)
    (tmp_path / "new.py").write_text(BUGGY)
    r = run_cli("--no-cache", "-q", ".", cwd=tmp_path)
    assert [line.split(":")[0] for line in r.stdout.splitlines()] == ["new.py"]


def test_codes_for_with_all():
    from pathlib import Path

    from torchlint.config import Config

    cfg = Config(root=Path("/p"), per_file_ignores={"a.py": ("ALL",), "b.py": ("tl00",)})
    assert cfg.codes_for(Path("/p/a.py")) == [] and cfg.codes_for(Path("/p/b.py")) == cfg.codes()
