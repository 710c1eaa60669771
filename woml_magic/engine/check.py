"""Script checking: every script compiles before anything runs (spec §2.3)."""

from __future__ import annotations

import asyncio

from ..errors import WomlSyntaxError
from ..model import Workflow
from ..runtime.pool import WorkerPool

#: How long compiling one script may take before the check gives up (spec §2.3).
CHECK_SECONDS = 10.0


async def check_scripts(workflow: Workflow, pool: WorkerPool) -> None:
    """Compile every script before anything runs (spec §2.3); raise ``WomlSyntaxError``."""
    pending = [step for step in workflow.steps if not pool.compiled(step.script)]
    if not pending:
        return
    async with pool.worker() as worker:
        for step in pending:
            try:
                problem = await asyncio.wait_for(
                    worker.check_syntax(step.script, step.script_line, step.script_column),
                    CHECK_SECONDS,
                )
            except asyncio.TimeoutError:
                # Only a script that closes its own function early can run code here.
                problem = (
                    f"compiling it did not finish within {CHECK_SECONDS:g}s; a script must be "
                    "the body of one async function (is there an unbalanced `}`?)",
                    step.script_line,
                    step.script_column,
                )
            if problem is not None:
                message, line, column = problem
                raise WomlSyntaxError(
                    f"JavaScript syntax error in the script of step {step.id!r}: {message}",
                    line,
                    column,
                ).with_source(workflow.cell_text())
            pool.remember_compiled(step.script)
