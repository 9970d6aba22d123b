"""One exception root for streambayes, with specific subclasses (STYLE habit 14)."""


class StreambayesError(Exception):
    """Root of every error streambayes raises on purpose."""


class FeatureError(StreambayesError, ValueError):
    """An event field cannot be turned into features (names the field and the value's type)."""


class LimitError(FeatureError):
    """An event (or a merge) would push a model past one of its bounds (``max_classes``,
    ``max_fields``, ``max_values``): refused before any count changes. ``bound`` names the
    bound, ``limit`` its value and ``offending`` the label, field or value that did not fit.
    The stream runtime dead-letters the event with reason ``limit``."""

    def __init__(self, bound: str, limit: int, offending: object, message: str) -> None:
        super().__init__(message)
        self.bound, self.limit, self.offending = bound, limit, offending


class ModelError(StreambayesError, ValueError):
    """A learner was misused: unknown model name, incompatible merge, bad parameter or state."""


class SnapshotError(StreambayesError):
    """A snapshot cannot be written, found or read: bad state, unknown id, unsupported version."""


class CorruptSnapshot(SnapshotError):
    """A snapshot's bytes fail verification: bad magic, truncated, checksum mismatch, bad arrays."""


class UsageError(StreambayesError):
    """The command line or its inputs are wrong: missing file, unknown format or model, bad flag.

    The CLI prints the message on one line and exits with status 2.
    """


class DataUnavailable(StreambayesError):
    """A data set cannot be found locally nor fetched (offline, no network, bad archive)."""


class NetworkError(StreambayesError, ValueError):
    """A Bayesian network is malformed (cycle, unknown variable or state, bad BIF text at a line),
    or a query cannot be answered (evidence of probability zero)."""


class NetworkInputError(NetworkError, FeatureError):
    """An event does not fit a Bayesian network (unknown variable or state, the class variable
    given as a feature, evidence of probability zero): a :class:`NetworkError` that the stream
    runtime dead-letters like any :class:`FeatureError`."""


class BrokerError(StreambayesError):
    """Kafka cannot be used: the client is missing, a topic or partition does not exist, or a
    message could not be delivered."""


class NetworkUnavailable(BrokerError):
    """The broker stayed unreachable until the caller gave up or was asked to stop."""
