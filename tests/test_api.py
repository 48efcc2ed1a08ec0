"""The Python API as the README documents it: every example of its "Python API" section runs as a doctest."""

from __future__ import annotations

import doctest
import re

from tests.conftest import ROOT


def test_readme_api_examples():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Python API", 1)[1].split("\n## ", 1)[0]
    examples = "\n".join(re.findall(r"```python\n(.*?)```", section, re.S))
    assert examples.count(">>>") >= 8
    parser = doctest.DocTestParser()
    test = parser.get_doctest(examples, {}, "README Python API", "README.md", 0)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    runner.run(test)
    assert runner.failures == 0 and runner.tries >= 8
