"""Renders chat conversations with a model directory's own chat template,
as transformers' ``apply_chat_template(..., tokenize=False)`` does: it is
that call, so the text is the reference's by construction.

    python -m hy_chat.render MODEL_DIR IN OUT

IN: JSON Lines. The first line is the header ``{"variables": {...}}``: the
template variables every conversation gets (``enable_thinking`` and any
other the template reads; passed as keyword arguments). Each further line
is one conversation: ``{"messages": [{"role": ..., "content": ...}, ...],
"add_generation_prompt": bool}``.

OUT: JSON Lines. The first line is ``{"template": TEXT, "turn_end": S}``:
the template transformers loaded, and what it writes after an assistant
message's content (rendered from a probe conversation; "" when the
template writes nothing there, null when the probe itself fails). Then
one line per conversation: ``{"text": ...}``, or ``{"error": ...}`` with
the template's own error (``raise_exception`` and the like).

Exit status: 0 done (per-conversation errors included), 2 bad usage or
input, 3 transformers is missing, 4 the directory has no chat template or
its tokenizer does not load (the message says which).
"""

import json
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

_PROBE = "hy-probe-3f9c1a"


def _read(path):
    with open(path, encoding="utf-8") as f:
        # Split on "\n" only: the JSON may hold raw U+2028 and the like.
        return [json.loads(line) for line in f.read().split("\n") if line]


def turn_end(tok, variables):
    """What the template writes after an assistant message's content."""
    messages = [{"role": "user", "content": "hi"},
                {"role": "assistant", "content": _PROBE}]
    try:
        text = tok.apply_chat_template(messages, tokenize=False,
                                       add_generation_prompt=False,
                                       **variables)
    except Exception:  # A template that cannot render the probe.
        return None
    at = text.rfind(_PROBE)
    return None if at < 0 else text[at + len(_PROBE):]


def main(argv):
    if len(argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    model_dir, in_path, out_path = argv[1:]
    try:
        lines = _read(in_path)
        variables = lines[0]["variables"]
        requests = lines[1:]
    except (OSError, ValueError, KeyError, IndexError) as e:
        print(f"hy_chat.render: {in_path}: {e}", file=sys.stderr)
        return 2
    try:
        from transformers import AutoTokenizer
    except ImportError as e:
        print(f"hy_chat.render: {e} (scripts/install-deps.sh installs "
              "transformers into .venv)", file=sys.stderr)
        return 3
    try:
        tok = AutoTokenizer.from_pretrained(model_dir)
    except Exception as e:
        print(f"hy_chat.render: {model_dir}: transformers cannot load the "
              f"tokenizer: {type(e).__name__}: {e}", file=sys.stderr)
        return 4
    template = tok.chat_template
    if isinstance(template, dict):
        template = template.get("default")
    if not template:
        print(f"hy_chat.render: {model_dir}: transformers finds no chat "
              "template", file=sys.stderr)
        return 4
    with open(out_path, "w", encoding="utf-8") as out:
        out.write(json.dumps({"template": template,
                              "turn_end": turn_end(tok, variables)}) + "\n")
        for r in requests:
            try:
                text = tok.apply_chat_template(
                    r["messages"], tokenize=False,
                    add_generation_prompt=r.get("add_generation_prompt",
                                                True),
                    **variables)
                line = {"text": text}
            except Exception as e:
                line = {"error": f"{type(e).__name__}: {e}"}
            out.write(json.dumps(line) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
