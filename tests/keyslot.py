"""Redis Cluster's key slot (CRC16-XMODEM of the key or its {hashtag}, modulo 16384), which
darner also uses to pick a key's shard: slot modulo the thread count. Tests use it to put
keys on the same or on different shards of the 2-thread session server."""

from __future__ import annotations


def crc16(data: bytes) -> int:
    crc = 0
    for b in data:
        crc ^= b << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else crc << 1
            crc &= 0xFFFF
    return crc


def key_slot(key) -> int:
    k = key.encode() if isinstance(key, str) else bytes(key)
    s = k.find(b"{")
    if s >= 0:
        e = k.find(b"}", s + 1)
        if e > s + 1:
            k = k[s + 1:e]
    return crc16(k) % 16384


def shard(key, shards: int = 2) -> int:
    return key_slot(key) % shards


assert crc16(b"123456789") == 0x31C3
