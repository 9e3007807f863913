"""An execution as the text a model reads in a tool result; shared by the adapters."""
from __future__ import annotations

from warden.types import Execution


def execution_text(execution: Execution) -> str:
    """stdout, stderr, the value, the traceback and, for limits, the outcome and why."""
    parts = []
    if execution.stdout_bytes:
        parts.append(execution.stdout.rstrip("\n"))
    if execution.stderr_bytes:
        parts.append("[stderr]\n" + execution.stderr.rstrip("\n"))
    if execution.text is not None:
        parts.append(execution.text)
    if execution.error is not None:
        parts.append(str(execution.error))
    if not execution.ok and execution.outcome != "ERROR":
        parts.append("[%s] %s" % (execution.outcome, execution.message) if execution.message
                     else "[%s]" % execution.outcome)
    return "\n".join(parts) if parts else "(no output)"
