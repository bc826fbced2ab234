"""A word-level language model trained the way pytorch/examples' word_language_model does it: no
torch.optim (the update is p.data.add_(p.grad, alpha=-lr)), no DataLoader (batches are slices of
one long tensor), hidden state carried across batches, an evaluation pass after each epoch."""
import argparse
import math
import time

import torch
import torch.nn as nn


class RNNModel(nn.Module):
    def __init__(self, ntoken, ninp, nhid, nlayers, dropout=0.2):
        super().__init__()
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(ntoken, ninp)
        self.rnn = nn.LSTM(ninp, nhid, nlayers, dropout=dropout)
        self.decoder = nn.Linear(nhid, ntoken)
        self.nhid, self.nlayers = nhid, nlayers

    def forward(self, input, hidden):
        emb = self.drop(self.encoder(input))
        output, hidden = self.rnn(emb, hidden)
        output = self.drop(output)
        decoded = self.decoder(output).view(-1, self.decoder.out_features)
        return nn.functional.log_softmax(decoded, dim=1), hidden

    def init_hidden(self, bsz):
        weight = next(self.parameters())
        return (weight.new_zeros(self.nlayers, bsz, self.nhid), weight.new_zeros(self.nlayers, bsz, self.nhid))


def batchify(data, bsz):
    nbatch = data.size(0) // bsz
    data = data.narrow(0, 0, nbatch * bsz)
    return data.view(bsz, -1).t().contiguous()


def repackage_hidden(h):
    """Wraps hidden states in new Tensors, to detach them from their history."""
    if isinstance(h, torch.Tensor):
        return h.detach()
    return tuple(repackage_hidden(v) for v in h)


def get_batch(source, i, bptt):
    seq_len = min(bptt, len(source) - 1 - i)
    data = source[i:i + seq_len]
    target = source[i + 1:i + 1 + seq_len].view(-1)
    return data, target


def main():
    parser = argparse.ArgumentParser(description="PyTorch LSTM language model (small)")
    parser.add_argument("--emsize", type=int, default=32)
    parser.add_argument("--nhid", type=int, default=32)
    parser.add_argument("--nlayers", type=int, default=2)
    parser.add_argument("--lr", type=float, default=20)
    parser.add_argument("--clip", type=float, default=0.25)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch_size", type=int, default=8, metavar="N")
    parser.add_argument("--bptt", type=int, default=10)
    parser.add_argument("--tokens", type=int, default=2400)
    parser.add_argument("--log-interval", type=int, default=10, metavar="N")
    parser.add_argument("--seed", type=int, default=1111)
    args = parser.parse_args()

    torch.manual_seed(args.seed)
    ntokens = 100
    corpus = torch.randint(0, ntokens, (args.tokens,))
    train_data = batchify(corpus[: args.tokens * 3 // 4], args.batch_size)
    val_data = batchify(corpus[args.tokens * 3 // 4:], 4)
    model = RNNModel(ntokens, args.emsize, args.nhid, args.nlayers)
    criterion = nn.NLLLoss()
    iterations = 0

    def evaluate(data_source):
        model.eval()
        total_loss = 0.0
        hidden = model.init_hidden(4)
        with torch.no_grad():
            for i in range(0, data_source.size(0) - 1, args.bptt):
                data, targets = get_batch(data_source, i, args.bptt)
                output, hidden = model(data, hidden)
                hidden = repackage_hidden(hidden)
                total_loss += len(data) * criterion(output, targets).item()
        return total_loss / (len(data_source) - 1)

    def train(lr):
        nonlocal iterations
        model.train()
        total_loss = 0.0
        start_time = time.time()
        hidden = model.init_hidden(args.batch_size)
        for batch, i in enumerate(range(0, train_data.size(0) - 1, args.bptt)):
            data, targets = get_batch(train_data, i, args.bptt)
            hidden = repackage_hidden(hidden)
            model.zero_grad()
            output, hidden = model(data, hidden)
            loss = criterion(output, targets)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
            for p in model.parameters():
                p.data.add_(p.grad, alpha=-lr)
            total_loss += loss.item()
            iterations += 1
            if batch % args.log_interval == 0 and batch > 0:
                cur_loss = total_loss / args.log_interval
                print(f"| {batch:5d} batches | lr {lr:02.2f} | ms/batch {(time.time() - start_time) * 1000 / args.log_interval:5.2f} "
                      f"| loss {cur_loss:5.2f} | ppl {math.exp(min(cur_loss, 50)):8.2f}", flush=True)
                total_loss = 0
                start_time = time.time()

    lr = args.lr
    for epoch in range(1, args.epochs + 1):
        train(lr)
        val_loss = evaluate(val_data)
        print(f"| end of epoch {epoch:3d} | valid loss {val_loss:5.2f}", flush=True)
        lr /= 4.0
    print("ITERATIONS", iterations)


if __name__ == "__main__":
    main()
