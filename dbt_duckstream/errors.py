"""Error types that carry what a user needs to fix the problem."""


class DuckstreamError(Exception):
    """Base class of every error raised by dbt-duckstream."""


class UnsupportedSQLError(DuckstreamError):
    """The model uses SQL that cannot be maintained incrementally.

    `construct` names the SQL feature (e.g. ``LEFT JOIN``, ``window function``) so that a
    user can find it in the model; `detail` says why or what to do instead.
    """

    def __init__(self, construct: str, detail: str = "") -> None:
        self.construct = construct
        self.detail = detail
        message = f"unsupported SQL for incremental maintenance: {construct}"
        super().__init__(f"{message} ({detail})" if detail else message)


class ConfigurationError(DuckstreamError):
    """A setting or an input (catalog, table, option) is wrong; the message says which."""


class ConcurrentRunError(DuckstreamError):
    """Another run of the same model committed first; running again applies what is left."""


class ContendedCatalogError(DuckstreamError):
    """A unit of work lost its commit to other writers of a shared catalog on every attempt.

    The message names the catalog (alias and kind) and what to do: the catalog to choose for
    concurrent writers, and the setting that allows more attempts. dbt reports it as a
    database error, not as a problem in the model's SQL.
    """

    def __init__(self, message: str, catalog: str = "", kind: str = "") -> None:
        self.catalog = catalog
        self.kind = kind
        super().__init__(message)
