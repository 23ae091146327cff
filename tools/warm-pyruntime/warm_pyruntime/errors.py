"""The one failure type of the runtime: a kind and a message, raised inside and turned into a gRPC
status once, in server.py. Anything else that escapes a handler is a bug of this program and is
answered INTERNAL."""

NOT_FOUND = "NOT_FOUND"
INVALID_ARGUMENT = "INVALID_ARGUMENT"
RESOURCE_EXHAUSTED = "RESOURCE_EXHAUSTED"
DEADLINE_EXCEEDED = "DEADLINE_EXCEEDED"
UNAVAILABLE = "UNAVAILABLE"
CANCELLED = "CANCELLED"
INTERNAL = "INTERNAL"


class Failure(Exception):
    """A request's failure: kind is one of the constants above, message says what and why, naming
    the model, path or key concerned. Immutable once raised; safe to share between threads (a
    load's failure is answered to every caller waiting for that load)."""

    def __init__(self, kind, message):
        super().__init__(message)
        self.kind = kind
        self.message = message

    def __repr__(self):
        return f"Failure({self.kind}, {self.message!r})"


def invalid(message):
    return Failure(INVALID_ARGUMENT, message)
