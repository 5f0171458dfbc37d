"""Train the embedded default model: a tiny OPT language model and its byte-level BPE tokenizer.

Run from the repository root::

    python tools/train_default_model.py --out core/models/default_model/opt-tiny --minutes 12

Training text (everything ships with CPython itself, so no download is needed):

1. ``pydoc_data.topics.topics`` -- the Python Language Reference topics that ``help()``
   shows (one document per topic).
2. The docstrings of the pure-Python standard library: for every ``*.py`` file under
   ``sysconfig.get_paths()["stdlib"]`` (sorted; skipping ``test``/``tests``, ``idlelib``,
   ``lib2to3``, ``tkinter``, ``turtledemo`` and ``site-packages``) the module, class and
   function docstrings found by ``ast.get_docstring`` -- the files are parsed, never
   imported. Docstrings shorter than 40 characters and exact duplicates are dropped; one
   document per docstring.

Light cleaning: indented lines (code samples, grammar rules), doctest lines and
``****``/``====`` heading underlines are dropped; lines with fewer than 75% letters and
spaces are dropped; the remaining lines of a paragraph are joined with single spaces;
typographic quotes and dashes become ASCII; paragraphs keep their ``\\n`` separator.
Documents are separated by ``</s>`` (id 2), which the tokenizer prepends to every text as
OPT's tokenizer does. The exact text depends on the Python version; TRAINING.md records it.

Schedule: AdamW, linear warmup then cosine decay of the learning rate. With ``--minutes M``
(the default mode) the cosine runs over wall-clock time and training stops at M minutes,
so a busy shared CPU gives fewer steps rather than a longer run. With ``--steps N`` it runs
over exactly N steps and the run is deterministic (seeded initialisation and data order,
fixed thread count). TRAINING.md records the steps a timed run reached.
"""

from __future__ import annotations

import argparse
import ast
import json
import math
import pathlib
import platform
import re
import sys
import sysconfig
import time

import torch

SPECIAL_TOKENS = ["<s>", "<pad>", "</s>", "<unk>"]  # ids 0, 1, 2, 3 as in OPT
BOS_ID = 2  # OPT: bos and eos are both </s>
EOS_ID = 2
PAD_ID = 1

SKIP_DIRS = {"test", "tests", "idlelib", "lib2to3", "tkinter", "turtledemo", "site-packages"}
TRANSLATE = str.maketrans(
    {"\u2019": "'", "\u2018": "'", "\u201c": '"', "\u201d": '"', "\u2014": " - ", "\u2013": "-", "\u2026": "..."}
)
_UNDERLINE = re.compile(r"^[*=\-~^#+]{3,}$")
_SPACES = re.compile(r"[ \t]+")

PROMPTS = ["The function", "A class is", "In Python,", "The return value", "An exception"]


# ----------------------------------------------------------------------------- text


def clean(text: str) -> str:
    """Lightly clean one document: drop code-like lines, join paragraph lines."""
    paragraphs: list[str] = []
    current: list[str] = []

    def flush() -> None:
        if current:
            para = _SPACES.sub(" ", " ".join(current)).strip()
            if len(para.split()) >= 2:
                paragraphs.append(para)
            current.clear()

    for raw in text.translate(TRANSLATE).splitlines():
        line = raw.rstrip()
        stripped = line.strip()
        if not stripped or line[:1] in (" ", "\t") or _UNDERLINE.match(stripped):
            flush()
            continue
        if stripped.startswith((">>>", "...", "..", ":param", ":return", ":type", ":rtype")):
            flush()
            continue
        letters = sum(ch.isalpha() or ch == " " for ch in stripped)
        if letters < 0.75 * len(stripped):
            flush()
            continue
        current.append(stripped)
    flush()
    return "\n".join(paragraphs)


def stdlib_docstrings(min_chars: int = 40) -> list[str]:
    """Module/class/function docstrings of the pure-Python stdlib, parsed with ast."""
    root = pathlib.Path(sysconfig.get_paths()["stdlib"])
    seen: set[str] = set()
    out: list[str] = []
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root).parts
        if SKIP_DIRS.intersection(parts[:-1]):
            continue
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError, ValueError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                doc = ast.get_docstring(node)
                if doc and len(doc) >= min_chars and doc not in seen:
                    seen.add(doc)
                    out.append(doc)
    return out


def build_corpus() -> list[str]:
    """All training documents, cleaned, in a fixed order."""
    from pydoc_data.topics import topics

    raw = [topics[key] for key in sorted(topics)] + stdlib_docstrings()
    docs = [clean(doc) for doc in raw]
    return [doc for doc in docs if len(doc) >= 40]


# ----------------------------------------------------------------------------- tokenizer


def train_tokenizer(docs: list[str], vocab_size: int):
    """Byte-level BPE; post-processor prepends </s> like OPT's GPT2 tokenizer."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(docs, trainer=trainer)
    assert [tok.token_to_id(t) for t in SPECIAL_TOKENS] == [0, 1, 2, 3]
    tok.post_processor = processors.TemplateProcessing(
        single="</s> $A",
        pair="</s> $A </s> $B",
        special_tokens=[("</s>", BOS_ID)],
    )
    return tok


def save_tokenizer(tok, out: pathlib.Path) -> None:
    """Write tokenizer.json, tokenizer_config.json and special_tokens_map.json."""
    from transformers import PreTrainedTokenizerFast

    hf = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="</s>",
        eos_token="</s>",
        unk_token="<unk>",
        pad_token="<pad>",
        model_max_length=512,
        clean_up_tokenization_spaces=False,
    )
    hf.save_pretrained(str(out))
    # Pin the class so AutoTokenizer uses tokenizer.json as is (model_type "opt" would
    # otherwise map to GPT2Tokenizer, which rebuilds its own post-processing).
    cfg_path = out / "tokenizer_config.json"
    cfg = json.loads(cfg_path.read_text())
    cfg["tokenizer_class"] = "PreTrainedTokenizerFast"
    cfg.update(
        bos_token="</s>",
        eos_token="</s>",
        unk_token="<unk>",
        pad_token="<pad>",
        model_max_length=512,
        clean_up_tokenization_spaces=False,
    )
    cfg_path.write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")
    stm = {"bos_token": "</s>", "eos_token": "</s>", "unk_token": "<unk>", "pad_token": "<pad>"}
    (out / "special_tokens_map.json").write_text(json.dumps(stm, indent=2) + "\n")


# ----------------------------------------------------------------------------- model


def make_config(vocab_size: int, hidden: int, layers: int, heads: int):
    from transformers import OPTConfig

    return OPTConfig(
        vocab_size=vocab_size,
        hidden_size=hidden,
        num_hidden_layers=layers,
        ffn_dim=4 * hidden,
        num_attention_heads=heads,
        max_position_embeddings=512,
        word_embed_proj_dim=hidden,
        do_layer_norm_before=True,
        activation_function="relu",
        dropout=0.1,
        attention_dropout=0.0,
        layerdrop=0.0,
        enable_bias=True,
        layer_norm_elementwise_affine=True,
        init_std=0.02,
        tie_word_embeddings=True,
        pad_token_id=PAD_ID,
        bos_token_id=BOS_ID,
        eos_token_id=EOS_ID,
        dtype="float32",
    )


def lr_at(progress: float, peak: float, warmup: int, step: int, floor: float = 0.1) -> float:
    """Linear warmup over the first `warmup` steps, then cosine from peak to floor * peak
    as progress (fraction of the run done, 0..1) goes to 1."""
    warm = min(1.0, (step + 1) / warmup)
    return warm * peak * (floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * min(1.0, progress))))


def batch_at(data: torch.Tensor, seq_len: int, batch: int, gen: torch.Generator) -> torch.Tensor:
    """Random windows of seq_len tokens from the token stream."""
    starts = torch.randint(0, data.numel() - seq_len, (batch,), generator=gen)
    return torch.stack([data[s : s + seq_len] for s in starts.tolist()])  # [batch, seq_len]


@torch.no_grad()
def eval_loss(model, data: torch.Tensor, seq_len: int, max_windows: int = 64) -> float:
    """Mean loss over consecutive non-overlapping windows of data."""
    model.eval()
    n = min(max_windows, (data.numel() - 1) // seq_len)
    windows = data[: n * seq_len].view(n, seq_len)  # [n, seq_len]
    losses = [model(input_ids=w, labels=w).loss.item() for w in windows.split(16)]
    model.train()
    return sum(losses) / len(losses)


@torch.no_grad()
def samples(model, tok, prompts: list[str], seed: int) -> list[dict]:
    """Greedy and sampled (temperature 0.8, top_p 0.95) completions via transformers."""
    model.eval()
    rows = []
    for i, prompt in enumerate(prompts):
        ids = tok(prompt, return_tensors="pt").input_ids
        greedy = model.generate(ids, max_new_tokens=30, do_sample=False, pad_token_id=PAD_ID)
        torch.manual_seed(seed + i)
        sampled = model.generate(
            ids, max_new_tokens=30, do_sample=True, temperature=0.8, top_p=0.95, top_k=0, pad_token_id=PAD_ID
        )
        rows.append(
            {
                "prompt": prompt,
                "greedy": tok.decode(greedy[0, ids.shape[1] :], skip_special_tokens=True),
                "sampled": tok.decode(sampled[0, ids.shape[1] :], skip_special_tokens=True),
            }
        )
    return rows


# ----------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--out",
        type=pathlib.Path,
        default=pathlib.Path(__file__).resolve().parents[1] / "core" / "models" / "default_model" / "opt-tiny",
    )
    ap.add_argument("--minutes", type=float, default=12.0, help="training time budget")
    ap.add_argument("--steps", type=int, default=0, help="exact step count (overrides --minutes)")
    ap.add_argument("--vocab-size", type=int, default=4096)
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args(argv)

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    out: pathlib.Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()

    docs = build_corpus()
    n_chars = sum(len(d) for d in docs)
    print(f"corpus: {len(docs)} documents, {n_chars} chars", flush=True)
    tok = train_tokenizer(docs, args.vocab_size)
    save_tokenizer(tok, out)

    stream: list[int] = []
    for enc in tok.encode_batch(docs):  # each encoding starts with </s> (id 2)
        stream.extend(enc.ids)
    data = torch.tensor(stream, dtype=torch.long)
    n_val = max(args.seq_len * 32, len(stream) // 50)
    train_data, val_data = data[:-n_val], data[-n_val:]
    print(
        f"tokens: {data.numel()} (train {train_data.numel()}, val {val_data.numel()}); prep {time.time() - t0:.1f}s",
        flush=True,
    )

    from transformers import OPTForCausalLM

    config = make_config(tok.get_vocab_size(), args.hidden, args.layers, args.heads)
    model = OPTForCausalLM(config)
    model.train()
    n_params = sum(p.numel() for p in model.parameters())
    print(f"model: {n_params} parameters", flush=True)

    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
        lr=args.lr,
        betas=(0.9, 0.95),
        eps=1e-8,
    )
    gen = torch.Generator().manual_seed(args.seed)

    # --steps N: cosine over N steps, fully deterministic. --minutes M (default): the same
    # schedule shape over wall-clock time (progress = elapsed / budget), so a shared, busy
    # CPU shortens the run instead of overrunning it; the step count reached is recorded.
    budget_s = args.minutes * 60
    by_steps = args.steps > 0
    t_train = time.time()
    step = 0
    progress = 0.0
    log: list[tuple[int, float]] = []
    ema = None
    while progress < 1.0:
        lr = lr_at(progress, args.lr, args.warmup, step)
        for group in opt.param_groups:
            group["lr"] = lr
        x = batch_at(train_data, args.seq_len, args.batch, gen)  # [batch, seq_len]
        loss = model(input_ids=x, labels=x).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        ema = loss.item() if ema is None else 0.98 * ema + 0.02 * loss.item()
        elapsed = time.time() - t_train
        progress = step / args.steps if by_steps else elapsed / budget_s
        if step % 50 == 0 or progress >= 1.0:
            log.append((step, round(ema, 4)))
            print(f"step {step} ({100 * progress:.0f}%) loss {ema:.4f} lr {lr:.2e} {elapsed:.0f}s", flush=True)
    train_s = time.time() - t_train
    val = eval_loss(model, val_data, args.seq_len)
    train_eval = eval_loss(model, train_data, args.seq_len)
    print(
        f"trained {step} steps in {train_s:.0f}s; train loss {train_eval:.4f}, "
        f"val loss {val:.4f} (ppl {math.exp(val):.1f})",
        flush=True,
    )

    model.config.dtype = torch.float32
    model.save_pretrained(str(out), safe_serialization=True)
    from transformers import AutoTokenizer

    hf_tok = AutoTokenizer.from_pretrained(str(out))
    rows = samples(model, hf_tok, PROMPTS, args.seed)
    size = (out / "model.safetensors").stat().st_size
    info = {
        "parameters": n_params,
        "model_safetensors_bytes": size,
        "dtype": "float32",
        "architecture": {
            "vocab_size": config.vocab_size,
            "hidden_size": args.hidden,
            "num_hidden_layers": args.layers,
            "num_attention_heads": args.heads,
            "ffn_dim": 4 * args.hidden,
            "max_position_embeddings": 512,
        },
        "text": {
            "source": "pydoc_data.topics.topics + stdlib docstrings (see tools/train_default_model.py)",
            "python": platform.python_version(),
            "documents": len(docs),
            "characters": n_chars,
            "tokens": int(data.numel()),
            "train_tokens": int(train_data.numel()),
            "val_tokens": int(val_data.numel()),
        },
        "training": {
            "steps": step,
            "seconds": round(train_s),
            "batch": args.batch,
            "seq_len": args.seq_len,
            "tokens_seen": step * args.batch * args.seq_len,
            "schedule": f"cosine over {args.steps} steps"
            if by_steps
            else f"cosine over {args.minutes} minutes wall clock",
            "peak_lr": args.lr,
            "warmup": args.warmup,
            "seed": args.seed,
            "threads": args.threads,
            "torch": torch.__version__,
            "final_train_loss": round(train_eval, 4),
            "final_val_loss": round(val, 4),
            "loss_curve": log,
        },
        "samples": rows,
        "retrain": "python tools/train_default_model.py --out "
        + (
            f"{args.out} --steps {args.steps}"
            if by_steps
            else f"{args.out} --minutes {args.minutes:g}  # reached {step} steps"
        ),
    }
    (out / "training_info.json").write_text(json.dumps(info, indent=2) + "\n")
    write_training_md(out, info)
    print(json.dumps(rows, indent=2), flush=True)
    print(f"saved to {out} ({size / 1e6:.2f} MB) in {time.time() - t0:.0f}s total", flush=True)


def write_training_md(out: pathlib.Path, info: dict) -> None:
    """Human-readable summary of training_info.json."""
    t, tr, a = info["text"], info["training"], info["architecture"]
    lines = [
        "# opt-tiny: the embedded default model",
        "",
        "A tiny OPT-architecture causal LM trained from scratch by `tools/train_default_model.py`",
        "on English prose that ships with CPython: the Python Language Reference topics",
        "(`pydoc_data.topics.topics`) and the docstrings of the pure-Python standard library.",
        "It exists so `enginetui` runs offline with no flags; its output is plausible",
        "Python-documentation English, not reliable facts.",
        "",
        f"- parameters: {info['parameters']:,} ({info['dtype']}, "
        f"model.safetensors {info['model_safetensors_bytes'] / 1e6:.2f} MB)",
        f"- architecture: vocab {a['vocab_size']}, hidden {a['hidden_size']}, "
        f"{a['num_hidden_layers']} layers, {a['num_attention_heads']} heads, ffn {a['ffn_dim']}, "
        f"max positions {a['max_position_embeddings']}",
        f"- text: Python {t['python']}, {t['documents']} documents, {t['characters']:,} chars, "
        f"{t['tokens']:,} tokens ({t['val_tokens']:,} held out)",
        f"- training: {tr['steps']} steps x {tr['batch']} x {tr['seq_len']} tokens "
        f"({tr['tokens_seen']:,} tokens seen) in {tr['seconds']} s on {tr['threads']} CPU threads, "
        f"torch {tr['torch']}, seed {tr['seed']}",
        f"- final loss: train {tr['final_train_loss']}, held-out {tr['final_val_loss']}",
        f"- retrain: `{info['retrain']}`",
        "",
        "## Samples (transformers `generate`, 30 new tokens)",
        "",
    ]
    for row in info["samples"]:
        lines += [
            f"**{row['prompt']}**",
            "",
            f"- greedy: {json.dumps(row['prompt'] + row['greedy'], ensure_ascii=False)}",
            f"- sampled (T=0.8, top_p=0.95): {json.dumps(row['prompt'] + row['sampled'], ensure_ascii=False)}",
            "",
        ]
    (out / "TRAINING.md").write_text("\n".join(lines))


if __name__ == "__main__":
    sys.exit(main())
