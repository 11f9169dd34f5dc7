"""Pure cores of the agents package: edit forms, reply parsing, feedback selection, prompts,
the loop's decisions, the scripted and simulated agents' choices."""

from __future__ import annotations

import subprocess
import sys

import pytest

from shadowkernel.agents import edits as E
from shadowkernel.agents import prompt
from shadowkernel.agents.loop import Step, history_line, next_stop
from shadowkernel.agents.observation import (
    CONDITIONS,
    Condition,
    LintShown,
    Observation,
    RunShown,
    condition,
    lints_from_report,
    lints_to_show,
    run_to_show,
)
from shadowkernel.agents.scripted import ScriptedAgent, ScriptedFailure
from shadowkernel.agents.simulated import Behaviour, SimulatedAgent, lint_mistake, silent_mistake
from shadowkernel.errors import ArgumentError
from shadowkernel.evals import builtin_suite
from shadowkernel.lsp import Fix, Lint, LintReport
from shadowkernel.paths import RelPath
from shadowkernel.text.ranges import TextEdit

OLD = LintShown("p/m.py", 1, 8, "F401", "`os` imported but unused", "warning", new=False)
NEW = LintShown("p/m.py", 5, 12, "F821", "Undefined name `totl`", "error", new=True)
RUN = RunShown("pytest -q tests", 1, "FAILED tests/test_m.py::test_total")


# -- edit forms ---------------------------------------------------------------------------------


def test_normalize_accepts_every_staging_form():
    full, rep, patch, gone = (E.FullText("a.py", "x = 1\n"), E.Replace("a.py", "1", "2"),
                              E.Patch("--- a/a.py\n+++ b/a.py\n"), E.Delete("b.py"))  # fmt: skip
    assert E.normalize(full) == (full,)
    assert E.normalize([full, [rep], None]) == (full, rep)
    assert E.normalize({"path": "a.py", "old": "1", "new": "2"}) == (rep,)
    assert E.normalize({"kind": "patch", "diff": patch.diff}) == (patch,)
    assert E.normalize({"path": "b.py", "delete": True}) == (gone,)
    assert E.normalize({"a.py": "x = 1\n", "b.py": None}) == (full, gone)
    assert E.normalize(None) == () and E.normalize([]) == ()
    for edit in (full, rep, patch, gone):
        assert E.from_json(E.to_json(edit)) == edit


@pytest.mark.parametrize("garbage", [42, 3.5, object(), {"kind": "teleport", "path": "a"},
                                     {"path": "a.py", "text": 7}, [E.FullText("", "x")],
                                     {"path": "a.py", "old": "x"}])  # fmt: skip
def test_normalize_rejects_garbage_with_a_clear_error(garbage):
    with pytest.raises(E.AgentOutputError) as info:
        E.normalize(garbage)
    assert str(info.value)


def test_parse_reply_reads_blocks_in_order():
    reply = (
        "Here is the fix.\n\npkg/m.py\n<<<<<<< SEARCH\n    return a - b\n=======\n"
        "    return a + b\n>>>>>>> REPLACE\n\n```python path=pkg/new.py\nX = 1\n```\n\n"
        "```diff\n--- a/pkg/o.py\n+++ b/pkg/o.py\n@@ -1 +1 @@\n-a\n+b\n```\nDELETE pkg/old.py\n"
    )
    assert E.parse_reply(reply) == (
        E.Replace("pkg/m.py", "    return a - b\n", "    return a + b\n"),
        E.FullText("pkg/new.py", "X = 1\n"),
        E.Patch("--- a/pkg/o.py\n+++ b/pkg/o.py\n@@ -1 +1 @@\n-a\n+b\n"),
        E.Delete("pkg/old.py"),
    )
    assert E.parse_reply("DONE") == () and E.parse_reply("I think it works.") == ()
    with pytest.raises(E.AgentOutputError, match="SEARCH"):
        E.parse_reply("pkg/m.py\n<<<<<<< SEARCH\nx\n")


# -- what each condition shows ------------------------------------------------------------------


def test_each_condition_shows_exactly_what_it_claims():
    lints = (OLD, NEW)
    assert lints_to_show(CONDITIONS["none"], lints) == ()
    assert run_to_show(CONDITIONS["none"], RUN) is None
    assert lints_to_show(CONDITIONS["all-lints"], lints) == (OLD, NEW)
    assert run_to_show(CONDITIONS["all-lints"], RUN) is None
    assert lints_to_show(CONDITIONS["new-lints"], lints) == (NEW,)
    assert lints_to_show(CONDITIONS["lints+run"], lints) == (NEW,)
    assert run_to_show(CONDITIONS["lints+run"], RUN) is RUN
    assert condition("none") is CONDITIONS["none"]
    custom = Condition("all+run", lints="all", run=True)
    assert condition(custom) is custom and lints_to_show(custom, lints) == lints
    with pytest.raises(ValueError, match="unknown"):
        condition("some-lints")
    with pytest.raises(ValueError, match="lints="):
        Condition("x", lints="most")  # type: ignore[arg-type]


def test_lints_from_report_keeps_the_new_flag_and_describes_fixes():
    fix = Fix("Remove import", (TextEdit(RelPath("p/m.py"), 1, 1, 2, 1, ""),))
    report = LintReport.of("a", 2, [
        Lint(RelPath("p/m.py"), 5, 12, 5, 13, "error", "F821", "Ruff", "m2"),
        Lint(RelPath("p/m.py"), 1, 8, 1, 10, "warning", "F401", "Ruff", "m1", (fix,)),
    ], [True, False])  # fmt: skip
    old, new = lints_from_report(report)  # in the report's order: by line
    assert (old.line, old.code, old.new, new.line, new.code, new.new) == (
        1, "F401", False, 5, "F821", True)  # fmt: skip
    assert old.fixes == ("Remove import (1:1-2:1 -> '')",) and new.fixes == ()


def test_prompt_has_a_section_only_for_what_is_shown():
    bare = Observation("Fix it.", {"p/m.py": "import os\n"}, turn=1)
    text = prompt.render(bare)
    assert "# Task\nFix it." in text and "```python path=p/m.py\nimport os\n```" in text
    assert "Lints" not in text and "Output of the last run" not in text
    shown = prompt.render(Observation("Fix it.", {}, lints=(NEW,), run=RUN, turn=1))
    assert "p/m.py:5:12: F821 Undefined name `totl` (new)" in shown
    assert "$ pytest -q tests\n(exit code 1)" in shown
    chars, tokens = prompt.prompt_size(bare)
    assert chars == len(prompt.SYSTEM) + len(text) and tokens == -(-chars // 4)


def test_inline_lints_land_under_their_lsp_line_after_a_form_feed_or_line_separator():
    # str.splitlines would see four lines before `total = totl`, and put the note under `y`
    text = "# page\x0cbreak\nsep = '\u2028'\n    total = totl\ny = 1"
    lint = LintShown("p/m.py", 3, 13, "F821", "Undefined name `totl`", "error", new=True)
    shown = prompt.render(Observation("Fix it.", {"p/m.py": text}, template="inline",
                                      lints=(lint,)))  # fmt: skip
    expected = ("# page\x0cbreak\nsep = '\u2028'\n    total = totl\n"
                "    # ^ lint F821 Undefined name `totl` (new, col 13)\ny = 1\n```")  # fmt: skip
    assert expected in shown


# -- the loop's decisions -------------------------------------------------------------------------


def test_next_stop():
    assert next_stop(Step(0, passed=True, edits=[{}]), 0, 4) == "solved"
    assert next_stop(Step(0), 0, 4) == "submitted"
    assert next_stop(Step(0, edits=[{}]), 0, 4) is None
    assert next_stop(Step(3, edits=[{}]), 3, 4) == "budget"
    assert next_stop(Step(1, error="boom", error_kind="agent"), 1, 4) is None


def test_history_line_tells_the_agent_what_happened():
    step = Step(0, edits=[E.to_json(E.Replace("a.py", "x", "y"))], staged=1, checked=True)
    assert history_line(step) == "turn 1: staged replace in a.py; the task's tests do not pass yet"
    failed = Step(1, error="ValueError: no", error_kind="agent")
    assert history_line(failed) == "turn 2: staged nothing; failed (agent): ValueError: no"


# -- scripted and simulated agents ------------------------------------------------------------------


def test_scripted_agent_replays_per_task_and_raises_recorded_failures():
    agent = ScriptedAgent({"t": [[E.FullText("a.py", "1")], ScriptedFailure("bad")]})
    assert agent(Observation("", {}, task_id="t")) == [E.FullText("a.py", "1")]
    with pytest.raises(ScriptedFailure):
        agent(Observation("", {}, task_id="t", turn=1))
    assert agent(Observation("", {}, task_id="t", turn=2)) == []
    assert agent(Observation("", {}, task_id="other")) == []
    assert agent.fingerprint == ScriptedAgent({"t": [[E.FullText("a.py", "1")],
                                                     ScriptedFailure("bad")]}).fingerprint  # fmt: skip
    assert agent.fingerprint != ScriptedAgent({"t": []}).fingerprint


def test_lint_mistakes_are_undefined_names_ruff_flags(tmp_path):
    suite = builtin_suite()
    agent = SimulatedAgent(suite)
    written = 0
    for task in suite:
        _, solved, originals = agent._texts(task.id)
        for path, text in solved.items():
            mistaken = lint_mistake(originals[path], text)
            if mistaken is None:
                continue
            target = tmp_path / task.id / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(mistaken)
            written += 1
    assert written >= 18  # every task whose new lines use a name of 3+ letters
    ruff = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--select",
                           "F821", "--output-format", "concise", str(tmp_path)],
                          capture_output=True, text=True)  # fmt: skip
    assert ruff.stdout.count("F821") == written, ruff.stdout
    assert "handles the edge cases" in silent_mistake("def f():\n    pass\n")


def _sim(**p):
    return SimulatedAgent(builtin_suite(), seed=1, **p)


def test_simulated_agent_follows_its_stated_probabilities():
    task = "textkit-slugify-runs"
    files = {"textkit/textkit/slug.py": "import re\nimport string\n"}
    obs = lambda **kw: Observation("t", files, task_id=task, turn=1, **kw)  # noqa: E731
    solution = _sim()._solution(task)
    assert _sim(p_correct=1)(Observation("t", files, task_id=task)) == solution
    wrong = _sim(p_correct=0, p_lint_mistake=1)(Observation("t", files, task_id=task))
    assert "wodr" in wrong[0].text  # a misspelled name
    silent = _sim(p_correct=0, p_lint_mistake=0)(Observation("t", files, task_id=task))
    assert "handles the edge cases" in silent[0].text
    old = LintShown("textkit/textkit/slug.py", 2, 8, "F401", "unused", "warning", False)
    new = LintShown("textkit/textkit/slug.py", 7, 72, "F821", "undefined", "error", True)
    assert _sim(p_distracted=1)(obs(lints=(old, new))) == [
        E.Replace("textkit/textkit/slug.py", "import string\n", "")
    ]
    assert _sim(p_distracted=0, p_fix_seen_lint=1)(obs(lints=(old, new))) == solution
    assert _sim(p_fix_seen_failure=1)(obs(run=RUN)) == solution
    assert _sim(p_retry_blind=0)(obs()) == []  # nothing points at a mistake: it submits
    assert _sim(p_retry_blind=1, p_correct=1)(obs()) == solution
    with pytest.raises(ValueError, match="p_correct"):
        Behaviour(p_correct=1.5)


def test_simulated_draws_depend_on_seed_task_and_turn_not_on_condition():
    suite = builtin_suite()
    agent = SimulatedAgent(suite, seed=3)
    base = dict(task="t", files={}, task_id="stats-mode-ties", seed=7)
    a = agent(Observation(**base, condition="none"))
    assert a == agent(Observation(**base, condition="lints+run"))  # common random numbers
    draws = {repr(SimulatedAgent(suite, seed=s)(Observation(**base))) for s in range(12)}
    assert len(draws) > 1


@pytest.mark.parametrize(
    ("probabilities", "message"),
    [
        (
            {"p_corect": 0.5},
            "p_corect=: not a probability of the simulated agent; did you mean 'p_correct'\\? ",
        ),
        ({"p_correct": 1.5}, r"p_correct=1.5: a probability must be a number within \[0, 1\]"),
        ({"p_correct": "0.5"}, "p_correct='0.5': a probability must be a number"),
        ({"p_retry_blind": True}, "p_retry_blind=True: a probability must be a number"),
    ],
)
def test_simulated_agent_names_a_bad_probability(probabilities, message):
    with pytest.raises(ArgumentError, match=message):
        _sim(**probabilities)
