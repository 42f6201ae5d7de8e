#!/usr/bin/python3
"""Train a tiny LLaMA-family model on English text that Debian ships; export it.

Run with Debian's python (/usr/bin/python3: python3-torch, python3-onnx,
python3-regex); the text comes from the Debian packages bible-kjv (with
bible-kjv-text) and fortunes (scripts/deps.sh installs all of them).

    scripts/train_tiny.py --out models [--steps N] [--work build/train]

What it does, in order (fixed seeds throughout, so a rerun on the same
packages and torch gives the same tokenizer and, up to floating-point
reduction order, the same weights):
  1. Corpus: the King James Bible, one document per chapter (the output of
     `bible`), and every fortune of /usr/share/games/fortunes (split at the
     "%" lines), one document each. Held-out text: every 20th Bible chapter
     and every 20th fortune (counted in file order); it never enters the
     tokenizer's or the model's training data. It is written to
     OUT/heldout.txt.
  2. Tokenizer: a byte-level BPE learned here (GPT-2 pre-tokenizer regex,
     GPT-2 byte-to-unicode alphabet), written as Hugging Face tokenizer.json
     and tokenizer_config.json with <|bos|> and <|endoftext|> (eos) as added
     special tokens. Documents are joined with <|endoftext|> for training.
  3. Model: scripts/export_llm.py's LlamaModel (RMSNorm, RoPE computed from
     position_ids, SwiGLU, grouped-query attention, no biases, untied
     lm_head), trained with AdamW on random windows of the token stream.
  4. Export: OUT/tiny-llama.onnx with the KV-cache interface of
     export_llm.py (llmc's contract), opset 14.
The checkpoint goes to WORK/model.pt; --export-only re-exports from it.
"""
import argparse
import collections
import json
import math
import os
import subprocess
import sys
import time

import regex
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import export_llm  # noqa: E402  (the zoo's model definitions and export names)

FORTUNE_DIR = "/usr/share/games/fortunes"
BIBLE_RANGE = "Gen1:1-Rev22:21"
HELDOUT_EVERY = 20
BOS, EOS = "<|bos|>", "<|endoftext|>"
# GPT-2's pre-tokenizer split (as the ByteLevel pre-tokenizer's use_regex).
GPT2_SPLIT = regex.compile(
    r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")


# ----------------------------------------------------------------------------
# Corpus
# ----------------------------------------------------------------------------

def bible_chapters():
    """Chapters as printed by `bible` (unwrapped lines), heading included."""
    out = subprocess.run(["bible", "-l100000", BIBLE_RANGE], check=True,
                         capture_output=True, text=True).stdout
    chapters, current = [], []
    for line in out.split("\n"):
        if line and not line.startswith(" "):       # "Genesis 1": a new chapter
            if current:
                chapters.append("\n".join(current).strip() + "\n")
            current = [line]
        elif line.strip():
            current.append(line.strip())
    if current:
        chapters.append("\n".join(current).strip() + "\n")
    return chapters


def fortunes():
    """Every fortune of every fortune file (not the .dat indexes, not the .u8 links)."""
    items = []
    for name in sorted(os.listdir(FORTUNE_DIR)):
        path = os.path.join(FORTUNE_DIR, name)
        if name.endswith((".dat", ".u8")) or os.path.islink(path) or not os.path.isfile(path):
            continue
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        items += [t.strip("\n") + "\n" for t in regex.split(r"(?m)^%\n", text) if t.strip()]
    return items


def split_heldout(docs):
    """(train, heldout): every HELDOUT_EVERY-th document (index % N == N-1) is held out."""
    train = [d for i, d in enumerate(docs) if i % HELDOUT_EVERY != HELDOUT_EVERY - 1]
    held = [d for i, d in enumerate(docs) if i % HELDOUT_EVERY == HELDOUT_EVERY - 1]
    return train, held


# ----------------------------------------------------------------------------
# Byte-level BPE
# ----------------------------------------------------------------------------

def bytes_to_unicode():
    """GPT-2's reversible byte -> printable character table."""
    keep = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
            + list(range(ord("®"), ord("ÿ") + 1)))
    table, extra = {}, 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table


BYTE_CHAR = bytes_to_unicode()


def pretokens(text):
    """GPT-2 split, each piece mapped to the byte alphabet."""
    return ["".join(BYTE_CHAR[b] for b in piece.encode("utf-8"))
            for piece in GPT2_SPLIT.findall(text)]


class PairCounts:
    """Pair frequencies over distinct words, updated incrementally per merge."""

    def __init__(self, word_freq):
        self.words = [list(w) for w in word_freq]
        self.freq = list(word_freq.values())
        self.count = collections.Counter()
        self.where = collections.defaultdict(set)
        for i, w in enumerate(self.words):
            self._add_word(i, w, 1)

    def _add_word(self, i, w, sign):
        for a, b in zip(w, w[1:]):
            self.count[(a, b)] += sign * self.freq[i]
            if sign > 0:
                self.where[(a, b)].add(i)

    def best(self):
        # Highest count; ties broken by the pair itself so the result is deterministic.
        return max(self.count.items(), key=lambda kv: (kv[1], kv[0]))[0] if self.count else None

    def merge(self, pair):
        a, b = pair
        joined = a + b
        for i in list(self.where.pop(pair, ())):
            w = self.words[i]
            self._add_word(i, w, -1)
            merged, j = [], 0
            while j < len(w):
                if j + 1 < len(w) and w[j] == a and w[j + 1] == b:
                    merged.append(joined)
                    j += 2
                else:
                    merged.append(w[j])
                    j += 1
            self.words[i] = merged
            self._add_word(i, merged, 1)
        for p in [p for p, c in self.count.items() if c <= 0]:
            del self.count[p]


def train_bpe(docs, vocab_size, n_special):
    word_freq = collections.Counter()
    for d in docs:
        word_freq.update(pretokens(d))
    pairs = PairCounts(word_freq)
    merges = []
    while 256 + len(merges) + n_special < vocab_size:
        pair = pairs.best()
        if pair is None:
            break
        merges.append(pair)
        pairs.merge(pair)
    return merges


class BpeEncoder:
    """Encodes as the BPE model does: lowest-rank merge first, per pre-token."""

    def __init__(self, merges, specials):
        self.rank = {pair: r for r, pair in enumerate(merges)}
        self.vocab = {BYTE_CHAR[b]: i for i, b in enumerate(sorted(BYTE_CHAR))}
        for a, b in merges:
            self.vocab[a + b] = len(self.vocab)
        self.special = {}
        for s in specials:
            self.special[s] = len(self.vocab) + len(self.special)
        self.cache = {}

    def _word(self, w):
        syms = list(w)
        while len(syms) > 1:
            ranked = [(self.rank.get((x, y), math.inf), k) for k, (x, y) in enumerate(zip(syms, syms[1:]))]
            r, k = min(ranked)
            if r == math.inf:
                break
            syms[k:k + 2] = [syms[k] + syms[k + 1]]
        return [self.vocab[s] for s in syms]

    def encode(self, text):
        ids = []
        for w in pretokens(text):
            if w not in self.cache:
                self.cache[w] = self._word(w)
            ids += self.cache[w]
        return ids

    def size(self):
        return len(self.vocab) + len(self.special)


def tokenizer_json(enc, merges):
    added = [{"id": i, "content": s, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True} for s, i in enc.special.items()]
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                  "use_regex": True}
    return {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": added, "normalizer": None,
        "pre_tokenizer": byte_level, "post_processor": None, "decoder": byte_level,
        "model": {"type": "BPE", "dropout": None, "unk_token": None,
                  "continuing_subword_prefix": None, "end_of_word_suffix": None,
                  "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": enc.vocab, "merges": [f"{a} {b}" for a, b in merges]},
    }


def tokenizer_config(enc):
    decoder = {str(i): {"content": s, "lstrip": False, "normalized": False, "rstrip": False,
                        "single_word": False, "special": True} for s, i in enc.special.items()}
    return {"add_bos_token": False, "add_eos_token": False, "added_tokens_decoder": decoder,
            "bos_token": BOS, "eos_token": EOS, "clean_up_tokenization_spaces": False,
            "model_max_length": 1 << 30, "tokenizer_class": "PreTrainedTokenizerFast"}


def write_json(path, obj):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, ensure_ascii=False, indent=1)
        f.write("\n")


# ----------------------------------------------------------------------------
# Model and training
# ----------------------------------------------------------------------------

def model_config(args, vocab):
    return export_llm.Config(vocab=vocab, hidden=args.hidden, layers=args.layers,
                             heads=args.heads, kv_heads=args.kv_heads,
                             intermediate=args.intermediate, max_pos=args.context)


def forward(model, cfg, ids):
    """Logits of a [batch, seq] block with an empty KV cache."""
    b, s = ids.shape
    empty = torch.zeros((b, cfg.kv_heads, 0, cfg.head_dim))
    logits, *_ = model(ids, torch.ones((b, s), dtype=torch.int64),
                       torch.arange(s).unsqueeze(0).expand(b, s), *([empty] * (2 * cfg.layers)))
    return logits


def batch_loss(model, cfg, stream, starts, context):
    block = torch.stack([stream[s:s + context + 1] for s in starts])
    logits = forward(model, cfg, block[:, :-1])
    return F.cross_entropy(logits.reshape(-1, cfg.vocab), block[:, 1:].reshape(-1))


def learning_rate(step, args):
    if step < args.warmup:
        return args.lr * (step + 1) / args.warmup
    progress = (step - args.warmup) / max(1, args.steps - args.warmup)
    return args.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))


def train(model, cfg, stream, args, log):
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.95),
                            weight_decay=0.1)
    gen = torch.Generator().manual_seed(args.seed)
    recent, start = collections.deque(maxlen=50), time.time()
    for step in range(args.steps):
        for group in opt.param_groups:
            group["lr"] = learning_rate(step, args)
        starts = torch.randint(0, len(stream) - args.context - 1, (args.batch,), generator=gen)
        loss = batch_loss(model, cfg, stream, starts.tolist(), args.context)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        recent.append(loss.item())
        if step % 25 == 0 or step == args.steps - 1:
            log(f"step {step} loss {loss.item():.4f} avg50 {sum(recent) / len(recent):.4f} "
                f"lr {learning_rate(step, args):.2e} elapsed {time.time() - start:.0f}s")
    return sum(recent) / len(recent), time.time() - start


@torch.no_grad()
def heldout_loss(model, cfg, stream, context):
    """Mean loss over consecutive non-overlapping windows of the held-out stream."""
    losses = [batch_loss(model, cfg, stream, [s], context).item()
              for s in range(0, len(stream) - context - 1, context)]
    return sum(losses) / len(losses)


def export_onnx(model, cfg, path):
    inputs, outputs, dyn = export_llm.io_names(cfg)
    with torch.no_grad():
        torch.onnx.export(model, export_llm.example_inputs(cfg), path,
                          input_names=inputs, output_names=outputs, dynamic_axes=dyn,
                          opset_version=14, do_constant_folding=True)


# ----------------------------------------------------------------------------
# Driver
# ----------------------------------------------------------------------------

def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="models", help="folder for the shipped files")
    ap.add_argument("--work", default="build/train", help="folder for checkpoint and ids")
    ap.add_argument("--vocab", type=int, default=2048)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--intermediate", type=int, default=688)
    ap.add_argument("--context", type=int, default=256, help="training window (tokens)")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--export-only", action="store_true",
                    help="skip training: load WORK/model.pt and export again")
    return ap.parse_args(argv)


def build_tokenizer(args, train_docs, log):
    t0 = time.time()
    merges = train_bpe(train_docs, args.vocab, n_special=2)
    enc = BpeEncoder(merges, [BOS, EOS])
    write_json(os.path.join(args.out, "tokenizer.json"), tokenizer_json(enc, merges))
    write_json(os.path.join(args.out, "tokenizer_config.json"), tokenizer_config(enc))
    log(f"bpe: {len(merges)} merges, vocab {enc.size()}, {time.time() - t0:.0f}s")
    return enc


def encode_docs(enc, docs):
    ids = []
    for d in docs:
        ids += enc.encode(d) + [enc.special[EOS]]
    return torch.tensor(ids, dtype=torch.int64)


def main(argv=None):
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    os.makedirs(args.out, exist_ok=True)
    os.makedirs(args.work, exist_ok=True)

    def log(msg):
        print(f"train_tiny: {msg}", file=sys.stderr, flush=True)

    train_docs, held_docs = split_heldout(bible_chapters() + fortunes())
    heldout_text = "".join(held_docs)
    with open(os.path.join(args.out, "heldout.txt"), "w", encoding="utf-8") as f:
        f.write(heldout_text)
    log(f"corpus: {len(train_docs)} training documents "
        f"({sum(len(d) for d in train_docs)} chars), {len(held_docs)} held out "
        f"({len(heldout_text)} chars)")
    enc = build_tokenizer(args, train_docs, log)
    held_ids = enc.encode(heldout_text)
    with open(os.path.join(args.work, "heldout.ids"), "w") as f:
        f.write(",".join(map(str, held_ids)) + "\n")
    cfg = model_config(args, enc.size())
    model = export_llm.LlamaModel(cfg, qkv_bias=False, rope_cls=export_llm.RopeComputed)
    ckpt = os.path.join(args.work, "model.pt")
    if args.export_only:
        model.load_state_dict(torch.load(ckpt))
    else:
        stream = encode_docs(enc, train_docs)
        log(f"train stream: {len(stream)} tokens, held-out: {len(held_ids)} tokens, "
            f"params {sum(p.numel() for p in model.parameters())}")
        model.train()
        train_loss, seconds = train(model, cfg, stream, args, log)
        torch.save(model.state_dict(), ckpt)
        log(f"trained {args.steps} steps in {seconds:.0f}s, final train loss (avg of last 50) "
            f"{train_loss:.4f}")
    model.eval()
    held = heldout_loss(model, cfg, torch.tensor(held_ids), args.context)
    log(f"held-out loss {held:.4f} (ppl {math.exp(held):.2f}) over windows of {args.context}")
    onnx_path = os.path.join(args.out, "tiny-llama.onnx")
    export_onnx(model, cfg, onnx_path)
    log(f"exported {onnx_path} ({os.path.getsize(onnx_path)} bytes)")


if __name__ == "__main__":
    main()
