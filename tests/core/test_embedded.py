import psutil

from core.embedded import EmbeddedRedis


def test_a_redis_whose_pid_file_vanished_is_still_found_and_stopped(tmp_path):
    redis = EmbeddedRedis(tmp_path / "redis")
    assert redis.start() is True
    pid = redis.pid()
    assert redis.start() is False  # a second start reuses the running server
    redis.pidfile.unlink()
    assert redis.pid() == pid  # found by its socket path instead
    redis.stop()
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    assert not redis.is_running()
