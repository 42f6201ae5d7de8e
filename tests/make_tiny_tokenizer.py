#!/usr/bin/env python3
"""Writes a tiny tokenizer.json (+ tokenizer_config.json): byte-level BPE
in the Qwen2 style (NFC, the Qwen2 split regex, ByteLevel; the default) or,
with --style sentencepiece, SentencePiece-style BPE in the Llama 2 style
(U+2581, byte fallback, <unk>/<s>/</s>).  Its ids fit the
test zoo's 512-token vocabulary, so tests can compile it into a zoo plan.
Usage: make_tiny_tokenizer.py OUT_DIR [--style byte-level|sentencepiece]"""
import json
import os
import sys

QWEN2_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
               r"|\s*[\r\n]+|\s+(?!\S)|\s+")
MERGES = [("Ġ", "t"), ("h", "e"), ("Ġt", "he"), ("i", "n"), ("a", "n"), ("e", "r"), ("o", "n"),
          ("Ġ", "a"), ("r", "e"), ("Ġ", "s"), ("Ġa", "n"), ("Ġan", "d"), ("o", "u"), ("Ġ", "w"),
          ("in", "g"), ("e", "n"), ("Ġ", "o"), ("Ġ", "h"), ("l", "l"), ("Ġ", "b")]


def byte_alphabet():
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    chars, extra = {}, 0
    for b in range(256):
        if b in printable:
            chars[b] = chr(b)
        else:
            chars[b] = chr(256 + extra)
            extra += 1
    return [chars[b] for b in range(256)]


META = "\u2581"
SP_MERGES = [(META, "t"), ("h", "e"), (META + "t", "he"), ("i", "n"), ("a", "n"), (META, "a"), ("e", "r"),
             (META + "a", "n"), (META + "an", "d"), ("o", "u"), (META, "s"), ("l", "l")]


def added_token(i, content, special):
    return {"id": i, "content": content, "single_word": False, "lstrip": False, "rstrip": False,
            "normalized": False, "special": special}


def sentencepiece():
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    for b in range(256):
        vocab[f"<0x{b:02X}>"] = len(vocab)
    for c in META + "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.,'!?":
        vocab[c] = len(vocab)
    for a, b in SP_MERGES:
        vocab.setdefault(a + b, len(vocab))
    added = [added_token(i, c, True) for i, c in enumerate(("<unk>", "<s>", "</s>"))]
    added += [added_token(i, f"<extra_{i}>", False) for i in range(len(vocab), 512)]
    meta_to_space = {"type": "Replace", "pattern": {"String": META}, "content": " "}
    return {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
        "normalizer": {"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": META},
            {"type": "Replace", "pattern": {"String": " "}, "content": META}]},
        "pre_tokenizer": None,
        "post_processor": {"type": "TemplateProcessing",
                           "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                                      {"Sequence": {"id": "A", "type_id": 0}}],
                           "pair": [], "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}},
        "decoder": {"type": "Sequence", "decoders": [
            meta_to_space, {"type": "ByteFallback"}, {"type": "Fuse"},
            {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
        "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": True,
                  "vocab": vocab, "merges": [f"{a} {b}" for a, b in SP_MERGES]},
    }, {"bos_token": "<s>", "eos_token": "</s>"}


def main():
    out = sys.argv[1]
    if sys.argv[2:] == ["--style", "sentencepiece"]:
        tok, config = sentencepiece()
        write(out, tok, config)
        return
    vocab = {c: i for i, c in enumerate(byte_alphabet())}
    for a, b in MERGES:
        vocab.setdefault(a + b, len(vocab))
    bos, eos = len(vocab), len(vocab) + 1
    added = [added_token(bos, "<|bos|>", True), added_token(eos, "<|eos|>", True)]
    added += [added_token(i, f"<|extra_{i}|>", False) for i in range(eos + 1, 512)]
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}
    tok = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
        "normalizer": {"type": "NFC"},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": QWEN2_REGEX}, "behavior": "Isolated", "invert": False},
            byte_level]},
        "post_processor": {"type": "TemplateProcessing",
                           "single": [{"SpecialToken": {"id": "<|bos|>", "type_id": 0}},
                                      {"Sequence": {"id": "A", "type_id": 0}}],
                           "pair": [], "special_tokens": {"<|bos|>": {"id": "<|bos|>", "ids": [bos], "tokens": ["<|bos|>"]}}},
        "decoder": byte_level,
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                  "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": [[a, b] for a, b in MERGES]},
    }
    write(out, tok, {"bos_token": "<|bos|>", "eos_token": "<|eos|>", "clean_up_tokenization_spaces": False})


def write(out, tok, config):
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tok, f, ensure_ascii=False)
    with open(os.path.join(out, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f)


main()
