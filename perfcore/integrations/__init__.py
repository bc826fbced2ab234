"""Trainer callbacks: perfcore's per-step attribution inside Hugging Face Trainer and Lightning runs,
one line to add, logged through the trainer's own loggers. The trainer libraries load only when their
callback is used (perfcore.integrations.huggingface / .lightning)."""
