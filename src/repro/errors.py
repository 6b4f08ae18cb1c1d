"""The one exception type users see: a paragraph that names the parameter or row and says what to do."""


class ReproError(Exception):
    """A user-facing error: the message names what is wrong (parameter, row, file) and how to fix it."""


class ParameterError(ReproError, ValueError):
    """A parameter is unknown, missing or of the wrong type or value."""


class DataError(ReproError, ValueError):
    """Input data (a row, a column, a file) is not what the stage needs."""


class ModelLoadError(ReproError, OSError):
    """A model could not be found or loaded (local path, hub cache, offline hub)."""
