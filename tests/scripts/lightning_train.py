"""A LightningModule trained with Trainer.fit on a DataLoader, as Lightning's examples do."""
import argparse

import lightning.pytorch as L
import torch
from torch.utils.data import DataLoader, TensorDataset


class Regressor(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = torch.nn.functional.mse_loss(self.net(x).squeeze(-1), y)
        self.log("train_loss", loss)
        return loss

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=1e-3)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--max-steps", type=int, default=15)
    ap.add_argument("--accumulate", type=int, default=1)
    args = ap.parse_args()
    g = torch.Generator().manual_seed(0)
    ds = TensorDataset(torch.randn(512, 16, generator=g), torch.randn(512, generator=g))
    trainer = L.Trainer(max_steps=args.max_steps, accumulate_grad_batches=args.accumulate, accelerator="cpu",
                        logger=False, enable_progress_bar=False, enable_model_summary=False,
                        enable_checkpointing=False)
    model = Regressor()
    trainer.fit(model, DataLoader(ds, batch_size=16, shuffle=True))
    print(f"GLOBAL_STEP {trainer.global_step}")


if __name__ == "__main__":
    main()
