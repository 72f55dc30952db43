"""The base of every pelab config: frozen, strict, hashable, and one-line errors when validation fails.

It sits below the parts that declare their own options (tasks now, schemes and combiners next) and below
``pelab.config``, which assembles them into a run.
"""

from __future__ import annotations

import hashlib
import json

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from pelab.errors import PelabError

# Bounds on sizes. They sit far past anything this lab trains on one machine; their job is to keep a
# typo (2**62, 10**9) from overflowing an index or allocating gigabytes while a config is only being
# checked. What a run would actually need is estimated against the machine before a study starts
# (pelab.preflight).
MAX_COUNT = 2**31 - 1  # steps, batches, widths, vocabularies: int32 range
MAX_LENGTH = 2**20  # task.length
MAX_MULTIPLIER = 64.0  # task.eval_multipliers
MAX_SEED = 2**32 - 1  # data generators derive their seeds from it by multiplying
MAX_LR = 10.0  # train.lr: AdamW's steps are about lr in size, so past this every run diverges
#: largest position table (max_len x model width) a config may ask for: 2**27 float32 cells is 512 MiB
#: (a model that size would be built only to fail later, so validation refuses it)
MAX_TABLE_CELLS = 2**27


class Frozen(BaseModel):
    # Finite floats only: JSON has no inf or nan, and no setting means anything at either.
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    @field_validator("*", mode="before")
    @classmethod
    def _no_bool_as_number(cls, v: object) -> object:
        # pydantic's lax mode reads true as 1; no field of a config is a boolean.
        if isinstance(v, bool) or (isinstance(v, list | tuple) and any(isinstance(x, bool) for x in v)):
            raise ValueError(f"expected a number or a name, got a boolean ({str(v).lower()})")
        return v

    def canonical_json(self) -> str:
        return json.dumps(self.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))

    def digest(self, n: int = 16) -> str:
        """Content hash of the canonical JSON: equal configs get equal ids."""
        return hashlib.sha256(self.canonical_json().encode()).hexdigest()[:n]


def validation_message(err: ValidationError) -> str:
    """One line from a pydantic error: the field path, then what is wrong."""
    first = err.errors()[0]
    msg = str(first.get("msg", "invalid value")).removeprefix("Value error, ")
    loc = ".".join(str(p) for p in first.get("loc", ()))
    if ":" in msg.split(" ")[0]:  # our own messages already name their field
        return msg
    return f"{loc}: {msg}" if loc else msg


def build(cls: type[Frozen], **values: object) -> Frozen:
    """Construct a config, turning validation failures into one-line PelabErrors."""
    try:
        return cls(**values)
    except ValidationError as e:
        raise PelabError(validation_message(e)) from None
