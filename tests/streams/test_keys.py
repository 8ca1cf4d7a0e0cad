"""retain.streams.keys: the key layout and its character set."""

import pytest

from retain.errors import InvalidStreamName
from retain.streams import RawKey, StreamRef, key_of, stream_key


class TestStreamRef:
    def test_layout(self):
        """A stream lives at emq:{queue}:stream:name."""
        assert StreamRef("codemojex", "activity").key == "emq:{codemojex}:stream:activity"

    def test_prefix(self):
        """The prefix is configurable."""
        assert StreamRef("q", "s", prefix="app.v2").key == "app.v2:{q}:stream:s"

    @pytest.mark.parametrize(("queue", "name"), [
        ("jobs", "orders.eu-1"), ("a", "b/c"), ("Q_1", "x:y"), ("q" * 128, "n" * 128),
    ])
    def test_good(self, queue, name):
        """Documented characters up to 128 long are accepted."""
        assert StreamRef(queue, name).key == stream_key(queue, name)

    @pytest.mark.parametrize(("queue", "name", "message"), [
        ("", "s", "queue must be 1 to 128"),
        ("q", "", "stream name must be 1 to 128"),
        ("q" * 129, "s", "queue must be 1 to 128"),
        ("a{b", "s", "contains '{'"),
        ("q", "a}b", "contains '}'"),
        ("q", "a b", "contains ' '"),
        ("q\n", "s", r"contains '\\n'"),
        ("q", "s\x00", r"contains '\\x00'"),
        ("q", "s*", r"contains '\*'"),
        ("q/x", "s", "contains '/'"),
        ("q", "ünïcode", "contains 'ü'"),
        (None, "s", "queue must be a string"),
        ("q", 5, "stream name must be a string"),
    ])
    def test_bad(self, queue, name, message):
        """Names outside the set are refused, naming the character."""
        with pytest.raises(InvalidStreamName, match=message):
            StreamRef(queue, name)

    def test_bad_prefix(self):
        """A prefix is held to the queue's character set."""
        with pytest.raises(InvalidStreamName, match="prefix"):
            StreamRef("q", "s", prefix="a{b}")


class TestRawKey:
    def test_any_printable_key(self):
        """A raw key is taken literally."""
        assert RawKey("legacy:feed{x}").key == "legacy:feed{x}"

    @pytest.mark.parametrize(("key", "message"), [
        ("", "1 to 1024"), ("k" * 1025, "1 to 1024"), ("a b", "whitespace"), ("a\x07", "control"), (b"k", "string"),
    ])
    def test_bad(self, key, message):
        """Empty, over-long, whitespace and control-character keys are refused."""
        with pytest.raises(InvalidStreamName, match=message):
            RawKey(key)


class TestKeyOf:
    @pytest.mark.parametrize("stream", [StreamRef("q", "s"), RawKey("legacy:feed")])
    def test_the_key(self, stream):
        """A StreamRef or RawKey gives its Redis key."""
        assert key_of(stream) == stream.key

    @pytest.mark.parametrize("stream", ["emq:{q}:stream:s", None, ("q", "s")])
    def test_anything_else_is_refused(self, stream):
        """Anything else is refused before any I/O, saying what arrived."""
        with pytest.raises(InvalidStreamName, match=r"stream must be a StreamRef or RawKey \(got "):
            key_of(stream)
