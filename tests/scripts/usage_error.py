"""A training script whose command line is wrong: argparse prints its usage and exits 2 before any step."""
import argparse

import torch

parser = argparse.ArgumentParser()
parser.add_argument("--lr", type=float, required=True)
args = parser.parse_args()
model = torch.nn.Linear(4, 1)
