"""Loaders are told apart by their dataset and counted by role: a trainer that makes its train and eval
loaders on one line with one set of settings keeps two entries, and an evaluation pass drawn from the
train loader itself is no training batch."""
from __future__ import annotations

from perfcore.run.child.loaders import Loaders
from test_call_sites import Loop, epoch, roles
from test_step_sources import FakeLoader


def loader_over(dataset) -> FakeLoader:
    ld = FakeLoader(0, False)
    ld.dataset = dataset
    return ld


def test_train_and_eval_loaders_made_on_one_line_with_one_set_of_settings_keep_apart():
    # The HF Trainer's _get_dataloader: one DataLoader(...) line for both, batch size 8 each.
    loop = Loop()
    loaders = Loaders(lambda: 0, loop)
    train_set, eval_set = list(range(256)), list(range(40))
    train = loader_over(train_set)
    loaders.made(train, "train.py:29", True)
    for k in range(3):
        epoch(loaders, train, loop, 4, step_every=1)
        loop.training = False  # trainer.evaluate(): model.eval(), a new loader over the eval set
        ev = loader_over(eval_set)
        loaders.made(ev, "train.py:29", True)
        epoch(loaders, ev, loop, 5)
        loop.training = True
    a, b = loaders.summary("/nonexistent")
    assert (a["role"], a["made"], a["batches"]) == ("train", 1, 12)
    assert (b["role"], b["made"], b["batches"]) == ("eval", 3, 15)
    assert "eval_batches" not in a and loaders.training_batches() == 12


def test_an_evaluation_drawn_from_the_train_loader_is_counted_apart():
    loop = Loop()
    loaders = Loaders(lambda: 0, loop)
    train = loader_over(list(range(64)))
    loaders.made(train, "train.py:12")
    for _ in range(2):
        epoch(loaders, train, loop, 8, step_every=1)
        epoch(loaders, train, loop, 3, grad=False)  # the script's train accuracy, under no_grad
    (doc,) = loaders.summary("/nonexistent")
    assert doc["role"] == "train" and doc["batches"] == 16 and doc["eval_batches"] == 6
    assert loaders.training_batches() == 16


def test_new_data_of_one_shape_every_step_is_still_one_loader():
    # DataLoader(TensorDataset(x, y)) with fresh tensors each step: one line, one entry.
    loop = Loop()
    loaders = Loaders(lambda: 0, loop)
    for _ in range(20):
        ld = loader_over(list(range(32)))
        loaders.made(ld, "train.py:5")
        epoch(loaders, ld, loop, 1)
        loop.steps += 1
    (doc,) = loaders.summary("/nonexistent")
    assert doc["made"] == 20 and doc["batches"] == 20 and doc["role"] == "train"


def test_a_dataset_whose_len_fails_is_still_recorded():
    class NoLen:
        def __len__(self):
            raise RuntimeError("streamed")

    loaders = Loaders(lambda: 0, Loop())
    loaders.made(loader_over(NoLen()), "train.py:3")
    loaders.made(loader_over(NoLen()), "train.py:3")
    (doc,) = loaders.summary("/nonexistent")
    assert doc["made"] == 2 and doc["dataset"].endswith("NoLen")


def test_a_test_loaders_one_batch_after_training_is_never_train():
    # mnist_forward_forward: one batch from the train loader, then the layers train on it; then one
    # batch from the test loader, with grad on, no eval(), and no step after it.
    loop = Loop()
    loaders = Loaders(lambda: 0, loop)
    train, test = loader_over(list(range(512))), loader_over(list(range(128)))
    loaders.made(train, "ff.py:20")
    loaders.made(test, "ff.py:21")
    epoch(loaders, train, loop, 1)
    loop.steps += 120
    epoch(loaders, test, loop, 1)
    assert roles(loaders) == ["train", "eval"]
    assert loaders.training_batches() == 1


def test_a_loader_that_trained_keeps_its_last_epoch_when_the_run_ends_after_its_first_batch():
    # A trainer that fetches a batch ahead: the run ends with a new epoch's first batch taken, no step after.
    loop = Loop()
    loaders = Loaders(lambda: 0, loop)
    train = loader_over(list(range(64)))
    loaders.made(train, "train.py:9")
    epoch(loaders, train, loop, 8, step_every=1)
    epoch(loaders, train, loop, 1)
    (doc,) = loaders.summary("/nonexistent")
    assert doc["role"] == "train" and doc["batches"] == 9 and "eval_batches" not in doc
