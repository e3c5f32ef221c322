// Reference encoder for hy's tokenizer tests and benchmark: Hugging Face's
// own JS implementation (@huggingface/tokenizers).
//
//   node tokenize_reference.mjs encode TOKENIZER_JSON CONFIG_JSON IN OUT
//     IN: JSON Lines, one JSON string each. OUT: one line per input,
//     {"plain": [ids without special tokens], "special": [ids with],
//      "nfc": the input in NFC}.
//   node tokenize_reference.mjs bench TOKENIZER_JSON CONFIG_JSON IN REPS
//     Encodes IN's strings (add_special_tokens false) once to warm up, then
//     REPS times; prints the best pass in CPU time:
//     {"mb_per_s": ..., "bytes": ..., "seconds": ..., "tokens": ...}.
//
// The package is found through NODE_PATH or the repo's .npm-deps/.
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";
import { fileURLToPath, pathToFileURL } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(import.meta.url);
let entry;
try {
  entry = require.resolve("@huggingface/tokenizers", {
    paths: [path.join(here, "../../.npm-deps/node_modules"),
            ...(process.env.NODE_PATH ?? "").split(":").filter(Boolean)],
  });
} catch (e) {
  console.error("tokenize_reference: @huggingface/tokenizers not installed");
  process.exit(3);
}
// require.resolve gives the CommonJS build; load the ES module beside it.
const { Tokenizer } = await import(
    pathToFileURL(entry.replace(/tokenizers\.cjs$/, "tokenizers.mjs")).href);

const [mode, tokenizerPath, configPath, inPath, arg] = process.argv.slice(2);
const tokenizer = new Tokenizer(
    JSON.parse(fs.readFileSync(tokenizerPath, "utf8")),
    configPath && fs.existsSync(configPath)
        ? JSON.parse(fs.readFileSync(configPath, "utf8")) : {});
const texts = fs.readFileSync(inPath, "utf8").split("\n")
                  .filter((l) => l.length > 0).map((l) => JSON.parse(l));

if (mode === "encode") {
  const out = fs.openSync(arg, "w");
  for (const text of texts) {
    const plain = tokenizer.encode(text, { add_special_tokens: false }).ids;
    const special = tokenizer.encode(text, { add_special_tokens: true }).ids;
    const nfc = text.normalize("NFC");
    fs.writeSync(out, JSON.stringify({ plain, special, nfc }) + "\n");
  }
  fs.closeSync(out);
} else if (mode === "bench") {
  const reps = Number(arg ?? 3);
  let bytes = 0;
  for (const text of texts) bytes += Buffer.byteLength(text, "utf8");
  for (const text of texts) tokenizer.encode(text, { add_special_tokens: false });
  // Best of REPS passes, in CPU seconds (user + system) of the process.
  let best = Infinity, tokens = 0;
  for (let r = 0; r < reps; ++r) {
    const start = process.cpuUsage();
    tokens = 0;
    for (const text of texts) {
      tokens += tokenizer.encode(text, { add_special_tokens: false }).ids.length;
    }
    const used = process.cpuUsage(start);
    best = Math.min(best, (used.user + used.system) / 1e6);
  }
  console.log(JSON.stringify({
    mb_per_s: bytes / best / 1e6, bytes, seconds: best, tokens }));
} else {
  console.error("usage: tokenize_reference.mjs encode|bench TOKENIZER CONFIG IN OUT|REPS");
  process.exit(2);
}
