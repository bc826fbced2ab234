"""A hand-written character language model in the nanoGPT manner: the corpus is one tensor in memory,
get_batch() slices random windows, 4 micro-batches of gradient accumulation per optimizer step, AdamW,
gradient clipping, an eval every N steps. No DataLoader."""
import argparse
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x, mask):
        h = self.ln1(x)
        x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
        return x + self.mlp(self.ln2(x))


class CharLM(nn.Module):
    def __init__(self, vocab, d=128, layers=2, heads=4, ctx=64):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(ctx, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.head = nn.Linear(d, vocab)
        self.register_buffer("mask", torch.triu(torch.full((ctx, ctx), float("-inf")), 1))

    def forward(self, idx):
        t = idx.shape[1]
        x = self.tok(idx) + self.pos(torch.arange(t, device=idx.device))
        for b in self.blocks:
            x = b(x, self.mask[:t, :t])
        return self.head(x)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--iters", type=int, default=60)
    p.add_argument("--accum", type=int, default=4)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--ctx", type=int, default=64)
    p.add_argument("--eval-every", type=int, default=20)
    args = p.parse_args()
    torch.manual_seed(0)
    text = "the quick brown fox jumps over the lazy dog. " * 1000
    chars = sorted(set(text))
    stoi = {c: i for i, c in enumerate(chars)}
    data = torch.tensor([stoi[c] for c in text], dtype=torch.long)
    n = int(0.9 * len(data))
    train_data, val_data = data[:n], data[n:]
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = CharLM(len(chars), ctx=args.ctx).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)

    def get_batch(split):
        d = train_data if split == "train" else val_data
        ix = torch.randint(len(d) - args.ctx - 1, (args.batch,))
        x = torch.stack([d[i:i + args.ctx] for i in ix])
        y = torch.stack([d[i + 1:i + 1 + args.ctx] for i in ix])
        return x.to(device), y.to(device)

    @torch.no_grad()
    def estimate_loss():
        model.eval()
        losses = [F.cross_entropy(model(x).flatten(0, 1), y.flatten()).item()
                  for x, y in (get_batch("val") for _ in range(5))]
        model.train()
        return sum(losses) / len(losses)

    for it in range(args.iters):
        for micro in range(args.accum):
            x, y = get_batch("train")
            loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten()) / args.accum
            loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        if it % args.eval_every == 0:
            print(f"iter {it}: train loss {loss.item() * args.accum:.3f}, val {estimate_loss():.3f}, "
                  f"ppl {math.exp(loss.item() * args.accum):.1f}")


if __name__ == "__main__":
    main()
