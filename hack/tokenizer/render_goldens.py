#!/usr/bin/env python3
"""Render the chat-template goldens for tokenizer/chat.

Reads tokenizer/chat/testdata/requests.jsonl (one OpenAI chat request per
line, with a name and an optional "only" list of families) and, for every
family whose tokenizer_config.json carries a chat_template, renders each
request with Python jinja2 configured the way Hugging Face transformers'
apply_chat_template configures it:

  ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                extensions=[AssistantTracker, jinja2.ext.loopcontrols])
                                (AssistantTracker as GenerationTag below)
  filters["tojson"]        = json.dumps(ensure_ascii=False, indent, separators, sort_keys)
  globals["raise_exception"] raises TemplateError(message)
  globals["strftime_now"]    formats a fixed clock (2026-01-02 03:04:05)

The request is turned into template variables the way the gateway does it
(tokenizer/chat's contract, which follows SMG's chat preparation):

  * content given as a list of parts is flattened for "string"-format
    templates: the text parts joined with " " (no text parts: "");
  * tool_calls[].function.arguments given as a JSON string is parsed into an
    object for templates that consume objects (PARSE_ARGS below); templates
    that splice the string into the prompt (DeepSeek V3) get it unchanged;
  * messages, tools (None when absent), documents (None when absent),
    add_generation_prompt (default True), the special tokens from the
    tokenizer config, reasoning_effort and tool_choice when present, then
    chat_template_kwargs, later ones overriding earlier ones.

Output: tokenizer/chat/testdata/golden_<family>.jsonl, one line per rendered
request: {"name", "prompt"} or {"name", "error"}.

The chat templates that github.com/ardanlabs/jinja ships in its testdata
(read from the Go module cache) are rendered with the same requests into
golden_engine_templates.jsonl.

Besides the model families, testdata/syntax.jsonl holds small templates that
exercise jinja2's whitespace control and the template features chat
templates use; each is rendered with testdata/syntax_request.json into
golden_syntax.jsonl.

Usage: python3 hack/tokenizer/render_goldens.py  (data from
SMG_TOKENIZER_DATA or ~/.cache/smg-tokenizers/v1; `make tools` fetches it).
"""

import datetime
import json
import os
import re
import subprocess
import sys

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TESTDATA = os.path.join(ROOT, "tokenizer", "chat", "testdata")
DATA = os.environ.get("SMG_TOKENIZER_DATA") or os.path.expanduser("~/.cache/smg-tokenizers/v1")
FAMILIES = ["qwen3", "llama3", "deepseek_v3", "llama2"]

# Which templates get tool-call arguments as objects. tokenizer/chat derives
# this from the template source; its golden test checks it agrees.
PARSE_ARGS = {"qwen3": True, "llama3": False, "deepseek_v3": False, "llama2": False, "semantics": True}

# testdata/semantics.jinja is a template written to exercise the jinja2 and
# transformers semantics (value printing, tojson options, whitespace control,
# loop controls, raise_exception); it renders every request with these tokens.
SEMANTICS_TOKENS = {"bos_token": "<s>", "eos_token": "</s>"}

SPECIAL = ["bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"]
CLOCK = datetime.datetime(2026, 1, 2, 3, 4, 5)


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def strftime_now(fmt):
    return CLOCK.strftime(fmt)


class GenerationTag(jinja2.ext.Extension):
    """transformers' AssistantTracker when not tracking: {% generation %}
    renders its body unchanged."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_render"), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def environment():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[GenerationTag, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def token_text(v):
    if isinstance(v, dict):
        return v.get("content")
    return v


class InputError(Exception):
    pass


def prepare(family, req, special, flatten=True, parse_args=None):
    if parse_args is None:
        parse_args = PARSE_ARGS[family]
    messages = []
    for m in req["messages"]:
        m = dict(m)
        c = m.get("content")
        if flatten and isinstance(c, list):
            m["content"] = " ".join(p["text"] for p in c if isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str))
        if parse_args and m.get("role") == "assistant" and isinstance(m.get("tool_calls"), list):
            calls = []
            for call in m["tool_calls"]:
                call = dict(call)
                fn = call.get("function")
                if isinstance(fn, dict) and isinstance(fn.get("arguments"), str):
                    fn = dict(fn)
                    try:
                        fn["arguments"] = json.loads(fn["arguments"])
                    except ValueError as e:
                        raise InputError("tool call arguments are not valid JSON: %s" % e)
                    call["function"] = fn
                calls.append(call)
            m["tool_calls"] = calls
        messages.append(m)
    ctx = {
        "messages": messages,
        "tools": req.get("tools"),
        "documents": req.get("documents"),
        "add_generation_prompt": req.get("add_generation_prompt", True),
    }
    ctx.update(special)
    if "reasoning_effort" in req:
        ctx["reasoning_effort"] = req["reasoning_effort"]
    if "tool_choice" in req:
        ctx["tool_choice"] = req["tool_choice"]
    ctx.update(req.get("chat_template_kwargs") or {})
    return ctx


def main():
    with open(os.path.join(TESTDATA, "requests.jsonl"), encoding="utf-8") as f:
        requests = [json.loads(line) for line in f if line.strip()]
    env = environment()
    for family in FAMILIES + ["semantics"]:
        if family == "semantics":
            with open(os.path.join(TESTDATA, "semantics.jinja"), encoding="utf-8") as f:
                source = f.read()
            special = SEMANTICS_TOKENS
        else:
            path = os.path.join(DATA, family, "tokenizer_config.json")
            if not os.path.exists(path):
                sys.exit("missing %s: run make tools" % path)
            with open(path, encoding="utf-8") as f:
                config = json.load(f)
            source = config.get("chat_template")
            if not source:
                print("%s: no chat_template, skipped" % family)
                continue
            special = {k: token_text(config[k]) for k in SPECIAL if token_text(config.get(k)) is not None}
        template = env.from_string(source)
        out = []
        for r in requests:
            if r.get("only") and family not in r["only"]:
                continue
            line = {"name": r["name"]}
            try:
                line["prompt"] = template.render(**prepare(family, r["request"], special))
            except (jinja2.exceptions.TemplateError, InputError, TypeError) as e:
                line["error"] = "%s: %s" % (type(e).__name__, e)
            out.append(line)
        dst = os.path.join(TESTDATA, "golden_%s.jsonl" % family)
        with open(dst, "w", encoding="utf-8") as f:
            for line in out:
                f.write(json.dumps(line, ensure_ascii=False) + "\n")
        errors = sum(1 for line in out if "error" in line)
        print("%s: %d renders (%d errors) -> %s" % (family, len(out), errors, os.path.relpath(dst, ROOT)))
    render_syntax(env)
    render_engine_templates(env, requests)


# The content-format and tool-argument detection of tokenizer/chat
# (template.go's partsPattern and objectArgsPattern), for the engine's
# templates below; the Go test checks it decides the same.
PARTS_RE = re.compile(r"""for\s+\w+\s+in\s+(?:\w+\s*(?:\.\s*content|\[\s*['"]content['"]\s*\])|content)\b|(?:\.content|\[\s*['"]content['"]\s*\]|\bcontent)\s*(?:\[\s*\d|\|\s*length)""")
OBJECT_ARGS_RE = re.compile(r"""arguments['"]?\s*\]?\s*(?:\|\s*(?:tojson|items|dictsort)\b|is\s+(?:not\s+)?(?:string|mapping)\b|\.\s*items\s*\()""")

# Templates in github.com/ardanlabs/jinja's testdata (Go module cache) that
# are rendered too; DeepSeek-V4-Flash is left out because it needs a
# from_json filter that transformers does not have.
ENGINE_MODULE = "github.com/ardanlabs/jinja@v1.8.0"
ENGINE_SKIP = {"DeepSeek-V4-Flash.jinja"}


def render_engine_templates(env, requests):
    modcache = subprocess.run(["go", "env", "GOMODCACHE"], capture_output=True, text=True, check=True).stdout.strip()
    tdir = os.path.join(modcache, ENGINE_MODULE, "testdata", "templates")
    out = []
    for fn in sorted(os.listdir(tdir)):
        if fn in ENGINE_SKIP or not fn.endswith(".jinja"):
            continue
        with open(os.path.join(tdir, fn), encoding="utf-8") as f:
            source = f.read()
        flatten = not PARTS_RE.search(source)
        parse_args = bool(OBJECT_ARGS_RE.search(source))
        template = env.from_string(source)
        for r in requests:
            if r.get("only"):
                continue  # family-specific shapes (null content, ...)
            line = {"template": fn, "name": r["name"], "format": "string" if flatten else "openai", "parse_args": parse_args}
            try:
                ctx = prepare("", r["request"], SEMANTICS_TOKENS, flatten=flatten, parse_args=parse_args)
                line["prompt"] = template.render(**ctx)
            except (jinja2.exceptions.TemplateError, InputError, TypeError) as e:
                line["error"] = "%s: %s" % (type(e).__name__, e)
            out.append(line)
    dst = os.path.join(TESTDATA, "golden_engine_templates.jsonl")
    with open(dst, "w", encoding="utf-8") as f:
        for line in out:
            f.write(json.dumps(line, ensure_ascii=False) + "\n")
    print("engine templates: %d renders -> %s" % (len(out), os.path.relpath(dst, ROOT)))


def render_syntax(env):
    with open(os.path.join(TESTDATA, "syntax_request.json"), encoding="utf-8") as f:
        req = json.load(f)
    with open(os.path.join(TESTDATA, "syntax.jsonl"), encoding="utf-8") as f:
        cases = [json.loads(line) for line in f if line.strip()]
    out = []
    for c in cases:
        line = {"name": c["name"]}
        try:
            line["prompt"] = env.from_string(c["template"]).render(**prepare("semantics", req, SEMANTICS_TOKENS))
        except (jinja2.exceptions.TemplateError, TypeError) as e:
            line["error"] = "%s: %s" % (type(e).__name__, e)
        out.append(line)
    dst = os.path.join(TESTDATA, "golden_syntax.jsonl")
    with open(dst, "w", encoding="utf-8") as f:
        for line in out:
            f.write(json.dumps(line, ensure_ascii=False) + "\n")
    print("syntax: %d renders -> %s" % (len(out), os.path.relpath(dst, ROOT)))


if __name__ == "__main__":
    main()
