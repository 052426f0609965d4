// Second opinion: renders the conformance corpus with @huggingface/jinja and reports where it
// disagrees with Python jinja2's expected outputs (Python is the reference).
// Run: cd tests/template-reference/hf-jinja && npm ci --no-audit --no-fund && node compare.mjs
import fs from "node:fs";
import path from "node:path";
import { Template } from "@huggingface/jinja";

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), "../../..");
const corpus = JSON.parse(fs.readFileSync(path.join(root, "tests/template-reference/conversations.json"), "utf8"));
const dir = path.join(root, "tests/data/chat-templates");
let same = 0, differ = 0, total = 0;
const byTemplate = {};
for (const name of fs.readdirSync(dir).filter((f) => f.endsWith(".jinja")).sort()) {
  const expected = JSON.parse(fs.readFileSync(path.join(root, "tests/data/chat-template-expected", name.replace(/\.jinja$/, ".json")), "utf8"));
  let tmpl = null;
  try { tmpl = new Template(fs.readFileSync(path.join(dir, name), "utf8")); } catch (e) { tmpl = e; }
  for (const conv of corpus.conversations) {
    total++;
    const want = expected.conversations[conv.name];
    // raise_exception and strftime_now are the library's own (its clock is the real one, so
    // templates that print the date differ from the fixed-clock reference).
    const ctx = { bos_token: "<s>", eos_token: "</s>", unk_token: "<unk>", pad_token: "<pad>", ...conv.context };
    if (conv.tools) ctx.tools = corpus.tools_weather;
    let got, err = null;
    if (tmpl instanceof Error) err = tmpl; else { try { got = tmpl.render(ctx); } catch (e) { err = e; } }
    const ok = want.output !== undefined ? (err === null && got === want.output) : err !== null;
    if (ok) same++; else { differ++; (byTemplate[name] ??= []).push(conv.name + (err ? ` (${String(err.message).slice(0, 80)})` : "")); }
  }
}
console.log(`@huggingface/jinja agrees with Python jinja2 on ${same} of ${total} pairs; disagrees on ${differ}`);
for (const [t, convs] of Object.entries(byTemplate)) console.log(`  ${t}: ${convs.length}: ${convs.slice(0, 3).join("; ")}`);
