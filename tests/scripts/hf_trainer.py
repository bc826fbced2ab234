"""Fine-tune a small BERT-style classifier with the Hugging Face Trainer, as its examples do:
argparse in, a model built from a config, a datasets-style list of dicts, Trainer.train()."""
import argparse

import torch
from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--output_dir", required=True)
    ap.add_argument("--max_steps", type=int, default=12)
    ap.add_argument("--grad_accum", type=int, default=1)
    ap.add_argument("--eval_steps", type=int, default=0, help="evaluate on a held-out set every N steps")
    args = ap.parse_args()

    config = BertConfig(vocab_size=200, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=64, num_labels=2)
    model = BertForSequenceClassification(config)
    g = torch.Generator().manual_seed(0)
    train = [{"input_ids": torch.randint(0, 200, (24,), generator=g), "labels": int(i % 2)} for i in range(256)]
    held_out = [{"input_ids": torch.randint(0, 200, (24,), generator=g), "labels": int(i % 2)} for i in range(40)]
    evaluate = {"eval_strategy": "steps", "eval_steps": args.eval_steps} if args.eval_steps else {}
    targs = TrainingArguments(output_dir=args.output_dir, per_device_train_batch_size=8, max_steps=args.max_steps,
                              gradient_accumulation_steps=args.grad_accum, learning_rate=1e-3, logging_steps=4,
                              report_to=[], save_strategy="no", use_cpu=True, disable_tqdm=True,
                              dataloader_num_workers=0, **evaluate)
    trainer = Trainer(model=model, args=targs, train_dataset=train, eval_dataset=held_out if args.eval_steps else None)
    result = trainer.train()
    print(f"GLOBAL_STEP {result.global_step}")


if __name__ == "__main__":
    main()
