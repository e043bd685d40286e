from __future__ import annotations

from typing import Any

from ..transform.pass_infra import FunctionPass


class FakeQuantizationToInteger(FunctionPass):
    def __init__(self) -> None:
        super().__init__(name="FakeQuantizationToInteger", opt_level=0)

    def transform_function(self, func: Any, mod: Any, ctx: Any) -> Any:
        return func
