"""The wgmma flash forward (kernels/cuda/flash_wgmma.cu) against PyTorch: the
checks of flash_vs_torch.py (same reference, same pass criterion, same
flash_dump) on shapes whose grids are full enough (B·H·ceil(T/128) ≥ 2 blocks
per SM on 132-SM H100/H200) that lmk_flash_attn_fwd hands them to the wgmma
kernel: every head dim (16, 32 on the d 64 tiles, 80 on the d 128 tiles), fp16
and bf16, causal and not, T from 1 to 4097 (every tail length class of the
128-key tiles). The backward outputs are
checked too (they consume the forward's O and lse).
--quick: d 64 only, four shapes (for a second variant in the same call).
usage: ffwd_check.py FLASH_DUMP [--seed N] [--quick] [--out FILE]"""
import os, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import flash_vs_torch as fv  # noqa: E402

# (B, H, T): at least 264 query blocks of 128 each
SHAPES = [(2, 140, 1), (3, 100, 17), (2, 150, 100), (2, 70, 129), (3, 12, 1000),
          (1, 16, 2049), (1, 8, 4097)]


def cases(quick):
    out = []
    for dt in ("bf16", "fp16"):
        for d in ((64,) if quick else (16, 32, 64, 80, 128)):
            for causal in (0, 1):
                for B, H, T in (SHAPES[1::2] if quick else SHAPES):
                    out.append(f"{dt}:{B}:{H}:{T}:{d}:{causal}")
    return out


if __name__ == "__main__":
    fv.cases = cases
    sys.exit(fv.main())
