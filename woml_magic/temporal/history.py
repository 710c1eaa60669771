"""A WOML ``Run`` rebuilt from a workflow execution's history alone (spec §9).

No journal is needed: the history holds the workflow's input (the document, the
payload, a resumed run's past) and every activity's result, and replaying it through
the workflow's own code (Temporal's ``Replayer``) emits the run's WOML events again.
So a run started from one kernel can be shown from another, finished or not.
"""

from __future__ import annotations

from temporalio.client import Client
from temporalio.worker import Replayer, UnsandboxedWorkflowRunner

from ..errors import WomlRunError
from ..events import event_from_dict
from ..model import Run
from .document import from_data
from .options import TemporalOptions, connect
from .workflow import WORKFLOW, RunInput, WomlWorkflow, capturing


async def load_run(run_id: str, options: TemporalOptions) -> Run:
    """The ``Run`` of the latest execution of workflow ``run_id``, from its history."""
    from temporalio.service import RPCError

    client: Client = await connect(options)
    handle = client.get_workflow_handle(run_id)
    try:
        history = await handle.fetch_history()
    except RPCError as exc:
        raise WomlRunError(
            f"no run {run_id!r} on Temporal at {options.target or 'the local dev server'} "
            f"(namespace {options.namespace}): {exc.message}"
        ) from None
    events = history.events
    if not events or not events[0].HasField("workflow_execution_started_event_attributes"):
        raise WomlRunError(f"the history of {run_id!r} does not start a workflow execution")
    started = events[0].workflow_execution_started_event_attributes
    if started.workflow_type.name != WORKFLOW:
        raise WomlRunError(
            f"{run_id!r} is a {started.workflow_type.name!r} workflow, not a WOML run"
        )
    (data,) = await client.data_converter.decode(started.input.payloads, [RunInput])
    replayer = Replayer(workflows=[WomlWorkflow], workflow_runner=UnsandboxedWorkflowRunner())
    with capturing(run_id, started.original_execution_run_id or history.run_id) as emitted:
        await replayer.replay_workflow(history)
    document = from_data(data.document)
    past = [event_from_dict(e) for e in data.past]
    return Run.from_events(document, [*past, *(event_from_dict(e) for e in emitted)])
