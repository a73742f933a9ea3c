"""The control process's log writer (`armd.logs.write_in_background`): records go out in order,
from a thread of their own, and a stream nobody reads holds up that thread only."""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from armd.logs import FORMAT, WRITER_THREAD, write_in_background

PIPE_CAPACITY = 65536  # Linux's default: more than this waits for the reader


@dataclass
class PipeLog:
    """A logger of its own (not the root: pytest's handlers live there) writing to a pipe,
    and a thread reading the pipe until its write end closes."""

    logger: logging.Logger
    stream: TextIO
    read_fd: int
    received: bytearray = field(default_factory=bytearray)
    reader: threading.Thread | None = None

    def start_reading(self) -> None:
        self.reader = threading.Thread(target=self._read)
        self.reader.start()

    def _read(self) -> None:
        while chunk := os.read(self.read_fd, 65536):
            self.received += chunk

    def text(self) -> str:
        """Everything written, once the write end is closed."""
        self.stream.close()
        if self.reader is None:
            self.start_reading()
        assert self.reader is not None
        self.reader.join(timeout=30.0)
        return self.received.decode()


@contextmanager
def pipe_log() -> Iterator[PipeLog]:
    read_fd, write_fd = os.pipe()
    stream = os.fdopen(write_fd, "w", encoding="utf-8")
    logger = logging.getLogger(f"test-logs-{read_fd}")
    logger.propagate = False
    logger.setLevel(logging.INFO)
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter(FORMAT))
    logger.addHandler(handler)
    try:
        yield PipeLog(logger, stream, read_fd)
    finally:
        for each in logger.handlers[:]:
            logger.removeHandler(each)
        stream.close()
        os.close(read_fd)


def test_records_are_written_in_order_by_a_thread_of_their_own() -> None:
    with pipe_log() as log:
        stop = write_in_background(log.logger)
        writers = [t for t in threading.enumerate() if t.name == WRITER_THREAD]
        assert len(writers) == 1
        comm = Path(f"/proc/self/task/{writers[0].native_id}/comm").read_text().strip()
        assert comm == WRITER_THREAD  # as ps, top and /proc show it
        log.logger.info("first %d", 1)
        log.logger.debug("not at INFO")
        try:
            raise ValueError("boom")
        except ValueError:
            log.logger.exception("second")
        stop()  # writes what is queued, ends the thread
        assert not writers[0].is_alive()
        text = log.text()
    first, second = text.index(": first 1\n"), text.index(": second\nTraceback")
    assert " INFO test-logs-" in text[:first]
    assert first < second
    assert "ValueError: boom" in text[second:]
    assert "not at INFO" not in text


def test_a_stream_nobody_reads_never_holds_up_the_thread_that_logs() -> None:
    """Four pipe capacities of log lines while nobody reads: every call returns (the writer
    thread waits on the pipe, the caller never); then everything arrives, in order."""
    line = "x" * 200
    count = 4 * PIPE_CAPACITY // len(line)
    with pipe_log() as log:
        stop = write_in_background(log.logger)

        def log_them() -> None:
            for i in range(count):
                log.logger.info("%06d %s", i, line)

        caller = threading.Thread(target=log_them)
        caller.start()
        caller.join(timeout=30.0)
        assert not caller.is_alive(), "logging waited for the pipe's reader"
        log.start_reading()
        stop()
        text = log.text()
    numbers = [int(row.split(": ", 1)[1][:6]) for row in text.splitlines()]
    assert numbers == list(range(count))
