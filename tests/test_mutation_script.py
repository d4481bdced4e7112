"""scripts/mutation.py's bookkeeping on a mutants/ tree written in mutmut's format: statuses by exit
code, timeouts settled alone, survivors explained or not, and explanations gone stale."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "mutation.py"


@pytest.fixture
def mutation(tmp_path, monkeypatch):
    spec = importlib.util.spec_from_file_location("mutation_script", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setattr(module, "MUTANTS", tmp_path / "mutants")
    monkeypatch.setattr(module, "ALONE", tmp_path / "mutants" / "timeouts-alone.json")
    monkeypatch.setattr(module, "EQUIVALENT", tmp_path / "equivalent.json")
    lines = {
        "ssmts.nn.scan.x_f__mutmut_2": "T = None",
        "ssmts.nn.ssm.xǁSSMǁforward__mutmut_3": "y = y.to(None)",
        "ssmts.nn.ssm.xǁSSMǁforward__mutmut_4": "n = 3 * L",
    }
    monkeypatch.setattr(module, "changed_line", lambda name: lines[name])
    meta = tmp_path / "mutants" / "ssmts" / "nn"
    meta.mkdir(parents=True)
    codes = {"ssmts.nn.scan.x_f__mutmut_1": 1, "ssmts.nn.scan.x_f__mutmut_2": 0, "ssmts.nn.scan.x_f__mutmut_3": 36}
    (meta / "scan.py.meta").write_text(json.dumps({"exit_code_by_key": codes}))
    codes = {"ssmts.nn.ssm.xǁSSMǁforward__mutmut_3": 0, "ssmts.nn.ssm.xǁSSMǁforward__mutmut_4": 0}
    (meta / "ssm.py.meta").write_text(json.dumps({"exit_code_by_key": {**codes, "ssmts.nn.ssm.x_g__mutmut_1": None}}))
    return module


def test_names_map_to_their_module_and_function(mutation):
    assert mutation.module_of("ssmts.nn.ssm.xǁSSMǁforward__mutmut_12") == "ssmts.nn.ssm"
    assert mutation.module_of("ssmts.training.objectives.x_pinball_loss__mutmut_3") == "ssmts.training.objectives"
    assert mutation.function_of("ssmts.nn.ssm.xǁSSMǁforward__mutmut_12") == "ssmts.nn.ssm.xǁSSMǁforward"


def test_statuses_follow_mutmuts_exit_codes_and_the_reruns_alone(mutation):
    results = mutation.read_results()
    assert results["ssmts.nn.scan.x_f__mutmut_1"] == "killed"
    assert results["ssmts.nn.scan.x_f__mutmut_2"] == "survived"
    assert results["ssmts.nn.scan.x_f__mutmut_3"] == "timeout"
    assert results["ssmts.nn.ssm.x_g__mutmut_1"] == "not checked"
    mutation.ALONE.write_text(json.dumps({"ssmts.nn.scan.x_f__mutmut_3": "killed"}))
    assert mutation.read_results()["ssmts.nn.scan.x_f__mutmut_3"] == "killed"


def test_report_fails_while_a_survivor_is_unexplained_and_passes_once_all_are(mutation, capsys):
    args = type("Args", (), {"list": True})()
    mutation.ALONE.write_text(json.dumps({"ssmts.nn.scan.x_f__mutmut_3": "killed"}))
    explained = {"ssmts.nn.ssm.xǁSSMǁforward__mutmut_3": {"line": "y = y.to(None)", "why": "device: ..."}}
    mutation.EQUIVALENT.write_text(json.dumps(explained))
    assert mutation.report(args) == 1
    out = capsys.readouterr().out
    assert "unexplained: 2" in out and "survived  ssmts.nn.scan.x_f__mutmut_2: T = None" in out
    explained["ssmts.nn.scan.x_f__mutmut_2"] = {"line": "T = None", "why": "..."}
    explained["ssmts.nn.ssm.xǁSSMǁforward__mutmut_4"] = {"line": "n = 3 * L", "why": "speed only"}
    mutation.EQUIVALENT.write_text(json.dumps(explained))
    assert mutation.report(args) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("ssmts.nn.ssm "))
    assert row.split()[1:8] == ["3", "0", "2", "0", "0", "0", "1"]  # mutants, killed, equivalent, ..., not checked


def test_an_explanation_whose_line_moved_is_reported_stale(mutation, capsys):
    mutation.ALONE.write_text(json.dumps({"ssmts.nn.scan.x_f__mutmut_3": "killed"}))
    explained = {
        "ssmts.nn.scan.x_f__mutmut_2": {"line": "T = 0", "why": "written for another line"},
        "ssmts.nn.ssm.xǁSSMǁforward__mutmut_3": {"line": "y = y.to(None)", "why": "device"},
        "ssmts.nn.ssm.xǁSSMǁforward__mutmut_4": {"line": "n = 3 * L", "why": "speed only"},
        "ssmts.nn.scan.x_f__mutmut_1": {"line": "gone", "why": "now killed"},
    }
    mutation.EQUIVALENT.write_text(json.dumps(explained))
    assert mutation.report(type("Args", (), {"list": False})()) == 1
    out = capsys.readouterr().out
    assert "1 of mutants now killed or gone, 1 whose line changed" in out
    assert "  ssmts.nn.scan.x_f__mutmut_1" in out and "  ssmts.nn.scan.x_f__mutmut_2" in out
