"""Agents and the agent loop: propose -> stage -> check -> feedback -> revise.

The loop talks to a branch through the public API only, so agents/ may import workspace/ and
what lies below it; evals/ and the faces sit above it. An agent is any callable from an
`Observation` to edits (see `edits.normalize` for the forms it may return, or a `Proposal`
carrying token counts). Adapters: `ScriptedAgent` replays
edits, `SimulatedAgent` is a seeded stand-in with stated probabilities (always labelled
simulated), `OpenAIChatAgent` talks to any OpenAI-compatible server.
"""

from .edits import AgentOutputError, Delete, FullText, Patch, Proposal, Replace, parse_reply
from .loop import CheckResult, Episode, Step, run_episode
from .observation import CONDITIONS, Condition, LintShown, Observation, RunShown
from .openai_chat import OpenAIChatAgent
from .scripted import ScriptedAgent, ScriptedFailure
from .simulated import Behaviour, SimulatedAgent

__all__ = [
    "CONDITIONS",
    "AgentOutputError",
    "Behaviour",
    "CheckResult",
    "Condition",
    "Delete",
    "Episode",
    "FullText",
    "LintShown",
    "Observation",
    "OpenAIChatAgent",
    "Patch",
    "Proposal",
    "Replace",
    "RunShown",
    "ScriptedAgent",
    "ScriptedFailure",
    "SimulatedAgent",
    "Step",
    "parse_reply",
    "run_episode",
]
