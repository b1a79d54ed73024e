"""The job rq's workers run in tests/test_job_queues.py: counts its own runs in a hash."""

import os

import redis


def record(i):
    r = redis.Redis(host="127.0.0.1", port=int(os.environ["DARNER_TEST_PORT"]))
    r.hincrby("rq-runs", str(i), 1)
    return i * 2
