"""The rating criteria of Rashkin et al. (ACL 2019), with the wording shown to raters, and the 1-5 scale."""
from __future__ import annotations

DEFAULT_CRITERIA = [
    {
        "key": "empathy",
        "label": "Empathy",
        "question": "Did the response show understanding of the feelings of the person talking about their experience?",
        "definition": "Empathy/Sympathy: the response acknowledges how the speaker feels and responds to it "
                      "with understanding, not only to the facts.",
    },
    {
        "key": "relevance",
        "label": "Relevance",
        "question": "Did the response seem appropriate to the conversation? Was it on-topic?",
        "definition": "Relevance: the response fits this conversation and follows from what was said, "
                      "rather than being generic or about something else.",
    },
    {
        "key": "fluency",
        "label": "Fluency",
        "question": "Could you understand the response? Did the language seem accurate?",
        "definition": "Fluency: the response is understandable, grammatical English, whatever its content.",
    },
]

DEFAULT_SCALE = {
    "min": 1,
    "max": 5,
    "labels": ["1 - Not at all", "2 - Slightly", "3 - Moderately", "4 - Mostly", "5 - Completely"],
}

# Which criterion each control system is built to fail (see server/backend controls).
CONTROL_TARGETS = {
    "control-generic": "empathy",
    "control-mismatched": "relevance",
    "control-scrambled": "fluency",
}
