"""How the ``parquetry`` data source's dataset writes commit beyond a plain append or
overwrite: ``replaceWhere`` and dynamic partition overwrite (selective replaces), the save
modes ``error``/``ignore`` (create), and replayed transactions (``txnAppId``/``txnVersion``).

Used by :class:`~parquetry.spark.writer.DatasetArrowWriter`: the condition is checked on
the driver before any task runs and on each task's rows, the commits run on the driver.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from parquetry.dataset import FileDescription
from parquetry.spark.history import write_operation, write_parameters
from parquetry.spark.options import SourceOptions
from parquetry.spark.types import utc_schema

__all__ = [
    "Condition",
    "check_condition",
    "commit_new",
    "commit_selective",
    "replace_condition",
    "txn_recorded",
    "txn_version",
]


def txn_version(store: Any, uuid: str, txn: tuple[str, int] | None) -> int | None:
    """The version the dataset records for ``txn``'s application (None: none, no dataset)."""
    from parquetry.dataset import Dataset

    if txn is None or not Dataset.exists(store, uuid):
        return None
    return Dataset.open(store, uuid).transactions.get(txn[0])


def txn_recorded(store: Any, uuid: str, txn: tuple[str, int]) -> bool:
    """Whether the dataset already records ``txn`` (a replayed batch)."""
    version = txn_version(store, uuid, txn)
    return version is not None and txn[1] <= version


Condition = tuple[str, Any]  # the option's text, its DNF typed for the DataFrame


def replace_condition(
    options: SourceOptions, arrow_schema: pa.Schema, overwrite: bool
) -> Condition | None:
    """Option ``replaceWhere`` as DNF over the DataFrame's columns, checked before any task."""
    if options.replace_where is None:
        return None
    from parquetry.dataset.predicates import validate_predicates
    from parquetry.errors import InvalidArgument
    from parquetry.spark.condition import typed_condition

    if not overwrite:
        raise InvalidArgument(
            f"option 'replaceWhere' ({options.replace_where!r}) needs mode('overwrite')"
        )
    schema = utc_schema(arrow_schema)
    return options.replace_where, validate_predicates(
        typed_condition(options.replace_where, schema), schema
    )


def check_condition(condition: Condition | None, table: pa.Table, partition_id: int) -> None:
    """Every row a replaceWhere write adds must satisfy the condition (as Delta's)."""
    if condition is None:
        return
    from parquetry.dataset.replace import check_rows

    text, dnf = condition
    check_rows(table, dnf, condition=repr(text), where=f"Spark partition {partition_id}")


def commit_selective(
    options: SourceOptions, condition: Condition | None, store: Any, files: list[FileDescription]
) -> bool:
    """Overwrite only the rows of ``replaceWhere`` or the partitions written (dynamic mode);
    False when the overwrite replaces everything (static mode, or no dataset yet)."""
    from parquetry.dataset import Dataset
    from parquetry.dataset.replace import commit_replace, partitions_predicate
    from parquetry.errors import InvalidArgument

    dynamic = options.partition_overwrite_mode == "dynamic"
    assert options.dataset is not None
    if (condition is None and not dynamic) or not Dataset.exists(store, options.dataset):
        return False
    dataset = Dataset.open(store, options.dataset)
    for f in files:
        if tuple(k for k, _ in f.partition) != dataset.partition_keys:
            raise InvalidArgument(
                f"file {f.key} is partitioned on {[k for k, _ in f.partition]}, but dataset "
                f"{options.dataset!r} is partitioned on {list(dataset.partition_keys)}",
                key=f.key,
            )
    if condition is not None:
        predicates: Any = [[lit.as_tuple() for lit in conj] for conj in condition[1]]
    elif not dataset.partition_keys:
        return False  # one partition: dynamic replaces it whole, as Spark does
    elif not files:
        return True  # no partition written, none replaced: nothing to commit
    else:
        predicates = partitions_predicate(files, dataset.partition_keys)
    commit_replace(
        dataset,
        predicates,
        files,
        operation=write_operation(True),
        parameters=write_parameters(options, True),
    )
    return True


def commit_new(
    options: SourceOptions,
    store: Any,
    files: list[FileDescription],
    schema: pa.Schema,
    txn: tuple[str, int] | None = None,
) -> None:
    """Save modes error / ignore: create the dataset, or fail / do nothing if it exists."""
    from parquetry.dataset import Dataset
    from parquetry.dataset.intents import abandon_files
    from parquetry.errors import AlreadyExists

    assert options.dataset is not None
    try:
        Dataset.commit_files(
            store,
            options.dataset,
            files,
            mode="create",
            schema=schema,
            partition_on=options.partition_on,
            secondary_indices=options.secondary_indices,
            operation="create",
            parameters=write_parameters(options, False),
            txn=txn,
        )
    except AlreadyExists:
        abandon_files(store, options.dataset, files)
        if options.save_mode == "ignore":
            return
        raise AlreadyExists(
            f"dataset {options.dataset!r} already exists in {store.url} (save mode "
            "'error'): nothing was written"
        ) from None
