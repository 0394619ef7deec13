"""The question contract: response validation (issue 7 "Bad input"), keys, and the entry point."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chord.facet_packages import installed_facet_packages, load_generation
from chord.remote import RemoteServiceError
from facets_question.contract import QuestionDialogs, QuestionRequest, check_response, dialog_key


def request(options: list[str], allow_text: bool) -> QuestionRequest:
    return {
        "conversationId": 1,
        "callId": "q-1",
        "taskId": 4,
        "question": "Which?",
        "options": options,
        "allowText": allow_text,
    }


OPEN = request(["red", "green"], True)
STRICT = request(["red", "green"], False)


@pytest.mark.parametrize(
    ("value", "req"),
    [
        ({"outcome": "answered", "answer": "red"}, STRICT),
        ({"outcome": "answered", "answer": "blue", "by": "tui"}, OPEN),
        ({"outcome": "cancelled"}, STRICT),
        ({"outcome": "cancelled", "by": "web"}, OPEN),
    ],
)
def test_fitting_responses_are_returned_as_fresh_copies(
    value: dict[str, Any], req: QuestionRequest
) -> None:
    checked = check_response(value, req)
    assert checked == value and checked is not value


@pytest.mark.parametrize(
    ("value", "req", "message"),
    [
        ({"outcome": "answered", "answer": 1}, OPEN, "response.answer must be a string, got int"),
        ({"outcome": "answered", "answer": None}, OPEN, "must be a string, got NoneType"),
        (
            {"outcome": "answered"},
            OPEN,
            "response.answer is required when the outcome is 'answered'",
        ),
        ({"outcome": "answered", "answer": ""}, OPEN, "response.answer must not be blank"),
        (
            {"outcome": "answered", "answer": "blue"},
            STRICT,
            "response.answer 'blue' is not one of the options ['red', 'green'] and free text is not allowed",
        ),
        (
            {"outcome": "cancelled", "answer": "red"},
            OPEN,
            "response.answer must be absent when the outcome is 'cancelled'",
        ),
        (
            {"outcome": "skipped"},
            OPEN,
            "response.outcome must be 'answered' or 'cancelled', got 'skipped'",
        ),
        ({"answer": "red"}, OPEN, "response.outcome must be 'answered' or 'cancelled', got None"),
        ({"outcome": "cancelled", "by": ""}, OPEN, "response.by must be a non-empty string"),
        ({"outcome": "cancelled", "why": 1}, OPEN, "unknown field(s) why"),
        (42, OPEN, "expected an object, got int"),
    ],
)
def test_wrong_responses_are_invalid_values_naming_the_problem(
    value: object, req: QuestionRequest, message: str
) -> None:
    with pytest.raises(RemoteServiceError) as caught:
        check_response(value, req)
    assert caught.value.code == "service_invalid_value"
    assert caught.value.message.startswith("Invalid question response: ")
    assert message in caught.value.message


@settings(max_examples=200, deadline=None)
@given(
    st.one_of(
        st.integers(), st.floats(allow_nan=False), st.booleans(), st.none(), st.lists(st.text())
    )
)
def test_an_answer_that_is_not_a_string_is_always_refused(answer: object) -> None:
    with pytest.raises(RemoteServiceError, match=r"response\.answer must be a string"):
        check_response({"outcome": "answered", "answer": answer}, OPEN)


def test_dialog_keys_are_conversation_and_call() -> None:
    assert dialog_key(2, "q-1") == "2:q-1"
    assert QuestionDialogs.id == "pi.question-dialog" and not QuestionDialogs.local
    with pytest.raises(ValueError, match="conversation id must be a non-negative int"):
        dialog_key(-1, "q-1")


@pytest.mark.parametrize(
    ("host", "ids"), [("session", ["@pi/question"]), ("tui", ["@pi/question"]), ("web", [])]
)
def test_the_entry_point_serves_one_facet_per_host(host: str, ids: list[str]) -> None:
    # docs/design/decisions.md#d7: found through the chord.facets entry point, never imported by name
    (package,) = [p for p in installed_facet_packages() if p.distribution == "facets-question"]
    assert package.plugin_module == "facets_question.plugin"
    generation = load_generation(package, host)
    try:
        assert [facet.id for facet in generation.facets] == ids
    finally:
        generation.purge()
