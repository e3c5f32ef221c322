"""Converts a GGUF file into a Hugging Face model directory with
transformers itself (scripts/fetch-model.sh runs it).

  gguf_to_hf.py GGUF OUT_DIR

transformers reads the GGUF (through the gguf package), dequantizes its
weights to float32 (that needs accelerate) and rebuilds the tokenizer and
the chat template from the file's metadata; save_pretrained writes
config.json, model.safetensors, tokenizer.json, tokenizer_config.json and
chat_template.jinja. A dequantized model still carries the GGUF
quantization config, which save_pretrained refuses to write: it is
dropped, since the weights saved are plain float32.
"""

import os
import sys


def main(argv):
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    gguf_path, out = argv[1], argv[2]
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder, name = os.path.split(os.path.abspath(gguf_path))
    tok = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name,
                                                 dtype=torch.float32)
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.is_quantized = False
    model.save_pretrained(out)
    tok.save_pretrained(out)
    n = sum(p.numel() for p in model.parameters())
    print(f"gguf_to_hf: {type(model).__name__}, {n:,} parameters -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
