"""A helpdesk's memories for the ranking tests through the whole app with the real model
(tests/http/test_feedback.py, tests/http/test_neighbours.py): a question about a ticket, the
memories that name it, an answer that shares not one word with the question, and others the
sentence model finds closer to the question."""

from __future__ import annotations

NS = "workspace:helpdesk"
QUESTION = "status of ticket XJ-4471"
# What matches the question: the ticket, and the words of its story.
NAMED = [
    "ticket XJ-4471: the Zorbel Nighthawk router firmware crashed",
    "XJ-4471 is waiting on Zorbel for a Nighthawk firmware patch",
    "ticket XJ-4471 reopened: Zorbel firmware on the Nighthawk crashed again",
]
# The answer: the story's words, and not one word of the question.
ANSWER = "Zorbel shipped a Nighthawk firmware patch for the crashed routers"
# Closer to the question for the sentence model, and no word of the story.
OTHERS = [
    "the user's internet connection keeps dropping in the evening",
    "support said the issue would be fixed this week",
    "the user opened a request with the internet provider",
    "a support request usually takes three days to resolve",
    "the user asked support to send a technician",
    "the provider's support line is busy in the evenings",
    "the user prefers chat support over phone calls",
    "the helpdesk status page lists every open incident",
]
