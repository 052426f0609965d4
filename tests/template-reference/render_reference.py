#!/usr/bin/python3
"""Renders every chat template in tests/data/chat-templates/ with every conversation of
conversations.json using Python's jinja2, set up as Hugging Face transformers sets it up
(transformers/utils/chat_template_utils.py, _compile_jinja_template), and writes the expected
outputs to tests/data/chat-template-expected/<template>.json.

Run with Debian's interpreter and python3-jinja2: /usr/bin/python3 render_reference.py
"""
import datetime
import json
import os
import sys

import jinja2
from jinja2 import nodes
from jinja2.ext import Extension, loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TEMPLATES = os.path.join(ROOT, "tests", "data", "chat-templates")
OUT = os.path.join(ROOT, "tests", "data", "chat-template-expected")

# The fixed clock of the conformance tests (the C++ test passes the same one).
FIXED_NOW = datetime.datetime(2024, 7, 26, 13, 45, 30)

SPECIAL_TOKENS = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>",
                  "pad_token": "<pad>"}


class RaisedByTemplate(jinja2.exceptions.TemplateError):
    pass


class GenerationTag(Extension):
    """transformers' {% generation %}...{% endgeneration %}: renders its body unchanged."""
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return nodes.CallBlock(self.call_method("_render"), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def make_env():
    def raise_exception(message):
        raise RaisedByTemplate(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    def strftime_now(format):
        return FIXED_NOW.strftime(format)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[GenerationTag, loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def render_one(template, conv, tools):
    context = dict(SPECIAL_TOKENS)
    context.update(conv["context"])
    if conv.get("tools"):
        context["tools"] = tools
    try:
        return {"output": template.render(**context)}
    except RaisedByTemplate as e:
        return {"raise": e.message}
    except Exception as e:  # any other failure: the C++ engine must fail too
        return {"error": f"{type(e).__name__}: {e}"}


def main():
    with open(os.path.join(HERE, "conversations.json"), encoding="utf-8") as f:
        corpus = json.load(f)
    os.makedirs(OUT, exist_ok=True)
    env = make_env()
    for name in sorted(os.listdir(TEMPLATES)):
        if not name.endswith(".jinja"):
            continue
        with open(os.path.join(TEMPLATES, name), encoding="utf-8", newline="") as f:
            source = f.read()
        result = {"template": name, "conversations": {}}
        try:
            template = env.from_string(source)
        except jinja2.exceptions.TemplateSyntaxError as e:
            result["parse_error"] = f"line {e.lineno}: {e.message}"
            template = None
        if template is not None:
            for conv in corpus["conversations"]:
                result["conversations"][conv["name"]] = render_one(
                    template, conv, corpus["tools_weather"])
        with open(os.path.join(OUT, name[:-len(".jinja")] + ".json"), "w", encoding="utf-8") as f:
            json.dump(result, f, ensure_ascii=False, indent=1, sort_keys=True)
            f.write("\n")
    write_snippets(env)
    print(f"jinja2 {jinja2.__version__}: wrote {OUT} and {SNIPPETS_OUT}", file=sys.stderr)


SNIPPETS_OUT = os.path.join(ROOT, "tests", "data", "template-snippets-expected.json")


def write_snippets(env):
    """Small templates, one feature each, rendered with one context (snippets.json)."""
    with open(os.path.join(HERE, "snippets.json"), encoding="utf-8") as f:
        spec = json.load(f)
    results = []
    for source in spec["snippets"]:
        try:
            template = env.from_string(source)
        except jinja2.exceptions.TemplateSyntaxError as e:
            results.append({"template": source, "parse_error": f"line {e.lineno}: {e.message}"})
            continue
        result = render_one(template, {"context": spec["context"]}, [])
        result["template"] = source
        results.append(result)
    bad = []
    for source in spec["bad_templates"]:
        try:
            env.from_string(source)
            bad.append({"template": source, "parses": True})
        except jinja2.exceptions.TemplateSyntaxError as e:
            bad.append({"template": source, "line": e.lineno, "message": e.message})
    with open(SNIPPETS_OUT, "w", encoding="utf-8") as f:
        json.dump({"snippets": results, "bad_templates": bad}, f, ensure_ascii=False, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
