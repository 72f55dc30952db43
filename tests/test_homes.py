"""Each concept has one home (issue 14): a scheme's options are declared once, by the scheme; a config validates
without building a scheme or reading a task's data; evaluation sizes are spelled and parsed in one place."""

from __future__ import annotations

import pytest
from pydantic import Field

from pelab.config import OPTION_OWNERS, PositionConfig, RunConfig, _option_fields
from pelab.errors import PelabError
from pelab.frozen import Frozen
from pelab.positions import SCHEMES, PositionScheme, SchemeContext, register, scheme_class
from pelab.records import size_metric, sizes_in

CTX = SchemeContext(width=16, model_width=16, reference_width=16, n_heads=2, head_dim=8, max_len=32, causal=False)


def test_position_config_is_assembled_from_the_schemes_declarations() -> None:
    declared = {k: (name, info) for name, cls in SCHEMES.items() for k, info in cls.Options.model_fields.items()}
    fields = dict(PositionConfig.model_fields)
    assert fields.pop("scheme").default == "sinusoidal"
    assert set(fields) == set(declared)
    for key, info in fields.items():  # same default, type and bounds as where the scheme declares it
        owner, own = declared[key]
        assert (info.default, info.annotation, info.metadata) == (own.default, own.annotation, own.metadata), key
    assert OPTION_OWNERS["base"] == ["sinusoidal", "rotary", "xpos"] and OPTION_OWNERS["t5_buckets"] == ["t5"]


@pytest.mark.parametrize("name", sorted(SCHEMES))
def test_a_scheme_is_built_with_its_own_options_alone(name: str) -> None:
    cfg = PositionConfig(scheme=name)
    assert set(cfg.options()) == set(scheme_class(name).Options.model_fields)
    foreign = next(k for k in OPTION_OWNERS if name not in OPTION_OWNERS[k])
    ctx = CTX if name != "sincos2d" else SchemeContext(**{**CTX.__dict__, "grid": (4, 8)})
    with pytest.raises((PelabError, TypeError), match=foreign):  # no **_ swallowing another scheme's option
        scheme_class(name)(ctx, **{foreign: PositionConfig.model_fields[foreign].default or "add"})


def test_two_schemes_declaring_one_option_differently_is_refused() -> None:
    class Clash(PositionScheme):
        name = "clash"

        class Options(Frozen):
            base: float = Field(500.0, gt=1, description="another base")

    register(Clash)
    try:
        with pytest.raises(TypeError, match="'base': sinusoidal and clash declare it differently"):
            _option_fields()
    finally:
        SCHEMES.pop("clash")


def test_validating_a_config_builds_no_scheme(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_: object, **__: object) -> None:
        raise AssertionError("a scheme was built while a config validated")

    monkeypatch.setattr(PositionScheme, "__init__", refuse)
    for scheme in sorted(SCHEMES):
        task = "digits" if scheme == "sincos2d" else "reverse"
        combine = "add" if scheme_class(scheme).has_table else "none"
        RunConfig(task={"name": task}, model={"position": {"scheme": scheme}, "combine": combine})
    with pytest.raises(ValueError, match="rotary_fraction: 0.1 of head width 8 leaves no channel pair"):
        RunConfig(model={"d": 32, "position": {"scheme": "rotary", "rotary_fraction": 0.1}, "combine": "none"})


def test_evaluation_sizes_are_spelled_and_parsed_in_one_place() -> None:
    keys = [size_metric(n) for n in (15, 5, 10)] + ["acc", "m.acc_at_20", "acc_at_x", "val_acc_at_5"]
    assert sizes_in(keys) == [(5, "acc_at_5"), (10, "acc_at_10"), (15, "acc_at_15"), (20, "m.acc_at_20")]
