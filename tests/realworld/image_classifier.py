"""A torchvision-style image classifier, written the way the ImageNet example is: an ImageFolder of
JPEGs, RandomResizedCrop + flip + normalize, a DataLoader with workers, a ResNet, SGD, print every N.
(Makes its small JPEG dataset once, in --data, if the folder is empty.)"""
import argparse
import os
import time

import numpy as np
import torch
import torch.nn as nn
import torchvision.datasets as datasets
import torchvision.models as models
import torchvision.transforms as transforms
from PIL import Image


def make_dataset(root, classes=4, per_class=48, size=256):
    rng = np.random.default_rng(0)
    for c in range(classes):
        d = os.path.join(root, f"class{c}")
        os.makedirs(d, exist_ok=True)
        for i in range(per_class):
            img = rng.integers(0, 255, (size, size, 3), dtype=np.uint8)
            img[::2] = img[::2] // 2 + c * 30  # some structure, so JPEG has work to do
            Image.fromarray(img).save(os.path.join(d, f"{i}.jpg"), quality=90)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--data", default="/tmp/imgcls_data")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--print-freq", type=int, default=5)
    args = p.parse_args()
    if not os.path.isdir(args.data) or not os.listdir(args.data):
        make_dataset(args.data)
    normalize = transforms.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225])
    train_dataset = datasets.ImageFolder(args.data, transforms.Compose([
        transforms.RandomResizedCrop(112), transforms.RandomHorizontalFlip(), transforms.ToTensor(), normalize]))
    train_loader = torch.utils.data.DataLoader(train_dataset, batch_size=args.batch_size, shuffle=True,
                                               num_workers=args.workers, pin_memory=True)
    model = models.resnet18(num_classes=4)
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), 0.1, momentum=0.9, weight_decay=1e-4)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model.to(device)
    for epoch in range(args.epochs):
        model.train()
        end = time.time()
        for i, (images, target) in enumerate(train_loader):
            images = images.to(device, non_blocking=True)
            target = target.to(device, non_blocking=True)
            output = model(images)
            loss = criterion(output, target)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if i % args.print_freq == 0:
                print(f"Epoch: [{epoch}][{i}/{len(train_loader)}]\tTime {time.time() - end:.3f}\tLoss {loss.item():.4f}")
            end = time.time()


if __name__ == "__main__":
    main()
