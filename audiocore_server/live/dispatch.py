"""Each client message, decoded and admitted, to the part of the
conversation it is for: audio to the mic, turns and edges to the uplink,
answers to the delegated calls, a barge-in to the playout, a task's cancel
to the task engine (at most ``CANCELS_AT_ONCE`` under way)."""

from __future__ import annotations

from collections.abc import Callable

import anyio.abc
from google.adk.agents.live_request_queue import LiveRequest

from ..tasks import TaskManager
from ..wire import chat_messages, chunks, fields, protocol
from .conversation import Conversation

CANCELS_AT_ONCE = 2  # task_cancel requests under way per connection; more are refused

Dispatch = Callable[[protocol.ClientMessage], None]


class Dispatcher:
    def __init__(self, c: Conversation, tasks: TaskManager, group: anyio.abc.TaskGroup) -> None:
        self.c = c
        self._tasks = tasks
        self._group = group  # the connection's: a cancel runs beside the receiver
        self._cancels = 0  # task_cancel requests under way

    def dispatch(self, msg: protocol.ClientMessage) -> None:
        c, uplink = self.c, self.c.uplink
        if isinstance(msg, protocol.Audio):
            c.mic.audio(msg)
        elif isinstance(msg, protocol.Interrupt):
            c.playout.barge_in("client")
        elif isinstance(msg, protocol.Ping):
            c.tell(chunks.Pong(msg.timestamp))
        elif isinstance(msg, protocol.Start):
            raise fields.InputError("start: only allowed as the first message")
        elif isinstance(msg, (fields.ToolApproval, fields.ToolResult)):
            c.delegations.answer([msg])
        elif isinstance(msg, protocol.ToolResponse):
            c.delegations.answer_function_response(msg.tool_call_id, msg.response)
        elif isinstance(msg, protocol.TaskCancel):
            if self._cancels >= CANCELS_AT_ONCE:
                raise fields.InputError("task_cancel: the last ones are still being cancelled")
            self._cancels += 1
            self._group.start_soon(self._cancel_task, msg.task_id)
        elif isinstance(msg, chat_messages.ChatSubmit):
            c.delegations.answer(msg.answers)
            if msg.text is not None or msg.images:
                uplink.user_turn(msg.text, msg.images)
        elif isinstance(msg, protocol.ActivityStart):
            uplink.activity_start()
        elif isinstance(msg, protocol.ActivityEnd):
            uplink.activity_end()
        elif isinstance(msg, protocol.AudioControl):
            if msg.action == "stop":
                uplink.audio_stop()
        elif isinstance(msg, protocol.Close):
            uplink.close()
        elif isinstance(msg, protocol.Text):
            uplink.user_turn(msg.text)
        elif isinstance(msg, fields.Image):
            uplink.user_turn(None, (msg,))
        elif isinstance(msg, protocol.UserContent):
            uplink.content(LiveRequest(content=msg.content, state_delta=msg.state_delta))

    async def _cancel_task(self, task_id: str | None) -> None:
        """The client's cancel button: confirmed when the task says so (its
        card); a task that is not there gets an error."""
        try:
            if await self._tasks.cancel(self.c.delivery.owner, task_id) is None:
                self.c.report(
                    f"task_cancel: no task {task_id!r}" if task_id else "task_cancel: no task"
                )
        finally:
            self._cancels -= 1
