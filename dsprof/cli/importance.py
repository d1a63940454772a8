"""`dsprof importance`: each block's importance (what it loses without its activations) by a proxy, written as the
file `dsprof plan --importance` takes (`dsprof.importance`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..constants import DEFAULT_FINETUNE
from ..names import DEFAULT_PROXY
from ..search.settings import TrainConfig
from .flags import command_line_text
from .options import add_model_args, model_ref_from_args
from .training import ThreadUse, add_proxy_args, add_train_threads_arg, proxy_settings


def add(sub, fmt) -> None:
    p = sub.add_parser(
        "importance", formatter_class=fmt,
        help="each block's importance (what it loses without its activations) by a proxy; the file dsprof plan --importance takes",
    )
    add_model_args(p)
    p.add_argument("--data", default="digits", help="'digits' (scikit-learn's 8x8 digits, upsampled), 'shapes' (generated) "
                   "or an ImageFolder root with train/ and val/ (ImageNet layout)")
    add_proxy_args(p, DEFAULT_PROXY)
    p.add_argument("--batch-size", type=int, default=TrainConfig.batch_size, help="images per batch")
    p.add_argument("--lr", type=float, default=DEFAULT_FINETUNE["lr"], help="learning rate of short-finetune and finetune")
    p.add_argument("--epochs", type=int, default=DEFAULT_FINETUNE["epochs"], help="finetune: epochs of each of the n + 1 fine-tunes")
    p.add_argument("--max-batches", type=int, default=None, help="finetune: at most this many batches per epoch")
    p.add_argument("--seed", type=int, default=TrainConfig.seed, help="random seed (batch order, augmentation, fine-tuning)")
    p.add_argument("--device", default="auto", help="auto (CUDA when present), cpu, cuda")
    add_train_threads_arg(p)
    p.add_argument("--out", type=Path, default=Path("importance.json"), help="the importance file to write (JSON)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..api import importance

    config = TrainConfig(epochs=args.epochs, batch_size=args.batch_size, lr=args.lr, seed=args.seed,
                         max_batches=args.max_batches, threads=args.threads)
    with ThreadUse(args.threads) as use:
        found = importance(
            model_ref_from_args(args), proxy=args.proxy, data=args.data, out=args.out,
            settings=proxy_settings(args, lr=args.lr),
            config=config, device=args.device,
        )
    print(found.text(lambda text: command_line_text(text, "importance")))
    print(use.line())
    return 0
