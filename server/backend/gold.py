"""`gold`: the ED reference listener turn that followed the context in the data."""
from __future__ import annotations

from empeval.server.backend.base import (
    DialogueContext,
    Reply,
    ResponseModel,
    ResponseUnavailable,
)


class GoldModel(ResponseModel):
    kind = "gold"

    def __init__(self, name: str, parameters=None, resources=None):
        super().__init__(name, parameters)
        self.dataset = resources.dataset if resources else ""

    def data_version(self) -> str:
        # The text is the stored data itself; the dataset name says which data.
        return f"reference:{self.dataset}"

    def respond_one(self, context: DialogueContext) -> Reply:
        if context.reference is None:
            raise ResponseUnavailable("gold needs a stored context (it answers with the reference turn that "
                                      "followed it in the data); this context has no reference")
        return Reply(context.reference, {"reference_turn_id": context.reference_turn_id})
