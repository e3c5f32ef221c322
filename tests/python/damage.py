"""Damage on disk for the Python tests: bytes flipped in a store's files."""

import os


def flip_table_files(stores, min_bytes=20000, count=64):
    """XORs `count` bytes in the middle of every table or blob file (.sst,
    .blob) of more than `min_bytes` in each store directory of `stores`;
    returns how many files it damaged."""
    flipped = 0
    for store in stores:
        for name in os.listdir(store):
            if not name.endswith((".sst", ".blob")):
                continue
            f = os.path.join(store, name)
            with open(f, "rb") as fh:
                data = bytearray(fh.read())
            if len(data) <= min_bytes:
                continue
            for i in range(len(data) // 2, len(data) // 2 + count):
                data[i] ^= 0x5A
            with open(f, "wb") as fh:
                fh.write(bytes(data))
            flipped += 1
    return flipped
