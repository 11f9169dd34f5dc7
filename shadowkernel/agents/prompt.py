"""The prompt an observation becomes (pure), and its size.

Every agent's turn is measured with the same prompt, whether or not the agent reads it (a
scripted agent does not), so "tokens" compare conditions on what the feedback would cost a
model. Tokens are estimated as ceil(characters / 4) unless the model reports its own count.

The condition's template decides how lints are presented (the rest of the prompt is the
same): `plain` lists them under the files (`path:line:col: code message (new)`), `table`
as a markdown table, `inline` as comments under the offending lines of the files, `json`
as one JSON object per line. Add a template by adding a `Template` to `templates.TEMPLATES`.
"""

from __future__ import annotations

import math

from ..text import positions
from .observation import Observation
from .templates import TEMPLATES, annotate

SYSTEM = """\
You are a careful software engineer fixing a small Python project. You see the task, the \
current text of the relevant files, and possibly feedback from the last version you staged \
(lints, the output of a command). Reply with edits only, in one or more of these forms:

path/to/file.py
<<<<<<< SEARCH
exact lines to find (copied from the file)
=======
the lines to put instead
>>>>>>> REPLACE

or a whole new file text in a fence that names the path:
```python path=path/to/file.py
...
```
or a unified diff in a ```diff fence, or a line `DELETE path/to/file.py`.
Each SEARCH text must occur exactly once in its file. If the task is done, reply DONE.\
"""


def render(obs: Observation) -> str:
    """The user message for one turn."""
    template = TEMPLATES[obs.template]
    parts = [f"# Task\n{obs.task.strip()}"]
    for path in sorted(obs.files):
        text = obs.files[path]
        if template.inline and obs.lints:
            text = annotate(path, text, obs.lints)
        parts.append(f"# File {path}\n```python path={path}\n{positions.terminated(text)}```")
    if obs.history:
        parts.append("# Earlier turns\n" + "\n".join(obs.history))
    if obs.lints and template.section is not None:
        parts.append("# Lints of your last version\n" + template.section(obs.lints))
    elif obs.lints:
        elsewhere = [x for x in obs.lints if x.path not in obs.files]
        parts.append("# Lints of your last version\nShown as `# ^ lint` comments in the files "
                     "above." + "".join("\n" + x.render() for x in elsewhere))  # fmt: skip
    if obs.run is not None:
        parts.append("# Output of the last run\n" + obs.run.render())
    parts.append(f"# Turn {obs.turn + 1}\nReply with your edits.")
    return "\n\n".join(parts) + "\n"


def messages(obs: Observation, system: str = SYSTEM) -> list[dict[str, str]]:
    return [{"role": "system", "content": system}, {"role": "user", "content": render(obs)}]


def prompt_size(obs: Observation, system: str = SYSTEM) -> tuple[int, int]:
    """(characters, estimated tokens) of the prompt for `obs`."""
    chars = len(system) + len(render(obs))
    return chars, math.ceil(chars / 4)
