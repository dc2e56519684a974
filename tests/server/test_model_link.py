"""What a socket's ModelLink gives again to a resumed model connection
(audiocore_server/models/model_link.py)."""

from __future__ import annotations

from google.genai import types

from audiocore_server.models.model_link import ModelLink


def text(words: str) -> types.Content:
    return types.Content(role="user", parts=[types.Part(text=words)])


def audio(seconds: float, rate: int = 16_000) -> types.Blob:
    return types.Blob(mime_type=f"audio/pcm;rate={rate}", data=bytes(2 * int(seconds * rate)))


def test_nothing_is_given_again_unless_the_connection_ended_early() -> None:
    told: list[str] = []
    link = ModelLink(on_recovered=told.append)
    link.sent(text("hello"))
    assert link.to_give_again() == []  # a goAway hand-over: the handle holds it all
    link.ended_early("drop")
    assert link.to_give_again() == [text("hello")]
    assert told == ["drop"]
    assert link.to_give_again() == []  # once


def test_a_new_handle_forgets_what_it_holds() -> None:
    link = ModelLink()
    link.sent(text("first"))
    link.mark()  # the model began its answer to "first"
    link.resumable()
    link.sent(types.ActivityStart())
    link.sent(audio(0.5))
    link.sent(types.ActivityEnd())
    link.ended_early("stall")
    assert link.to_give_again() == [types.ActivityStart(), audio(0.5), types.ActivityEnd()]


def test_audio_is_bounded_oldest_first_and_tool_answers_are_not_kept() -> None:
    link = ModelLink(max_audio_s=1.0)
    link.sent(audio(0.6, rate=24_000))
    link.sent(text("between"))
    link.sent(audio(0.6))
    answer = types.Content(
        role="user",
        parts=[types.Part(function_response=types.FunctionResponse(name="x", response={}))],
    )
    link.sent(answer)
    link.sent(types.Blob(mime_type="audio/pcm", data=b""))  # empty: nothing to keep
    link.ended_early("drop")
    assert link.to_give_again() == [text("between"), audio(0.6)]


def test_a_turn_that_called_a_tool_is_not_given_again_but_told() -> None:
    told: list[str] = []
    link = ModelLink(on_recovered=told.append)
    link.sent(text("what's the weather"))
    link.tool_called()
    link.ended_early("drop")
    assert link.to_give_again() == []
    assert told == ["drop"]  # the client still hears the model is back


def test_a_stall_reaches_the_open_connection_once() -> None:
    link = ModelLink()
    assert not link.stall()  # no connection open
    stalled = link.opened()
    assert link.stall() and stalled.is_set()
    assert not link.stall()  # already given up
    again = link.opened()  # the resumed connection
    assert not again.is_set() and link.stall()


def test_what_is_given_again_is_kept_once_for_a_second_loss() -> None:
    """Given again, the items are sent (and kept) again: a second loss
    before the next handle gives them once more, not twice."""
    link = ModelLink()
    link.sent(text("unanswered"))
    link.ended_early("drop")
    for item in link.to_give_again():
        link.sent(item)  # what the new connection's send does
    link.ended_early("drop")
    assert link.to_give_again() == [text("unanswered")]


def test_a_renewal_takes_what_is_owed_without_a_notice() -> None:
    told: list[str] = []
    link = ModelLink(on_recovered=told.append)
    link.sent(text("just typed"))
    assert link.take_since() == [text("just typed")]
    assert link.take_since() == [] and told == []


def test_a_handle_holds_only_what_the_model_had_when_it_began_answering() -> None:
    """A handle reaches us after what we sent since it was made (the one at
    a connection's start, or one that crossed the user's next words): those
    words stay to be given again."""
    link = ModelLink()
    link.sent(text("unanswered"))
    link.resumable()  # made before "unanswered" reached the service
    link.ended_early("drop")
    assert link.to_give_again() == [text("unanswered")]
    link.sent(text("answered"))
    link.mark()
    link.sent(audio(0.5))  # after the answer began
    link.resumable()
    link.ended_early("drop")
    assert link.to_give_again() == [audio(0.5)]
