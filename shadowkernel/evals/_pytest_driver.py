"""Run inside the shadow by the check: the visible tests (optionally), then the hidden tests.

Invoked as a script (not `-m`), so the run imports pytest and nothing of shadowkernel. One
process serves both test sets, which halves a check's cost (the interpreter and pytest start
once). Prints a marker before each set and a JSON line with both exit codes at the end; exits
with the hidden tests' exit code.

    python _pytest_driver.py INI HIDDEN [VISIBLE...]
"""

import json
import os
import sys

VISIBLE = "@@shadowkernel-visible@@"
HIDDEN = "@@shadowkernel-hidden@@"
RESULT = "@@shadowkernel-result@@ "


def main(argv):
    ini, hidden, visible = argv[0], argv[1], argv[2:]
    sys.path.insert(0, os.getcwd())  # the project under test, as `python -m pytest` would
    import pytest

    options = ["-c", ini, "--rootdir", os.getcwd()] if ini != "-" else ["--rootdir", os.getcwd()]
    codes = {}
    if visible:
        print(VISIBLE, flush=True)
        codes["visible"] = int(pytest.main([*options, *visible]))
    print(HIDDEN, flush=True)
    codes["hidden"] = int(pytest.main([*options, hidden]))
    print(RESULT + json.dumps(codes), flush=True)
    return codes["hidden"]


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
