"""Hostile model folders (issue 30, part 2): `pelab pretrained --model DIR` (and a study file's
``[pretrained] models``) on a damaged or lying folder is one line and exit 2: safetensors files that are empty,
garbage, claim a header of 2⁶⁰ bytes or shapes and ranges their bytes do not hold, a FIFO in a file's place
(never opened for a blocking read), NaN tables, config fields of the wrong type or absurd size, loops of
links, tokenizer files that are not what they say. Nothing is allocated from a size a file only claims.

Folders are written here with safetensors alone (no transformers): a tiny BERT and a tiny ViT.
"""

from __future__ import annotations

import json
import os
import signal
import struct
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from safetensors.torch import save_file
from test_hardening import cli, one_line

from pelab.errors import PelabError
from pelab.weights import hf

V, D, L = 12, 8, 16
BERT = {"model_type": "bert", "hidden_size": D, "max_position_embeddings": L, "vocab_size": V, "type_vocab_size": 2}
VIT = {"model_type": "vit", "hidden_size": D, "image_size": 8, "patch_size": 4}


def bert(folder: Path, config: dict | None = None, tensors: dict | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    g = torch.Generator().manual_seed(0)
    weights = {
        "bert.embeddings.word_embeddings.weight": torch.randn(V, D, generator=g),
        "bert.embeddings.position_embeddings.weight": torch.randn(L, D, generator=g),
        "bert.embeddings.token_type_embeddings.weight": torch.randn(2, D, generator=g),
        **(tensors or {}),
    }
    save_file(weights, str(folder / "model.safetensors"))
    (folder / "config.json").write_text(json.dumps({**BERT, **(config or {})}))
    return folder


def vit(folder: Path, config: dict | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    save_file({"vit.embeddings.position_embeddings": torch.randn(1, 5, D)}, str(folder / "model.safetensors"))
    (folder / "config.json").write_text(json.dumps({**VIT, **(config or {})}))
    return folder


def safetensors_bytes(header: dict, data: bytes = b"") -> bytes:
    raw = json.dumps(header).encode()
    return struct.pack("<Q", len(raw)) + raw + data


def replace_weights(folder: Path, data: bytes) -> None:
    (folder / "model.safetensors").unlink()
    (folder / "model.safetensors").write_bytes(data)


POS = "bert.embeddings.position_embeddings.weight"


def _nan(f: Path) -> None:
    bert(f, tensors={POS: torch.full((L, D), float("nan"))})


def _inf(f: Path) -> None:
    bert(f, tensors={POS: torch.full((L, D), float("inf"))})


def _fifo(f: Path) -> None:
    (f / "model.safetensors").unlink()
    os.mkfifo(f / "model.safetensors")


def _config_fifo(f: Path) -> None:
    (f / "config.json").unlink()
    os.mkfifo(f / "config.json")


def _config(**fields: object) -> Callable[[Path], None]:
    def change(f: Path) -> None:
        config = json.loads((f / "config.json").read_text())
        config.update(fields)
        if "model_type" in fields and fields["model_type"] is None:
            del config["model_type"]
        (f / "config.json").write_text(json.dumps(config))

    return change


def _write(name: str, data: bytes | str) -> Callable[[Path], None]:
    def change(f: Path) -> None:
        (f / name).write_bytes(data.encode() if isinstance(data, str) else data)

    return change


def _loop(name: str) -> Callable[[Path], None]:
    def change(f: Path) -> None:
        (f / name).unlink()
        (f / name).symlink_to(f / name)

    return change


SHAPE_LIE = {"x": {"dtype": "F32", "shape": [10**9, 10**9], "data_offsets": [0, 16]}}
PAST_END = {"x": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16 * 10**6]}}
HOSTILE: dict[str, tuple[str, Callable[[Path], None], str]] = {
    "empty safetensors": ("bert", lambda f: replace_weights(f, b""), "it is empty"),
    "garbage safetensors": ("bert", lambda f: replace_weights(f, os.urandom(200)), "safetensors"),
    "header of 2^60 bytes": ("bert", lambda f: replace_weights(f, struct.pack("<Q", 2**60) + b"{}"), "claims"),
    "header larger than the file": ("bert", lambda f: replace_weights(f, struct.pack("<Q", 500) + b"{}"), "claims"),
    "a shape the bytes do not hold": ("bert", lambda f: replace_weights(f, safetensors_bytes(SHAPE_LIE, bytes(16))),
                                      "takes 16 bytes"),
    "offsets past the end": ("bert", lambda f: replace_weights(f, safetensors_bytes(PAST_END, bytes(16))), "past"),
    "header not JSON": ("bert", lambda f: replace_weights(f, struct.pack("<Q", 4) + b"{{{{"), "not JSON"),
    "header a list": ("bert", lambda f: replace_weights(f, safetensors_bytes([1, 2])), "not a JSON object"),  # type: ignore[arg-type]
    "a FIFO for weights": ("bert", _fifo, "not a regular file"),
    "a loop of links for weights": ("bert", _loop("model.safetensors"), "loop"),
    "a FIFO for config.json": ("bert", _config_fifo, "config.json"),
    "config.json a loop of links": ("bert", _loop("config.json"), "config.json"),
    "NaN position table": ("bert", _nan, "NaN or infinite"),
    "inf position table": ("bert", _inf, "NaN or infinite"),
    "model_type a list": ("bert", _config(model_type=["bert"]), "model_type"),
    "model_type an object": ("bert", _config(model_type={"a": 1}), "model_type"),
    "no model_type": ("bert", _config(model_type=None), "model_type"),
    "unknown model_type": ("bert", _config(model_type="frobnicator"), "model_type"),
    "config nested 100,000 deep": ("bert", _write("config.json", "[" * 100_000 + "]" * 100_000), "config.json"),
    "config not UTF-8": ("bert", _write("config.json", b'{"model_type": "\xff"}'), "UTF-8"),
    "vocab 10^10": ("bert", _config(vocab_size=10**10), "vocab_size"),
    "width 10^8": ("bert", _config(hidden_size=10**8), "hidden_size"),
    "width a string": ("bert", _config(hidden_size="8"), "hidden_size"),
    "positions negative": ("bert", _config(max_position_embeddings=-4), "max_position_embeddings"),
    "tokenizer.json not JSON": ("bert", _write("tokenizer.json", "{not json"), "tokenizer.json"),
    "tokenizer ids not integers": ("bert", _write("tokenizer.json", '{"model": {"vocab": {"a": "x"}}}'),
                                   "tokenizer.json"),
    "tokenizer a list": ("bert", _write("tokenizer.json", "[1]"), "tokenizer.json"),
    "vocab.json a list": ("bert", _write("vocab.json", '["a", "b"]'), "vocab.json"),
    "vocab.json ids not integers": ("bert", _write("vocab.json", '{"a": 1.5}'), "vocab.json"),
    "Latin-1 vocab.txt": ("bert", _write("vocab.txt", "caf\xe9\n".encode("latin-1")), "UTF-8"),
    "image_size a string": ("vit", _config(image_size="224"), "image_size"),
    "patch_size 0": ("vit", _config(patch_size=0), "patch_size"),
    "patch_size three numbers": ("vit", _config(patch_size=[4, 4, 4]), "patch_size"),
    "patch larger than the image": ("vit", _config(patch_size=64), "patch_size"),
}  # fmt: skip


@contextmanager
def no_hang(seconds: int = 20):
    """Fail, rather than hang the suite, if the block blocks (a FIFO opened for a blocking read)."""

    def alarm(*_: object) -> None:
        raise AssertionError(f"blocked for {seconds} s")

    old = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def test_the_tiny_folders_load(tmp_path: Path) -> None:
    m = hf.load(bert(tmp_path / "b"))
    assert m.position.shape == (L, D) and m.word is not None and m.word.shape == (V, D)
    m = hf.load(vit(tmp_path / "v"))
    assert m.grid == (2, 2) and m.position.shape == (4, D)


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_hostile_folder_is_one_line_and_exit_2(tmp_path: Path, capsys, monkeypatch, case: str) -> None:
    family, change, words = HOSTILE[case]
    folder = (bert if family == "bert" else vit)(tmp_path / "model")
    change(folder)
    out = tmp_path / "out"
    with no_hang():
        r = cli(capsys, monkeypatch, "pretrained", "--model", str(folder), "--skip-c9", "--out", str(out))
    one_line(r, "model:", words)
    assert not out.exists()


def test_a_loop_of_links_for_the_folder(tmp_path: Path, capsys, monkeypatch) -> None:
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    one_line(cli(capsys, monkeypatch, "pretrained", "--model", str(tmp_path / "a"), "--skip-c9"), "model:")


def test_a_hub_ref_that_is_a_fifo_does_not_hang(tmp_path: Path) -> None:
    entry = tmp_path / "models--org--name"
    bert(entry / "snapshots" / "abc")
    (entry / "refs").mkdir()
    os.mkfifo(entry / "refs" / "main")
    with no_hang():
        assert hf.resolve(entry) == entry / "snapshots" / "abc"  # the one snapshot, the ref never read


def test_a_study_file_naming_a_hostile_folder_is_one_line(tmp_path: Path, capsys, monkeypatch) -> None:
    folder = bert(tmp_path / "model")
    replace_weights(folder, struct.pack("<Q", 2**60))
    study = tmp_path / "s.toml"
    study.write_text('[task]\nname = "reverse"\nlength = 4\n[model]\nd = 16\n[train]\nsteps = 1\n'
                     f"[pretrained]\nmodels = [{json.dumps(str(folder))}]\n")  # fmt: skip
    r = cli(capsys, monkeypatch, "study", str(study), "--out", str(tmp_path / "o"), "--no-report")
    one_line(r, "model:", "claims")
    assert not (tmp_path / "o").exists()


# --- the fuzzers: config fields and header bytes ----------------------------------------------------------
FIELDS = ["model_type", "hidden_size", "max_position_embeddings", "vocab_size", "type_vocab_size", "pad_token_id"]
JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=2),
    max_leaves=5,
)
FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def loads_or_refuses(folder: Path) -> None:
    with no_hang():
        try:
            hf.load(folder)
        except PelabError as e:
            assert "\n" not in str(e) and str(e).startswith("model: ")


@FUZZ
@given(family=st.sampled_from(["bert", "vit", "roberta", "gpt2", "opt", "distilbert"]),
       changes=st.dictionaries(st.sampled_from([*FIELDS, "image_size", "patch_size", "n_positions", "n_embd", "dim",
                                                "word_embed_proj_dim"]), JSONISH, max_size=3))  # fmt: skip
def test_fuzzed_config_fields(tmp_path_factory, family: str, changes: dict) -> None:
    folder = tmp_path_factory.mktemp("f")
    (vit if family == "vit" else bert)(folder)
    config = json.loads((folder / "config.json").read_text())
    config.update({"model_type": family} if family not in ("bert", "vit") else {})
    config.update(changes)
    (folder / "config.json").write_text(json.dumps(config))
    loads_or_refuses(folder)


@FUZZ
@given(
    header=st.one_of(
        st.binary(max_size=64),
        st.builds(
            lambda dtype, shape, offsets: safetensors_bytes(
                {POS: {"dtype": dtype, "shape": shape, "data_offsets": offsets}}, bytes(64)
            ),
            st.sampled_from(["F32", "F16", "I64", "XX", 3]),
            st.lists(st.integers(-2, 2**40), max_size=3),
            st.lists(st.integers(-2, 2**62), max_size=3),
        ),
    ),
    length=st.sampled_from([None, 0, 2**60, 2**64 - 1, 7]),
)
def test_fuzzed_header_bytes(tmp_path_factory, header: bytes, length: int | None) -> None:
    folder = bert(tmp_path_factory.mktemp("h"))
    if length is not None:
        header = struct.pack("<Q", length) + header[8:]
    replace_weights(folder, header)
    loads_or_refuses(folder)
