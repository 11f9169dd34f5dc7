"""The pure parts of the task suites: mutants, their inverse edits, bug reports, SWE-bench
fields, conditions and templates, the power statement, and bad arguments (no shadow needed)."""

from __future__ import annotations

import ast
import json

import pandas as pd
import pytest

import shadowkernel as sk
from shadowkernel.agents.observation import (
    CONDITIONS,
    Condition,
    LintShown,
    Observation,
    lints_to_show,
    relative_to_start,
)
from shadowkernel.agents.prompt import render
from shadowkernel.errors import ArgumentError, ShadowError
from shadowkernel.evals import minimum_detectable_effect, summary
from shadowkernel.evals.mutation import inverse, mutants
from shadowkernel.evals.mutation_suite import statement
from shadowkernel.evals.pytest_command import parse_command
from shadowkernel.evals.swebench import listed_tests, load_instances, patch_paths, prefixed_patch

SOURCE = '''\
def window(items, size):
    """Docstring: never mutated."""
    if size <= 0:
        raise ValueError("size")
    out = []
    for i in range(len(items) - size + 1):
        out.append(items[i : i + size])
    return out


class Box:
    def put(self, x, total=0):
        total += x
        if x in self.seen and not self.strict:
            return None
        else:
            self.seen.add(x)
        return max(total, x * 2)
'''


def test_every_kind_of_mutant_changes_one_span_and_parses():
    found = mutants("pkg/mod.py", SOURCE)
    assert {m.kind for m in found} == {"comparison", "negation", "off-by-one", "dropped-branch",
                                       "swapped-arguments", "operator"}  # fmt: skip
    described = {(m.function, m.description) for m in found}
    assert ("window", "`<=` became `<`") in described
    assert ("window", "`1` became `2`") in described and ("window", "`-` became `+`") in described
    assert ("Box.put", "`+=` became `-=`") in described
    assert ("Box.put", "`in` became `not in`") in described
    assert ("Box.put", "`and` became `or`") in described
    assert ("Box.put", "a `not` was dropped") in described
    assert ("Box.put", "the arguments `total` and `x * 2` of `max` were swapped") in described
    assert any(d.startswith("the `if` guard with its early exit") for _, d in described)
    assert any(d.startswith("the `else` block") for _, d in described)
    assert not any("Docstring" in SOURCE[m.start : m.end] for m in found)
    for m in found:
        mutated = m.apply(SOURCE)
        assert mutated != SOURCE
        ast.parse(mutated)
        old, new = inverse(SOURCE, mutated, m)
        assert mutated.count(old) == 1 and mutated.replace(old, new) == SOURCE
    assert mutants("x.py", "def broken(:\n") == []
    assert [m.id for m in found] == [m.id for m in mutants("pkg/mod.py", SOURCE)]


# A form feed (a page break, as some stdlib modules have) and a raw U+2028 in a string: Python
# and LSP break lines at neither, str.splitlines at both.
BREAKS = "# helpers\x0c\n\ndef first(xs):\n    sep = '\u2028'\n    return xs[0] if len(xs) > 1 else sep\n"


def test_mutants_count_lines_as_python_and_lsp_do():
    found = mutants("m.py", BREAKS)
    assert {(m.line, m.description, BREAKS[m.start : m.end]) for m in found} >= {
        (5, "`>` became `>=`", ">"), (5, "`0` became `1`", "0"), (5, "`1` became `2`", "1")}  # fmt: skip
    for m in found:
        assert m.line == BREAKS.count("\n", 0, m.start) + 1 and m.body == (4, 5)
        old, new = inverse(BREAKS, m.apply(BREAKS), m)
        assert old.startswith("    return") and new == "    return xs[0] if len(xs) > 1 else sep\n"


def test_swebench_rows_may_hold_a_raw_line_separator(tmp_path):
    row = {"instance_id": "x", "repo": "r", "base_commit": "c", "patch": "", "test_patch": "",
           "problem_statement": "first\u2028second", "FAIL_TO_PASS": "[]", "PASS_TO_PASS": "[]"}  # fmt: skip
    path = tmp_path / "rows.jsonl"
    path.write_text(json.dumps(row, ensure_ascii=False) + "\n" + json.dumps(row) + "\n")
    assert [r["problem_statement"] for r in load_instances(path)] == ["first\u2028second"] * 2


def test_the_bug_report_names_the_failing_tests_and_their_report():
    text = statement(["t.py::test_a", "t.py::test_b"],
                     {"t.py::test_a": "/w/p/t.py:3: in test_a\nE   assert 1 == 2 in 0.12s at 0x7f3a2b4c5d6e"},
                     "/w/p")  # fmt: skip
    assert "2 tests that used to pass fail" in text and "    t.py::test_b" in text
    assert "    t.py:3: in test_a" in text and "0x?" in text and "0.12s" not in text
    assert "(no report)" in text and "do not change the tests" in text


def test_test_commands_are_pytest_commands():
    cmd = parse_command("python -m pytest -q -x test_six.py -k 'not slow'", "/p", None)
    assert cmd.paths == ("test_six.py",) and cmd.options == ("-k", "not slow")
    assert parse_command(".venv/bin/python -m pytest", "/p", None).python == "/p/.venv/bin/python"
    with pytest.raises(ArgumentError, match="test_command=.*give a pytest command"):
        parse_command("make test", "/p", None)


def test_swebench_fields():
    patch = ("diff --git a/pkg/a.py b/pkg/a.py\n--- a/pkg/a.py\n+++ b/pkg/a.py\n@@ -1 +1 @@\n-x\n+y\n"
             "--- a/old.py\n+++ /dev/null\n@@ -1 +0,0 @@\n-z\n")  # fmt: skip
    assert patch_paths(patch) == ("pkg/a.py", "old.py")
    moved = prefixed_patch(patch, "repos/r")
    assert (
        "+++ b/repos/r/pkg/a.py" in moved
        and "diff --git a/repos/r/pkg/a.py b/repos/r/pkg/a.py" in moved
    )
    assert "+++ /dev/null" in moved and prefixed_patch(patch, "") == patch
    assert (
        listed_tests('["a.py::t1", "a.py::t2"]')
        == ("a.py::t1", "a.py::t2")
        == listed_tests(["a.py::t1", "a.py::t2"])
    )
    with pytest.raises(ArgumentError, match="lacks .*FAIL_TO_PASS"):
        load_instances(
            [
                {
                    "instance_id": "x",
                    "repo": "r",
                    "base_commit": "c",
                    "problem_statement": "",
                    "patch": "",
                    "test_patch": "",
                    "PASS_TO_PASS": "[]",
                }
            ]
        )
    with pytest.raises(ArgumentError, match="instances="):
        load_instances(42)


def lint(line: int, new: bool, code: str = "F401", fixes: tuple[str, ...] = ()) -> LintShown:
    return LintShown("m.py", line, 1, code, f"message {code}", "warning", new, fixes)


def test_conditions_vary_lints_fixes_and_template():
    lints = (lint(1, False, fixes=("Remove import",)), lint(3, True, "F821"))
    assert lints_to_show(CONDITIONS["all-lints"], lints) == tuple(
        x.__class__(**{**x.__dict__, "fixes": ()}) for x in lints)  # fmt: skip
    with_fixes = lints_to_show(CONDITIONS["new-lints+fixes"], (lint(3, True, fixes=("Fix it",)),))
    assert with_fixes[0].fixes == ("Fix it",)
    assert lints_to_show(CONDITIONS["new-lints"], lints) == (lints[1],)
    obs = Observation(task="t", files={"m.py": "import os\nx = 1\ny = z\n"}, lints=with_fixes)
    plain = render(obs)
    assert "m.py:3:1: F401 message F401 (new)\n    quick fix: Fix it" in plain
    table = render(Observation(**{**obs.__dict__, "template": "table"}))
    assert "| m.py | 3 | 1 | F401 | message F401 | new | Fix it |" in table
    inline = render(Observation(**{**obs.__dict__, "template": "inline"}))
    assert "y = z\n# ^ lint F401 message F401 (new, col 1); quick fix: Fix it\n" in inline
    as_json = render(Observation(**{**obs.__dict__, "template": "json"}))
    assert (
        json.loads(as_json.split("# Lints of your last version\n")[1].split("\n")[0])["line"] == 3
    )
    with pytest.raises(ArgumentError, match="Condition.template='html'"):
        Condition("x", lints="all", template="html")


def test_lints_are_new_relative_to_the_starting_version():
    start = "import os\n\ndef f(x):\n    return x\n"
    now = "import os\n\ndef f(x):\n    return y\n"
    lints = (
        lint(1, True),
        lint(4, True, "F821"),
        LintShown("other.py", 1, 1, "F401", "m", "w", False),
    )
    out = relative_to_start(lints, (lint(1, True),), {"m.py": start}, {"m.py": now})
    assert [x.new for x in out] == [False, True, False]


def test_minimum_detectable_effect_by_hand():
    # Connor (1987): n = (z_a sqrt(p_d) + z_b sqrt(p_d - d^2))^2 / d^2 at the returned d
    d = minimum_detectable_effect(100, 0.2)
    z_a, z_b = 1.959963984540054, 0.8416212335729143
    assert (z_a * 0.2**0.5 + z_b * (0.2 - d * d) ** 0.5) ** 2 / d**2 == pytest.approx(100)
    assert minimum_detectable_effect(40) > minimum_detectable_effect(400)
    assert minimum_detectable_effect(5, 0.2) != minimum_detectable_effect(5, 0.2)  # nan


def cells() -> pd.DataFrame:
    rows = []
    for cond, solved in (("none", [0, 0, 1, 0]), ("new-lints", [1, 1, 1, 0])):
        for i, s in enumerate(solved):
            rows.append({"task": f"t{i}", "seed": 0, "condition": cond, "solved": bool(s),
                         "turns": 1, "tokens": 100, "lints_shown": 0, "failed_steps": 0,
                         "seconds_total": 2.0, "lint_requests": 2, "run_requests": 1})  # fmt: skip
    return pd.DataFrame(rows)


def test_summary_reports_cost_per_solved_task_and_power():
    s = summary(cells(), n_boot=100)
    assert s.conditions.loc["new-lints", "tokens_per_solved"] == pytest.approx(400 / 3)
    assert s.conditions.loc["none", "seconds_per_solved"] == pytest.approx(8.0)
    assert s.conditions.loc["none", "lint_requests"] == 2
    assert s.comparisons.loc["new-lints", "mde"] != s.comparisons.loc["new-lints", "mde"]  # 4 pairs
    assert "4 pairs detect a difference in success rate of none (too few pairs)" in repr(s)


def test_experiment_takes_names_for_the_agent_and_the_suite():
    from shadowkernel.evals.experiment import as_agent, as_suite

    builtin = as_suite("builtin")
    assert builtin == sk.builtin_suite() == as_suite(None) == as_suite(builtin.root)
    agent = as_agent("simulated", builtin)
    assert agent.simulated and agent.suite is builtin


@pytest.mark.parametrize(
    ("call", "argument"),
    [
        (lambda: sk.experiment(agent=42, suite="builtin"), "agent=42"),
        (lambda: sk.experiment("simulated", suite="nowhere"), "suite='nowhere'"),
        (lambda: sk.experiment("simulated", conditions=["loud"]), "condition 'loud'"),
        (lambda: sk.experiment("simulated", seeds=0), "seeds=0"),
        (lambda: sk.experiment("simulated", budget=0), "budget=0"),
        (lambda: sk.experiment("simulated", concurrency="2"), "concurrency='2'"),
        (lambda: sk.experiment("simulated", workers=3), "workers=3"),
        (lambda: summary("results"), "df: give the DataFrame"),
        (lambda: summary(cells(), baseline="nope"), "baseline='nope'"),
        (lambda: summary(cells(), n_boot=0), "n_boot=0"),
        (lambda: sk.mutation_suite("/nowhere", "pytest"), "path='/nowhere'"),
        (lambda: sk.mutation_suite(".", "pytest", n=0), "n=0"),
        (lambda: sk.swebench_suite([], {}), "repos={}"),
        (lambda: sk.swebench_suite("x.jsonl", {"a/b": "/tmp"}), "instances='x.jsonl'"),
    ],
)
def test_bad_arguments_name_the_argument(call, argument):
    with pytest.raises(ShadowError) as info:
        call()
    assert argument in str(info.value) and isinstance(info.value, ArgumentError)


def test_bug_reports_leave_out_counts_that_vary_between_runs():
    """jmespath's threaded cache test counts its threads' errors: a count that varies."""
    from shadowkernel.evals.mutation_suite import clean_report

    def report(chars: int, more: int) -> str:
        return (f"/co/jmespath/parser.py:91: in parse\nE   AssertionError: Lists differ: "
                f"[ValueError('Sample larger[{chars} chars]')] != []\nE   First list contains "
                f"{more} additional elements.\nE   Diff is {chars + 9} characters long.")  # fmt: skip

    assert clean_report(report(593713, 9896), "/co") == clean_report(report(594253, 9905), "/co")
    assert clean_report(report(1, 2), "/co").startswith("jmespath/parser.py:91: in parse")


def test_bug_reports_leave_out_values_read_from_the_clock():
    """parse's tests compare with `datetime.today()`: pytest shows the time of the run."""
    from shadowkernel.evals.mutation_suite import clean_report

    def report(now: str) -> str:
        return ('E   assert datetime.date(1900, 1, 9) == datetime.date(2026, 1, 9)\n'
                'E    +  where datetime.date(2026, 1, 9) = date(2026, 1, 9)\n'
                f'E    +    where 2026 = {now}.year\n'
                f'E    +      where {now} = <built-in method today of type object at '
                '0x7f3a2c>()\nE    +        where <built-in method today of type object at '
                '0x7f3a2c> = datetime.today')  # fmt: skip

    first = clean_report(report("datetime.datetime(2026, 12, 2, 1, 57, 50, 677460)"), "/co")
    assert first == clean_report(report("datetime.datetime(2026, 12, 2, 2, 5, 48, 993442)"),
                                 "/co")  # fmt: skip
    assert "1, 57" not in first and "datetime.date(1900, 1, 9)" in first


def test_bug_reports_leave_out_addresses_even_where_pytest_cut_them():
    """pytest's saferepr cuts a long repr in the middle, leaving part of an address on either
    side of "..." (toolz's and boltons' reports, 2026-12-02): a real failing run, twice."""
    import subprocess
    import sys

    from shadowkernel.evals.mutation_suite import clean_report

    shapes = ["E   assert [(<test_itert...56ba690>), ()] == [(<test_itert...fda256ba690>)]",
              "E   assert <test_dicttoo...x7f91de242110> == <test_dicttoo...x7f91de243310>",
              "E   AssertionError: assert '<object obje...7f0e313a1f50>' == '123'",
              "E   assert 'FilePerms(us...f92b80979d0>)' == \"FilePerms(us...x', other='')\"",
              "E   assert '<object object at 0x7f...>' == 'x'",
              "E   AssertionError: Lists differ: [('label', <tests.test_more.ZipBroadcastTe"
              "[49 chars]90>)] != []",
              "E    +  where False = <function is_uuid at 0x7f0e313a1f50>(UUID('a3a9f839-dd38-"
              "436d-af4b-595db0bdd21d'))",
              "E    +  where 25 = len('-72153b5bf01a0867ae2c70db')"]  # fmt: skip
    cleaned = [clean_report(s, "/co") for s in shapes]
    assert cleaned[0] == "E   assert [(<test_itert...?>), ()] == [(<test_itert...?>)]"
    assert cleaned[3].endswith("== \"FilePerms(us...x', other='')\"")
    assert cleaned[4] == "E   assert '<object object at 0x?...>' == 'x'"
    assert cleaned[5].endswith("ZipBroadcastTe[...]?>)] != []")  # unittest's cut
    assert cleaned[6].endswith("<function is_uuid at 0x?>(UUID('<uuid>'))")  # boltons' uuid4()
    assert cleaned[7].endswith("len('-<hex>')")  # boltons' GUIDerator: os.urandom and time
    assert not any(__import__("re").search(r"[0-9a-f]{5}>", c) for c in cleaned)

    test = ("class Thing:\n    pass\n\n\ndef test_pairs():\n"
            "    assert [(Thing(), Thing()), ()] == [(Thing(),)]\n\n\n"
            "def test_text():\n    assert repr(object()) == '123'\n")  # fmt: skip

    def failures(folder: str) -> str:
        with open(f"{folder}/test_shapes.py", "w") as f:
            f.write(test)
        run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                              "test_shapes.py"], cwd=folder, capture_output=True, text=True,
                             env={"PATH": "/usr/bin:/bin", "PYTHONHASHSEED": "0"})  # fmt: skip
        return "\n".join(x for x in run.stdout.splitlines() if x.startswith("E "))

    import tempfile

    with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
        first, second = failures(a), failures(b)
    assert "...?>" in clean_report(first, "/co") and "0x?" in clean_report(first, "/co")
    assert clean_report(first, "/co") == clean_report(second, "/co")


# Loads the seccomp program given in hex as argv[1] (PR_SET_NO_NEW_PRIVS, then
# PR_SET_SECCOMP with SECCOMP_MODE_FILTER), then execs argv[2:].
LOAD_FILTER = """
import ctypes, os, struct, sys
program = ctypes.create_string_buffer(bytes.fromhex(sys.argv[1]))
fprog = struct.pack("=HxxxxxxQ", len(program.raw) // 8, ctypes.addressof(program))
libc = ctypes.CDLL(None, use_errno=True)
if libc.prctl(38, 1, 0, 0, 0) or libc.prctl(22, 2, ctypes.c_char_p(fprog), 0, 0):
    sys.exit(f"no seccomp filter: {os.strerror(ctypes.get_errno())}")
os.execvp(sys.argv[2], sys.argv[2:])
"""


def refusing_personality(machine: str) -> str:
    """A program (hex) under which personality(2) answers EPERM to anything but a query, as
    Docker's default profile answers ADDR_NO_RANDOMIZE; built with the sandbox's own BPF."""
    import errno

    from shadowkernel.run import seccomp as bpf

    number = {"x86_64": 135, "aarch64": 92}[machine]  # asm/unistd_64.h, asm-generic/unistd.h
    ins = bpf._ins
    return b"".join([ins(bpf.LD_ABS_W, bpf.OFFSET_NR), ins(bpf.JEQ, number, 0, 3),
                     ins(bpf.LD_ABS_W, bpf.OFFSET_ARG0), ins(bpf.JEQ, 0xFFFFFFFF, 1, 0),
                     ins(bpf.RET, bpf.RET_ERRNO | errno.EPERM),
                     ins(bpf.RET, bpf.RET_ALLOW)]).hex()  # fmt: skip


@pytest.mark.parametrize("randomization", ["as the machine allows", "refused"])
def test_reports_print_a_set_holding_none_alike_in_every_run(tmp_path, randomization):
    """Before Python 3.12 `None`'s hash is its address, so ASLR reorders a set holding `None`
    from run to run (toolz's `test_outer_join`, 2026-12-02). The driver runs whose reports a
    suite keeps start with randomization off where the kernel lets them and print sets in
    their items' reprs' order where the items do not sort: the same report in three
    processes, also in a child whose seccomp filter refuses turning randomization off (CI's
    container did, 2026-12-03). CI=1 keeps pytest from cutting the report short, so its full
    diff is compared too."""
    import os
    import subprocess
    import sys

    from shadowkernel.evals.check import DRIVER

    if randomization == "refused" and os.uname().machine not in ("x86_64", "aarch64"):
        pytest.skip(f"personality's system call number is not known here ({os.uname().machine})")
    (tmp_path / "test_pairs.py").write_text(
        "def test_pairs():\n"
        "    assert {(i, None) for i in range(12)} | {(None, i) for i in range(12)} == {1}\n"
    )
    spec = json.dumps({"hidden": ["test_pairs.py::test_pairs"], "visible": [], "outcomes": True,
                       "options": ["-p", "no:cacheprovider"]})  # fmt: skip
    command = [sys.executable, DRIVER, "--spec", spec]
    if randomization == "refused":
        refused = [sys.executable, "-c", LOAD_FILTER, refusing_personality(os.uname().machine)]
        command = [*refused, *command]
        probe = subprocess.run([*refused, "setarch", "-R", "true"], capture_output=True,
                               text=True)  # fmt: skip
        if probe.stderr.startswith("no seccomp filter"):
            pytest.skip(f"this machine lets no process load a seccomp filter ({probe.stderr})")
        assert probe.returncode != 0, probe.stderr  # really refused: setarch -R failed

    def report() -> str:
        run = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True,
                             check=False, env={**os.environ, "CI": "1"})  # fmt: skip
        line = next(x for x in run.stdout.splitlines() if x.startswith("@@shadowkernel-result"))
        return json.loads(line.split(" ", 1)[1])["reports"]["test_pairs.py::test_pairs"]

    first = report()
    assert "(None, " in first and "Extra items in the left set" in first and "Full diff" in first
    assert report() == first and report() == first


def test_extra_items_lists_are_sorted_each_up_to_its_end():
    """Each "Extra items" list is sorted on its own; what follows a list (a blank line, the
    next list, the full diff) stays where it was."""
    from shadowkernel.evals._pytest_driver import sorted_set_items

    lines = ["{3, None} == {1}", "", "Extra items in the left set:", "None", "3",
             "Extra items in the right set:", "1", "0", "", "Full diff:", "  {", "+ 3,"]  # fmt: skip
    assert sorted_set_items(lines) == [
        "{3, None} == {1}", "", "Extra items in the left set:", "3", "None",
        "Extra items in the right set:", "0", "1", "", "Full diff:", "  {", "+ 3,"]  # fmt: skip
    assert sorted_set_items(["Extra items in the left set:", "b", "a"]) == [
        "Extra items in the left set:", "a", "b"]  # fmt: skip


def test_a_test_keeps_its_first_report_and_its_later_failing_subtests_are_one_line(tmp_path):
    """Under one mutant more-itertools' islice tests failed thousands of subtests, and pytest
    parsed the 5,000-line module for every traceback entry of each: over 100 s per run, so
    `validate()` timed out (2026-12-02). The report kept is the first failure's, in full;
    the later failures of the same test take pytest's one-line form."""
    import subprocess
    import sys

    from shadowkernel.evals.check import DRIVER

    (tmp_path / "test_many.py").write_text(
        "import unittest\n\n\nclass Many(unittest.TestCase):\n"
        "    def test_subtests(self):\n"
        "        for i in range(40):\n"
        "            with self.subTest(i=i):\n"
        "                self.assertEqual(i, -1)\n"
    )
    test = "test_many.py::Many::test_subtests"
    spec = json.dumps({"hidden": [test], "visible": [], "outcomes": True,
                       "options": ["-p", "no:cacheprovider", "-q", "--tb=short"]})  # fmt: skip
    run = subprocess.run([sys.executable, DRIVER, "--spec", spec], cwd=tmp_path,
                         capture_output=True, text=True, check=False)  # fmt: skip
    line = next(x for x in run.stdout.splitlines() if x.startswith("@@shadowkernel-result"))
    result = json.loads(line.split(" ", 1)[1])
    assert result["outcomes"] == {test: "failed"}
    assert "in test_subtests" in result["reports"][test]  # the first failure, with its source
    assert "AssertionError: 0 != -1" in result["reports"][test]
    output = run.stdout.split("@@shadowkernel-result")[0]  # pytest's own, without the JSON
    assert "40 failed" in output
    assert output.count("in test_subtests") == 1, output[-2000:]  # one short traceback
