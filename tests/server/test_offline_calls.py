"""Typed ``call`` and ``transfer`` lines drive any agent on the offline model
(``audiocore_server/offline/call_cues.py``): the parser's rules, then real
ADK runs — ``Runner.run_async`` and ``run_live`` — of an agent of this test's
own, whose tools record what they were called with."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from google.adk.agents import Agent, LiveRequestQueue, RunConfig
from google.adk.events import Event
from google.adk.flows.llm_flows.context._fencing import (
    OTHER_AGENT_CONTEXT_PREAMBLE,
    QUOTED_CONTENT_BEGIN,
    QUOTED_CONTENT_END,
)
from google.adk.models.base_llm_connection import BaseLlmConnection
from google.adk.models.llm_request import LlmRequest
from google.adk.runners import InMemoryRunner
from google.genai import types

from audiocore_server.offline import call_cues
from audiocore_server.offline.call_cues import MAX_ARGUMENT_CHARS, MAX_DEPTH, Cued
from audiocore_server.offline.model import OfflineLiveModel

TOOLS = {"lookup_order", "add", "transfer_to_agent"}
TARGETS = frozenset({"billing_agent", "desk"})


def read(text: str) -> Cued | None:
    return call_cues.read(text, TOOLS, TARGETS)


# ---------------------------------------------------------------- the parser


def test_a_call_line_is_the_tool_and_its_arguments() -> None:
    assert read('call lookup_order {"order_id": "A-1001"}') == Cued(
        [("lookup_order", {"order_id": "A-1001"})], []
    )
    assert read("call add") == Cued([("add", {})], [])
    assert read('call add{"a": 1}') == Cued([("add", {"a": 1})], [])


def test_several_lines_are_several_calls_in_their_order_and_prose_is_ignored() -> None:
    text = 'Please:\ncall add {"a": 1, "b": 2}\n\ncall lookup_order {"order_id": "B"}\nthanks'
    assert read(text) == Cued([("add", {"a": 1, "b": 2}), ("lookup_order", {"order_id": "B"})], [])
    twice = 'call add {"a": 1}\ncall add {"a": 2}'  # the same tool twice: two calls
    assert read(twice) == Cued([("add", {"a": 1}), ("add", {"a": 2})], [])


def test_transfer_is_a_call_of_adks_transfer_tool() -> None:
    assert read("transfer billing_agent") == Cued(
        [("transfer_to_agent", {"agent_name": "billing_agent"})], []
    )
    both = 'call lookup_order {"order_id": "A"}\ntransfer billing_agent'
    assert read(both) == Cued(
        [
            ("lookup_order", {"order_id": "A"}),
            ("transfer_to_agent", {"agent_name": "billing_agent"}),
        ],
        [],
    )
    # Not known whom it may name: the call is made, as named.
    assert call_cues.read("transfer anyone", TOOLS) == Cued(
        [("transfer_to_agent", {"agent_name": "anyone"})], []
    )


@pytest.mark.parametrize(
    "text",
    [
        'Call add {"a": 1}',  # a phone capitalises the first word
        'CALL add {"a": 1}',
        '  \tcall  add \t {"a": 1}  ',
        'call\u00a0add\u00a0{"a": 1}',  # no-break spaces
        'call\u3000add {"a": 1}\u3000',  # ideographic space
        '\ufeffcall add {"a": 1}',  # a byte order mark before a pasted line
        '\u200bcall add {"a": 1}\u200b',  # zero-width spaces at its edges
        'call add {"a": 1}\r\n',
        'hello\u2028call add {"a": 1}',  # a Unicode line separator
        'hello\r\ncall add {"a": 1}\r\nbye',
    ],
)
def test_odd_whitespace_around_a_command_is_whitespace(text: str) -> None:
    assert read(text) == Cued([("add", {"a": 1})], [])


@pytest.mark.parametrize(
    "text",
    [
        "hello",
        "",
        "please call add",  # a command starts its line
        "call 5 friends",  # a name starts with a letter or _
        "transfer 5 EUR to Alice",  # more words after the name: not a command
        "transfer billing_agent now",
        "recall add",
    ],
)
def test_text_without_a_command_line_is_not_read(text: str) -> None:
    assert read(text) is None


@pytest.mark.parametrize(
    ("text", "refusal"),
    [
        (
            "call delete_everything {}",
            "I have no tool named delete_everything; my tools are: add, lookup_order, "
            "transfer_to_agent.",
        ),
        (
            'call add {"a": 1,}',
            "The arguments for add are not valid JSON: "
            "Expecting property name enclosed in double quotes at character 9.",
        ),
        (
            "call add {a: 1}",
            "The arguments for add are not valid JSON: "
            "Expecting property name enclosed in double quotes at character 2.",
        ),
        (
            "call add \u201ca\u201d",
            "The arguments for add are not valid JSON: Expecting value at character 1 "
            "(typographic quotes: JSON needs straight double quotes).",
        ),
        ("call add [1, 2]", "The arguments for add must be a JSON object, got an array."),
        ('call add "x"', "The arguments for add must be a JSON object, got a string."),
        ("call add 42", "The arguments for add must be a JSON object, got a number."),
        ("call add true", "The arguments for add must be a JSON object, got a boolean."),
        ("call add null", "The arguments for add must be a JSON object, got null."),
        (
            'call add {"a": NaN}',
            "The arguments for add are not JSON: expected finite numbers, got NaN (not JSON).",
        ),
        (
            'call add {"a": -Infinity}',
            "The arguments for add are not JSON: expected finite numbers, got -Infinity "
            "(not JSON).",
        ),
        (
            'call add {"a": "' + "x" * MAX_ARGUMENT_CHARS + '"}',
            f"The arguments for add are {MAX_ARGUMENT_CHARS + 9} characters long; "
            f"I take at most {MAX_ARGUMENT_CHARS}.",
        ),
        (
            'call add {"a": ' + "[" * MAX_DEPTH + "]" * MAX_DEPTH + "}",
            f"The arguments for add are nested deeper than {MAX_DEPTH} levels.",
        ),
        (
            # Past the C parser's own recursion limit (a RecursionError there).
            'call add {"a": ' + "[" * 10_000 + "]" * 10_000 + "}",
            f"The arguments for add are nested deeper than {MAX_DEPTH} levels.",
        ),
        (
            'call add {"a": "\\ud800"}',
            "The arguments for add are refused: expected text without lone surrogates "
            "(\\ud800-\\udfff).",
        ),
        (
            'call add {"a": "\ud800"}',  # a lone surrogate in the str itself
            "The arguments for add are refused: expected text without lone surrogates "
            "(\\ud800-\\udfff).",
        ),
        (
            'call add {"a": ' + "9" * 5000 + "}",
            "The arguments for add are refused: Exceeds the limit (4300 digits)",
        ),
        (
            "transfer nobody",
            "I cannot transfer to nobody; I can transfer to: billing_agent, desk.",
        ),
        (
            'call transfer_to_agent {"agent_name": ["desk"]}',
            "I cannot transfer to ['desk']; I can transfer to: billing_agent, desk.",
        ),
        ("transfer desk\ntransfer billing_agent", "I can transfer to one agent at a time."),
    ],
)
def test_a_refused_line_is_answered_in_words(text: str, refusal: str) -> None:
    cued = read(text)
    assert cued is not None and cued.calls == []
    assert cued.answer.startswith(refusal), cued.answer


def test_arguments_of_the_longest_length_are_taken() -> None:
    longest = '{"a": "' + "x" * (MAX_ARGUMENT_CHARS - 9) + '"}'
    assert len(longest) == MAX_ARGUMENT_CHARS
    assert read(f"call add {longest}") == Cued([("add", {"a": "x" * (MAX_ARGUMENT_CHARS - 9)})], [])


def test_nested_within_the_limit_is_taken() -> None:
    deep = "[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1)
    cued = read('call add {"a": ' + deep + "}")
    assert cued is not None and cued.refusals == []


def test_one_refused_line_refuses_them_all_with_every_reason() -> None:
    cued = read('call add {"a": 1}\ncall nope\ncall lookup_order [1]')
    assert cued is not None and cued.calls == []
    assert cued.answer == (
        "I have no tool named nope; my tools are: add, lookup_order, transfer_to_agent. "
        "The arguments for lookup_order must be a JSON object, got an array."
    )


def test_transfer_without_agents_to_transfer_to_is_refused() -> None:
    cued = call_cues.read("transfer billing_agent", {"add"})
    assert cued == Cued([], ["I cannot transfer to billing_agent: this agent has no "
                             "sub-agents or parent to transfer to."])  # fmt: skip


def test_another_agents_quoted_turn_is_data_not_commands() -> None:
    relayed = (
        f"{OTHER_AGENT_CONTEXT_PREAMBLE} [desk] said: {QUOTED_CONTENT_BEGIN}\n"
        'call add {"a": 1}\n'
        f"transfer desk\n{QUOTED_CONTENT_END}"
    )
    assert read(relayed) is None
    one_line = f'{QUOTED_CONTENT_BEGIN} x {QUOTED_CONTENT_END}\ncall add {{"a": 2}}'
    assert read(one_line) == Cued([("add", {"a": 2})], [])


# ---------------------------------------------------------------- ADK runs


class Desk:
    """An agent of the test's own: a desk with a billing sub-agent, every
    tool recording its calls."""

    def __init__(self, model: OfflineLiveModel | None = None) -> None:
        self.ran: list[tuple[str, dict[str, Any]]] = []
        ran = self.ran

        def lookup_order(order_id: str) -> dict[str, Any]:
            """Look up an order by its id."""
            ran.append(("lookup_order", {"order_id": order_id}))
            return {"order_id": order_id, "status": "shipped"}

        def add(a: int, b: int) -> dict[str, Any]:
            """Add two numbers."""
            ran.append(("add", {"a": a, "b": b}))
            return {"sum": a + b}

        def get_weather(location: str) -> dict[str, Any]:
            """The weather (its name is a demo phrase cue's tool)."""
            ran.append(("get_weather", {"location": location}))
            return {"location": location, "sky": "clear"}

        def refund(order_id: str) -> dict[str, Any]:
            """Refund an order."""
            ran.append(("refund", {"order_id": order_id}))
            return {"refunded": order_id}

        model = model or OfflineLiveModel()
        billing = Agent(name="billing_agent", model=model, description="Refunds.", tools=[refund])
        self.agent = Agent(
            name="desk",
            model=model,
            instruction="You are the front desk.",
            tools=[lookup_order, add, get_weather],
            sub_agents=[billing],
        )


@contextlib.asynccontextmanager
async def running(desk: Desk) -> AsyncIterator[tuple[InMemoryRunner, str]]:
    runner = InMemoryRunner(agent=desk.agent, app_name="offline_calls")
    try:
        session = await runner.session_service.create_session(app_name="offline_calls", user_id="u")
        yield runner, session.id
    finally:
        await runner.close()


async def turn(runner: InMemoryRunner, session_id: str, text: str) -> list[Event]:
    message = types.Content(role="user", parts=[types.Part(text=text)])
    return [
        event
        async for event in runner.run_async(user_id="u", session_id=session_id, new_message=message)
    ]


def _parts(event: Event) -> list[types.Part]:
    return list(event.content.parts or []) if event.content else []


def calls_of(event: Event) -> list[tuple[str | None, dict[str, Any] | None]]:
    return [(p.function_call.name, p.function_call.args) for p in _parts(event) if p.function_call]


def text_of(event: Event) -> str:
    return "".join(p.text for p in _parts(event) if p.text)


def run_turns(desk: Desk, *texts: str) -> list[list[Event]]:
    async def scenario() -> list[list[Event]]:
        async with running(desk) as (runner, session_id):
            return [await turn(runner, session_id, text) for text in texts]

    return asyncio.run(scenario())


def test_a_call_runs_the_function_and_its_result_reaches_the_next_answer() -> None:
    desk = Desk()
    # The arguments hold demo phrase cues (the weather, a declared tool's, and
    # a drawing): the call line wins over both.
    ((call, response, answer),) = run_turns(
        desk, 'call lookup_order {"order_id": "weather in Tokyo, draw a red square"}'
    )
    assert desk.ran == [("lookup_order", {"order_id": "weather in Tokyo, draw a red square"})]
    assert (call.author, calls_of(call)) == (
        "desk",
        [("lookup_order", {"order_id": "weather in Tokyo, draw a red square"})],
    )
    (returned,) = response.get_function_responses()
    assert returned.response == {
        "order_id": "weather in Tokyo, draw a red square",
        "status": "shipped",
    }
    assert text_of(answer) == (
        'lookup_order returned {"order_id": "weather in Tokyo, draw a red square", '
        '"status": "shipped"}.'
    )


def test_two_call_lines_are_two_calls_in_one_step() -> None:
    desk = Desk()
    ((call, response, answer),) = run_turns(
        desk, 'call lookup_order {"order_id": "A-1"}\ncall add {"a": 2, "b": 3}'
    )
    assert calls_of(call) == [("lookup_order", {"order_id": "A-1"}), ("add", {"a": 2, "b": 3})]
    assert desk.ran == [("lookup_order", {"order_id": "A-1"}), ("add", {"a": 2, "b": 3})]
    assert [r.name for r in response.get_function_responses()] == ["lookup_order", "add"]
    assert text_of(answer) == (
        'lookup_order returned {"order_id": "A-1", "status": "shipped"}. add returned {"sum": 5}.'
    )


def test_transfer_hands_the_conversation_to_the_sub_agent() -> None:
    desk = Desk()
    transfer, then = run_turns(desk, "transfer billing_agent", 'call refund {"order_id": "A-1"}')
    call, response, *after = transfer
    assert (call.author, calls_of(call)) == (
        "desk",
        [("transfer_to_agent", {"agent_name": "billing_agent"})],
    )
    assert response.actions.transfer_to_agent == "billing_agent"
    assert after and after[0].author == "billing_agent"
    # The session goes on with the sub-agent: its own tool is declared to it.
    assert [e.author for e in then] == ["billing_agent"] * 3
    assert desk.ran == [("refund", {"order_id": "A-1"})]
    assert text_of(then[-1]) == 'refund returned {"refunded": "A-1"}.'


@pytest.mark.parametrize(
    ("text", "said"),
    [
        (
            "call delete_everything {}",
            "I have no tool named delete_everything; my tools are: add, get_weather, "
            "lookup_order, transfer_to_agent.",
        ),
        (
            'call lookup_order {"order_id": A-1001}',
            "The arguments for lookup_order are not valid JSON: Expecting value at character 14.",
        ),
        (
            'call lookup_order {"order_id": "A-1"}\ncall lookup_order [1]',
            "The arguments for lookup_order must be a JSON object, got an array.",
        ),
        ("transfer nobody", "I cannot transfer to nobody; I can transfer to: billing_agent."),
    ],
)
def test_a_refused_command_is_answered_in_words_and_runs_nothing(text: str, said: str) -> None:
    desk = Desk()
    ((answer,),) = run_turns(desk, text)
    assert (answer.author, text_of(answer), calls_of(answer)) == ("desk", said, [])
    assert desk.ran == []


def test_a_handed_over_task_outcome_is_told_not_read_for_commands() -> None:
    desk = Desk()
    outcome = (
        "[background task task_0123abcd completed] Objective: sum it. "
        'Result: 7\ncall lookup_order {"order_id": "X"} Tell the user this now, briefly.'
    )
    ((answer,),) = run_turns(desk, outcome)
    assert text_of(answer).startswith("Your background task task_0123abcd completed: 7")
    assert desk.ran == []


def test_text_without_commands_is_answered_as_before() -> None:
    desk = Desk()
    ((call, _, answer), (echo,)) = run_turns(desk, "what's the weather in Tokyo", "hello")
    assert calls_of(call) == [("get_weather", {"location": "Tokyo"})]
    assert text_of(echo) == "You said: hello (1 earlier turns in this session)"


# ---------------------------------------------------------------- live


class ConnectionWatch(OfflineLiveModel):
    """The offline model, telling the test each time an agent connects: a
    transferred-to agent says nothing until it is spoken to, and a message
    queued before its connection opens could go to the closing one."""

    connected: Callable[[str], None] | None = None

    @contextlib.asynccontextmanager
    async def _connect(self, llm_request: LlmRequest) -> AsyncIterator[BaseLlmConnection]:
        async with super()._connect(llm_request) as connection:
            if self.connected is not None:
                self.connected(llm_request.model or "")
            yield connection


class LiveRun:
    """``run_live`` in a task; the test awaits the events it wants."""

    def __init__(self, runner: InMemoryRunner, session_id: str) -> None:
        self.queue = LiveRequestQueue()
        self.events: asyncio.Queue[Event | None] = asyncio.Queue()
        self.task = asyncio.create_task(self._consume(runner, session_id))

    async def _consume(self, runner: InMemoryRunner, session_id: str) -> None:
        try:
            async for event in runner.run_live(
                user_id="u",
                session_id=session_id,
                live_request_queue=self.queue,
                run_config=RunConfig(response_modalities=[types.Modality.AUDIO]),
            ):
                self.events.put_nowait(event)
        finally:
            self.events.put_nowait(None)

    def say(self, text: str) -> None:
        self.queue.send_content(types.Content(role="user", parts=[types.Part(text=text)]))

    async def until(self, wanted: Callable[[Event], bool]) -> list[Event]:
        """The events up to and with the first ``wanted`` one."""
        seen = []
        while (event := await self.events.get()) is not None:
            seen.append(event)
            if wanted(event):
                return seen
        raise AssertionError(f"the run ended before the wanted event; it gave {seen}")

    async def close(self) -> None:
        self.queue.close()
        await self.task


def live(desk: Desk, script: Callable[[LiveRun], Any]) -> None:
    async def scenario() -> None:
        async with running(desk) as (runner, session_id):
            run = LiveRun(runner, session_id)
            try:
                await asyncio.wait_for(script(run), timeout=60)
            finally:
                await run.close()

    asyncio.run(scenario())


def test_live_a_typed_call_runs_the_function_and_is_answered() -> None:
    desk = Desk()

    async def script(run: LiveRun) -> None:
        run.say('call lookup_order {"order_id": "A-1001"}')
        events = await run.until(lambda e: bool(text_of(e)))
        assert [c for e in events for c in calls_of(e)] == [
            ("lookup_order", {"order_id": "A-1001"})
        ]
        assert desk.ran == [("lookup_order", {"order_id": "A-1001"})]
        assert text_of(events[-1]) == (
            'lookup_order returned {"order_id": "A-1001", "status": "shipped"}.'
        )
        # And the model speaks, as its answers do.
        rest = await run.until(lambda e: bool(e.turn_complete))
        assert any(p.inline_data for e in rest for p in _parts(e))

    live(desk, script)


def test_live_transfer_hands_the_conversation_to_the_sub_agent() -> None:
    connections: asyncio.Queue[str] = asyncio.Queue()
    desk = Desk(ConnectionWatch(connected=connections.put_nowait))

    async def script(run: LiveRun) -> None:
        await connections.get()  # the desk's
        run.say("transfer billing_agent")
        events = await run.until(lambda e: bool(e.get_function_responses()))
        assert [(e.author, calls_of(e)) for e in events if calls_of(e)] == [
            ("desk", [("transfer_to_agent", {"agent_name": "billing_agent"})])
        ]
        assert events[-1].actions.transfer_to_agent == "billing_agent"
        await connections.get()  # the sub-agent's
        run.say('call refund {"order_id": "A-1"}')
        after = await run.until(lambda e: bool(text_of(e)))
        assert {e.author for e in after} == {"billing_agent"}
        assert desk.ran == [("refund", {"order_id": "A-1"})]
        assert text_of(after[-1]) == 'refund returned {"refunded": "A-1"}.'

    live(desk, script)
