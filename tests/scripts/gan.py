"""A GAN trained the DCGAN way (pytorch/examples dcgan): per iteration, update D on real and fake
(optimizerD.step()), then G (optimizerG.step()). Two optimizers, one training step."""
import argparse

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--batchSize", type=int, default=16)
    parser.add_argument("--nz", type=int, default=8)
    parser.add_argument("--niter", type=int, default=2, help="number of epochs to train for")
    parser.add_argument("--lr", type=float, default=0.0002)
    parser.add_argument("--samples", type=int, default=160)
    opt = parser.parse_args()
    torch.manual_seed(0)

    dataset = TensorDataset(torch.randn(opt.samples, 32))
    dataloader = DataLoader(dataset, batch_size=opt.batchSize, shuffle=True)
    netG = nn.Sequential(nn.Linear(opt.nz, 64), nn.ReLU(True), nn.Linear(64, 32), nn.Tanh())
    netD = nn.Sequential(nn.Linear(32, 64), nn.LeakyReLU(0.2, inplace=True), nn.Linear(64, 1), nn.Sigmoid())
    criterion = nn.BCELoss()
    real_label, fake_label = 1.0, 0.0
    optimizerD = torch.optim.Adam(netD.parameters(), lr=opt.lr, betas=(0.5, 0.999))
    optimizerG = torch.optim.Adam(netG.parameters(), lr=opt.lr, betas=(0.5, 0.999))
    iterations = 0
    for epoch in range(opt.niter):
        for i, (real_cpu,) in enumerate(dataloader, 0):
            # (1) Update D network: maximize log(D(x)) + log(1 - D(G(z)))
            netD.zero_grad()
            batch_size = real_cpu.size(0)
            label = torch.full((batch_size,), real_label)
            output = netD(real_cpu).view(-1)
            errD_real = criterion(output, label)
            errD_real.backward()
            noise = torch.randn(batch_size, opt.nz)
            fake = netG(noise)
            label.fill_(fake_label)
            output = netD(fake.detach()).view(-1)
            errD_fake = criterion(output, label)
            errD_fake.backward()
            errD = errD_real + errD_fake
            optimizerD.step()
            # (2) Update G network: maximize log(D(G(z)))
            netG.zero_grad()
            label.fill_(real_label)
            output = netD(fake).view(-1)
            errG = criterion(output, label)
            errG.backward()
            optimizerG.step()
            iterations += 1
            if i % 5 == 0:
                print(f"[{epoch}/{opt.niter}][{i}/{len(dataloader)}] Loss_D: {errD.item():.4f} Loss_G: {errG.item():.4f}")
    print("ITERATIONS", iterations)


if __name__ == "__main__":
    main()
