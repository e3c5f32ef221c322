"""hy's chat-template renderer: a model's Hugging Face chat template,
rendered by transformers itself (``python -m hy_chat.render``; hyctl's
ChatTemplate runs it once per data load, trainer/tokenizer/chat_template.h).
"""
