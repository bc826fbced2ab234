"""A Lightning script shaped like Lightning's backbone_image_classifier example: a LightningDataModule
whose train_dataloader builds the loader, a LightningModule whose training_step and backward run
inside optimizer.step(closure). Its forward and backward each take a known time (--forward-ms,
--backward-ms), and so does making a batch (--item-ms per item). With --val-every N, Lightning runs
its validation loop (--val-batches batches) every N training steps. Prints `GLOBAL_STEP <n>`."""
import argparse

import lightning.pytorch as L
import torch
from slow_model import Backbone, SlowItems
from torch.utils.data import DataLoader


class Classifier(L.LightningModule):
    def __init__(self, forward_s, backward_s):
        super().__init__()
        self.backbone = Backbone(forward_s, backward_s)

    def forward(self, x):
        return self.backbone(x)

    def training_step(self, batch, batch_idx):
        x, y = batch
        return torch.nn.functional.mse_loss(self(x).squeeze(-1), y)

    def validation_step(self, batch, batch_idx):
        x, y = batch
        return torch.nn.functional.mse_loss(self(x).squeeze(-1), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=1e-3)


class DataModule(L.LightningDataModule):
    def __init__(self, batch_size, item_s):
        super().__init__()
        self.batch_size = batch_size
        self.train = SlowItems(4096, item_s)

    def train_dataloader(self):
        return DataLoader(self.train, batch_size=self.batch_size, shuffle=True)  # TRAIN_DATALOADER


class ValidatedDataModule(DataModule):
    def val_dataloader(self):
        return DataLoader(SlowItems(1024, self.train.delay), batch_size=self.batch_size)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--max-steps", type=int, default=20)
    ap.add_argument("--forward-ms", type=float, default=6.0)
    ap.add_argument("--backward-ms", type=float, default=4.0)
    ap.add_argument("--item-ms", type=float, default=0.0, help="time to make one item (16 a batch)")
    ap.add_argument("--val-every", type=int, default=0, help="validate every N steps (0: never)")
    ap.add_argument("--val-batches", type=int, default=4)
    args = ap.parse_args()
    val = (dict(val_check_interval=args.val_every, check_val_every_n_epoch=None, limit_val_batches=args.val_batches)
           if args.val_every else {})
    trainer = L.Trainer(max_steps=args.max_steps, accelerator="cpu", logger=False, enable_progress_bar=False,
                        enable_model_summary=False, enable_checkpointing=False, **val)
    data = (ValidatedDataModule if args.val_every else DataModule)(16, args.item_ms / 1e3)
    trainer.fit(Classifier(args.forward_ms / 1e3, args.backward_ms / 1e3), datamodule=data)
    print(f"GLOBAL_STEP {trainer.global_step}")


if __name__ == "__main__":
    main()
